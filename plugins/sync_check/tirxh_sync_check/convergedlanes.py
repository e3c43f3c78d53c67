"""Lanes of one warp exchanging data through memory with nothing but lockstep between them.

racecheck's threads are lane *classes* (`lanes`): a converged warp is one thread, so a lane's
store and another lane's load of the same bytes are in program order there. The PTX memory
model has no warps: every lane is a thread, and only ``bar.warp.sync`` (which "guarantees memory
ordering among threads participating in barrier"), a CTA or cluster barrier, or a
release/acquire chain orders one lane's access before another's. ``shfl.sync``, ``vote.sync``,
``redux.sync`` and ``match.sync`` wait for their member lanes but promise no memory ordering; and
ptxas, which compiles one thread, may move a lane's load of ``tmp[lane ^ 1]`` above its own store
of ``tmp[lane]``. (NVIDIA's Volta guidance: code that assumes lanes' reads and writes are visible
to the rest of the warp without ``__syncwarp()`` is invalid.)

This check keeps, per lane, how many releases it has executed (a barrier arrival,
``bar.warp.sync``, an mbarrier arrive, a fence, an atomic or strong access, an async op's issue)
and, at each of its acquires (a barrier's release, ``bar.warp.sync``, an mbarrier wait, a
cluster wait, a fence, an atomic or strong access, a wgmma group wait; not a ``cp.async`` or
bulk group wait, which retires the lane's own copies only), how many releases of
each lane of its warp came before; per byte, the lane of its last write and of its last plain
read with that lane's release count then. An access by lane *b* of warp *W* to bytes lane
*a* != *b* of *W* wrote (or, for a write, read) is unordered in numsim's execution unless a
release of *a* after the first access came before an acquire of *b* before the second: every
chain from *a* to *b* starts with the one and ends with the other. That is
``race.converged-lanes``. The rule errs towards silence: such a release and acquire need not be
linked (an elected lane's arrive and the warp's wait on another barrier excuse the pair); where
several lanes read the byte in one instruction, any acquire of *b* since excuses it; and an
elected lane's release of the rest of the warp's stores to *another* warp is judged at
lane-class granularity (`racereport`), not here.

Not checked: ``.aligned`` instructions' memory events (ldmatrix/stmatrix, wgmma operands: they
name the lanes whose addresses were used, not the lanes that read or wrote), engine accesses,
and pairs where both accesses are atomic or strong (morally strong: no race).
"""

from __future__ import annotations

import numpy as np

from tirxh_numsim import events as ev

from .report import Issue, describe_event
from .vclock import any_true, duplicated, lane_index

MANY = -2  # several lanes read the byte in one instruction


