"""racecheck: memory ordering over byte ranges of global, shared and distributed shared memory.

Happens-before is built with vector clocks (`vclock`) while replaying numsim's event trace in its
step order:

- program order within a lane class of a warp (`lanes`: a converged warp is one thread; after
  it diverges, its lanes are separate threads until ``bar.warp.sync`` or a CTA barrier joins
  them);
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
buffer (``memory.out-of-bounds``). A conflict that exists only because lanes of one warp are
separate threads after divergence is ``race.divergent-lanes`` (`racereport`); one between lanes of
a converged warp, which the lane classes cannot see, is ``race.converged-lanes``
(`convergedlanes`), and so is another warp's order to a lane's access through an elected lane's
release that never acquired it (`lanepublish`).

Morally strong accesses (atomics, ``.relaxed``/``.acquire`` loads) do not race in PTX's model,
yet a strong *load* of bytes another thread's atomic read-modify-write (``red``/``atom``) updated
before it in numsim's run, with nothing ordering that update before the load, reads a value that
depends on timing: the last split of a ``red``-summed split-K reading the sum without a
release/acquire on its counter. Such a load is checked again after its own acquire and at its
thread's next ``fence``/``membar`` (the relaxed-load-then-fence idiom); one still unordered
at the end is ``race.unordered-atomic-read``.
"""

from __future__ import annotations

import numpy as np

from tirxh_numsim import events as ev
from tirxh_numsim.memory import CLUSTER_SHIFT, GLOBAL_BASE, GLOBAL_STRIDE, SharedLayout

from . import provenance
from .convergedlanes import ConvergedLanes
from .lanepublish import Publications
from .lanes import LaneClasses
from .order import replay_order
from .racereport import RaceReports
from .racesync import FENCE_FOR, SyncEdges, binding, fence_covers
from .report import Issue, describe_event
from .vclock import AsyncRead, Region, any_true, byte_indices, new_clock, ranges_array

_STRONG = ("relaxed", "acquire", "release", "acq_rel", "volatile")


