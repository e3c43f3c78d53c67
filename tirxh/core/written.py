"""Which declared outputs a compiled kernel can never write: found on the CPU, from the traced IR.

A suite's ``outputs`` are what KCoral checks; it poisons each one (NaN) before a launch. An
output the kernel never stores to then holds NaN, and on a timing case (no reference: the first
launch is its own reference) the job fails on the device (session 15, H200:
kda_bwd_prep_sg[po_t8192_h96] declared 'bt', which its WALK=0 build never writes;
/work/notes/s15/d6/calibsg/call.log). The timing cases are too large for numsim, but the IR of
each case's build says it already: `never_written` follows each output pointer parameter from
its ``ld.param`` through register arithmetic, and reports the parameter when nothing derived from
it ever addresses a store, atomic, reduction or any other instruction that takes a memory
operand and is not a load.

Conservative by construction: the answer is "never written" only when every use of the
pointer is register arithmetic, a load's address, or a branch condition. A pointer that reaches
anything else -- a store's data (kept in memory), an async copy, a tensor-map edit, an IR node of
an unknown kind -- counts as possibly written, so the check can miss an unwritten output but
never names a written one. A kernel with a ``T.tensormap`` parameter gets no answer at all: a TMA
store writes the buffer its map was encoded from (`tirxh.core.suite.TensorMap.source`, known
only from the suite's inputs on the host), not through the pointer parameter.
"""

from __future__ import annotations

import json

LOADS = ("ld.", "ldu.", "ldmatrix.", "prefetch.", "prefetchu.")  # read memory, write registers


def never_written(ir: "dict | str", outputs) -> list:
    """The names in `outputs` that are pointer parameters of the kernel `ir` (its JSON, a
    string or parsed) and that no store-like instruction can address (module docstring)."""
    doc = json.loads(ir) if isinstance(ir, str) else ir
    params = doc.get("params", [])
    if any(p.get("kind") == "tensormap" for p in params):
        return []  # TMA writes through a map whose source buffer the IR does not name
    ptrs = {p["name"] for p in params if p.get("kind") == "ptr"}
    wanted = [o for o in outputs if o in ptrs]
    if not wanted:
        return []
    instrs, others = [], []
    _flatten(doc.get("body", []), instrs, others)
    facts = [_fact(ins) for ins in instrs]
    others = [(kind, _scan(own)) for kind, own in others]
    return [o for o in wanted if not _may_write(o, facts, others)]


def _flatten(nodes, instrs: list, others: list) -> None:
    """Every ``instr`` node in `nodes` (bodies of if/for/loop too) into `instrs`; every other
    node's own fields (a condition, a bound) into `others`."""
    if isinstance(nodes, dict):
        nodes = [nodes]
    for n in nodes or ():
        if not isinstance(n, dict):
            continue
        if n.get("op") == "instr":
            instrs.append(n)
            continue
        own = {k: v for k, v in n.items() if k not in ("body", "then", "else")}
        others.append((n.get("op"), own))
        for k in ("body", "then", "else"):
            if isinstance(n.get(k), (list, dict)):
                _flatten(n[k], instrs, others)


def _scan(x, regs=None, syms=None) -> tuple:
    """``(registers, symbols, has a memory operand)`` anywhere in `x`."""
    regs = set() if regs is None else regs
    syms = set() if syms is None else syms
    addr = False
    stack = [x]
    while stack:
        y = stack.pop()
        if isinstance(y, dict):
            if isinstance(y.get("r"), int):
                regs.add(y["r"])
            if isinstance(y.get("sym"), str):
                syms.add(y["sym"])
            addr = addr or "addr" in y
            stack.extend(v for v in y.values() if isinstance(v, (dict, list)))
        elif isinstance(y, list):
            stack.extend(y)
    return regs, syms, addr


def _fact(ins: dict) -> tuple:
    """``(kind, destination regs, source regs, source symbols)``: kind ``load`` (registers from
    memory), ``reg`` (register arithmetic) or ``memory`` (anything else with a memory operand
    or no register destination: a store, an atomic, a copy; every register a source)."""
    ops = ins.get("operands", [])
    d_regs, d_syms, d_addr = _scan(ops[:1])
    s_regs, s_syms, s_addr = _scan(ops[1:])
    if not ops or d_addr or not d_regs or d_syms:
        return "memory", set(), d_regs | s_regs, d_syms | s_syms
    if ins.get("spelling", "").startswith(LOADS):
        return "load", d_regs, s_regs, s_syms
    if s_addr:
        return "memory", set(), d_regs | s_regs, s_syms
    return "reg", d_regs, s_regs, s_syms


def _may_write(name: str, facts: list, others: list) -> bool:
    """Whether anything derived from parameter `name` may address memory that is written."""
    tainted: set = set()
    changed = True
    while changed:  # flow-insensitive: a loop's carried registers settle in a few passes
        changed = False
        for kind, dst, src, syms in facts:
            if not (name in syms or src & tainted):
                continue
            if kind == "memory":
                return True  # the pointer reaches memory: a store's address or data, a copy
            if kind == "load" and name not in syms:  # (ld.param of the slot: the pointer)
                continue  # what it reads is the output's contents, not its address: before
                # the kernel stores there (which would be a write) they are the poison
            if not dst <= tainted:
                tainted |= dst
                changed = True
    for kind, (regs, syms, _) in others:
        if kind not in ("if", "for", "loop", "break", "annotation") and \
                (regs & tainted or name in syms):
            return True  # a node this check does not know, using the pointer
    return False


def pointer_uses(ir: "dict | str", name: str) -> list:
    """The spellings of the instructions that use parameter `name` or a register derived from it
    (its ``ld.param`` first), in program order: ``["ld.param.u64", "cvta.to.global.u64"]``
    says the kernel never reads or writes through the pointer, so a case may bind it to a
    buffer of one element (zoo kda_bwd_prep_sg's 'bt' at WALK=0)."""
    doc = json.loads(ir) if isinstance(ir, str) else ir
    instrs: list = []
    _flatten(doc.get("body", []), instrs, [])
    tainted: set = set()
    out = []
    for ins in instrs:  # one pass in order: a use in a loop before its definition is rare,
        kind, dst, src, syms = _fact(ins)  # and a second pass below catches it
        if name in syms or src & tainted:
            out.append(ins.get("spelling", ""))
            tainted |= dst
    again = [ins.get("spelling", "") for ins in instrs
             if _fact(ins)[2] & tainted and ins.get("spelling", "") not in out]
    return out + again