class ConvergedLanes:
    """Per-lane release counts and acquire snapshots of every warp, and the lane shadow of each
    `Region` (attached to the region as ``lane_shadow``)."""

    def __init__(self, nwarps: int, warp_of: list):
        n = max(nwarps, 1)
        self.released = np.zeros((n, 32), np.int64)  # releases executed, per lane
        self.known = np.zeros((n, 32, 32), np.int64)  # [w, b, a]: a's releases before b's acquire
        self.acquired = np.full((n, 32), -1, np.int64)  # replay position of b's last acquire
        self.warp_of = np.asarray(warp_of, np.int64)
        # each warp's lane-class threads (`lanes` made them all before the replay)
        self.warp_threads: list = [[] for _ in range(n)]
        for t, w in enumerate(warp_of):
            self.warp_threads[w].append(t)

    # -- sync events -----------------------------------------------------------------------------
    def note_event(self, e, pos: int, warp: "int | None", strong: bool) -> None:
        """Count the releases and snapshot the acquires of the lanes executing `e` (warp index
        `warp`) at replay position `pos`."""
        rel, acq = _release_acquire(e, strong) if warp is not None else (False, False)
        if not (rel or acq):
            return
        lanes = e.lanes & (e.membermask if isinstance(e, ev.WarpSync) else 0xFFFFFFFF)
        sel = [k for k in range(32) if lanes >> k & 1]
        if not sel:
            return
        if rel:
            self.released[warp, sel] += 1
        if acq:
            self.known[warp, sel, :] = self.released[warp]
            self.acquired[warp, sel] = pos

    # -- accesses --------------------------------------------------------------------------------
    def check(self, checker, i: int, e, t: int, reg, idx, lanes, writes: bool,
              atomic: bool, pos: int) -> None:
        """Report the first byte of this access by lane thread `t` that another lane of its warp
        accessed in conflict with no release of that lane before an acquire of this one between
        them; then update the lane shadow. Pairs the vector clocks leave unordered are theirs to
        report (`RaceChecker.access`)."""
        aligned = ".aligned" in (getattr(e.instr, "spelling", "") or "")
        lane = np.asarray(lanes, np.int64)
        # bytes a lane accessed as itself (not an .aligned instruction's, not lane -1's)
        ok_lane = np.zeros(len(lane), bool) if aligned else lane >= 0
        n_ok = np.count_nonzero(ok_lane)
        any_lane = n_ok > 0
        touched = lane_touched(reg)
        if not (any_lane or touched):
            return  # nothing to check, and the shadow stays as it is (no lane anywhere)
        sh = lane_shadow(reg)
        vc = checker.clock(t)
        w = int(self.warp_of[t])
        b = lane_index(lane)
        if any_lane and touched:
            j, wl = self._unlinked_write(reg, sh, idx, lane, ok_lane, b, vc, w, atomic)
            if j is not None:
                self._report(checker, checker.events[reg.we[idx[j]]], e, reg, int(idx[j]),
                             int(wl[j]), int(lane[j]))
            elif writes and not atomic:
                j, rl = self._unlinked_read(sh, idx, lane, ok_lane, b, vc, w)
                if j is not None:
                    first = checker.events[sh["revent"][idx[j]]]
                    self._report(checker, first, e, reg, int(idx[j]), int(rl[j]), int(lane[j]))
        self._update_shadow(reg, sh, i, t, idx, lane, ok_lane, n_ok, b, vc, w, writes, atomic,
                            pos)

    def _unlinked_write(self, reg, sh, idx, lane, ok_lane, b, vc, w: int, atomic: bool):
        """(index into `idx` of the first byte another lane of warp `w` last wrote with no
        release of it before an acquire of this byte's lane since, or None; the writing lanes).
        The masks are ANDed most selective first (usually the last write is no ordered one of
        this warp's): once one is empty the rest could only narrow an empty mask."""
        raw = self._ordered_same_warp(reg.wt[idx], reg.wc[idx], vc, w)
        if not any_true(raw):
            return None, None
        wl = sh["wlane"][idx]
        raw &= ok_lane & (wl >= 0) & (wl != lane)
        if not any_true(raw):
            return None, wl
        if atomic:
            raw &= ~reg.watomic[idx]
        raw &= self.known[w][b, lane_index(wl)] <= sh["wrel"][idx]
        if not any_true(raw):
            return None, wl
        return int(np.flatnonzero(raw)[0]), wl

    def _unlinked_read(self, sh, idx, lane, ok_lane, b, vc, w: int):
        """The same for a plain write after another lane's (or several lanes') read: (index of
        the first such byte or None, the reading lanes)."""
        rl = sh["rlane"][idx]
        war = ok_lane & (rl != -1) & (rl != lane)
        if not any_true(war):
            return None, rl
        war &= self._ordered_same_warp(sh["rthread"][idx], sh["rclock"][idx], vc, w)
        war &= np.where(rl == MANY, self.acquired[w][b] < sh["rseq"][idx],
                        self.known[w][b, lane_index(rl)] <= sh["rrel"][idx])
        if not any_true(war):
            return None, rl
        return int(np.flatnonzero(war)[0]), rl

    def _update_shadow(self, reg, sh, i: int, t: int, idx, lane, ok_lane, n_ok: int, b, vc,
                       w: int, writes: bool, atomic: bool, pos: int) -> None:
        """Record this access in the lane shadow. A byte whose writing lane is -1 (``wlane``) or
        whose reading thread is -1 (``rthread``) has no lane access to check, and neither check
        reads its other fields: an access with no lane of its own (an .aligned instruction's)
        only clears those two. `n_ok`: how many bytes `ok_lane` marks as a lane's own."""
        any_lane = n_ok > 0
        if any_lane:
            reg.lane_touched = True
        everyone = n_ok == len(ok_lane)
        if writes:
            if not any_lane:
                sh["wlane"][idx] = -1
            else:
                sh["wlane"][idx] = lane if everyone else np.where(ok_lane, lane, -1)
                sh["wrel"][idx] = self.released[w][b]
                sh["wpos"][idx] = pos
            sh["rthread"][idx] = -1
        elif not atomic:
            if not any_lane:
                sh["rthread"][idx] = -1
                return
            sh["rthread"][idx] = t if everyone else np.where(ok_lane, t, -1)
            sh["rclock"][idx] = vc[t]
            sh["rlane"][idx] = lane
            sh["rrel"][idx] = self.released[w][b]
            sh["rseq"][idx] = pos
            sh["revent"][idx] = i
            shared_bytes = duplicated(idx)  # several lanes read them in this one instruction
            if len(shared_bytes):
                sh["rlane"][shared_bytes] = MANY

    def _ordered_same_warp(self, threads, clocks, vc, w: int):
        """Per byte: the other access was by a lane thread of warp `w`, and the vector clocks
        order it before this one (unordered pairs are racecheck's own races)."""
        mine = self.warp_threads[w]
        if len(mine) <= 4:
            # the usual case, a warp of a few lane classes (one per side of an elect): "a thread
            # of warp `w`" is one of them, each with a scalar clock entry; the same mask as the
            # general lines below, in fewer numpy calls
            out = (threads == mine[0]) & (clocks <= vc[mine[0]])
            for u in mine[1:]:
                out |= (threads == u) & (clocks <= vc[u])
            return out
        ok = (threads >= 0) & (threads < len(self.warp_of))
        th = np.where(ok, threads, 0)
        return ok & (self.warp_of[th] == w) & (vc[th] >= clocks)

    @staticmethod
    def _report(checker, first, second, reg, offset: int, lane1: int, lane2: int) -> None:
        where = checker.describe_region(reg, offset, second)
        what = "its store" if first.access in ("write", "rmw") else "its load"
        lane1_text = "several lanes" if lane1 == MANY else f"lane {lane1}"
        msg = (f"{where}: {describe_event(second)} (lane {lane2}) accesses bytes that "
               f"{describe_event(first)} ({lane1_text}, {what}) accessed earlier in the same "
               "warp, and nothing but the warp's lockstep orders the two: the lanes of a warp "
               "are separate threads (shfl/vote/redux.sync order no memory); put bar.warp.sync "
               "between them")
        checker.add(Issue("race.converged-lanes", msg, event=second, related=[first],
                          witness=[f"1. {describe_event(first)} ({lane1_text})",
                                   f"2. {describe_event(second)} (lane {lane2})",
                                   f"no release by {lane1_text} after 1 comes before an "
                                   f"acquire by lane {lane2} before 2 (no bar.warp.sync, "
                                   "barrier, mbarrier arrive and wait, fence or atomic links "
                                   "them)"],
                          addresses=[where], lanes=[lane2]))


