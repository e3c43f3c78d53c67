"""wgmma register discipline, checked on the kernel's structured IR (no interleaving involved).

PTX ISA "Asynchronous Warpgroup Level Matrix Multiply-Accumulate" (9.7.15):

- the accumulator registers of a ``wgmma.mma_async`` must not be read or written until a
  ``wgmma.wait_group N`` has retired the group that contains it (the hardware writes them
  asynchronously); another ``wgmma.mma_async`` on the same accumulator is allowed (chaining);
- ``wgmma.fence`` must separate a ``wgmma.mma_async`` from earlier accesses by ordinary
  instructions to its accumulator or A-fragment registers.

The check is a forward may-analysis over the IR tree: the abstract state holds the accumulator
registers of the open (uncommitted) group, of each committed group still outstanding, and the
wgmma operand registers written by ordinary instructions since the last fence. Branches join by
union; loops iterate to a fixed point (bounded), joined with the loop's entry and its breaks. Every
path through the IR is covered, not only the traced one, so a finding names a line on some path;
the message says which access and which wgmma.
"""

from __future__ import annotations

from tirxh.api import ir

from .report import Issue

_MAX_LOOP_ITERS = 6
_MAX_GROUPS = 8


_ROLES = {"wgmma.mma": "mma", "wgmma.fence": "fence", "wgmma.commit": "commit",
          "wgmma.wait": "wait"}


def _kind(instr) -> str:
    """The instruction's wgmma role, from its binding's synchronization effect."""
    try:
        role = instr.binding.effects_for(instr.modifiers).sync
    except Exception:  # a binding without effects data
        role = None
    return _ROLES.get(role or "", "")


def _regs(op) -> list:
    if isinstance(op, ir.Reg):
        return [op]
    if isinstance(op, ir.Vec):
        return [e for e in op.elems if isinstance(e, ir.Reg)]
    return []


def _mma_regs(instr) -> "tuple[list, list]":
    """(accumulator registers, A-fragment registers) of a wgmma.mma_async."""
    specs = instr.binding.operand_specs(instr.modifiers)
    acc, afrag = [], []
    for op, spec in zip(instr.operands, specs):
        if spec.is_dest:
            acc.extend(_regs(op))
        elif spec.kind == "av":
            afrag.extend(_regs(op))
    return acc, afrag


class _State:
    __slots__ = ("open", "groups", "dirty")

    def __init__(self, open_=frozenset(), groups=(), dirty=frozenset()):
        self.open, self.groups, self.dirty = open_, groups, dirty

    def key(self):
        return (self.open, self.groups, self.dirty)

    def join(self, other: "_State") -> "_State":
        n = max(len(self.groups), len(other.groups))
        a = (frozenset(),) * (n - len(self.groups)) + self.groups
        b = (frozenset(),) * (n - len(other.groups)) + other.groups
        return _State(self.open | other.open, tuple(x | y for x, y in zip(a, b)),
                      self.dirty | other.dirty)


def check(kernel_ir: ir.KernelIR) -> list:
    mmas = [i for i in kernel_ir.instructions() if _kind(i) == "mma"]
    if not mmas:
        return []
    tracked = set()
    for m in mmas:
        acc, afrag = _mma_regs(m)
        tracked.update(id(r) for r in acc + afrag)
    c = _Checker(tracked)
    c.block(kernel_ir.body, _State())
    return list(c.issues.values())


class _Checker:
    def __init__(self, tracked: set):
        self.tracked = tracked
        self.issues: dict = {}
        self.breaks: list = []  # stack of lists of states reaching a Break

    def add(self, kind, instr, message, related):
        key = (kind, instr.loc.line, instr.loc.file)
        if key not in self.issues:
            self.issues[key] = Issue(kind, message, loc=instr.loc, related_locs=related,
                                     witness=[f"{instr.loc}: {instr!r}"])

    def block(self, blk, s: _State) -> "_State | None":
        for st in blk.stmts:
            if s is None:
                return None
            s = self.stmt(st, s)
        return s

    def stmt(self, st, s: _State) -> "_State | None":
        if isinstance(st, ir.Instr):
            return self.instr(st, s)
        if isinstance(st, ir.If):
            a = self.block(st.then, s)
            b = self.block(st.orelse, s) if st.orelse is not None else s
            if a is None:
                return b
            return a if b is None else a.join(b)
        if isinstance(st, (ir.For, ir.Loop)):
            self.breaks.append([])
            cur = s
            for _ in range(_MAX_LOOP_ITERS):
                end = self.block(st.body, cur)
                nxt = cur if end is None else cur.join(end)
                if nxt.key() == cur.key():
                    break
                cur = nxt
            outs = self.breaks.pop()
            exit_ = cur if isinstance(st, ir.For) else None
            for b in outs:
                exit_ = b if exit_ is None else exit_.join(b)
            return exit_
        if isinstance(st, ir.Break):
            if self.breaks:
                self.breaks[-1].append(s)
            return s if st.cond is not None else None
        return s

    def instr(self, i: ir.Instr, s: _State) -> _State:
        k = _kind(i)
        if k == "fence":
            return _State(s.open, s.groups, frozenset())
        if k == "commit":
            groups = (s.groups + (s.open,))[-_MAX_GROUPS:]
            return _State(frozenset(), groups, s.dirty)
        if k == "wait":
            n = _imm(i.operands[0]) if i.operands else 0
            groups = s.groups[len(s.groups) - n:] if n else ()
            return _State(s.open, tuple(groups), s.dirty)
        if k == "mma":
            acc, afrag = _mma_regs(i)
            ids = {id(r) for r in acc + afrag}
            bad = [(rid, loc) for rid, loc in s.dirty if rid in ids]
            if bad:
                locs = sorted({loc for _, loc in bad}, key=lambda x: (x.file, x.line))
                self.add("wgmma.missing-fence", i,
                         f"wgmma.mma_async reads {len(bad)} register(s) written by ordinary "
                         "instructions since the last wgmma.fence (e.g. at line "
                         f"{locs[0].line}); a wgmma.fence.sync.aligned must come between",
                         [(loc, "register write") for loc in locs[:3]])
            return _State(s.open | {(id(r), i.loc) for r in acc}, s.groups, s.dirty)
        # an ordinary instruction: touching an in-flight accumulator is an error
        touched = {id(r) for r in i.uses()} | {id(r) for r in i.defs()}
        inflight = set(s.open) | {x for g in s.groups for x in g}
        hit = [(rid, loc) for rid, loc in inflight if rid in touched]
        if hit:
            loc = hit[0][1]
            self.add("wgmma.accumulator-early", i,
                     f"{i.spelling} accesses accumulator register(s) of the wgmma.mma_async at "
                     f"line {loc.line} before a wgmma.wait_group retires its group",
                     [(loc, "wgmma.mma_async")])
        defs = [r for r in i.defs() if id(r) in self.tracked]
        if defs:
            return _State(s.open, s.groups, s.dirty | {(id(r), i.loc) for r in defs})
        return s


def _imm(op) -> int:
    if isinstance(op, ir.Imm):
        return int(op.value)
    return 0
