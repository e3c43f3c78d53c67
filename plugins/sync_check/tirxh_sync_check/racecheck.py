"""racecheck: memory ordering over byte ranges of global, shared and distributed shared memory.

Happens-before is built with vector clocks (`vclock`) while replaying numsim's event trace in its
step order:

- program order within a warp;
- ``bar.sync``/``barrier.sync`` (every participant's clock joins the barrier's generation; the
  release joins it back), ``bar.arrive`` (release only);
- mbarrier: ``arrive`` releases into the current phase, an async op's ``complete_tx`` releases the
  op's clock into it, and a successful ``try_wait`` acquires the phase it observed;
- cluster barriers (``barrier.cluster.arrive`` releases unless ``.relaxed``; ``wait`` acquires);
- atomics and fences: ``.release``/``.acquire``/``.acq_rel`` atomics and ld/st synchronize through
  their location; relaxed atomics synchronize when a ``fence``/``membar`` precedes (release) or
  follows (acquire) them in the same warp;
- asynchronous completion: an async op starts from its issuer's clock; ``wgmma.wait_group``,
  ``cp.async.bulk.wait_group`` and ``cp.async.wait_group`` acquire the ops of the retired groups
  (a TMA/bulk store's global writes are a second thread of the op, which
  ``cp.async.bulk.wait_group.read`` does not acquire).

Holding paths fixed, the sync edges do not depend on the interleaving numsim chose for a program
whose waits always consume the same phase (synccheck reports the ones that do not), so two
conflicting accesses that are unordered here are unordered in some execution.

Reported: read/write and write/write conflicts without happens-before (``race.*``; through any
alias: the shadow is per byte); a write to bytes an async operation may still be reading
(``race.stage-reuse``, in shared memory and in global memory a TMA/bulk load reads); a
generic-proxy write read by the async proxy (TMA, bulk copies, wgmma; shared or global memory)
without a ``fence.proxy.async`` covering that state space ordered between them
(``proxy.missing-fence``); accesses outside their
buffer (``memory.out-of-bounds``).
"""

from __future__ import annotations

import os

import numpy as np

from tirxh_numsim import events as ev
from tirxh_numsim.memory import CLUSTER_SHIFT, GLOBAL_BASE, GLOBAL_STRIDE, SharedLayout

from . import provenance
from .order import replay_order
from .report import Issue, describe_event
from .vclock import AsyncRead, Region, byte_indices, new_clock

MAX_ISSUES = 64
_STRONG = ("relaxed", "acquire", "release", "acq_rel", "volatile")


