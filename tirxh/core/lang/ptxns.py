"""`T.ptx`: spell any bound PTX instruction as a Python attribute chain.

``T.ptx.ld.global_.v4.f32(addr)`` -> ``ld.global.v4.f32``. Spelling rules: a trailing ``_`` on a
Python keyword is dropped (``global_``), ``__`` stands for ``::`` (``shared__cta``), a leading ``_``
before a digit is dropped (``_2d``), and ``T.ptx["exact.spelling::text"]`` takes the text as-is.

Calling convention (the same for every instruction): operands in PTX order. When the first PTX
operand is a destination and the call leaves it out, a fresh register (or tuple of registers for a
vector destination) is allocated and returned. ``pred=p`` (or ``pred=~p``) guards the instruction
with ``@p`` / ``@!p``.
"""

from __future__ import annotations

from .. import ir
from ..bindings import SpellingError, type_compatible
from ..types import dtype as as_dtype
from . import trace as tr

SINK = ir.Sink()


def _token(name: str) -> list:
    if name[:1] == "_" and name[1:2].isdigit():  # `._2d` spells `.2d` (no digit-first names)
        name = name[1:]
    name = name.replace("__", "::")
    if name.endswith("_") and not name.endswith("::"):
        name = name[:-1]
    return name.split(".")


class PtxNamespace:
    """Attribute chain accumulating spelling tokens; calling it emits the instruction."""

    __slots__ = ("_tokens",)

    def __init__(self, tokens: tuple = ()):
        self._tokens = tokens

    def __getattr__(self, name: str) -> "PtxNamespace":
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return PtxNamespace(self._tokens + tuple(_token(name)))

    def __getitem__(self, spelling: str) -> "PtxNamespace":
        return PtxNamespace(self._tokens + tuple(spelling.split(".")))

    def __call__(self, *args, pred=None):
        if not self._tokens:
            raise tr.current().error("T.ptx needs an instruction name, e.g. T.ptx.add.u32(a, b)")
        return call_instruction(".".join(self._tokens), args, pred=pred)

    def __repr__(self) -> str:
        return f"T.ptx.{'.'.join(self._tokens)}" if self._tokens else "T.ptx"


ptx = PtxNamespace()


def call_instruction(spelling: str, args: tuple, pred=None):
    """Validate `args` against the binding for `spelling`, append the Instr, return any new dest.

    When several bindings share the spelling (forms told apart only by their operands, e.g.
    ``wgmma.mma_async`` ss/rs, ``mov.b64 d, {a, b}``), the first whose operands fit is taken; if
    none fits, the error lists why each form refused them.
    """
    t = tr.current()
    loc = tr.user_loc()
    try:
        cands = t.isa.candidates(spelling)
    except SpellingError as e:
        raise tr.TraceError(str(e), loc, t.name) from None
    errors = []
    for binding, mods in cands:
        n_regs, n_stmts = len(t.regs), len(t.block.stmts)
        try:
            operands, fresh = _bind(t, binding, mods, spelling, args, loc)
        except tr.TraceError as e:
            if len(cands) == 1:
                raise
            # undo what a refused form left behind: fresh destinations, a materialized ~p
            del t.regs[n_regs:]
            del t.block.stmts[n_stmts:]
            errors.append(f"  {binding.name}: {e.message}")
            continue
        guard = tr.as_guard(pred)
        t.append(ir.Instr(spelling, operands, binding, mods, loc, guard))
        if isinstance(fresh, list):
            return tuple(fresh)
        return fresh
    raise tr.TraceError(f"no form of {spelling} accepts these operands:\n" + "\n".join(errors),
                        loc, t.name)


def _bind(t: tr.Trace, binding, mods: dict, spelling: str, args: tuple, loc):
    """Operands for one binding (allocating a left-out destination), or a TraceError."""
    specs = binding.operand_specs(mods)
    required = [s for s in specs if not s.optional]
    args = list(args)
    fresh = None
    omittable = bool(specs) and specs[0].is_dest and specs[0].kind in ("d", "dv", "dpair")
    if omittable and len(args) == len(required) - 1:
        fresh = _fresh_dest(t, specs[0], spelling, loc)
        args.insert(0, fresh)
    if not (len(required) <= len(args) <= len(specs)):
        raise tr.TraceError(_count_message(spelling, specs, required, omittable,
                                           len(args) if fresh is None else len(args) - 1),
                            loc, t.name)
    operands = tuple(_operand(t, spec, a, spelling, loc) for spec, a in zip(specs, args))
    return operands, fresh


