"""PTX scalar types, as data.

TIRx registers carry exactly the PTX type they are declared with; the language never converts
implicitly (a `cvt` is an instruction the user writes). This table is the one place that knows each
type's width, its register class in the emitted PTX, and its numpy equivalent (numsim, KCoral and
case inputs use the latter).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

try:  # bf16 / fp8 arithmetic in numpy
    import ml_dtypes
except ImportError:  # pragma: no cover - ml_dtypes is a declared dependency
    ml_dtypes = None


@dataclass(frozen=True)
class DType:
    """One PTX type. `name` is the PTX spelling without the dot (``u32``, ``bf16x2``)."""

    name: str
    bits: int
    kind: str  # "pred" | "bits" | "uint" | "sint" | "float"
    reg_class: str  # the `.reg .<class>` used when the emitter declares a virtual register

    @property
    def nbytes(self) -> int:
        return max(1, self.bits // 8)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_signed(self) -> bool:
        return self.kind == "sint"

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype holding one value of this type (packed types map to their bits)."""
        return numpy_dtype(self.name)

    def __repr__(self) -> str:
        return self.name

    def __str__(self) -> str:
        return self.name


_TABLE = [
    # name      bits kind     reg class
    ("pred", 1, "pred", "pred"),
    ("b8", 8, "bits", "b16"),
    ("b16", 16, "bits", "b16"),
    ("b32", 32, "bits", "b32"),
    ("b64", 64, "bits", "b64"),
    ("b128", 128, "bits", "b128"),
    ("u8", 8, "uint", "u16"),
    ("u16", 16, "uint", "u16"),
    ("u32", 32, "uint", "u32"),
    ("u64", 64, "uint", "u64"),
    ("s8", 8, "sint", "s16"),
    ("s16", 16, "sint", "s16"),
    ("s32", 32, "sint", "s32"),
    ("s64", 64, "sint", "s64"),
    ("f16", 16, "float", "b16"),
    ("bf16", 16, "float", "b16"),
    ("f32", 32, "float", "f32"),
    ("f64", 64, "float", "f64"),
    ("tf32", 32, "float", "b32"),
    ("f16x2", 32, "float", "b32"),
    ("bf16x2", 32, "float", "b32"),
    ("e4m3", 8, "float", "b16"),
    ("e5m2", 8, "float", "b16"),
    ("e4m3x2", 16, "float", "b16"),
    ("e5m2x2", 16, "float", "b16"),
]

DTYPES: dict[str, DType] = {n: DType(n, b, k, r) for n, b, k, r in _TABLE}

# aliases a user may write in Python for the same PTX type
_ALIASES = {"i8": "s8", "i16": "s16", "i32": "s32", "i64": "s64", "bool": "pred"}


def dtype(x: "str | DType") -> DType:
    """Resolve a type name (``"u32"``, ``"i32"``, a `DType`) to its `DType`."""
    if isinstance(x, DType):
        return x
    name = _ALIASES.get(x, x)
    try:
        return DTYPES[name]
    except KeyError:
        raise TypeError(f"unknown PTX type {x!r}; expected one of {sorted(DTYPES)}") from None


def numpy_dtype(name: str) -> np.dtype:
    """numpy dtype for a PTX type name; bf16 and fp8 through ml_dtypes."""
    simple = {
        "pred": np.bool_, "b8": np.uint8, "b16": np.uint16, "b32": np.uint32, "b64": np.uint64,
        "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
        "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
        "f16": np.float16, "f32": np.float32, "f64": np.float64, "tf32": np.float32,
        "f16x2": np.uint32, "bf16x2": np.uint32, "e4m3x2": np.uint16, "e5m2x2": np.uint16,
    }
    if name in simple:
        return np.dtype(simple[name])
    if ml_dtypes is None:  # pragma: no cover
        raise TypeError(f"type {name!r} needs the ml_dtypes package")
    special = {"bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn,
               "e5m2": ml_dtypes.float8_e5m2}
    if name in special:
        return np.dtype(special[name])
    raise TypeError(f"no numpy dtype for PTX type {name!r}")


def from_numpy(dt: np.dtype) -> DType:
    """The PTX type for a numpy dtype (signed ints map to sNN, bool to pred)."""
    dt = np.dtype(dt)
    for name in ("f32", "f64", "f16", "bf16", "e4m3", "e5m2", "u8", "u16", "u32", "u64",
                 "s8", "s16", "s32", "s64", "pred"):
        if numpy_dtype(name) == dt:
            return DTYPES[name]
    raise TypeError(f"numpy dtype {dt} has no PTX equivalent")


# The public names the language re-exports (T.f32, T.u32, ...).
pred = DTYPES["pred"]
b8, b16, b32, b64, b128 = (DTYPES[n] for n in ("b8", "b16", "b32", "b64", "b128"))
u8, u16, u32, u64 = (DTYPES[n] for n in ("u8", "u16", "u32", "u64"))
s8, s16, s32, s64 = (DTYPES[n] for n in ("s8", "s16", "s32", "s64"))
i8, i16, i32, i64 = s8, s16, s32, s64
f16, bf16, f32, f64, tf32 = (DTYPES[n] for n in ("f16", "bf16", "f32", "f64", "tf32"))
f16x2, bf16x2 = DTYPES["f16x2"], DTYPES["bf16x2"]
e4m3, e5m2 = DTYPES["e4m3"], DTYPES["e5m2"]
