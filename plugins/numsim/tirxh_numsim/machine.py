"""Thread groups: the warps that execute one instruction together, their registers and state.

A `Warps` object is a set of warps at the same program point, one numpy element per lane: every
instruction is executed once for all of them (vectorized over their lanes). Its execution state
is explicit (`pc`, the active `mask`, a stack of `frames` for the structured statements it is
inside: see `interp.py`), so a group can be **split** (warps that must go separate ways: some
blocked on a barrier, some spinning, some free) and groups at the same point **merged** again
(`sched.py`). Traced runs group warps the same way: `Warps.event` records one event per warp of
the group (its own lanes, CTA and sequence number), so the trace keeps each warp's program order
(see `events.py` for the contract).

Shared state lives in a `Group`: the CTAs admitted together (one cluster, or a batch of CTAs
without clusters), their shared memory, named barriers, mbarriers and cluster barrier.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from tirxh.api import ir

from .memory import LocalMemory
from .values import Unsupported, convert_bits, imm_array, storage

WARP = 32


class SimLimit(Exception):
    """The instruction budget ran out (an endless loop, or a kernel too big for the budget)."""


class Deadlock(Exception):
    """No warp can make progress. `positions`: one dict per warp (cta, warp, state, where)."""

    def __init__(self, message: str, positions: "list | None" = None, where=None):
        super().__init__(message)
        self.positions = positions or []
        self.where = where


class _Split:
    """Returned by a semantic function instead of executing: this instruction cannot run for
    these warps together (a barrier only some of them pass, a per-warp-only operation); the
    scheduler splits the group into single warps, which execute it one by one. It must be
    returned before the instruction has any effect."""

    def __repr__(self) -> str:
        return "SPLIT"


SPLIT = _Split()


@dataclass
class Wait:
    """Why a group is blocked: `ready()` says when it may resume; `resume()` runs on resumption
    (e.g. to recompute a try_wait result); `what` describes it for deadlock reports."""

    ready: Callable[[], bool]
    what: str
    resume: Optional[Callable[[], None]] = None
    soft: bool = False  # may be resumed (not ready) when no other warp can run (test_wait polls)


@dataclass
class SpinWait:
    """A group whose loop iteration repeated exactly (nothing written, same registers): it waits
    until a memory region its loop reads is written again. `regions`: the region keys read in
    the last iteration; `since`: the write clock when it blocked; `state`: every write and
    mbarrier change counted when it blocked; `loop`: the loop's `LoopInfo`."""

    regions: frozenset
    since: int
    loop: object
    what: str
    state: int = 0
    soft: bool = True  # probed when no other warp can run (the wake-up is an optimization)
    resume: Optional[Callable[[], None]] = None

    def ready_in(self, m) -> bool:
        rc = m.region_clock
        return any(rc.get(k, 0) > self.since for k in self.regions)

    def worth_probing(self, m) -> bool:
        """Whether running it once more could end the spin: only if some memory or mbarrier
        changed since it stopped (its iteration is deterministic; every write counts)."""
        return m.wclock + MBar.changes != self.state


@dataclass
class CTA:
    linear: int
    ctaid: tuple
    rank: int = 0  # rank inside the cluster
    cluster: int = 0
    cluster_ctaid: tuple = (0, 0, 0)
    clusterid: tuple = (0, 0, 0)


class MBar:
    """An mbarrier object: expected arrivals, pending arrivals, tx count and phase number.

    Every change counts in `MBar.changes` (a spin loop that arrives on an mbarrier changes
    state that other warps observe, so its iterations are not repeats)."""

    changes = 0
    __slots__ = ("expected", "pending", "tx", "phase", "valid")

    def __init__(self, expected: int, pending: int, tx: int = 0, phase: int = 0,
                 valid: bool = True):
        self.expected, self.pending, self.tx, self.phase, self.valid = \
            expected, pending, tx, phase, valid

    def __setattr__(self, name, value):
        MBar.changes += 1
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        return (f"MBar(expected={self.expected}, pending={self.pending}, tx={self.tx}, "
                f"phase={self.phase}, valid={self.valid})")