def _count_message(spelling: str, specs, required, omittable: bool, got: int) -> str:
    """How many operands `spelling` takes, counted as the user writes them: a leading
    destination the call may leave out is counted both ways."""
    def form(ss) -> str:
        req = [s for s in ss if not s.optional]
        n = f"{len(req)}" + (f"-{len(ss)}" if len(ss) != len(req) else "")
        return n + " operands (" + ", ".join(f"{s.name}{'?' if s.optional else ''}"
                                              for s in ss) + ")"
    if omittable:
        return (f"{spelling} takes {form(specs[1:])} with the destination {specs[0].name!r} "
                f"left out, or {form(specs)} with it; got {got}")
    return f"{spelling} takes {form(specs)}; got {got}"


def _fresh_dest(t: tr.Trace, spec, spelling: str, loc):
    if spec.type is None:
        raise tr.TraceError(f"{spelling}: destination {spec.name!r} has no type to allocate; pass "
                            "a register", loc, t.name)
    if spec.kind == "dpair":
        return [t.new_reg(as_dtype(x)) for x in spec.type.split("|")]
    dt = as_dtype(spec.type)
    if spec.kind == "dv":
        return [t.new_reg(dt) for _ in range(spec.count or 1)]
    return t.new_reg(dt)


def _operand(t: tr.Trace, spec, value, spelling: str, loc):
    kind = spec.kind
    what = f"{spelling}: operand {spec.name!r}"

    def fail(expected: str):
        raise tr.TraceError(f"{what} expects {expected}, got {value!r}", loc, t.name)

    # a dpair's type names both sides (``b32|pred``); it is checked per side below
    want = as_dtype(spec.type) if spec.type and kind != "dpair" else None
    if kind in ("d", "inout"):
        if isinstance(value, ir.Sink) and kind == "d":
            return value
        if not isinstance(value, ir.Reg):
            fail(f"a {spec.type or ''} register")
        _check_type(t, value, want, what, loc)
        return value
    if kind == "a":
        value = tr.coerce(value, want) if want is not None else value
        if isinstance(value, ir.Reg):
            _check_type(t, value, want, what, loc)
            return value
        if isinstance(value, (ir.Imm, ir.SReg, ir.Sym)):
            return value
        addr = getattr(value, "__tirx_operand__", None)
        if addr is not None:
            return addr()
        fail(f"a {spec.type or ''} register or immediate")
    if kind == "i":
        if isinstance(value, (int, float)):
            return ir.Imm(value, want) if want else ir.Imm(value, as_dtype("u32"))
        if isinstance(value, ir.Imm):
            return value
        fail("an immediate (a Python number)")
    if kind == "m":
        return as_address(value, fail)
    if kind in ("dv", "av", "inoutv"):
        elems = list(value.regs if hasattr(value, "regs") else value) \
            if not isinstance(value, ir.Reg) else [value]
        if spec.count is not None and len(elems) != spec.count:
            fail(f"a vector of {spec.count} elements (got {len(elems)})")
        out = []
        for e in elems:
            if kind == "av":
                e = tr.coerce(e, want) if want is not None else e
                if isinstance(e, ir.Reg):
                    _check_type(t, e, want, what, loc)
                elif not isinstance(e, ir.Imm):
                    fail("registers or immediates")
            else:
                if isinstance(e, ir.Sink) and kind == "dv":
                    out.append(e)
                    continue
                if not isinstance(e, ir.Reg):
                    fail("registers")
                _check_type(t, e, want, what, loc)
            out.append(e)
        return ir.Vec(tuple(out))
    if kind == "dpair":
        types = (spec.type or "|").split("|")
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            fail("a pair (reg, pred); use T.sink for an unwanted side")
        for e, ty in zip(value, types):
            if not isinstance(e, (ir.Reg, ir.Sink)):
                fail("registers or T.sink")
            if isinstance(e, ir.Reg) and ty:
                _check_type(t, e, as_dtype(ty), what, loc)
        return ir.Vec(tuple(value), "|")
    if kind == "sym":
        if isinstance(value, (ir.Sym, str)):
            return value
        fail("a symbol")
    if kind == "tref":
        if isinstance(value, ir.TensorRef):
            return value
        fail("a tensor reference T.tmap_ref(tmap, coord0, ...) / tmap[c0, c1]")
    raise tr.TraceError(f"{what}: unsupported operand kind {kind!r} in binding", loc, t.name)


def as_address(value, fail=None) -> ir.Addr:
    """An `Addr` from an Addr, a register holding an address, or an object with `__tirx_addr__`."""
    if isinstance(value, ir.Addr):
        return value
    if isinstance(value, ir.Reg):
        return ir.Addr(value, 0)
    if isinstance(value, ir.Sym):
        return ir.Addr(value, 0)
    conv = getattr(value, "__tirx_addr__", None)
    if conv is not None:
        return conv()
    if fail is not None:
        fail("a memory address (buffer.at(i), a register, an mbarrier)")
    raise TypeError(f"not an address: {value!r}")


def _check_type(t, reg, want, what, loc):
    if want is None:
        return
    if not type_compatible(reg.dtype, want):
        raise tr.TraceError(f"{what} expects type .{want}, got register of type .{reg.dtype}",
                            loc, t.name)
