"""Typed register values as numpy arrays, and the rounding helpers arithmetic needs.

A register holds one numpy array per thread group (one element per lane) in the numpy type of its
PTX type (`tirxh.core.types.numpy_dtype`): ``u32`` -> uint32, ``bf16`` -> ml_dtypes.bfloat16,
packed ``f16x2``/``bf16x2`` -> uint32 bits, ``pred`` -> bool. An instruction reads an operand *as*
its operand type: same width means a bit reinterpretation (``mov.b32`` of an f32 register), a
narrower integer type truncates and a wider one extends by the source type's signedness (the ld/st
and cvt rule of the PTX ISA "Operand Type Information").
"""

from __future__ import annotations

import numpy as np

from tirxh.api import DType, DTYPES, numpy_dtype

try:
    import ml_dtypes
except ImportError:  # pragma: no cover - declared dependency
    ml_dtypes = None

BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
E5M2 = np.dtype(ml_dtypes.float8_e5m2)

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


class Unsupported(Exception):
    """Something numsim does not model; the run's verdict becomes ``incomplete`` naming it."""


_STORAGE: dict = {}
_IMMS: dict = {}


def storage(dt: DType) -> np.dtype:
    """The numpy dtype a register of PTX type `dt` is stored in (cached: on the hot path)."""
    st = _STORAGE.get(dt.name)
    if st is None:
        if dt.name == "b128":
            raise Unsupported("128-bit registers (.b128) are not modeled")
        st = _STORAGE[dt.name] = numpy_dtype(dt.name)
    return st


def uint_of(nbytes: int):
    return _UINT[nbytes]


def convert_bits(arr: np.ndarray, want: np.dtype) -> np.ndarray:
    """Reinterpret (same width) or truncate/extend (integer widths) `arr` into `want`."""
    arr = np.asarray(arr)
    if arr.dtype == want:
        return arr
    if arr.dtype.itemsize == want.itemsize:
        if arr.dtype == np.bool_ or want == np.bool_:
            return arr.astype(want)
        return arr.view(want)
    if arr.dtype.kind in "iub" and want.kind in "iub":
        return arr.astype(want)
    # a float held in a wider/narrower register (e.g. f16 loaded into a b32): go through bits
    bits = arr.view(_UINT[arr.dtype.itemsize])
    out = bits.astype(_UINT[want.itemsize])
    return out.view(want) if want.kind != "u" else out


def imm_array(value, dt: DType) -> np.ndarray:
    """A 0-d array holding an immediate of PTX type `dt` (broadcasts against lane arrays);
    cached and read-only."""
    key = (value, type(value), dt.name)
    hit = _IMMS.get(key)
    if hit is None:
        hit = _imm_array(value, dt)
        hit.setflags(write=False)
        if len(_IMMS) < 65536:
            _IMMS[key] = hit
    return hit


def _imm_array(value, dt: DType) -> np.ndarray:
    nd = storage(dt)
    if dt.kind == "pred":
        return np.asarray(bool(value))
    if nd.kind == "f" or nd in (BF16, E4M3, E5M2):
        return np.asarray(value, dtype=np.float64).astype(nd)
    if isinstance(value, float):
        if nd.itemsize == 4:
            return np.asarray(value, np.float32).view(nd)
        if nd.itemsize == 8:
            return np.asarray(value, np.float64).view(nd)
        if nd.itemsize == 2:
            return np.asarray(value, np.float16).view(nd)
    v = int(value)
    bits = nd.itemsize * 8
    v &= (1 << bits) - 1
    return np.asarray(v, dtype=_UINT[nd.itemsize]).view(nd)


# --- floating point helpers -----------------------------------------------------------------------

def round_f32(x64: np.ndarray, rnd: "str | None") -> np.ndarray:
    """Round float64 values to float32 with a PTX rounding mode (rn, rz, rm, rp).

    The float64 value must be the exact result (true for f32 add/mul of f32 operands within
    range) for the directed modes to be exact; rn is numpy's round-to-nearest-even.
    """
    f = x64.astype(np.float32)
    if rnd in (None, "rn", "rni"):
        return f
    back = f.astype(np.float64)
    with np.errstate(invalid="ignore"):
        if rnd in ("rz", "rzi"):
            fix = (np.abs(back) > np.abs(x64)) & np.isfinite(x64)
            target = np.float32(0)
            return np.where(fix, np.nextafter(f, target * f), f).astype(np.float32)
        if rnd in ("rm", "rmi"):
            fix = back > x64
            return np.where(fix, np.nextafter(f, np.float32(-np.inf)), f).astype(np.float32)
        if rnd in ("rp", "rpi"):
            fix = back < x64
            return np.where(fix, np.nextafter(f, np.float32(np.inf)), f).astype(np.float32)
    raise Unsupported(f"rounding mode .{rnd} for f32")


def round_to(x: np.ndarray, target: np.dtype, rnd: "str | None") -> np.ndarray:
    """Round float values to a narrower float type with a PTX rounding mode."""
    x64 = np.asarray(x, dtype=np.float64)
    if target == np.float32:
        return round_f32(x64, rnd)
    if target == np.float64:
        return x64
    if rnd in (None, "rn"):
        return _rn_narrow(x64, target)
    f = _rn_narrow(x64, target)
    back = f.astype(np.float64)
    with np.errstate(invalid="ignore"):
        if rnd == "rz":
            fix = (np.abs(back) > np.abs(x64)) & np.isfinite(x64)
            return np.where(fix, _step(f, toward_zero=True), f).astype(target)
        if rnd == "rm":
            return np.where(back > x64, _step(f, down=True), f).astype(target)
        if rnd == "rp":
            return np.where(back < x64, _step(f, down=False), f).astype(target)
        if rnd == "rna":
            return _rna(x64, target)
    raise Unsupported(f"rounding mode .{rnd} to {target}")