@dataclass
class Group:
    """The CTAs admitted together (one cluster, or a batch of CTAs) and their shared state."""

    ctas: list
    shared: object  # memory.SharedMemory
    bars: dict = field(default_factory=dict)  # (cta_local, id) -> [arrived, generation]
    mbars: dict = field(default_factory=dict)  # (cta_local, addr) -> MBar
    cluster_bar: list = field(default_factory=lambda: [0, 0])  # [arrived warps, phase]
    cluster_arrived: dict = field(default_factory=dict)  # warp key -> phase it arrived for
    nwarps_total: int = 0
    exited_warps: dict = field(default_factory=dict)  # cta_local -> warps that finished
    key: int = 0  # admission order (region keys, reports)


class Warps:
    """Warps executing together: registers, masks, lane identity and execution state."""

    def __init__(self, machine, group: Group, cta_locals: list, warp_ids: list):
        self.m = machine
        self.group = group
        self.ctas_local = list(cta_locals)  # per warp: index into group.ctas
        self.warp_ids = list(warp_ids)  # per warp: warp index inside its CTA
        nw = len(self.warp_ids)
        self.nwarps = nw
        self.L = nw * WARP
        lane = np.tile(np.arange(WARP), nw)
        warp = np.repeat(np.asarray(self.warp_ids), WARP)
        t = warp * WARP + lane
        bx, by, bz = machine.block
        self.valid = t < bx * by * bz
        self.lane = lane
        self.tid = (t % bx, (t // bx) % by, t // (bx * by))
        self.cta_local = np.repeat(np.asarray(self.ctas_local, np.int64), WARP)
        self.regs: list = [None] * machine.nregs
        self.exited = np.zeros(self.L, bool)
        self.alive = np.ones(self.L, bool)  # ~exited, kept to save a negation per statement
        self.exit_epoch = 0  # bumped whenever lanes exit
        self.warp_done = np.zeros(nw, bool)  # warps counted in group.exited_warps
        self.seqs = [0] * nw  # per warp: the next event's sequence number
        self.wgmma_groups: list = []  # committed groups: list of [(reg, value, lanes), ...]
        self.wgmma_open: list = []  # uncommitted wgmma results
        self.wgmma_shadow: dict = {}  # reg id -> newest pending value (chained accumulation)
        self.wgmma_warps = None  # bool per warp: the warps the pending wgmma state belongs to
        self.wgmma_last = None  # the last wgmma's result matrix (sem_mma: chained accumulation)
        self.bulk_groups = 0
        self.cpasync_groups = 0
        self.maxnreg: "int | None" = None
        self.local = None  # memory.LocalMemory of these lanes, made at the first local access
        self.sregs: dict = {}  # per-lane constant special registers (ctaid, ...), cached
        # execution state (interp.py): next op, active lanes, structured-statement frames
        self.pc = 0
        self.mask = self.valid.copy()
        self.frames: list = []
        self.wait = None
        self.split_at = None  # the pc this group was split at (not merged again there)
        self.reads: dict = {}  # memory region key -> read counter when last read
        self.rclock = 0

    # -- identity ----------------------------------------------------------------------------------
    def cta(self, w: int = 0) -> CTA:
        return self.group.ctas[self.ctas_local[w]]

    def where(self) -> str:
        """The CTA and warps of this group, for diagnostics (a traced run groups warps too, and
        its findings name them as a per-warp run did)."""
        c = self.cta()
        ctas = set(self.ctas_local)
        if len(ctas) == 1:
            return f"cta {c.ctaid} {warps_text(tuple(self.warp_ids))}"
        return f"{self.nwarps} warps of {len(ctas)} CTAs (the first: cta {c.ctaid} " \
            f"warp {self.warp_ids[0]})"

    def where_lane(self, lane: int) -> str:
        """The CTA and warp of lane `lane` of this group (for diagnostics)."""
        wi = int(lane) // WARP
        return f"cta {self.cta(wi).ctaid} warp {self.warp_ids[wi]}"

    def warps_of(self, mask: np.ndarray) -> np.ndarray:
        """Bool per warp: the warps with a lane in `mask`."""
        if self.nwarps == 1:
            return np.array([bool(mask.any())])
        return mask.reshape(self.nwarps, WARP).any(axis=1)

    # -- registers ---------------------------------------------------------------------------------
    def reg(self, r: ir.Reg) -> np.ndarray:
        v = self.regs[r.id]
        if v is None:
            v = self.regs[r.id] = np.zeros(self.L, storage(r.dtype))
        return v

    def set_reg(self, r: ir.Reg, value, mask: np.ndarray) -> None:
        """Write `value` into the lanes of `mask`. Register arrays are owned by the group and
        updated in place (never aliased to a value that the caller keeps)."""
        st = storage(r.dtype)
        v = value if isinstance(value, np.ndarray) else np.asarray(value)
        if v.dtype != st:
            v = convert_bits(v, st)
        cur = self.regs[r.id]
        if cur is None:
            cur = self.regs[r.id] = np.zeros(self.L, st)
        np.copyto(cur, v, where=mask)

    def read(self, op, dt) -> np.ndarray:
        """The value of a source operand as PTX type `dt` (a DType)."""
        if isinstance(op, ir.Reg):
            v = self.regs[op.id]
            if v is None:
                v = self.reg(op)
            st = storage(dt)
            return v if v.dtype == st else convert_bits(v, st)
        if isinstance(op, ir.Imm):
            return imm_array(op.value, dt)
        if isinstance(op, ir.SReg):
            return convert_bits(self.m.sreg(self, op.name), storage(dt))
        if isinstance(op, ir.Sym):
            if op.space == "shared":
                return imm_array(self.m.shared_layout.symbols[op.name], dt)
            if op.space == "local":
                return imm_array(self.m.local_layout.symbols[op.name], dt)
            addr = self.m.param_addr.get(op.name)
            if addr is None:
                raise Unsupported(f"taking the address of unknown parameter {op.name!r}")
            return imm_array(addr, dt)
        raise Unsupported(f"operand {op!r} as a value")

    def write(self, op, value, mask: np.ndarray) -> None:
        if isinstance(op, ir.Reg):
            self.set_reg(op, value, mask)
        elif isinstance(op, ir.Sink):
            return
        else:
            raise Unsupported(f"destination operand {op!r}")

    def address(self, addr: ir.Addr) -> np.ndarray:
        """Per-lane address (uint64) of a memory operand ``[base+offset]``."""
        b = addr.base
        if isinstance(b, ir.Reg):
            base = self.reg(b)
            base = base.astype(np.uint64) if base.dtype.itemsize == 8 else \
                base.view(np.uint32).astype(np.uint64) if base.dtype.itemsize == 4 else \
                base.astype(np.uint64)
        elif isinstance(b, ir.Sym):
            if b.space == "shared":
                base = np.uint64(self.m.shared_layout.symbols[b.name])
            elif b.space == "local":
                base = np.uint64(self.m.local_layout.symbols[b.name])
            else:
                raise Unsupported(f"address of parameter symbol {b.name!r} outside ld.param")
        else:
            base = np.uint64(int(b))
        if addr.offset:
            base = base + np.uint64(addr.offset & (2 ** 64 - 1))
        return np.broadcast_to(base, (self.L,))

    # -- exits -------------------------------------------------------------------------------------
    def exit_lanes(self, mask: np.ndarray) -> None:
        """Lanes of `mask` leave the kernel; warps left with no live lane count as exited for
        their CTA's barriers at once (bar.sync without a count expects the others only)."""
        self.exited = self.exited | mask
        self.alive = ~self.exited
        self.exit_epoch += 1
        done = ~(self.valid & self.alive).reshape(self.nwarps, WARP).any(axis=1)
        for i in np.flatnonzero(done & ~self.warp_done):
            c = self.ctas_local[i]
            self.group.exited_warps[c] = self.group.exited_warps.get(c, 0) + 1
        self.warp_done = self.warp_done | done

    # -- splitting and merging ---------------------------------------------------------------------
    def split(self, parts: list) -> list:
        """New groups, one per list of warp indices in `parts` (in order), with this group's
        state (registers, frames, pending wgmma results, local memory) cut to their lanes."""
        out = []
        for part in parts:
            idx = (np.asarray(part, np.int64)[:, None] * WARP + np.arange(WARP)).reshape(-1)
            out.append(self._take(part, idx))
        return out

    def _take(self, part: list, idx: np.ndarray) -> "Warps":
        n = Warps.__new__(Warps)
        n.__dict__.update(self.__dict__)
        n.ctas_local = [self.ctas_local[i] for i in part]
        n.warp_ids = [self.warp_ids[i] for i in part]
        n.seqs = [self.seqs[i] for i in part]
        n.nwarps = len(part)
        n.L = n.nwarps * WARP
        for name in ("valid", "lane", "cta_local", "exited", "alive", "mask"):
            setattr(n, name, getattr(self, name)[idx])
        n.tid = tuple(t[idx] for t in self.tid)
        n.warp_done = self.warp_done[np.asarray(part, np.int64)]
        n.regs = [None if r is None else r[idx] for r in self.regs]
        n.frames = [[_cut(x, idx) for x in fr] for fr in self.frames]
        n.sregs = {}
        n.local = None if self.local is None else self.local.take(idx)
        n.reads = dict(self.reads)
        wsel = np.asarray(part, np.int64)
        if self.wgmma_warps is not None and self.wgmma_warps[wsel].any():
            n.wgmma_warps = self.wgmma_warps[wsel]
            n.wgmma_open = [[(r, v[idx], lm[idx]) for r, v, lm in op] for op in self.wgmma_open]
            n.wgmma_groups = [[[(r, v[idx], lm[idx]) for r, v, lm in op] for op in grp]
                              for grp in self.wgmma_groups]
            n.wgmma_shadow = {k: v[idx] for k, v in self.wgmma_shadow.items()}
        else:
            n.wgmma_warps, n.wgmma_open, n.wgmma_groups, n.wgmma_shadow = None, [], [], {}
        n.wait = None
        n.wgmma_last = None
        return n

    def mergeable(self, o: "Warps") -> bool:
        """Whether `o` can join this group: same CTAs' group, same point, same frame shapes, and
        pending wgmma state of the same structure."""
        if o.group is not self.group or o.pc != self.pc or len(o.frames) != len(self.frames):
            return False
        if self.maxnreg != o.maxnreg:
            return False
        if self.m.trace is not None and (self.bulk_groups != o.bulk_groups or
                                         self.cpasync_groups != o.cpasync_groups):
            return False  # the trace records each warp's group numbers
        a, b = self.wgmma_warps is not None, o.wgmma_warps is not None
        if a != b:
            return False
        if a:
            if len(self.wgmma_open) != len(o.wgmma_open) or \
                    len(self.wgmma_groups) != len(o.wgmma_groups) or \
                    self.wgmma_shadow.keys() != o.wgmma_shadow.keys():
                return False
            for x, y in zip(self.wgmma_open + [op for g in self.wgmma_groups for op in g],
                            o.wgmma_open + [op for g in o.wgmma_groups for op in g]):
                if [r.id for r, _, _ in x] != [r.id for r, _, _ in y]:
                    return False
            if [len(g) for g in self.wgmma_groups] != [len(g) for g in o.wgmma_groups]:
                return False
        return True

    @staticmethod
    def merge(ws: list) -> "Warps":
        """One group of the (mergeable) groups `ws`, warps in (CTA, warp) order."""
        first = ws[0]
        n = Warps.__new__(Warps)
        n.__dict__.update(first.__dict__)
        keys = [(c, wid) for w in ws for c, wid in zip(w.ctas_local, w.warp_ids)]
        order = sorted(range(len(keys)), key=keys.__getitem__)
        perm = (np.asarray(order, np.int64)[:, None] * WARP + np.arange(WARP)).reshape(-1)

        def cat(arrs):
            return np.concatenate(arrs)[perm]
        n.ctas_local = [keys[i][0] for i in order]
        n.warp_ids = [keys[i][1] for i in order]
        seqs = [x for w in ws for x in w.seqs]
        n.seqs = [seqs[i] for i in order]
        n.nwarps = len(keys)
        n.L = n.nwarps * WARP
        for name in ("valid", "lane", "cta_local", "exited", "alive", "mask"):
            setattr(n, name, cat([getattr(w, name) for w in ws]))
        n.tid = tuple(cat([w.tid[a] for w in ws]) for a in range(3))
        n.warp_done = np.concatenate([w.warp_done for w in ws])[np.asarray(order, np.int64)]
        n.exit_epoch = max(w.exit_epoch for w in ws) + 1
        regs = []
        for i, r in enumerate(first.regs):
            col = [w.regs[i] for w in ws]
            if all(c is None for c in col):
                regs.append(None)
                continue
            dt = next(c.dtype for c in col if c is not None)
            regs.append(cat([c if c is not None else np.zeros(w.L, dt)
                             for c, w in zip(col, ws)]))
        n.regs = regs
        n.frames = [[_join(xs, perm) for xs in zip(*frs)] for frs in zip(*(w.frames for w in ws))]
        n.sregs = {}
        locs = [w.local for w in ws]
        n.local = None
        if any(x is not None for x in locs):
            layout = next(x for x in locs if x is not None).layout
            locs = [x if x is not None else LocalMemory(layout, w.L) for x, w in zip(locs, ws)]
            n.local = locs[0].join(locs, perm)
        n.reads = {}
        for w in ws:
            for k, v in w.reads.items():
                n.reads[k] = max(v, n.reads.get(k, 0))
        n.rclock = max(w.rclock for w in ws)
        if first.wgmma_warps is not None:
            n.wgmma_warps = np.concatenate([w.wgmma_warps for w in ws])[
                np.asarray(order, np.int64)]
            n.wgmma_open = [_join_ops([w.wgmma_open[j] for w in ws], perm)
                            for j in range(len(first.wgmma_open))]
            n.wgmma_groups = [[_join_ops([w.wgmma_groups[g][j] for w in ws], perm)
                               for j in range(len(first.wgmma_groups[g]))]
                              for g in range(len(first.wgmma_groups))]
            n.wgmma_shadow = {k: cat([w.wgmma_shadow[k] for w in ws])
                              for k in first.wgmma_shadow}
        n.wait = None
        n.wgmma_last = None
        return n

    # -- tracing -----------------------------------------------------------------------------------
    def lanes_int(self, mask: np.ndarray, w: int = 0) -> int:
        """Warp `w`'s lanes set in the group-lane mask `mask`, as a 32-bit lane mask."""
        return int(np.packbits(mask[w * WARP:(w + 1) * WARP], bitorder="little").view("<u4")[0])

    def _lane_masks(self, mask: np.ndarray) -> np.ndarray:
        """Every warp's 32-bit lane mask of the group-lane mask `mask` (uint32 per warp)."""
        return np.packbits(mask.reshape(self.nwarps, WARP), axis=1,
                           bitorder="little").view("<u4")[:, 0]

    def event(self, cls, instr, mask, loc=None, **fields) -> None:
        """Record `cls` for each warp of the group with a lane in `mask` (group lanes), in warp
        order: the event carries that warp's CTA, lanes and next sequence number.

        Fields may be given per lane of the group: a numpy array of `L` elements becomes the
        warp's value (a bool array its 32-bit lane mask, any other array the value in its first
        lane of `mask`); ``ranges`` name group lanes (``-1``: an engine range, recorded for
        every warp of `mask`), recorded with the warp's own lane numbers."""
        m = self.m
        if m.trace is None:
            return
        loc = loc or getattr(instr, "loc", None)
        lanes = self._lane_masks(mask).tolist()
        warps = [j for j in range(self.nwarps) if lanes[j]] if self.nwarps > 1 else [0]
        per: dict = {}  # field -> value per warp index
        first = None
        for k, v in fields.items():
            if isinstance(v, np.ndarray) and v.shape == (self.L,):
                if v.dtype == bool:
                    per[k] = self._lane_masks(v).tolist()
                else:
                    if first is None:
                        first = np.arange(self.nwarps) * WARP + \
                            mask.reshape(self.nwarps, WARP).argmax(axis=1)
                    per[k] = v[first].tolist()
            elif k == "ranges" and v:
                own: list = [[] for _ in range(self.nwarps)]
                for ln, a, b in v:
                    if ln >= 0:
                        own[ln >> 5].append((ln & 31, a, b))
                    else:  # an engine's range: every warp's
                        for x in own:
                            x.append((-1, a, b))
                per[k] = own
        events = m.trace.events
        for j in warps:
            own = dict(fields)
            for k, vals in per.items():
                own[k] = vals[j]
            c = self.cta(j)
            events.append(cls(cta=c.linear, warp=self.warp_ids[j], lanes=lanes[j],
                              seq=self.seqs[j], step=m.step, instr=instr, loc=loc,
                              cluster=c.cluster, cta_rank=c.rank, **own))
            self.seqs[j] += 1

    def each_warp(self, mask: np.ndarray):
        """`mask` cut to each warp that has a lane in it, in warp order (for what a traced run
        records warp by warp: each warp's wgmma or cp.async issue has its own op id)."""
        if self.nwarps == 1:
            yield mask
            return
        for j in np.flatnonzero(mask.reshape(self.nwarps, WARP).any(axis=1)).tolist():
            one = np.zeros(self.L, bool)
            one[j * WARP:(j + 1) * WARP] = mask[j * WARP:(j + 1) * WARP]
            yield one


def warps_text(ws: tuple) -> str:
    """``warp 3``, ``warps 0-3``, ``warps 0, 2, 5``."""
    if len(ws) == 1:
        return f"warp {ws[0]}"
    if ws == tuple(range(ws[0], ws[-1] + 1)) and len(ws) > 2:
        return f"warps {ws[0]}-{ws[-1]}"
    return "warps " + ", ".join(str(x) for x in ws)


def _cut(x, idx):
    """A frame slot cut to lanes `idx`: lane arrays are sliced, a loop's fingerprint is
    dropped (it describes the whole group), scalars are kept."""
    if isinstance(x, np.ndarray):
        return x[idx]
    if isinstance(x, tuple):
        return None
    return x


def _join(xs, perm):
    x0 = xs[0]
    if isinstance(x0, np.ndarray):
        return np.concatenate(xs)[perm]
    if x0 is None or isinstance(x0, tuple):
        return None
    return max(xs) if isinstance(x0, int) else x0


def _join_ops(ops: list, perm) -> list:
    """One wgmma operation's results from several groups: [(reg, value, lanes), ...]."""
    return [(col[0][0], np.concatenate([c[1] for c in col])[perm],
             np.concatenate([c[2] for c in col])[perm]) for col in zip(*ops)]


__all__ = ["Warps", "Group", "CTA", "MBar", "Wait", "SpinWait", "SPLIT", "SimLimit", "Deadlock"]
