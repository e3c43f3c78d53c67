"""The comparison of a check: is a board's output within a job's tolerance of the reference?

Every element within ``atol + rtol * |expected|`` and, when `rms` is set, the normalized RMS
error ``||got - expected|| / ||expected||`` at most `rms`; integers compare exactly; NaN never
passes where the reference is not NaN. Part of the job model: the daemon applies it to every
check, with no tirxh on the server. tirxh's `Tolerance.compare` states the same rule for suites on
the CPU; ``tests/kcoral/test_tolerance.py`` holds the two to the same verdicts and figures.
"""

from __future__ import annotations

import warnings

import numpy as np


def compare(got: np.ndarray, expected: np.ndarray, rtol: float = 0.0, atol: float = 0.0,
            rms: "float | None" = None, max_report: int = 5) -> dict:
    """``{"ok", "mismatches", "total", "max_abs", "max_rel", "rms_ratio", "first", "reason"}``
    (the last two only when something differs)."""
    a, e = np.asarray(got), np.asarray(expected)
    if a.shape != e.shape:
        return {"ok": False, "reason": f"shape {a.shape} != expected {e.shape}"}
    if a.dtype == e.dtype and np.array_equal(a, e):
        # bit-for-bit equal (array_equal is False wherever a NaN is): passes any tolerance, and
        # costs one comparison instead of the float64 statistics below (seconds at 16M elements)
        return {"ok": True, "mismatches": 0, "total": int(a.size), "max_abs": 0.0,
                "max_rel": 0.0, "rms_ratio": 0.0, "exact": True}
    with warnings.catch_warnings():  # an all-NaN (still poisoned) output is a plain mismatch
        warnings.simplefilter("ignore", RuntimeWarning)
        return _statistics(a, e, rtol, atol, rms, max_report)


def _statistics(a, e, rtol, atol, rms, max_report) -> dict:
    if a.dtype.kind in "iub" and e.dtype.kind in "iub":  # integers: exact
        bad = a != e
        diff = np.abs(a.astype(np.int64) - e.astype(np.int64))
    else:  # floats (bf16/fp8 through ml_dtypes cast exactly to float64)
        a, e = a.astype(np.float64), e.astype(np.float64)
        diff = np.abs(a - e)
        bad = ~(diff <= atol + rtol * np.abs(e))
        bad |= np.isnan(a) & ~np.isnan(e)
    out: dict = {"ok": not bool(bad.any()), "mismatches": int(bad.sum()), "total": int(a.size)}
    if a.size:
        ef, df = e.astype(np.float64), diff.astype(np.float64)
        out["max_abs"] = float(np.max(df))  # NaN when any output is NaN
        out["max_rel"] = float(np.max(df / np.maximum(np.abs(ef), 1e-30)))
        ref_norm = float(np.linalg.norm(ef.ravel()))
        err_norm = float(np.linalg.norm(df.ravel()))
        out["rms_ratio"] = err_norm / ref_norm if ref_norm else err_norm
        if rms is not None and not (out["rms_ratio"] <= rms):
            out["ok"] = False
            out["reason"] = f"normalized RMS error {out['rms_ratio']:.3g} > {rms}"
    if bad.any():
        idx = np.argwhere(bad)[:max_report]
        out["first"] = [{"index": [int(x) for x in i], "actual": _py(a[tuple(i)]),
                         "expected": _py(e[tuple(i)])} for i in idx]
    return out


def _py(x):
    x = np.asarray(x)
    return x.item() if x.dtype.kind in "iubf" else float(x.astype(np.float64))
