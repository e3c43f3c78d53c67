"""Assemble every binding's example spellings for a target: does ptxas agree with the tables?

A binding set is only as good as its agreement with ptxas. For one target and one binding set
(``iset``), `check_iset` builds one kernel that emits every example of every binding the target
accepts, each with automatically built operands (fresh registers of the operand types, the shared
buffer or the global pointer for memory operands according to their state space, an mbarrier for
barrier operands, b64 registers for descriptors, the generic address of the kernel's
``T.tensormap`` parameter for tensor operands), and assembles it with nvJitLink at ``-O0`` (the
operands are dead; optimization would drop the instructions before ptxas's later passes see them).
One nvJitLink call costs ~0.05-0.25 s, so a failure is bisected to the examples responsible only
when the whole kernel fails; a group that fails while its halves pass is reported as such (fail
closed), and forms ptxas refuses to mix in one function get separate kernels (`kernel_groups`).

Example syntax (`Binding.example` / `Binding.examples`): the dotted spelling, optionally followed by
``name=value`` words giving the value of operand `name` (an immediate such as ``n=240``, ``a=1.5``,
a special register such as ``a=%tid.x``, or ``_`` for the sink). Operands not named get fresh
registers; immediates (kind ``i``) get 0 unless named.

Third-party plugin authors can run the same check on their own sets::

    from tirxh.core.isa_check import check_iset
    failures = check_iset(isa, target, "myset")
"""

from __future__ import annotations

from dataclasses import dataclass
import tirxh.lang as T

from . import ir
from .emit_ptx import CompileError, emit_ptx
from .lang import trace as tr
from .lang.ptxns import call_instruction
from .lang.trace import TraceError
from .toolchain import ptx_to_cubin
from .types import dtype as as_dtype


@dataclass(frozen=True)
class Example:
    """One example of one binding: the spelling and the operand values it names."""

    binding: object
    text: str
    spelling: str
    values: tuple  # ((operand name, value), ...)


@dataclass
class Failure:
    """An example the toolchain (or the tracer) refused, with the reason."""

    example: Example
    target: str
    message: str

    def __str__(self) -> str:
        return (f"{self.target}: {self.example.binding.name} example {self.example.text!r}: "
                f"{self.message}")


def parse_example(binding, text: str) -> Example:
    """Split ``"spelling name=value ..."`` into an `Example` (values parsed as Python numbers)."""
    words = text.split()
    if not words:
        raise ValueError(f"binding {binding.name!r}: empty example")
    values = []
    for w in words[1:]:
        name, eq, raw = w.partition("=")
        if not eq or not name:
            raise ValueError(f"binding {binding.name!r}: example {text!r}: expected name=value, "
                             f"found {w!r}")
        values.append((name, _value(raw)))
    return Example(binding, text, words[0], tuple(values))


def _value(raw: str):
    if raw.startswith("%") or raw == "_":  # a special register, or the sink
        return raw
    try:
        return int(raw, 0)
    except ValueError:
        return float(raw)


def examples_for(isa, target, iset: str) -> list:
    """Every example of `iset`'s bindings that `target` accepts (modifiers included)."""
    out = []
    for b in isa:
        if b.iset != iset or b.accepts_target(target) is not None:
            continue
        for text in b.all_examples:
            ex = parse_example(b, text)
            mods = b.match(ex.spelling.split(".")[1:])
            if mods is None:
                raise ValueError(f"binding {b.name!r}: its example {text!r} does not match its "
                                 f"own slots: {b.explain_mismatch(ex.spelling.split('.')[1:])}")
            if b.accepts_target(target, mods) is None:
                out.append(ex)
    return out


# --- building the kernel -------------------------------------------------------------------------

class _Operands:
    """Builds operand values for examples inside a trace (one shared buffer, one mbarrier)."""

    def __init__(self, T, g, tm):
        self.T, self.g, self.tm = T, g, tm
        self.smem = T.shared("b8", 8192, align=1024, name="isa_smem")
        self.bar = T.mbarrier(1, name="isa_bar")
        self._tmap = None

    def value(self, binding, spec, given):
        T = self.T
        kind = spec.kind
        want = as_dtype(spec.type) if spec.type and "|" not in spec.type else None
        if given is not None:
            if given == "_":
                return ir.Sink()
            if isinstance(given, str) and given.startswith("%"):
                return ir.SReg(given[1:], want or as_dtype("u32"))
            if kind in ("av", "dv", "inoutv"):
                return [given] * (spec.count or 1)
            return given
        if kind == "i":
            return 0
        if kind in ("d", "a", "inout"):
            return T.reg(want)
        if kind in ("dv", "av", "inoutv"):
            return [T.reg(want) for _ in range(spec.count or 1)]
        if kind == "dpair":
            return tuple(T.reg(x) for x in spec.type.split("|"))
        if kind == "m":
            return self.address(binding, spec)
        if kind == "tref":
            return ir.TensorRef(self.tmap_generic(),
                                tuple(T.reg("s32") for _ in range(spec.count or 1)))
        raise ValueError(f"binding {binding.name!r}: cannot build an operand of kind {kind!r} "
                         f"({spec.name})")

    def tmap_generic(self):
        """The tensor map's generic address (TMA rejects the bare .param symbol).

        The language's `TensorMapParam` already holds it in a register; should it hold the
        parameter symbol, take it here with ``mov.u64 r, tm`` + ``cvta.param.u64 g, r``.
        """
        if self._tmap is None:
            self._tmap = self.tm.sym
            if isinstance(self._tmap, ir.Sym):
                self._tmap = self.T.ptx.cvta.param.u64(self.T.ptx.mov.u64(self._tmap))
        return self._tmap

    def address(self, binding, spec):
        space = spec.space or "generic"
        if "tmap" in spec.name:  # a tensor map: the parameter itself, or its generic address
            if space == "param":
                return ir.Addr(ir.Sym(self.tm.name, "param"))
            return ir.Addr(self.tmap_generic())
        if "mbar" in spec.name or binding.opcode == "mbarrier":
            return self.bar[0].addr
        if space.startswith("shared"):
            return self.smem.at(0)
        if space == "param":
            return ir.Addr(ir.Sym(self.g.name, "param"))
        if space == "tmem":
            return ir.Addr(self.T.reg("b32"))
        return self.g.at(0)  # global, generic, local, const: a 64-bit address register


