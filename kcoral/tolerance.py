"""The comparison of a check: is a board's output within a job's tolerance of the reference?

Every element within ``atol + rtol * |expected|`` and, when `rms` is set, the normalized RMS
error ``||got - expected|| / ||expected||`` at most `rms`; integers compare exactly; NaN never
passes (not even against a NaN reference: NaN - NaN is NaN, which is within no tolerance). Part of
the job model: the daemon applies it to every check, with no tirxh on the server. tirxh's
`Tolerance.compare` states the same rule for suites on the CPU;
``tests/kcoral/test_tolerance.py`` holds the two to the same verdicts and figures.

Booleans compare byte for byte: an output left poisoned (every byte 0xFF) is neither True (1) nor
False (0). numpy would read the byte 0xFF as True, so a boolean kernel that wrote nothing would
pass wherever the reference is True.

Speed (issue 11: a float64 comparison of 100M elements took seconds per check, four checks per
job). Arrays up to `SMALL` elements take the plain float64 path above (the reference). Larger ones
go in chunks of `CHUNK` elements, so no full-size float64 temporary is ever made, and in float32
arithmetic where that is exact for the inputs (f32, tf32, f16, bf16, fp8 hold their values
exactly in float32): the verdict of each element is taken in float32 and every element whose
float32 verdict could differ from the float64 one -- within a relative 1e-5 of the limit (the
float32 error is below 4e-7 relative), non-finite, or tiny -- is decided again in float64.
``max_abs`` and ``max_rel`` are recomputed in float64 on the elements that can hold the maximum
(rounding is monotonic), so they are the float64 figures; ``rms_ratio`` accumulates in float64 and,
within 1e-5 of the ``rms`` limit (where the order of summation could decide), is recomputed
exactly as the float64 path does. The verdict is therefore
the float64 path's, element by element (``test_tolerance`` checks them against each other).
Arrays of 8 chunks or more are compared on a thread pool (`_threads`); the chunks' figures merge
in chunk order, so the result is the one-thread pass's bit for bit.
"""

from __future__ import annotations

import os
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np

SMALL = 1 << 20        # elements: at most this many take the plain float64 path
CHUNK = 1 << 20        # elements per chunk on the fast path
BAND = 1e-5            # relative distance to a limit within which float32 defers to float64
MAX_THREADS = 8       # compare threads at most (large arrays only: `_threads`)
TINY = 1e-30           # float32 loses relative precision near its subnormals: defer below this
_F32_EXACT = {"float16", "float32", "bfloat16", "float8_e4m3fn", "float8_e5m2"}


def compare(got: np.ndarray, expected: np.ndarray, rtol: float = 0.0, atol: float = 0.0,
            rms: "float | None" = None, max_report: int = 5) -> dict:
    """``{"ok", "mismatches", "total", "max_abs", "max_rel", "rms_ratio", "first", "reason"}``
    (the last two only when something differs)."""
    a, e = np.asarray(got), np.asarray(expected)
    if a.shape != e.shape:
        return {"ok": False, "reason": f"shape {a.shape} != expected {e.shape}"}
    if a.dtype.kind == "b" or e.dtype.kind == "b":
        a, e = _bytes_of_bools(a), _bytes_of_bools(e)
    if a.dtype == e.dtype and _equal(a, e):
        # equal element for element (a NaN is never equal): passes any tolerance, and costs
        # one comparison instead of the statistics below
        return {"ok": True, "mismatches": 0, "total": int(a.size), "max_abs": 0.0,
                "max_rel": 0.0, "rms_ratio": 0.0, "exact": True}
    with warnings.catch_warnings():  # an all-NaN (still poisoned) output is a plain mismatch
        warnings.simplefilter("ignore", RuntimeWarning)
        if a.size <= SMALL:
            return _statistics(a, e, rtol, atol, rms, max_report)
        return _chunked(a, e, rtol, atol, rms, max_report)


def _bytes_of_bools(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint8) if x.dtype.kind == "b" else x


def _equal(a: np.ndarray, e: np.ndarray) -> bool:
    a1, e1 = a.reshape(-1), e.reshape(-1)
    return all(np.array_equal(a1[i:i + CHUNK], e1[i:i + CHUNK])
               for i in range(0, a1.size, CHUNK))


def _is_int(x: np.ndarray) -> bool:
    return x.dtype.kind in "iub"


# -------------------------------------------------------------------------------------------------
# the reference: plain float64
# -------------------------------------------------------------------------------------------------

