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
