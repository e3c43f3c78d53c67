"""The host side of the Hopper GEMMs (zoo/kernels/gemm_sm90.py, issue 15): inputs (scaled so
that C ~ N(0, 1) at every K), the split-K / stream-K workspace, tensor maps, numpy references
and tolerances, and the shape rules TMA imposes. Large inputs and references are cached per
shape and seed (`tirxh bench` builds a shape's variants back to back). BM (the tile height)
and CM (CTAs per cluster) come from the kernel module."""

from __future__ import annotations

import numpy as np

import tirxh.lang as T
from hopper import CHUNK
from hostcache import Cache, rng_key
from tirxh.api import numpy_dtype

_LARGE = 1 << 27        # M * N * K above which inputs and references are kept for reuse
# two correctness seeds x two shapes: `tirxh bench` runs a shape's variants back to back, and every
# one regenerates the same inputs (the host computes a 8192^3 reference once, not per variant)
_CACHE = Cache(4)


def check_shape(kernel: str, M, N, K, kmajor: bool, epi: str, esize: int,
                 splitk: int = 1) -> None:
    """What TMA cannot describe, refused with the rule (global strides are multiples of 16),
    and split-K with an empty split."""
    problems = []
    if min(M, N, K) < 1:
        problems.append(f"M, N, K must be positive (got {M}, {N}, {K})")
    elif splitk > -(-K * esize // 128):
        problems.append(f"SPLITK = {splitk} needs at least {splitk} K slices of "
                        f"{128 // esize} (K = {K})")
    if (K * esize) % 16:
        problems.append(f"K = {K}: rows of A (and of a K-major B) are {K * esize} bytes, not a "
                        f"multiple of 16 (K % {16 // esize} != 0)")
    if not kmajor and N % 8:
        problems.append(f"N = {N}: rows of an N-major B are {2 * N} bytes, not a multiple of 16")
    if epi == "tma" and N % 8:
        problems.append(f"N = {N}: rows of C are {2 * N} bytes, not a multiple of 16; use "
                        f"EPI='direct'")
    if problems:
        raise ValueError(f"{kernel}: " + "; ".join(problems))


def splitk_buffers(M, N, BM: int, BN: int, CM: int, S: int, reduce: str = "slots",
                   streamk=False, workers: int | None = None) -> dict:
    """Split-K / stream-K workspace (REDUCE "slots" and "peers": one f32 tile per split,
    [tile][split][warpgroup]...; "red": one f32 tile per tile) and one counter per tile and
    warpgroup, zero at launch; the kernel leaves them zero again. Without either, or with
    "pair" (the sum goes through shared memory), neither is touched (one element each). STREAMK="tail" cuts only the tiles of the last partial wave,
    fewer than `workers` (the persistent grid's CTAs or clusters) units: that many slots
    (every tile's where `workers` is None)."""
    if reduce not in ("slots", "peers", "red", "pair"):
        raise ValueError(f"REDUCE = {reduce!r}: expected 'slots', 'peers', 'red' or 'pair'")
    if streamk and (reduce != "red" or S > 1):
        raise ValueError(f"STREAMK needs REDUCE = 'red' and SPLITK = 1 (got REDUCE = "
                         f"{reduce!r}, SPLITK = {S})")
    if (S == 1 and not streamk) or reduce == "pair":   # "pair" sums in shared memory
        return {"ws": np.zeros(1, np.float32), "cnt": np.zeros(1, np.uint32)}
    units = -(-(-(-M // BM)) // CM) * -(-N // BN)
    if streamk in ("tail", "lock") and workers is not None:   # "lock": the same T < workers
        units = min(units, workers)
    tiles = units * CM
    per_tile = (1 if reduce == "red" else S) * BM * BN
    return {"ws": np.zeros(tiles * per_tile, np.float32), "cnt": np.zeros(2 * tiles, np.uint32)}


def c_map(epi: str):
    """The tensor map of C for TMA stores (64 x 64 boxes, 128B swizzle). The direct epilogue
    never reads its map: with N % 8 != 0 no map over C exists, so it gets a valid one over A."""
    return T.TensorMap("c" if epi == "tma" else "a", box=(64, 64), swizzle=128)


def bf16_inputs(BM: int, CM: int, sms: int | None = None):
    """`sms`: the kernel's default persistent grid (its SMS constant), which sizes a
    STREAMK="tail" workspace; None sizes it for every tile."""
    bf16 = numpy_dtype("bf16")

    def inputs(rng, M, N, K, BN=256, B_KMAJOR=True, EPI="tma", SPLITK=1, REDUCE="slots",
               STREAMK=False, SMS=sms, BM=BM, PAIR_N=False):
        check_shape("gemm_bf16", M, N, K, B_KMAJOR, EPI, 2, SPLITK)

        def make():  # N(0, 1) / K^(1/4): unit-variance outputs at every K
            s = np.float32(K ** -0.25)
            a = rng.standard_normal((M, K), dtype=np.float32) * s
            b = rng.standard_normal((N, K) if B_KMAJOR else (K, N), dtype=np.float32) * s
            return {"a": a.astype(bf16), "b": b.astype(bf16)}
        key = rng_key(rng, "bf16", M, N, K, B_KMAJOR)
        ab = _CACHE.arrays(key, make) if M * N * K > _LARGE else make()
        # a cluster splits the slice it shares: B's rows (along M), or A's (PAIR_N: along N)
        bbox = (BN // (1 if PAIR_N else CM), 64) if B_KMAJOR else (64, CHUNK)
        abox = (BM // CM if PAIR_N else BM, 64)
        return dict(ab, c=np.empty((M, N), bf16), M=M, N=N, K=K,
                    **splitk_buffers(M, N, BM, BN, CM, SPLITK, REDUCE, STREAMK,
                                     None if SMS is None else SMS // CM),
                    a_map=T.TensorMap("a", box=abox, swizzle=128, l2_promotion=256),
                    b_map=T.TensorMap("b", box=bbox, swizzle=128, l2_promotion=256),
                    c_map=c_map(EPI))
    return inputs


def bf16_reference(a, b, B_KMAJOR=True):
    """C = bf16(A @ B) with f32 products and sums (numpy), rounded to nearest even."""
    def compute():
        bf = b.astype(np.float32)
        return (a.astype(np.float32) @ (bf.T if B_KMAJOR else bf)).astype(numpy_dtype("bf16"))
    return {"c": _CACHE.reference({"a": a, "b": b}, "c", compute)}


BF16_TOLERANCE = T.tolerance(rtol=2.0 ** -7, atol=1e-3, rms=2e-3)


def fp8_inputs(BM: int, CM: int, sms: int | None = None):
    """`sms`: as bf16_inputs'."""
    e4m3, bf16 = numpy_dtype("e4m3"), numpy_dtype("bf16")

    def inputs(rng, M, N, K, BN=256, EPI="tma", SPLITK=1, REDUCE="slots", STREAMK=False,
               SMS=sms):
        """Unit-variance outputs: x ~ N(0, 1) / K^(1/4) for both operands, quantized per tensor
        with scale = amax / 448 (e4m3's largest finite value), as fp8 training recipes do."""
        check_shape("gemm_fp8", M, N, K, True, EPI, 1, SPLITK)

        def make():
            out = {}
            for name, rows in (("a", M), ("b", N)):
                x = rng.standard_normal((rows, K), dtype=np.float32) * np.float32(K ** -0.25)
                scale = np.float32(np.abs(x).max() / 448.0)
                out[name] = (x / scale).astype(e4m3)
                out[f"scale_{name}"] = np.array([scale], np.float32)
            return out
        key = rng_key(rng, "e4m3", M, N, K)
        ab = _CACHE.arrays(key, make) if M * N * K > _LARGE else make()
        return dict(ab, c=np.empty((M, N), bf16), M=M, N=N, K=K,
                    **splitk_buffers(M, N, BM, BN, CM, SPLITK, REDUCE, STREAMK,
                                     None if SMS is None else SMS // CM),
                    a_map=T.TensorMap("a", box=(BM, 128), swizzle=128, l2_promotion=256),
                    b_map=T.TensorMap("b", box=(BN // CM, 128), swizzle=128, l2_promotion=256),
                    c_map=c_map(EPI))
    return inputs


def fp8_reference(a, b, scale_a, scale_b):
    """C = bf16(scale_a * scale_b * (A @ B^T)): exact fp8 products, f32 sums (numpy)."""
    def compute():
        acc = a.astype(np.float32) @ b.astype(np.float32).T
        return (acc * (scale_a[0] * scale_b[0])).astype(numpy_dtype("bf16"))
    return {"c": _CACHE.reference({"a": a, "b": b}, "c", compute)}


# fp8 wgmma accumulates with 13 mantissa bits (alignment and truncation per k32 instruction; the
# fp8 row of plugins/numsim/README.md, fitted to the H200), i.e. like cuBLAS's "fast accumulation".
# On unit-variance outputs numsim's model gives a normalized RMS error of 2.2e-3 at K = 4096 and
# 3.7e-3 at K = 14336, single elements off by up to 1.7% of the RMS: hence atol 0.05 (outputs
# ~ N(0, 1)), rtol two bf16 ulps, rms 1e-2.
FP8_TOLERANCE = T.tolerance(rtol=2.0 ** -6, atol=0.05, rms=1e-2)
