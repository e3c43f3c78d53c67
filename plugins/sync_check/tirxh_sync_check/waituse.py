"""Which mbarrier ``try_wait``/``test_wait`` instructions are waits (issue 13 class 2).

A ``try_wait`` only tests the barrier: it orders nothing unless the program's control flow depends
on its result. numsim performs asynchronous copies at issue, so a single probe whose result is
thrown away succeeds in numsim's run and looked like a completed wait; on a GPU the copy may still
be in flight and the later access is unordered. The IR tells the uses apart: the predicate a
``try_wait`` defines (and every register computed from it) either

- ends a loop (``T.break_`` on it, as `MBarrierRef.wait` emits): a **wait**, the warp cannot go on
  until it holds;
- decides a branch or guards an instruction only (``T.if_(bar.try_wait(p))``): a **probe**, the
  path taken depends on the outcome, and the other outcome's path is not in numsim's trace;
- decides nothing: **ignored**, not a wait at all (its result may still be stored as data).

`classify` returns the set of probes and of ignored ones (by instruction identity); everything
else is a wait.
"""

from __future__ import annotations

from tirxh.api import ir

WAIT_BINDINGS = ("mbarrier.try_wait", "mbarrier.test_wait")


def _wait_instrs(kir) -> list:
    return [i for i in kir.instructions()
            if getattr(i.binding, "name", None) in WAIT_BINDINGS]


def classify(kir) -> "tuple[set, set]":
    """(ids of probe waits, ids of ignored waits) of `kir`'s try_wait/test_wait instructions."""
    if kir is None:
        return set(), set()
    waits = _wait_instrs(kir)
    if not waits:
        return set(), set()
    origin: dict = {}  # id(reg) -> ids of the waits it derives from
    for w in waits:
        d = w.operands[0]
        if isinstance(d, ir.Reg):
            origin.setdefault(id(d), set()).add(id(w))
    insts = list(kir.instructions())
    changed = True
    while changed:  # registers computed from a wait's result (loops: iterate to a fixed point)
        changed = False
        for i in insts:
            src = set()
            for r in i.uses():
                src |= origin.get(id(r), set())
            if not src:
                continue
            for r in i.defs():
                cur = origin.setdefault(id(r), set())
                if not src <= cur:
                    cur |= src
                    changed = True
    loops, branches = set(), set()
    _walk(kir.body, origin, loops, branches)
    ids = {id(w) for w in waits}
    return (branches - loops) & ids, ids - loops - branches


def _walk(block, origin, loops: set, branches: set) -> None:
    for st in block.stmts:
        if isinstance(st, ir.Instr):
            if st.guard is not None:
                branches |= origin.get(id(st.guard[0]), set())
        elif isinstance(st, ir.If):
            branches |= origin.get(id(st.cond), set())
            _walk(st.then, origin, loops, branches)
            if st.orelse is not None:
                _walk(st.orelse, origin, loops, branches)
        elif isinstance(st, (ir.For, ir.Loop)):
            _walk(st.body, origin, loops, branches)
        elif isinstance(st, ir.Break) and st.cond is not None:
            loops |= origin.get(id(st.cond), set())
