"""The TIRx intermediate representation.

A traced kernel is a tree: `KernelIR` -> `Block` -> statements (`Instr`, `If`, `For`, `Loop`,
`Break`). Every `Instr` is exactly one PTX instruction, carrying the binding that validated it and
the user's source location. Structured control flow is kept (not lowered to branches) so that
numsim can run warps with active masks and sync_check can reason about loops; only the PTX emitter
lowers it to labels and `bra`.

Operands are small immutable values: `Reg` (a typed virtual register), `Imm` (a typed immediate),
`Sym` (a named PTX symbol: a kernel parameter, a shared or a local variable), `SReg` (a special
register such as ``%tid.x``), `Addr` (``[base+offset]``) and `Vec` (``{a, b, c}``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Union

from .types import DType


@dataclass(frozen=True)
class Loc:
    """Where in the user's Python source an IR node was created."""

    file: str
    line: int
    func: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(eq=False)
class Reg:
    """A typed virtual register. Identity is the object; `id` orders them for the emitter."""

    id: int
    dtype: DType
    hint: str = ""

    def __repr__(self) -> str:
        return f"%{self.hint or 'r'}{self.id}:{self.dtype}"


@dataclass(frozen=True)
class Imm:
    """An immediate operand of a given PTX type."""

    value: Any
    dtype: DType

    def __repr__(self) -> str:
        return f"{self.value!r}:{self.dtype}"


@dataclass(frozen=True)
class Sym:
    """A named PTX symbol: a kernel parameter (`space="param"`), a shared or a local variable."""

    name: str
    space: str  # "param" | "shared" | "local"

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True)
class SReg:
    """A special register read as an operand (``%tid.x``, ``%clock64``)."""

    name: str
    dtype: DType

    def __repr__(self) -> str:
        return f"%{self.name}"


@dataclass(frozen=True)
class Addr:
    """A memory operand ``[base+offset]``; `base` is a register, a symbol or an absolute int."""

    base: Union[Reg, Sym, int]
    offset: int = 0

    def __add__(self, other: int) -> "Addr":
        if not isinstance(other, int):
            return NotImplemented
        return Addr(self.base, self.offset + other)

    def __repr__(self) -> str:
        off = f"+{self.offset}" if self.offset > 0 else (str(self.offset) if self.offset else "")
        return f"[{self.base!r}{off}]"


@dataclass(frozen=True)
class Vec:
    """A brace-enclosed operand vector ``{a, b, ...}`` (vector loads, MMA fragments)."""

    elems: tuple
    sep: str = ","  # "|" for PTX's paired destinations (``elect.sync %r|%p``), printed bare

    def __repr__(self) -> str:
        if self.sep == "|":
            return "|".join(repr(e) for e in self.elems)
        return "{" + ", ".join(repr(e) for e in self.elems) + "}"

    def __iter__(self) -> Iterator:
        return iter(self.elems)

    def __len__(self) -> int:
        return len(self.elems)


@dataclass(frozen=True)
class TensorRef:
    """A tensor-map operand ``[tmap, {c0, c1, ...}]`` (cp.async.bulk.tensor coordinates)."""

    base: Union[Reg, Sym]
    coords: tuple

    def __repr__(self) -> str:
        return f"[{self.base!r}, {{{', '.join(repr(c) for c in self.coords)}}}]"


@dataclass(frozen=True)
class Sink:
    """The PTX sink ``_`` for a destination whose value is not wanted."""

    def __repr__(self) -> str:
        return "_"


Operand = Union[Reg, Imm, Sym, SReg, Addr, Vec, TensorRef, Sink, str]


