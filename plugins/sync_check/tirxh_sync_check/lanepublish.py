"""Which lanes' accesses a release publishes: an elected lane's release of the rest of its warp.

racecheck's clocks are per lane class (`lanes`): when ``if lane == 0: mbarrier.arrive`` follows
stores by every lane of a converged warp, lane 0's class starts from the warp's clock, so its
arrive publishes all 32 lanes' stores, and a consumer warp's read of lane 5's word is ordered.
In the PTX memory model lane 0's arrive releases lane 0's own accesses and what lane 0 acquired:
lane 5's store reaches the consumer only through a release of lane 5 (its own arrive, a barrier
it takes part in) or one by a lane that acquired lane 5's release first (``bar.warp.sync`` is
both for every lane it names). The same holds for an elected lane's TMA/bulk store issue of a
tile the whole warp wrote.

Every release by a warp's lanes is logged as a *publication*: its replay position, its lane
class and clock value (a thread knows it when its clock has that value), and per lane of the
warp how far it covers that lane: its own lanes up to this release, the others up to what its
lanes acquired of them (`convergedlanes.ConvergedLanes`: release counts and acquire snapshots).
An access by another warp or an async operation to bytes a lane wrote (or, for a write, read)
is then checked: some publication after that access, known to the accessing thread, must cover
that lane past the release count the access was made at. If the clocks order the pair but no
such publication exists, the order came through a release that never saw the lane's access:
``race.converged-lanes``, reported on that release (where ``bar.warp.sync`` belongs).

A thread's knowledge only grows, so a (writer class, lane) pair verified at a writer clock value
stays verified for every earlier value: a cache per thread keeps the checks cheap.
"""

from __future__ import annotations

import bisect

import numpy as np

from tirxh_numsim import events as ev

from .convergedlanes import lane_shadow, lane_touched
from .report import Issue, describe_event
from .vclock import any_true, lane_index


