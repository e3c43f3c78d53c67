"""The execution engine: thread groups of warps running the structured IR with active masks.

A `Warps` object is a set of warps executing the same statement together, one numpy element per
lane. In the normal (per-warp) mode each `Warps` is exactly one warp, all warps of a CTA (or of a
cluster) are cooperatively scheduled: each runs until it blocks (`Wait`: bar.sync, an mbarrier
wait that fails, a cluster barrier), then the next runnable one runs. Kernels without such
instructions run in batched mode: one `Warps` holds every warp of many CTAs, so a 1M-thread vector
add is a handful of numpy operations per instruction. A batched run that meets a barrier it cannot
satisfy in lockstep raises `Fallback` and the run restarts in per-warp mode.

Control flow (`ir.If`, `ir.For`, `ir.Loop`, `ir.Break`) is executed with masks exactly as the PTX
emitter lowers it (a `For` exits when ``var >= stop``, or ``<=`` for a negative immediate step);
lanes reconverge at the end of each structured statement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from tirxh.api import DTYPES, ir

from . import events as ev
from .values import Unsupported, convert_bits, imm_array, storage

WARP = 32
_ANNOTATION = getattr(ir, "Annotation", None)
U32 = DTYPES["u32"]


class Fallback(Exception):
    """Batched execution cannot continue (a partial barrier); rerun in per-warp mode."""


class SimLimit(Exception):
    """The instruction budget ran out (an endless loop, or a kernel too big for the budget)."""


class Deadlock(Exception):
    """Every remaining warp is blocked."""


@dataclass
class Wait:
    """Why a warp is blocked: `ready()` says when it may resume; `resume()` runs on resumption
    (e.g. to recompute a try_wait result); `what` describes it for deadlock reports."""

    ready: Callable[[], bool]
    what: str
    resume: Optional[Callable[[], None]] = None
    soft: bool = False  # may be resumed (not ready) when no other warp can run (test_wait polls)


@dataclass
class CTA:
    linear: int
    ctaid: tuple
    rank: int = 0  # rank inside the cluster
    cluster: int = 0
    cluster_ctaid: tuple = (0, 0, 0)
    clusterid: tuple = (0, 0, 0)


@dataclass
class MBar:
    """An mbarrier object: expected arrivals, pending arrivals, tx count and phase number."""

    expected: int
    pending: int
    tx: int = 0
    phase: int = 0
    valid: bool = True


@dataclass
class Group:
    """The CTAs that run together (one CTA, one cluster, or a batch) and their shared state."""

    ctas: list
    shared: object  # memory.SharedMemory
    bars: dict = field(default_factory=dict)  # (cta_local, id) -> [arrived, generation]
    mbars: dict = field(default_factory=dict)  # (cta_local, addr) -> MBar
    cluster_bar: list = field(default_factory=lambda: [0, 0])  # [arrived warps, phase]
    cluster_arrived: dict = field(default_factory=dict)  # warp key -> phase it arrived for
    nwarps_total: int = 0
    exited_warps: dict = field(default_factory=dict)  # cta_local -> warps that finished


class Warps:
    """One or more warps executing together: registers, masks and lane identity."""

    def __init__(self, machine, group: Group, cta_locals: list, warp_ids: list):
        self.m = machine
        self.group = group
        self.ctas_local = cta_locals  # per warp: index into group.ctas
        self.warp_ids = warp_ids  # per warp: warp index inside its CTA
        nw = len(warp_ids)
        self.nwarps = nw
        self.L = nw * WARP
        lane = np.tile(np.arange(WARP), nw)
        warp = np.repeat(np.asarray(warp_ids), WARP)
        t = warp * WARP + lane
        bx, by, bz = machine.block
        self.valid = t < bx * by * bz
        self.lane = lane
        self.tid = (t % bx, (t // bx) % by, t // (bx * by))
        self.cta_local = np.repeat(np.asarray(cta_locals, np.int64), WARP)
        self.regs: list = [None] * machine.nregs
        self.exited = np.zeros(self.L, bool)
        self.seq = 0
        self.wgmma_groups: list = []  # committed groups: list of [(reg, value), ...]
        self.wgmma_open: list = []  # uncommitted wgmma results of this warp
        self.wgmma_shadow: dict = {}  # reg id -> newest pending value (chained accumulation)
        self.bulk_groups = 0
        self.cpasync_groups = 0
        self.maxnreg: "int | None" = None
        self.local = None  # memory.LocalMemory of these lanes, made at the first local access

    # -- identity ----------------------------------------------------------------------------------
    def cta(self, w: int = 0) -> CTA:
        return self.group.ctas[self.ctas_local[w]]

    def where(self) -> str:
        c = self.cta()
        return f"cta {c.ctaid} warp {self.warp_ids[0]}" if self.nwarps == 1 else \
            f"{self.nwarps} warps"

    def where_lane(self, lane: int) -> str:
        """The CTA and warp of lane `lane` of this group (for diagnostics)."""
        wi = int(lane) // WARP
        return f"cta {self.cta(wi).ctaid} warp {self.warp_ids[wi]}"

    # -- registers ---------------------------------------------------------------------------------
    def reg(self, r: ir.Reg) -> np.ndarray:
        v = self.regs[r.id]
        if v is None:
            v = self.regs[r.id] = np.zeros(self.L, storage(r.dtype))
        return v

    def set_reg(self, r: ir.Reg, value, mask: np.ndarray) -> None:
        st = storage(r.dtype)
        v = np.asarray(value)
        if v.dtype != st:
            v = convert_bits(v, st)
        cur = self.regs[r.id]
        if cur is None or mask.all():
            self.regs[r.id] = np.broadcast_to(v, (self.L,)).copy() if v.shape != (self.L,) else v
            if cur is None and not mask.all():
                self.regs[r.id] = np.where(mask, self.regs[r.id], np.zeros(1, st))
            return
        if st == np.bool_:
            self.regs[r.id] = np.where(mask, v, cur)
            return
        ut = np.dtype(f"u{st.itemsize}")
        self.regs[r.id] = np.where(mask, v.view(ut), cur.view(ut)).view(st)

    def read(self, op, dt) -> np.ndarray:
        """The value of a source operand as PTX type `dt` (a DType)."""
        if isinstance(op, ir.Reg):
            return convert_bits(self.reg(op), storage(dt))
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
        return np.broadcast_to((base + np.uint64(addr.offset & (2 ** 64 - 1))).astype(np.uint64),
                               (self.L,))

    # -- tracing -----------------------------------------------------------------------------------
    def lanes_int(self, mask: np.ndarray) -> int:
        bits = np.flatnonzero(mask[:WARP])
        return int(sum(1 << int(i) for i in bits))

    def event(self, cls, instr, mask, loc=None, **fields) -> None:
        m = self.m
        if m.trace is None:
            return
        c = self.cta()
        e = cls(cta=c.linear, warp=self.warp_ids[0], lanes=self.lanes_int(mask), seq=self.seq,
                step=m.step, instr=instr, loc=loc or getattr(instr, "loc", None),
                cluster=c.cluster, cta_rank=c.rank, **fields)
        self.seq += 1
        m.trace.events.append(e)


class Interpreter:
    """Runs one `Warps` over the kernel body as a generator that yields `Wait`s."""

    def __init__(self, machine):
        self.m = machine

    def run(self, w: Warps):
        mask = w.valid.copy()
        yield from self.block(w, self.m.kir.body, mask)
        self.m.finish_warps(w)

    def block(self, w: Warps, block: ir.Block, mask: np.ndarray):
        m = self.m
        for s in block.stmts:
            if not mask.any():
                break
            t = type(s)
            if t is ir.Instr:
                em = mask
                if s.guard is not None:
                    g = w.reg(s.guard[0])
                    em = mask & ~g if s.guard[1] else mask & g
                    if not em.any():
                        continue
                m.current_instr = s
                fn = m.dispatch(s)
                m.count(s, em)
                res = fn(w, s, em)
                if res is not None:
                    m.step += 1
                    yield res
                    if res.resume is not None:
                        res.resume()
                if w.exited.any():
                    mask = mask & ~w.exited
            elif t is ir.If:
                c = w.reg(s.cond)
                c = ~c if s.negate else c
                tm, fm = mask & c, mask & ~c
                _diverge(w, s, tm, fm, "if")
                out = np.zeros_like(mask)
                if tm.any():
                    out |= yield from self.block(w, s.then, tm)
                if s.orelse is not None and fm.any():
                    out |= yield from self.block(w, s.orelse, fm)
                elif s.orelse is None:
                    out |= fm
                mask = out & ~w.exited
            elif t is ir.For:
                yield from self.for_(w, s, mask)
                mask = mask & ~w.exited
            elif t is ir.Loop:
                live = mask
                while live.any():
                    live = yield from self.block(w, s.body, live)
                    live = live & ~w.exited
                    m.tick(live)
                mask = mask & ~w.exited
            elif t is _ANNOTATION:
                continue  # profiling annotations emit nothing in a normal build
            elif t is ir.Break:
                if s.cond is None:
                    return np.zeros_like(mask)
                c = w.reg(s.cond)
                c = ~c if s.negate else c
                _diverge(w, s, mask & c, mask & ~c, "break")
                mask = mask & ~c
            else:
                raise Unsupported(f"IR statement {type(s).__name__}")
        return mask

    def for_(self, w: Warps, s: ir.For, mask: np.ndarray):
        dt = s.var.dtype
        w.set_reg(s.var, w.read(s.start, dt), mask)
        negative = isinstance(s.step, ir.Imm) and s.step.value < 0
        live = mask
        while True:
            v = w.reg(s.var)
            stop = w.read(s.stop, dt)
            cont = (v > stop) if negative else (v < stop)
            _diverge(w, s, live & ~cont & ~w.exited, live & cont & ~w.exited, "for")
            live = live & cont & ~w.exited
            if not live.any():
                return
            live = yield from self.block(w, s.body, live)
            live = live & ~w.exited
            step = w.read(s.step, dt)
            with np.errstate(over="ignore"):
                w.set_reg(s.var, (w.reg(s.var) + step).astype(w.reg(s.var).dtype), live)
            self.m.tick(live)


def _diverge(w: Warps, stmt, taken: np.ndarray, rest: np.ndarray, how: str) -> None:
    """Record that the warp's lanes split at `stmt` (a branch, a loop exit): sync_check models
    the two sides as separate threads from here on (issue 13 class 4)."""
    if w.m.trace is not None and taken.any() and rest.any():
        w.event(ev.Divergence, None, taken, loc=stmt.loc, other=w.lanes_int(rest), construct=how)


def schedule(machine, warps: list) -> None:
    """Run the generators of `warps` cooperatively until all finish; raise Deadlock otherwise."""
    interp = Interpreter(machine)
    gens = [interp.run(w) for w in warps]
    waits: list = [None] * len(gens)
    alive = list(range(len(gens)))
    while alive:
        progressed = False
        for i in list(alive):
            wt = waits[i]
            if wt is not None and not wt.ready():
                continue
            try:
                waits[i] = next(gens[i])
            except StopIteration:
                alive.remove(i)
                waits[i] = None
            progressed = True
        if not progressed:
            soft = [i for i in alive if waits[i] is not None and waits[i].soft]
            if soft:
                for i in soft:
                    waits[i] = _Resumed()
                continue
            lines = [f"{warps[i].where()}: blocked on {waits[i].what}" for i in alive]
            raise Deadlock("every remaining warp is blocked:\n  " + "\n  ".join(lines[:16]) +
                           (f"\n  ... and {len(lines) - 16} more" if len(lines) > 16 else ""))


class _Resumed:
    """A stand-in wait that is ready at once (a soft wait forced to resume)."""

    soft = False
    what = "resumed"

    @staticmethod
    def ready():
        return True


def lane_mask_int(mask: np.ndarray) -> int:
    return int(np.packbits(mask[:WARP][::-1].astype(np.uint8)).view(">u4")[0]) \
        if mask.size >= WARP else 0


__all__ = ["Warps", "Group", "CTA", "MBar", "Wait", "Fallback", "SimLimit", "Deadlock",
           "Interpreter", "schedule", "ev"]
