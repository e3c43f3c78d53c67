"""Parameters, special registers, shared and local memory, mbarriers and fragments.

Sugar here compresses mechanical boilerplate (parameter loads, address arithmetic, barrier arrays)
without hiding instructions: each helper's docstring lists exactly what it emits.
"""

from __future__ import annotations

import linecache
import re

from .. import ir
from ..types import DType, dtype as as_dtype
from . import trace as tr
from .control import break_, loop
from .ptxns import SINK


# --- parameter annotations -----------------------------------------------------------------------

class PtrType:
    """Annotation ``T.gptr[T.f32]``: a global-memory pointer to elements of a type."""

    def __init__(self, elem: DType):
        self.elem = as_dtype(elem)

    def __class_getitem__(cls, elem):
        return cls(elem)

    def __repr__(self):
        return f"T.gptr[T.{self.elem}]"


gptr = PtrType


class TensorMapType:
    """Annotation ``T.tensormap``: a 128-byte CUtensorMap passed by value (``.param .align 64``)."""

    def __repr__(self):
        return "T.tensormap"


tensormap = TensorMapType()


class ConstType:
    """Annotation ``T.const`` (or ``T.const[int]``): a compile-time constant that specializes.
    ``T.const.one_of(0, 1, 2)`` also names the only values the kernel has code for: any other
    value is refused when the constants are resolved (`Kernel.resolve_consts`), wherever they
    came from (a suite's case, a multi-launch plan, a direct ``compile``), instead of tracing
    whichever branch the body's ``if`` chain falls into."""

    def __init__(self, py=None, choices=None):
        self.py, self.choices = py, choices

    def __getitem__(self, py):
        return ConstType(py, self.choices)

    def one_of(self, *values):
        if not values:
            raise ValueError("T.const.one_of needs at least one value")
        for v in values:
            hash(v)   # a value must be usable as a specialization key
        return ConstType(self.py, tuple(values))

    def __repr__(self):
        if self.choices is None:
            return "T.const"
        return f"T.const.one_of({', '.join(map(repr, self.choices))})"


const = ConstType()


class GlobalPtr:
    """A global pointer parameter inside a kernel body.

    At kernel entry it emits ``ld.param.u64 p, [name]`` and ``cvta.to.global.u64 g, p``;
    `.at(i)` emits one ``mad.wide.u32``/``mad.wide.s32`` (``mad.lo.u64`` for 64-bit indices) and
    returns the address ``[g + i*sizeof(elem)]``; a Python-int index emits nothing.
    """

    def __init__(self, name: str, elem: DType, base: ir.Reg):
        self.name, self.elem, self.base = name, elem, base

    def at(self, index=0, offset_bytes: int = 0) -> ir.Addr:
        size = self.elem.nbytes
        if isinstance(index, int):
            return ir.Addr(self.base, index * size + offset_bytes)
        if not isinstance(index, ir.Reg):
            raise tr.current().error(f"{self.name}.at() expects an int or register index")
        dt = index.dtype
        if dt.bits == 32:
            addr = tr.emit(f"mad.wide.{'s' if dt.is_signed else 'u'}32", index, size, self.base)
        else:
            addr = tr.emit(f"mad.lo.{'s' if dt.is_signed else 'u'}64", index, size, self.base)
        return ir.Addr(addr, offset_bytes)

    def __tirx_addr__(self) -> ir.Addr:
        return ir.Addr(self.base, 0)

    def __tirx_operand__(self):
        return self.base

    def __repr__(self):
        return f"<gptr {self.name}: {self.elem}>"


