"""One simulated launch: grid iteration, memory access with diagnostics, special registers.

`Machine` owns the launch state (bound buffers, param space, diagnostics, statistics, the event
trace) and provides the services semantic functions call: `load`/`store` (bounds-checked,
diagnosed, traced), `sreg`, `finding`. `launch()` admits the grid's CTAs to the scheduler
(`sched.py`): groups of warps that run vectorized together (split where they diverge at barriers
and spins, merged again where they meet): batches of CTAs without a trace, one CTA at a time
with one (which records each warp's events in its program order all the same: `Warps.event`,
`events.py`). `per_warp` runs one warp per group (the traced mode before, kept to compare
traces).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from tirxh.api import Finding, ir, SourceRef

from . import events as ev
from .interp import Code
from .machine import CTA, WARP, Deadlock, Group, SimLimit, Warps
from .memory import (CLUSTER_SHIFT, PARAM_BASE, SHARED_GENERIC, SHARED_GENERIC_END, GlobalMemory,
                     LocalLayout, LocalMemory, ParamSpace, SharedLayout, SharedMemory)
from . import residency
from .residency import Need
from .sched import Scheduler
from .semantics import lookup
from .values import Unsupported, uint_of

MAX_FINDINGS_PER_SITE = 1
BATCH_LANES = 1 << 17  # lanes of the CTAs admitted together without a trace
BATCH_LOCAL_BYTES = 1 << 26  # ... and at most this much local memory
BATCH_SHARED_BYTES = 1 << 28  # ... and shared memory (with its initialized-byte map)
GLOBAL = "global"  # the memory-region key of global memory (spin-loop wake-ups; sem_async too)


class Machine:
    def __init__(self, kir: ir.KernelIR, grid: tuple, *, trace: bool = False,
                 max_instructions: int = 50_000_000, max_ctas: "int | None" = None,
                 regs: "int | None" = None, per_warp: bool = False):
        self.kir = kir
        self.grid = tuple(grid) + (1,) * (3 - len(grid))
        self.block = tuple(kir.block)
        self.cluster = tuple(kir.cluster) if kir.cluster else (1, 1, 1)
        self.nregs = max([r.id for r in kir.regs], default=-1) + 1
        self.shared_layout = SharedLayout.of(kir)
        self.local_layout = LocalLayout.of(kir)
        self.gmem = GlobalMemory()
        self.params = ParamSpace()
        self.findings: list = []
        self._sites: Counter = Counter()
        self._site_finding: dict = {}
        self.incomplete: list = []
        self.trace = ev.Trace(kernel=kir.name, grid=self.grid, block=self.block,
                              cluster=kir.cluster) if trace else None
        self.step = 0
        self.lane_instructions = 0
        self.warp_instructions = 0
        self.group_instructions = 0  # instructions executed, each once for its group's warps
        self.merges = 0  # groups of warps joined again (sched.py)
        self.splits = 0  # groups split apart
        self.max_instructions = max_instructions
        self.code = Code(kir)
        self.pc_warps = [0] * len(self.code.ops)  # warp-instructions executed per op
        self.pc_lanes = [0] * len(self.code.ops)  # lane-instructions executed per op
        self.pc_execs = [0] * len(self.code.ops)  # executions per op (once per group)
        self.budget_left = max_instructions  # kept by the interpreter (interp.py)
        self.wclock = 0  # bumped by every memory write (spin-loop detection)
        self.region_clock: dict = {}  # memory region key -> wclock of its last write
        self.max_ctas = max_ctas
        self.regs = regs  # registers per thread of the compiled kernel, when known
        self.residency = Need()  # CTAs that had to be resident together (sched, residency)
        self._dispatch: dict = {}
        self.async_ids = 0
        self.per_warp = per_warp  # one warp per group, one CTA per unit (api.run)
        self.mode = "per-warp" if per_warp else "batched"
        self.ctas_run = 0
        self.clock = 0
        self.current_instr = None
        self.param_addr = {p.name: PARAM_BASE + 256 * i for i, p in enumerate(kir.params)}
        self.param_at = {a: n for n, a in self.param_addr.items()}

    # -- setup -------------------------------------------------------------------------------------
    def bind(self, inputs: dict, tensormaps: dict) -> None:
        """Bind kernel parameters from `inputs` (arrays for pointers, numbers for scalars)."""
        for i, p in enumerate(self.kir.params):
            if p.kind == "tensormap":
                if p.name not in tensormaps:
                    raise ValueError(f"kernel {self.kir.name!r}: tensor-map parameter {p.name!r} "
                                     "has no T.TensorMap in the inputs")
                self.params.tensormaps[p.name] = tensormaps[p.name]
                continue
            if p.name not in inputs:
                raise ValueError(f"kernel {self.kir.name!r}: no input for parameter {p.name!r} "
                                 f"(inputs have {', '.join(sorted(inputs)) or 'nothing'})")
            v = inputs[p.name]
            if p.kind == "ptr":
                if not isinstance(v, np.ndarray):
                    raise ValueError(f"kernel {self.kir.name!r}: parameter {p.name!r} is a "
                                     f"pointer; expected a numpy array, got {type(v).__name__}")
                buf = self.gmem.bind(p.name, i, v)
                self.params.values[p.name] = np.uint64(buf.base)
            else:
                nd = p.dtype.numpy
                if isinstance(v, np.ndarray) and v.ndim > 0:
                    raise ValueError(f"kernel {self.kir.name!r}: parameter {p.name!r} is a scalar "
                                     f"{p.dtype}; got an array of shape {v.shape}")
                self.params.values[p.name] = np.asarray(v).astype(nd) if nd.kind != "V" else v

    # -- services for semantics --------------------------------------------------------------------
    def dispatch(self, instr: ir.Instr):
        fn = self._dispatch.get(instr)
        if fn is None:
            sem = lookup(instr.binding.name)
            if sem is None or sem.fn is None:
                why = sem.note if sem is not None else "numsim has no semantics for it"
                raise Unsupported(f"{instr.loc}: {instr.spelling} (binding "
                                  f"{instr.binding.name!r}): {why}") from None
            fn = self._dispatch[instr] = sem.fn
        return fn

    def flush_counts(self) -> None:
        """Instruction totals from the per-op counters the interpreter keeps."""
        self.warp_instructions = sum(self.pc_warps)
        self.lane_instructions = sum(self.pc_lanes)
        self.group_instructions = sum(self.pc_execs)

    @property
    def op_counts(self) -> Counter:
        """Warp-instructions executed per binding."""
        out: Counter = Counter()
        for op, n in zip(self.code.ops, self.pc_warps):
            if n:
                out[op[1].binding.name] += n
        return out

    def loop_counts(self) -> list:
        """[(warp-instructions, LoopInfo)] for every loop, most first: the instructions executed
        inside each loop (its inner loops included)."""
        code = self.code
        per = [0] * len(code.loops)
        for pc, n in enumerate(self.pc_warps):
            li = code.loop_of[pc]
            if n and li >= 0:
                per[li] += n
        parent = [info.parent for info in code.loops]
        total = list(per)
        for li in range(len(per)):
            p = parent[li]
            while p >= 0:
                total[p] += per[li]
                p = parent[p]
        return sorted(((total[i], code.loops[i]) for i in range(len(per)) if total[i]),
                      key=lambda x: -x[0])

    def budget_message(self, pc: int) -> str:
        """Why the run stopped at the instruction budget: how much ran, and which loop (with its
        source line) used the budget, so that a hang can be told from a slow kernel."""
        n, lanes = self.warp_instructions, self.lane_instructions
        msg = (f"instruction budget of {self.max_instructions} warp-instructions exhausted: "
               f"{n} warp-instructions ({lanes} lane-instructions) ran")
        loops = self.loop_counts()
        inner = self.code.loops[self.code.loop_of[pc]] if self.code.loop_of[pc] >= 0 else None
        if loops:
            top = [x for x in loops if x[1] is not loops[0][1] and x[0] == loops[0][0]]
            best = top[-1] if top else loops[0]  # the innermost of equally busy loops
            msg += (f"; {best[0]} of them ({100 * best[0] / max(n, 1):.1f}%) in the "
                    f"{best[1].kind} at {best[1].loc}")
        if inner is not None:
            msg += f"; running the {inner.kind} at {inner.loc} when it ran out"
        instr = self.current_instr
        if instr is not None:
            msg += f" (at {instr.spelling}, {instr.loc})"
        return msg + (": a loop that never exits, or a kernel too big for the budget "
                      "([numsim] max_instructions)")

    def wrote(self, key) -> None:
        """A memory write to region `key` (None: private memory): wakes spinning groups."""
        self.wclock += 1
        if key is not None:
            self.region_clock[key] = self.wclock

    def finding(self, kind: str, message: str, instr=None, *, severity: str = "error",
                lanes=(), addresses=(), w: "Warps | None" = None, data=None,
                at_lane: "int | None" = None) -> None:
        """Record a diagnostic once per (kind, instruction); later hits are counted in data."""
        key = (kind, id(instr))
        self._sites[key] += 1
        if self._sites[key] > MAX_FINDINGS_PER_SITE:
            first = self._site_finding.get(key)
            if first is not None:
                first.data["occurrences"] = self._sites[key]
            return
        where = SourceRef(instr.loc.file, instr.loc.line) if instr is not None else None
        warps = [w.where() if at_lane is None else w.where_lane(at_lane)] if w is not None \
            else []
        d = {"kernel": self.kir.name, "occurrences": 1}
        if instr is not None:
            d["instruction"] = instr.spelling
        d.update(data or {})
        f = Finding(kind, message, severity, where, [], warps, [int(x) for x in lanes][:8],
                    [hex(int(a)) for a in addresses][:8], [], d)
        self._site_finding[key] = f
        self.findings.append(f)

    def sreg(self, w: Warps, name: str) -> np.ndarray:
        """The value of special register `name` for `w`'s lanes (cached per group, read-only,
        except the clocks)."""
        hit = w.sregs.get(name)
        if hit is not None:
            return hit
        v = self._sreg(w, name)
        if not name.startswith(("clock", "globaltimer")):
            v.setflags(write=False)
            w.sregs[name] = v
        return v

    def _sreg(self, w: Warps, name: str) -> np.ndarray:
        base, _, comp = name.partition(".")
        ax = "xyz".index(comp) if comp in ("x", "y", "z") else 0
        L = w.L

        def per_warp(fn):
            per_cta = {}
            vals = [per_cta[c] if c in per_cta else per_cta.setdefault(c, fn(i))
                    for i, c in enumerate(w.ctas_local)]
            return np.repeat(np.array(vals, np.uint32), WARP)
        if base == "tid":
            return w.tid[ax].astype(np.uint32)
        if base == "ntid":
            return np.full(L, self.block[ax], np.uint32)
        if base == "ctaid":
            return per_warp(lambda i: w.cta(i).ctaid[ax])
        if base == "nctaid":
            return np.full(L, self.grid[ax], np.uint32)
        if base == "laneid":
            return w.lane.astype(np.uint32)
        if base == "warpid":
            return np.repeat(np.asarray(w.warp_ids, np.uint32), WARP)
        if base == "nwarpid":
            return np.full(L, -(-int(np.prod(self.block)) // WARP), np.uint32)
        if base == "cluster_ctaid":
            return per_warp(lambda i: w.cta(i).cluster_ctaid[ax])
        if base == "cluster_nctaid":
            return np.full(L, self.cluster[ax], np.uint32)
        if base == "clusterid":
            return per_warp(lambda i: w.cta(i).clusterid[ax])
        if base == "nclusterid":
            return np.full(L, self.grid[ax] // self.cluster[ax], np.uint32)
        if base == "cluster_ctarank":
            return per_warp(lambda i: w.cta(i).rank)
        if base == "cluster_nctarank":
            return np.full(L, int(np.prod(self.cluster)), np.uint32)
        if base == "is_explicit_cluster":
            return np.full(L, self.kir.cluster is not None, bool)
        if base.startswith("lanemask_"):
            lane = w.lane.astype(np.uint64)
            one = np.uint64(1)
            full = np.uint64(0xFFFFFFFF)
            v = {"eq": one << lane, "lt": (one << lane) - one, "le": (one << (lane + one)) - one,
                 "gt": full & ~((one << (lane + one)) - one), "ge": full & ~((one << lane) - one)
                 }[base.split("_")[1]]
            return (v & full).astype(np.uint32)
        if base in ("clock", "clock64", "globaltimer"):
            # representative: a counter that only increases (numsim has no cycle model)
            self.clock += 1
            dt = np.uint32 if base == "clock" else np.uint64
            return np.full(L, self.clock * 4, dt)
        if base == "smid":
            return per_warp(lambda i: w.cta(i).linear % 132)
        if base == "nsmid":
            return np.full(L, 132, np.uint32)
        if base == "dynamic_smem_size":
            return np.full(L, self.kir.dynamic_smem, np.uint32)
        if base == "total_smem_size":
            return np.full(L, self.shared_layout.size, np.uint32)
        if base == "gridid":
            return np.zeros(L, np.uint64)
        raise Unsupported(f"special register %{name}")

    # -- memory ------------------------------------------------------------------------------------
    def _space(self, space: "str | None") -> str:
        if space in (None, "generic"):
            return "generic"
        if space in ("shared", "shared::cta"):
            return "shared"
        return space

    def check_aligned(self, w: Warps, instr, addrs, mask, align: int, what: str) -> bool:
        """Report lanes in `mask` whose address in `addrs` is not a multiple of `align` as a
        ``numsim.misaligned`` finding (the GPU faults: CUDA_ERROR_MISALIGNED_ADDRESS); True when
        every lane is aligned. `what` names the access (``16-byte ldmatrix row``)."""
        lanes = np.flatnonzero(mask)
        if lanes.size == 0:
            return True
        full = np.broadcast_to(np.asarray(addrs, np.uint64), (w.L,))
        off = full[lanes] % np.uint64(align)
        if not off.any():
            return True
        bad = lanes[off != 0]
        self.finding("numsim.misaligned", f"misaligned {what} by lane {int(bad[0]) % WARP} "
                     f"({w.where_lane(bad[0])}) at {hex(int(full[bad[0]]))} (not a multiple of "
                     f"{align}) in kernel {self.kir.name!r}", instr, lanes=bad % WARP,
                     addresses=full[bad], w=w, at_lane=int(bad[0]))
        return False

    def load(self, w: Warps, instr, space, addrs: np.ndarray, mask: np.ndarray,
             nbytes: int) -> np.ndarray:
        """Read `nbytes`-wide words at per-lane `addrs` for lanes in `mask` (others get 0)."""
        return self._access(w, instr, space, addrs, mask, nbytes, None)

    def store(self, w: Warps, instr, space, addrs, mask, nbytes: int, words) -> None:
        self._access(w, instr, space, addrs, mask, nbytes, words)

    def _access(self, w, instr, space, addrs, mask, nbytes, words, *, atomic_rmw=None):
        space = self._space(space)
        out = np.zeros(w.L, uint_of(nbytes))
        lanes = np.flatnonzero(mask)
        if lanes.size == 0:
            return out
        a = np.asarray(addrs, np.uint64)[lanes]
        self.check_aligned(w, instr, addrs, mask, nbytes, f"{nbytes}-byte {space} access")
        if space == "generic":
            sh = (a >= np.uint64(SHARED_GENERIC)) & (a < np.uint64(SHARED_GENERIC_END))
            if sh.any():
                sub = np.zeros(w.L, bool)
                sub[lanes[sh]] = True
                sa = np.asarray(addrs, np.uint64) - np.uint64(SHARED_GENERIC)
                r = self._access(w, instr, "shared", sa, sub, nbytes,
                                 words, atomic_rmw=atomic_rmw)
                out[sub] = r[sub]
            if (~sh).any():
                sub = np.zeros(w.L, bool)
                sub[lanes[~sh]] = True
                r = self._access(w, instr, "global", addrs, sub, nbytes, words,
                                 atomic_rmw=atomic_rmw)
                out[sub] = r[sub]
            return out
        if space == "global":
            bidx, off, ok = self.gmem.locate(a, nbytes)
            if not ok.all():
                bad = lanes[~ok]
                ba = a[~ok]
                self.finding("numsim.out-of-bounds", f"out-of-bounds global "
                             f"{'write' if words is not None else 'read'} of {nbytes} bytes by "
                             f"lane {int(bad[0]) % WARP} ({w.where_lane(bad[0])}) at "
                             f"{hex(int(ba[0]))} "
                             f"({self.gmem.name_of(int(ba[0]))}) in kernel {self.kir.name!r}",
                             instr, lanes=bad % WARP, addresses=ba, w=w, at_lane=int(bad[0]),
                             data={"buffer": self.gmem.name_of(int(ba[0]))})
            gl, bidx, off = lanes[ok], bidx[ok], off[ok]
            if atomic_rmw is not None:
                self._read_region(w, GLOBAL)
                old, changed = self._serial_rmw(
                    lambda i: self.gmem.read(bidx[i:i + 1], off[i:i + 1], nbytes)[0],
                    lambda i, v: self.gmem.write(bidx[i:i + 1], off[i:i + 1], nbytes,
                                                 np.array([v])), gl, atomic_rmw, nbytes)
                out[gl] = old
                if changed:
                    self.wrote(GLOBAL)
            elif words is None:
                self._read_region(w, GLOBAL)
                out[gl] = self.gmem.read(bidx, off, nbytes)
            else:
                self.gmem.write(bidx, off, nbytes, np.asarray(words)[gl] if np.ndim(words)
                                else np.full(gl.size, words))
                self.wrote(GLOBAL)
            self._trace_mem(w, instr, "global", lanes, a, nbytes, words is not None,
                            atomic_rmw is not None, bufname=True)
            return out
        if space in ("shared", "shared::cluster"):
            cta = w.cta_local[lanes].copy()
            aa = a.astype(np.int64)
            if space == "shared::cluster":
                rank = aa >> CLUSTER_SHIFT
                remote = rank > 0
                if remote.any():
                    cta = np.where(remote, self.cta_of_rank(w, rank - 1), cta)
                aa = np.where(remote, aa & ((1 << CLUSTER_SHIFT) - 1), aa)
            sm = w.group.shared
            self._trace_mem(w, instr, "shared", lanes, aa, nbytes, words is not None,
                            atomic_rmw is not None,
                            lane_ctas=cta)
            ok = sm.in_bounds(aa, nbytes)
            if not ok.all():
                bad = lanes[~ok]
                self.finding("numsim.out-of-bounds", f"out-of-bounds shared "
                             f"{'write' if words is not None else 'read'} of {nbytes} bytes by "
                             f"lane {int(bad[0]) % WARP} ({w.where_lane(bad[0])}) at "
                             f"{hex(int(aa[~ok][0]))} (shared window is {sm.size} bytes) in "
                             f"kernel {self.kir.name!r}", instr, lanes=bad % WARP,
                             addresses=aa[~ok], w=w, at_lane=int(bad[0]))
            sl, cta, aa = lanes[ok], cta[ok], aa[ok]
            key = ("shared", w.group.key)
            if atomic_rmw is not None:
                def rd(i):
                    return sm.read(cta[i:i + 1], aa[i:i + 1], nbytes)[0][0]

                def wr(i, v):
                    sm.write(cta[i:i + 1], aa[i:i + 1], nbytes, np.array([v]))
                self._read_region(w, key)
                out[sl], changed = self._serial_rmw(rd, wr, sl, atomic_rmw, nbytes)
                if changed:
                    self.wrote(key)
            elif words is None:
                self._read_region(w, key)
                vals, init = sm.read(cta, aa, nbytes)
                out[sl] = vals
                if not init.all():
                    bad = sl[~init]
                    self.finding("numsim.uninitialized-shared", f"read of uninitialized shared "
                                 f"memory {sm.layout.name_of(int(aa[~init][0]))} by lane "
                                 f"{int(bad[0]) % WARP} ({w.where_lane(bad[0])}) in kernel "
                                 f"{self.kir.name!r}", instr, severity="review",
                                 lanes=bad % WARP, addresses=aa[~init], w=w,
                                 at_lane=int(bad[0]))
            else:
                vals = np.asarray(words)[sl] if np.ndim(words) else np.full(sl.size, words)
                sm.write(cta, aa, nbytes, vals)
                self.wrote(key)
            return out
        if space == "local":
            return self._local_access(w, instr, lanes, a, nbytes, words, out, atomic_rmw)
        if space == "param":
            raise Unsupported("ld.param through a register address")
        raise Unsupported(f"memory accesses to the .{space} state space (TIRx declares no "
                          "constant variables, so numsim models no window for it)")

    def _local_access(self, w, instr, lanes, a, nbytes, words, out, atomic_rmw):
        """Per-thread local memory (`T.local`): each lane reads and writes its own window."""
        if atomic_rmw is not None:
            raise Unsupported("atomics on local memory (PTX atom/red take global or shared "
                              "addresses)")
        if w.local is None:
            w.local = LocalMemory(self.local_layout, w.L)
        lm = w.local
        aa = a.astype(np.int64)
        self._trace_mem(w, instr, "local", lanes, aa, nbytes, words is not None, False)
        ok = lm.in_bounds(aa, nbytes)
        if not ok.all():
            bad = lanes[~ok]
            self.finding("numsim.out-of-bounds", f"out-of-bounds local "
                         f"{'write' if words is not None else 'read'} of {nbytes} bytes by lane "
                         f"{int(bad[0]) % WARP} ({w.where_lane(bad[0])}) at "
                         f"{hex(int(aa[~ok][0]))} (the local window is {lm.size} bytes per "
                         f"thread) in kernel {self.kir.name!r}", instr, lanes=bad % WARP,
                         addresses=aa[~ok], w=w, at_lane=int(bad[0]))
        sl, aa = lanes[ok], aa[ok]
        if words is None:
            vals, init = lm.read(sl, aa, nbytes)
            out[sl] = vals
            if not init.all():
                bad = sl[~init]
                self.finding("numsim.uninitialized-local", f"read of uninitialized local "
                             f"memory {lm.layout.name_of(int(aa[~init][0]))} by lane "
                             f"{int(bad[0]) % WARP} ({w.where_lane(bad[0])}) in kernel "
                             f"{self.kir.name!r}", instr, severity="review", lanes=bad % WARP,
                             addresses=aa[~init], w=w, at_lane=int(bad[0]))
        else:
            vals = np.asarray(words)[sl] if np.ndim(words) else np.full(sl.size, words)
            lm.write(sl, aa, nbytes, vals)
            self.wrote(None)
        return out

    @staticmethod
    def _read_region(w, key) -> None:
        w.rclock += 1
        w.reads[key] = w.rclock

    def _serial_rmw(self, rd, wr, lanes, op, nbytes):
        """Atomics: apply lane by lane in lane order (one legal serialization); returns the old
        values and whether any value changed (a failing CAS polls; it does not write)."""
        old = np.zeros(lanes.size, uint_of(nbytes))
        changed = False
        for j in range(lanes.size):
            cur = rd(j)
            old[j] = cur
            new = op(cur, int(lanes[j]))
            changed = changed or new != cur
            wr(j, new)
        return old, changed

    def atomic(self, w, instr, space, addrs, mask, nbytes, op) -> np.ndarray:
        return self._access(w, instr, space, addrs, mask, nbytes, None, atomic_rmw=op)

    def cta_of_rank(self, w: Warps, rank):
        """Group-local CTA index of cluster rank(s) `rank` (the group is one cluster)."""
        rank = np.asarray(rank)
        n = len(w.group.ctas)
        if np.any((rank < 0) | (rank >= n)):
            raise Unsupported(f"shared::cluster address names CTA rank {int(np.max(rank))} "
                              f"outside a cluster of {n}")
        return rank

    def _trace_mem(self, w, instr, space, lanes, a, nbytes, write, atomic, bufname=False,
                   lane_ctas=None):
        """Record a MemAccess of `lanes` (group lanes) at addresses `a`, one event per warp;
        `lane_ctas`: per accessed lane, the group-local CTA whose shared memory it addresses
        (None: the warp's own CTA)."""
        if self.trace is None:
            return
        a = np.asarray(a)
        ranges = list(zip(lanes.tolist(), a.tolist(), (a + nbytes).tolist()))
        mask = np.zeros(w.L, bool)
        mask[lanes] = True
        buf = None
        if bufname and len(a):  # each warp's first lane names the buffer
            buf = np.empty(w.L, object)
            _, first = np.unique(lanes // WARP, return_index=True)
            bidx, _, ok = self.gmem.locate(a[first].astype(np.uint64), 1)
            buf[lanes[first]] = [self.gmem.buffers[b].name if k else self.gmem.name_of(int(x))
                                 for b, k, x in zip(bidx.tolist(), ok.tolist(), a[first])]
        if lane_ctas is None:  # the warp's own CTA
            space_cta = np.repeat(np.asarray([w.cta(i).linear for i in range(w.nwarps)]), WARP)
        else:  # each warp's first lane's
            space_cta = np.zeros(w.L, np.int64)
            space_cta[lanes] = np.asarray([c.linear for c in w.group.ctas], np.int64)[lane_ctas]
        w.event(ev.MemAccess, instr, mask, space=space,
                access="rmw" if atomic else ("write" if write else "read"), ranges=ranges,
                atomic=atomic, space_cta=space_cta, buffer=buf)

    # -- the launch --------------------------------------------------------------------------------
    def ctas(self) -> list:
        gx, gy, gz = self.grid
        cx, cy, cz = self.cluster
        out = []
        for z in range(gz):
            for y in range(gy):
                for x in range(gx):
                    lin = x + gx * (y + gy * z)
                    cl = (x // cx, y // cy, z // cz)
                    cc = (x % cx, y % cy, z % cz)
                    rank = cc[0] + cx * (cc[1] + cy * cc[2])
                    clin = cl[0] + (gx // cx) * (cl[1] + (gy // cy) * cl[2])
                    out.append(CTA(lin, (x, y, z), rank, clin, cc, cl))
        if self.max_ctas is not None:
            out = out[: self.max_ctas]
        return out

    def units(self, ctas: list, nwarps: int) -> list:
        """The CTAs admitted together, in launch order: each cluster; without clusters, one CTA
        per unit when tracing or with `per_warp` (a traced run interleaves one CTA's warps
        only, and a deadlocked CTA is reported before later ones start), else batches bounded
        by BATCH_LANES lanes and the local and shared memory they need."""
        csize = int(np.prod(self.cluster))
        if csize > 1:
            by_cluster: dict = {}
            for c in ctas:
                by_cluster.setdefault(c.cluster, []).append(c)
            out = []
            for cl, members in sorted(by_cluster.items()):
                members.sort(key=lambda c: c.rank)
                if len(members) != csize and self.max_ctas is None:
                    raise ValueError(f"cluster {cl} has {len(members)} CTAs, expected {csize}")
                out.append(members)
            return out
        if self.trace is not None or self.per_warp:
            return [[c] for c in ctas]
        lanes = nwarps * WARP
        per = max(1, BATCH_LANES // lanes)
        if self.local_layout.size:
            per = min(per, max(1, BATCH_LOCAL_BYTES // (self.local_layout.size * lanes)))
        per = min(per, max(1, BATCH_SHARED_BYTES // (2 * max(self.shared_layout.size, 1))))
        per = min(per, max(1, residency.fit(self.kir, self.regs)))  # no more than fits a GPU
        return [ctas[i: i + per] for i in range(0, len(ctas), per)]

    def launch(self) -> None:
        for d, c in zip(self.grid, self.cluster):
            if d % c:
                raise ValueError(f"kernel {self.kir.name!r}: grid {self.grid} is not a multiple "
                                 f"of cluster {self.cluster}")
        nwarps = -(-int(np.prod(self.block)) // WARP)
        alone = self.per_warp

        def admit(unit):
            g = Group(unit, SharedMemory(self.shared_layout, len(unit)))
            g.shared.on_write = lambda: self.wrote(("shared", g.key))
            g.nwarps_total = nwarps * len(unit)
            self.ctas_run += len(unit)
            if alone:
                return g, [Warps(self, g, [j], [k]) for j in range(len(unit))
                           for k in range(nwarps)]
            return g, [Warps(self, g, [j for j in range(len(unit)) for _ in range(nwarps)],
                             [k for _ in unit for k in range(nwarps)])]
        # numpy's floating-point warnings say nothing numsim does not model explicitly (NaN
        # origins, division by zero are findings): off for the whole launch, once
        with np.errstate(all="ignore"):
            Scheduler(self, self.units(self.ctas(), nwarps), admit, merge=not alone).run()

    def finish_warps(self, w: Warps) -> None:
        """`w` reached the end of the kernel: its warps count as exited for barriers."""
        left = np.asarray(w.ctas_local)[~w.warp_done]
        if left.size:
            ctas, n = np.unique(left, return_counts=True)
            ex = w.group.exited_warps
            for c, k in zip(ctas.tolist(), n.tolist()):
                ex[c] = ex.get(c, 0) + k
        w.warp_done = np.ones(w.nwarps, bool)
        if w.wgmma_open or w.wgmma_groups:
            self.finding("numsim.wgmma-unwaited", "warp exited with wgmma operations not waited "
                         "for (wgmma.wait_group missing); their results were dropped", None,
                         w=w, severity="error")


__all__ = ["Machine", "Deadlock", "SimLimit", "Unsupported"]
