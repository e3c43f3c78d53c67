"""racecheck's synchronization edges: what each synchronizing event does to the vector clocks.

A mixin of `racecheck.RaceChecker` (it owns the clocks and the bookkeeping named here). Every
handler gets the event's index and applies the edge to each lane class executing it
(`RaceChecker.parts`): a release joins the classes' clocks into the synchronization object, an
acquire joins the object's clock into each class. Group bookkeeping (async groups, barrier
generations by warp) follows the PTX ISA sections named in `racecheck`'s docstring.
"""

from __future__ import annotations

import numpy as np

from tirxh_numsim import events as ev

from .vclock import new_clock

# the proxy fence a generic write needs before an async-proxy read of its bytes, by space
FENCE_FOR = {"global": "fence.proxy.async.global", "shared": "fence.proxy.async.shared::cta",
             "shared::cluster": "fence.proxy.async.shared::cluster"}


class SyncEdges:
    """Event handlers for mbarriers, CTA and cluster barriers, async ops, fences and atomics."""

    def mbarrier(self, i: int, e) -> None:
        key = (e.space_cta, e.addr)
        self.note_mbar_use(i, e)
        if e.op == "init":
            self.inits[key] = self.inits.get(key, 0) + 1
            self.mb_acc[key] = new_clock(self.n)
            for k in [k for k in self.mb_phase if k[:2] == key]:
                del self.mb_phase[k]
            return
        if e.op in ("arrive", "complete_tx"):
            if e.op == "complete_tx":
                if e.by_async is None or e.by_async not in self.aidx:
                    return
                ts = [self.aidx[e.by_async]]
                snap = self.clock(ts[0]).copy()
            else:
                ts = self.threads(i, e)
                snap = self.release_all(ts, e)
                if binding(e) == "cp.async.mbarrier.arrive":
                    # the arrive fires when the warp's prior cp.async copies complete
                    w = self.widx[(e.cta, e.warp)]
                    for a in self.open_ops.get((w, "cp.async"), []) + \
                            [a for g in self.groups.get((w, "cp.async"), []) for a in g]:
                        np.maximum(snap, self.vc[a], out=snap)
            acc = self.mb_acc.setdefault(key, new_clock(self.n))
            np.maximum(acc, snap, out=acc)
            if e.completed_phase:
                self.mb_phase[key + (e.phase - 1,)] = acc.copy()
                self.mb_acc[key] = new_clock(self.n)
                self.completions[key + (e.phase,)] = (ts, snap)
            return
        if e.op in ("try_wait", "test_wait") and id(e.instr) in self.ignored_waits:
            self.ignored_seen[self.widx[(e.cta, e.warp)]] = e
            return
        if e.op in ("try_wait", "test_wait") and e.success:
            snap = self.mb_phase.get(key + (e.phase - 1,))
            ts = self.threads(i, e)
            self.waits[id(e)] = [(t, self.clock(t).copy()) for t in ts]
            for t in ts:
                if snap is not None:
                    np.maximum(self.clock(t), snap, out=self.vc[t])

    def barrier(self, i: int, e) -> None:
        if e.op == "warp":
            return
        key = (e.cta, e.barrier)
        ts = self.threads(i, e)
        if e.op == "sync" and e.released:
            for t in ts:
                gen = self.bar_gen.get(t, {}).get(key)
                snap = self.bar_snap.get(key + (gen,))
                if snap is not None:
                    np.maximum(self.clock(t), snap, out=self.vc[t])
            return
        g = self.bar_groups.get(id(e))
        if g is not None:  # an alternative grouping of this barrier's generations (`groupings`)
            for t in ts:
                self.bar_gen.setdefault(t, {})[key] = g
            acc = self.bar_alt.setdefault(g, [0, new_clock(self.n)])
            np.maximum(acc[1], self.release_all(ts, e), out=acc[1])
            acc[0] += 1
            if acc[0] == self.bar_group_size[g]:
                self.bar_snap[key + (g,)] = acc[1].copy()
            return
        st = self.bar_acc.setdefault(key, [0, 0, new_clock(self.n)])
        expected = e.count if e.count is not None else \
            -(-int(np.prod(self.trace.block)) // 32) * 32
        # for `hbquery.bars_ordered`: each arrival's threads and clocks, per generation
        self.bar_arrivals.setdefault(key, {}).setdefault(st[1], []).extend(
            (t, self.clock(t).copy()) for t in ts)
        for t in ts:
            self.bar_gen.setdefault(t, {})[key] = st[1]
        np.maximum(st[2], self.release_all(ts, e), out=st[2])
        st[0] += 32  # every thread of an arriving warp counts
        if st[0] >= expected:
            self.bar_snap[key + (st[1],)] = st[2].copy()
            st[0], st[1], st[2] = 0, st[1] + 1, new_clock(self.n)

    def cluster_barrier(self, i: int, e) -> None:
        # phase k of the cluster barrier is every warp's k-th arrival: a wait (which returns only
        # once all of them arrived) acquires the join of the k-th arrivals
        key = e.cluster
        for t in self.threads(i, e):
            if e.op == "wait":
                gen = self.cbar_gen.get(t, 0) - 1
                snap = self.cbar_snap.get((key, gen))
                if snap is not None:
                    np.maximum(self.clock(t), snap, out=self.vc[t])
                continue
            gen = self.cbar_gen.get(t, 0)
            self.cbar_gen[t] = gen + 1
            acc = self.cbar_snap.setdefault((key, gen), new_clock(self.n))
            if not e.relaxed:
                np.maximum(acc, self.release(t, e), out=acc)

    def async_op(self, i: int, e) -> None:
        w = self.widx.get((e.cta, e.warp))
        if w is None:
            return
        family = family_of(e)
        ts = self.threads(i, e)
        if e.stage == "issue":
            a = self.aidx[e.op_id]
            vc = self.release_all(ts, e)  # the op starts from its issuers' clocks
            if a in self.vc:  # another warp of the warpgroup issued the same wgmma
                np.maximum(vc, self.vc[a], out=vc)
            vc[a] = max(int(vc[a]), 1)
            self.vc[a] = vc
            tw = self.store_writer.get(e.op_id)
            if tw is not None:  # the store's global writes start from the same clock
                self.vc[tw] = vc.copy()
                self.vc[tw][tw] = 1
            if family is not None:  # retired by commit_group / wait_group of its family
                self.open_ops.setdefault((w, family), []).append(a)
        elif e.stage == "commit" and family is not None:
            k = (w, family)
            ops = self.open_ops.pop(k, [])
            self.groups.setdefault(k, []).append(ops)
            self.write_groups.setdefault(k, []).append(
                [self.writer_of[a] for a in ops if a in self.writer_of])
        elif e.stage == "wait" and family is not None:
            if binding(e) == "cp.async.wait_all":  # commits the open group, then waits for all
                k = (w, family)
                self.groups.setdefault(k, []).append(self.open_ops.pop(k, []))
            n = wait_n(e)
            queues = [self.groups.get((w, family), [])]
            if not (getattr(e.instr, "modifiers", None) or {}).get("read"):
                queues.append(self.write_groups.get((w, family), []))  # not only the reads
            for groups in queues:
                while len(groups) > n:
                    for a in groups.pop(0):
                        for t in ts:
                            np.maximum(self.vc[t], self.vc[a], out=self.vc[t])

    def fence(self, i: int, e) -> None:
        if (e.cta, e.warp) not in self.widx:
            return
        for t in self.threads(i, e):
            if e.fence == "fence.proxy.async":
                snap = self.release(t, e)
                self.fences.append((t, int(snap[t]), snap, getattr(e, "space", None)))
            elif e.fence in ("fence", "membar"):
                self.fenced[t] = True
                for loc in self.pending_acq.pop(t, ()):
                    if loc in self.loc_sync:
                        np.maximum(self.vc[t], self.loc_sync[loc], out=self.vc[t])

    # -- atomics and release/acquire ld/st -------------------------------------------------------
    def sem(self, e) -> "str | None":
        mods = getattr(e.instr, "modifiers", None) or {}
        return mods.get("sem") if e.proxy == ev.GENERIC else None

    def atomic_sync(self, e, t, reg, idx) -> None:
        if t >= self.nthreads:
            return
        sem = self.sem(e)
        locs = [(reg.name, int(x)) for x in np.unique(idx)[:64]]
        if sem in ("acquire", "acq_rel"):
            for loc in locs:
                if loc in self.loc_sync:
                    np.maximum(self.vc[t], self.loc_sync[loc], out=self.vc[t])
        elif sem in (None, "relaxed"):
            self.pending_acq.setdefault(t, set()).update(locs)
        if sem in ("release", "acq_rel") or self.fenced.get(t):
            snap = self.release(t, e)
            for loc in locs:
                cur = self.loc_sync.get(loc)
                self.loc_sync[loc] = snap if cur is None else np.maximum(cur, snap)
            self.fenced[t] = False


def fence_covers(fence_space: "str | None", space: str) -> bool:
    """Whether a ``fence.proxy.async[.space]`` orders accesses to `space` (PTX ISA 9.7.13.4:
    without a state space the fence covers all of them)."""
    if fence_space is None:
        return True
    if space == "global":
        return fence_space == "global"
    return fence_space.startswith("shared")


def family_of(e) -> "str | None":
    """Which commit_group/wait_group family retires an async op (None: an mbarrier does)."""
    if e.engine == "wgmma":
        return "wgmma"
    if e.engine == "cp.async":
        return "cp.async"
    if e.engine in ("bulk", "tma") and (e.stage != "issue" or e.direction == "store"):
        return "bulk"
    return None


def wait_n(e) -> int:
    ops = getattr(e.instr, "operands", None) or ()
    for o in ops:
        if hasattr(o, "value"):
            return int(o.value)
    return 0


def binding(e) -> "str | None":
    b = getattr(e.instr, "binding", None)
    return getattr(b, "name", None)