class TensorMapParam:
    """A tensor-map parameter; ``tmap[c0, c1]`` is the ``[tmap, {c0, c1}]`` operand of TMA.

    TMA takes the map by generic address, so at kernel entry the parameter's address is taken
    with ``mov.u64 r, name`` and ``cvta.param.u64 g, r`` (ptxas rejects the bare param symbol:
    "state space mismatch").
    """

    def __init__(self, name: str, generic: ir.Reg):
        self.name = name
        self.sym = generic

    def __getitem__(self, coords) -> ir.TensorRef:
        if not isinstance(coords, tuple):
            coords = (coords,)
        coords = tuple(tr.coerce(c, as_dtype("s32")) for c in coords)
        return ir.TensorRef(self.sym, coords)

    def __tirx_addr__(self) -> ir.Addr:
        return ir.Addr(self.sym, 0)

    def __repr__(self):
        return f"<tensormap {self.name}>"


# --- special registers ----------------------------------------------------------------------------

_SREG_TYPES = {"clock64": "u64", "globaltimer": "u64", "gridid": "u64",
               "is_explicit_cluster": "pred", "lanemask_eq": "b32", "lanemask_lt": "b32",
               "lanemask_le": "b32", "lanemask_gt": "b32", "lanemask_ge": "b32"}


def read_sreg(name: str) -> tr.Register:
    """Read a special register: ``mov.<type> r, %name``."""
    dt = as_dtype(_SREG_TYPES.get(name, "u32"))
    return tr.emit(f"mov.{dt.name}", ir.SReg(name, dt))


class _Vec3SReg:
    """``T.tid.x`` -> ``mov.u32 r, %tid.x`` (each access emits one mov; ptxas merges repeats)."""

    def __init__(self, name: str):
        self._name = name

    @property
    def x(self): return read_sreg(f"{self._name}.x")

    @property
    def y(self): return read_sreg(f"{self._name}.y")

    @property
    def z(self): return read_sreg(f"{self._name}.z")


tid, ntid, ctaid, nctaid = (_Vec3SReg(n) for n in ("tid", "ntid", "ctaid", "nctaid"))
clusterid, nclusterid = _Vec3SReg("clusterid"), _Vec3SReg("nclusterid")
cluster_ctaid, cluster_nctaid = _Vec3SReg("cluster_ctaid"), _Vec3SReg("cluster_nctaid")


def sreg(name: str) -> tr.Register:
    """Any scalar special register by PTX name: ``T.sreg("laneid")``, ``T.sreg("clock64")``."""
    return read_sreg(name)


def laneid(): return read_sreg("laneid")
def warpid(): return read_sreg("warpid")
def smid(): return read_sreg("smid")
def clock(): return read_sreg("clock")
def clock64(): return read_sreg("clock64")
def globaltimer(): return read_sreg("globaltimer")
def cluster_ctarank(): return read_sreg("cluster_ctarank")


# --- shared memory --------------------------------------------------------------------------------

class _SymbolBuffer:
    """An array addressed through its own PTX symbol (shared or local memory); see the
    subclasses. The symbol stands for the variable's first byte wherever the layout puts it."""

    space = "?"

    def __init__(self, var, sym: ir.Sym):
        self.var, self.sym = var, sym
        self.dtype, self.shape = var.dtype, var.shape

    @property
    def nbytes(self) -> int:
        return self.var.nbytes

    def ptr(self, offset_bytes: int = 0) -> tr.Register:
        base = tr.emit("mov.u32", self.sym)
        return tr.emit("add.u32", base, offset_bytes) if offset_bytes else base

    def at(self, *idx) -> ir.Addr:
        return _element_addr(self.var, self.sym, idx)

    def __tirx_addr__(self) -> ir.Addr:
        return ir.Addr(self.sym, 0)

    def __repr__(self):
        return f"<{self.space} {self.var.name}: {self.dtype}{list(self.shape)}>"


class SharedBuffer(_SymbolBuffer):
    """A shared-memory allocation made by `T.shared`.

    `.at(*idx)` with Python ints is a static address ``[sym+off]`` (no instruction); with a register
    index it emits ``mov.u32 base, sym`` once per call site plus one ``mad.lo.u32`` per register
    index (row-major strides). `.ptr()` emits ``mov.u32 r, sym`` (and ``add.u32`` for an offset)
    and returns the 32-bit shared address, for descriptors and TMA destinations. The PTX text
    spells the symbol of a variable in the window as ``tirx_dsmem+OFF`` (`shared` says why).
    """

    space = "shared"