def _rn_narrow(x64: np.ndarray, target: np.dtype) -> np.ndarray:
    # float64 -> f16/bf16/fp8 in one rounding (ml_dtypes and numpy round float64 directly)
    with np.errstate(over="ignore", invalid="ignore"):
        return x64.astype(target)


def _step(f: np.ndarray, toward_zero=False, down=False) -> np.ndarray:
    """The neighbouring representable value of narrow floats (by stepping the bit pattern)."""
    u = f.view(_UINT[f.dtype.itemsize]).astype(np.int64)
    sign_bit = 1 << (f.dtype.itemsize * 8 - 1)
    neg = (u & sign_bit) != 0
    mag = u & (sign_bit - 1)
    if toward_zero:
        mag = np.where(mag > 0, mag - 1, mag)
    else:
        # down: more negative; up: more positive
        grow = neg if down else ~neg
        mag = np.where(grow, mag + 1, np.where(mag > 0, mag - 1, mag))
        # stepping down from +0 gives -min_subnormal; up from -0 gives +min_subnormal
        zero = (u & (sign_bit - 1)) == 0
        flip = zero & (~neg if down else neg)
        mag = np.where(flip, 1, mag)
        neg = np.where(flip, ~neg, neg)
    out = (mag | np.where(neg, sign_bit, 0)).astype(_UINT[f.dtype.itemsize])
    return out.view(f.dtype)


def _rna(x64: np.ndarray, target: np.dtype) -> np.ndarray:
    """Round to nearest, ties away from zero (cvt.rna), by comparing both neighbours."""
    f = _rn_narrow(x64, target)
    back = f.astype(np.float64)
    lo = np.where(back > x64, _step(f, down=True), f)
    hi = np.where(back < x64, _step(f, down=False), f)
    dl = np.abs(x64 - lo.astype(np.float64))
    dh = np.abs(hi.astype(np.float64) - x64)
    away = np.where(x64 >= 0, hi, lo)
    pick = np.where(dl < dh, lo, np.where(dh < dl, hi, away))
    return pick.astype(target)


def tf32_round(x: np.ndarray, rnd: str = "rna") -> np.ndarray:
    """Round f32 to tf32 (10 mantissa bits), kept in an f32 container with the low 13 bits zero."""
    f = np.asarray(x, np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    finite = np.isfinite(f)
    if rnd in ("rna", None):
        r = (u + 0x1000) & 0xFFFFE000
    elif rnd == "rn":
        lsb = (u >> 13) & 1
        r = (u + 0xFFF + lsb) & 0xFFFFE000
    elif rnd == "rz":
        r = u & 0xFFFFE000
    else:
        raise Unsupported(f"cvt .{rnd} to tf32")
    r = np.where(finite, r, u).astype(np.uint32)
    return r.view(np.float32)


# the smallest normal magnitude of each float type (.ftz flushes anything below it)
_TINY = {np.dtype(np.float32): 2.0 ** -126, np.dtype(np.float64): 2.0 ** -1022,
         np.dtype(np.float16): 2.0 ** -14, BF16: 2.0 ** -126}


def flush_subnormal(x: np.ndarray) -> np.ndarray:
    """.ftz: subnormals of `x`'s own float type (f32, f64, f16 or bf16) become sign-preserving
    zero (PTX ISA "Floating Point Instructions": .ftz flushes subnormal inputs and results)."""
    x = np.asarray(x)
    tiny = _TINY.get(x.dtype)
    if tiny is None:
        raise Unsupported(f".ftz on {x.dtype} values")
    with np.errstate(invalid="ignore"):
        mag = np.abs(x.astype(np.float64))
        zero = np.where(np.signbit(x), -0.0, 0.0).astype(x.dtype)
        return np.where((mag < tiny) & (mag != 0), zero, x).astype(x.dtype)


def saturate01(x: np.ndarray) -> np.ndarray:
    """.sat on floats: clamp to [0, 1]; NaN becomes 0."""
    with np.errstate(invalid="ignore"):
        y = np.clip(x, 0, 1)
    return np.where(np.isnan(y), 0, y).astype(x.dtype)


def unpack2(bits: np.ndarray, half: np.dtype) -> "tuple[np.ndarray, np.ndarray]":
    """Split packed x2 bits into (lo, hi) elements of type `half` (lo = bits 0..w-1)."""
    w = half.itemsize * 8
    u = np.asarray(bits).astype(np.uint64)
    mask = (1 << w) - 1
    lo = (u & mask).astype(_UINT[half.itemsize]).view(half)
    hi = ((u >> w) & mask).astype(_UINT[half.itemsize]).view(half)
    return lo, hi


def pack2(lo: np.ndarray, hi: np.ndarray, half: np.dtype) -> np.ndarray:
    """Pack two elements of type `half` into bits (lo in the low half)."""
    w = half.itemsize * 8
    ul = np.asarray(lo, half).view(_UINT[half.itemsize]).astype(np.uint64)
    uh = np.asarray(hi, half).view(_UINT[half.itemsize]).astype(np.uint64)
    return (ul | (uh << w)).astype(_UINT[2 * half.itemsize])


HALF_OF = {"f16x2": np.dtype(np.float16), "bf16x2": BF16, "e4m3x2": E4M3, "e5m2x2": E5M2}


def dtype(name: str) -> DType:
    return DTYPES[name]