class RaceChecker:
    def __init__(self, trace, kir=None, buffers: "dict | None" = None,
                 ignored_waits=frozenset()):
        """`kir`: the traced kernel (shared layout, address provenance); `buffers`: global buffer
        sizes ``{param name: nbytes}`` (numsim binds parameter i at GLOBAL_BASE + i*STRIDE)."""
        self.trace = trace
        self.events = trace.events
        self.kir = kir
        warps = sorted({(e.cta, e.warp) for e in self.events if e.warp >= 0})
        self.widx = {w: i for i, w in enumerate(warps)}
        self.nwarps = len(warps)
        aids = sorted({e.op_id for e in self.events if isinstance(e, ev.AsyncOp)} |
                      {e.async_id for e in self.events if isinstance(e, ev.MemAccess)
                       and e.async_id is not None})
        self.read_owner = _async_read_owners(self.events)
        # a wgmma is one warpgroup-wide operation even though each warp records its own issue:
        # the k-th wgmma of every warp of a warpgroup maps to one async thread
        canon, count = {}, {}
        for e in self.events:
            if isinstance(e, ev.AsyncOp) and e.stage == "issue" and e.engine == "wgmma":
                k = count[(e.cta, e.warp)] = count.get((e.cta, e.warp), 0) + 1
                canon[e.op_id] = canon.setdefault(("wg", e.cta, e.warp // 4, k), e.op_id)
        self.aidx = {a: self.nwarps + i for i, a in enumerate(aids)}
        for a, c in canon.items():
            self.aidx[a] = self.aidx[c]
        # an async store (TMA/bulk) has a second thread for its global writes: the group waits
        # of ``cp.async.bulk.wait_group.read`` retire only its shared reads (PTX ISA 9.7.9.27)
        stores = sorted({e.op_id for e in self.events if isinstance(e, ev.AsyncOp)
                         and e.stage == "issue" and e.direction == "store"
                         and e.engine in ("tma", "bulk")})
        base = self.nwarps + len(aids)
        self.store_writer = {a: base + i for i, a in enumerate(stores)}  # op id -> thread
        self.writer_of = {self.aidx[a]: t for a, t in self.store_writer.items()}
        self.n = base + len(stores)
        self.vc = {t: new_clock(self.n, t) for t in range(self.nwarps)}
        self.layout = SharedLayout.of(kir) if kir is not None else None
        self.sources = provenance.shared_sources(kir) if kir is not None else {}
        self.gbufs: list = []  # (base, end, name)
        if kir is not None and buffers:
            for i, p in enumerate(kir.params):
                if p.kind == "ptr" and p.name in buffers:
                    base = GLOBAL_BASE + i * GLOBAL_STRIDE
                    self.gbufs.append((base, base + int(buffers[p.name]), p.name))
        self.regions: dict = {}
        self.rank_cta = {(e.cluster, e.cta_rank): e.cta for e in self.events}
        self.issues: dict = {}
        # synchronization objects
        self.mb_acc: dict = {}  # (cta, addr) -> clock accumulating the current phase
        self.mb_phase: dict = {}  # (cta, addr, phase index) -> clock of that completed phase
        self.bar_acc: dict = {}  # (cta, id) -> [arrived threads, gen, clock]
        self.bar_snap: dict = {}  # (cta, id, gen) -> clock
        self.bar_gen: dict = {}  # warp -> {(cta, id): gen it arrived in}
        self.cbar_snap: dict = {}  # (cluster, phase) -> join of that phase's arrivals
        self.cbar_gen: dict = {}  # warp -> cluster-barrier arrivals so far
        self.open_ops: dict = {}  # (warp thread, group family) -> async ops not yet committed
        self.groups: dict = {}  # (warp thread, group family) -> committed groups, oldest first
        self.write_groups: dict = {}  # the same for async stores' global-write threads
        self.fences: list = []  # proxy fences: (thread, clock, clock vector, space or None)
        self.loc_sync: dict = {}  # (region, offset) -> clock (atomics / release-acquire)
        self.fenced: dict = {}  # warp -> a fence ran since its last atomic
        self.pending_acq: dict = {}  # warp -> locations read by relaxed atomics
        self.notes: list = []
        # for `waits_ordered`: phase completions, waits, inits
        self.completions: dict = {}  # (cta, addr, phases after) -> (thread, released clock)
        self.waits: dict = {}  # id(wait event) -> (warp thread, its clock before the acquire)
        self.inits: dict = {}  # (cta, addr) -> number of inits
        # try_waits whose result no control flow depends on (`waituse`): not waits, no acquire;
        # the last one each warp executed is named in its races
        self.ignored_waits = ignored_waits
        self.ignored_seen: dict = {}  # warp thread -> last ignored try_wait event

    # -- helpers ---------------------------------------------------------------------------------
    def thread_of(self, e, i: int = -1) -> int:
        if isinstance(e, ev.MemAccess):
            aid = e.async_id if e.async_id is not None else self.read_owner.get(i)
            if aid is not None and e.access == "write" and aid in self.store_writer:
                return self.store_writer[aid]
            if aid is not None:
                return self.aidx[aid]
        return self.widx[(e.cta, e.warp)]

    def clock(self, t: int) -> np.ndarray:
        vc = self.vc.get(t)
        if vc is None:
            vc = self.vc[t] = new_clock(self.n, t)
        return vc

    def release(self, t: int) -> np.ndarray:
        """Snapshot `t`'s clock for a release, then tick so later accesses are after it."""
        snap = self.clock(t).copy()
        self.vc[t][t] += 1
        return snap

    def region(self, key, size: "int | None") -> Region:
        r = self.regions.get(key)
        if r is None:
            r = self.regions[key] = Region(str(key), size or 0, self.nwarps)
        return r

    def add(self, issue: Issue) -> None:
        if len(self.issues) >= MAX_ISSUES:
            return
        e = issue.event
        rel = issue.related[0] if issue.related else None
        key = (issue.kind, frozenset((_line(e), _line(rel))))
        self.issues.setdefault(key, issue)

    # -- main loop -------------------------------------------------------------------------------
    def run(self) -> list:
        # numsim's order, re-sequenced so that warpgroup-collective waits come after the
        # issues they depend on (see `order`)
        for i in replay_order(self.trace):
            e = self.events[i]
            if isinstance(e, ev.MemAccess):
                self.mem(i, e)
            elif isinstance(e, ev.MBarrierEvent):
                self.mbarrier(e)
            elif isinstance(e, ev.BarrierEvent):
                self.barrier(e)
            elif isinstance(e, ev.ClusterBarrierEvent):
                self.cluster_barrier(e)
            elif isinstance(e, ev.AsyncOp):
                self.async_op(e)
            elif isinstance(e, ev.FenceEvent):
                self.fence(e)
        return list(self.issues.values())

    # -- memory ------------------------------------------------------------------------------------
    def mem(self, i: int, e) -> None:
        if e.space not in ("shared", "shared::cluster", "global"):
            return
        if not e.ranges:
            return
        t = self.thread_of(e, i)
        if t >= self.nwarps and e.async_id is None:
            # an operand read recorded just before its op's issue event: the op starts from the
            # issuing warp's clock (the issue event repeats this join)
            w = self.widx[(e.cta, e.warp)]
            vc = self.vc.get(t)
            self.vc[t] = self.clock(w).copy() if vc is None else np.maximum(vc, self.clock(w))
            self.vc[t][t] = max(int(self.vc[t][t]), 1)
        if e.space == "global":
            groups = self._global_groups(e)
        else:
            groups = self._shared_groups(e)
        for key, size, base, ranges in groups:
            reg = self.region(key, size)
            idx, lanes = byte_indices(ranges, base)
            if size is None:  # no layout known: the region is as large as what was touched
                reg.grow(int(idx.max()) + 1 if idx.size else 0)
                size = reg.size
            bad = (idx < 0) | (idx >= size)
            if bad.any():
                j = int(np.flatnonzero(bad)[0])
                if key[0] == "shared":  # past the shared window (global ones are reported above)
                    self._oob(e, "the shared window", int(idx[j]), int(idx[j]) + 1, size,
                              int(lanes[j]))
                idx, lanes = idx[~bad], lanes[~bad]
            if idx.size == 0:
                continue
            self.access(i, e, t, reg, idx, lanes)

    def _global_groups(self, e) -> list:
        arr = np.asarray(e.ranges, np.int64)
        if not self.gbufs:  # buffer sizes unknown: one growing region per numsim allocation slot
            slots = arr[:, 1] // GLOBAL_STRIDE
            return [(("global", f"slot{int(k)}"), None, int(k) * GLOBAL_STRIDE,
                     arr[slots == k].tolist()) for k in np.unique(slots)]
        out = []
        assigned = np.zeros(len(arr), bool)
        for bi, (base, end, name) in enumerate(self.gbufs):
            inb = (arr[:, 1] >= base) & (arr[:, 1] < base + GLOBAL_STRIDE)
            if not inb.any():
                continue
            assigned |= inb
            sub = arr[inb]
            over = sub[:, 2] > end
            if over.any():
                j = int(np.flatnonzero(over)[0])
                self._oob(e, name, int(sub[j, 1]) - base, int(sub[j, 2]) - base,
                          end - base, int(sub[j, 0]))
            out.append((("global", name), end - base, base, sub.tolist()))
        if not assigned.all():
            j = int(np.flatnonzero(~assigned)[0])
            self._oob(e, "no buffer", int(arr[j, 1]), int(arr[j, 2]), 0, int(arr[j, 0]))
        return out

    def _shared_groups(self, e) -> list:
        size = self.layout.size if self.layout is not None else None
        name = self.sources.get(id(e.instr)) if e.instr is not None else None
        if name is not None and self.layout is not None and e.proxy == ev.GENERIC:
            start = self.layout.symbols.get(name)
            end = None
            for s, en, n in self.layout.regions:
                if n == name and s == start:
                    end = en
            if name == "tirx_dsmem":
                end = self.layout.size
            if start is not None and end is not None:
                for lane, a, b in e.ranges:
                    if a < start or b > end:
                        self._oob(e, name, a - start, b - start, end - start, lane)
                        break
        # a shared::cluster address of another CTA is (rank + 1) << CLUSTER_SHIFT | offset
        # (numsim's address model): split the ranges by the CTA whose memory they address
        by_cta: dict = {}
        for lane, a, b in e.ranges:
            rank = (a >> CLUSTER_SHIFT) - 1
            cta = e.space_cta if rank < 0 else self.rank_cta.get((e.cluster, rank))
            if cta is None:
                self._oob(e, f"cluster rank {rank}", a, b, 0, lane)
                continue
            off = a & ((1 << CLUSTER_SHIFT) - 1)
            by_cta.setdefault(cta, []).append((lane, off, off + (b - a)))
        return [(("shared", c), size, 0, r) for c, r in sorted(by_cta.items())]

    def _oob(self, e, name, a, b, size, lane) -> None:
        self.add(Issue("memory.out-of-bounds",
                       f"{e.space} {e.access} of bytes [{a}, {b}) of {name!r}, which has "
                       f"{size} bytes (lane {lane})", event=e,
                       addresses=[f"{name}+{a}"], lanes=[lane] if lane >= 0 else [],
                       witness=[describe_event(e)]))

    def access(self, i: int, e, t: int, reg: Region, idx: np.ndarray, lanes) -> None:
        vc = self.clock(t)
        is_async = e.proxy == ev.ASYNC
        writes = e.access in ("write", "rmw")
        # atomics and strong (.relaxed/.acquire/.release/.volatile) ld/st do not race with each
        # other (PTX memory model: morally strong operations)
        atomic = e.atomic or e.access == "rmw" or self._sem(e) in _STRONG
        # conflicts with the last write of each byte
        wt = reg.wt[idx]
        has = wt >= 0
        other = has & (wt != t)
        if other.any():
            known = vc[np.where(other, wt, 0)]
            unordered = other & (reg.wc[idx] > known)
            if atomic:
                unordered &= ~reg.watomic[idx]
            if unordered.any():
                j = int(np.flatnonzero(unordered)[0])
                first = self.events[reg.we[idx[j]]]
                kind = "race.write-write" if writes else "race.read-write"
                self._race(kind, first, e, reg, int(idx[j]), int(lanes[j]))
        if writes:
            # earlier reads by other warps
            if self.nwarps:
                rc = reg.rc[idx]
                late = rc > vc[: self.nwarps][None, :]
                if t < self.nwarps:
                    late[:, t] = False
                if late.any():
                    j, u = (int(x[0]) for x in np.nonzero(late))
                    first = self.events[reg.re[idx[j], u]]
                    if not (atomic and first.atomic):
                        self._race("race.read-write", first, e, reg, int(idx[j]), int(lanes[j]))
            # asynchronous reads still in flight
            self._async_conflicts(e, t, vc, reg, idx, lanes)
        elif is_async:
            self._proxy_fence(e, t, vc, reg, idx, has, wt)
        # update the shadow
        if writes:
            reg.wt[idx] = t
            reg.wc[idx] = vc[t]
            reg.we[idx] = i
            reg.wasync[idx] = is_async
            reg.watomic[idx] = atomic
            reg.rc[idx] = 0
            if atomic:
                self._atomic_sync(e, t, reg, idx)
        elif t < self.nwarps:
            if not atomic:
                reg.rc[idx, t] = vc[t]
                reg.re[idx, t] = i
            else:
                self._atomic_sync(e, t, reg, idx)
        else:
            u = np.unique(idx)
            reg.async_reads.append(AsyncRead(t, int(vc[t]), u, int(u[0]), int(u[-1]), i))

    def _async_conflicts(self, e, t, vc, reg, idx, lanes) -> None:
        if not reg.async_reads:
            return
        lo, hi = int(idx.min()), int(idx.max())
        keep = []
        for rec in reg.async_reads:
            done = vc[rec.thread] >= rec.clock
            if not done and rec.thread != t and rec.lo <= hi and rec.hi >= lo:
                hit = np.isin(idx, rec.idx)
                if hit.any():
                    j = int(np.flatnonzero(hit)[0])
                    first = self.events[rec.event]
                    self._race("race.stage-reuse", first, e, reg, int(idx[j]), int(lanes[j]))
            keep.append(rec)
        # records every warp has seen complete can go
        if len(keep) > 256:
            keep = [r for r in keep if not all(self.clock(w)[r.thread] >= r.clock
                                               for w in range(self.nwarps))]
        reg.async_reads = keep

    def _proxy_fence(self, e, t, vc, reg, idx, has, wt) -> None:
        gen = has & ~reg.wasync[idx] & (wt < self.nwarps)
        if not gen.any():
            return
        pairs = set(zip(wt[gen].tolist(), reg.wc[idx][gen].tolist()))
        for w, c in sorted(pairs):
            if vc[w] < c:
                continue  # unordered: already reported as a race
            ok = any(f_vc[w] >= c and vc[ft] >= fc and _fence_covers(sp, e.space)
                     for ft, fc, f_vc, sp in self.fences)
            if not ok:
                sel = np.flatnonzero(gen & (wt == w) & (reg.wc[idx] == c))
                j = int(sel[0])
                first = self.events[reg.we[idx[j]]]
                fence = _FENCE_FOR.get(e.space, "fence.proxy.async")
                self._race("proxy.missing-fence", first, e, reg, int(idx[j]), -1,
                           message=(f"{describe_event(first)} writes through the generic proxy "
                                    f"and {describe_event(e)} reads the same bytes through the "
                                    f"async proxy with no {fence} (or fence.proxy.async) "
                                    "ordered between them (the async proxy may read stale "
                                    "data)"))
                return

    # -- atomics and release/acquire ld/st -------------------------------------------------------
    def _sem(self, e) -> "str | None":
        mods = getattr(e.instr, "modifiers", None) or {}
        return mods.get("sem") if e.proxy == ev.GENERIC else None

    def _locs(self, reg: Region, idx):
        return [(reg.name, int(x)) for x in np.unique(idx)[:64]]

    def _atomic_sync(self, e, t, reg, idx) -> None:
        if t >= self.nwarps:
            return
        sem = self._sem(e)
        locs = self._locs(reg, idx)
        if sem in ("acquire", "acq_rel"):
            for loc in locs:
                if loc in self.loc_sync:
                    np.maximum(self.vc[t], self.loc_sync[loc], out=self.vc[t])
        elif sem in (None, "relaxed"):
            self.pending_acq.setdefault(t, set()).update(locs)
        if sem in ("release", "acq_rel") or self.fenced.get(t):
            snap = self.release(t)
            for loc in locs:
                cur = self.loc_sync.get(loc)
                self.loc_sync[loc] = snap if cur is None else np.maximum(cur, snap)
            self.fenced[t] = False

    # -- races -----------------------------------------------------------------------------------
    def _race(self, kind, first, second, reg, offset, lane, message=None) -> None:
        where = reg.name
        if reg.name.startswith("('shared'") and self.layout is not None:
            where = f"shared {self.layout.name_of(offset)} (cta {second.space_cta})"
        elif reg.name.startswith("('global'"):
            where = f"global {reg.name.split(',')[1].strip(' )')!s}+{offset}"
        what = {"race.write-write": "write/write conflict",
                "race.read-write": "read/write conflict",
                "race.stage-reuse": "buffer overwritten while an asynchronous operation may "
                                    "still read it"}.get(kind, kind)
        msg = message or (f"{what} on {where}: {describe_event(first)} and "
                          f"{describe_event(second)} are not ordered by happens-before")
        witness = [f"1. {describe_event(first)} (step {first.step})",
                   f"2. {describe_event(second)} (step {second.step})",
                   "no synchronization orders 1 before 2 in every execution"
                   if kind != "proxy.missing-fence" else
                   "ordered, but no fence.proxy.async between the proxies"]
        # the primary line: the read of a read/write race (it consumed unordered data), the
        # overwriting write of a stage reuse, the generic write that lacks its proxy fence
        primary, other = second, first
        if kind == "race.read-write" and second.access != "read":
            primary, other = first, second
        elif kind == "proxy.missing-fence":
            primary, other = first, second
        related = [other]
        probe = self.ignored_seen.get(self.widx.get((primary.cta, primary.warp)))
        if probe is not None and probe.seq < primary.seq:
            related.append(probe)
            witness.append(f"{describe_event(probe)}: its result decides nothing, so it is not a "
                           "wait (a wait loops or branches on the try_wait's predicate)")
        self.add(Issue(kind, msg, event=primary, related=related, witness=witness,
                       addresses=[where], lanes=[lane] if lane >= 0 else [],
                       data={"space": second.space}))

    # -- synchronization -----------------------------------------------------------------------
    def mbarrier(self, e) -> None:
        key = (e.space_cta, e.addr)
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
                t = self.aidx[e.by_async]
                snap = self.clock(t).copy()
            else:
                t = self.widx[(e.cta, e.warp)]
                snap = self.release(t)
                if _binding(e) == "cp.async.mbarrier.arrive":
                    # the arrive fires when the warp's prior cp.async copies complete
                    for a in self.open_ops.get((t, "cp.async"), []) + \
                            [a for g in self.groups.get((t, "cp.async"), []) for a in g]:
                        np.maximum(snap, self.vc[a], out=snap)
            acc = self.mb_acc.setdefault(key, new_clock(self.n))
            np.maximum(acc, snap, out=acc)
            if e.completed_phase:
                self.mb_phase[key + (e.phase - 1,)] = acc.copy()
                self.mb_acc[key] = new_clock(self.n)
                self.completions[key + (e.phase,)] = (t, snap)
            return
        if e.op in ("try_wait", "test_wait") and id(e.instr) in self.ignored_waits:
            self.ignored_seen[self.widx[(e.cta, e.warp)]] = e
            return
        if e.op in ("try_wait", "test_wait") and e.success:
            snap = self.mb_phase.get(key + (e.phase - 1,))
            t = self.widx[(e.cta, e.warp)]
            self.waits[id(e)] = (t, self.clock(t).copy())
            if snap is not None:
                np.maximum(self.clock(t), snap, out=self.vc[t])

    def barrier(self, e) -> None:
        if e.op == "warp":
            return
        t = self.widx[(e.cta, e.warp)]
        key = (e.cta, e.barrier)
        if e.op == "sync" and e.released:
            gen = self.bar_gen.get(t, {}).get(key)
            snap = self.bar_snap.get(key + (gen,))
            if snap is not None:
                np.maximum(self.clock(t), snap, out=self.vc[t])
            return
        st = self.bar_acc.setdefault(key, [0, 0, new_clock(self.n)])
        expected = e.count if e.count is not None else \
            -(-int(np.prod(self.trace.block)) // 32) * 32
        self.bar_gen.setdefault(t, {})[key] = st[1]
        np.maximum(st[2], self.release(t), out=st[2])
        st[0] += 32  # every thread of an arriving warp counts
        if st[0] >= expected:
            self.bar_snap[key + (st[1],)] = st[2].copy()
            st[0], st[1], st[2] = 0, st[1] + 1, new_clock(self.n)

    def cluster_barrier(self, e) -> None:
        # phase k of the cluster barrier is every warp's k-th arrival: a wait (which returns only
        # once all of them arrived) acquires the join of the k-th arrivals
        t = self.widx[(e.cta, e.warp)]
        key = e.cluster
        if e.op == "wait":
            gen = self.cbar_gen.get(t, 0) - 1
            snap = self.cbar_snap.get((key, gen))
            if snap is not None:
                np.maximum(self.clock(t), snap, out=self.vc[t])
            return
        gen = self.cbar_gen.get(t, 0)
        self.cbar_gen[t] = gen + 1
        acc = self.cbar_snap.setdefault((key, gen), new_clock(self.n))
        if not e.relaxed:
            np.maximum(acc, self.release(t), out=acc)

    def async_op(self, e) -> None:
        w = self.widx.get((e.cta, e.warp))
        if w is None:
            return
        family = _family(e)
        if e.stage == "issue":
            a = self.aidx[e.op_id]
            vc = self.clock(w).copy()
            if a in self.vc:  # another warp of the warpgroup issued the same wgmma
                np.maximum(vc, self.vc[a], out=vc)
            vc[a] = max(int(vc[a]), 1)
            self.vc[a] = vc
            tw = self.store_writer.get(e.op_id)
            if tw is not None:  # the store's global writes start from the same clock
                self.vc[tw] = vc.copy()
                self.vc[tw][tw] = 1
            self.vc[w][w] += 1
            if family is not None:  # retired by commit_group / wait_group of its family
                self.open_ops.setdefault((w, family), []).append(a)
        elif e.stage == "commit" and family is not None:
            k = (w, family)
            ops = self.open_ops.pop(k, [])
            self.groups.setdefault(k, []).append(ops)
            self.write_groups.setdefault(k, []).append(
                [self.writer_of[a] for a in ops if a in self.writer_of])
        elif e.stage == "wait" and family is not None:
            if _binding(e) == "cp.async.wait_all":  # commits the open group, then waits for all
                k = (w, family)
                self.groups.setdefault(k, []).append(self.open_ops.pop(k, []))
            n = _wait_n(e)
            queues = [self.groups.get((w, family), [])]
            if not (getattr(e.instr, "modifiers", None) or {}).get("read"):
                queues.append(self.write_groups.get((w, family), []))  # not only the reads
            for groups in queues:
                while len(groups) > n:
                    for a in groups.pop(0):
                        np.maximum(self.vc[w], self.vc[a], out=self.vc[w])

    def fence(self, e) -> None:
        t = self.widx.get((e.cta, e.warp))
        if t is None:
            return
        if e.fence == "fence.proxy.async":
            snap = self.release(t)
            self.fences.append((t, int(snap[t]), snap, getattr(e, "space", None)))
        elif e.fence in ("fence", "membar"):
            self.fenced[t] = True
            for loc in self.pending_acq.pop(t, ()):
                if loc in self.loc_sync:
                    np.maximum(self.vc[t], self.loc_sync[loc], out=self.vc[t])


# the proxy fence a generic write needs before an async-proxy read of its bytes, by space
_FENCE_FOR = {"global": "fence.proxy.async.global", "shared": "fence.proxy.async.shared::cta",
              "shared::cluster": "fence.proxy.async.shared::cluster"}


def _fence_covers(fence_space: "str | None", space: str) -> bool:
    """Whether a ``fence.proxy.async[.space]`` orders accesses to `space` (PTX ISA 9.7.13.4:
    without a state space the fence covers all of them)."""
    if fence_space is None:
        return True
    if space == "global":
        return fence_space == "global"
    return fence_space.startswith("shared")


def _family(e) -> "str | None":
    """Which commit_group/wait_group family retires an async op (None: an mbarrier does)."""
    if e.engine == "wgmma":
        return "wgmma"
    if e.engine == "cp.async":
        return "cp.async"
    if e.engine in ("bulk", "tma") and (e.stage != "issue" or e.direction == "store"):
        return "bulk"
    return None


def _wait_n(e) -> int:
    ops = getattr(e.instr, "operands", None) or ()
    for o in ops:
        if hasattr(o, "value"):
            return int(o.value)
    return 0


def _async_read_owners(events) -> dict:
    """Async-proxy reads recorded without an op id (wgmma operands) belong to the async op the
    same warp issues next from the same instruction."""
    out, pending = {}, {}
    for i, e in enumerate(events):
        if isinstance(e, ev.MemAccess) and e.async_id is None and \
                (e.proxy == ev.ASYNC or _binding(e) == "cp.async"):
            # cp.async's copy is recorded as the warp's own load and store before its issue
            pending.setdefault((e.cta, e.warp), []).append((i, e.instr))
        elif isinstance(e, ev.AsyncOp) and e.stage == "issue":
            for j, instr in pending.pop((e.cta, e.warp), []):
                if instr is e.instr:
                    out[j] = e.op_id
    return out


def _binding(e) -> "str | None":
    b = getattr(e.instr, "binding", None)
    return getattr(b, "name", None)


def _line(e):
    if e is None or e.loc is None:
        return None
    return (os.path.basename(e.loc.file), e.loc.line)


def check(trace, kir=None, buffers: "dict | None" = None,
          ignored_waits=frozenset()) -> "tuple[list, RaceChecker]":
    """Run racecheck over a numsim trace; returns its `report.Issue`s and the checker (whose
    clocks `waits_ordered` reads). `ignored_waits`: ids of try_wait instructions that are not
    waits (`waituse.classify`)."""
    rc = RaceChecker(trace, kir, buffers, ignored_waits)
    return rc.run(), rc


def waits_ordered(rc: RaceChecker, models: list) -> bool:
    """Whether no mbarrier wait can consume another generation than in numsim's run.

    For every wait of generation g on barrier B (from `model`): the wait happens-before the
    completion of B's phase g+1 (so B cannot overrun it), and the completion of phase g-1
    happens-before the warp reaches the wait (so it cannot pass two phases early). If this holds
    for every wait, sync pairings are the same in every interleaving (induction on the first wait
    that would deviate) and synccheck may take enabled waits eagerly. Barriers initialized more
    than once, waits that never returned and failed try_wait probes disable the shortcut.
    """
    if any(n > 1 for n in rc.inits.values()):
        return False
    for cm in models:
        for w in cm.warps:
            for op in w.ops:
                if op.kind == "mprobe" or (op.kind == "mwait" and op.ref_gen is None):
                    return False
                if op.kind != "mwait":
                    continue
                info = rc.waits.get(id(op.event))
                if info is None:
                    return False
                t, pre = info
                key, g = (op.obj[1], op.obj[2]), op.ref_gen
                nxt = rc.completions.get(key + (g + 1,))
                if nxt is not None and nxt[1][t] < pre[t]:
                    return False
                if g >= 2:
                    prev = rc.completions.get(key + (g - 1,))
                    if prev is None or pre[prev[0]] < prev[1][prev[0]]:
                        return False
    return True
