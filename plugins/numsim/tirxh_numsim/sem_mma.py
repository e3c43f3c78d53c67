"""Matrix instructions: ldmatrix / stmatrix / movmatrix, mma.sync and wgmma (with shared-memory
descriptors).

Fragment layouts follow the PTX ISA sections "Matrix Fragments for mma.m16n8k*" and "Register
Fragments and Shared Memory Matrix Layouts" for wgmma (g = lane / 4, t = lane % 4):

- A (16 x K, row major), e = elements per 32-bit register: r0 (g, e*t..), r1 (g+8, e*t..),
  r2 (g, e*t + K/2..), r3 (g+8, e*t + K/2..); two-register shapes stop after r1.
- B (K x 8, column major): b0 (k = e*t.., n = g), b1 (k = e*t + K/2.., n = g).
- C/D (16 x 8) f32/s32: c_i (g + 8*(i // 2), 2t + i % 2); f16: c_i holds (g + 8i, 2t..2t+1).
- wgmma D (64 x N over a warpgroup): warp w of the warpgroup owns rows 16w..16w+15; register i
  of a lane is (16w + g + 8*((i // 2) % 2), 8*(i // 4) + 2t + i % 2) for f32/s32.

Shared-memory matrix descriptors (PTX ISA "Matrix Descriptor Format"): bits 0-13 start address
>> 4, 16-29 leading-dimension byte offset >> 4, 32-45 stride-dimension byte offset >> 4, 49-51
base offset, 62-63 swizzle (0 none, 1 128B, 2 64B, 3 32B). Canonical layouts, T = 16 bytes of
elements, S = swizzle span in bytes (element (mn, k) -> byte address before swizzling):

- K-major, no swizzle: start + (mn//8)*SBO + (mn%8)*16 + (k//T)*LBO + (k%T)*esize
- K-major, swizzle S:  start + (mn//8)*SBO + (mn%8)*S + k*esize
- MN-major, no swizzle: start + (mn%T)*esize + (mn//T)*SBO + (k%8)*16 + (k//8)*LBO
- MN-major, swizzle S: start + (mn%T)*esize + ((mn//T)%(S/16))*16 + (mn//(T*S/16))*LBO
  + (k%8)*S + (k//8)*SBO
then the swizzle XORs address bits [4, 4+b) with bits [7, 7+b) (b = log2(S/16)).

Arithmetic (the tensor-core dot product, fitted to and checked against an H200 with
benchmarks/h200_compare.py: every float probe and zoo GEMM bitwise identical): each instruction
forms its K products exactly, finds the largest exponent among them (a product's exponent is the
sum of its factors' exponents) and the accumulator's, truncates every term to a multiple of
2^(emax - 25) (2^(emax - 13) for fp8 inputs), adds them exactly, and truncates the sum to 23
mantissa bits (13 for fp8: Hopper's fp8 accumulation is narrower) -- round toward zero. tf32
inputs are the f32 values truncated to 10 mantissa bits. Special values (Inf/NaN inputs,
overflow) follow float64 arithmetic through the same steps and were not checked on hardware;
f16 accumulators are rounded to nearest from that result (not checked on hardware).
"""

from __future__ import annotations

import numpy as np

from tirxh.api import ir

from . import events as ev
from .machine import SPLIT, WARP
from .sem_async import _swizzle
from .sem_sync import aligned_event
from .semtable import rejected, semantic
from .values import BF16, E4M3, E5M2, Unsupported, dtype as T, storage, uint_of

_ELEM = {"f16": np.dtype(np.float16), "bf16": BF16, "tf32": np.dtype(np.float32),
         "e4m3": E4M3, "e5m2": E5M2, "s8": np.dtype(np.int8), "u8": np.dtype(np.uint8)}


def _lane_gt():
    lane = np.arange(WARP)
    return lane // 4, lane % 4


# --- ldmatrix / stmatrix / movmatrix --------------------------------------------------------------

def _frag_words(mats: np.ndarray) -> np.ndarray:
    """(..., 8, 8) b16 matrices -> (..., 32) b32 fragments, the layout of ldmatrix, stmatrix and
    movmatrix: lane l holds row l // 4, columns 2(l % 4) (low half) and 2(l % 4) + 1 (high)."""
    g, t = _lane_gt()
    return mats[..., g, 2 * t].astype(np.uint32) | (mats[..., g, 2 * t + 1].astype(np.uint32) << 16)


def _frag_matrix(words: np.ndarray) -> np.ndarray:
    """The inverse of `_frag_words`: (..., 32) b32 fragments -> (..., 8, 8) uint16 matrices."""
    g, t = _lane_gt()
    words = words.astype(np.uint32)
    mats = np.zeros(words.shape[:-1] + (8, 8), np.uint16)
    mats[..., g, 2 * t] = (words & 0xFFFF).astype(np.uint16)
    mats[..., g, 2 * t + 1] = (words >> 16).astype(np.uint16)
    return mats


