"""Elementwise activations on bf16 vectors (f32 math), sm_90a:

- ``swiglu``:    out = silu(a) * b = a * b / (1 + exp(-a))
- ``gelu_tanh``: out = 0.5 x (1 + tanh(k (x + 0.044715 x^3))), k = sqrt(2 / pi),
                 computed as x * sigmoid(2 k (x + 0.044715 x^3)) (the same function: 1 + tanh(u)
                 = 2 sigmoid(2u)), which keeps full f32 accuracy where 1 + tanh(u) cancels.

a, b, x, out: [n] bf16 (any n).

Algorithm: each thread owns UNROLL 16-byte vectors (8 bf16) of its CTA's tile, vector j at
element 8 (j BLOCK + tid), so every warp-wide ``ld.global.v4.b32`` reads 512 contiguous bytes
and a thread has UNROLL (swiglu: 2 UNROLL) independent 16-byte loads in flight before its
first use. A CTA whose whole tile is in range takes the unpredicated path; the one CTA that
holds the end of the array checks each vector (``i + 8 <= n``) and finishes the last n mod 8
elements one at a time (``ld.global.b16`` / ``cvt.f32.bf16``). sigmoid(u) = 1 / (1 + 2^(-u
log2 e)) with ``ex2.approx.ftz.f32`` and ``rcp.approx.ftz.f32`` (relative error ~2^-21: far below
one bf16 rounding); the result is rounded once to bf16 with ``cvt.rn.bf16x2.f32``.

Techniques: vectorized 16-byte coalesced access, several loads in flight per thread, unpredicated
fast path with a per-vector and per-element tail, fast-math exponentials.
Work: ~10 FLOPs and 6 bytes (swiglu) / 4 bytes (gelu) per element: memory bound.

Tags: vectorized, elementwise, tail-handling, fast-math, bf16
"""

import math

import numpy as np

import tirxh.lang as T
from tirxh.core.types import numpy_dtype

TAGS = ("vectorized", "elementwise", "tail-handling", "fast-math", "bf16")

BF16 = numpy_dtype("bf16")
BENCH = dict(small=False, tags=("h200",))  # large cases: timed on the H200, never simulated
LOG2E = math.log2(math.e)
GELU_K = 2 * math.sqrt(2 / math.pi)  # sigmoid's argument is 2 k (x + 0.044715 x^3)


def sigmoid_times(x, u):
    """x * sigmoid(u): ``mul``, ``ex2.approx.ftz``, ``add``, ``rcp.approx.ftz``, ``mul``."""
    e = T.ptx.ex2.approx.ftz.f32(u * -LOG2E)
    return x * T.ptx.rcp.approx.ftz.f32(e + 1.0)


def silu_mul(a, b):
    return sigmoid_times(a * b, a)


def gelu(x):
    x2 = x * x
    return sigmoid_times(x, T.ptx.fma.rn.f32(x2, 0.044715 * GELU_K, GELU_K) * x)


def unpack(word):
    """bf16x2 -> (lo, hi) f32: ``shl.b32`` / ``and.b32`` and ``mov.f32`` to retype."""
    return (T.ptx.mov.f32(T.ptx.shl.b32(word, 16)),
            T.ptx.mov.f32(T.ptx.and_.b32(word, 0xFFFF0000)))


def apply_vector(f, vectors):
    """f over 8 elements given as one 4-word vector per input -> 4 bf16x2 words."""
    out = []
    for k in range(4):
        halves = [unpack(v[k]) for v in vectors]
        lo = f(*[h[0] for h in halves])
        hi = f(*[h[1] for h in halves])
        out.append(T.ptx.cvt.rn.bf16x2.f32(hi, lo))
    return out


def elementwise(f, ins, out, n, BLOCK, UNROLL):
    """The kernel body shared by the activations (see the module docstring)."""
    tile = BLOCK * UNROLL * 8
    base = T.ctaid.x * tile
    first = base + T.tid.x * 8
    addrs = [p.at(first) for p in ins]
    oaddr = out.at(first)
    step = BLOCK * 16  # bytes between a thread's vectors
    with T.if_(base + tile <= n, uniform=True):  # the whole tile is in range
        loaded = [[T.ptx.ld.global_.v4.b32(a + j * step) for a in addrs] for j in range(UNROLL)]
        for j, vecs in enumerate(loaded):
            T.ptx.st.global_.v4.b32(oaddr + j * step, apply_vector(f, vecs))
    with T.else_():  # the CTA holding the end of the array
        for j in range(UNROLL):
            i = first + j * BLOCK * 8
            with T.if_(i + 8 <= n):
                vecs = [T.ptx.ld.global_.v4.b32(a + j * step) for a in addrs]
                T.ptx.st.global_.v4.b32(oaddr + j * step, apply_vector(f, vecs))
            with T.else_():
                with T.range(i, n) as e:  # at most 7 elements
                    vals = [T.ptx.cvt.f32.bf16(T.ptx.ld.global_.b16(p.at(e))) for p in ins]
                    T.ptx.st.global_.b16(out.at(e), T.ptx.cvt.rn.bf16.f32(f(*vals)))