def _element_addr(var, sym: ir.Sym, idx: tuple) -> ir.Addr:
    """``[sym + row-major offset of idx]``: Python-int indices fold into the offset; register
    indices emit ``mov.u32 base, sym`` and one ``mad.lo.u32`` each (shared and local windows are
    32-bit)."""
    if not idx:
        idx = (0,)
    if len(idx) > len(var.shape):
        raise tr.current().error(f"{var.name}.at(): {len(idx)} indices for shape {var.shape}")
    strides, acc = [], var.dtype.nbytes
    for d in reversed(var.shape):
        strides.append(acc)
        acc *= d
    strides = list(reversed(strides))[: len(idx)]
    const = sum(i * s for i, s in zip(idx, strides) if isinstance(i, int))
    dyn = [(i, s) for i, s in zip(idx, strides) if not isinstance(i, int)]
    if not dyn:
        return ir.Addr(sym, const)
    addr = tr.emit("mov.u32", sym)
    for i, s in dyn:
        addr = tr.emit("mad.lo.u32", i, s, addr)
    return ir.Addr(addr, const)


# ``name = T.shared(...)`` (an annotation allowed): the Python variable a declaration assigns to
_ASSIGNED = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=(?!=)")


def declared_name(default: str) -> str:
    """The variable the user's line assigns a declaration to (``red = T.shared(T.f32, 32)`` ->
    ``red``), so the PTX symbol and every finding (``red+4``, not ``smem+4``) name memory as the
    kernel declared it; `default` when the line is not a plain assignment. An explicit
    ``name=`` always wins."""
    loc = tr.user_loc()
    m = _ASSIGNED.match(linecache.getline(str(loc.file), int(loc.line)))
    return m.group(1) if m else default


def _nbytes(dt: DType, shape: tuple) -> int:
    n = dt.nbytes
    for d in shape:
        n *= d
    return n


def shared(dtype, shape, align: int = 16, swizzle: int = 0, dynamic: bool = False,
           name: "str | None" = None) -> SharedBuffer:
    """Allocate shared memory (no instruction: a place in the kernel's shared window).

    The layout (issue 19, the H200's misaligned-address faults in decode_attention): every
    variable of a kernel lives in one dynamic window, ``.extern .shared .b8 tirx_dsmem[]``, at an
    offset the compiler computes (`pack_window`), each at its own alignment; the kernel
    declares no static ``.shared`` variables, so the window starts at the CTA's shared base and
    nothing is placed in front of it by ptxas or the driver. The PTX ISA lets a kernel rely on
    16 bytes of alignment for the window and no more (where the driver puts a window behind static
    variables, whatever ``.align`` it declares, is not specified; public kernels round the base up
    by hand for that reason): when a variable asks for more (``align=1024`` for a 128B-swizzled
    TMA tile), the kernel's prologue rounds the window's address up to that alignment at run time
    (``mov.u32``, ``add.u32``, ``and.b32`` into ``%tirx_smem``) and the launch provides
    ``align - 16`` bytes more (`KernelIR.smem_slack`). Either way the variables' offsets from the
    (rounded) base are the compiler's, the same in the PTX, in numsim and on the GPU.

    `align`: a power of two (the variable's byte offset is a multiple of it). `swizzle` (0, 32,
    64, 128 bytes) records the layout the kernel writes and reads it with (TMA and wgmma
    descriptors must agree); the swizzle pattern repeats every 8 rows of `swizzle` bytes and the
    hardware applies it to absolute addresses, so a swizzled variable needs
    ``align >= 8 * swizzle``. `dynamic` is kept for kernels written before the single window: with
    the default layout every variable is in the window anyway; with
    ``@T.kernel(smem_layout="split")`` (probes of the old placement only) a variable without it is
    a static ``.shared`` declaration.
    """
    t = tr.current()
    dt = as_dtype(dtype)
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    n = _nbytes(dt, shape)
    if swizzle not in (0, 32, 64, 128):
        raise t.error(f"T.shared(swizzle={swizzle!r}): expected 0, 32, 64 or 128 (bytes)")
    if not isinstance(align, int) or align < 1 or align & (align - 1):
        raise t.error(f"T.shared(align={align!r}): alignment must be a power of two")
    if swizzle and align < 8 * swizzle:
        raise t.error(f"T.shared(swizzle={swizzle}, align={align}): a {swizzle}-byte swizzle "
                      f"repeats every {8 * swizzle} bytes of absolute address; the variable needs "
                      f"align={8 * swizzle} or more")
    var = ir.SharedVar(t.unique(name or declared_name("smem")), n, align, dt, shape, swizzle,
                       dynamic or t.smem_layout == "window", 0, tr.user_loc())
    t.shared.append(var)
    return SharedBuffer(var, ir.Sym(var.name, "shared"))