def _emit(ops: _Operands, ex: Example, loc: ir.Loc) -> None:
    t = tr.current()
    b = ex.binding
    mods = b.match(ex.spelling.split(".")[1:])
    given = dict(ex.values)
    specs = b.operand_specs(mods)
    unknown = set(given) - {s.name for s in specs}
    if unknown:
        raise tr.TraceError(f"example {ex.text!r} names operands {sorted(unknown)} that "
                            f"{b.name} does not have ({', '.join(s.name for s in specs)})", loc)
    t.loc_override = loc
    try:
        args = [ops.value(b, s, given.get(s.name)) for s in specs
                if not (s.optional and s.name not in given)]
        n = len(t.block.stmts)
        call_instruction(ex.spelling, tuple(args))
        got = t.block.stmts[n] if len(t.block.stmts) > n else None
        if isinstance(got, ir.Instr) and got.binding is not b:
            raise tr.TraceError(f"example {ex.text!r} of {b.name} resolves to binding "
                                f"{got.binding.name!r} registered before it (same spelling, "
                                "operands fit both)", loc)
    finally:
        t.loc_override = None


def build_kernel(examples: list, name: str = "isa_examples"):
    """A `T.kernel` emitting every example once (source lines are the examples' indices)."""

    def body(g, tm):
        ops = _Operands(T, g, tm)
        for i, ex in enumerate(examples):
            _emit(ops, ex, ir.Loc(f"<example {ex.binding.name}: {ex.text}>", i + 1))

    # set here, not as annotations in the signature: this module uses postponed annotations
    body.__annotations__ = {"g": T.gptr[T.u8], "tm": T.tensormap}
    body.__name__ = name
    return T.kernel(body, block=128, name=name)


# --- assembling ----------------------------------------------------------------------------------

def _assemble(examples: list, target, isa) -> "str | None":
    """None when the examples trace and assemble for `target`, else the error text."""
    try:
        k = build_kernel(examples).specialize(isa=isa)
        ptx = emit_ptx(k, target, line_info=False)
        # -O0: keep every instruction (the operands are dead), so ptxas's later passes see them
        ptx_to_cubin(ptx, target.name, line_info=False, extra=("-O0",))
    except (TraceError, CompileError, ValueError) as e:
        return str(e)
    except Exception as e:  # ToolchainError: ptxas/nvJitLink refused the PTX
        return f"{type(e).__name__}: {e}"
    return None


def check_examples(examples: list, target, isa) -> list:
    """Assemble `examples` in one kernel; on failure, bisect to the failing examples.

    Fails closed: when a group fails but each half assembles on its own (an interaction between
    examples, such as two forms ptxas will not mix in one function), the group is reported.
    """
    err = _assemble(examples, target, isa)
    if err is None:
        return []
    if len(examples) == 1:
        return [Failure(examples[0], target.name, _short(err))]
    mid = len(examples) // 2
    found = check_examples(examples[:mid], target, isa) + \
        check_examples(examples[mid:], target, isa)
    if not found:
        names = ", ".join(sorted({ex.binding.name for ex in examples}))
        found = [Failure(examples[0], target.name,
                         f"{len(examples)} examples ({names}) fail together but assemble apart: "
                         f"{_short(err)}")]
    return found


def kernel_groups(examples: list) -> list:
    """Split examples into the kernels they may share.

    ptxas refuses some mixes inside one function: tcgen05 ``.cta_group::1`` and ``.cta_group::2``
    ("uses single CTA and CTA pair granularity ... not allowed"), so each gets its own kernel.
    """
    groups: dict = {}
    for ex in examples:
        key = "cta_group::2" if "cta_group::2" in ex.spelling.split(".") else ""
        groups.setdefault(key, []).append(ex)
    return list(groups.values())


def check_iset(isa, target, iset: str) -> list:
    """`Failure`s of every example of `iset` on `target` (an empty list: all assemble)."""
    out = []
    for group in kernel_groups(examples_for(isa, target, iset)):
        out += check_examples(group, target, isa)
    return out


def _short(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    keep = [ln for ln in lines if "error" in ln.lower()] or lines
    return " | ".join(keep[:4])
