"""Statistics of a timing: medians and noise, ratios from paired samples, clock regimes.

Pure functions over the samples `kcoral.measure` collects, so that every figure a result reports
is tested on its own. A *round* is one sample of the candidate and one of each baseline, taken
back to back (in a random order) with the SM clock read before and after; the ratio to a baseline
is the median over rounds of baseline / candidate (a paired ratio: both samples saw the same
clock and the same card state), and it is also reported per clock regime (issue 17):

* ``full``: rounds whose clock was within `REGIME_TOLERANCE` of the board's full clock;
* ``sustained``: the rest -- the card had slowed down (power or thermal limits).

A job is ``throttled`` when its lowest reading is more than `REGIME_TOLERANCE` below its highest.
"""

from __future__ import annotations

import math
import statistics

import numpy as np

REGIME_TOLERANCE = 0.05   # 5%: a clock this far below full is another regime
DIFFER = 0.02             # regime ratios that differ by more than 2% are both printed
CI_LEVEL = 0.95           # the coverage of a paired ratio's confidence interval
EXACT_CI_N = 1000         # exact binomial ranks up to this many rounds, normal beyond


def rel_stderr_median(s: list) -> float:
    """Relative standard error of the median, from the IQR (robust to outliers):
    sigma ~ IQR/1.349, se(median) ~ 1.2533 * sigma / sqrt(n)."""
    if len(s) < 3:
        return math.inf
    q1, med, q3 = np.percentile(s, [25, 50, 75])
    if med <= 0:
        return math.inf
    return 1.2533 * ((q3 - q1) / 1.349) / math.sqrt(len(s)) / med


def summary(s: list) -> dict:
    """Median, IQR, quartiles, extremes, count and every sample (ms)."""
    a = np.asarray(s, dtype=np.float64)
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    return {"median_ms": float(med), "iqr_ms": float(q3 - q1), "q1_ms": float(q1),
            "q3_ms": float(q3), "min_ms": float(a.min()), "max_ms": float(a.max()),
            "n": int(a.size), "samples_ms": [round(float(x), 6) for x in a]}


def paired_ratio(candidate: list, baseline: list) -> "float | None":
    """The median over rounds of baseline / candidate (None without a positive pair)."""
    r = [b / c for c, b in zip(candidate, baseline) if c > 0]
    return float(np.median(r)) if r else None


def median_ci_ranks(n: int, level: float = CI_LEVEL) -> "tuple[int, int] | None":
    """The 0-based ranks (j, n - 1 - j) of the sorted sample that bound the median with at
    least `level` coverage, distribution-free: the count of samples below the median is
    Binomial(n, 1/2), so [x_(j), x_(n-1-j)] misses it with probability 2 P(B <= j); j is the
    largest with 2 P(B <= j) <= 1 - level. Exact up to `EXACT_CI_N` samples, the normal
    approximation (one rank wider) beyond. None when n is too small for any interval at that
    level (n < 6 at 95%)."""
    alpha = 1.0 - level
    if n > EXACT_CI_N:
        z = statistics.NormalDist().inv_cdf(1.0 - alpha / 2)
        j = math.floor(n / 2 - z * math.sqrt(n) / 2) - 1
        return (j, n - 1 - j) if j >= 0 else None
    total, j, tail = 2 ** n, -1, 0          # tail = P(B <= j) x 2^n, exactly
    while j + 1 < n:
        nxt = tail + math.comb(n, j + 1)
        if 2 * nxt > alpha * total:
            break
        tail, j = nxt, j + 1
    return (j, n - 1 - j) if j >= 0 else None


def paired_ratio_ci(candidate: list, baseline: list,
                    level: float = CI_LEVEL) -> "list | None":
    """[lo, hi]: a distribution-free `level` confidence interval of the paired ratio's median
    (`median_ci_ranks` over the rounds' baseline / candidate). Agents read "0.999x" literally;
    the interval says whether it is distinguishable from 1.00x. Rounds are assumed
    exchangeable (a drifting clock is split by regime first: `regimes`). None with fewer than
    six positive pairs."""
    r = sorted(b / c for c, b in zip(candidate, baseline) if c > 0)
    ranks = median_ci_ranks(len(r), level)
    if ranks is None:
        return None
    return [float(r[ranks[0]]), float(r[ranks[1]])]


def regime_of(clock: "float | None", full: "float | None") -> "str | None":
    if clock is None or not full:
        return None
    return "full" if clock >= full * (1 - REGIME_TOLERANCE) else "sustained"


def regimes(candidate: list, baselines: dict, clocks: list, full: "float | None") -> dict:
    """Per regime (``full``, ``sustained``): rounds, median clock, the candidate's median and,
    per baseline, its median and paired ratio. `clocks[i]` is round i's clock (None unknown)."""
    out = {}
    for name in ("full", "sustained"):
        idx = [i for i, c in enumerate(clocks) if regime_of(c, full) == name]
        d: dict = {"rounds": len(idx)}
        if idx:
            cand = [candidate[i] for i in idx]
            d["clock_mhz"] = float(np.median([clocks[i] for i in idx]))
            d["candidate_median_ms"] = float(np.median(cand))
            d["baselines"] = {}
            for bn, bs in baselines.items():
                sub = [bs[i] for i in idx]
                d["baselines"][bn] = {"median_ms": float(np.median(sub)),
                                      "speedup": paired_ratio(cand, sub),
                                      "speedup_ci95": paired_ratio_ci(cand, sub)}
        out[name] = d
    return out


def clock_summary(readings: list, full: "float | None") -> dict:
    """Lowest, highest, median and first/last of the job's clock readings, the drop from the
    highest to the lowest, and ``throttled`` (a drop of more than `REGIME_TOLERANCE`)."""
    xs = [x for x in readings if x is not None]
    if not xs:
        return {"throttled": None}
    hi, lo = max(xs), min(xs)
    drop = (hi - lo) / hi if hi > 0 else 0.0
    return {"first": xs[0], "last": xs[-1], "min": lo, "max": hi,
            "median": float(np.median(xs)), "full": full, "readings": len(xs),
            "drop_pct": round(100 * drop, 2), "throttled": drop > REGIME_TOLERANCE}


def regimes_differ(r: dict, baseline: str) -> bool:
    """Both regimes have a ratio to `baseline` and they differ by more than `DIFFER`."""
    try:
        f = r["full"]["baselines"][baseline]["speedup"]
        s = r["sustained"]["baselines"][baseline]["speedup"]
    except (KeyError, TypeError):
        return False
    return bool(f and s and abs(f / s - 1) > DIFFER)
