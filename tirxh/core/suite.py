"""What a kernel module declares beside a kernel: cases, inputs, a numpy reference, tolerances.

A `Suite` at module level makes its kernel a set of checkable, benchmarkable items (one per case
and target). Case parameters flow to the input generator, the reference, the grid function, the
kernel's compile-time constants (by name) and the FLOP/byte counts.

    def inputs(rng, n):
        return dict(a=rng.standard_normal(n, np.float32), b=..., out=np.empty(n, np.float32), n=n)

    SUITE = T.suite(vadd, inputs=inputs, reference=lambda a, b, **_: {"out": a + b},
                    outputs=["out"], cases=[T.case("n4096", n=4096)],
                    flops=lambda n: n, bytes=lambda n: 12 * n)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from kcoral.peaks import FLOPS_DTYPES

from . import ir
from .errors import SuiteError, TirxhError
from .lang.kernel import Kernel, call_with_matching
from .types import from_numpy
from .usercode import cause, user_frame


@dataclass(frozen=True)
class Case:
    """One named parameter set. `small` cases are what `tirxh check` simulates on the CPU."""

    name: str
    params: dict
    small: bool = True
    tags: tuple = ()


def case(name: str, small: bool = True, tags=(), **params) -> Case:
    return Case(name, dict(params), small, tuple(tags))


@dataclass(frozen=True)
class Tolerance:
    """Comparison rule: every element within ``atol + atol_rms*RMS(ref) + rtol*|ref|`` and,
    when `rms` is set, the normalized RMS error ``||out - ref|| / ||ref||`` at most `rms`. NaN
    never passes. `atol_rms` states a rule "atol = x * RMS(ref)" per output exactly: outputs of
    different magnitudes (KDA's o and its final state, ~sqrt(K) apart) each get their own
    absolute tolerance (`absolute` resolves it for a reference; benchmark jobs carry that)."""

    rtol: float = 0.0
    atol: float = 0.0
    rms: "float | None" = None
    atol_rms: float = 0.0

    def absolute(self, *expected) -> float:
        """The absolute tolerance for these references: atol + atol_rms * the smallest of
        their RMS (several seeds' references: the strictest)."""
        if not self.atol_rms:
            return float(self.atol)
        rms = min(_rms(e) for e in expected) if expected else 0.0
        return float(self.atol) + float(self.atol_rms) * rms

    def compare(self, actual: np.ndarray, expected: np.ndarray, max_report: int = 5) -> dict:
        a, e = np.asarray(actual), np.asarray(expected)
        if a.shape != e.shape:
            return {"ok": False, "reason": f"shape {a.shape} != expected {e.shape}"}
        if a.dtype.kind in "iub" and e.dtype.kind in "iub":  # integers: exact
            bad = a != e
            diff = np.abs(a.astype(np.int64) - e.astype(np.int64))
        else:  # floats (bf16/fp8 through ml_dtypes cast exactly to float64)
            a, e = a.astype(np.float64), e.astype(np.float64)
            diff = np.abs(a - e)
            bad = ~(diff <= self.absolute(e) + self.rtol * np.abs(e))
            bad |= np.isnan(a) & ~np.isnan(e)
        out: dict[str, Any] = {"ok": not bool(bad.any()), "mismatches": int(bad.sum()),
                               "total": int(a.size)}
        if a.size:
            ef, df = e.astype(np.float64), diff.astype(np.float64)
            out["max_abs"] = float(np.max(df))  # NaN when any output is NaN
            out["max_rel"] = float(np.max(df / np.maximum(np.abs(ef), 1e-30)))
            ref_norm, err_norm = float(np.linalg.norm(ef.ravel())), float(np.linalg.norm(df.ravel()))
            out["rms_ratio"] = err_norm / ref_norm if ref_norm else err_norm
            if self.rms is not None and not (out["rms_ratio"] <= self.rms):
                out["ok"] = False
                out["reason"] = f"normalized RMS error {out['rms_ratio']:.3g} > {self.rms}"
        if bad.any():
            idx = np.argwhere(bad)[:max_report]
            out["first"] = [{"index": [int(x) for x in i], "actual": _py(a[tuple(i)]),
                             "expected": _py(e[tuple(i)])} for i in idx]
        return out


def _rms(x) -> float:
    """RMS of an array in float64 (one copy; a dot product, not a squared temporary)."""
    v = np.asarray(x, np.float64).ravel()
    return float(np.sqrt(np.dot(v, v) / v.size)) if v.size else 0.0


def _py(x):
    x = np.asarray(x)
    return x.item() if x.dtype.kind in "iubf" else float(x.astype(np.float64))


def _def_loc(fn) -> "ir.Loc | None":
    """Where `fn` is defined, or None for a builtin or a callable object."""
    code = getattr(fn, "__code__", None)
    return None if code is None else ir.Loc(code.co_filename, code.co_firstlineno,
                                            getattr(fn, "__name__", ""))


def _misfit(decl, value) -> "str | None":
    """Why `value` does not fit the kernel parameter `decl`, or None."""
    if decl.kind == "ptr":
        want = decl.dtype.numpy
        if not isinstance(value, np.ndarray):
            return (f"parameter {decl.name!r} is a gptr[{decl.dtype}]: expected a numpy array of "
                    f"{want}, got {type(value).__name__}")
        if decl.dtype.name.endswith("x2"):  # packed pairs: any array holds the bits
            return None
        raw = decl.dtype.kind == "bits" and value.dtype.itemsize == decl.dtype.nbytes
        if value.dtype != want and not raw:
            return (f"parameter {decl.name!r} is a gptr[{decl.dtype}] ({want}); the array is "
                    f"{value.dtype}")
    elif decl.kind == "scalar":
        arr = np.asarray(value)
        if arr.ndim != 0:
            return (f"parameter {decl.name!r} is a scalar {decl.dtype}; got an array of shape "
                    f"{arr.shape}")
        if arr.dtype.kind == "f" and not decl.dtype.is_float:
            return (f"parameter {decl.name!r} is an integer {decl.dtype}; got a float "
                    f"({arr.dtype}) {value!r}")
        if arr.dtype.kind not in "biuf":
            return f"parameter {decl.name!r} is a scalar {decl.dtype}; got {value!r}"
    elif decl.kind == "tensormap" and not isinstance(value, TensorMap):
        return (f"parameter {decl.name!r} is a T.tensormap: expected a T.TensorMap, got "
                f"{type(value).__name__}")
    return None


def tolerance(rtol: float = 0.0, atol: float = 0.0, rms: "float | None" = None,
              atol_rms: float = 0.0) -> Tolerance:
    return Tolerance(rtol, atol, rms, atol_rms)


@dataclass(frozen=True)
class TensorMap:
    """A TMA tensor map to encode on the host for a ``T.tensormap`` parameter.

    source: the name of the global-pointer parameter (an input array) the map describes;
    box: the box in elements, numpy order (outermost first), e.g. ``(64, 64)``; swizzle: 0, 32,
    64 or 128 (bytes); oob_fill: ``zero`` or ``nan`` for out-of-bounds elements;
    elem_strides: per-dimension traversal strides (default all 1).
    The global dims and strides come from the source array (row-major); the encoder reverses them
    into TMA's innermost-first order.
    """

    source: str
    box: tuple
    swizzle: int = 0
    oob_fill: str = "zero"
    elem_strides: "tuple | None" = None
    l2_promotion: int = 0

    def describe(self, array: np.ndarray) -> dict:
        """The encoding parameters for `array` (JSON-serializable; innermost dimension first)."""
        dims = list(reversed(array.shape))
        strides = list(reversed(array.strides))[1:]
        return {"source": self.source, "dtype": from_numpy(array.dtype).name,
                "dims": [int(d) for d in dims], "strides": [int(s) for s in strides],
                "box": [int(b) for b in reversed(self.box)],
                "elem_strides": [int(s) for s in reversed(self.elem_strides or
                                                         (1,) * len(self.box))],
                "swizzle": int(self.swizzle), "oob_fill": self.oob_fill,
                "l2_promotion": int(self.l2_promotion)}


@dataclass
class Suite:
    """Cases and checking rules for one kernel (see module docstring)."""

    kernel: Kernel
    inputs: Callable
    reference: "Callable | None"
    outputs: tuple
    cases: list
    tolerance: "Tolerance | dict" = field(default_factory=Tolerance)
    flops: "Callable | None" = None
    bytes: "Callable | None" = None
    baselines: tuple = ()
    launches: "Callable | None" = None  # optional multi-launch plan (grid per launch)
    inplace: tuple = ()  # outputs whose initial contents are inputs (read, then overwritten)
    flops_dtype: "str | None" = None  # tensor-core input type of the FLOPs (the floor's peak)

    @property
    def name(self) -> str:
        return self.kernel.name

    def tolerance_for(self, output: str) -> Tolerance:
        if isinstance(self.tolerance, dict):
            return self.tolerance.get(output, Tolerance())
        return self.tolerance

    def consts(self, c: Case) -> dict:
        return self.kernel.resolve_consts(c.params)

    def grid(self, c: Case) -> tuple:
        values = dict(self.consts(c))
        values.update(c.params)
        return self._call(lambda: self.kernel.grid_dims(values), self.kernel.grid,
                          f"the grid for case {c.name!r}")

    def _call(self, thunk, fn, what: str):
        """Run the user's `fn` (through `thunk`); an exception it raises is a `SuiteError` at
        the user's line (the innermost frame of theirs, else `fn`'s ``def``) with a one-line
        cause; the full traceback stays chained for ``--tb=long``."""
        try:
            return thunk()
        except TirxhError:
            raise
        except Exception as e:
            loc = user_frame(e) or _def_loc(fn)
            raise SuiteError(f"{what} raised {cause(e)}", loc, self.name) from e

    def _error(self, message: str, fn) -> SuiteError:
        return SuiteError(message, _def_loc(fn), self.name)

    def make_inputs(self, c: Case, seed: int = 0) -> dict:
        """Fresh inputs for a case: every runtime parameter of the kernel, by name, each
        checked against its declared type (a float64 array for a ``gptr[f32]`` is an error,
        not a silent reinterpretation)."""
        rng = np.random.default_rng(seed)
        values = self._call(lambda: call_with_matching(self.inputs, dict(c.params, rng=rng)),
                            self.inputs, f"inputs() for case {c.name!r}")
        if not isinstance(values, dict):
            raise self._error(f"inputs() for case {c.name!r} returned "
                              f"{type(values).__name__}, not a dict of the kernel's "
                              "parameters", self.inputs)
        missing = [p.name for p in self.kernel.runtime_params if p.name not in values]
        if missing:
            raise self._error(f"inputs() for case {c.name!r} did not provide "
                              f"{', '.join(missing)}", self.inputs)
        problems = [p for decl in self.kernel.runtime_params
                    if (p := _misfit(decl, values[decl.name]))]
        if problems:
            raise self._error(f"inputs() for case {c.name!r}: " + "; ".join(problems),
                              self.inputs)
        return values

    def expected(self, c: Case, inputs: dict) -> dict:
        """The reference's outputs for a case; an output the suite declares but the reference
        does not give is an error in the suite (a typo in a key must not pass silently)."""
        if self.reference is None:
            return {}
        arrays = {k: v for k, v in inputs.items() if not isinstance(v, TensorMap)}
        values = dict(c.params)
        values.update(arrays)
        got = self._call(lambda: call_with_matching(self.reference, values), self.reference,
                         f"reference() for case {c.name!r}")
        if not isinstance(got, dict):
            raise self._error(f"reference() for case {c.name!r} returned {type(got).__name__}, "
                              "not a dict of outputs", self.reference)
        missing = [o for o in self.outputs if o not in got]
        if missing:
            raise self._error(f"reference() for case {c.name!r} gives no value for declared "
                              f"output(s) {', '.join(map(repr, missing))} (it gives "
                              f"{', '.join(map(repr, got)) or 'nothing'})", self.reference)
        return got

    def work(self, c: Case) -> dict:
        """Declared FLOPs and bytes of a case (None where not declared)."""
        vals = dict(self.consts(c))
        vals.update(c.params)
        return {"flops": call_with_matching(self.flops, vals) if self.flops else None,
                "bytes": call_with_matching(self.bytes, vals) if self.bytes else None,
                "flops_dtype": self.flops_dtype}


def suite(kernel: Kernel, inputs: Callable, reference: "Callable | None" = None,
          outputs=(), cases=(), tolerance: "Tolerance | dict | None" = None, flops=None,
          bytes=None, baselines=(), constraints: "Callable | None" = None,
          inplace=(), flops_dtype: "str | None" = None) -> Suite:
    """Declare a kernel's cases; put the result in a module-level variable to be collected.

    `constraints(**params)` (optional) states the shapes the kernel accepts: called with each
    case's parameters and constants (by name, as `inputs` is), it returns the rules the case
    breaks as strings (empty when it is accepted). Every broken rule of every case is reported
    together here, when the suite is declared, so a shape the kernel cannot run is refused
    instead of simulated or timed into a wrong answer. `inplace` names outputs that are also
    inputs (an in-place kernel): KCoral uploads their initial contents instead of poisoning them.
    `flops_dtype` names the tensor-core input type the FLOPs run at ("fp8", "int8", "bf16", ...):
    KCoral holds the time against that type's peak, so an fp8 GEMM is not flagged for beating
    the bf16 peak (default: bf16-class).
    """
    if not isinstance(kernel, Kernel):
        raise TypeError(f"T.suite: expected a @T.kernel, got {kernel!r}")
    if not cases:
        cases = [Case("default", {})]
    names = [c.name for c in cases]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"T.suite({kernel.name}): duplicate case names {sorted(dup)}")
    stray = [o for o in inplace if o not in outputs]
    if stray:
        raise ValueError(f"T.suite({kernel.name}): inplace names {stray}, which are not among "
                         f"the outputs {list(outputs)}")
    if flops_dtype is not None and flops_dtype not in FLOPS_DTYPES:
        raise ValueError(f"T.suite({kernel.name}): flops_dtype={flops_dtype!r} is not one of "
                         f"{list(FLOPS_DTYPES)}")
    if constraints is not None:
        problems = []
        for c in cases:
            values = dict(kernel.resolve_consts(c.params, strict=False))
            values.update(c.params)
            problems += [f"case {c.name!r}: {p}" for p in
                         call_with_matching(constraints, values) or ()]
        if problems:
            raise ValueError(f"T.suite({kernel.name}): shapes the kernel does not accept:\n  "
                             + "\n  ".join(problems))
    return Suite(kernel, inputs, reference, tuple(outputs), list(cases),
                 tolerance if tolerance is not None else Tolerance(), flops, bytes,
                 tuple(baselines), inplace=tuple(inplace), flops_dtype=flops_dtype)
