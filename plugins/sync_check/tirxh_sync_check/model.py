"""From numsim's event trace to the per-warp synchronization programs synccheck explores.

numsim runs a kernel once and records, per warp, the memory and synchronization events of the
path each warp took (`tirxh_numsim.events`). synccheck holds those paths fixed and asks which
*other* interleavings the hardware may choose. For that it needs only the synchronizing steps of
each warp, in program order, as small immutable `Op` records; everything else (arithmetic, plain
memory accesses) commutes with every other warp's steps and is left to racecheck.

Two rewrites happen here:

- A ``try_wait`` spin loop (``mbarrier.try_wait`` events of one source line on one barrier with
  one parity, the last one successful) becomes one blocking ``mwait`` op. Its reference
  generation (the number of phases the barrier had completed when the wait returned in numsim's
  run) is kept: a wait that returns at a different generation in another interleaving consumed
  the wrong phase (phase overrun).
- ``bar.sync`` becomes ``bar_arrive`` + ``bar_wait`` so other warps may run in between.

Asynchronous completions (a TMA's ``complete_tx`` on its mbarrier) are not program-ordered with
the issuing warp: the issue op enables them, and the explorer fires them at any later point.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from tirxh_numsim import events as ev

FULL_MASK = 0xFFFFFFFF


@dataclass(frozen=True)
class Op:
    """One synchronizing step of a warp.

    kind: ``minit``, ``marrive`` (count arrivals, plus `tx` expected bytes), ``mexpect``,
    ``mcomplete`` (a warp's own ``mbarrier.complete_tx``),
    ``mwait`` (blocking parity wait), ``mprobe`` (a try_wait whose failure the path depended on),
    ``minval``, ``bar_arrive``, ``bar_wait``, ``carrive``, ``cwait`` (cluster barrier),
    ``issue`` (starts an async op that completes `tx` bytes on mbarrier `obj`), ``wg_commit`` /
    ``wg_wait`` (a warpgroup's wgmma commit_group / a wait_group that needs `count` groups
    committed by every warp of the warpgroup);
    obj: the synchronization object's key (``("mbar", cta, addr)``, ``("bar", cta, id)``,
    ``("cbar", cluster)``); count: arrivals (mbarrier) or threads (barriers); expected: a named
    barrier's declared thread count; parity / ref_gen: a wait's parity operand and the generation
    it returned at in the reference run (None: it never returned); event: the trace event (for
    source lines and witnesses); async_id: the async op an ``issue`` starts.
    """

    kind: str
    obj: tuple
    count: int = 0
    tx: int = 0
    parity: Optional[int] = None
    ref_gen: Optional[int] = None
    expected: Optional[int] = None
    async_id: Optional[int] = None
    event: Any = field(default=None, compare=False, hash=False)

    def shape(self) -> tuple:
        """The op without its event: equal shapes make warps interchangeable (symmetry)."""
        return (self.kind, self.obj, self.count, self.tx, self.parity, self.ref_gen,
                self.expected, self.async_id is not None)


@dataclass
class WarpProgram:
    """The synchronizing ops of one warp, plus facts the per-warp checks need."""

    key: tuple  # (cta, warp)
    cluster: int
    ops: list
    full_mask: int = FULL_MASK
    events: list = field(default_factory=list)  # every event of the warp, program order


@dataclass
class AsyncCompletion:
    """A ``complete_tx`` an async engine performs on an mbarrier once its op was issued."""

    async_id: int
    obj: tuple
    tx: int
    event: Any = None


@dataclass
class ClusterModel:
    """Everything the explorer needs for one cluster (one CTA when the kernel has none)."""

    cluster: int
    warps: list  # [WarpProgram]
    completions: dict  # async_id -> [AsyncCompletion]
    cta_threads: dict  # cta -> threads in the CTA
    notes: list = field(default_factory=list)  # things not modelled (-> incomplete)
    order: dict = field(default_factory=dict)  # id(event) -> position in the reference run


def threads_in_warp(block: tuple, warp: int) -> int:
    n = 1
    for d in block:
        n *= d
    return max(0, min(32, n - 32 * warp))


def warp_mask(block: tuple, warp: int) -> int:
    return (1 << threads_in_warp(block, warp)) - 1


def popcount(mask: int) -> int:
    return bin(mask & FULL_MASK).count("1")


def mbar_key(e) -> tuple:
    return ("mbar", e.space_cta, e.addr)


def build(trace, ignored=frozenset(), probes=frozenset()) -> list:
    """Split a numsim `Trace` into `ClusterModel`s (one per cluster, or per CTA).

    `ignored` / `probes`: ids of try_wait instructions whose result no control flow depends on
    (not waits: dropped) and of those whose result only picks a branch (`waituse.classify`)."""
    block = tuple(trace.block)
    cta_threads_n = 1
    for d in block:
        cta_threads_n *= d
    by_warp = trace.by_warp()
    clusters: dict = {}
    completions: dict = {}
    for e in trace.events:
        if isinstance(e, ev.MBarrierEvent) and e.op == "complete_tx" and e.by_async is not None:
            completions.setdefault(e.by_async, []).append(
                AsyncCompletion(e.by_async, mbar_key(e), e.tx_bytes, e))
    for (cta, warp), evs in sorted(by_warp.items()):
        cluster = evs[0].cluster if trace.cluster else cta
        m = clusters.setdefault(cluster, ClusterModel(cluster, [], {}, {}))
        m.cta_threads[cta] = cta_threads_n
        ops, notes = _warp_ops(evs, cta_threads_n, ignored, probes)
        m.notes.extend(notes)
        m.warps.append(WarpProgram((cta, warp), cluster, ops, warp_mask(block, warp), evs))
    order = {id(e): i for i, e in enumerate(trace.events)}
    for m in clusters.values():
        m.order = order
        ids = {op.async_id for w in m.warps for op in w.ops if op.kind == "issue"}
        m.completions = {i: completions[i] for i in ids if i in completions}
    return [clusters[k] for k in sorted(clusters)]


def _is_wait(e) -> bool:
    return isinstance(e, ev.MBarrierEvent) and e.op in ("try_wait", "test_wait")


def _warp_ops(evs: list, cta_threads: int, ignored=frozenset(),
              probes=frozenset()) -> "tuple[list, list]":
    ops: list = []
    notes: list = []
    commits = 0
    issued: set = set()
    evs = [e for e in evs if not (_is_wait(e) and id(e.instr) in ignored)]
    i = 0
    n = len(evs)
    while i < n:
        e = evs[i]
        if _is_wait(e) and id(e.instr) in probes:
            # one probe whose outcome picks a branch: taken as a wait where it succeeded (the
            # path numsim followed); the other outcome's path is not in the trace
            if e.success:
                ops.append(Op("mwait", mbar_key(e), parity=e.parity or 0, ref_gen=e.phase,
                              event=e))
                notes.append((e, "a try_wait whose result only picks a branch succeeded in "
                                 "numsim's run; the path it takes when it fails was not "
                                 "explored"))
            else:
                ops.append(Op("mprobe", mbar_key(e), parity=e.parity or 0, event=e))
            i += 1
            continue
        if _is_wait(e):
            # collapse a spin loop: same line, barrier and parity, up to the first success
            j = i
            while j < n and _is_wait(evs[j]) and evs[j].addr == e.addr and \
                    evs[j].parity == e.parity and _line(evs[j]) == _line(e) and \
                    not evs[j].success:
                j += 1
            if j < n and _is_wait(evs[j]) and evs[j].addr == e.addr and \
                    evs[j].parity == e.parity and evs[j].success:
                last = evs[j]
                if e.parity is None:
                    notes.append((last, "a state-token mbarrier wait (no parity) is not "
                                        "explored; only parity waits are modelled"))
                ops.append(Op("mwait", mbar_key(last), parity=last.parity or 0,
                              ref_gen=last.phase, event=last))
                i = j + 1
                continue
            if j >= n:  # blocked for ever in the reference run
                ops.append(Op("mwait", mbar_key(e), parity=e.parity or 0, ref_gen=None,
                              event=evs[j - 1]))
                i = j
                continue
            # failed attempts whose failure the path then depended on
            for k in range(i, j):
                ops.append(Op("mprobe", mbar_key(evs[k]), parity=evs[k].parity or 0,
                              event=evs[k]))
            i = j
            continue
        if isinstance(e, ev.AsyncOp) and e.engine == "wgmma" and e.stage in ("commit", "wait"):
            # wgmma is warpgroup-collective: a wait_group that retires group g returns only once
            # every warp of the warpgroup issued (committed) that group
            key = ("wg", e.cta, e.warp // 4)
            if e.stage == "commit":
                commits += 1
                ops.append(Op("wg_commit", key, event=e))
            else:
                keep = _imm_operand(e.instr)  # wait_group N: at most N groups stay pending
                if commits - keep > 0:
                    ops.append(Op("wg_wait", key, count=commits - keep, event=e))
            i += 1
            continue
        if isinstance(e, ev.MBarrierEvent) and \
                getattr(getattr(e.instr, "binding", None), "name", "") == "mbarrier.arrive_drop":
            notes.append((e, "mbarrier.arrive_drop lowers the expected count of later phases; "
                             "synccheck models it as a plain arrive"))
        op = _op_for(e, cta_threads)
        if op is not None:
            if op[0].kind == "issue":
                # a multicast copy records one issue per destination CTA under one op id
                if op[0].async_id in issued:
                    i += 1
                    continue
                issued.add(op[0].async_id)
            ops.extend(op)
        i += 1
    return ops, notes


def _imm_operand(instr) -> int:
    for o in getattr(instr, "operands", None) or ():
        if hasattr(o, "value"):
            return int(o.value)
    return 0


def _line(e):
    return (e.loc.file, e.loc.line) if e.loc is not None else None


def _op_for(e, cta_threads: int) -> "list | None":
    if isinstance(e, ev.MBarrierEvent):
        key = mbar_key(e)
        if e.op == "init":
            return [Op("minit", key, count=e.count, event=e)]
        if e.op == "arrive":
            return [Op("marrive", key, count=e.count, tx=e.tx_bytes, event=e)]
        if e.op == "expect_tx":
            return [Op("mexpect", key, tx=e.tx_bytes, event=e)]
        if e.op == "inval":
            return [Op("minval", key, event=e)]
        if e.op == "complete_tx" and e.by_async is None:  # mbarrier.complete_tx by a warp
            return [Op("mcomplete", key, tx=e.tx_bytes, event=e)]
        return None  # an async engine's complete_tx: fired by the explorer after its issue
    if isinstance(e, ev.BarrierEvent):
        if e.op == "warp":
            return None
        # the hardware (and numsim) counts every thread of an arriving warp
        threads = 32
        expected = e.count if e.count is not None else -(-cta_threads // 32) * 32
        key = ("bar", e.cta, e.barrier)
        if e.op == "sync" and not e.released:
            return [Op("bar_arrive", key, count=threads, expected=expected, event=e),
                    Op("bar_wait", key, expected=expected, event=e)]
        if e.op == "arrive":
            return [Op("bar_arrive", key, count=threads, expected=expected, event=e)]
        return None
    if isinstance(e, ev.ClusterBarrierEvent):
        key = ("cbar", e.cluster)
        if e.op == "arrive":
            return [Op("carrive", key, count=popcount(e.lanes), event=e)]
        return [Op("cwait", key, event=e)]
    if isinstance(e, ev.AsyncOp) and e.stage == "issue" and e.mbarrier is not None:
        return [Op("issue", ("mbar", e.space_cta, e.mbarrier), tx=e.nbytes, async_id=e.op_id,
                   event=e)]
    return None