def _statistics(a, e, rtol, atol, rms, max_report) -> dict:
    if _is_int(a) and _is_int(e):  # integers: exact
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
        _rms_verdict(out, rms)
    if bad.any():
        out["first"] = _first(bad, a, e, max_report)
    return out


def _rms_verdict(out: dict, rms) -> None:
    if rms is not None and not (out["rms_ratio"] <= rms):
        out["ok"] = False
        out["reason"] = f"normalized RMS error {out['rms_ratio']:.3g} > {rms}"


def _first(bad, a, e, max_report) -> list:
    idx = np.argwhere(bad)[:max_report]
    return [{"index": [int(x) for x in i], "actual": _py(a[tuple(i)]),
             "expected": _py(e[tuple(i)])} for i in idx]


def _py(x):
    x = np.asarray(x)
    return x.item() if x.dtype.kind in "iubf" else float(x.astype(np.float64))


# -------------------------------------------------------------------------------------------------
# the fast path: chunks, float32 where exact, float64 wherever float32 could decide otherwise
# -------------------------------------------------------------------------------------------------

class _Acc:
    """What the chunks add up to (figures in float64)."""

    def __init__(self):
        self.bad = 0
        self.first: list = []
        self.max_abs = -np.inf
        self.max_rel = -np.inf
        self.nan_abs = False  # a NaN difference: max_abs is NaN (as np.max makes it)
        self.nan_rel = False  # a NaN ratio (also inf / inf): max_rel is NaN
        self.err_sq = 0.0
        self.ref_sq = 0.0

    def merge(self, other: "_Acc", max_report: int) -> None:
        """Add a later chunk's figures: the sums in chunk order, as one pass would make them."""
        self.bad += other.bad
        self.first.extend(other.first[:max(0, max_report - len(self.first))])
        self.max_abs = max(self.max_abs, other.max_abs)
        self.max_rel = max(self.max_rel, other.max_rel)
        self.nan_abs |= other.nan_abs
        self.nan_rel |= other.nan_rel
        self.err_sq += other.err_sq
        self.ref_sq += other.ref_sq


