"""Lanes of a warp as separate threads once the warp diverged (issue 13 class 4).

numsim records one event per warp instruction, so racecheck used to treat a warp as one thread.
Under independent thread scheduling the lanes of a warp are threads of their own: after the warp
diverges (a branch taken by some lanes only), each side runs on without waiting for the other,
and reconverging at the end of the branch orders nothing. Only a join that synchronizes memory
brings them back together: ``bar.warp.sync`` over their lanes (PTX ISA: it "guarantees memory
ordering among threads participating in barrier"), or a CTA barrier they all pass.

This pre-pass splits every warp's lanes into **classes**: lanes that have executed exactly the
same instructions since the warp's last join. numsim records where a warp's lanes took different
paths (`events.Divergence`: a branch, a loop some lanes leave early); an instruction executed by
part of a class splits it too. Lanes of one class run in lockstep and stay one
thread of the analysis (the converged warp is one thread, as before); a class splits when an
instruction is executed by only part of it, and classes merge at a join. Each class is a
racecheck thread: the warp's own thread id for the class containing the warp's first lanes, fresh
ids (after every warp's) for the ones that split off. A split-off class starts from its parent's
clock (`forks`); a join gives the merged class the join of their clocks (`joins`).

Not a split: an instruction whose guard predicate is off in some lanes (predication, not
divergence), engine-side events (async completions), and memory events of ``.aligned``
instructions (they name the lanes whose addresses were used, not the lanes that executed; the
instruction's `WarpSync` event has those).
"""

from __future__ import annotations

from tirxh_numsim import events as ev

from .model import warp_mask


class LaneClasses:
    """The classes of every warp along numsim's trace (see the module docstring).

    parts[i]: ``[(thread, lanes)]`` for event `i` executed by a warp (the classes executing it and
    their lanes); forks[i]: ``[(parent, child)]`` to apply before event `i`; joins[i]:
    ``[(into, [merged threads])]`` to apply after it; warp_of[thread]: the warp's thread id;
    split_at[thread]: the event index at which a class split off; n: warp-like threads in all.
    """

    def __init__(self, trace, widx: dict):
        self.parts: dict = {}
        self.forks: dict = {}
        self.joins: dict = {}
        self.split_at: dict = {}
        self.warp_of = list(range(len(widx)))
        self.n = len(widx)
        block = tuple(trace.block)
        by_warp: dict = {}
        for i, e in enumerate(trace.events):
            if (e.cta, e.warp) in widx:
                by_warp.setdefault((e.cta, e.warp), []).append(i)
        for key, idx in by_warp.items():
            self._warp(trace.events, idx, widx[key], warp_mask(block, key[1]))

    def _new(self, parent: int, owned: dict) -> int:
        """A thread id for a class splitting off `parent`: one `parent`'s lineage absorbed (its
        final clock is in `parent`'s, so reusing it orders nothing wrongly), else a fresh one."""
        if owned[parent]:
            return owned[parent].pop()
        t = self.n
        self.n += 1
        self.warp_of.append(self.warp_of[parent])
        return t

    def _warp(self, events, idx: list, primary: int, live: int) -> None:
        classes = {primary: live}  # thread -> lanes
        owned = {primary: set()}  # thread -> dead thread ids its clock fully knows
        for i in idx:
            e = events[i]
            if isinstance(e, ev.Divergence):  # numsim saw the lanes take different paths
                self._split(classes, owned, e.lanes & live, e.other & live, i)
                continue
            if _engine(e):
                continue
            m = e.lanes & live
            if not m:
                continue
            if m != live and _splits(e):  # (all live lanes: nothing to split)
                self._split(classes, owned, m, live & ~m, i)
            self.parts[i] = [(t, c & m) for t, c in sorted(classes.items()) if c & m]
            joined = _join_lanes(e, m)
            if joined:
                members = sorted(t for t, c in classes.items() if c & joined)
                if len(members) > 1:
                    into, rest = members[0], members[1:]
                    for t in rest:
                        classes[into] |= classes.pop(t)
                        owned[into] |= owned.pop(t) | {t}
                    self.joins.setdefault(i, []).append((into, rest))

    def _split(self, classes: dict, owned: dict, here: int, there: int, i: int) -> None:
        """Split every class with lanes in both `here` and `there` (the `here` part keeps the
        thread, the rest forks before event `i`)."""
        for t, c in list(classes.items()):
            if c & here and c & there:
                child = self._new(t, owned)
                classes[t], classes[child] = c & here, c & ~here
                owned[child] = set()
                self.forks.setdefault(i, []).append((t, child))
                self.split_at[child] = i

    def classes_of_warp(self, w: int) -> list:
        return [t for t in range(self.n) if self.warp_of[t] == w]


def _engine(e) -> bool:
    """Events an asynchronous engine performs (their thread is the async op's)."""
    if isinstance(e, ev.MemAccess):
        return e.async_id is not None or e.proxy == ev.ASYNC
    if isinstance(e, ev.MBarrierEvent):
        return e.by_async is not None
    if isinstance(e, ev.AsyncOp):
        return e.stage == "complete"
    return False


def _splits(e) -> bool:
    """Whether a partial lane mask on `e` means the warp diverged (module docstring)."""
    instr = e.instr
    if instr is None or getattr(instr, "guard", None) is not None:
        return False
    if isinstance(e, ev.MemAccess) and ".aligned" in (getattr(instr, "spelling", "") or ""):
        return False
    return True


def _join_lanes(e, m: int) -> int:
    """The lanes a join event brings back together (0: not a join)."""
    if isinstance(e, ev.WarpSync) and e.op == "bar.warp.sync":
        return m & e.membermask
    if isinstance(e, ev.BarrierEvent) and e.op == "sync" and e.released:
        return m
    if isinstance(e, ev.ClusterBarrierEvent) and e.op == "wait":
        return m
    return 0
