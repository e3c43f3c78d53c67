"""Which shared variable a memory instruction's address is derived from (for bounds checks).

numsim bounds-checks shared accesses against the whole shared window only, so an index one past
the end of ``a`` silently lands in the next variable. The address of a TIRx shared access is built
from the variable's symbol (``[a+16]``, or ``mov.u32 r, a`` followed by ``mad``/``add``), so a
small def-use walk over the IR recovers the variable; racecheck then checks every byte the access
touched against that variable's range in numsim's `SharedLayout`. Every variable has its own
symbol, wherever the layout puts it (addresses built from the bare window symbol ``tirx_dsmem``
are checked against the whole window).
"""

from __future__ import annotations

from tirxh.api import ir

_ARITH = ("add", "sub", "mad", "cvta", "mov", "mul")


def shared_sources(kir: ir.KernelIR) -> dict:
    """``{id(instr): symbol name}`` for instructions whose memory operand derives from one shared
    symbol (static variable name, or ``tirx_dsmem``)."""
    names = {v.name for v in kir.shared} | {"tirx_dsmem"}
    origin: dict = {}  # reg id -> symbol name (None when ambiguous)

    def of(op):
        if isinstance(op, ir.Sym) and op.space == "shared" and op.name in names:
            return op.name
        if isinstance(op, ir.Reg):
            return origin.get(id(op))
        return None

    insts = list(kir.instructions())
    for _ in range(2):  # registers redefined in loops: a second pass settles them
        for i in insts:
            if i.opcode not in _ARITH:
                continue
            defs = i.defs()
            if len(defs) != 1:
                continue
            srcs = [s for s in (of(o) for o, spec in zip(i.operands, _specs(i))
                                if not spec.is_dest) if s is not None]
            d = id(defs[0])
            if len(set(srcs)) == 1:
                prev = origin.get(d, srcs[0])
                origin[d] = srcs[0] if prev == srcs[0] else None
    out: dict = {}
    for i in insts:
        for o in i.operands:
            if isinstance(o, ir.Addr):
                name = of(o.base) if not isinstance(o.base, int) else None
                if name:
                    out[id(i)] = name
    return out


def _specs(i):
    try:
        return i.binding.operand_specs(i.modifiers)
    except Exception:  # a binding whose operand function needs modifiers it lacks
        return ()
