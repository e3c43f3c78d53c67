"""``@T.kernel``: a decorated Python function traced once per specialization.

The decorator records the launch configuration; tracing runs the body with typed parameter values
(pointer params are loaded from the param space at entry) and returns a `KernelIR`. Compile-time
constants (parameters annotated ``T.const``) select the specialization; everything else is a runtime
kernel parameter in the launch ABI.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

from .. import ir
from ..compiler import compile_kernel, emit_ptx_for
from ..errors import TirxhError
from ..irprint import format_kernel
from ..registry import default_isa
from ..usercode import cause, user_frame
from ..types import DType, dtype as as_dtype
from . import trace as tr
from .memory import (ConstType, GlobalPtr, PtrType, TensorMapParam, TensorMapType,
                     pack_window)


@dataclass(frozen=True)
class ParamDecl:
    name: str
    kind: str  # ptr | scalar | tensormap | const
    dtype: "DType | None"
    default: Any = inspect.Parameter.empty
    choices: "tuple | None" = None   # a const's allowed values (``T.const.one_of``)

    def refusal(self, value) -> "str | None":
        """Why `value` cannot bind this constant, or None."""
        if self.choices is None or value in self.choices:
            return None
        return (f"constant {self.name}={value!r} is not one of the values the kernel has "
                f"code for: {', '.join(map(repr, self.choices))}")


def call_with_matching(fn: Callable, values: dict) -> Any:
    """Call `fn` with the entries of `values` its signature names (or all, for ``**kw``)."""
    sig = inspect.signature(fn)
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return fn(**values)
    missing = [p.name for p in sig.parameters.values()
               if p.name not in values and p.default is p.empty
               and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if missing:
        raise TypeError(f"{getattr(fn, '__name__', fn)!r} needs {', '.join(missing)}, which the "
                        f"case does not provide (it has {', '.join(sorted(values))})")
    return fn(**{k: v for k, v in values.items() if k in sig.parameters})


def _dim3(v) -> tuple:
    if isinstance(v, int):
        return (v, 1, 1)
    v = tuple(int(x) for x in v)
    return v + (1,) * (3 - len(v))


class Kernel:
    """A TIRx kernel. `.specialize(**consts)` traces; `.ir`, `.ptx(target)` show what was built."""

    def __init__(self, fn: Callable, grid=None, block=128, cluster=None, smem: int = 0,
                 max_threads=None, min_blocks=None, maxnreg=None, targets=None, name=None,
                 smem_layout: str = "window"):
        self.fn = fn
        self.name = name or fn.__name__
        if smem_layout not in ir.SMEM_LAYOUTS:
            raise tr.TraceError(f"kernel {self.name!r}: smem_layout={smem_layout!r}; expected "
                                f"one of {', '.join(map(repr, ir.SMEM_LAYOUTS))}", self_loc(fn))
        self.smem_layout = smem_layout
        self.grid, self.block, self.cluster = grid, block, cluster
        self.smem, self.max_threads, self.min_blocks = smem, max_threads, min_blocks
        self.maxnreg = maxnreg
        self.targets = tuple(targets) if targets else None
        self.params = self._signature(fn)
        self.loc = ir.Loc(inspect.getsourcefile(fn) or "<unknown>",
                          fn.__code__.co_firstlineno, self.name)
        self._cache: dict = {}
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    # -- signature ------------------------------------------------------------------------------
    def _signature(self, fn) -> list:
        out = []
        try:  # string annotations (``from __future__ import annotations``) are evaluated
            sig = inspect.signature(fn, eval_str=True)
        except Exception as e:
            raise tr.TraceError(f"cannot evaluate the annotations of kernel {fn.__name__!r}: "
                                f"{e}", self_loc(fn)) from None
        for p in sig.parameters.values():
            ann = p.annotation
            if isinstance(ann, PtrType):
                out.append(ParamDecl(p.name, "ptr", ann.elem))
            elif isinstance(ann, TensorMapType):
                out.append(ParamDecl(p.name, "tensormap", None))
            elif isinstance(ann, ConstType) or ann is ConstType:
                decl = ParamDecl(p.name, "const", None, p.default,
                                 getattr(ann, "choices", None))
                why = decl.refusal(p.default) if p.default is not p.empty else None
                if why:
                    raise tr.TraceError(f"kernel {fn.__name__!r}: the default of {why}",
                                        self_loc(fn))
                out.append(decl)
            elif isinstance(ann, DType):
                if ann.kind == "pred":
                    raise tr.TraceError(f"parameter {p.name!r}: a predicate cannot be a kernel "
                                        "parameter; pass a u32 and compare", self_loc(fn))
                out.append(ParamDecl(p.name, "scalar", ann))
            else:
                raise tr.TraceError(
                    f"parameter {p.name!r} of kernel {fn.__name__!r} needs a TIRx annotation "
                    f"(T.gptr[T.f32], T.u32, T.tensormap or T.const); got {ann!r}", self_loc(fn))
        return out

    @property
    def runtime_params(self) -> list:
        return [p for p in self.params if p.kind != "const"]

    def resolve_consts(self, values: dict, strict: bool = True) -> dict:
        """The constants of this kernel taken from `values` (or their defaults). A constant with
        neither is an error, or, with ``strict=False``, left out (so that tracing later reports
        it at the kernel's line); a value outside a ``T.const.one_of`` declaration is an error
        either way, at the kernel's line."""
        out = {}
        for p in self.params:
            if p.kind != "const":
                continue
            if p.name in values:
                out[p.name] = values[p.name]
                why = p.refusal(values[p.name])
                if why:
                    raise tr.TraceError(f"kernel {self.name!r}: {why}", self.loc)
            elif p.default is not inspect.Parameter.empty:
                out[p.name] = p.default
            elif strict:
                raise tr.TraceError(f"kernel {self.name!r} needs a value for constant "
                                    f"{p.name!r}", self.loc)
        return out

    # -- launch configuration ----------------------------------------------------------------------
    def block_dims(self, consts: dict) -> tuple:
        b = call_with_matching(self.block, consts) if callable(self.block) else self.block
        return _dim3(b)

    def cluster_dims(self, consts: dict) -> "tuple | None":
        if self.cluster is None:
            return None
        c = call_with_matching(self.cluster, consts) if callable(self.cluster) else self.cluster
        return _dim3(c)

    def grid_dims(self, values: dict) -> tuple:
        """Grid for a launch; `values` holds the case's parameters and the constants."""
        if self.grid is None:
            return (1, 1, 1)
        g = call_with_matching(self.grid, values) if callable(self.grid) else self.grid
        return _dim3(g)

    # -- tracing -------------------------------------------------------------------------------------
    def specialize(self, isa=None, **consts) -> ir.KernelIR:
        """Trace the body for these constants (cached per constants and instruction set)."""
        consts = self.resolve_consts(consts)
        if isa is None:
            isa = default_isa()
        key = (tuple(sorted(consts.items())), id(isa))
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._trace(consts, isa)
        return hit

    def specialize_once(self, isa=None, **consts) -> ir.KernelIR:
        """Trace the body for these constants as `specialize` does, but keep no copy: for a
        caller that reads each IR once and drops it (the zoo's instruction index traces ~860
        specializations; keeping them all made Python's cycle collector rescan them, ~30% of
        the time)."""
        return self._trace(self.resolve_consts(consts), isa if isa is not None else default_isa())

    def _trace(self, consts: dict, isa) -> ir.KernelIR:
        t = tr.Trace(self.name, isa)
        t.smem_layout = self.smem_layout
        params: list[ir.ParamInfo] = []
        args = {}
        for p in self.params:  # a shared/local variable named like a parameter gets a suffix
            t.unique(p.name)
        with tr.tracing(t):
            t.loc_override = self.loc  # parameter loads belong to the `def` line
            for p in self.params:
                if p.kind == "const":
                    args[p.name] = consts[p.name]
                elif p.kind == "ptr":
                    params.append(ir.ParamInfo(p.name, "ptr", p.dtype, 8, 8))
                    raw = tr.emit("ld.param.u64", ir.Addr(ir.Sym(p.name, "param")))
                    g = tr.emit("cvta.to.global.u64", raw)
                    args[p.name] = GlobalPtr(p.name, p.dtype, g)
                elif p.kind == "scalar":
                    params.append(ir.ParamInfo(p.name, "scalar", p.dtype, p.dtype.nbytes,
                                               p.dtype.nbytes))
                    # ld.param has no .f16/.bf16 forms: half types load as their bits
                    ty = "b16" if p.dtype.reg_class == "b16" else p.dtype.name
                    r = tr.emit(f"ld.param.{ty}", ir.Addr(ir.Sym(p.name, "param")))
                    if r.dtype != p.dtype:
                        r.dtype = p.dtype  # same bits; the register keeps the declared type
                    args[p.name] = r
                else:
                    params.append(ir.ParamInfo(p.name, "tensormap", as_dtype("b8"), 128, 64))
                    raw = tr.emit("mov.u64", ir.Sym(p.name, "param"))
                    args[p.name] = TensorMapParam(p.name, tr.emit("cvta.param.u64", raw))
            t.loc_override = None
            try:
                self.fn(**args)
            except TirxhError:
                raise
            except Exception as e:  # a NameError, a bad index...: the user's line, one line
                raise tr.TraceError(cause(e), user_frame(e) or self.loc, self.name) from e
        block = self.block_dims(consts)
        window, align = pack_window(t.shared)
        k = ir.KernelIR(
            name=self.name, params=params, body=t.blocks[0], shared=t.shared, block=block,
            cluster=self.cluster_dims(consts),
            dynamic_smem=window + int(self.smem or 0),
            max_threads=self.max_threads, min_blocks=self._per_consts(self.min_blocks, consts),
            consts=consts, loc=self.loc, regs=t.regs, dynamic_align=align,
            maxnreg=self._per_consts(self.maxnreg, consts), local=t.local,
            smem_layout=self.smem_layout)
        k.dynamic_smem += k.smem_slack  # room to round the window's base up (memory.shared)
        return k

    @staticmethod
    def _per_consts(value, consts: dict):
        """A launch bound given as a function of the constants (``maxnreg=lambda BLOCK: ...``:
        one register cap per specialization, as ``block`` may be), or as a value."""
        return call_with_matching(value, consts) if callable(value) else value

    # -- views -----------------------------------------------------------------------------------------
    @property
    def ir(self) -> str:
        """Readable text of the default specialization (constants at their defaults)."""
        return format_kernel(self.specialize())

    def ptx(self, target: str = "sm_90a", **consts) -> str:
        """PTX text for `target` (``kernel.ptx("sm_90a", BM=128)``)."""
        return emit_ptx_for(self, target, consts)

    def compile(self, target: str = "sm_90a", **consts):
        """Compile to a cubin on this machine (nvJitLink); returns a `CompiledKernel`."""
        return compile_kernel(self, target, consts)

    def __call__(self, *a, **k):
        raise TypeError(f"kernel {self.name!r} runs on a device: launch it through numsim, "
                        "`tirxh bench` or KCoral, or call .ptx()/.compile()")

    def __repr__(self):
        return f"<T.kernel {self.name} at {self.loc}>"


def self_loc(fn) -> ir.Loc:
    return ir.Loc(inspect.getsourcefile(fn) or "<unknown>", fn.__code__.co_firstlineno,
                  fn.__name__)


def kernel(fn=None, **config):
    """Decorator: ``@T.kernel(grid=lambda n: T.cdiv(n, 256), block=256)``.

    Options: grid (tuple or callable of case parameters/constants), block, cluster, smem (extra
    dynamic shared bytes), max_threads / min_blocks (``.maxntid`` / ``.minnctapersm``), maxnreg
    (``.maxnreg``; it and min_blocks may be callables of the constants, as block may),
    targets (restrict which targets the kernel is built for), name, smem_layout (``"window"``,
    the default: every shared variable in one window at compiler-computed offsets; ``"split"``:
    static ``.shared`` declarations before the window, for probes of the toolchain's placement
    only: `T.shared` says why).
    """
    if fn is not None:
        return Kernel(fn, **config)
    return lambda f: Kernel(f, **config)


def cdiv(a: int, b: int) -> int:
    """Ceiling division at trace/launch time (Python ints)."""
    return -(-a // b)
