"""Element types of job buffers and scalar arguments: PTX type names -> numpy dtypes.

The wire protocol names types as PTX does (``f32``, ``u32``, ``bf16``, ``e4m3``); this table is
what the daemon, the boards and the client library read. bf16 and the fp8 types come from
ml_dtypes. tirxh has its own table for the language (`tirxh.core.types`); a test
(``tests/kcoral/test_dtypes.py``) holds the two to the same answers, so that a type tirxh
compiles is a type KCoral can hold.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

# PTX type name -> numpy dtype of one element (packed types travel as their bits)
_NUMPY = {
    "pred": np.bool_, "b8": np.uint8, "b16": np.uint16, "b32": np.uint32, "b64": np.uint64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
    "f16": np.float16, "f32": np.float32, "f64": np.float64, "tf32": np.float32,
    "f16x2": np.uint32, "bf16x2": np.uint32, "e4m3x2": np.uint16, "e5m2x2": np.uint16,
    "bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2,
}
NAMES = tuple(sorted(_NUMPY))
# b128 has a PTX name but no numpy element: it is refused as a buffer or scalar type
UNSUPPORTED = {"b128": "no numpy element type holds 128 bits"}

_FLOATS = ("f16", "bf16", "f32", "f64", "tf32", "e4m3", "e5m2")


def dtype_of(name: str) -> np.dtype:
    """numpy dtype for a PTX type name; TypeError naming the known ones otherwise."""
    try:
        return np.dtype(_NUMPY[name])
    except (KeyError, TypeError):
        why = UNSUPPORTED.get(name) if isinstance(name, str) else None
        raise TypeError(f"no numpy dtype for PTX type {name!r}" + (f" ({why})" if why else "")
                        + f"; expected one of {list(NAMES)}") from None


def is_float(name: str) -> bool:
    return name in _FLOATS


def finfo(dt):
    """Float limits of numpy's and ml_dtypes' float types alike: ``ml_dtypes.finfo``. Whether
    ``np.finfo`` takes bfloat16 / float8 depends on the numpy and ml_dtypes versions (the H200
    host's did not: "data type dtype(bfloat16) not compatible with finfo", every bf16 job's
    perturbation guard, 2026-12-01)."""
    return ml_dtypes.finfo(dt)


def scalar_problem(name: str, value) -> "str | None":
    """Why `value` cannot be passed as a scalar of PTX type `name` (None when it can): an
    integer type takes an integer in its range, a float type a finite number, pred a bool."""
    if isinstance(value, bool):
        return None if name == "pred" or name in _FLOATS else \
            f"expected a number for {name}, got {value!r}"
    if name == "pred":
        return f"expected true or false for pred, got {value!r}"
    if name in _FLOATS:
        if not isinstance(value, (int, float)) or value != value or abs(value) == float("inf"):
            return f"expected a finite number for {name}, got {value!r}"
        info = finfo(dtype_of(name))
        if abs(value) > float(info.max):
            return f"{value!r} is outside the range of {name} (|x| <= {float(info.max):g})"
        return None
    if not isinstance(value, int):
        return f"expected an integer for {name}, got {value!r}"
    dt = dtype_of(name)
    lo, hi = int(np.iinfo(dt).min), int(np.iinfo(dt).max)
    if not lo <= value <= hi:
        return f"{value!r} does not fit in {name} ({lo}..{hi})"
    return None
