"""The interpreter: the structured IR flattened into an op array, run by groups of warps whose
execution state is explicit (a program counter, the active mask and a stack of frames).

Control flow is executed with masks exactly as the PTX emitter lowers it (a `For` exits when
``var >= stop``, or ``<=`` for a negative immediate step); lanes reconverge at the end of each
structured statement. Frames (lists, so that `Warps.split`/`merge` can cut and join their lane
arrays):

- ``If``: ``[lanes for the else side, lanes that finished the then side]``;
- ``For``: ``[lanes that entered, lanes still iterating]``;
- ``Loop``: ``[lanes that entered, write clock at the iteration's start, read counter at its
  start, fingerprint of the previous iteration]``.

Spin loops (issue 19): at the back edge of a `Loop` whose iteration wrote nothing (no store,
atomic, copy or mbarrier change by anyone) and left every register the body defines as it was
after the previous iteration, the next iteration would repeat this one exactly: the group stops
there with a `SpinWait` on the memory regions it read, and the scheduler runs other warps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tirxh.api import ir

from . import events as ev
from .machine import SPLIT, WARP, MBar, SimLimit, SpinWait
from .values import Unsupported, imm_array

INSTR, IF, ENDTHEN, ENDELSE, FOR, FORHEAD, FOREND, LOOP, LOOPEND, BREAK, END = range(11)
_ANNOTATION = getattr(ir, "Annotation", None)
DONE = "done"


@dataclass
class LoopInfo:
    """A `For` or `Loop` of the kernel: where it is, and the registers its body defines."""

    index: int
    kind: str  # "for" | "loop"
    loc: object
    defs: tuple = ()
    parent: int = -1  # the loop around it (-1: none)


class Code:
    """The kernel body as ops: ``ops[pc]`` is a tuple whose first item is the op kind;
    ``blockend[pc]`` is the op that closes the block `pc` is in (where a group with no active
    lane goes; an op that closes a block is its own); ``loop_of[pc]`` the innermost loop around
    `pc` (-1: none). An op closing a block names the statement that owns it (its last item), so
    that lanes leaving with nothing left go on to the end of the block around that statement."""

    def __init__(self, kir: ir.KernelIR):
        self.ops: list = []
        self.blockend: list = []
        self.loop_of: list = []
        self.loops: list = []
        top = self._block(kir.body, -1)
        end = self._emit((END,), -1)
        self._close(top, end)
        self.blockend[end] = end

    def _emit(self, op, loop) -> int:
        self.ops.append(op)
        self.blockend.append(-1)
        self.loop_of.append(loop)
        return len(self.ops) - 1

    def _patch(self, pc, op) -> None:
        self.ops[pc] = op

    def _close(self, pcs: list, end: int) -> None:
        for p in pcs:
            self.blockend[p] = end

    def _block(self, block: ir.Block, loop: int) -> list:
        """Emit the statements of `block`; returns the pcs whose block end is still open."""
        pcs: list = []
        for s in block.stmts:
            t = type(s)
            if t is ir.Instr:
                g = s.guard
                pcs.append(self._emit((INSTR, s, g[0].id if g is not None else -1,
                                       bool(g[1]) if g is not None else False), loop))
            elif t is ir.If:
                pcs.append(self._if(s, loop))
            elif t is ir.For:
                pcs.append(self._for(s, loop))
            elif t is ir.Loop:
                pcs.append(self._loop(s, loop))
            elif t is ir.Break:
                pcs.append(self._emit((BREAK, s.cond.id if s.cond is not None else -1,
                                       bool(s.negate), s), loop))
            elif t is _ANNOTATION:
                continue  # profiling annotations emit nothing in a normal build
            else:
                pcs.append(self._emit((BREAK, -2, False, type(s).__name__), loop))
        return pcs

    def _if(self, s: ir.If, loop: int) -> int:
        at = self._emit(None, loop)
        then = self._block(s.then, loop)
        endthen = self._emit(None, loop)
        self._close(then, endthen)
        self.blockend[endthen] = endthen
        else_pc = -1
        endelse = -1
        if s.orelse is not None:
            else_pc = len(self.ops)
            els = self._block(s.orelse, loop)
            endelse = self._emit(None, loop)
            self._close(els, endelse)
            self.blockend[endelse] = endelse
        after = len(self.ops)
        self._patch(at, (IF, s.cond.id, bool(s.negate), at + 1, endthen, s))
        self._patch(endthen, (ENDTHEN, else_pc, after, at))
        if endelse >= 0:
            self._patch(endelse, (ENDELSE, after, at))
        return at

    def _for(self, s: ir.For, outer: int) -> int:
        info = LoopInfo(len(self.loops), "for", s.loc, _defs(s.body) + (s.var.id,), outer)
        self.loops.append(info)
        li = info.index
        dt = s.var.dtype
        at = self._emit(None, li)
        head = self._emit(None, li)
        body = self._block(s.body, li)
        end = self._emit(None, li)
        self._close(body, end)
        self.blockend[end] = end
        self.blockend[head] = end
        negative = isinstance(s.step, ir.Imm) and s.step.value < 0
        self._patch(at, (FOR, s.var, _const(s.start, dt), dt, head))
        self._patch(head, (FORHEAD, s.var.id, _const(s.stop, dt), dt, negative, head + 1,
                           end + 1, at, s))
        self._patch(end, (FOREND, s.var, _const(s.step, dt), dt, head))
        return at

    def _loop(self, s: ir.Loop, outer: int) -> int:
        info = LoopInfo(len(self.loops), "loop", s.loc, _defs(s.body), outer)
        self.loops.append(info)
        li = info.index
        at = self._emit(None, li)
        body = self._block(s.body, li)
        end = self._emit(None, li)
        self._close(body, end)
        self.blockend[end] = end
        self._patch(at, (LOOP, li))
        self._patch(end, (LOOPEND, at + 1, end + 1, info, at))
        return at

    def where(self, pc: int) -> str:
        """The source location of the op at `pc` (the next instruction, or the loop)."""
        for p in range(pc, len(self.ops)):
            op = self.ops[p]
            if op[0] == INSTR:
                return f"{op[1].spelling} at {op[1].loc}"
            if op[0] == END:
                return "the end of the kernel"
        return "?"


def _const(x, dt):
    """An immediate bound as its (cached) array; registers stay operands."""
    return imm_array(x.value, dt) if isinstance(x, ir.Imm) else x


def _defs(block: ir.Block) -> tuple:
    """Registers written anywhere inside `block` (instruction destinations, loop variables)."""
    out = []
    for s in ir.walk_block(block):
        if isinstance(s, ir.Instr):
            out.extend(r.id for r in s.defs())
        elif isinstance(s, ir.For):
            out.append(s.var.id)
    return tuple(sorted(set(out)))


class Interpreter:
    """Runs one group from its `pc` until it blocks, splits, spins or finishes."""

    def __init__(self, machine, code: Code):
        self.m = machine
        self.code = code
        self.fns = [None] * len(code.ops)

    def run(self, w):
        """Execute `w`; returns `DONE`, `SPLIT` (w.pc is the instruction to split at), a `Wait`
        or a `SpinWait` (w.pc and w.mask say where to resume)."""
        m = self.m
        ops = self.code.ops
        blockend = self.code.blockend
        fns = self.fns
        pcw = m.pc_warps
        regs = w.regs
        frames = w.frames
        multi = w.nwarps > 1
        tracing = m.trace is not None
        pc = w.pc
        mask = w.mask & w.alive
        epoch = w.exit_epoch
        cmask, clanes, cwarps = None, 0, 0
        pcl, pce = m.pc_lanes, m.pc_execs
        budget = m.budget_left  # warp-instructions left (written back when the group stops)
        if not mask.any():
            pc = blockend[pc]
        while True:
            op = ops[pc]
            k = op[0]
            if k == INSTR:
                instr = op[1]
                gid = op[2]
                if gid >= 0:
                    g = regs[gid]
                    if g is None:
                        g = w.reg(instr.guard[0])
                    em = mask & ~g if op[3] else mask & g
                    if not em.any():
                        pc += 1
                        continue
                    lanes = int(np.count_nonzero(em))
                    warps = int(np.count_nonzero(em.reshape(-1, WARP).any(axis=1))) \
                        if multi else 1
                else:
                    em = mask
                    if mask is not cmask:
                        cmask = mask
                        clanes = int(np.count_nonzero(mask))
                        cwarps = int(np.count_nonzero(mask.reshape(-1, WARP).any(axis=1))) \
                            if multi else 1
                    lanes, warps = clanes, cwarps
                fn = fns[pc]
                if fn is None:
                    fn = fns[pc] = m.dispatch(instr)
                m.current_instr = instr
                res = fn(w, instr, em)
                if res is SPLIT:
                    w.pc, w.mask = pc, mask
                    m.budget_left = budget
                    return SPLIT
                pcw[pc] += warps
                pcl[pc] += lanes
                pce[pc] += 1
                budget -= warps
                if budget < 0:
                    m.flush_counts()
                    raise SimLimit(m.budget_message(pc))
                if res is not None:
                    m.step += 1
                    w.pc, w.mask = pc + 1, mask
                    m.budget_left = budget
                    return res
                if w.exit_epoch != epoch:
                    epoch = w.exit_epoch
                    mask = mask & w.alive
                    if not mask.any():
                        pc = blockend[pc]
                        continue
                pc += 1
            elif k == FORHEAD:
                fr = frames[-1]
                v = regs[op[1]]
                stop = op[2]
                if not isinstance(stop, np.ndarray):
                    stop = w.read(stop, op[3])
                cont = v > stop if op[4] else v < stop
                live = fr[1]
                if not cont.all():
                    if tracing:
                        _diverge(w, op[8], live & ~cont, live & cont, "for")
                    live = live & cont
                if live.any():
                    mask = live
                    pc = op[5]
                    continue
                frames.pop()
                mask = fr[0] & w.alive
                pc = op[6] if mask.any() else blockend[op[7]]
            elif k == FOREND:
                var = op[1]
                live = mask
                step = op[2]
                if not isinstance(step, np.ndarray):
                    step = w.read(step, op[3])
                cur = regs[var.id]
                np.copyto(cur, cur + step, where=live)
                frames[-1][1] = live
                m.clock += 1
                pc = op[4]
            elif k == IF:
                c = regs[op[1]]
                if c is None:
                    c = np.zeros(w.L, bool)
                if op[2]:
                    tm, fm = mask & ~c, mask & c
                else:
                    tm, fm = mask & c, mask & ~c
                if tracing:
                    _diverge(w, op[5], tm, fm, "if")
                frames.append([fm, None])
                mask = tm
                pc = op[3] if tm.any() else op[4]
            elif k == ENDTHEN:
                fr = frames[-1]
                if op[1] >= 0:
                    if fr[0].any():
                        fr[1] = mask
                        mask = fr[0]
                        pc = op[1]
                        continue
                    frames.pop()
                else:
                    frames.pop()
                    mask = mask | fr[0]
                if w.exit_epoch != epoch:
                    epoch = w.exit_epoch
                    mask = mask & w.alive
                pc = op[2] if mask.any() else blockend[op[3]]
            elif k == ENDELSE:
                fr = frames.pop()
                mask = fr[1] | mask if fr[1] is not None else mask
                if w.exit_epoch != epoch:
                    epoch = w.exit_epoch
                    mask = mask & w.alive
                pc = op[1] if mask.any() else blockend[op[2]]
            elif k == FOR:
                var, dt = op[1], op[3]
                start = op[2]
                if not isinstance(start, np.ndarray):
                    start = w.read(start, dt)
                w.set_reg(var, start, mask)
                frames.append([mask, mask])
                pc = op[4]
            elif k == LOOP:
                frames.append([mask, m.wclock + MBar.changes, w.rclock, None])
                pc += 1
            elif k == LOOPEND:
                fr = frames[-1]
                if w.exit_epoch != epoch:
                    epoch = w.exit_epoch
                    mask = mask & w.alive
                m.clock += 1
                if mask.any():
                    now = m.wclock + MBar.changes
                    if now == fr[1]:
                        spin = self._spin_check(w, fr, op[3], mask)
                        if spin is not None:
                            w.pc, w.mask = op[1], mask
                            m.budget_left = budget
                            return spin
                    else:
                        fr[3] = None
                    fr[1] = now
                    fr[2] = w.rclock
                    pc = op[1]
                    continue
                frames.pop()
                mask = fr[0] & w.alive
                pc = op[2] if mask.any() else blockend[op[4]]
            elif k == BREAK:
                if op[1] == -2:
                    raise Unsupported(f"IR statement {op[3]}")
                if op[1] < 0:
                    mask = np.zeros_like(mask)
                else:
                    c = regs[op[1]]
                    if c is None:
                        c = np.zeros(w.L, bool)
                    if tracing:
                        _diverge(w, op[3], mask & ~c if op[2] else mask & c,
                                 mask & c if op[2] else mask & ~c, "break")
                    mask = mask & c if op[2] else mask & ~c
                pc = pc + 1 if mask.any() else blockend[pc]
            elif k == END:
                w.pc, w.mask = pc, mask
                m.budget_left = budget
                return DONE
            else:  # pragma: no cover - Code emits nothing else
                raise AssertionError(f"unknown op {op!r}")

    def _spin_check(self, w, fr, info, mask):
        """At a Loop's back edge after an iteration that wrote nothing: a `SpinWait` when the
        registers the body defines (and the active lanes) equal those after the previous
        iteration, else None (the fingerprint is kept for the next iteration)."""
        regs = w.regs
        fp = (mask.copy(), tuple(None if regs[i] is None else regs[i].copy() for i in info.defs))
        prev = fr[3]
        fr[3] = fp
        if prev is None or not np.array_equal(prev[0], fp[0]):
            return None
        for a, b in zip(prev[1], fp[1]):
            if (a is None) != (b is None) or (a is not None and not np.array_equal(a, b)):
                return None
        regions = frozenset(k for k, t in w.reads.items() if t > fr[2])
        what = describe_regions(regions)
        return SpinWait(regions, self.m.wclock, info,
                        f"spinning in the loop at {info.loc}: an iteration {what} repeats "
                        "exactly (nothing it reads was written since)",
                        self.m.wclock + MBar.changes)


def _diverge(w, stmt, taken: np.ndarray, rest: np.ndarray, how: str) -> None:
    """Record that the warp's lanes split at `stmt` (a branch, a loop exit): sync_check models
    the two sides as separate threads from here on (issue 13 class 4)."""
    if not (taken.any() and rest.any()):
        return
    if w.nwarps > 1:  # recorded for the warps whose own lanes split
        both = w.warps_of(taken) & w.warps_of(rest)
        if not both.any():
            return
        keep = np.repeat(both, WARP)
        taken, rest = taken & keep, rest & keep
    w.event(ev.Divergence, None, taken, loc=stmt.loc, other=rest, construct=how)


def describe_regions(regions) -> str:
    """What a spinning loop reads, for reports (region keys: see `sim.Machine.wrote`)."""
    if not regions:
        return "that reads no memory"
    names = []
    for k in sorted(regions, key=str):
        if k == "global":
            names.append("global memory")
        else:
            names.append("shared memory")
    return "reading " + " and ".join(dict.fromkeys(names))


__all__ = ["Code", "Interpreter", "LoopInfo", "DONE"]