def pack_window(variables: list) -> "tuple[int, int]":
    """Give every window variable (`dynamic`) of a traced kernel its offset: by alignment, largest
    first (declaration order among equals), each at its alignment, so that padding is only what
    sizes leave; returns (bytes, alignment) of the window. Offsets are assigned once the body is
    traced: addresses name the variable's symbol, so no instruction depends on them."""
    off, align = 0, ir.SMEM_GUARANTEED_ALIGN
    for v in sorted((v for v in variables if v.dynamic), key=lambda v: -v.align):
        v.offset = -(-off // v.align) * v.align
        off = v.offset + v.nbytes
        align = max(align, v.align)
    return off, align


# --- local memory ---------------------------------------------------------------------------------

class LocalBuffer(_SymbolBuffer):
    """A per-thread local-memory array made by `T.local` (``.local .align A .b8 name[N]``).

    Each thread has its own copy. `.at(*idx)` with Python ints is the static address
    ``[name+off]`` (no instruction); with a register index it emits ``mov.u32 base, name`` once per
    call site plus one ``mad.lo.u32`` per register index (row-major strides), for
    ``ld.local``/``st.local``. `.ptr()` emits ``mov.u32 r, name`` (+ ``add.u32``): the 32-bit
    address in the thread's local window.
    """

    space = "local"


def local(dtype, shape, align: int = 16, name: "str | None" = None) -> LocalBuffer:
    """Declare a per-thread local-memory array (no instruction: a function-scope
    ``.local .align A .b8 name[N]``). Use it for arrays indexed by registers, which registers
    cannot hold; ptxas places it in the stack frame (STL/LDL in SASS)."""
    t = tr.current()
    dt = as_dtype(dtype)
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if not shape or not all(isinstance(d, int) and d >= 1 for d in shape):
        raise t.error(f"T.local(shape={shape!r}): expected positive int dimensions")
    if not isinstance(align, int) or align < 1 or align & (align - 1):
        raise t.error(f"T.local(align={align!r}): alignment must be a power of two")
    if align < dt.nbytes:
        raise t.error(f"T.local(align={align!r}): below the {dt.nbytes}-byte size of .{dt}")
    var = ir.LocalVar(t.unique(name or declared_name("lmem")), _nbytes(dt, shape), align, dt, shape,
                      tr.user_loc())
    t.local.append(var)
    return LocalBuffer(var, ir.Sym(var.name, "local"))


# --- mbarriers ------------------------------------------------------------------------------------

class MBarrierRef:
    """One mbarrier (an 8-byte shared word). Every method is one instruction, except `wait`."""

    def __init__(self, addr: ir.Addr):
        self.addr = addr

    def __tirx_addr__(self) -> ir.Addr:
        return self.addr

    def init(self, count, pred=None) -> None:
        """``mbarrier.init.shared::cta.b64 [bar], count``"""
        tr.emit("mbarrier.init.shared::cta.b64", self.addr, count, pred=pred)

    def inval(self, pred=None) -> None:
        """``mbarrier.inval.shared::cta.b64 [bar]``"""
        tr.emit("mbarrier.inval.shared::cta.b64", self.addr, pred=pred)

    def arrive(self, pred=None) -> None:
        """``mbarrier.arrive.shared::cta.b64 _, [bar]``"""
        tr.emit("mbarrier.arrive.shared::cta.b64", SINK, self.addr, pred=pred)

    def arrive_expect_tx(self, tx_bytes, pred=None) -> None:
        """``mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], tx_bytes``"""
        tr.emit("mbarrier.arrive.expect_tx.shared::cta.b64", SINK, self.addr, tx_bytes, pred=pred)

    def expect_tx(self, tx_bytes, pred=None) -> None:
        """``mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [bar], tx_bytes``"""
        tr.emit("mbarrier.expect_tx.relaxed.cta.shared::cta.b64", self.addr, tx_bytes, pred=pred)

    def try_wait(self, parity) -> tr.Register:
        """``mbarrier.try_wait.parity.shared::cta.b64 p, [bar], parity`` -> p"""
        return tr.emit("mbarrier.try_wait.parity.shared::cta.b64", self.addr, parity)

    def wait(self, parity) -> None:
        """Block until the phase with `parity` completed. Emits a device loop around one
        ``mbarrier.try_wait.parity.shared::cta.b64 p, [bar], parity`` that breaks when p holds."""
        with loop():
            done = self.try_wait(parity)
            break_(done)


class MBarrierArray:
    """`n` mbarriers in one 8-byte-aligned shared array; ``bars[i]`` is one `MBarrierRef`.

    A Python-int index costs nothing; a register index emits ``mov.u32`` + ``mad.lo.u32``.
    """

    def __init__(self, buf: SharedBuffer, n: int):
        self.buf, self.n = buf, n

    def __getitem__(self, i) -> MBarrierRef:
        if isinstance(i, int) and not (0 <= i < self.n):
            raise tr.current().error(f"mbarrier index {i} out of range 0..{self.n - 1}")
        return MBarrierRef(self.buf.at(i))

    def __len__(self):
        return self.n

    # a single barrier is used through its methods directly
    def __getattr__(self, name):
        if self.n == 1 and name in ("init", "arrive", "arrive_expect_tx", "expect_tx",
                                    "try_wait", "wait", "inval"):
            return getattr(self[0], name)
        raise AttributeError(name)

    def __tirx_addr__(self) -> ir.Addr:
        return self.buf.at(0)


def mbarrier(n: int = 1, name: "str | None" = None, dynamic: bool = False) -> MBarrierArray:
    """Allocate `n` mbarriers in shared memory: 8n bytes of the window, 8-byte aligned (`shared`;
    `dynamic` matters only to a kernel of layout "split")."""
    return MBarrierArray(shared("b64", (n,), align=8, name=name or declared_name("mbar"),
                                dynamic=dynamic), n)


# --- registers and fragments ----------------------------------------------------------------------

def reg(dtype, init=None, name: str = "") -> tr.Register:
    """A fresh mutable register; with `init`, emits ``mov.<type> r, init``."""
    t = tr.current()
    r = t.new_reg(dtype, name)
    if init is not None:
        r.set(init)
    return r


class Fragment:
    """`n` registers of one type: an MMA operand or accumulator (``{r0, ..., rN}``)."""

    def __init__(self, regs: list):
        self.regs = regs
        self.dtype = regs[0].dtype if regs else None

    def __getitem__(self, i):
        return self.regs[i]

    def __len__(self):
        return len(self.regs)

    def __iter__(self):
        return iter(self.regs)

    def fill(self, value) -> None:
        """``mov.<type> r, value`` for every register of the fragment."""
        for r in self.regs:
            r.set(value)


def fragment(dtype, n: int, init=None) -> Fragment:
    """Allocate `n` registers of `dtype`; with `init`, emits one ``mov`` per register."""
    t = tr.current()
    f = Fragment([t.new_reg(dtype, "f") for _ in range(n)])
    if init is not None:
        f.fill(init)
    return f


sink = SINK
