"""Timing statistics on their own: noise, paired ratios, clock regimes, throttling."""

import numpy as np
import pytest

from kcoral.stats import (
    clock_summary, paired_ratio, regime_of, regimes, regimes_differ, rel_stderr_median, summary,
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
