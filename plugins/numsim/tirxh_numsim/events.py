"""The numsim event trace: what each warp did, in program order (the contract sync_check reads).

When `tirxh_numsim.run(..., trace=True)` runs a kernel it records one event per executed
instruction that touches memory or synchronization state. Events are plain dataclasses so that a
consumer (sync_check's synccheck and racecheck, a timeline exporter, a test) needs nothing but this
module.

Common fields (every event, from `Event`):

- ``cta``: the CTA's linear index in the grid (x fastest); ``cluster`` its cluster's linear index
  and ``cta_rank`` its rank inside the cluster (0 without clusters).
- ``warp``: the warp index inside the CTA (``tid.x + tid.y*ntid.x + ... >> 5``).
- ``lanes``: the 32-bit mask of lanes that executed the instruction (active and guard true);
  for events produced by an asynchronous engine (TMA completion, wgmma results landing) it is the
  mask of the issuing instruction.
- ``seq``: the per-warp sequence number (0, 1, 2, ... in the order the warp executed its events;
  asynchronous completions get the issuing warp's next number when they are observed).
- ``step``: the global scheduler step at which the event happened (it advances when a group of
  warps blocks): a position in the single interleaving numsim chose, used in reports only.
- ``instr``: the `tirxh.core.ir.Instr` (None for engine-side events), ``loc``: its `ir.Loc`.

Addresses: global accesses use the fake 64-bit addresses numsim gives each bound buffer (see
``buffer``); shared accesses use 32-bit shared-window offsets of the CTA given by ``space_cta``
(differs from ``cta`` for distributed shared memory). Byte ranges are half-open ``[start, end)``.

What the consumers rely on (sync_check: model, order, racecheck, groupings, lanes, warpchecks):

1. **Per-warp program order.** `Trace.by_warp` (events in trace order) is each warp's program
   order and ``seq`` numbers it 0, 1, 2, ...; nothing else about a warp's events is ordered.
2. **Per-warp attribution.** Every event belongs to one warp: ``lanes`` (and ``other``,
   ``exited``, ``membermask``) are that warp's lane masks, ``ranges`` name its lanes (0-31, or -1
   for an engine's range), ``buffer`` and ``space_cta`` are its first lane's.
3. **One interleaving, the one numsim executed.** The trace order across warps is a legal
   interleaving, and the state recorded in events is the state in that order: an mbarrier
   event's ``phase``/``pending``/``completed_phase`` are the barrier's after *this warp's*
   operation (model's reference generation of a wait, order's phase counting); a named barrier's
   generations are consecutive arrival events of (cta, id) (order, groupings); synchronizing
   accesses (atomics, acquire/release) to one word appear in the order numsim performed them
   (order's per-word replay, racecheck's reads-from).
4. **Asynchronous operations.** An ``issue`` precedes the accesses tagged with its ``op_id`` and
   its completion; each warp's operation has its own ``op_id`` (one wgmma instruction of a
   warpgroup: one issue, with its own id, per warp; racecheck joins the k-th of each warp);
   operand reads without an ``async_id`` (wgmma's, cp.async's) precede their warp's issue from
   the same instruction.

No consumer relies on *which* interleaving numsim chose beyond that: synccheck explores the others
from the per-warp programs, racecheck replays in `order.replay_order`. numsim runs a CTA's (or a
cluster's) warps in groups vectorized over their lanes (`machine.Warps`): an instruction executed
by a group records one event per warp, in warp order, and mbarrier operations act warp by warp.
Different schedules give different witnesses of the same finding (which warps a named barrier's
generations paired in the run, the order two racing accesses are reported in).
``tirxh_numsim.run(..., per_warp=True)`` runs each warp alone until it blocks (numsim's traced
schedule before the grouping): the same per-warp events (up to the mbarrier state other warps
change), several times slower, for comparing traces; no consumer needs it.

Keep this module stable: add fields with defaults at the end, never rename or reorder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

# Proxy through which a memory access is made (PTX ISA "Proxies"): ordinary ld/st/atom use the
# generic proxy; TMA, bulk copies and wgmma operand reads use the async proxy.
GENERIC = "generic"
ASYNC = "async"


@dataclass
class Event:
    """Fields shared by every event (see the module docstring for their meaning)."""

    cta: int
    warp: int
    lanes: int
    seq: int
    step: int
    instr: Any = None  # tirxh.core.ir.Instr, or None for engine-side events
    loc: Any = None  # tirxh.core.ir.Loc
    cluster: int = 0
    cta_rank: int = 0

    @property
    def kind(self) -> str:
        return type(self).__name__


@dataclass
class MemAccess(Event):
    """One memory instruction's accesses.

    space: ``global``, ``shared`` (CTA or cluster window), ``local``, ``param``;
    access: ``read``, ``write`` or ``rmw`` (atomics and reductions);
    ranges: per lane ``(lane, start, end)`` byte ranges (lane -1 for engine accesses such as a TMA
    box, which may list many ranges: a TMA load's global reads are one range per run of
    contiguous in-bounds bytes, out-of-bounds box elements read nothing); atomic:
    read-modify-write by ``atom``/``red``;
    proxy: ``generic`` or ``async``; space_cta: the CTA whose shared memory is addressed (the
    executing CTA unless ``shared::cluster`` mapped it elsewhere); buffer: the global buffer
    (kernel parameter name) or shared variable name, when known; async_id: the `AsyncOp.op_id` of
    the asynchronous operation the access belongs to (None for synchronous accesses).
    """

    space: str = "global"
    access: str = "read"
    ranges: list = field(default_factory=list)
    atomic: bool = False
    proxy: str = GENERIC
    space_cta: int = 0
    buffer: Optional[str] = None
    async_id: Optional[int] = None


@dataclass
class BarrierEvent(Event):
    """A named CTA barrier: ``bar.sync``/``barrier.sync`` (op ``sync``) or ``bar.arrive``
    (op ``arrive``); ``bar.warp.sync`` is op ``warp``.

    barrier: the barrier id (0-15); count: the thread count operand (None: all threads of the CTA);
    released: for ``sync``, True on the event recorded when the barrier released the warp (each
    sync produces one event with released=False when the warp arrives and one with released=True
    when it resumes).
    """

    op: str = "sync"
    barrier: int = 0
    count: Optional[int] = None
    released: bool = False


@dataclass
class MBarrierEvent(Event):
    """An operation on an mbarrier object (PTX ISA "Parallel Synchronization ... mbarrier").

    op: ``init``, ``arrive`` (count arrivals, may carry expect_tx), ``expect_tx``,
    ``complete_tx`` (bytes landed by an async operation), ``try_wait``/``test_wait`` (a wait
    attempt) or ``inval``;
    addr: the mbarrier's shared-window address; space_cta: the CTA owning it;
    count: ``init``'s expected arrival count or ``arrive``'s count (per lane that arrived: the
    event counts lanes x count); tx_bytes: bytes added (expect_tx) or completed (complete_tx);
    by_async: the `AsyncOp.op_id` that completed the bytes;
    parity: the parity operand of a parity wait (None for a state-token wait);
    phase: the barrier's current phase number (0, 1, 2, ...) after the operation;
    success: for waits, whether the phase waited for had completed;
    completed_phase: True when this operation completed a phase (arrivals reached zero and
    pending tx bytes are zero); pending/tx_pending: the barrier state after the operation.
    """

    op: str = "arrive"
    addr: int = 0
    space_cta: int = 0
    count: int = 0
    tx_bytes: int = 0
    by_async: Optional[int] = None
    parity: Optional[int] = None
    phase: int = 0
    success: Optional[bool] = None
    completed_phase: bool = False
    pending: int = 0
    tx_pending: int = 0


@dataclass
class AsyncOp(Event):
    """An asynchronous operation's lifecycle.

    engine: ``tma`` (cp.async.bulk.tensor), ``bulk`` (cp.async.bulk), ``cp.async`` (sm_80
    asynchronous copy), ``wgmma``;
    stage: ``issue`` (the instruction executed), ``complete`` (data landed / results written),
    ``commit`` (a commit_group closed a group), ``wait`` (a wait_group returned);
    op_id: unique per run (the same id on issue and complete); group: the bulk/wgmma/cp.async group
    number the operation belongs to (per warp, counted from 0), or the group waited for;
    direction: ``load`` (global -> shared), ``store`` (shared -> global), ``mma``;
    mbarrier: the completion mbarrier's shared address (TMA loads), with its CTA in space_cta;
    nbytes: bytes moved; accumulators: the destination register names (wgmma), whose values become
    visible at ``complete``; pending: groups still outstanding after a ``wait``.
    """

    engine: str = "tma"
    stage: str = "issue"
    op_id: int = 0
    group: Optional[int] = None
    direction: str = "load"
    mbarrier: Optional[int] = None
    space_cta: int = 0
    nbytes: int = 0
    accumulators: tuple = ()
    pending: int = 0


@dataclass
class FenceEvent(Event):
    """A fence: kind is the sync role (``fence``, ``fence.proxy.async``, ``fence.mbarrier_init``,
    ``wgmma.fence``, ``membar``); scope the scope token (``cta``, ``cluster``, ``gpu``, ``sys``)
    when given; spelling the full opcode; space the state space a proxy fence is restricted to
    (``global``, ``shared::cta``, ``shared::cluster``; None: every space)."""

    fence: str = "fence"
    scope: Optional[str] = None
    spelling: str = ""
    space: Optional[str] = None


@dataclass
class ClusterBarrierEvent(Event):
    """``barrier.cluster.arrive`` (op ``arrive``) or ``barrier.cluster.wait`` (op ``wait``,
    recorded when the wait returns); phase: the cluster barrier's phase number."""

    op: str = "arrive"
    phase: int = 0
    relaxed: bool = False


