"""The tracing context: where a kernel's Python body records IR.

A kernel body runs once per specialization inside a `Trace`. Every language call appends IR to the
innermost open `Block`; `Register` values carry operator sugar in which each operator is exactly one
PTX instruction (``a + b`` -> ``add.<type>``; ``i < n`` -> ``setp.lt.<type>``). Locations are taken
from the first stack frame outside the tirxh package, so every error and every ``.loc`` points at
the user's line.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager


from .. import ir
from ..errors import TraceError
from ..types import DType, dtype as as_dtype
# ptxns binds spellings to instructions and records them here; each module uses the other only
# inside functions, so the two import each other at module level whichever is imported first
from . import ptxns

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
_SKIP_FILES = ("contextlib.py",)


def user_loc() -> ir.Loc:
    """The innermost stack frame that is not tirxh's own code (the user's kernel line)."""
    if _ACTIVE and _ACTIVE[-1].loc_override is not None:
        return _ACTIVE[-1].loc_override
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(_PKG_DIR) and not fn.startswith("<frozen") and \
                not fn.endswith(_SKIP_FILES):
            return ir.Loc(fn, f.f_lineno, f.f_code.co_name)
        f = f.f_back
    return ir.Loc("<unknown>", 0)


class Trace:
    """State of one kernel trace: register numbering, open blocks, shared variables."""

    def __init__(self, name: str, isa):
        self.name = name
        self.isa = isa
        self.blocks: list[ir.Block] = [ir.Block()]
        self.regs: list[ir.Reg] = []
        self.shared: list[ir.SharedVar] = []
        self.local: list[ir.LocalVar] = []
        self.smem_layout = "window"  # ir.SMEM_LAYOUTS: the kernel's option (memory.shared)
        self.last_if: "ir.If | None" = None
        self.loc_override: "ir.Loc | None" = None  # set while emitting the kernel prologue
        self._names: dict[str, int] = {}

    @property
    def block(self) -> ir.Block:
        return self.blocks[-1]

    def new_reg(self, dt: "DType | str", hint: str = "") -> "Register":
        r = Register(len(self.regs), as_dtype(dt), hint)
        self.regs.append(r)
        return r

    def append(self, stmt) -> None:
        self.block.stmts.append(stmt)
        self.last_if = stmt if isinstance(stmt, ir.If) else None

    @contextmanager
    def open_block(self, block: ir.Block):
        self.blocks.append(block)
        try:
            yield block
        finally:
            self.blocks.pop()

    def unique(self, base: str) -> str:
        n = self._names.get(base, 0)
        self._names[base] = n + 1
        return base if n == 0 else f"{base}_{n}"

    def error(self, message: str, loc: "ir.Loc | None" = None) -> TraceError:
        return TraceError(message, loc or user_loc(), self.name)


_ACTIVE: list[Trace] = []


def current() -> Trace:
    """The trace being recorded; language calls outside a kernel body are an error."""
    if not _ACTIVE:
        raise TraceError("this TIRx call is only valid inside a @T.kernel body while it is traced",
                         user_loc())
    return _ACTIVE[-1]


def active() -> bool:
    return bool(_ACTIVE)


@contextmanager
def tracing(trace: Trace):
    _ACTIVE.append(trace)
    try:
        yield trace
    finally:
        _ACTIVE.pop()


def emit(spelling: str, *args, pred=None, **kw):
    """Emit one bound instruction by spelling (used by the sugar below and by helpers)."""
    return ptxns.call_instruction(spelling, args, pred=pred, **kw)


# --- operator sugar: each operator is one PTX instruction ----------------------------------------

_CMP = {"lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "eq": "eq", "ne": "ne"}


def _type_suffix(dt: DType, op: str) -> str:
    """The type modifier PTX wants for `op` on `dt` (bit ops on .bN, shifts signed-aware)."""
    if op in ("and", "or", "xor", "not"):
        return "pred" if dt.kind == "pred" else f"b{dt.bits}"
    if op == "shl":
        return f"b{dt.bits}"
    if dt.kind == "bits":  # arithmetic on raw bits: treat as unsigned
        return f"u{dt.bits}"
    return dt.name


class Register(ir.Reg):
    """A typed virtual register with PTX operator sugar (one operator, one instruction)."""

    __hash__ = object.__hash__  # identity, though == is overloaded

    def _bin(self, op: str, other, reverse: bool = False):
        if not active():
            return NotImplemented
        t = current()
        other = coerce(other, self.dtype)
        if isinstance(other, Register) and other.dtype != self.dtype and \
                _type_suffix(other.dtype, op) != _type_suffix(self.dtype, op):
            raise t.error(f"operator {op!r} on registers of different types {self.dtype} and "
                          f"{other.dtype}; convert one explicitly with T.ptx.cvt")
        a, b = (other, self) if reverse else (self, other)
        dt = self.dtype
        if op == "mul" and dt.kind in ("uint", "sint", "bits"):
            return emit(f"mul.lo.{_type_suffix(dt, op)}", a, b)
        if op == "div" and dt.is_float:
            return emit(f"div.rn.{dt.name}", a, b)
        if op == "shr":
            return emit(f"shr.{'s' if dt.is_signed else 'u'}{dt.bits}", a, b)
        return emit(f"{op}.{_type_suffix(dt, op)}", a, b)

    def _cmp(self, op: str, other):
        if not active() or not isinstance(other, (Register, int, float)):
            return NotImplemented
        other = coerce(other, self.dtype)
        suffix = self.dtype.name if self.dtype.kind != "bits" else f"u{self.dtype.bits}"
        return emit(f"setp.{_CMP[op]}.{suffix}", self, other)

    def __add__(self, o): return self._bin("add", o)
    def __radd__(self, o): return self._bin("add", o, True)
    def __sub__(self, o): return self._bin("sub", o)
    def __rsub__(self, o): return self._bin("sub", o, True)
    def __mul__(self, o): return self._bin("mul", o)
    def __rmul__(self, o): return self._bin("mul", o, True)
    def __truediv__(self, o): return self._bin("div", o)
    def __floordiv__(self, o): return self._bin("div", o)
    def __mod__(self, o): return self._bin("rem", o)
    def __and__(self, o): return self._bin("and", o)
    def __rand__(self, o): return self._bin("and", o, True)
    def __or__(self, o): return self._bin("or", o)
    def __ror__(self, o): return self._bin("or", o, True)
    def __xor__(self, o): return self._bin("xor", o)
    def __rxor__(self, o): return self._bin("xor", o, True)
    def __lshift__(self, o): return self._bin("shl", coerce(o, as_dtype("u32")) if isinstance(o, int) else o)
    def __rshift__(self, o): return self._bin("shr", coerce(o, as_dtype("u32")) if isinstance(o, int) else o)
    def __lt__(self, o): return self._cmp("lt", o)
    def __le__(self, o): return self._cmp("le", o)
    def __gt__(self, o): return self._cmp("gt", o)
    def __ge__(self, o): return self._cmp("ge", o)

    def __eq__(self, o):
        if active() and isinstance(o, (Register, int, float)) and o is not self:
            return self._cmp("eq", o)
        return self is o

    def __ne__(self, o):
        if active() and isinstance(o, (Register, int, float)) and o is not self:
            return self._cmp("ne", o)
        return self is not o

    def __neg__(self):
        return emit(f"neg.{_type_suffix(self.dtype, 'neg')}", self)

    def __invert__(self):
        if self.dtype.kind == "pred":
            return Not(self)
        return emit(f"not.b{self.dtype.bits}", self)

    def __bool__(self):
        raise current().error(
            "a device register has no Python truth value; use `with T.if_(cond):` for a device "
            "branch (Python `if` runs at trace time)")

    def __index__(self):
        raise current().error("a device register cannot index a Python sequence at trace time")

    def set(self, value) -> None:
        """Assign: ``mov.<type> self, value`` (for loop-carried and mutable registers)."""
        dt = self.dtype
        ty = dt.name if dt.kind != "pred" else "pred"
        if dt.kind == "float" and dt.name not in ("f32", "f64"):
            ty = f"b{max(16, dt.bits)}"  # mov has no .f16/.bf16/packed types: move the bits
        emit(f"mov.{ty}", self, coerce(value, dt))


class Not:
    """A negated predicate, lazily: a guard or branch uses ``@!p``; as a value it emits not.pred."""

    def __init__(self, p: Register):
        self.p = p

    def __invert__(self):
        return self.p

    def materialize(self) -> Register:
        return emit("not.pred", self.p)


def coerce(value, dt: DType):
    """Python numbers become immediates of `dt`; registers and IR operands pass through."""
    if isinstance(value, Not):
        return value.materialize()
    if isinstance(value, bool):
        return ir.Imm(int(value), dt)
    if isinstance(value, (int, float)):
        if dt.kind in ("uint", "bits") and isinstance(value, int) and value < 0:
            value &= (1 << dt.bits) - 1
        return ir.Imm(value, dt)
    return value


def as_guard(pred) -> "tuple[ir.Reg, bool] | None":
    """Turn a `pred=` argument into an ``(register, negated)`` guard."""
    if pred is None:
        return None
    if isinstance(pred, Not):
        return (pred.p, True)
    if isinstance(pred, tuple) and len(pred) == 2:
        return pred
    if isinstance(pred, ir.Reg) and pred.dtype.kind == "pred":
        return (pred, False)
    raise current().error(f"pred= expects a predicate register or ~predicate, got {pred!r}")