@dataclass(eq=False)
class Instr:
    """One PTX instruction.

    `spelling` is the full opcode with modifiers (``ld.global.v4.f32``); `operands` are in PTX order;
    `guard` is an optional predicate ``(reg, negated)``; `binding` is the registry entry that
    validated the spelling and operands (its effects and docs drive the analyzers); `modifiers`
    maps the binding's slot names to the tokens that filled them.
    """

    spelling: str
    operands: tuple
    binding: Any
    modifiers: dict
    loc: Loc
    guard: "tuple[Reg, bool] | None" = None

    @property
    def opcode(self) -> str:
        return self.spelling.split(".", 1)[0]

    def defs(self) -> list:
        """Registers this instruction writes (destination operands, per its binding)."""
        out = []
        for op, spec in zip(self.operands, self.binding.operand_specs(self.modifiers)):
            if spec.is_dest:
                out.extend(_regs_of(op))
        return out

    def uses(self) -> list:
        """Registers this instruction reads (sources, address bases, the guard)."""
        out = []
        # operand_specs: a binding's operands may be a callable of the modifiers (MMA shapes)
        for op, spec in zip(self.operands, self.binding.operand_specs(self.modifiers)):
            if not spec.is_dest or spec.kind in ("inout", "inoutv"):
                out.extend(_regs_of(op))
        if self.guard is not None:
            out.append(self.guard[0])
        return out

    def __repr__(self) -> str:
        g = ""
        if self.guard is not None:
            g = f"@{'!' if self.guard[1] else ''}{self.guard[0]!r} "
        return f"{g}{self.spelling} " + ", ".join(repr(o) for o in self.operands)


def _regs_of(op) -> list:
    if isinstance(op, Reg):
        return [op]
    if isinstance(op, Addr) and isinstance(op.base, Reg):
        return [op.base]
    if isinstance(op, Vec):
        return [e for e in op.elems if isinstance(e, Reg)]
    if isinstance(op, TensorRef):
        return ([op.base] if isinstance(op.base, Reg) else []) + \
            [c for c in op.coords if isinstance(c, Reg)]
    return []


@dataclass(eq=False)
class Block:
    """An ordered list of statements."""

    stmts: list = field(default_factory=list)

    def __iter__(self):
        return iter(self.stmts)

    def __len__(self):
        return len(self.stmts)


@dataclass(eq=False)
class If:
    """``if cond (or !cond) then ... else ...``; `uniform` asserts warp-uniform (``bra.uni``)."""

    cond: Reg
    negate: bool
    then: Block
    orelse: "Block | None"
    loc: Loc
    uniform: bool = False


@dataclass(eq=False)
class For:
    """Counted loop: ``for var in range(start, stop, step)``; bounds are Reg or Imm of var's type."""

    var: Reg
    start: Any
    stop: Any
    step: Any
    body: Block
    loc: Loc
    unroll: "int | None" = None


@dataclass(eq=False)
class Loop:
    """An unbounded loop left only through `Break` (``while`` and ``try_wait`` loops)."""

    body: Block
    loc: Loc


@dataclass(eq=False)
class Break:
    """Leave the innermost loop when `cond` holds (or always, when cond is None)."""

    cond: "Reg | None"
    negate: bool
    loc: Loc


@dataclass(eq=False)
class Annotation:
    """A profiling annotation (``T.iket.range`` / ``T.iket.mark``): no instruction of its own.

    A normal build emits nothing for it (the emitter skips it, numsim and the checkers ignore it);
    a profiling pass (the iket plugin) may replace it with instructions that record a timestamp.
    kind: ``begin`` / ``end`` (the two sides of a range) or ``mark`` (one instant); `name` is the
    user's label.
    """

    kind: str
    name: str
    loc: Loc


ANNOTATION_KINDS = ("begin", "end", "mark")

Stmt = Union[Instr, If, For, Loop, Break, Annotation]


@dataclass(frozen=True)
class ParamInfo:
    """A kernel parameter in the launch ABI.

    kind: ``ptr`` (a global pointer, 8 bytes, `dtype` is the element type), ``scalar`` (by value),
    ``tensormap`` (a 128-byte CUtensorMap passed by value, 64-byte aligned).
    """

    name: str
    kind: str
    dtype: DType
    size: int
    align: int

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "dtype": self.dtype.name,
                "size": self.size, "align": self.align}