def _release_acquire(e, strong: bool) -> "tuple[bool, bool]":
    """Whether event `e` releases (publishes its lanes' earlier accesses) and whether it
    acquires, for the lanes that execute it (conservatively: both where unsure)."""
    if isinstance(e, ev.BarrierEvent):
        return (not e.released, e.op == "sync" and e.released) if e.op != "warp" \
            else (True, True)
    if isinstance(e, ev.ClusterBarrierEvent):
        return (e.op == "arrive" and not e.relaxed, e.op == "wait")
    if isinstance(e, ev.MBarrierEvent):
        if e.by_async is not None or e.op in ("init", "inval", "expect_tx", "complete_tx"):
            return (False, False)
        return (e.op == "arrive", e.op != "arrive")
    if isinstance(e, ev.FenceEvent):  # a proxy fence orders proxies, not threads
        return (not e.fence.startswith("fence.proxy"),) * 2
    if isinstance(e, ev.WarpSync):
        return (e.op == "bar.warp.sync",) * 2
    if isinstance(e, ev.AsyncOp):
        # an op carries its issuer's history to whoever waits on its mbarrier; a wait_group
        # retires the executing thread's own cp.async / bulk groups only (wgmma's are the
        # warpgroup's: one op issued by every lane)
        return (e.stage == "issue", e.stage == "wait" and e.engine == "wgmma")
    if isinstance(e, ev.MemAccess) and e.async_id is None and \
            (e.atomic or e.access == "rmw" or strong):
        return (True, True)
    return (False, False)


def lane_touched(reg) -> bool:
    """Whether a lane's plain access ever entered `reg`'s lane shadow. Until one has, no byte
    of it has a writing or reading lane, so neither check has a candidate: most accesses (async
    copies' tiles, wgmma operands, regions only one proxy touches) skip the shadow's masks."""
    return getattr(reg, "lane_touched", False)


def lane_shadow(reg) -> dict:
    """The lane shadow of `reg` (made, or grown with the region, on first use)."""
    sh = getattr(reg, "lane_shadow", None)
    if sh is None or len(sh["wlane"]) != reg.size:
        n = reg.size
        old = sh
        sh = reg.lane_shadow = {
            "wlane": np.full(n, -1, np.int8), "wrel": np.zeros(n, np.int64),
            "wpos": np.zeros(n, np.int64),
            "rthread": np.full(n, -1, np.int32), "rclock": np.zeros(n, np.int32),
            "rlane": np.full(n, -1, np.int8), "rrel": np.zeros(n, np.int64),
            "rseq": np.zeros(n, np.int64), "revent": np.full(n, -1, np.int32)}
        if old is not None:  # a region that grew (hand-built traces)
            m = len(old["wlane"])
            for k in sh:
                sh[k][:m] = old[k]
    return sh