class RaceChecker(SyncEdges, RaceReports):
    def __init__(self, trace, kir=None, buffers: "dict | None" = None,
                 ignored_waits=frozenset(), bar_groups: "dict | None" = None):
        """`kir`: the traced kernel (shared layout, address provenance); `buffers`: global buffer
        sizes ``{param name: nbytes}`` (numsim binds parameter i at GLOBAL_BASE + i*STRIDE);
        `ignored_waits`: ids of try_wait instructions that are not waits (`waituse`);
        `bar_groups`: another grouping of named-barrier arrivals into generations
        (``{id(arrival event): generation key}``, `groupings`) than numsim's."""
        self.trace = trace
        self.events = trace.events
        self.kir = kir
        warps = sorted({(e.cta, e.warp) for e in self.events if e.warp >= 0})
        self.widx = {w: i for i, w in enumerate(warps)}
        self.nwarps = len(warps)
        self.lanes = LaneClasses(trace, self.widx)
        self.nthreads = self.lanes.n  # lane-class threads; async threads come after
        self.converged = ConvergedLanes(self.nwarps, self.lanes.warp_of)
        self.published = Publications(self.converged)
        self.pos = self.cur = 0  # replay position and index of the event being handled
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
        self.aidx = {a: self.nthreads + i for i, a in enumerate(aids)}
        for a, c in canon.items():
            self.aidx[a] = self.aidx[c]
        # an async store (TMA/bulk) has a second thread for its global writes: the group waits
        # of ``cp.async.bulk.wait_group.read`` retire only its shared reads (PTX ISA 9.7.9.27)
        stores = sorted({e.op_id for e in self.events if isinstance(e, ev.AsyncOp)
                         and e.stage == "issue" and e.direction == "store"
                         and e.engine in ("tma", "bulk")})
        base = self.nthreads + len(aids)
        self.store_writer = {a: base + i for i, a in enumerate(stores)}  # op id -> thread
        self.writer_of = {self.aidx[a]: t for a, t in self.store_writer.items()}
        self.n = base + len(stores)
        self.vc = {t: new_clock(self.n, t) for t in range(self.nwarps)}
        self.dead: set = set()  # lane classes merged into another (their clocks are stale)
        self.layout = SharedLayout.of(kir) if kir is not None else None
        self.sources = provenance.shared_sources(kir) if kir is not None else {}
        self.symbol_bounds: dict = {}  # shared variable name -> (start, end) or None (`_bounds`)
        self.gbufs: list = []  # (base, end, name)
        if kir is not None and buffers:
            for i, p in enumerate(kir.params):
                if p.kind == "ptr" and p.name in buffers:
                    base = GLOBAL_BASE + i * GLOBAL_STRIDE
                    self.gbufs.append((base, base + int(buffers[p.name]), p.name))
        self.regions: dict = {}
        self.rank_cta = {(e.cluster, e.cta_rank): e.cta for e in self.events}
        cluster_of = {e.cta: e.cluster for e in self.events}
        self.cluster_threads: dict = {}  # cluster -> lane-class threads of its warps
        for t in range(self.nthreads):
            cta = warps[self.lanes.warp_of[t]][0]
            self.cluster_threads.setdefault(cluster_of[cta], []).append(t)
        self.cluster_of = cluster_of
        self.issues: dict = {}
        # synchronization objects
        self.mb_acc: dict = {}  # (cta, addr) -> clock accumulating the current phase
        self.mb_phase: dict = {}  # (cta, addr, phase index) -> clock of that completed phase
        self.bar_acc: dict = {}  # (cta, id) -> [arrived threads, gen, clock]
        self.bar_snap: dict = {}  # (cta, id, gen) -> clock
        self.bar_gen: dict = {}  # thread -> {(cta, id): gen it arrived in}
        self.bar_arrivals: dict = {}  # (cta, id) -> {gen: [(thread, clock at its arrival)]}
        # strong loads of bytes an unordered atomic RMW of another thread updated: thread ->
        # [(writer thread, its clock, read event, write event, region, offset, lane)]
        self.atomic_reads: dict = {}
        self.rmw_hist: dict = {}  # (region, word) -> {thread: (clock, event, byte offset)}
        self.cbar_snap: dict = {}  # (cluster, phase) -> join of that phase's arrivals
        self.cbar_gen: dict = {}  # thread -> cluster-barrier arrivals so far
        self.open_ops: dict = {}  # (warp, group family) -> async ops not yet committed
        self.groups: dict = {}  # (warp, group family) -> committed groups, oldest first
        self.write_groups: dict = {}  # the same for async stores' global-write threads
        self.fences: list = []  # proxy fences: (thread, clock, clock vector, space or None)
        self.loc_sync: dict = {}  # (region, offset) -> clock (atomics / release-acquire)
        self.fenced: dict = {}  # thread -> a fence ran since its last atomic
        self.pending_acq: dict = {}  # thread -> locations read by relaxed atomics
        self.notes: list = []
        # mbarrier arrivals the replay could not place in numsim's phases (`order`): incomplete
        self.replay_stuck: list = []
        # for `hbquery`: phase completions, waits, inits, and each mbarrier op's clocks
        self.completions: dict = {}  # (cta, addr, phases after) -> ([threads], released clock)
        self.waits: dict = {}  # id(wait event) -> [(thread, its clock before the acquire)]
        self.inits: dict = {}  # (cta, addr) -> number of inits
        self.mbar_uses: dict = {}  # (cta, addr) -> [(event, [(thread, clock)])]
        inits: dict = {}
        for e in self.events:
            if isinstance(e, ev.MBarrierEvent) and e.op == "init":
                inits[(e.space_cta, e.addr)] = inits.get((e.space_cta, e.addr), 0) + 1
        self.reinit_keys = {k for k, n in inits.items() if n > 1}
        # try_waits whose result no control flow depends on (`waituse`): not waits, no acquire;
        # the last one each warp executed is named in its races
        self.ignored_waits = ignored_waits
        self.ignored_seen: dict = {}  # warp -> last ignored try_wait event
        self.rel_log: dict = {}  # thread -> [(clock value released, event)] (`racereport`)
        self.bar_groups = bar_groups or {}
        self.bar_group_size: dict = {}
        for g in self.bar_groups.values():
            self.bar_group_size[g] = self.bar_group_size.get(g, 0) + 1
        self.bar_alt: dict = {}  # generation key -> [arrivals so far, joined clock]

    # -- threads and clocks ----------------------------------------------------------------------
    def threads(self, i: int, e) -> list:
        """The lane-class threads that executed event `i`."""
        parts = self.lanes.parts.get(i)
        if parts is None:
            return [self.widx[(e.cta, e.warp)]]
        return [t for t, _ in parts]

    def clock(self, t: int) -> np.ndarray:
        vc = self.vc.get(t)
        if vc is None:
            vc = self.vc[t] = new_clock(self.n, t)
        return vc

    def release(self, t: int, e=None) -> np.ndarray:
        """Snapshot `t`'s clock for a release (by event `e`), then tick so later accesses are
        after it."""
        snap = self.clock(t).copy()
        self.vc[t][t] += 1
        if e is not None and t < self.nthreads:
            self.rel_log.setdefault(t, []).append((int(snap[t]), e))
            w = self.lanes.warp_of[t]
            parts = self.lanes.parts.get(self.cur)
            lanes = next((m for u, m in parts if u == t), 0) & e.lanes if parts else e.lanes
            self.published.note_release(w, t, lanes, int(snap[t]), self.pos, e)
        return snap

    def release_all(self, ts: list, e) -> np.ndarray:
        """The join of releases by every thread of `ts`."""
        snap = self.release(ts[0], e)
        for t in ts[1:]:
            np.maximum(snap, self.release(t, e), out=snap)
        return snap

    def _fork(self, parent: int, child: int) -> None:
        """A lane class splits off `parent`: it starts from the parent's clock and bookkeeping."""
        vc = self.clock(parent).copy()
        vc[child] += 1
        self.vc[child] = vc
        self.dead.discard(child)
        self.bar_gen[child] = dict(self.bar_gen.get(parent, {}))
        self.cbar_gen[child] = self.cbar_gen.get(parent, 0)
        self.fenced[child] = self.fenced.get(parent, False)
        self.pending_acq[child] = set(self.pending_acq.get(parent, ()))

    def _join(self, into: int, rest: list) -> None:
        """Lane classes join (bar.warp.sync, a CTA barrier): the merged class knows them all."""
        for t in rest:
            np.maximum(self.clock(into), self.clock(t), out=self.vc[into])
            self.dead.add(t)

    def region(self, key, size: "int | None") -> Region:
        r = self.regions.get(key)
        if r is None:
            if key[0] == "shared":  # a CTA's window: its cluster's threads reach it
                cols = self.cluster_threads.get(self.cluster_of.get(key[1]), [])
            else:
                cols = range(self.nthreads)
            r = self.regions[key] = Region(str(key), size or 0, list(cols), self.nthreads)
        return r

    def note_mbar_use(self, i: int, e) -> None:
        """The clocks (the operation's epoch, before its own release) at every operation on an
        mbarrier initialized more than once (for `hbquery.reinit_races`)."""
        key = (e.space_cta, e.addr)
        if key not in self.reinit_keys:
            return
        if e.by_async is not None and e.by_async in self.aidx:
            ts = [self.aidx[e.by_async]]
        else:
            ts = self.threads(i, e)
        self.mbar_uses.setdefault(key, []).append((e, [(t, self.clock(t).copy()) for t in ts]))

    # -- main loop -------------------------------------------------------------------------------
    def run(self) -> list:
        # numsim's order, re-sequenced so that warpgroup-collective waits come after the
        # issues they depend on (see `order`)
        forks, joins = self.lanes.forks, self.lanes.joins
        for pos, i in enumerate(replay_order(self.trace, self.bar_groups, self.replay_stuck)):
            self.pos, self.cur = pos, i
            for p, c in forks.get(i, ()):
                self._fork(p, c)
            e = self.events[i]
            if isinstance(e, ev.MemAccess):
                self.mem(i, e)
            elif isinstance(e, ev.MBarrierEvent):
                self.mbarrier(i, e)
            elif isinstance(e, ev.BarrierEvent):
                self.barrier(i, e)
            elif isinstance(e, ev.ClusterBarrierEvent):
                self.cluster_barrier(i, e)
            elif isinstance(e, ev.AsyncOp):
                self.async_op(i, e)
            elif isinstance(e, ev.FenceEvent):
                self.fence(i, e)
            self.converged.note_event(e, pos, self.widx.get((e.cta, e.warp)),
                                      isinstance(e, ev.MemAccess) and self.sem(e) in _STRONG)
            for into, rest in joins.get(i, ()):
                self._join(into, rest)
        for t in sorted(self.atomic_reads):
            self._settle_atomic_reads(t, final=True)
        return list(self.issues.values())

    def _settle_atomic_reads(self, t: int, final: bool = False) -> None:
        """Drop thread `t`'s pending strong loads whose atomic update is now ordered before
        them; at the end (`final`) report those that never were."""
        vc = self.clock(t)
        left = [p for p in self.atomic_reads.get(t, ()) if vc[p[0]] < p[1]]
        if final:
            for wt, _, r, w, reg, off, lane in left:
                self._race("race.unordered-atomic-read", w, r, reg, off, lane, message=(
                    f"{describe_event(r)} reads bytes that {describe_event(w)} updates with "
                    "an atomic read-modify-write, and nothing orders the update before the "
                    "read (no release/acquire pair, no fence after a relaxed load): the "
                    "value read depends on timing (it may miss the update)"))
            left = []
        if left:
            self.atomic_reads[t] = left
        else:
            self.atomic_reads.pop(t, None)

    # -- memory ------------------------------------------------------------------------------------
    def mem(self, i: int, e) -> None:
        if e.space not in ("shared", "shared::cluster", "global"):
            return
        if not e.ranges:
            return
        aid = e.async_id if e.async_id is not None else self.read_owner.get(i)
        if aid is not None:
            t = self.store_writer[aid] if e.access == "write" and aid in self.store_writer \
                else self.aidx[aid]
            if e.async_id is None:
                # an operand read recorded just before its op's issue event: the op starts from
                # the issuing warp's clock (the issue event repeats this join)
                vc = self.vc.get(t)
                for w in self.threads(i, e):
                    vc = self.clock(w).copy() if vc is None else np.maximum(vc, self.clock(w))
                self.vc[t] = vc
                self.vc[t][t] = max(int(self.vc[t][t]), 1)
            self._mem_thread(i, e, t, e.ranges)
            return
        parts = self.lanes.parts.get(i)
        if parts is None or len(parts) == 1:
            self._mem_thread(i, e, self.threads(i, e)[0], e.ranges)
            return
        for t, lanes in parts:  # a diverged warp: each lane class accesses its lanes' bytes
            sub = [r for r in e.ranges if r[0] >= 0 and lanes >> r[0] & 1]
            if sub:
                self._mem_thread(i, e, t, sub)

    def _mem_thread(self, i: int, e, t: int, ranges: list) -> None:
        arr = ranges_array(ranges)  # (lane, start, end) rows: converted once
        if e.space == "global":
            groups = self._global_groups(e, arr)
        else:
            groups = self._shared_groups(e, arr, ranges)
        for key, size, base, rs in groups:
            reg = self.region(key, size)
            idx, lanes = byte_indices(rs, base)
            if size is None:  # no layout known: the region is as large as what was touched
                reg.grow(int(idx.max()) + 1 if idx.size else 0)
                size = reg.size
            if len(idx) and (int(idx.min()) < 0 or int(idx.max()) >= size):
                bad = (idx < 0) | (idx >= size)
                j = int(np.flatnonzero(bad)[0])
                if key[0] == "shared":  # past the shared window (global ones are reported above)
                    self._oob(e, "the shared window", int(idx[j]), int(idx[j]) + 1, size,
                              int(lanes[j]))
                idx, lanes = idx[~bad], lanes[~bad]
            if idx.size == 0:
                continue
            self.access(i, e, t, reg, idx, lanes)

    def _global_groups(self, e, arr: np.ndarray) -> list:
        """The ranges `arr` (an int64 array of ``(lane, start, end)`` rows) split by the global
        buffer they fall in: ``[(region key, size, base, rows)]``; reports bytes past a buffer's
        end and addresses in no buffer."""
        if not self.gbufs:  # buffer sizes unknown: one growing region per numsim allocation slot
            slots = arr[:, 1] // GLOBAL_STRIDE
            return [(("global", f"slot{int(k)}"), None, int(k) * GLOBAL_STRIDE,
                     arr[slots == k]) for k in np.unique(slots)]
        out = []
        assigned = np.zeros(len(arr), bool)
        lo, hi = int(arr[:, 1].min()), int(arr[:, 1].max())
        for bi, (base, end, name) in enumerate(self.gbufs):
            if hi < base or lo >= base + GLOBAL_STRIDE:
                continue  # no start in this buffer's slot (the mask below would be empty)
            inb = (arr[:, 1] >= base) & (arr[:, 1] < base + GLOBAL_STRIDE)
            if not any_true(inb):
                continue
            assigned |= inb
            sub = arr[inb]
            over = sub[:, 2] > end
            if any_true(over):
                j = int(np.flatnonzero(over)[0])
                self._oob(e, name, int(sub[j, 1]) - base, int(sub[j, 2]) - base,
                          end - base, int(sub[j, 0]))
            out.append((("global", name), end - base, base, sub))
        if not assigned.all():
            j = int(np.flatnonzero(~assigned)[0])
            self._oob(e, "no buffer", int(arr[j, 1]), int(arr[j, 2]), 0, int(arr[j, 0]))
        return out

    def _shared_groups(self, e, arr: np.ndarray, ranges) -> list:
        """The ranges (`ranges`, and as the int64 array `arr`) split by the CTA whose shared
        window they address: ``[(region key, size, 0, ranges)]``; reports an access outside the
        shared variable its address was computed from (`provenance`) and unknown cluster
        ranks."""
        size = self.layout.size if self.layout is not None else None
        name = self.sources.get(id(e.instr)) if e.instr is not None else None
        if name is not None and self.layout is not None and e.proxy == ev.GENERIC:
            bounds = self._bounds(name)
            if bounds is not None:
                start, end = bounds
                # the whole instruction's ranges (not only this lane class's): as before the
                # split, the first range outside the variable is reported
                full = arr if ranges is e.ranges else ranges_array(e.ranges)
                if int(full[:, 1].min()) < start or int(full[:, 2].max()) > end:
                    bad = (full[:, 1] < start) | (full[:, 2] > end)
                    lane, a, b = full[int(np.flatnonzero(bad)[0])].tolist()
                    self._oob(e, name, a - start, b - start, end - start, lane)
        starts = arr[:, 1]
        if int(starts.min()) >= 0 and int(starts.max()) >> CLUSTER_SHIFT == 0:
            # no address carries a cluster rank (the usual case): every range is in this CTA's
            # own window, at its own offset (what the loop below computes, without the loop)
            return [(("shared", e.space_cta), size, 0, arr)]
        # a shared::cluster address of another CTA is (rank + 1) << CLUSTER_SHIFT | offset
        # (numsim's address model): split the ranges by the CTA whose memory they address
        by_cta: dict = {}
        for lane, a, b in ranges:
            rank = (a >> CLUSTER_SHIFT) - 1
            cta = e.space_cta if rank < 0 else self.rank_cta.get((e.cluster, rank))
            if cta is None:
                self._oob(e, f"cluster rank {rank}", a, b, 0, lane)
                continue
            off = a & ((1 << CLUSTER_SHIFT) - 1)
            by_cta.setdefault(cta, []).append((lane, off, off + (b - a)))
        return [(("shared", c), size, 0, r) for c, r in sorted(by_cta.items())]

    def _bounds(self, name: str) -> "tuple[int, int] | None":
        """[start, end) of shared variable `name` in the layout (None when it has none);
        memoized, since the layout is fixed and every shared access asks."""
        if name not in self.symbol_bounds:
            start = self.layout.symbols.get(name)
            end = None
            for s, en, n in self.layout.regions:
                if n == name and s == start:
                    end = en
            if name == "tirx_dsmem":
                end = self.layout.size
            self.symbol_bounds[name] = (start, end) if start is not None and end is not None \
                else None
        return self.symbol_bounds[name]

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
        atomic = e.atomic or e.access == "rmw" or self.sem(e) in _STRONG
        # conflicts with the last write of each byte
        wt = reg.wt[idx]
        has = wt >= 0
        other = has & (wt != t)
        if any_true(other):
            known = vc[np.where(other, wt, 0)]
            unordered = other & (reg.wc[idx] > known)
            if atomic:
                unordered &= ~reg.watomic[idx]
            if any_true(unordered):
                j = int(np.flatnonzero(unordered)[0])
                first = self.events[reg.we[idx[j]]]
                kind = "race.write-write" if writes else "race.read-write"
                self._race(kind, first, e, reg, int(idx[j]), int(lanes[j]),
                           t1=int(reg.wt[idx[j]]), t2=t)
        if writes:
            # earlier reads by other threads
            if len(reg.cols):
                rc = reg.rc[idx]
                late = rc > vc[reg.cols][None, :]
                if t < self.nthreads and reg.colidx[t] >= 0:
                    late[:, reg.colidx[t]] = False
                if any_true(late):
                    j, u = (int(x[0]) for x in np.nonzero(late))
                    first = self.events[reg.re[idx[j], u]]
                    if not (atomic and first.atomic):
                        self._race("race.read-write", first, e, reg, int(idx[j]), int(lanes[j]),
                                   t1=int(reg.cols[u]), t2=t)
            # asynchronous reads still in flight
            self._async_conflicts(e, t, vc, reg, idx, lanes)
        elif is_async:
            self._proxy_fence(e, t, vc, reg, idx, has, wt)
        # lanes of one warp with only lockstep between them; another warp's (or an async op's)
        # order to a lane's access through a release that never saw it
        self.published.check(self, e, t, reg, idx, writes, atomic)
        if t < self.nthreads and not is_async:
            self.converged.check(self, i, e, t, reg, idx, lanes, writes, atomic, self.pos)
        # update the shadow
        if writes and t < self.nthreads:
            self._note_rmw(e, t, reg, idx, atomic)
        if writes:
            reg.wt[idx] = t
            reg.wc[idx] = vc[t]
            reg.we[idx] = i
            reg.wasync[idx] = is_async
            reg.watomic[idx] = atomic
            reg.rc[idx] = 0
            if atomic:
                self.atomic_sync(e, t, reg, idx)
        elif t < self.nthreads:
            if not atomic:
                c = reg.colidx[t]
                reg.rc[idx, c] = vc[t]
                reg.re[idx, c] = i
            else:
                self.atomic_sync(e, t, reg, idx)
                if self.rmw_hist and e.access == "read":
                    self._pend_atomic_reads(e, t, reg, idx, lanes)
        else:
            u = np.unique(idx)
            reg.async_reads.append(AsyncRead(t, int(vc[t]), u, int(u[0]), int(u[-1]), i))

    def _note_rmw(self, e, t, reg, idx, atomic) -> None:
        """Each word's atomic read-modify-writes since its last plain or strong store: per
        thread, the clock and event of its latest (the shadow keeps only the last writer, and
        a reduction's last split has usually added its own partial last)."""
        if atomic and e.access == "rmw":
            for wd in np.unique(idx // 4).tolist():
                self.rmw_hist.setdefault((reg.name, wd), {})[t] = (int(self.clock(t)[t]), e,
                                                                    wd * 4)
        elif self.rmw_hist:  # every write passes here: no work unless atomics were seen
            for wd in np.unique(idx // 4).tolist():
                self.rmw_hist.pop((reg.name, wd), None)

    def _pend_atomic_reads(self, e, t, reg, idx, lanes) -> None:
        """Record the atomic updates of a strong load's words by other threads that are not
        (yet) ordered before it (called after its own acquire: `atomic_sync` ran)."""
        vc = self.clock(t)
        seen = set()
        for wd in np.unique(idx // 4).tolist():
            for wt, (wc, w, off) in self.rmw_hist.get((reg.name, wd), {}).items():
                if wt == t or vc[wt] >= wc or (wt, wc) in seen:
                    continue
                seen.add((wt, wc))
                self.atomic_reads.setdefault(t, []).append((wt, wc, e, w, reg, off, -1))

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
        # records every live thread has seen complete can go
        if len(keep) > 256:
            live = [w for w in range(self.nthreads) if w not in self.dead]
            keep = [r for r in keep if not all(self.clock(w)[r.thread] >= r.clock
                                               for w in live)]
        reg.async_reads = keep

    def _proxy_fence(self, e, t, vc, reg, idx, has, wt) -> None:
        gen = has & ~reg.wasync[idx] & (wt < self.nthreads)
        if not gen.any():
            return
        pairs = set(zip(wt[gen].tolist(), reg.wc[idx][gen].tolist()))
        for w, c in sorted(pairs):
            if vc[w] < c:
                continue  # unordered: already reported as a race
            ok = any(f_vc[w] >= c and vc[ft] >= fc and fence_covers(sp, e.space)
                     for ft, fc, f_vc, sp in self.fences)
            if not ok:
                sel = np.flatnonzero(gen & (wt == w) & (reg.wc[idx] == c))
                j = int(sel[0])
                first = self.events[reg.we[idx[j]]]
                fence = FENCE_FOR.get(e.space, "fence.proxy.async")
                self._race("proxy.missing-fence", first, e, reg, int(idx[j]), -1,
                           message=(f"{describe_event(first)} writes through the generic proxy "
                                    f"and {describe_event(e)} reads the same bytes through the "
                                    f"async proxy with no {fence} (or fence.proxy.async) "
                                    "ordered between them (the async proxy may read stale "
                                    "data)"))
                return



def _async_read_owners(events) -> dict:
    """Async-proxy reads recorded without an op id (wgmma operands) belong to the async op the
    same warp issues next from the same instruction."""
    out, pending = {}, {}
    for i, e in enumerate(events):
        if isinstance(e, ev.MemAccess) and e.async_id is None and \
                (e.proxy == ev.ASYNC or binding(e) == "cp.async"):
            # cp.async's copy is recorded as the warp's own load and store before its issue
            pending.setdefault((e.cta, e.warp), []).append((i, e.instr))
        elif isinstance(e, ev.AsyncOp) and e.stage == "issue":
            for j, instr in pending.pop((e.cta, e.warp), []):
                if instr is e.instr:
                    out[j] = e.op_id
    return out


def check(trace, kir=None, buffers: "dict | None" = None, ignored_waits=frozenset(),
          bar_groups: "dict | None" = None) -> "tuple[list, RaceChecker]":
    """Run racecheck over a numsim trace; returns its `report.Issue`s and the checker (whose
    clocks `hbquery` reads). `ignored_waits`: ids of try_wait instructions that are not waits
    (`waituse.classify`); `bar_groups`: see `RaceChecker`."""
    rc = RaceChecker(trace, kir, buffers, ignored_waits, bar_groups)
    return rc.run(), rc