# Shared-memory layouts (`tirxh.core.lang.memory.shared` argues the choice):
# "window": every shared variable lives in the one dynamic window ``tirx_dsmem`` at an offset the
# compiler computes, the window's base rounded up at run time when a variable needs more than the
# 16 bytes the hardware guarantees; "split": variables declared without `dynamic` are static
# ``.shared`` declarations placed by ptxas, and the window follows them wherever the driver puts
# it (kept for probes of that placement: benchmarks/probes).
SMEM_LAYOUTS = ("window", "split")
SMEM_GUARANTEED_ALIGN = 16  # the dynamic window's base alignment a kernel may rely on


@dataclass(eq=False)
class SharedVar:
    """A shared-memory variable: static (`.shared .align A .b8 name[N]`, layout "split") or in
    the dynamic window at `offset` (`dynamic`; every variable of layout "window")."""

    name: str
    nbytes: int
    align: int
    dtype: DType
    shape: tuple
    swizzle: int = 0  # 0, 32, 64 or 128 (bytes): the layout the user promises to write/read with
    dynamic: bool = False
    offset: int = 0  # offset inside the dynamic window, for dynamic allocations
    loc: "Loc | None" = None


@dataclass(eq=False)
class LocalVar:
    """A local-memory variable: ``.local .align A .b8 name[N]`` in the entry body, one private
    copy per thread (PTX ISA 5.1.5). Addressed like shared memory: ``[name+off]``, or a 32-bit
    register from ``mov.u32 r, name`` (the local window of the thread)."""

    name: str
    nbytes: int
    align: int
    dtype: DType
    shape: tuple
    loc: "Loc | None" = None


@dataclass(eq=False)
class KernelIR:
    """A traced, specialized kernel: parameters, shared and local memory, launch facts and the
    body."""

    name: str
    params: list
    body: Block
    shared: list
    block: tuple
    cluster: "tuple | None"
    dynamic_smem: int
    max_threads: "int | None"
    min_blocks: "int | None"
    consts: dict
    loc: Loc
    regs: list = field(default_factory=list)
    dynamic_align: int = 16
    maxnreg: "int | None" = None
    local: list = field(default_factory=list)  # LocalVar, in declaration order
    smem_layout: str = "window"  # one of SMEM_LAYOUTS

    @property
    def smem_base_align(self) -> int:
        """The alignment the kernel establishes for the window's base at run time (its prologue
        rounds the address of ``tirx_dsmem`` up), or 0 when it needs no rounding: layout
        "window" with a variable aligned beyond `SMEM_GUARANTEED_ALIGN`."""
        if self.smem_layout == "window" and self.dynamic_align > SMEM_GUARANTEED_ALIGN and \
                any(v.dynamic for v in self.shared):
            return self.dynamic_align
        return 0

    @property
    def smem_slack(self) -> int:
        """Bytes of `dynamic_smem` reserved for rounding the base up (the base moves by at most
        this much from a 16-byte-aligned address)."""
        a = self.smem_base_align
        return a - SMEM_GUARANTEED_ALIGN if a else 0

    @property
    def threads_per_block(self) -> int:
        n = 1
        for d in self.block:
            n *= d
        return n

    def walk(self) -> Iterator:
        """Every statement, depth first, in program order."""
        yield from walk_block(self.body)

    def instructions(self) -> Iterator[Instr]:
        for s in self.walk():
            if isinstance(s, Instr):
                yield s


def walk_block(block: Block) -> Iterator:
    for s in block.stmts:
        yield s
        if isinstance(s, If):
            yield from walk_block(s.then)
            if s.orelse is not None:
                yield from walk_block(s.orelse)
        elif isinstance(s, (For, Loop)):
            yield from walk_block(s.body)
