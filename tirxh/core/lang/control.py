"""Structured device control flow: ``if_``/``else_``, ``range``, ``while_``, ``loop``, ``break_``.

These are the only language constructs that are not one PTX instruction: each is a structured IR
node that the emitter lowers to predicates, labels and ``bra`` (documented per construct below) and
that numsim runs with active masks. Python ``if``/``for`` in a kernel body run at trace time
(specialization and unrolling).
"""

from __future__ import annotations

from contextlib import contextmanager

from .. import ir
from ..types import dtype as as_dtype
from . import trace as tr


def _cond(value, what: str):
    t = tr.current()
    if isinstance(value, tr.Not):
        return value.p, True
    if isinstance(value, ir.Reg) and value.dtype.kind == "pred":
        return value, False
    raise t.error(f"{what} expects a predicate (e.g. `i < n`), got {value!r}")


@contextmanager
def if_(cond, uniform: bool = False):
    """Device branch. Lowers to ``@!p bra ELSE; ...; bra END; ELSE: ...; END:``.

    `uniform=True` promises every thread of the warp takes the same side (``bra.uni``).
    """
    t = tr.current()
    reg, neg = _cond(cond, "T.if_")
    node = ir.If(reg, neg, ir.Block(), None, tr.user_loc(), uniform)
    t.append(node)
    with t.open_block(node.then):
        yield
    t.last_if = node


@contextmanager
def else_():
    """The else side of the `if_` that immediately precedes it in the same block."""
    t = tr.current()
    node = t.last_if
    if node is None or not t.block.stmts or t.block.stmts[-1] is not node:
        raise t.error("T.else_() must directly follow a `with T.if_(...)` block")
    if node.orelse is not None:
        raise t.error("this T.if_ already has an else block")
    node.orelse = ir.Block()
    with t.open_block(node.orelse):
        yield
    t.last_if = None


@contextmanager
def range_(start, stop=None, step=1, dtype=None, unroll: "int | None" = None):
    """Counted device loop; yields the induction register.

    ``T.range(n)`` / ``T.range(start, stop, step)``. The induction variable has the type of the
    first register bound (default u32). Lowers to ``mov i, start; HEAD: setp.ge p, i, stop; @p bra
    END; body; add i, i, step; bra HEAD; END:``. ``unroll=1`` adds ``.pragma "nounroll"`` (PTX has
    no other unroll pragma; unroll by N with a Python loop in the body instead).
    """
    t = tr.current()
    if unroll not in (None, 1):
        raise t.error(f"T.range(unroll={unroll!r}): only unroll=1 (.pragma \"nounroll\") exists "
                      "in PTX; unroll by N at trace time with a Python loop in the body")
    if stop is None:
        start, stop = 0, start
    if dtype is None:
        regs = [x for x in (start, stop, step) if isinstance(x, ir.Reg)]
        dtype = regs[0].dtype if regs else as_dtype("u32")
    dt = as_dtype(dtype)
    var = t.new_reg(dt, "i")
    node = ir.For(var, tr.coerce(start, dt), tr.coerce(stop, dt), tr.coerce(step, dt),
                  ir.Block(), tr.user_loc(), unroll)
    t.append(node)
    with t.open_block(node.body):
        yield var


@contextmanager
def loop():
    """An unbounded device loop, left with `break_`. Lowers to ``HEAD: body; bra HEAD; END:``."""
    t = tr.current()
    node = ir.Loop(ir.Block(), tr.user_loc())
    t.append(node)
    with t.open_block(node.body):
        yield


@contextmanager
def while_(cond_fn):
    """``while cond_fn():`` on the device. `cond_fn` is traced at the loop head each iteration.

    Lowers to ``HEAD: <cond instructions>; @!p bra END; body; bra HEAD; END:``.
    """
    t = tr.current()
    node = ir.Loop(ir.Block(), tr.user_loc())
    t.append(node)
    with t.open_block(node.body):
        reg, neg = _cond(cond_fn(), "T.while_ condition")
        t.append(ir.Break(reg, not neg, tr.user_loc()))
        yield


def break_(cond=None) -> None:
    """Leave the innermost device loop (when `cond` holds, if given): ``@p bra END``."""
    t = tr.current()
    if not any(isinstance(s, (ir.For, ir.Loop)) for s in _open_nodes(t)):
        raise t.error("T.break_() outside a device loop")
    if cond is None:
        t.append(ir.Break(None, False, tr.user_loc()))
    else:
        reg, neg = _cond(cond, "T.break_")
        t.append(ir.Break(reg, neg, tr.user_loc()))


def _open_nodes(t: tr.Trace):
    """The statements that own the currently open blocks (outermost first)."""
    nodes = []
    for outer, inner in zip(t.blocks, t.blocks[1:]):
        for s in reversed(outer.stmts):
            if (isinstance(s, ir.If) and (s.then is inner or s.orelse is inner)) or \
                    (isinstance(s, (ir.For, ir.Loop)) and s.body is inner):
                nodes.append(s)
                break
    return nodes
