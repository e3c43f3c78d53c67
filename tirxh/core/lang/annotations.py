"""``T.iket``: profiling annotations for intra-kernel event timelines.

``with T.iket.range("load"): ...`` records when a warp enters and leaves a region;
``T.iket.mark("tile_done")`` records one instant. In a normal build they emit **no instruction**:
they are `ir.Annotation` statements that the PTX emitter skips, so an annotated kernel is the same
program as an unannotated one. A profiling build (the iket plugin, ``tirxh profile --iket``)
rewrites each annotation into a few instructions that store ``%globaltimer``, ``%clock64``,
``%smid`` and ``%warpid`` into a hidden trace buffer; see plugins/iket and docs/PROFILING.md.

Annotations are meant to be warp-uniform (every lane of the warp passes them together, as in warp
roles and loops); the profiling build records one event per warp, written by the lowest active lane.
"""

from __future__ import annotations

import re
from contextlib import contextmanager

from .. import ir
from . import trace as tr

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:\-]{0,63}$")


def _check_name(name, what: str) -> str:
    t = tr.current()
    if not isinstance(name, str) or not _NAME.match(name):
        raise t.error(f"{what} expects a label of 1-64 characters (letters, digits, '_', '.', "
                      f"':', '-'; starting with a letter or '_'), got {name!r}")
    return name


class _Iket:
    """The ``T.iket`` namespace (an object so that ``T.iket.range`` reads like the issue)."""

    @contextmanager
    def range(self, name: str):
        """Mark a region: an ``ir.Annotation("begin")`` before the body, ``"end"`` after it.

        Emits no instruction in a normal build. The end annotation carries the location of the
        ``with`` line, so both sides of a range map to the same Python line.
        """
        t = tr.current()
        _check_name(name, "T.iket.range")
        loc = tr.user_loc()
        depth = len(t.blocks)
        t.append(ir.Annotation("begin", name, loc))
        yield
        if len(t.blocks) != depth:  # pragma: no cover - the block context managers restore it
            raise t.error(f"T.iket.range({name!r}) closed inside a different block", loc)
        t.append(ir.Annotation("end", name, loc))

    def mark(self, name: str) -> None:
        """Mark one instant: an ``ir.Annotation("mark")``; no instruction in a normal build."""
        t = tr.current()
        _check_name(name, "T.iket.mark")
        t.append(ir.Annotation("mark", name, tr.user_loc()))

    def __repr__(self) -> str:
        return "T.iket"


iket = _Iket()
