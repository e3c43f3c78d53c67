"""Where an instruction sits in the kernel's structured control flow, for root-cause locations.

numsim's trace says which warps and lanes executed an instruction, not which branch sent the
others elsewhere. The IR keeps the structure (`ir.If`, `ir.For`, `ir.Loop`), so the statements
enclosing an instruction are known; comparing them with where another warp's events are tells
which construct the warps disagreed at (issue 13 class 6: the primary location of a hang is the
divergent branch, not the barrier where it shows up).
"""

from __future__ import annotations

from tirxh.api import ir

class Structure:
    """Enclosing constructs of every instruction of one kernel."""

    def __init__(self, kir):
        self._chain: dict = {}  # id(instr) -> ((construct, part), ...) outermost first
        if kir is not None:
            self._walk(kir.body, ())

    def _walk(self, block, chain: tuple) -> None:
        for st in block.stmts:
            if isinstance(st, ir.Instr):
                self._chain[id(st)] = chain
            elif isinstance(st, ir.If):
                self._walk(st.then, chain + ((st, "then"),))
                if st.orelse is not None:
                    self._walk(st.orelse, chain + ((st, "else"),))
            elif isinstance(st, (ir.For, ir.Loop)):
                self._walk(st.body, chain + ((st, "body"),))

    def chain(self, instr) -> tuple:
        """((construct, part), ...) enclosing `instr`, outermost first (empty when unknown)."""
        return self._chain.get(id(instr), ())

    def innermost_branch(self, instr):
        """The innermost ``if`` (or loop, whose lanes may leave at different iterations) around
        `instr`; None at the top level."""
        ch = self.chain(instr)
        return ch[-1][0] if ch else None

    def split_point(self, target, others: list):
        """The construct around `target` that the warps whose events are `others` did not enter
        the way `target`'s warps did: the first enclosing (construct, part) of `target` that none
        of `others` executed an instruction inside. None when they entered every one of them
        (the difference is in a loop's trip count or an earlier exit: see `innermost_loop`)."""
        want = self.chain(target)
        depth = 0
        for e in others:
            ch = self.chain(getattr(e, "instr", None))
            k = 0
            while k < min(len(ch), len(want)) and ch[k][0] is want[k][0] and \
                    ch[k][1] == want[k][1]:
                k += 1
            depth = max(depth, k)
        return want[depth][0] if depth < len(want) else None

    def innermost_loop(self, instr):
        for st, _ in reversed(self.chain(instr)):
            if isinstance(st, (ir.For, ir.Loop)):
                return st
        return None


def construct_label(st) -> str:
    """How a construct is named in a finding's related location."""
    if isinstance(st, ir.If):
        return "the branch" + (" (uniform)" if getattr(st, "uniform", False) else "")
    if isinstance(st, (ir.For, ir.Loop)):
        return "the loop"
    return type(st).__name__
