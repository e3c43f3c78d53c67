"""KCoral's comparison of a check (kcoral/tolerance.py) and tirxh's `Tolerance.compare` agree:
the same verdicts, mismatch counts and error figures on the same arrays."""

import numpy as np
import pytest

from kcoral.dtypes import dtype_of
from kcoral.tolerance import compare
from tirxh.api import Tolerance

RNG = np.random.default_rng(7)
REF = RNG.standard_normal(1000).astype(np.float32)


def _cases():
    noisy = REF + RNG.standard_normal(1000).astype(np.float32) * 1e-4
    nan = REF.copy()
    nan[3] = np.nan
    off = REF.copy()
    off[10:13] += 1.0
    ints = np.arange(100, dtype=np.int32)
    bad_ints = ints.copy()
    bad_ints[5] = -1
    bf = REF.astype(dtype_of("bf16"))
    yield "close", noisy, REF, (1e-3, 1e-3, None)
    yield "rtol too tight", noisy, REF, (1e-7, 0.0, None)
    yield "nan", nan, REF, (1e-3, 1e-3, None)
    yield "three off", off, REF, (1e-3, 0.0, None)
    yield "rms passes", off, REF, (10.0, 10.0, 0.5)
    yield "rms fails", off, REF, (10.0, 10.0, 0.01)
    yield "ints", bad_ints, ints, (0.0, 0.0, None)
    yield "bf16 vs f32", bf, REF, (1e-2, 1e-2, None)
    yield "shape", REF[:10], REF, (0.0, 0.0, None)


@pytest.mark.parametrize("label,got,exp,tol", list(_cases()), ids=[c[0] for c in _cases()])
def test_same_verdict_and_figures(label, got, exp, tol):
    ours = compare(got, exp, *tol)
    theirs = Tolerance(*tol).compare(got, exp)
    assert ours["ok"] == theirs["ok"]
    for k in ("mismatches", "total", "max_abs", "max_rel", "rms_ratio", "first", "reason"):
        assert repr(ours.get(k)) == repr(theirs.get(k)), k  # repr: NaN compares equal to NaN


def test_identical_arrays_take_the_fast_path():
    r = compare(REF, REF.copy())
    assert r["ok"] and r["exact"] and Tolerance().compare(REF, REF.copy())["ok"]


# -------------------------------------------------------------------------------------------------
# the fast path (chunks, float32 where exact) decides every element as the float64 path does
# -------------------------------------------------------------------------------------------------

def _boundary(e: np.ndarray, rtol: float, atol: float, rng) -> np.ndarray:
    """`e` moved by about its tolerance: a third just inside, a third just outside, a third on
    the float64 limit itself (as close as the dtype can get), plus NaN and infinities."""
    e64 = e.astype(np.float64)
    thr = atol + rtol * np.abs(e64)
    scale = rng.choice([1 - 1e-7, 1 + 1e-7, 1.0, 0.5, 2.0, 1 - 1e-3], size=e.shape)
    sign = rng.choice([-1.0, 1.0], size=e.shape)
    got = (e64 + sign * thr * scale).astype(e.dtype)
    flat = got.reshape(-1)
    flat[::97] = np.nan
    flat[5::211] = np.inf
    flat[7::223] = -np.inf
    return got


def _fast_and_reference(monkeypatch, got, exp, tol):
    import kcoral.tolerance as kt
    ref = compare(got, exp, *tol)  # small: the float64 path
    assert "exact" in ref or got.size <= kt.SMALL
    monkeypatch.setattr(kt, "SMALL", 0)
    monkeypatch.setattr(kt, "CHUNK", 997)  # chunks that do not divide the array
    fast = compare(got, exp, *tol)
    monkeypatch.undo()
    return fast, ref


DTYPES = ["f32", "bf16", "f16", "e4m3", "e5m2", "f64"]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("tol", [(1e-3, 1e-3, None), (1e-2, 0.0, None), (0.0, 1e-2, None),
                                 (0.05, 0.5, 0.03), (0.0, 0.0, None)])
def test_fast_path_gives_the_float64_verdict(monkeypatch, dt, tol):
    rng = np.random.default_rng(hash((dt, tol)) % 2 ** 32)
    e = (rng.standard_normal(20011) * rng.choice([1e-3, 1.0, 1e3], 20011)).astype(dtype_of(dt))
    e.reshape(-1)[::13] = 0  # zeros (a zero limit when atol = 0)
    got = _boundary(e, tol[0], tol[1], rng)
    fast, ref = _fast_and_reference(monkeypatch, got, e, tol)
    assert ref["mismatches"] > 0 and ref["mismatches"] < ref["total"]  # both kinds present
    for k in ("ok", "mismatches", "total", "first", "reason"):
        assert repr(fast.get(k)) == repr(ref.get(k)), k
    for k in ("max_abs", "max_rel"):
        assert repr(fast[k]) == repr(ref[k]), k  # the float64 figures, NaN included


