"""Thin helpers for warp-specialized pipelines: stage/phase cursors and warp roles.

Each helper's docstring lists the instructions it emits; nothing else is hidden.
"""

from __future__ import annotations

from contextlib import contextmanager

from .. import ir
from ..types import dtype

from . import trace as tr
from .control import if_


class PipelineCursor:
    """A (stage, phase) cursor over a ring of `stages` buffers.

    Creation emits ``mov.u32 stage, 0`` and ``mov.u32 phase, 0`` (or the given start values).
    `advance()` emits::

        add.u32     stage, stage, 1
        setp.eq.u32 p, stage, <stages>
        @p mov.u32  stage, 0
        @p xor.b32  phase, phase, 1
    """

    def __init__(self, stages: int, stage=0, phase=0):
        self.stages = stages
        t = tr.current()
        self.stage = t.new_reg("u32", "stage")
        self.phase = t.new_reg("u32", "phase")
        self.stage.set(stage)
        self.phase.set(phase)

    def advance(self) -> None:
        tr.emit("add.u32", self.stage, self.stage, 1)
        wrap = tr.emit("setp.eq.u32", self.stage, self.stages)
        tr.emit("mov.u32", self.stage, 0, pred=wrap)
        tr.emit("xor.b32", self.phase, self.phase, 1, pred=wrap)


def pipeline(stages: int, stage=0, phase=0) -> PipelineCursor:
    """A stage/phase cursor (see `PipelineCursor` for the instructions)."""
    return PipelineCursor(stages, stage, phase)


def warpgroup_index():
    """``mov.u32 t, %tid.x`` + ``shr.u32 wg, t, 7``: the warpgroup (128 threads) of the thread."""
    t = tr.emit("mov.u32", _sreg("tid.x"))
    return tr.emit("shr.u32", t, 7)


def warp_index():
    """``mov.u32 t, %tid.x`` + ``shr.u32 w, t, 5``: the warp of the thread within its CTA."""
    t = tr.emit("mov.u32", _sreg("tid.x"))
    return tr.emit("shr.u32", t, 5)


def _sreg(name):
    return ir.SReg(name, dtype("u32"))


@contextmanager
def role(cond, inc: "int | None" = None, dec: "int | None" = None):
    """A warp role: a warp-uniform branch, optionally re-budgeting registers.

    Emits a uniform `if_` (``@!p bra.uni``) on `cond` and, first inside it,
    ``setmaxnreg.inc.sync.aligned.u32 inc`` or ``setmaxnreg.dec.sync.aligned.u32 dec``. setmaxnreg
    takes effect only with a register cap at entry (``.maxntid`` + ``.minnctapersm 1``): pass
    ``min_blocks=1`` to `T.kernel`.
    """
    if inc is not None and dec is not None:
        raise tr.current().error("T.role: give inc= or dec=, not both")
    with if_(cond, uniform=True):
        if inc is not None:
            tr.emit("setmaxnreg.inc.sync.aligned.u32", inc)
        if dec is not None:
            tr.emit("setmaxnreg.dec.sync.aligned.u32", dec)
        yield