@dataclass
class WarpSync(Event):
    """A warp-collective instruction (shfl.sync, vote.sync, redux.sync, match.sync,
    bar.warp.sync, elect.sync; also mma.sync and movmatrix, .aligned with no member mask): op the
    binding name; membermask the operand (the first executing lane's); lanes those that executed
    it; exited the lanes of the warp that had exited (they need not take part)."""

    op: str = ""
    membermask: int = 0xFFFFFFFF
    exited: int = 0


@dataclass
class Divergence(Event):
    """The warp's lanes split at a branch (construct ``if``: `lanes` take the then-side, `other`
    the else-side or nothing), a loop exit (``break``/``for``: `lanes` leave the loop, `other` go
    on); instr is None, loc the construct's line. Recorded only when both sides are non-empty."""

    other: int = 0
    construct: str = "if"


@dataclass
class SetMaxNReg(Event):
    """``setmaxnreg.inc/dec``: action and the register count requested."""

    action: str = "inc"
    count: int = 0


@dataclass
class Trace:
    """All events of a run: `events` in global step order; `by_warp()` groups them."""

    events: list = field(default_factory=list)
    kernel: str = ""
    grid: tuple = (1, 1, 1)
    block: tuple = (1, 1, 1)
    cluster: Optional[tuple] = None

    def by_warp(self) -> "dict[tuple, list]":
        """``{(cta, warp): [events in program order]}``."""
        out: dict = {}
        for e in self.events:
            out.setdefault((e.cta, e.warp), []).append(e)
        return out

    def of_kind(self, cls) -> Iterator:
        return (e for e in self.events if isinstance(e, cls))

    def __iter__(self):
        return iter(self.events)

    def __len__(self):
        return len(self.events)


def lanes_of(mask: int) -> list:
    """The lane numbers set in a 32-bit lane mask."""
    return [i for i in range(32) if mask >> i & 1]
