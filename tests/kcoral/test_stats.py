"""Timing statistics on their own: noise, paired ratios, clock regimes, throttling."""

import numpy as np
import pytest

from kcoral.stats import (
    EXACT_CI_N, clock_summary, median_ci_ranks, paired_ratio, paired_ratio_ci, regime_of, regimes,
    regimes_differ, rel_stderr_median, summary,
)


def test_noise_estimate():
    assert rel_stderr_median([1.0, 1.0]) == float("inf")
    assert rel_stderr_median([1.0] * 50) == 0.0
    noisy = list(np.random.default_rng(0).normal(1.0, 0.1, 100))
    assert 0.005 < rel_stderr_median(noisy) < 0.03


def test_summary_keeps_every_sample():
    s = summary([3.0, 1.0, 2.0])
    assert s["median_ms"] == 2.0 and s["n"] == 3 and s["samples_ms"] == [3.0, 1.0, 2.0]


def test_paired_ratio_is_the_median_of_per_round_ratios():
    # the clock falls halfway: the baseline slows with it, the candidate does not
    cand = [1.6] * 10
    base = [1.38] * 5 + [1.7] * 5
    assert paired_ratio(cand, base) == pytest.approx((1.38 + 1.7) / 2 / 1.6)
    # pairs matter: the same samples unpaired in another order give another median of ratios
    assert paired_ratio([1.0, 2.0, 3.0], [3.0, 2.0, 1.0]) == pytest.approx(1.0)
    assert paired_ratio([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == pytest.approx(1.0)
    assert paired_ratio([0.0], [1.0]) is None


def test_regimes_split_rounds_by_clock():
    cand = [1.6] * 6
    base = [1.38, 1.38, 1.38, 1.7, 1.7, 1.7]
    clocks = [1980, 1965, 1950, 1680, 1680, 1700]
    assert [regime_of(c, 1980) for c in (1980, 1881, 1880, None)] == \
        ["full", "full", "sustained", None]
    r = regimes(cand, {"cublas": base}, clocks, 1980)
    assert r["full"]["rounds"] == 3 and r["sustained"]["rounds"] == 3
    assert r["full"]["baselines"]["cublas"]["speedup"] == pytest.approx(1.38 / 1.6)
    assert r["sustained"]["baselines"]["cublas"]["speedup"] == pytest.approx(1.7 / 1.6)
    assert r["full"]["clock_mhz"] == 1965 and r["sustained"]["clock_mhz"] == 1680
    assert regimes_differ(r, "cublas") and not regimes_differ(r, "other")
    none = regimes(cand, {"cublas": base}, [None] * 6, 1980)
    assert none == {"full": {"rounds": 0}, "sustained": {"rounds": 0}}


def test_throttled_when_the_clock_falls_more_than_five_percent():
    assert clock_summary([1980, 1980, 1965], 1980)["throttled"] is False
    c = clock_summary([1980, 1900, 1680], 1980)
    assert c["throttled"] is True and c["drop_pct"] == pytest.approx(15.15, abs=0.01)
    assert c["min"] == 1680 and c["first"] == 1980 and c["last"] == 1680
    assert clock_summary([None, None], 1980) == {"throttled": None}


@pytest.mark.parametrize("n, ranks", [
    (5, None), (6, (0, 5)), (10, (1, 8)), (20, (5, 14)), (100, (39, 60)),
])
def test_median_ci_ranks_match_the_binomial_tables(n, ranks):
    """The textbook 95% ranks for the median (1-based: n=10 -> 2, 9; n=20 -> 6, 15;
    n=100 -> 40, 61), 0-based here; none below six samples."""
    assert median_ci_ranks(n) == ranks


def test_median_ci_ranks_normal_approximation_joins_the_exact_ranks():
    """Beyond EXACT_CI_N the normal approximation takes over, within one rank of the exact
    interval and never narrower."""
    exact = median_ci_ranks(EXACT_CI_N)
    approx = median_ci_ranks(EXACT_CI_N + 1)
    assert approx[0] <= exact[0] and approx[1] - approx[0] >= exact[1] - exact[0]
    assert exact[0] - approx[0] <= 1


def test_paired_ratio_ci_covers_the_true_median_at_its_level():
    """Coverage, simulated: rounds with a true ratio median of 1.0 and noise on both sides;
    the 95% interval contains 1.0 in about 95% of 2,000 jobs of 40 rounds (at least, since
    the ranks are conservative), and is never empty."""
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(2000):
        cand = rng.normal(100.0, 1.0, 40)
        base = cand * np.exp(rng.normal(0.0, 0.01, 40))   # ratio median exactly 1.0
        lo, hi = paired_ratio_ci(list(cand), list(base))
        assert lo <= paired_ratio(list(cand), list(base)) <= hi
        hits += lo <= 1.0 <= hi
    assert 0.94 <= hits / 2000 <= 0.985


def test_paired_ratio_ci_separates_a_real_difference_from_noise():
    """200 rounds of a 0.5% real gap with 0.3% noise: the interval excludes 1.00x; the same
    noise without a gap: it includes it. Five rounds: no interval."""
    rng = np.random.default_rng(3)
    cand = list(rng.normal(100.0, 0.3, 200))
    slower = [c * 0.995 * (1 + rng.normal(0, 0.003)) for c in cand]
    same = [c * (1 + rng.normal(0, 0.003)) for c in cand]
    assert paired_ratio_ci(cand, slower)[1] < 1.0
    lo, hi = paired_ratio_ci(cand, same)
    assert lo < 1.0 < hi
    assert paired_ratio_ci(cand[:5], same[:5]) is None