@pytest.mark.parametrize("dt", ["f32", "bf16"])
def test_fast_path_figures_without_nan(monkeypatch, dt):
    rng = np.random.default_rng(3)
    e = rng.standard_normal(30000).astype(dtype_of(dt))
    got = (e.astype(np.float64) + rng.standard_normal(30000) * 1e-2).astype(dtype_of(dt))
    fast, ref = _fast_and_reference(monkeypatch, got, e, (1e-2, 1e-2, None))
    assert fast["max_abs"] == ref["max_abs"] and fast["max_rel"] == ref["max_rel"]
    assert fast["rms_ratio"] == pytest.approx(ref["rms_ratio"], rel=1e-6)
    assert fast["mismatches"] == ref["mismatches"] > 0


@pytest.mark.parametrize("dt", ["f32", "bf16", "f64"])
def test_fast_path_rms_limit_exactly_at_the_ratio(monkeypatch, dt):
    rng = np.random.default_rng(5)
    e = rng.standard_normal(40000).astype(dtype_of(dt))
    got = (e.astype(np.float64) * (1 + rng.standard_normal(40000) * 1e-2)).astype(dtype_of(dt))
    exact = compare(got, e, 1.0, 1.0, None)["rms_ratio"]
    for limit, ok in ((exact, True), (np.nextafter(exact, 0), False), (exact * 1.01, True)):
        fast, ref = _fast_and_reference(monkeypatch, got, e, (1.0, 1.0, limit))
        assert fast["ok"] == ref["ok"] == ok, (limit, fast.get("reason"))


@pytest.mark.parametrize("dt", ["s32", "u8", "s64", "u16"])
def test_fast_path_integers(monkeypatch, dt):
    rng = np.random.default_rng(11)
    e = rng.integers(0, 100, 25000).astype(dtype_of(dt))
    got = e.copy()
    got[::101] += 1
    fast, ref = _fast_and_reference(monkeypatch, got, e, (0.0, 0.0, None))
    for k in ("ok", "mismatches", "first", "max_abs", "max_rel"):
        assert repr(fast.get(k)) == repr(ref.get(k)), k
    assert fast["rms_ratio"] == pytest.approx(ref["rms_ratio"], rel=1e-12)


def test_a_boolean_output_left_poisoned_never_passes():
    want = np.ones(64, bool)
    poisoned = np.frombuffer(b"\xff" * 64, dtype=bool)  # numpy reads 0xFF as True
    assert np.array_equal(poisoned, want)  # ... so an element comparison would pass it
    r = compare(poisoned, want)
    assert not r["ok"] and r["mismatches"] == 64 and r["first"][0]["actual"] == 255
    assert compare(want.copy(), want)["ok"]


@pytest.mark.parametrize("dt", ["f32", "bf16", "f64", "s32"])
def test_threaded_chunks_give_the_one_thread_result_exactly(monkeypatch, dt):
    """Large outputs are compared on a thread pool (a GPU host's idle cores); the chunks merge
    in order, so every figure, the sums' rounding and the first mismatches are the serial
    pass's, bit for bit."""
    import kcoral.tolerance as kt
    rng = np.random.default_rng(17)
    e = (rng.standard_normal(50021) * 10).astype(dtype_of(dt))
    got = _boundary(e, 1e-3, 1e-3, rng) if dt != "s32" else e.copy()
    if dt == "s32":
        got[::89] += 1
    monkeypatch.setattr(kt, "SMALL", 0)
    monkeypatch.setattr(kt, "CHUNK", 991)
    monkeypatch.setattr(kt, "_threads", lambda n: 1)
    serial = compare(got, e, 1e-3, 1e-3, 0.5)
    monkeypatch.setattr(kt, "_threads", lambda n: 4)
    threaded = compare(got, e, 1e-3, 1e-3, 0.5)
    assert serial["mismatches"] > 0
    assert repr(threaded) == repr(serial)


def test_thread_count_grows_with_the_array_and_stops_at_the_cap(monkeypatch):
    import kcoral.tolerance as kt
    monkeypatch.setattr(kt.os, "cpu_count", lambda: 16)
    assert kt._threads(kt.CHUNK) == 1                     # small: one thread, no pool
    assert kt._threads(16 * kt.CHUNK) == 4
    assert kt._threads(268435456) == kt.MAX_THREADS       # a 1 GB f32 state
    monkeypatch.setattr(kt.os, "cpu_count", lambda: 2)
    assert kt._threads(268435456) == 2