def _grid(n, BLOCK, UNROLL):
    return max(1, T.cdiv(n, BLOCK * UNROLL * 8))


@T.kernel(grid=_grid, block=lambda BLOCK: BLOCK)
def swiglu(a: T.gptr[T.bf16], b: T.gptr[T.bf16], out: T.gptr[T.bf16], n: T.u32,
           BLOCK: T.const = 256, UNROLL: T.const = 2):
    elementwise(silu_mul, [a, b], out, n, BLOCK, UNROLL)


@T.kernel(grid=_grid, block=lambda BLOCK: BLOCK)
def gelu_tanh(x: T.gptr[T.bf16], out: T.gptr[T.bf16], n: T.u32, BLOCK: T.const = 256,
              UNROLL: T.const = 2):
    elementwise(gelu, [x], out, n, BLOCK, UNROLL)


# --- cases, references, rules ------------------------------------------------------------------

def constraints(n, BLOCK, UNROLL):
    out = []
    if not 1 <= n <= 1 << 31:
        out.append(f"n={n} must be in 1..2^31 (u32 element offsets, tile ends included)")
    if BLOCK % 32 or not 32 <= BLOCK <= 1024:
        out.append(f"BLOCK={BLOCK} must be a multiple of 32 in 32..1024")
    if not 1 <= UNROLL <= 8:
        out.append(f"UNROLL={UNROLL} must be in 1..8 (16-byte vectors per thread and input)")
    return out


def _cases():
    """Small: a single partial vector, a tail CTA with full and partial vectors, several full
    CTAs; large: 64M elements (128 MiB per tensor, twice the L2 each), UNROLL 2 and 4."""
    return [T.case("n5", n=5), T.case("n4099", n=4099),
            T.case("n16384_b128_u1", n=16384, BLOCK=128, UNROLL=1),
            T.case("n64M", n=1 << 26, **BENCH),
            T.case("n64M_u4", n=1 << 26, UNROLL=4, **BENCH)]


def _bf16(rng, n):
    return (rng.standard_normal(n, dtype=np.float32) * 2).astype(BF16)


def _f64(a):
    return np.asarray(a).astype(np.float64)


# f32 math within ~1e-6 relative of the exact value, rounded once to bf16: at worst the
# reference's bf16 neighbour, one ulp = 2^-7 of its magnitude. Absolute 2^-100: for x below about
# -9.6, 1 + 2^(u log2 e) exceeds 2^126 and rcp.approx.ftz flushes its subnormal reciprocal to 0,
# so outputs of magnitude ~1e-38 come out as 0 (10 of 64M elements on the H200, 2026-12-01,
# max error 2.8e-38); nothing above 2^-100 is affected.
ONE_BF16_ULP = T.tolerance(rtol=2 ** -7, atol=2 ** -100)


def _torch(op, **args):
    """The eager and torch.compile baselines of `op` (kcoral/baselines/torch_zoo.py)."""
    return [{"name": f"torch.{op}", "args": args}, {"name": f"torch.compile.{op}", "args": args}]


SWIGLU = T.suite(
    swiglu, inputs=lambda rng, n: dict(a=_bf16(rng, n), b=_bf16(rng, n),
                                       out=np.empty(n, BF16), n=n),
    reference=lambda a, b: {"out": (_f64(a) * _f64(b) / (1 + np.exp(-_f64(a)))).astype(BF16)},
    outputs=["out"], cases=_cases(), tolerance=ONE_BF16_ULP, constraints=constraints,
    flops=lambda n: 10 * n, bytes=lambda n: 6 * n,
    baselines=_torch("silu_mul", a="a", b="b"))


def _gelu_ref(x):
    """0.5 x (1 + tanh(u)) written as x / (1 + exp(-2u)): the same function, but float64's
    1 + tanh(u) cancels to 0 below u ~ -19 where the result is still a normal bf16."""
    x = _f64(x)
    u = math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
    return {"out": (x / (1 + np.exp(-2 * u))).astype(BF16)}


GELU_TANH = T.suite(
    gelu_tanh, inputs=lambda rng, n: dict(x=_bf16(rng, n), out=np.empty(n, BF16), n=n),
    reference=_gelu_ref, outputs=["out"], cases=_cases(), tolerance=ONE_BF16_ULP,
    constraints=constraints, flops=lambda n: 12 * n, bytes=lambda n: 4 * n,
    baselines=_torch("gelu_tanh", x="x"))