def _warp_words(w, reg) -> np.ndarray:
    """(nwarps, 32) b32 values of `reg` in every lane, executing or not: a warp-collective
    instruction reads its operand from all 32 lanes."""
    return np.broadcast_to(w.read(reg, T("b32")), (w.L,)).reshape(w.nwarps, WARP)


def _full_warp(w, instr, mask) -> None:
    """A ``numsim.partial-warp`` error unless every warp executing `instr` does so with all 32
    lanes: ``.aligned`` register collectives (mma.sync, movmatrix) take operands from every lane,
    so a missing lane hands the others a stale register (PTX ISA: behaviour undefined)."""
    act = mask.reshape(w.nwarps, WARP)
    if not act[act.any(axis=1)].all():
        w.m.finding("numsim.partial-warp", f"{instr.binding.name} executed by a partial warp "
                    "(.aligned needs all 32 lanes)", instr, w=w)


def _mat_rows(w, instr, mask, addr_op, num):
    """Row addresses: lanes 8i..8i+7 give the rows of matrix i (shape (nwarps, num, 8)); each
    row is 16 bytes and must be 16-byte aligned (PTX ISA, ldmatrix)."""
    addrs = w.address(addr_op)
    rows = np.zeros(w.L, bool)
    rows.reshape(w.nwarps, WARP)[:, : 8 * num] = mask.reshape(w.nwarps, WARP).any(axis=1)[:, None]
    w.m.check_aligned(w, instr, addrs, rows, 16, f"{instr.opcode} row address (16 bytes)")
    return addrs.reshape(w.nwarps, WARP)[:, : 8 * num].reshape(w.nwarps, num, 8)


@semantic("ldmatrix")
def _ldmatrix(w, instr, mask):
    """Warp-collective load of 8x8 b16 matrices (optionally transposed) into fragments."""
    aligned_event(w, instr, mask)
    num = int(instr.modifiers["num"][1:])
    trans = bool(instr.modifiers.get("trans"))
    ops = instr.operands
    rows = _mat_rows(w, instr, mask, ops[1], num)
    active = mask.reshape(w.nwarps, WARP).any(axis=1)
    # read every row (8 x b16) through the ordinary shared path: one load per 2-byte column
    mats = np.zeros((w.nwarps, num, 8, 8), np.uint16)
    src_mask = np.zeros((w.nwarps, WARP), bool)
    src_mask[:, : 8 * num] = active[:, None]
    base = np.zeros((w.nwarps, WARP), np.uint64)
    base[:, : 8 * num] = rows.reshape(w.nwarps, -1)
    ss = instr.modifiers.get("ss") or "shared"
    for c in range(8):
        words = w.m.load(w, instr, ss, base.reshape(-1) + np.uint64(2 * c), src_mask.reshape(-1),
                         2).reshape(w.nwarps, WARP)
        mats[:, :, :, c] = words[:, : 8 * num].reshape(w.nwarps, num, 8)
    if trans:
        mats = mats.transpose(0, 1, 3, 2)
    for i, d in enumerate(ops[0]):
        w.write(d, _frag_words(mats[:, i]).reshape(-1), mask)


@semantic("stmatrix")
def _stmatrix(w, instr, mask):
    """Warp-collective store of 8x8 b16 matrices (optionally transposed) from fragments."""
    aligned_event(w, instr, mask)
    num = int(instr.modifiers["num"][1:])
    trans = bool(instr.modifiers.get("trans"))
    ops = instr.operands
    rows = _mat_rows(w, instr, mask, ops[0], num)
    active = mask.reshape(w.nwarps, WARP).any(axis=1)
    mats = np.zeros((w.nwarps, num, 8, 8), np.uint16)
    for i, r in enumerate(ops[1]):
        mats[:, i] = _frag_matrix(_warp_words(w, r))
    if trans:
        mats = mats.transpose(0, 1, 3, 2)
    src_mask = np.zeros((w.nwarps, WARP), bool)
    src_mask[:, : 8 * num] = active[:, None]
    base = np.zeros((w.nwarps, WARP), np.uint64)
    base[:, : 8 * num] = rows.reshape(w.nwarps, -1)
    ss = instr.modifiers.get("ss") or "shared"
    for c in range(8):
        words = np.zeros((w.nwarps, WARP), np.uint16)
        words[:, : 8 * num] = mats[:, :, :, c].reshape(w.nwarps, -1)
        w.m.store(w, instr, ss, base.reshape(-1) + np.uint64(2 * c), src_mask.reshape(-1), 2,
                  words.reshape(-1))


@semantic("movmatrix")
def _movmatrix(w, instr, mask):
    """Warp-collective transpose of an 8x8 b16 matrix in registers, in the ldmatrix fragment
    layout before and after (lane l: row l // 4, columns 2(l % 4) and 2(l % 4) + 1). A partial
    warp is a ``numsim.partial-warp`` error, as for mma.sync."""
    _full_warp(w, instr, mask)
    aligned_event(w, instr, mask)
    d, a = instr.operands[:2]
    mats = _frag_matrix(_warp_words(w, a))
    w.write(d, _frag_words(mats.transpose(0, 2, 1)).reshape(-1), mask)


