"""The scheduler: which group of warps runs next, CTAs admitted as they are needed, deadlocks.

CTAs are admitted in units (one cluster, or a batch of CTAs when the kernel has no clusters and
is not traced, else one CTA) in launch order. Every admitted group of warps runs until it blocks (a `Wait`),
stops in a spin (`SpinWait`), splits or finishes; then the next one runs, round robin (a sweep).
When a sweep makes no progress:

1. groups that wait *softly* (a ``test_wait`` poll, a spin loop) are **probed**: each runs once
   more; if that changed anything (memory, mbarriers, where a group is), scheduling continues;
2. otherwise, if a soft waiter could be released by a CTA not started yet (a spin on global
   memory: last-block reductions, split-K turnstiles, grid-wide barriers) the next unit is
   admitted, as a GPU would schedule more CTAs;
3. otherwise the kernel is **deadlocked**: `Deadlock` names every admitted CTA's warps and
   where each one is stuck (and how many CTAs never started).

Warps that reach the same point after waiting are merged back into one group (`Warps.merge`), so
warp-specialized kernels keep running vectorized over their warps, traced or not (a traced group
records one event per warp: `Warps.event`); only `per_warp` runs keep every warp alone.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from .interp import DONE, Interpreter
from .machine import SPLIT, WARP, Deadlock, MBar, SpinWait, warps_text

MAX_REPORT_LINES = 40


class Scheduler:
    """Runs one launch: `units` (lists of CTAs) are admitted in order through `make_unit`
    (unit -> (Group, [Warps])); `merge` joins groups that meet (off for `per_warp` runs, where a
    group is one warp)."""

    def __init__(self, machine, units: list, make_unit, *, merge: bool):
        self.m = machine
        self.interp = Interpreter(machine, machine.code)
        self.pending = deque(units)
        self.make_unit = make_unit  # unit -> (Group, [Warps])
        self.groups: list = []
        self.admitted: list = []  # Group objects, in admission order
        self.merge_on = merge

    # -- the loop ----------------------------------------------------------------------------------
    def run(self) -> None:
        while True:
            if not self.groups:
                if not self.pending:
                    return
                self._admit()
                continue
            if self._sweep():
                continue
            if self._probe():
                continue
            if self.pending and any(g.wait is not None and g.wait.soft for g in self.groups):
                self.note_forced_admission()
                self._admit()
                continue
            raise self._deadlock()

    def note_forced_admission(self) -> None:
        """Every admitted CTA is stuck and one spins on memory: the next unit starts only
        because numsim admits it early. Record how many CTAs must then be resident together
        (`tirxh_numsim.residency`): every live CTA, plus one to all of the next unit."""
        live = set()
        for g in self.groups:
            on = g.alive & g.valid
            live.update((id(g.group), int(c)) for c in np.unique(g.cta_local[on]))
        need = self.m.residency
        cluster = int(np.prod(self.m.cluster)) > 1  # a cluster starts whole or not at all
        need.low = max(need.low, len(live) + (len(self.pending[0]) if cluster else 1))
        need.high = max(need.high, len(live) + len(self.pending[0]))

    def _admit(self) -> None:
        group, warps = self.make_unit(self.pending.popleft())
        group.key = len(self.admitted)
        self.admitted.append(group)
        self.groups.extend(warps)

    def _ready(self, g) -> bool:
        wt = g.wait
        if wt is None:
            return True
        if isinstance(wt, SpinWait):
            return wt.ready_in(self.m)
        return wt.ready()

    def _resume(self, g) -> None:
        wt, g.wait = g.wait, None
        if isinstance(wt, SpinWait):
            fr = g.frames[-1]  # the spinning loop's frame: its iteration starts now
            fr[1] = self.m.wclock + MBar.changes
            fr[2] = g.rclock
        elif wt is not None and wt.resume is not None:
            wt.resume()

    def _sweep(self) -> bool:
        """Run every group that can run, once each (in order); True if any ran."""
        progressed = False
        i = 0
        while i < len(self.groups):
            g = self.groups[i]
            if not self._ready(g):
                i += 1
                continue
            self._resume(g)
            if self.merge_on and len(self.groups) > 1:
                g = self._gather(g)
                i = self.groups.index(g)
            i = self._step(i, g)
            progressed = True
        return progressed

    def _step(self, i: int, g) -> int:
        """Run group `g` (at index i) and put what it became in its place; returns the index of
        the next group to look at."""
        res = self.interp.run(g)
        g.split_at = None
        if res is DONE:
            self.m.finish_warps(g)
            del self.groups[i]
            return i
        if res is SPLIT:
            if g.nwarps == 1:  # pragma: no cover - a semantic function's contract
                raise AssertionError(f"{self.m.current_instr.spelling}: SPLIT for one warp")
            parts = g.split([[j] for j in range(g.nwarps)])
            self.m.splits += 1
            for p in parts:
                p.split_at = g.pc
            self.groups[i:i + 1] = parts
            return i
        g.wait = res
        if isinstance(res, SpinWait) and g.nwarps > 1:
            live = g.warps_of(g.mask)
            if not live.all():  # warps whose lanes all left the loop go on
                spin, free = g.split([np.flatnonzero(live).tolist(),
                                      np.flatnonzero(~live).tolist()])
                self.m.splits += 1
                spin.wait = res
                self.groups[i:i + 1] = [spin, free]
                return i + 1
        return i + 1

    def _gather(self, g):
        """Merge the groups that are at `g`'s point and can run now into `g` (resuming their
        waits); returns the group to run."""
        if g.split_at == g.pc:
            return g
        found = []
        for h in self.groups:
            if h is g or h.pc != g.pc or h.group is not g.group or h.split_at == h.pc:
                continue
            if not self._ready(h) or not g.mergeable(h):
                continue
            found.append(h)
        if not found:
            return g
        for h in found:
            self._resume(h)
        members = [g] + found
        i = min(self.groups.index(x) for x in members)
        merged = type(g).merge(members)
        merged.split_at = None
        ids = {id(x) for x in members}
        self.groups = [x for x in self.groups if id(x) not in ids]
        self.groups.insert(min(i, len(self.groups)), merged)
        self.m.merges += 1
        return merged

    # -- no progress -------------------------------------------------------------------------------
    def _state(self) -> tuple:
        return (self.m.wclock + MBar.changes, tuple((id(g), g.pc, type(g.wait).__name__)
                                                    for g in self.groups))

    def _probe(self) -> bool:
        """Run each softly waiting group once more (a spin only if anything was written since
        it stopped); True if that changed anything."""
        soft = [g for g in self.groups if g.wait is not None and g.wait.soft and
                (not isinstance(g.wait, SpinWait) or g.wait.worth_probing(self.m))]
        if not soft:
            return False
        before = self._state()
        for g in soft:
            if g not in self.groups:
                continue
            self._resume(g)
            self._step(self.groups.index(g), g)
        if self._state() != before:
            return True
        return any(self._ready(g) and not (g.wait is not None and g.wait.soft)
                   for g in self.groups)

    def _deadlock(self) -> Deadlock:
        """Every admitted warp's position, grouped by CTA (see `Deadlock`)."""
        m = self.m
        pos = {}
        for g in self.groups:
            for j, (c, wid) in enumerate(zip(g.ctas_local, g.warp_ids)):
                cta = g.group.ctas[c]
                pos[(g.group.key, c, wid)] = (cta, self._what(g))
        positions, lines = [], []
        nwarps = -(-int(m.block[0] * m.block[1] * m.block[2]) // WARP)
        for grp in self.admitted:
            for c, cta in enumerate(grp.ctas):
                states = {}
                for wid in range(nwarps):
                    st = pos.get((grp.key, c, wid), (cta, "finished"))[1]
                    states.setdefault(st, []).append(wid)
                    positions.append({"cta": list(cta.ctaid), "warp": wid, "state": st})
                lines.append((tuple(sorted((tuple(ws), st) for st, ws in states.items())), cta))
        text = []
        for key, ctas in _runs(lines):
            head = f"cta {ctas[0].ctaid}" if len(ctas) == 1 else \
                f"ctas {ctas[0].ctaid}..{ctas[-1].ctaid} ({len(ctas)} CTAs)"
            for ws, st in key:
                text.append(f"{head} {warps_text(ws)}: {st}")
        if len(text) > MAX_REPORT_LINES:
            text = text[:MAX_REPORT_LINES] + [f"... and {len(text) - MAX_REPORT_LINES} more"]
        never = sum(len(u) for u in self.pending)
        tail = f"\n  ({never} CTAs of the grid never started)" if never else ""
        if m.max_ctas is not None:
            tail += (f"\n  (only the first {m.max_ctas} CTAs of the grid run: [numsim] "
                     "max_ctas; a wait for a later CTA cannot end)")
        where = self._loc(self.groups[0]) if self.groups else None
        msg = (f"kernel {m.kir.name!r}: no warp can make progress (deadlock); where every "
               f"warp of the {sum(len(g.ctas) for g in self.admitted)} started CTAs is:\n  " +
               "\n  ".join(text) + tail)
        return Deadlock(msg, positions, where)

    def _loc(self, g):
        """The source location a blocked group is stuck at: its spinning loop, or the
        instruction that blocked it."""
        if isinstance(g.wait, SpinWait):
            return g.wait.loop.loc
        op = self.m.code.ops[g.pc - 1] if g.pc > 0 else None
        return op[1].loc if op is not None and op[0] == 0 else None

    def _what(self, g) -> str:
        wt = g.wait
        if isinstance(wt, SpinWait):
            return wt.what
        if wt is not None:
            return f"blocked on {wt.what}"
        return f"ready at {self.m.code.where(g.pc)}"  # pragma: no cover - never at a deadlock


def _runs(lines: list) -> list:
    """Consecutive CTAs with the same warp positions, as [(positions, [cta, ...]), ...]."""
    out = []
    for key, cta in lines:
        if out and out[-1][0] == key:
            out[-1][1].append(cta)
        else:
            out.append((key, [cta]))
    return out


__all__ = ["Scheduler"]
