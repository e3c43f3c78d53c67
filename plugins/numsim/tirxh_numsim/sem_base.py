"""Semantics of the base binding set (`tirxh/plugins/isa_base.py`): integer and float arithmetic,
comparison, logic, conversion, data movement, memory, barriers, atomics and warp collectives.

Sources: PTX ISA 8.x chapter 9.7. Integer arithmetic wraps; float32 arithmetic rounds to nearest
even in numpy, directed modes are derived from the exact float64 result; f16/bf16 round through
ml_dtypes from float64.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from tirxh.api import ir

from .machine import WARP
from .memory import SHARED_GENERIC
from .semtable import rejected, semantic
from .values import (BF16, E4M3, E5M2, HALF_OF, Unsupported, dtype as T, flush_subnormal,
                     pack2, round_f32, round_to, saturate01, storage, tf32_round, uint_of,
                     unpack2)

_SPECS: dict = {}


def specs(instr):
    s = _SPECS.get(instr)
    if s is None:
        s = _SPECS[instr] = instr.binding.operand_specs(instr.modifiers)
    return s


def _as(x, st: np.dtype) -> np.ndarray:
    """`x` as an array of dtype `st` (no copy when it already is one)."""
    x = np.asarray(x)
    return x if x.dtype == st else x.astype(st)


def srcs(w, instr, *types):
    """Read the operands after the destination as the given PTX types."""
    ops = instr.operands
    return [w.read(ops[i + 1], T(t)) for i, t in enumerate(types)]


# --- integer arithmetic ---------------------------------------------------------------------------

def _int_binop(fn):
    def run(w, instr, mask):
        t = instr.modifiers["type"]
        a, b = srcs(w, instr, t, t)
        with np.errstate(over="ignore"):
            if instr.modifiers.get("sat"):
                r = np.clip(fn(a.astype(np.int64), b.astype(np.int64)), -2 ** 31, 2 ** 31 - 1)
            else:
                r = fn(a, b)
        w.write(instr.operands[0], np.asarray(r).astype(storage(T(t))), mask)
    return run


semantic("add.int", note="Integer add, wrapping; .sat clamps s32.")(_int_binop(np.add))
semantic("sub.int", note="Integer subtract, wrapping; .sat clamps s32.")(_int_binop(np.subtract))


def _wide(t: str) -> str:
    return {"u16": "u32", "u32": "u64", "s16": "s32", "s32": "s64"}[t]


def _mul_parts(a, b, t: str, mode: str):
    dt = T(t)
    bits = dt.bits
    if mode == "lo":
        with np.errstate(over="ignore"):
            return (a * b).astype(storage(dt))
    if bits <= 32:
        wide = np.int64 if dt.is_signed else np.uint64
        p = a.astype(wide) * b.astype(wide)
        if mode == "wide":
            return p.astype(storage(T(_wide(t))))
        return (p >> bits).astype(storage(dt))
    if mode == "wide":
        raise Unsupported(f"mul.wide.{t}")
    # 64-bit .hi: exact through Python integers
    res = [(int(x) * int(y)) >> 64 for x, y in zip(np.broadcast_to(a, np.broadcast(a, b).shape),
                                                   np.broadcast_to(b, np.broadcast(a, b).shape))]
    mod = [(v & (2 ** 64 - 1)) for v in res]
    return np.array(mod, np.uint64).view(storage(dt))


@semantic("mul.int")
def _mul_int(w, instr, mask):
    """Integer multiply: .lo wraps, .hi the upper half, .wide the double-width product."""
    t, mode = instr.modifiers["type"], instr.modifiers["mode"]
    a, b = srcs(w, instr, t, t)
    w.write(instr.operands[0], _mul_parts(a, b, t, mode), mask)


@semantic("mad.int")
def _mad_int(w, instr, mask):
    """Integer multiply-add; .wide adds a double-width c; .hi.sat.s32 clamps."""
    t, mode = instr.modifiers["type"], instr.modifiers["mode"]
    ct = _wide(t) if mode == "wide" else t
    a, b, c = srcs(w, instr, t, t, ct)
    p = _mul_parts(a, b, t, mode)
    with np.errstate(over="ignore"):
        if instr.modifiers.get("sat"):
            r = np.clip(p.astype(np.int64) + c.astype(np.int64), -2 ** 31, 2 ** 31 - 1)
        else:
            r = p + c.astype(p.dtype)
    w.write(instr.operands[0], np.asarray(r).astype(storage(T(ct))), mask)


def _divrem(rem: bool):
    def run(w, instr, mask):
        t = instr.modifiers["type"]
        a, b = srcs(w, instr, t, t)
        a, b = np.broadcast_arrays(a, b)
        zero = (b == 0) & mask
        if zero.any():
            w.m.finding("numsim.div-by-zero", f"integer {'rem' if rem else 'div'}ision by zero "
                        f"by lane {int(np.flatnonzero(zero)[0]) % WARP} "
                        f"({w.where_lane(np.flatnonzero(zero)[0])}); the PTX result is "
                        "unspecified (numsim gives all ones)", instr,
                        lanes=np.flatnonzero(zero) % WARP, w=w,
                        at_lane=int(np.flatnonzero(zero)[0]))
        safe = np.where(b == 0, 1, b)
        if T(t).is_signed:
            a64, b64 = a.astype(np.int64), safe.astype(np.int64)
            q = np.abs(a64) // np.abs(b64) * np.sign(a64) * np.sign(b64)
            r = a64 - q * b64
            out = r if rem else q
        else:
            out = a % safe if rem else a // safe
        out = np.where(b == 0, np.array(-1).astype(storage(T(t))), np.asarray(out).astype(
            storage(T(t))))
        w.write(instr.operands[0], out.astype(storage(T(t))), mask)
    return run


semantic("div.int", note="Integer divide, truncating; division by zero is diagnosed.")(
    _divrem(False))
semantic("rem.int", note="Integer remainder (sign of the dividend); x/0 is diagnosed.")(
    _divrem(True))


@semantic("min.int", "max.int")
def _minmax_int(w, instr, mask):
    """Integer minimum / maximum (.relu clamps at 0)."""
    t = instr.modifiers["type"]
    a, b = srcs(w, instr, t, t)
    r = np.minimum(a, b) if instr.binding.name == "min.int" else np.maximum(a, b)
    if instr.modifiers.get("relu"):
        r = np.maximum(r, 0)
    w.write(instr.operands[0], np.asarray(r).astype(storage(T(t))), mask)


@semantic("abs.int", "neg.int")
def _absneg_int(w, instr, mask):
    """Integer absolute value / negation (wrapping at the most negative value)."""
    t = instr.modifiers["type"]
    (a,) = srcs(w, instr, t)
    with np.errstate(over="ignore"):
        r = np.abs(a) if instr.binding.name == "abs.int" else -a
    w.write(instr.operands[0], np.asarray(r).astype(storage(T(t))), mask)


def _bits_u(a):
    return a.view(uint_of(a.dtype.itemsize)).astype(np.uint64)


@semantic("popc")
def _popc(w, instr, mask):
    """Population count."""
    t = instr.modifiers["type"]
    (a,) = srcs(w, instr, t)
    u = np.asarray(a).view(uint_of(T(t).nbytes))
    bytes_ = np.ascontiguousarray(u).view(np.uint8).reshape(u.shape + (-1,))
    r = np.unpackbits(bytes_, axis=-1).sum(axis=-1).astype(np.uint32)
    w.write(instr.operands[0], r, mask)


@semantic("clz")
def _clz(w, instr, mask):
    """Count leading zeros."""
    t = instr.modifiers["type"]
    bits = T(t).bits
    (a,) = srcs(w, instr, t)
    u = np.broadcast_to(_bits_u(np.asarray(a)), (w.L,))
    r = np.full(u.shape, bits, np.int64)
    for k in range(bits):
        hit = ((u >> np.uint64(k)) & np.uint64(1)).astype(bool)
        r = np.where(hit, bits - 1 - k, r)
    w.write(instr.operands[0], r.astype(np.uint32), mask)


@semantic("brev")
def _brev(w, instr, mask):
    """Bit reverse."""
    t = instr.modifiers["type"]
    bits = T(t).bits
    (a,) = srcs(w, instr, t)
    u = np.broadcast_to(_bits_u(np.asarray(a)), (w.L,))
    r = np.zeros_like(u)
    for k in range(bits):
        r |= ((u >> np.uint64(k)) & np.uint64(1)) << np.uint64(bits - 1 - k)
    w.write(instr.operands[0], r.astype(uint_of(bits // 8)), mask)


@semantic("bfind")
def _bfind(w, instr, mask):
    """Most significant non-sign bit (0xFFFFFFFF when none); .shiftamt gives the left shift."""
    t = instr.modifiers["type"]
    bits = T(t).bits
    (a,) = srcs(w, instr, t)
    a = np.broadcast_to(np.asarray(a), (w.L,))
    u = _bits_u(np.where(a < 0, ~a, a) if T(t).is_signed else a)
    r = np.full(u.shape, -1, np.int64)
    for k in range(bits):
        r = np.where(((u >> np.uint64(k)) & np.uint64(1)).astype(bool), k, r)
    if instr.modifiers.get("shiftamt"):
        r = np.where(r >= 0, bits - 1 - r, r)
    w.write(instr.operands[0], (r & 0xFFFFFFFF).astype(np.uint32), mask)


@semantic("bfe")
def _bfe(w, instr, mask):
    """Bit-field extract (sign-extending for .sN)."""
    t = instr.modifiers["type"]
    bits = T(t).bits
    a, b, c = srcs(w, instr, t, "u32", "u32")
    pos = np.minimum(b.astype(np.int64) & 0xFF, bits)
    ln = np.minimum(c.astype(np.int64) & 0xFF, bits)
    a = np.broadcast_to(np.asarray(a), (w.L,))
    # signed: bits above the msb read as the sign bit (PTX: "sbit" fills beyond msb)
    u = a.astype(np.int64).view(np.uint64) if T(t).is_signed else _bits_u(a)
    pos, ln = np.broadcast_to(pos, u.shape), np.broadcast_to(ln, u.shape)
    field = u >> np.minimum(pos, 63).astype(np.uint64)
    if not T(t).is_signed:
        field = np.where(pos >= bits, np.uint64(0), field)
    m = np.where(ln >= 64, np.uint64(2 ** 64 - 1),
                 (np.uint64(1) << ln.astype(np.uint64)) - np.uint64(1))
    field &= m
    if T(t).is_signed:
        sbit_pos = np.clip(pos + ln - 1, 0, bits - 1).astype(np.uint64)
        sign = np.where(ln == 0, 0, (u >> sbit_pos) & np.uint64(1)).astype(bool)
        field = np.where(sign, field | ~m, field)
    w.write(instr.operands[0], field.astype(uint_of(bits // 8)).view(storage(T(t))), mask)


@semantic("bfi")
def _bfi(w, instr, mask):
    """Bit-field insert: a's low bits into b at position c, length d."""
    t = instr.modifiers["type"]
    bits = T(t).bits
    a, b, c, d = srcs(w, instr, t, t, "u32", "u32")
    pos = np.broadcast_to(c.astype(np.int64) & 0xFF, (w.L,))
    ln = np.broadcast_to(d.astype(np.int64) & 0xFF, (w.L,))
    ua, ub = np.broadcast_to(_bits_u(np.asarray(a)), (w.L,)), np.broadcast_to(
        _bits_u(np.asarray(b)), (w.L,))
    ln = np.minimum(ln, np.maximum(bits - pos, 0))
    m = ((np.uint64(1) << ln.astype(np.uint64)) - np.uint64(1)) << np.minimum(
        pos, 63).astype(np.uint64)
    r = np.where(pos >= bits, ub, (ub & ~m) | ((ua << np.minimum(pos, 63).astype(np.uint64)) & m))
    w.write(instr.operands[0], r.astype(uint_of(bits // 8)), mask)


# --- floating point -------------------------------------------------------------------------------

def _nan_origin(w, instr, mask, result, inputs) -> None:
    if result.dtype.kind != "f" and result.dtype not in (BF16,):
        return
    total = result.sum()
    if total == total:  # no NaN anywhere (a NaN would make the sum NaN): the common case
        return
    r = np.broadcast_to(np.asarray(result, np.float64), (w.L,))
    new = np.isnan(r) & mask
    if not new.any():
        return
    for x in inputs:
        new &= ~np.broadcast_to(np.isnan(np.asarray(x, np.float64)), (w.L,))
    if new.any():
        w.m.finding("numsim.nan-origin", f"{instr.spelling} produced NaN from non-NaN operands "
                    f"(lane {int(np.flatnonzero(new)[0]) % WARP}, "
                    f"{w.where_lane(np.flatnonzero(new)[0])})", instr, severity="review",
                    lanes=np.flatnonzero(new) % WARP, w=w, at_lane=int(np.flatnonzero(new)[0]))


def _fbin(op):
    def run(w, instr, mask):
        t = instr.modifiers["type"]
        mods = instr.modifiers
        a, b = srcs(w, instr, t, t)
        if mods.get("ftz") and t == "f32":
            a, b = flush_subnormal(a), flush_subnormal(b)
        # (numpy's floating-point warnings are off for the whole launch: sim.Machine.launch)
        if t == "f32":
            r = op(a, b) if mods.get("rnd") in (None, "rn") else \
                round_f32(op(a.astype(np.float64), b.astype(np.float64)), mods["rnd"])
        else:
            if mods.get("rnd") not in (None, "rn"):
                raise Unsupported(f"{instr.spelling}: directed rounding of f64")
            r = op(a, b)
        r = _as(r, storage(T(t)))
        if mods.get("ftz") and t == "f32":
            r = flush_subnormal(r)
        if mods.get("sat"):
            r = saturate01(r)
        _nan_origin(w, instr, mask, r, (a, b))
        w.write(instr.operands[0], r, mask)
    return run


semantic("add.f", note="IEEE add; rn in numpy, rz/rm/rp from the exact float64 sum; ftz, sat.")(
    _fbin(np.add))
semantic("sub.f", note="IEEE subtract with rounding modes, ftz, sat.")(_fbin(np.subtract))
semantic("mul.f", note="IEEE multiply with rounding modes, ftz, sat.")(_fbin(np.multiply))


@semantic("fma.f", "mad.f", note="Fused multiply-add through float64 for f32 (the product is "
                                 "exact; a double rounding of the sum is possible in rare ties); "
                                 "f64 fma is representative (two roundings).")
def _fma_f(w, instr, mask):
    t = instr.modifiers["type"]
    mods = instr.modifiers
    a, b, c = srcs(w, instr, t, t, t)
    if mods.get("ftz") and t == "f32":
        a, b, c = flush_subnormal(a), flush_subnormal(b), flush_subnormal(c)
    if t == "f32":
        r = round_f32(a.astype(np.float64) * b + c, mods.get("rnd"))  # exact product, one rounding
    else:
        r = a * b + c
    r = _as(r, storage(T(t)))
    if mods.get("ftz") and t == "f32":
        r = flush_subnormal(r)
    if mods.get("sat"):
        r = saturate01(r)
    _nan_origin(w, instr, mask, r, (a, b, c))
    w.write(instr.operands[0], r, mask)


@semantic("div.f", note="IEEE divide for .rn (modeled); .approx/.full computed exactly "
                        "(representative of their 2-ulp results).")
def _div_f(w, instr, mask):
    t = instr.modifiers["type"]
    a, b = srcs(w, instr, t, t)
    rnd = instr.modifiers["rnd"]
    if instr.modifiers.get("ftz") and t == "f32":
        a, b = flush_subnormal(a), flush_subnormal(b)
    with np.errstate(all="ignore"):
        if t == "f32" and rnd not in ("rn", "approx", "full"):
            r = round_f32(a.astype(np.float64) / b.astype(np.float64), rnd)
        else:
            r = a / b
    r = np.asarray(r).astype(storage(T(t)))
    if instr.modifiers.get("ftz") and t == "f32":
        r = flush_subnormal(r)
    _nan_origin(w, instr, mask, r, (a, b))
    w.write(instr.operands[0], r, mask)


@semantic("min.f", "max.f", "min.h", "max.h")
def _minmax_f(w, instr, mask):
    """IEEE minNum/maxNum: a NaN operand is ignored unless .NaN is given (then NaN results)."""
    t = instr.modifiers["type"]
    if instr.modifiers.get("xorsign"):
        raise Unsupported(f"{instr.spelling}: .xorsign.abs")
    is_min = instr.binding.name.startswith("min")
    f = (np.minimum if is_min else np.maximum) if instr.modifiers.get("nan") else \
        (np.fmin if is_min else np.fmax)
    _apply_half_or_float(w, instr, mask, t, lambda a, b: f(a, b), 2)


@semantic("abs.f", "neg.f")
def _absneg_f(w, instr, mask):
    """Float absolute value / negation (sign bit only; NaN payloads kept)."""
    t = instr.modifiers["type"]
    (a,) = srcs(w, instr, t)
    r = np.abs(a) if instr.binding.name == "abs.f" else -a
    r = np.asarray(r).astype(storage(T(t)))
    if instr.modifiers.get("ftz") and t == "f32":
        r = flush_subnormal(r)
    w.write(instr.operands[0], r, mask)


def _unary_f(fn, approx_note=""):
    def run(w, instr, mask):
        t = instr.modifiers["type"]
        if t in ("f16", "bf16", "f16x2", "bf16x2"):
            _apply_half_or_float(w, instr, mask, t, lambda a: fn(a.astype(np.float64)), 1)
            return
        (a,) = srcs(w, instr, t)
        ftz = instr.modifiers.get("ftz")  # .f32, and the .f64 approximations (rcp, rsqrt)
        if ftz:
            a = flush_subnormal(a)
        with np.errstate(all="ignore"):
            r64 = fn(a.astype(np.float64))
        r = round_f32(r64, instr.modifiers.get("rnd") if instr.modifiers.get("rnd") in
                      ("rn", "rz", "rm", "rp") else "rn") if t == "f32" else r64
        r = np.asarray(r).astype(storage(T(t)))
        if ftz:
            r = flush_subnormal(r)
        _nan_origin(w, instr, mask, r, (a,))
        w.write(instr.operands[0], r, mask)
    return run


_APPROX = ("representative: computed exactly in float64 and rounded; the hardware's .approx "
           "result differs by a few ulp")
semantic("rcp", fidelity="modeled", note="IEEE reciprocal for .rn/.rz/.rm/.rp; .approx is "
         "computed exactly (within the hardware's 1 ulp).")(_unary_f(lambda x: 1.0 / x))
semantic("sqrt", note="IEEE square root for IEEE modes; .approx computed exactly.")(
    _unary_f(np.sqrt))
semantic("rsqrt", fidelity="representative", note=_APPROX)(_unary_f(lambda x: 1.0 / np.sqrt(x)))
semantic("ex2", fidelity="representative", note=_APPROX)(_unary_f(np.exp2))
semantic("lg2", fidelity="representative", note=_APPROX)(_unary_f(np.log2))
semantic("sin", fidelity="representative", note=_APPROX)(_unary_f(np.sin))
semantic("cos", fidelity="representative", note=_APPROX)(_unary_f(np.cos))
semantic("tanh", fidelity="representative", note=_APPROX)(_unary_f(np.tanh))


def _apply_half_or_float(w, instr, mask, t, fn, nargs):
    """Apply `fn` on float64 values for scalar or packed x2 half types (rounded once to the
    element type), or directly for f32/f64. ``.ftz`` flushes subnormal inputs and results of the
    element type to sign-preserving zero (f16 and bf16 too: ``add.ftz.f16``,
    ``ex2.approx.ftz.bf16``)."""
    ops = instr.operands
    mods = instr.modifiers
    ftz = bool(mods.get("ftz"))

    def flush(x):
        return flush_subnormal(x) if ftz else x
    if t in HALF_OF:
        half = HALF_OF[t]
        parts = [unpack2(w.read(ops[i + 1], T(t)), half) for i in range(nargs)]
        outs = []
        for k in range(2):
            vals = [flush(p[k]).astype(np.float64) for p in parts]
            with np.errstate(all="ignore"):
                r = fn(*vals)
            r = np.asarray(r, np.float64)
            if mods.get("sat") == "sat":
                r = saturate01(r)
            if mods.get("sat") == "relu":
                r = np.where(r < 0, 0.0, r)
            outs.append(flush(round_to(r, half, "rn")))
        w.write(ops[0], pack2(outs[0], outs[1], half), mask)
        return
    nd = storage(T(t))
    vals = [flush(w.read(ops[i + 1], T(t))) for i in range(nargs)]
    with np.errstate(all="ignore"):
        r = fn(*[v.astype(np.float64) for v in vals]) if nd in (np.float16, BF16) else fn(*vals)
    r = np.asarray(r, np.float64)
    if mods.get("sat") == "sat":
        r = saturate01(r)
    if mods.get("sat") == "relu":
        r = np.where(r < 0, 0.0, r)
    r = flush(round_to(r, nd, "rn") if nd != np.float64 else r)
    _nan_origin(w, instr, mask, r, vals)
    w.write(ops[0], r, mask)


semantic("add.h", note="f16/bf16 add (scalar or x2), one rounding from the exact sum.")(
    lambda w, i, m: _apply_half_or_float(w, i, m, i.modifiers["type"], np.add, 2))
semantic("sub.h", note="f16/bf16 subtract (scalar or x2).")(
    lambda w, i, m: _apply_half_or_float(w, i, m, i.modifiers["type"], np.subtract, 2))
semantic("mul.h", note="f16/bf16 multiply (scalar or x2).")(
    lambda w, i, m: _apply_half_or_float(w, i, m, i.modifiers["type"], np.multiply, 2))
semantic("fma.h", note="f16/bf16 fused multiply-add (exact in float64, one rounding); "
                       ".sat, .relu.")(
    lambda w, i, m: _apply_half_or_float(w, i, m, i.modifiers["type"],
                                         lambda a, b, c: a * b + c, 3))


# --- comparison, selection, logic ----------------------------------------------------------------

_CMP = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal, "hi": np.greater,
    "hs": np.greater_equal,
}


@semantic("setp")
def _setp(w, instr, mask):
    """Compare: ordered comparisons are false on NaN; the u-suffixed ones are true; num/nan."""
    t, cmp = instr.modifiers["type"], instr.modifiers["cmp"]
    a, b = srcs(w, instr, t, t)
    if T(t).kind == "bits":
        a, b = a.view(uint_of(a.dtype.itemsize)), b.view(uint_of(b.dtype.itemsize))
    with np.errstate(invalid="ignore"):
        if cmp == "num":
            r = ~np.isnan(a) & ~np.isnan(b)
        elif cmp == "nan":
            r = np.isnan(a) | np.isnan(b)
        elif cmp in ("equ", "neu", "ltu", "leu", "gtu", "geu"):
            base = cmp[:-1]
            if T(t).is_float:
                af, bf = a.astype(np.float64), b.astype(np.float64)
                r = _CMP[base](af, bf) | np.isnan(af) | np.isnan(bf)
            else:
                r = _CMP[base](a, b)
        else:
            if T(t).is_float:
                a, b = a.astype(np.float64), b.astype(np.float64)
            r = _CMP[cmp](a, b)
            if cmp == "ne" and T(t).is_float:
                r &= ~np.isnan(a) & ~np.isnan(b)
    w.write(instr.operands[0], np.asarray(r, bool), mask)


@semantic("selp")
def _selp(w, instr, mask):
    """d = c ? a : b."""
    t = instr.modifiers["type"]
    a, b, c = srcs(w, instr, t, t, "pred")
    w.write(instr.operands[0], np.where(c, a, b).astype(storage(T(t))), mask)


def _logic(fn):
    def run(w, instr, mask):
        t = instr.modifiers["type"]
        vals = [w.read(o, T(t)) for o in instr.operands[1:]]
        w.write(instr.operands[0], np.asarray(fn(*vals)).astype(storage(T(t))), mask)
    return run


semantic("and", note="Bitwise/predicate AND.")(_logic(np.bitwise_and))
semantic("or", note="Bitwise/predicate OR.")(_logic(np.bitwise_or))
semantic("xor", note="Bitwise/predicate XOR.")(_logic(np.bitwise_xor))
semantic("not", note="Bitwise/predicate NOT.")(_logic(np.invert))
semantic("cnot", note="C logical not: 1 when a == 0.")(
    _logic(lambda a: (a == 0).astype(a.dtype)))


@semantic("lop3")
def _lop3(w, instr, mask):
    """Three-input logic by an 8-bit truth table (bit i of lut for inputs a,b,c = bits of i)."""
    a, b, c = srcs(w, instr, "b32", "b32", "b32")
    lut = int(instr.operands[4].value) & 0xFF
    a, b, c = np.broadcast_arrays(a, b, c)
    r = np.zeros(a.shape, np.uint32)
    for i in range(8):
        if lut >> i & 1:
            ta = a if i & 4 else ~a
            tb = b if i & 2 else ~b
            tc = c if i & 1 else ~c
            r |= ta & tb & tc
    w.write(instr.operands[0], r, mask)


@semantic("shl", "shr")
def _shift(w, instr, mask):
    """Shifts; amounts >= width give 0 (or the sign fill for arithmetic right shifts)."""
    t = instr.modifiers["type"]
    dt = T(t)
    a, b = srcs(w, instr, t, "u32")
    n = np.minimum(b.astype(np.int64), dt.bits)
    if instr.binding.name == "shl":
        u = _bits_u(np.asarray(a))
        r = np.where(n >= dt.bits, np.uint64(0), u << np.minimum(n, 63).astype(np.uint64))
        r = r.astype(uint_of(dt.nbytes)).view(storage(dt))
    elif dt.is_signed:
        r = (np.asarray(a).astype(np.int64) >> np.minimum(n, 63)).astype(storage(dt))
    else:
        u = _bits_u(np.asarray(a))
        r = np.where(n >= dt.bits, np.uint64(0), u >> np.minimum(n, 63).astype(np.uint64))
        r = r.astype(uint_of(dt.nbytes)).view(storage(dt))
    w.write(instr.operands[0], r, mask)


@semantic("shf")
def _shf(w, instr, mask):
    """Funnel shift of the 64-bit b:a pair (wrap: amount mod 32; clamp: at most 32)."""
    a, b, c = srcs(w, instr, "b32", "b32", "u32")
    n = c.astype(np.uint64)
    n = n & np.uint64(31) if instr.modifiers["mode"] == "wrap" else np.minimum(n, np.uint64(32))
    pair = (b.astype(np.uint64) << np.uint64(32)) | a.astype(np.uint64)
    if instr.modifiers["dir"] == "l":
        r = (pair << n) >> np.uint64(32)
    else:
        r = pair >> n
    w.write(instr.operands[0], (r & np.uint64(0xFFFFFFFF)).astype(np.uint32), mask)


@semantic("prmt")
def _prmt(w, instr, mask):
    """Byte permute (default mode): selector nibbles pick bytes of {b, a}; bit 3 replicates the
    picked byte's sign."""
    if instr.modifiers.get("mode"):
        raise Unsupported(f"{instr.spelling}: prmt mode .{instr.modifiers['mode']}")
    a, b, c = srcs(w, instr, "b32", "b32", "b32")
    a, b, c = np.broadcast_arrays(a, b, c)
    pool = (b.astype(np.uint64) << np.uint64(32)) | a.astype(np.uint64)
    r = np.zeros(a.shape, np.uint64)
    for k in range(4):
        sel = (c.astype(np.uint64) >> np.uint64(4 * k)) & np.uint64(0xF)
        byte = (pool >> ((sel & np.uint64(7)) * np.uint64(8))) & np.uint64(0xFF)
        sign = (byte >> np.uint64(7)) & np.uint64(1)
        byte = np.where(sel & np.uint64(8), sign * np.uint64(0xFF), byte)
        r |= byte << np.uint64(8 * k)
    w.write(instr.operands[0], r.astype(np.uint32), mask)


# --- conversion -----------------------------------------------------------------------------------

_INT_RANGE = {"u8": (0, 255), "u16": (0, 65535), "u32": (0, 2 ** 32 - 1), "u64": (0, 2 ** 64 - 1),
              "s8": (-128, 127), "s16": (-2 ** 15, 2 ** 15 - 1), "s32": (-2 ** 31, 2 ** 31 - 1),
              "s64": (-2 ** 63, 2 ** 63 - 1)}
_FP8 = {"e4m3": E4M3, "e5m2": E5M2}


def _to_float_type(x64, dname, rnd, satfinite):
    nd = storage(T(dname)) if dname != "tf32" else np.float32
    if dname == "tf32":
        return tf32_round(x64.astype(np.float32), rnd or "rna")
    if dname in _FP8:
        fmax = float(ml_dtypes.finfo(_FP8[dname]).max)
        if satfinite:
            with np.errstate(invalid="ignore"):
                x64 = np.where(np.isnan(x64), x64, np.clip(x64, -fmax, fmax))
        r = round_to(x64, _FP8[dname], rnd or "rn")
        return r
    return round_to(x64, nd, rnd or "rn")


@semantic("cvt", note="Conversions with rounding (.rn/.rz/.rm/.rp/.rna, .rni/.rzi/.rmi/.rpi), "
                      "saturation (.sat, .satfinite), .relu, .ftz and packed bf16x2/f16x2/fp8x2.")
def _cvt(w, instr, mask):
    mods = instr.modifiers
    dn, an = mods["dtype"], mods["atype"]
    rnd, sat = mods.get("rnd"), mods.get("sat")
    relu = mods.get("relu") or mods.get("relu2")
    if rnd == "rs":
        raise Unsupported("cvt.rs (stochastic rounding)")
    ops = instr.operands
    if dn in ("f16x2", "bf16x2", "e4m3x2", "e5m2x2") and an == "f32":
        hi, lo = srcs(w, instr, "f32", "f32")  # d = {a -> upper half, b -> lower half}
        half = HALF_OF[dn]
        outs = []
        for v in (lo, hi):
            x = np.asarray(v, np.float64)
            if relu:
                x = np.where(x < 0, 0.0, x)
            if half in (E4M3, E5M2):
                outs.append(_to_float_type(x, "e4m3" if half == E4M3 else "e5m2", rnd,
                                           sat == "satfinite"))
            else:
                if sat == "satfinite":
                    fmax = float(ml_dtypes.finfo(half).max)
                    x = np.where(np.isnan(x), x, np.clip(x, -fmax, fmax))
                outs.append(round_to(x, half, rnd or "rn"))
        w.write(ops[0], pack2(outs[0], outs[1], half), mask)
        return
    if dn in ("e4m3x2", "e5m2x2") and an == "f16x2":
        lo, hi = unpack2(w.read(ops[1], T("f16x2")), np.dtype(np.float16))
        half = HALF_OF[dn]
        outs = []
        for v in (lo, hi):
            x = np.asarray(v, np.float64)
            if relu:
                x = np.where(x < 0, 0.0, x)
            outs.append(_to_float_type(x, dn[:4], rnd, sat == "satfinite"))
        w.write(ops[0], pack2(outs[0], outs[1], half), mask)
        return
    if an in ("e4m3x2", "e5m2x2"):
        (a,) = [w.read(ops[1], T("b16"))]
        lo, hi = unpack2(a, HALF_OF[an])
        w.write(ops[0], pack2(lo.astype(np.float16), hi.astype(np.float16),
                              np.dtype(np.float16)), mask)
        return
    ad, dd = T(an), T(dn)
    (a,) = srcs(w, instr, an)
    if ad.is_float or an == "tf32":
        x = np.asarray(a, np.float64)
        if mods.get("ftz"):
            x = flush_subnormal(x.astype(np.float32)).astype(np.float64) if an == "f32" else x
        if dd.is_float or dn == "tf32":
            if rnd in ("rni", "rzi", "rmi", "rpi"):
                f = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[rnd]
                r = np.asarray(f(x)).astype(storage(dd))
            else:
                r = _to_float_type(x, dn, rnd, sat == "satfinite")
            if sat == "sat":
                r = saturate01(np.asarray(r))
            if relu:
                r = np.where(np.asarray(r, np.float64) < 0, 0, r).astype(np.asarray(r).dtype)
            r = np.asarray(r).astype(storage(dd))
            if mods.get("ftz") and dn == "f32":  # an f32 result is flushed too (f64 -> f32)
                r = flush_subnormal(r)
            w.write(ops[0], r, mask)
            return
        # float -> int: round as asked (default rni... PTX requires an integer rounding) and
        # saturate to the destination range; NaN becomes 0
        f = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil,
             None: np.trunc}.get(rnd, np.trunc)
        lo, hi = _INT_RANGE[dn]
        with np.errstate(invalid="ignore"):
            y = np.clip(np.nan_to_num(f(x), nan=0.0), lo, hi)
        if dd.bits == 64:
            y = np.where(y >= 2.0 ** 63, 2.0 ** 63 - 1024, y) if dd.is_signed else y
        w.write(ops[0], y.astype(storage(dd)), mask)
        return
    if dd.is_float or dn == "tf32":
        x = np.asarray(a).astype(np.float64)
        if ad.bits == 64:
            # exact: go through Python ints for 64-bit sources
            x = np.array([float(int(v)) for v in np.broadcast_to(a, (w.L,))])
        r = _to_float_type(x, dn, rnd, sat == "satfinite")
        w.write(ops[0], np.asarray(r).astype(storage(dd)), mask)
        return
    # int -> int: truncate or extend; .sat clamps to the destination range
    if sat == "sat":
        lo, hi = _INT_RANGE[dn]
        v = np.asarray(a).astype(np.float64) if ad.bits == 64 else np.asarray(a).astype(np.int64)
        r = np.clip(v, lo, hi).astype(storage(dd))
    else:
        r = np.asarray(a).astype(storage(dd))
    w.write(ops[0], r, mask)


# --- data movement --------------------------------------------------------------------------------

@semantic("mov")
def _mov(w, instr, mask):
    """Copy a register, immediate, special register or shared-symbol address."""
    t = instr.modifiers["type"]
    (a,) = srcs(w, instr, t)
    w.write(instr.operands[0], a, mask)


@semantic("cvta")
def _cvta(w, instr, mask):
    """Generic <-> state-space addresses (global is identity; shared uses a fixed window)."""
    ss, size = instr.modifiers["ss"], instr.modifiers["size"]
    (a,) = srcs(w, instr, size)
    a = np.asarray(a).astype(np.uint64)
    if ss in ("global", "param"):
        r = a
    elif ss in ("shared", "shared::cta", "shared::cluster"):
        r = a - np.uint64(SHARED_GENERIC) if instr.modifiers.get("to") else \
            a + np.uint64(SHARED_GENERIC)
    else:
        raise Unsupported(f"cvta for the .{ss} state space")
    w.write(instr.operands[0], r.astype(storage(T(size))), mask)


def _ldst_geometry(instr):
    t = instr.modifiers["type"]
    dt = T(t)
    if t == "b128":
        raise Unsupported(f"{instr.spelling}: 128-bit loads/stores")
    vec = instr.modifiers.get("vec")
    n = int(vec[1:]) if vec else 1
    return dt, n


@semantic("ld", note="Loads from global, shared (::cta and ::cluster), local (per thread), "
                     "generic and param spaces; bounds-checked per allocation; cache hints are "
                     "ordering-only.")
def _ld(w, instr, mask):
    dt, n = _ldst_geometry(instr)
    ss = instr.modifiers.get("ss")
    ops = instr.operands
    addr_op = ops[1]
    dests = list(ops[0]) if isinstance(ops[0], ir.Vec) else [ops[0]]
    if ss == "param":
        if not isinstance(addr_op.base, ir.Sym):
            raise Unsupported("ld.param through a register address")
        for k, d in enumerate(dests):
            v = w.m.params.read(addr_op.base.name, addr_op.offset + k * dt.nbytes, storage(dt))
            w.write(d, np.full(w.L, v), mask)
        return
    if ss == "const":
        raise Unsupported("the .const state space (no constant banks in TIRx kernels)")
    base = w.address(addr_op)
    _check_vector(w, instr, base, mask, dt, n, ss)
    for k, d in enumerate(dests):
        words = w.m.load(w, instr, ss, base + np.uint64(k * dt.nbytes), mask, dt.nbytes)
        val = words.view(storage(dt)) if dt.kind != "pred" else words.astype(bool)
        if isinstance(d, ir.Reg):
            w.write(d, _extend_loaded(val, dt, d.dtype), mask)


def _check_vector(w, instr, base, mask, dt, n: int, ss) -> None:
    """A ``.v2``/``.v4`` access moves ``n * size`` bytes at once and needs that alignment (each
    element's own alignment is checked by the memory path)."""
    if n > 1:
        w.m.check_aligned(w, instr, base, mask, n * dt.nbytes,
                          f"{n * dt.nbytes}-byte vector {ss or 'generic'} access")


def _extend_loaded(val, dt, rdt):
    """Narrow integer loads into wider registers extend by the load type's signedness."""
    st = storage(rdt)
    if st.itemsize > val.dtype.itemsize and val.dtype.kind in "iu":
        return val.astype(st)
    return val


@semantic("st", note="Stores to global, shared (::cta and ::cluster), local (per thread) and "
                     "generic addresses, bounds-checked per allocation.")
def _st(w, instr, mask):
    dt, n = _ldst_geometry(instr)
    ss = instr.modifiers.get("ss")
    if ss in ("param", "const"):
        raise Unsupported(f"st.{ss}")
    ops = instr.operands
    base = w.address(ops[0])
    _check_vector(w, instr, base, mask, dt, n, ss)
    vals = list(ops[1]) if isinstance(ops[1], ir.Vec) else [ops[1]]
    for k, v in enumerate(vals):
        x = np.broadcast_to(w.read(v, dt), (w.L,))
        words = np.ascontiguousarray(x).view(uint_of(dt.nbytes))
        w.m.store(w, instr, ss, base + np.uint64(k * dt.nbytes), mask, dt.nbytes, words)


@semantic("prefetch", fidelity="ordering_only",
          note="A cache hint; no data effect. A .global address in no buffer is a review "
               "finding.")
def _prefetch(w, instr, mask):
    """A cache hint: nothing to model but its address. A ``.global`` address that lies in no
    buffer is a `review` finding (numsim.prefetch-out-of-bounds): harmless to every value here,
    but the PTX ISA does not say what the hardware does with it, and a prefetch address is
    almost always formed like a load's, so one outside every tensor is usually a load's bug
    (rows not clamped to the sequence) in a line nothing else reads."""
    lanes = np.flatnonzero(mask)
    if instr.modifiers.get("ss") != "global" or not lanes.size:
        return
    addrs = np.broadcast_to(np.asarray(w.address(instr.operands[0]), np.uint64), (w.L,))[lanes]
    _, _, ok = w.m.gmem.locate(addrs, 1)
    if not ok.all():
        w.m.finding("numsim.prefetch-out-of-bounds",
                    f"{instr.spelling} of an address in no buffer (a hint: no value changes, "
                    f"but the address is likely formed wrong)", instr, severity="review",
                    lanes=lanes[~ok], addresses=addrs[~ok], w=w, at_lane=int(lanes[~ok][0]))
# the opaque policy word numsim hands out: the hardware's encoding is undocumented, and the only
# legal use of the word is as the cache-policy operand of an .L2::cache_hint access, which
# numsim (no cache model) ignores
POLICY_TOKEN = np.uint64(0x4E554D53494D0001)


@semantic("createpolicy", "createpolicy.range", fidelity="representative")
def _createpolicy(w, instr, mask):
    """An L2 cache policy: a fixed opaque b64 word (no cache model, so the .L2::cache_hint
    accesses that take it read and write exactly as without it)."""
    w.write(instr.operands[0], np.full(w.L, POLICY_TOKEN, np.uint64), mask)


semantic("nanosleep", fidelity="ordering_only", note="No timing model; returns at once.")(
    lambda w, i, m: None)


@semantic("ret", "exit")
def _exit(w, instr, mask):
    """The executing lanes leave the kernel."""
    w.exit_lanes(mask)


@semantic("trap")
def _trap(w, instr, mask):
    """Abort: reported as an error finding and the run stops."""
    w.m.finding("numsim.trap", f"kernel executed trap ({w.where()})", instr, w=w)
    raise Unsupported(f"trap executed at {instr.loc}")


# --- forms split out of the base bindings ---------------------------------------------------------

semantic("div.approx", fidelity="representative", note=_APPROX)(_div_f)
semantic("rcp.approx", fidelity="representative", note=_APPROX)(_unary_f(lambda x: 1.0 / x))
semantic("sqrt.approx", fidelity="representative", note=_APPROX)(_unary_f(np.sqrt))
rejected("bra", "bra is never in the IR (structured control flow is interpreted directly)")


@semantic("abs.h", "neg.h")
def _absneg_h(w, instr, mask):
    """Half-precision absolute value / negation: the sign bit of each element."""
    t = instr.modifiers["type"]
    (a,) = srcs(w, instr, t)
    bits = np.asarray(a).view(uint_of(T(t).nbytes)).astype(np.uint64)
    signs = np.uint64(0x80008000 if t.endswith("x2") else 0x8000)
    r = bits & ~signs if instr.binding.name == "abs.h" else bits ^ signs
    w.write(instr.operands[0], r.astype(uint_of(T(t).nbytes)).view(storage(T(t))), mask)


@semantic("mov.pack", "mov.pack4")
def _mov_pack(w, instr, mask):
    """``mov.bN d, {a, b, ...}``: the first element is the least significant part."""
    t = instr.modifiers["type"]
    nb = T(t).nbytes
    parts = list(instr.operands[1])
    pb = nb // len(parts)
    acc = np.zeros(w.L, np.uint64)
    for k, p in enumerate(parts):
        v = np.broadcast_to(w.read(p, T(f"b{pb * 8}")), (w.L,)).astype(np.uint64)
        acc |= v << np.uint64(8 * pb * k)
    w.write(instr.operands[0], acc.astype(uint_of(nb)), mask)


@semantic("mov.unpack")
def _mov_unpack(w, instr, mask):
    """``mov.bN {lo, hi}, a``: split a register into halves (lo = least significant)."""
    t = instr.modifiers["type"]
    nb = T(t).nbytes
    a = np.broadcast_to(w.read(instr.operands[1], T(t)), (w.L,)).astype(np.uint64)
    parts = list(instr.operands[0])
    pb = nb // len(parts)
    for k, p in enumerate(parts):
        if isinstance(p, ir.Reg):
            v = (a >> np.uint64(8 * pb * k)) & np.uint64((1 << (8 * pb)) - 1)
            w.write(p, v.astype(uint_of(pb)), mask)