def _threads(n: int) -> int:
    """Threads for `n` elements: numpy releases the GIL in these loops, and a GPU host's cores
    are idle while its worker checks (a 1 GB state took ~5 s a check on one core, several
    checks a job: session 10's decode jobs spent most of their 43 s on the board there)."""
    if n < 8 * CHUNK:
        return 1
    return max(1, min(MAX_THREADS, os.cpu_count() or 1, n // (4 * CHUNK)))


def _chunked(a, e, rtol, atol, rms, max_report) -> dict:
    shape = a.shape
    a1, e1 = a.reshape(-1), e.reshape(-1)
    ints = _is_int(a) and _is_int(e)
    f32 = not ints and a.dtype.name in _F32_EXACT and e.dtype.name in _F32_EXACT

    def one(i: int) -> _Acc:
        part = _Acc()
        ac, ec = a1[i:i + CHUNK], e1[i:i + CHUNK]
        if ints:
            bad = _int_chunk(ac, ec, part)
        elif f32:
            bad = _f32_chunk(ac, ec, rtol, atol, part)
        else:
            bad = _f64_chunk(ac.astype(np.float64), ec.astype(np.float64), rtol, atol, part)
        part.bad = int(np.count_nonzero(bad))
        for j in np.flatnonzero(bad)[:max_report] if part.bad else ():
            idx = np.unravel_index(i + int(j), shape)
            part.first.append({"index": [int(x) for x in idx],
                               "actual": _py(ac[j]), "expected": _py(ec[j])})
        return part

    acc = _Acc()
    starts = range(0, a1.size, CHUNK)
    workers = _threads(a1.size)
    if workers == 1:
        for i in starts:
            acc.merge(one(i), max_report)
    else:
        with ThreadPoolExecutor(workers, thread_name_prefix="kcoral-compare") as pool:
            for part in pool.map(one, starts):  # in chunk order: the same sums and `first`
                acc.merge(part, max_report)
    out: dict = {"ok": acc.bad == 0, "mismatches": acc.bad, "total": int(a1.size),
                 "max_abs": float("nan") if acc.nan_abs else float(acc.max_abs),
                 "max_rel": float("nan") if acc.nan_rel else float(acc.max_rel)}
    ref_norm, err_norm = np.sqrt(acc.ref_sq), np.sqrt(acc.err_sq)
    out["rms_ratio"] = float(err_norm / ref_norm if ref_norm else err_norm)
    if rms is not None and np.isfinite(out["rms_ratio"]) and \
            abs(out["rms_ratio"] - rms) <= BAND * rms:
        out["rms_ratio"] = _rms_reference(a1, e1, ints)  # near the limit: as the reference
    _rms_verdict(out, rms)
    if acc.bad:
        out["first"] = acc.first
    return out


def _int_chunk(ac, ec, acc: _Acc) -> np.ndarray:
    bad = ac != ec
    d = np.abs(ac.astype(np.int64) - ec.astype(np.int64)).astype(np.float64)
    ef = ec.astype(np.float64)
    _figures(d, ef, acc)
    return bad


def _f64_chunk(a64, e64, rtol, atol, acc: _Acc) -> np.ndarray:
    d = np.abs(a64 - e64)
    bad = ~(d <= atol + rtol * np.abs(e64))
    bad |= np.isnan(a64) & ~np.isnan(e64)
    _figures(d, e64, acc)
    return bad


def _figures(d64, e64, acc: _Acc) -> None:
    if d64.size == 0:
        return
    m = float(np.max(d64))
    acc.nan_abs |= m != m
    acc.max_abs = max(acc.max_abs, m) if m == m else acc.max_abs
    r = float(np.max(d64 / np.maximum(np.abs(e64), 1e-30)))
    acc.nan_rel |= r != r
    acc.max_rel = max(acc.max_rel, r) if r == r else acc.max_rel
    acc.err_sq += float(np.dot(d64, d64))
    acc.ref_sq += float(np.dot(e64, e64))


def _f32_chunk(ac, ec, rtol, atol, acc: _Acc) -> np.ndarray:
    a32, e32 = ac.astype(np.float32), ec.astype(np.float32)  # exact for these dtypes
    d = np.abs(a32 - e32)
    ae = np.abs(e32)
    thr = np.float32(atol) + np.float32(rtol) * ae
    bad = ~(d <= thr)
    bad |= np.isnan(a32) & ~np.isnan(e32)
    # where float32 could disagree with float64: near the limit, non-finite, or tiny
    amb = np.abs(d - thr) <= np.float32(BAND) * (d + thr)
    amb |= ~np.isfinite(d) | ~np.isfinite(thr)
    amb |= (d > 0) & ((d < TINY) | (thr < TINY))
    if amb.any():
        a64, e64 = a32[amb].astype(np.float64), e32[amb].astype(np.float64)
        b64 = ~(np.abs(a64 - e64) <= atol + rtol * np.abs(e64))
        b64 |= np.isnan(a64) & ~np.isnan(e64)
        bad[amb] = b64
    acc.nan_abs |= bool(np.isnan(d).any())
    # max_abs: rounding is monotonic, so the float64 maximum is among the float32 maxima
    m32 = np.max(d, initial=-np.inf, where=~np.isnan(d))
    if np.isfinite(m32) or m32 == np.inf:
        sel = d == m32
        v = float(np.max(np.abs(a32[sel].astype(np.float64) - e32[sel].astype(np.float64))))
        acc.max_abs = max(acc.max_abs, v)
    # max_rel: float32's ratio is within 4e-7 of float64's; recompute the candidates
    rel = d / np.maximum(ae, np.float32(TINY))
    acc.nan_rel |= bool(np.isnan(rel).any())
    r32 = np.max(rel, initial=-np.inf, where=~np.isnan(rel))
    if r32 > -np.inf:
        sel = (rel >= r32 * np.float32(1 - BAND)) | (ae < np.float32(1e-29))
        sel &= ~np.isnan(rel)
        a64, e64 = a32[sel].astype(np.float64), e32[sel].astype(np.float64)
        v = np.abs(a64 - e64) / np.maximum(np.abs(e64), 1e-30)
        acc.max_rel = max(acc.max_rel, float(np.max(v)))
    acc.err_sq += float(np.square(d, dtype=np.float64).sum())
    acc.ref_sq += float(np.square(e32, dtype=np.float64).sum())
    return bad


def _rms_reference(a1, e1, ints: bool) -> float:
    """The normalized RMS error computed exactly as `_statistics` does (whole float64 arrays,
    the same summation): only for a ratio within `BAND` of its limit, where the chunks' order of
    summation could decide the verdict."""
    if ints:
        d = np.abs(a1.astype(np.int64) - e1.astype(np.int64)).astype(np.float64)
    else:
        d = np.abs(a1.astype(np.float64) - e1.astype(np.float64))
    ref_norm = float(np.linalg.norm(e1.astype(np.float64)))
    err_norm = float(np.linalg.norm(d))
    return err_norm / ref_norm if ref_norm else err_norm