class Publications:
    """The publications of every warp and the verified-pairs cache (see the module docstring)."""

    def __init__(self, lanes_state):
        self.lanes = lanes_state  # convergedlanes.ConvergedLanes
        self.logs: dict = {}  # warp -> _Log of its publications, in replay order
        self.verified: dict = {}  # reader thread -> (lane threads, 32) writer clocks verified

    def note_release(self, warp: int, t: int, lanes: int, value: int, pos: int, e) -> None:
        """Lanes `lanes` of warp `warp` (lane class `t`, its clock value `value`) release at
        replay position `pos` by event `e` (called before `ConvergedLanes.note_event` counts
        it)."""
        if isinstance(e, ev.FenceEvent):  # proxy fences are logged as releases for the proxy
            return                        # rule only; they publish nothing
        sel = [k for k in range(32) if lanes >> k & 1]
        if not sel:
            return
        cover = self.lanes.known[warp, sel, :].max(axis=0)
        cover[sel] = self.lanes.released[warp, sel] + 1
        log = self.logs.get(warp)
        if log is None:
            log = self.logs[warp] = _Log()
        log.append(pos, t, value, cover, e)

    def check(self, checker, e, t2: int, reg, idx, writes: bool, atomic: bool) -> None:
        """Access `e` by thread `t2` (a lane class or an async op) to bytes `idx` of `reg`: report
        the first byte another warp's lane accessed in conflict whose order to this access came
        only through a release that did not cover that lane."""
        if not lane_touched(reg):
            return  # no byte of it has a lane's access to be published
        sh = lane_shadow(reg)
        nl = len(self.lanes.warp_of)
        vc = checker.clock(t2)
        mine = int(self.lanes.warp_of[t2]) if t2 < nl else -1
        wt = reg.wt[idx]
        wl = sh["wlane"][idx]
        cand = (wt >= 0) & (wt < nl) & (wl >= 0)
        if atomic:
            cand &= ~reg.watomic[idx]
        found = self._first_uncovered(t2, vc, mine, cand, wt, wl, idx, reg.wc, sh["wrel"],
                                      sh["wpos"])
        if found is None and writes and not atomic:
            rt, rl = sh["rthread"][idx], sh["rlane"][idx]
            cand = (rt >= 0) & (rt < nl) & (rl >= 0)
            found = self._first_uncovered(t2, vc, mine, cand, rt, rl, idx, sh["rclock"],
                                          sh["rrel"], sh["rseq"])
            if found is not None:
                j, rel = found
                self._report(checker, checker.events[sh["revent"][idx[j]]], e, rel, reg,
                             int(idx[j]), int(rl[j]))
                return
        if found is not None:
            j, rel = found
            self._report(checker, checker.events[reg.we[idx[j]]], e, rel, reg, int(idx[j]),
                         int(wl[j]))

    def _first_uncovered(self, t2, vc, mine, cand, threads, lanes, idx, clock_of, rel_of,
                         pos_of):
        """(byte index, the release it came through) of the first candidate byte whose access
        is ordered before this one by the clocks but by no publication covering its lane.
        `threads` and `lanes` are the accesses' lane classes and lanes at `idx`; `clock_of`,
        `rel_of`, `pos_of` the shadow's whole columns of their clocks, release counts and
        positions, read only once some byte is a candidate."""
        if not any_true(cand):
            return None
        clocks = clock_of[idx]
        th = np.where(cand, threads, 0)
        # the verified-pairs cache first: it is what usually empties the mask (the order of
        # the ANDs does not change it)
        cache = self.verified.get(t2)
        if cache is None:
            cache = self.verified[t2] = np.zeros((len(self.lanes.warp_of), 32), np.int64)
        ln = lane_index(lanes)
        cand = cand & (clocks > cache[th, ln])
        if not any_true(cand):
            return None
        w1 = self.lanes.warp_of[th]
        cand &= (w1 != mine) & (vc[th] >= clocks)
        if not any_true(cand):
            return None
        # one Python tuple per candidate byte, from whole-column tolist()s (per-element int()
        # of numpy scalars dominated this loop); each distinct access is judged once, in order
        js = np.flatnonzero(cand)
        rows = zip(js.tolist(), th[js].tolist(), ln[js].tolist(), clocks[js].tolist(),
                   rel_of[idx[js]].tolist(), pos_of[idx[js]].tolist(), w1[js].tolist())
        done: set = set()
        for j, t1, a, c1, r1, p1, w in rows:
            key = (t1, a, c1, r1, p1)
            if key in done:
                continue
            done.add(key)
            leak = self._covered(vc, w, a, r1, p1)
            if leak is None:
                cache[t1, a] = max(int(cache[t1, a]), c1)
            elif leak is not False:
                return j, leak
        return None

    def _covered(self, vc, w: int, a: int, rel: int, pos: int):
        """None when a publication by warp `w` after position `pos`, known to clock `vc`,
        covers lane `a` past release count `rel`; else the latest such publication known (the
        release the order came through), or False when none is known at all (an order through
        no release of this warp: not this check's to judge)."""
        log = self.logs.get(w)
        if log is None:
            return False
        s = bisect.bisect_right(log.positions, pos)  # the publications after `pos`
        if s == log.n:
            return False
        known = vc[log.thread[s:log.n]] >= log.value[s:log.n]
        if not any_true(known):
            return False
        if any_true(known & (log.cover[s:log.n, a] > rel)):
            return None
        return log.event[s + int(np.flatnonzero(known)[-1])]

    @staticmethod
    def _report(checker, first, second, rel, reg, offset: int, lane: int) -> None:
        where = checker.describe_region(reg, offset, second)
        msg = (f"{where}: {describe_event(first)} (lane {lane}) is ordered before "
               f"{describe_event(second)} only through {describe_event(rel)}, whose lanes never "
               f"acquired lane {lane}'s access (no bar.warp.sync or barrier joined them): a "
               "release publishes its own lanes' accesses, not the rest of the warp's; put "
               "bar.warp.sync before it")
        checker.add(Issue("race.converged-lanes", msg, event=rel, related=[first, second],
                          witness=[f"1. {describe_event(first)} (lane {lane})",
                                   f"2. {describe_event(rel)} (publishes; lanes "
                                   f"{rel.lanes:#x})",
                                   f"3. {describe_event(second)} (synchronizes with 2)",
                                   f"lane {lane} never released 1 to the lanes of 2"],
                          addresses=[where], lanes=[lane]))


class _Log:
    """One warp's publications as growing numpy columns (replay position, lane-class thread,
    its clock value, per-lane cover), so a lookup slices arrays instead of rebuilding them."""

    def __init__(self, capacity: int = 64):
        self.n = 0
        self.pos = np.zeros(capacity, np.int64)
        self.thread = np.zeros(capacity, np.int64)
        self.value = np.zeros(capacity, np.int64)
        self.cover = np.zeros((capacity, 32), np.int64)
        self.event: list = []
        self.positions: list = []  # `pos` as a list, for `bisect` (no numpy call per lookup)

    def append(self, pos: int, t: int, value: int, cover, e) -> None:
        if self.n == len(self.pos):
            grow = len(self.pos)
            self.pos = np.concatenate([self.pos, np.zeros(grow, np.int64)])
            self.thread = np.concatenate([self.thread, np.zeros(grow, np.int64)])
            self.value = np.concatenate([self.value, np.zeros(grow, np.int64)])
            self.cover = np.concatenate([self.cover, np.zeros((grow, 32), np.int64)])
        n = self.n
        self.pos[n], self.thread[n], self.value[n] = pos, t, value
        self.cover[n] = cover
        self.event.append(e)
        self.positions.append(pos)
        self.n = n + 1
