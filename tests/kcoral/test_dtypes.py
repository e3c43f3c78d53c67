"""KCoral's element types (kcoral/dtypes.py) and tirxh's (tirxh/core/types.py) give the same
answers, so a type tirxh compiles is a type KCoral can hold; scalars are range-checked."""

import ml_dtypes
import numpy as np
import pytest

from kcoral import dtypes
from kcoral.dtypes import NAMES, UNSUPPORTED, dtype_of, is_float, scalar_problem
from tirxh.api import DTYPES, numpy_dtype


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_every_tirxh_type_maps_the_same(name):
    if name in UNSUPPORTED:
        with pytest.raises(TypeError, match=name):
            dtype_of(name)
        return
    assert dtype_of(name) == numpy_dtype(name)
    assert is_float(name) == (DTYPES[name].is_float and "x2" not in name)


def test_no_extra_names():
    assert set(NAMES) <= set(DTYPES)


def test_unknown_type_is_named():
    with pytest.raises(TypeError, match=r"no numpy dtype for PTX type 'q7'; expected one of"):
        dtype_of("q7")


@pytest.mark.parametrize("dtype,value,ok", [
    ("u32", 4096, True), ("u32", -1, False), ("u32", 2 ** 32, False), ("u32", 2 ** 100, False),
    ("s8", -128, True), ("s8", 128, False), ("u32", 1.5, False), ("u32", "abc", False),
    ("f32", 1.5, True), ("f32", float("nan"), False), ("f32", float("inf"), False),
    ("f16", 1e6, False), ("bf16", 1e30, True), ("pred", True, True), ("pred", 1, False),
])
def test_scalar_ranges(dtype, value, ok):
    assert (scalar_problem(dtype, value) is None) == ok


def test_fp8_and_bf16_arrays():
    a = np.arange(4, dtype=np.float32).astype(dtype_of("bf16"))
    assert a.dtype.name == "bfloat16" and dtype_of("e4m3").itemsize == 1


def test_float_limits_do_not_depend_on_np_finfo_knowing_ml_dtypes(monkeypatch):
    """The H200 host's numpy refused np.finfo(bfloat16) ("not compatible with finfo"), failing
    every bf16 job's perturbation guard; the limits come from ml_dtypes.finfo, whatever numpy
    knows."""
    real = np.finfo

    def strict(dt):
        if np.dtype(dt) in (np.dtype(ml_dtypes.bfloat16), np.dtype(ml_dtypes.float8_e4m3fn)):
            raise ValueError(f"data type {np.dtype(dt)!r} not compatible with finfo")
        return real(dt)
    monkeypatch.setattr(np, "finfo", strict)
    assert float(dtypes.finfo(ml_dtypes.bfloat16).max) > 3e38
    assert float(dtypes.finfo(ml_dtypes.float8_e4m3fn).max) == 448.0
    assert float(dtypes.finfo(np.float32).max) == float(real(np.float32).max)
    assert dtypes.scalar_problem("bf16", 1e39) is not None