# --- fragments -----------------------------------------------------------------------------------

def _unpack(words: np.ndarray, el: np.dtype) -> np.ndarray:
    """(..., ) uint32 -> (..., 4 // esize) elements, least significant first."""
    e = 4 // el.itemsize
    b = np.ascontiguousarray(words.astype(np.uint32)).view(np.uint8).reshape(words.shape + (4,))
    return b.reshape(words.shape + (e, el.itemsize)).copy().view(el).reshape(words.shape + (e,))


def _as_f64(x: np.ndarray, atype: str) -> np.ndarray:
    if atype == "tf32":
        u = np.ascontiguousarray(x).view(np.uint32) & np.uint32(0xFFFFE000)
        return u.view(np.float32).astype(np.float64)
    return x.astype(np.float64)


def _a_fragment(w, regs, atype: str, K: int) -> np.ndarray:
    """(nwarps, 16, K) float64/int64 from the A registers (4 or 2 b32 per lane)."""
    el = _ELEM[atype]
    e = 4 // el.itemsize
    g, t = _lane_gt()
    A = np.zeros((w.nwarps, 16, K), np.float64)
    for i, r in enumerate(regs):
        v = _warp_words(w, r)
        vals = _as_f64(_unpack(v, el), atype)  # (nw, 32, e)
        row = g + 8 * (i % 2)
        col0 = e * t + (K // 2) * (i // 2)
        for j in range(e):
            A[:, row, col0 + j] = vals[:, :, j]
    return A


def _b_fragment(w, regs, atype: str, K: int) -> np.ndarray:
    """(nwarps, K, 8) from the B registers."""
    el = _ELEM[atype]
    e = 4 // el.itemsize
    g, t = _lane_gt()
    B = np.zeros((w.nwarps, K, 8), np.float64)
    for i, r in enumerate(regs):
        v = _warp_words(w, r)
        vals = _as_f64(_unpack(v, el), atype)
        for j in range(e):
            B[:, e * t + (K // 2) * i + j, g] = vals[:, :, j]
    return B


_TC_BITS = {"fp8": (13, 13), "other": (25, 23)}


def _exponent(x: np.ndarray) -> np.ndarray:
    """floor(log2 |x|) for nonzero x (frexp's exponent minus one)."""
    return np.frexp(x)[1].astype(np.int64) - 1


def _trunc(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    return np.trunc(x / q) * q


def tc_dot(A: np.ndarray, Bt: np.ndarray, C: np.ndarray, atype: str,
           b_of: "np.ndarray | None" = None) -> np.ndarray:
    """One tensor-core instruction: D = A @ Bt.T + C with the hardware's alignment and
    truncation (see the module docstring). A: (W, M, K), Bt: (N, K), or (W, N, K); C: (W, M, N).
    With `b_of` (W,), Bt is (U, N, K) and warp w multiplies by Bt[b_of[w]]. Integer types are
    exact.

    Finite float inputs whose products and scaled terms stay in float32's normal range take
    `_tc_dot_f32` (the same arithmetic, K step by K step over float32 slabs: several times
    faster); anything else (Inf/NaN, subnormal or extreme exponents) takes the float64
    `tc_dot_reference`."""
    if b_of is None:
        Bu = Bt if Bt.ndim == 3 else Bt[None]
        b_of = np.zeros(A.shape[0], np.int64) if Bu.shape[0] == 1 else np.arange(A.shape[0])
    else:
        Bu = Bt
    if atype in ("s8", "u8"):
        return np.einsum("wmk,wnk->wmn", A, Bu[b_of]) + C
    fast = _tc_dot_f32(A, Bu, b_of, C, atype)
    return fast if fast is not None else tc_dot_reference(A, Bu[b_of], C, atype)


_ZERO_EXP = -(1 << 12)  # the exponent of 0: below any real one, and sums of two fit in int16


def _f32_exponents(x: np.ndarray) -> "np.ndarray | None":
    """floor(log2 |x|) (int16; `_ZERO_EXP` for zeros) of float32-representable values, or None
    when one is not a normal float32 number (Inf, NaN, subnormal)."""
    f = x.astype(np.float32)
    field = (f.view(np.uint32) >> np.uint32(23)) & np.uint32(0xFF)
    zero = f == 0
    if (field == 0xFF).any() or ((field == 0) & ~zero).any():
        return None
    return np.where(zero, np.int16(_ZERO_EXP), field.astype(np.int16) - np.int16(127))


def _pow2_f32(e: np.ndarray) -> np.ndarray:
    """2.0**e as float32, for integer e in float32's normal range (built from the bits)."""
    return ((e.astype(np.int32) + 127) << 23).astype(np.uint32).view(np.float32)


def _tc_dot_f32(A, Bu, b_of, C, atype):
    """`tc_dot` for normal float inputs in range, or None. Per output element: emax = the
    largest product exponent (sum of the factors' exponents) or C's; every product p is scaled
    by 2^(in_bits - emax) (exact: a power of two; the float32 product is exact because the
    inputs have at most 11 significand bits) and truncated to an integer below 2^(in_bits + 2);
    the integers are summed exactly (int32 in chunks that cannot overflow, then int64) with C's
    truncated term, the sum truncated to out_bits + 1 significant bits and scaled back (a
    zero sum is +0, as in `tc_dot_reference`). Warps sharing a B matrix are
    grouped so that B broadcasts over them; one K step at a time over slabs that stay in
    cache."""
    in_bits, out_bits = _TC_BITS["fp8" if atype in ("e4m3", "e5m2") else "other"]
    W, M, K = A.shape
    U, N, _ = Bu.shape
    ea, eb, ec = _f32_exponents(A), _f32_exponents(Bu), _f32_exponents(C)
    if ea is None or eb is None or ec is None:
        return None
    nz_a, nz_b = ea[ea > _ZERO_EXP], eb[eb > _ZERO_EXP]
    if nz_a.size and nz_b.size and (int(nz_a.max()) + int(nz_b.max()) > 125 or
                                    int(nz_a.min()) + int(nz_b.min()) < -110):
        return None  # a product would leave float32's normal range
    # warps in runs that share a B: (U, Wu) blocks broadcast B; otherwise one B per warp
    Wu = W // U if W % U == 0 else 0
    grouped = Wu > 0 and np.array_equal(b_of, np.repeat(np.arange(U), Wu))
    Bw, ebw = (Bu, eb) if grouped else (Bu[b_of], eb[b_of])
    Ug, Wu = (U, Wu) if grouped else (W, 1)
    a32 = np.ascontiguousarray(A.astype(np.float32).reshape(Ug, Wu, M, K).transpose(3, 0, 1, 2))
    b32 = np.ascontiguousarray(Bw.astype(np.float32).transpose(2, 0, 1))[:, :, None, None, :]
    ea16 = np.ascontiguousarray(ea.reshape(Ug, Wu, M, K).transpose(3, 0, 1, 2))[..., None]
    eb16 = np.ascontiguousarray(ebw.transpose(2, 0, 1))[:, :, None, None, :]
    shape = (Ug, Wu, M, N)
    pe = np.full(shape, 2 * _ZERO_EXP, np.int16)
    tmp = np.empty(shape, np.int16)
    for k in range(K):
        np.add(ea16[k], eb16[k], out=tmp)
        np.maximum(pe, tmp, out=pe)
    emax = np.maximum(pe.reshape(W, M, N), ec)
    live = emax > _ZERO_EXP
    if live.any():
        lo, hi = int(emax[live].min()), int(emax[live].max())
        if lo < -100 or hi > 100:
            return None  # the scale factors would leave float32's normal range
    emax = np.where(live, emax, np.int16(0)).astype(np.int32)
    scale = _pow2_f32(in_bits - emax).reshape(shape)
    t = np.empty(shape, np.float32)
    ti = np.empty(shape, np.int32)
    chunk = (2 ** 31 - 1) // (2 ** (in_bits + 2) - 1)  # |terms| < 2^(in_bits + 2)
    total = np.zeros(shape, np.int64)
    for k0 in range(0, K, chunk):
        acc = np.zeros(shape, np.int32)
        for k in range(k0, min(K, k0 + chunk)):
            np.multiply(a32[k][..., None], b32[k], out=t)  # exact
            t *= scale  # exact: a power of two; the result is normal or truncates to 0
            np.copyto(ti, t, casting="unsafe")  # truncation toward zero
            acc += ti
        total += acc
    np.multiply(C.astype(np.float32).reshape(shape), scale, out=t)
    np.copyto(ti, t, casting="unsafe")
    total += ti
    # |S| < 2^36 is exact in float64; clearing the low mantissa bits truncates it to
    # out_bits + 1 significant bits (toward zero: the sign is apart); dividing by the scale
    # (a power of two) is exact
    s = total.reshape(W, M, N).astype(np.float64)
    s.view(np.uint64)[...] &= np.uint64(~((1 << (52 - out_bits)) - 1) & (2 ** 64 - 1))
    s /= scale.reshape(W, M, N)
    return s


def tc_dot_reference(A: np.ndarray, Bt: np.ndarray, C: np.ndarray, atype: str) -> np.ndarray:
    """`tc_dot` in float64 throughout (every product at once), for any input (special values
    follow float64 arithmetic through the same steps)."""
    in_bits, out_bits = _TC_BITS["fp8" if atype in ("e4m3", "e5m2") else "other"]
    Bk = Bt if Bt.ndim == 3 else Bt[None]
    a = A[:, :, None, :]
    b = Bk[:, None, :, :]
    prods = a * b  # exact in float64 for every supported input type
    with np.errstate(invalid="ignore", over="ignore"):
        ea = np.where(A != 0, _exponent(A), -(1 << 20))[:, :, None, :]
        eb = np.where(Bk != 0, _exponent(Bk), -(1 << 20))[:, None, :, :]
        pe = np.where(prods != 0, ea + eb, -(1 << 20)).max(axis=3)
        ce = np.where(C != 0, _exponent(C), -(1 << 20))
        emax = np.maximum(pe, ce)
        q = np.ldexp(1.0, np.clip(emax - in_bits, -1074, 1023))
        s = _trunc(prods, q[..., None]).sum(axis=3) + _trunc(C, q)
        e = np.where(s != 0, _exponent(s), 0)
        qo = np.ldexp(1.0, np.clip(e - out_bits, -1074, 1023))
        return np.where(np.isfinite(s), _trunc(s, qo), s)


def _acc_read(w, regs, dtype: str, rows_of, cols_of, shape) -> np.ndarray:
    """Read accumulator registers into (nwarps,) + shape float64 (f16x2 registers: 2 each)."""
    out = np.zeros((w.nwarps,) + shape, np.float64)
    for i, r in enumerate(regs):
        if dtype == "f16":
            v = _warp_words(w, r)
            pair = _unpack(v, np.dtype(np.float16)).astype(np.float64)
            for j in range(2):
                out[:, rows_of(i, j), cols_of(i, j)] = pair[:, :, j]
        else:
            v = np.broadcast_to(w.read(r, T(dtype)), (w.L,)).reshape(w.nwarps, WARP)
            out[:, rows_of(i, 0), cols_of(i, 0)] = v
    return out


def _acc_values(D: np.ndarray, regs, dtype: str, rows_of, cols_of, satfinite=False) -> list:
    """Per register, the lane values (flattened over warps) of result matrix D."""
    vals = []
    for i, _ in enumerate(regs):
        if dtype == "f16":
            lo = D[:, rows_of(i, 0), cols_of(i, 0)].astype(np.float16)
            hi = D[:, rows_of(i, 1), cols_of(i, 1)].astype(np.float16)
            v = lo.view(np.uint16).astype(np.uint32) | (hi.view(np.uint16).astype(np.uint32)
                                                        << 16)
            vals.append(v.reshape(-1))
        elif dtype == "s32":
            x = D[:, rows_of(i, 0), cols_of(i, 0)]
            if satfinite:
                x = np.clip(x, -2 ** 31, 2 ** 31 - 1)
            vals.append((x.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
                        .reshape(-1))
        else:
            vals.append(D[:, rows_of(i, 0), cols_of(i, 0)].astype(np.float32).reshape(-1))
    return vals


# --- mma.sync -------------------------------------------------------------------------------------

@semantic("mma.sync", note="m16n8k{4,8,16,32} for f16/bf16/tf32/s8/u8 with the tensor-core "
                           "dot-product rounding (exponent alignment, truncation): bitwise equal "
                           "to an H200 for every probed shape and type.")
def _mma_sync(w, instr, mask):
    mods = instr.modifiers
    shape = mods["shape"]
    K = int(shape.split("k")[1])
    atype, btype, dtype = mods["atype"], mods["btype"], mods["dtype"]
    d, a, b, c = (list(x) for x in instr.operands[:4])
    _full_warp(w, instr, mask)
    aligned_event(w, instr, mask)
    A = _a_fragment(w, a, atype, K)
    B = _b_fragment(w, b, btype, K)
    g, t = _lane_gt()
    if dtype == "f16":
        def rows(i, j): return g + 8 * i

        def cols(i, j): return 2 * t + j
    else:
        def rows(i, j): return g + 8 * (i // 2)

        def cols(i, j): return 2 * t + i % 2
    C = _acc_read(w, c, mods["ctype"], rows, cols, (16, 8))
    D = tc_dot(A, B.transpose(0, 2, 1), C, atype)
    for reg, v in zip(d, _acc_values(D, d, dtype, rows, cols, bool(mods.get("satfinite")))):
        w.write(reg, v, mask)


# --- wgmma ----------------------------------------------------------------------------------------

_SPAN = {0: 0, 1: 128, 2: 64, 3: 32}
_DESC_CACHE: dict = {}


def decode_desc(desc: int) -> dict:
    """The fields of a wgmma shared-memory matrix descriptor."""
    return {"start": (desc & 0x3FFF) << 4, "lbo": ((desc >> 16) & 0x3FFF) << 4,
            "sbo": ((desc >> 32) & 0x3FFF) << 4, "base_offset": (desc >> 49) & 7,
            "swizzle": _SPAN[(desc >> 62) & 3]}


def desc_addresses(desc: int, rows: int, K: int, esize: int, mn_major: bool) -> np.ndarray:
    """Byte addresses (rows x K) of the matrix a descriptor describes (swizzle applied)."""
    key = (desc, rows, K, esize, mn_major)
    hit = _DESC_CACHE.get(key)
    if hit is not None:
        return hit
    f = decode_desc(desc)
    if f["base_offset"]:
        raise Unsupported("wgmma descriptor with a non-zero base offset")
    S, start, lbo, sbo = f["swizzle"], f["start"], f["lbo"], f["sbo"]
    Tn = 16 // esize
    mn = np.arange(rows)[:, None]
    k = np.arange(K)[None, :]
    if not mn_major:
        if S == 0:
            a = start + (mn // 8) * sbo + (mn % 8) * 16 + (k // Tn) * lbo + (k % Tn) * esize
        else:
            if K * esize > S:
                raise Unsupported(f"wgmma K-major operand of {K * esize} bytes per row wider "
                                  f"than the {S}B swizzle span")
            a = start + (mn // 8) * sbo + (mn % 8) * S + k * esize
    else:
        if S == 0:
            a = start + (mn % Tn) * esize + (mn // Tn) * sbo + (k % 8) * 16 + (k // 8) * lbo
        else:
            c = S // 16
            a = (start + (mn % Tn) * esize + ((mn // Tn) % c) * 16 + (mn // (Tn * c)) * lbo
                 + (k % 8) * S + (k // 8) * sbo)
    a = _swizzle(a.astype(np.int64), S)
    if len(_DESC_CACHE) > 4096:
        _DESC_CACHE.clear()
    _DESC_CACHE[key] = a
    return a


def _smem_matrix(w, instr, desc: int, rows: int, K: int, atype: str, mn_major: bool,
                 cta: int, row0: int = 0, nrows: "int | None" = None,
                 readers: "np.ndarray | None" = None) -> np.ndarray:
    """The (rows x K) matrix a descriptor describes in CTA `cta`'s shared memory, as float64;
    the trace records the read for the warps in `readers` (bool per warp; None: every warp)."""
    el = _ELEM[atype]
    esize = el.itemsize
    addrs = desc_addresses(desc, rows, K, esize, mn_major)
    if nrows is not None:
        addrs = addrs[row0: row0 + nrows]
    sm = w.group.shared
    if addrs.min() < 0 or addrs.max() + esize > sm.size:
        raise Unsupported(f"wgmma descriptor {hex(desc)} addresses {hex(int(addrs.max()))}, past "
                          f"the {sm.size}-byte shared window")
    idx = addrs[..., None] + np.arange(esize)
    raw = sm.data[cta][idx]
    init = sm.init[cta][idx]
    if not init.all():
        bad = addrs[~init.all(axis=-1)]
        w.m.finding("numsim.uninitialized-shared", f"wgmma reads uninitialized shared memory at "
                    f"{sm.layout.name_of(int(bad.reshape(-1)[0]))} (descriptor {hex(desc)})",
                    instr, severity="review", w=w)
    vals = np.ascontiguousarray(raw).view(el)[..., 0]
    if w.m.trace is not None:
        lanes = np.ones(w.L, bool) if readers is None else np.repeat(readers, WARP)
        w.event(ev.MemAccess, instr, lanes, space="shared", access="read",
                ranges=_merge_ranges(addrs, esize), proxy=ev.ASYNC,
                space_cta=w.group.ctas[cta].linear)
    return _as_f64(vals, atype)


def _merge_ranges(addrs: np.ndarray, esize: int) -> list:
    """Half-open byte ranges ``(-1, start, end)`` covering the `esize`-byte items at `addrs`,
    adjacent items merged."""
    u = np.unique(addrs.reshape(-1))
    if u.size == 0:
        return []
    brk = np.flatnonzero(np.diff(u) != esize) + 1
    first = np.concatenate(([0], brk))
    last = np.concatenate((brk - 1, [u.size - 1]))
    return [(-1, int(u[a]), int(u[b]) + esize) for a, b in zip(first, last)]


_ACC_MAPS: dict = {}


def _acc_maps(dtype: str, nregs: int):
    """(rows, cols) index arrays, shape (nregs, pieces, 32), of wgmma accumulator registers in a
    warp's 16 x N slice (pieces: 2 halves of an f16x2 register, else 1)."""
    key = (dtype, nregs)
    hit = _ACC_MAPS.get(key)
    if hit is None:
        rows_of, cols_of = _wg_rows_cols(dtype, 0)
        pieces = 2 if dtype == "f16" else 1
        r = np.array([[np.broadcast_to(rows_of(i, j), (WARP,)) for j in range(pieces)]
                      for i in range(nregs)])
        c = np.array([[np.broadcast_to(cols_of(i, j), (WARP,)) for j in range(pieces)]
                      for i in range(nregs)])
        hit = _ACC_MAPS[key] = (r, c)
    return hit


def _wg_rows_cols(dtype: str, wi: int):
    g, t = _lane_gt()
    if dtype == "f16":
        def rows(i, j): return g + 8 * (i % 2)

        def cols(i, j): return 8 * (i // 2) + 2 * t + j
    else:
        def rows(i, j): return g + 8 * ((i // 2) % 2)

        def cols(i, j): return 8 * (i // 4) + 2 * t + i % 2
    return rows, cols


def _wg_state(w, active: np.ndarray) -> bool:
    """Whether the warps in `active` may run a wgmma-family instruction together: the group's
    pending wgmma state (open operations, committed groups) belongs to exactly these warps."""
    if w.wgmma_warps is None:
        return True
    return bool(np.array_equal(w.wgmma_warps, active))


def _wg_claim(w, active: np.ndarray) -> None:
    if w.wgmma_warps is None:
        w.wgmma_warps = active.copy()


def _one_warp(w, i: int) -> np.ndarray:
    """Bool per warp: warp `i` of the group only."""
    out = np.zeros(w.nwarps, bool)
    out[i] = True
    return out


def _per_warp_first(w, mask, active):
    """Index of each active warp's first active lane (in group lanes)."""
    act = mask.reshape(w.nwarps, WARP)
    idx = np.flatnonzero(active)
    return idx * WARP + act[idx].argmax(axis=1)


@semantic("wgmma.mma_async.ss", "wgmma.mma_async.rs",
          note="Descriptors with every swizzle, K- and MN-major (imm-trans), register A, "
               "bf16/f16/tf32/e4m3/e5m2/s8/u8; results land at wgmma.wait_group (reading the "
               "accumulators earlier sees the old values). Tensor-core rounding (alignment to "
               "the largest exponent, truncation; 13-bit fp8 accumulation): bitwise equal to "
               "an H200 on every probed layout, dtype and zoo GEMM.")
def _wgmma(w, instr, mask):
    active = w.warps_of(mask)
    if not _wg_state(w, active):
        return SPLIT
    mods = instr.modifiers
    n = int(mods["shape"][4:].split("k")[0])
    K = int(mods["shape"].split("k")[1])
    atype, btype, dtype = mods["atype"], mods["btype"], mods["dtype"]
    ops = instr.operands
    names = [s.name for s in instr.binding.operand_specs(mods)]
    op = dict(zip(names, ops))
    dregs = list(op["d"])
    acc_t = "f16" if dtype == "f16" else dtype
    widx = np.flatnonzero(active)  # the warps that issue, each a 16-row slice of the tile
    W = widx.size
    lead = _per_warp_first(w, mask, active)
    ctas = [w.ctas_local[i] for i in widx]
    wis = [w.warp_ids[i] % 4 for i in widx]
    sd = np.broadcast_to(w.read(op["scale_d"], T("pred")), (w.L,))[lead]
    rmap, cmap = _acc_maps(acc_t, len(dregs))
    C = np.zeros((W, 16, n), np.float64)
    chain = (tuple(r.id for r in dregs), widx.tobytes(), acc_t)
    last = w.wgmma_last
    if acc_t == "f32" and sd.all() and last is not None and last[0] == chain and \
            all(w.wgmma_shadow.get(r.id) is v for r, v in zip(dregs, last[2])):
        # accumulating on the previous wgmma's pending result: its matrix, as the f32
        # registers will hold it
        C = last[1].astype(np.float32).astype(np.float64)
    elif sd.any():
        # the current accumulator value: the newest pending wgmma result, else the register
        shadow = w.wgmma_shadow
        rt = T("b32" if acc_t == "f16" else acc_t)
        V = np.stack([np.asarray(shadow[r.id] if r.id in shadow else
                                 np.broadcast_to(w.read(r, rt), (w.L,))).reshape(
                                     w.nwarps, WARP)[widx] for r in dregs], axis=1)  # (W, R, 32)
        if acc_t == "f16":
            pair = _unpack(V.view(np.uint32), np.dtype(np.float16)).astype(np.float64)
            for j in range(2):
                C[:, rmap[:, j], cmap[:, j]] = pair[..., j]
        else:
            C[:, rmap[:, 0], cmap[:, 0]] = V
        C[~sd] = 0.0
    trans_a = int(op["imm_trans_a"].value) if "imm_trans_a" in op else 0
    trans_b = int(op["imm_trans_b"].value) if "imm_trans_b" in op else 0
    if "a_desc" in op:
        descs = np.broadcast_to(w.read(op["a_desc"], T("b64")), (w.L,))[lead]
        mats: dict = {}
        A = np.empty((W, 16, K), np.float64)
        for j in range(W):
            if w.m.trace is not None:  # the trace records each warp's own 16 rows
                A[j] = _smem_matrix(w, instr, int(descs[j]), 64, K, atype, bool(trans_a),
                                    ctas[j], 16 * wis[j], 16, readers=_one_warp(w, widx[j]))
                continue
            key = (ctas[j], int(descs[j]))
            if key not in mats:
                mats[key] = _smem_matrix(w, instr, key[1], 64, K, atype, bool(trans_a),
                                         ctas[j])
            A[j] = mats[key][16 * wis[j]: 16 * wis[j] + 16]
    else:
        A = _a_fragment(w, list(op["a"]), atype, K)[widx]
    descs = np.broadcast_to(w.read(op["b_desc"], T("b64")), (w.L,))[lead]
    mats = {}
    pick = np.empty(W, np.int64)
    for j in range(W):
        key = (ctas[j], int(descs[j]))
        if key not in mats:
            # each issuing warp reads B (the trace records it for every warp using it)
            readers = np.zeros(w.nwarps, bool)
            readers[[widx[i] for i in range(W) if (ctas[i], int(descs[i])) == key]] = True
            mats[key] = (len(mats), _smem_matrix(w, instr, key[1], n, K, btype, bool(trans_b),
                                                 ctas[j], readers=readers))
        pick[j] = mats[key][0]
    Bs = np.stack([m for _, m in mats.values()])  # (unique, N, K)
    if "imm_scale_a" in op and int(op["imm_scale_a"].value) == -1:
        A = -A
    if "imm_scale_b" in op and int(op["imm_scale_b"].value) == -1:
        Bs = -Bs
    D = tc_dot(A, Bs, C, atype, pick)
    lanes = np.zeros((w.nwarps, WARP), bool)
    lanes[widx] = True
    lanes = lanes.reshape(-1)
    if acc_t == "f16":
        lo = D[:, rmap[:, 0], cmap[:, 0]].astype(np.float16).view(np.uint16)
        hi = D[:, rmap[:, 1], cmap[:, 1]].astype(np.float16).view(np.uint16)
        vals = lo.astype(np.uint32) | (hi.astype(np.uint32) << 16)
    elif acc_t == "s32":
        x = D[:, rmap[:, 0], cmap[:, 0]]
        if mods.get("satfinite"):
            x = np.clip(x, -2 ** 31, 2 ** 31 - 1)
        vals = (x.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    else:
        vals = D[:, rmap[:, 0], cmap[:, 0]].astype(np.float32)  # (W, R, 32)
    st = storage(dregs[0].dtype)
    full = np.zeros((len(dregs), w.nwarps, WARP), st)
    full[:, widx] = (vals.view(st) if vals.dtype.itemsize == st.itemsize else vals) \
        .transpose(1, 0, 2)
    shadow = w.wgmma_shadow  # (warps not issuing have no pending wgmma state: _wg_state)
    full = full.reshape(len(dregs), w.L)
    result = []
    for i, r in enumerate(dregs):
        shadow[r.id] = full[i]
        result.append((r, full[i], lanes))
    w.wgmma_last = (chain, D, [full[i] for i in range(len(dregs))])
    _wg_claim(w, active)
    w.wgmma_open.append(result)
    for one in w.each_warp(mask):  # each warp issues its part (its own op id in the trace)
        w.m.async_ids += 1
        w.event(ev.AsyncOp, instr, one, engine="wgmma", stage="issue", op_id=w.m.async_ids,
                group=len(w.wgmma_groups), direction="mma",
                accumulators=tuple(f"%r{r.id}" for r in dregs))


@semantic("wgmma.fence", fidelity="ordering_only",
          note="Orders register/shared accesses before wgmma; recorded for sync_check.")
def _wgmma_fence(w, instr, mask):
    w.event(ev.FenceEvent, instr, mask, fence="wgmma.fence", spelling=instr.spelling)


@semantic("wgmma.commit_group")
def _wgmma_commit(w, instr, mask):
    """Close the open wgmma operations into a group."""
    active = w.warps_of(mask)
    if not _wg_state(w, active):
        return SPLIT
    _wg_claim(w, active)
    w.wgmma_groups.append(w.wgmma_open)
    w.wgmma_open = []
    w.event(ev.AsyncOp, instr, mask, engine="wgmma", stage="commit",
            group=len(w.wgmma_groups) - 1, direction="mma")


@semantic("wgmma.wait_group")
def _wgmma_wait(w, instr, mask):
    """Retire committed groups until at most n are pending: their results land in the
    accumulator registers now."""
    n = int(instr.operands[0].value)
    active = w.warps_of(mask)
    if not _wg_state(w, active):
        return SPLIT
    while len(w.wgmma_groups) > n:
        grp = w.wgmma_groups.pop(0)
        for ops in grp:
            for r, v, lanes in ops:
                w.set_reg(r, v, lanes)
                if w.wgmma_shadow.get(r.id) is v:
                    del w.wgmma_shadow[r.id]
        w.event(ev.AsyncOp, instr, mask, engine="wgmma", stage="complete", direction="mma")
    if not w.wgmma_groups and not w.wgmma_open:
        w.wgmma_warps = None
        w.wgmma_shadow.clear()
    w.event(ev.AsyncOp, instr, mask, engine="wgmma", stage="wait", group=n,
            pending=len(w.wgmma_groups), direction="mma")


__all__ = ["decode_desc", "desc_addresses", "uint_of", "ir"]


# --- Blackwell tensor memory (sm_100a) -----------------------------------------------------------

_TCGEN05 = ("tcgen05 (Blackwell tensor memory and the 5th-generation tensor core) is not modeled "
            "by numsim yet")
for _name in ("tcgen05.alloc", "tcgen05.dealloc", "tcgen05.relinquish_alloc_permit",
              "tcgen05.mma", "tcgen05.mma.ts", "tcgen05.commit", "tcgen05.fence", "tcgen05.ld",
              "tcgen05.st", "tcgen05.wait", "tcgen05.cp", "tcgen05.shift"):
    rejected(_name, _TCGEN05)
