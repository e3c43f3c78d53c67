"""Helpers for testing instruction semantics: one-instruction kernels, and GPU detection.

`one(spelling, out_type, ins)` builds a 32-thread kernel that loads each source operand from a
per-lane array, executes the instruction once per thread and stores the result, runs it in numsim
and returns the 32 results. numsim's own tests use it; so can a plugin adding bindings.
"""

from __future__ import annotations

import numpy as np
import tirxh.lang as T
import tirxh_numsim as ns
from tirxh.api import dtype as as_dtype

LANES = 32


def one(spelling: str, out_t: str, ins=(), imms=(), lanes: int = LANES, check_clean=True):
    """Run ``spelling`` once per thread: sources are loaded from per-lane arrays (``ins``: a list
    of (ptx type, values)); ``imms`` are appended as immediate operands. Returns the 32 results
    (predicates as bools, f16/bf16 in their numpy types)."""
    k, inputs = one_case(spelling, out_t, ins, imms, lanes)
    res = ns.run(k, inputs, grid=(1,), outputs=["out"])
    if check_clean:
        assert res.verdict in ("clean", "review"), res.summary()
    out = res.outputs["out"]
    if out_t in ("f16", "bf16"):
        return out.view(as_dtype(out_t).numpy)
    return out.astype(bool) if out_t == "pred" else out


def one_case(spelling: str, out_t: str, ins=(), imms=(), lanes: int = LANES):
    """(kernel, inputs) of the one-instruction kernel `one` runs (also launched on a GPU by
    ``benchmarks/h200_compare.py``)."""
    names = [f"x{i}" for i in range(len(ins))]
    load_t = {"pred": "u32", "f16": "b16", "bf16": "b16", "f16x2": "b32", "bf16x2": "b32",
              "e4m3x2": "b16", "e5m2x2": "b16",
              "tf32": "b32"}

    def body(out, **srcs):
        i = T.tid.x
        vals = []
        for n, (t, _) in zip(names, ins):
            lt = load_t.get(t, t)
            v = getattr(T.ptx.ld.global_, lt)(srcs[n].at(i))
            if t == "pred":
                v = v != 0
            vals.append(v)
        r = T.ptx[spelling](*vals, *imms)
        st_t = load_t.get(out_t, out_t)
        if out_t == "pred":
            r = T.ptx.selp.u32(1, 0, r)
        getattr(T.ptx.st.global_, st_t)(out.at(i), r)

    def fn(out, **kw):
        return body(out, **kw)
    params = ["out"] + names
    src = "def kern({}):\n    return fn({})".format(
        ", ".join(params), ", ".join(f"{p}={p}" for p in params))
    ns_ = {"fn": fn}
    exec(src, ns_)
    kern = ns_["kern"]
    kern.__annotations__ = {"out": T.gptr[as_dtype(load_t.get(out_t, out_t))]}
    for n, (t, _) in zip(names, ins):
        kern.__annotations__[n] = T.gptr[as_dtype(load_t.get(t, t))]
    k = T.kernel(kern, grid=1, block=lanes, name="one_" + spelling.replace(".", "_"))
    inputs = {"out": np.zeros(lanes, as_dtype(load_t.get(out_t, out_t)).numpy)}
    for n, (t, v) in zip(names, ins):
        v = np.asarray(v)
        if t in ("f16", "bf16"):
            v = v.astype(as_dtype(t).numpy).view(np.uint16)
        inputs[n] = np.broadcast_to(v.astype(as_dtype(load_t.get(t, t)).numpy),
                                    (lanes,)).copy()
    return k, inputs


def gpu_available() -> bool:
    """True when the CUDA driver initializes and reports a device (`tirxh.testing`)."""
    from tirxh.testing import gpu_unavailable_reason  # optional dependency: pytest (tests)
    return gpu_unavailable_reason() is None
