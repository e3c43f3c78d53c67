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

Variants (constants; docs/TUNING.md has each one's predicted effect): CTAS > 0 makes the grid
persistent (CTAS CTAs, one wave of resident ones: a grid-stride loop over vectors that loads the
next iteration before it computes the current one, so no CTA launches or tail wave after the
first, see `elementwise_persistent`); EF=1 loads with ``ld.global.cs`` (evict-first: an input
line is never read again, so the L2 keeps the dirty lines it would otherwise write back during
the kernel); MAXREG caps the registers (``.maxnreg``) so that more CTAs are resident; L2=128 or
256 adds the L2 prefetch-size hint ``.L2::128B`` / ``.L2::256B`` to the loads. swiglu only
(session 6): POL=1 loads with Triton's evict-first spelling (``.L1::evict_first.L2::cache_hint``
and a ``createpolicy.fractional.L2::evict_first.b64`` policy), ST=1 stores with
``st.global.cs``.

Techniques: vectorized 16-byte coalesced access, several loads in flight per thread, unpredicated
fast path with a per-vector and per-element tail, fast-math exponentials, persistent grid-stride
loop with software pipelining, cache-streaming hints.
Work: ~10 FLOPs and 6 bytes (swiglu) / 4 bytes (gelu) per element: memory bound.

Tags: vectorized, elementwise, tail-handling, fast-math, bf16, persistent
"""

import math

import numpy as np

import tirxh.lang as T
from tirxh.core.types import numpy_dtype

TAGS = ("vectorized", "elementwise", "tail-handling", "fast-math", "bf16", "persistent")

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


def _load(EF, L2=0, POL=0):
    """The 16-byte load: ``ld.global.v4.b32``; L2=128 or 256 adds the L2 prefetch-size hint
    ``.L2::128B`` / ``.L2::256B`` (SASS ``LDG.E.LTC256B.128``); with EF=1 ``ld.global.cs`` (cache
    streaming: evict-first in L1 and L2, each input element is read once). POL=1: Triton's
    spelling of an evict-first load, ``ld.global.L1::evict_first.L2::cache_hint.v4.b32`` with
    a ``createpolicy.fractional.L2::evict_first.b64`` policy made once per thread (the returned
    callable appends it to every load)."""
    op = T.ptx["ld.global" + (".cs" if EF else "")
               + (".L1::evict_first.L2::cache_hint" if POL else "")
               + (f".L2::{L2}B" if L2 else "") + ".v4.b32"]
    if not POL:
        return op
    policy = T.ptx.createpolicy.fractional.L2__evict_first.b64()

    def ld(*args, pred=None):
        return op(*args, policy) if pred is None else op(*args, policy, pred=pred)
    return ld


def _store(ST=0):
    """The 16-byte store: ``st.global.v4.b32``; ST=1 ``st.global.cs.v4.b32`` (streaming: the
    output line is written once and never read here, so the L2 may evict it first)."""
    return T.ptx["st.global" + (".cs" if ST else "") + ".v4.b32"]


def elementwise(f, ins, out, n, BLOCK, UNROLL, EF, L2=0, POL=0, ST=0):
    """The kernel body shared by the activations, one tile per CTA (module docstring)."""
    ld, st = _load(EF, L2, POL), _store(ST)
    tile = BLOCK * UNROLL * 8
    base = T.ctaid.x * tile
    first = base + T.tid.x * 8
    addrs = [p.at(first) for p in ins]
    oaddr = out.at(first)
    step = BLOCK * 16  # bytes between a thread's vectors
    with T.if_(base + tile <= n, uniform=True):  # the whole tile is in range
        loaded = [[ld(a + j * step) for a in addrs] for j in range(UNROLL)]
        for j, vecs in enumerate(loaded):
            st(oaddr + j * step, apply_vector(f, vecs))
    with T.else_():  # the CTA holding the end of the array
        for j in range(UNROLL):
            i = first + j * BLOCK * 8
            with T.if_(i + 8 <= n):
                vecs = [ld(a + j * step) for a in addrs]
                st(oaddr + j * step, apply_vector(f, vecs))
            with T.else_():
                with T.range(i, n) as e:  # at most 7 elements
                    _scalar(f, ins, out, e)


def _scalar(f, ins, out, e):
    """One element: ``ld.global.b16`` per input, ``cvt.f32.bf16``, f, ``cvt.rn.bf16.f32``."""
    vals = [T.ptx.cvt.f32.bf16(T.ptx.ld.global_.b16(p.at(e))) for p in ins]
    T.ptx.st.global_.b16(out.at(e), T.ptx.cvt.rn.bf16.f32(f(*vals)))


def elementwise_persistent(f, ins, out, n, BLOCK, UNROLL, EF, L2=0, POL=0, ST=0):
    """The body of a persistent grid (CTAS > 0): thread g = ctaid * BLOCK + tid of the G * BLOCK
    threads takes the 8-element vectors g, g + G BLOCK, g + 2 G BLOCK, ... (every warp access
    still 512 contiguous bytes), UNROLL of them per iteration, and loads the next iteration's
    vectors before it computes and stores the current ones (software pipelining: a thread's
    loads are in flight while it computes). No CTA launches after the first wave, and every
    thread's share is within one vector of every other's, so there is no tail wave. Vectors past
    the last full one are predicated off; CTA 0 finishes the last n mod 8 elements."""
    ld, st = _load(EF, L2, POL), _store(ST)
    nvec = n >> 3
    span = T.nctaid.x * BLOCK  # vectors from one of a thread's vectors to the next
    step = span * UNROLL  # vectors per iteration
    g = T.ctaid.x * BLOCK + T.tid.x

    def load(v0, into=None):
        """The UNROLL x len(ins) vectors of the iteration at vector v0 (predicated)."""
        got = []
        for u in range(UNROLL):
            v = v0 + u * span if u else v0
            ok = v < nvec
            vecs = []
            for i, p in enumerate(ins):
                words = into[u][i] if into else [T.reg(T.b32) for _ in range(4)]
                ld(words, p.at(v * 8), pred=ok)
                vecs.append(words)
            got.append((v, ok, vecs))
        return got

    cur = load(g, [[[T.reg(T.b32, init=0) for _ in range(4)] for _ in ins]
                   for _ in range(UNROLL)])
    with T.range(g, nvec, step) as v:
        nxt = load(v + step)
        for u, (_, _, vecs) in enumerate(cur):
            w = v + u * span if u else v
            st(out.at(w * 8), apply_vector(f, vecs), pred=w < nvec)
        for (_, _, dst), (_, _, src) in zip(cur, nxt):
            for dw, sw in zip(dst, src):
                for d, s_ in zip(dw, sw):
                    d.set(s_)
    e = (nvec << 3) + T.tid.x
    with T.if_((T.ctaid.x == 0) & (e < n)):  # at most 7 elements
        _scalar(f, ins, out, e)


def _body(f, ins, out, n, BLOCK, UNROLL, CTAS, EF, L2, POL=0, ST=0):
    if CTAS:
        elementwise_persistent(f, ins, out, n, BLOCK, UNROLL, EF, L2, POL, ST)
    else:
        elementwise(f, ins, out, n, BLOCK, UNROLL, EF, L2, POL, ST)


def _grid(n, BLOCK, UNROLL, CTAS):
    return CTAS if CTAS else max(1, T.cdiv(n, BLOCK * UNROLL * 8))


def _maxnreg(MAXREG):
    return MAXREG or None  # 0: no cap (ptxas chooses)


@T.kernel(grid=_grid, block=lambda BLOCK: BLOCK, maxnreg=_maxnreg)
def swiglu(a: T.gptr[T.bf16], b: T.gptr[T.bf16], out: T.gptr[T.bf16], n: T.u32,
           BLOCK: T.const = 256, UNROLL: T.const = 2, CTAS: T.const = 0, EF: T.const = 0,
           MAXREG: T.const = 0, L2: T.const = 0, POL: T.const = 0, ST: T.const = 0):
    _body(silu_mul, [a, b], out, n, BLOCK, UNROLL, CTAS, EF, L2, POL, ST)


@T.kernel(grid=_grid, block=lambda BLOCK: BLOCK, maxnreg=_maxnreg)
def gelu_tanh(x: T.gptr[T.bf16], out: T.gptr[T.bf16], n: T.u32, BLOCK: T.const = 256,
              UNROLL: T.const = 2, CTAS: T.const = 0, EF: T.const = 0, MAXREG: T.const = 0,
              L2: T.const = 0):
    _body(gelu, [x], out, n, BLOCK, UNROLL, CTAS, EF, L2)


# --- cases, references, rules ------------------------------------------------------------------

def constraints(n, BLOCK, UNROLL, CTAS, EF, MAXREG, L2=0, POL=0, ST=0):
    out = []
    if POL not in (0, 1) or ST not in (0, 1) or (POL and EF):
        out.append(f"POL={POL} and ST={ST} must be 0 or 1, and POL=1 needs EF=0 (ld takes a .cs "
                   "cache operator or an .L1 eviction priority, not both)")
    if L2 not in (0, 128, 256):
        out.append(f"L2={L2} must be 0 (no hint), 128 or 256 (ld's .L2::128B / .L2::256B)")
    if not 1 <= n <= 1 << 31:
        out.append(f"n={n} must be in 1..2^31 (u32 element offsets, tile ends included)")
    if BLOCK % 32 or not 32 <= BLOCK <= 1024:
        out.append(f"BLOCK={BLOCK} must be a multiple of 32 in 32..1024")
    if not 1 <= UNROLL <= 8:
        out.append(f"UNROLL={UNROLL} must be in 1..8 (16-byte vectors per thread and input)")
    if not 0 <= CTAS <= 4096 or EF not in (0, 1):
        out.append(f"CTAS={CTAS} must be in 0..4096 (0: one tile per CTA) and EF={EF} 0 or 1")
    if MAXREG and not 32 <= MAXREG <= 255:
        out.append(f"MAXREG={MAXREG} must be 0 (no cap) or in 32..255 (.maxnreg)")
    return out


def _cases(persistent):
    """Small: a single partial vector, a tail CTA with full and partial vectors, several full
    CTAs, the persistent grid (vectors left over for some threads, the scalar tail, evict-first
    loads), the L2 prefetch hint on both paths; large: 64M elements (128 MiB per tensor, twice
    the L2 each) with the variants of docs/TUNING.md (UNROLL 2 and 4, 128-thread CTAs of one or
    four vectors per thread (the latter torch's vectorized-elementwise geometry), evict-first
    loads, the L2 prefetch hint, a register cap of 48 (5 CTAs of 256 per SM instead of 4),
    persistent grids of `(ctas, maxreg)`: as many CTAs as are resident at once, 132 SMs times the
    CTAs of 256 threads the kernel's registers allow, under a register cap where one is given;
    tests/zoo/test_activations.py checks them against the compiled register count)."""
    big = [T.case("n64M", n=1 << 26, **BENCH),
           T.case("n64M_u4", n=1 << 26, UNROLL=4, **BENCH),
           T.case("n64M_b128_u1", n=1 << 26, BLOCK=128, UNROLL=1, **BENCH),
           T.case("n64M_ef", n=1 << 26, EF=1, **BENCH),
           T.case("n64M_l2p256", n=1 << 26, L2=256, **BENCH),
           T.case("n64M_b128_u4", n=1 << 26, BLOCK=128, UNROLL=4, **BENCH),
           T.case("n64M_r48", n=1 << 26, MAXREG=48, **BENCH)]
    for ctas, maxreg in persistent:
        name = f"n64M_p{ctas}" + (f"_r{maxreg}" if maxreg else "")
        big += [T.case(name, n=1 << 26, CTAS=ctas, MAXREG=maxreg, **BENCH),
                T.case(name + "_ef", n=1 << 26, CTAS=ctas, MAXREG=maxreg, EF=1, **BENCH)]
    return [T.case("n5", n=5), T.case("n4099", n=4099),
            T.case("n16384_b128_u1", n=16384, BLOCK=128, UNROLL=1),
            T.case("n5_p2", n=5, BLOCK=32, CTAS=2),
            T.case("n4099_p3_ef", n=4099, BLOCK=32, UNROLL=2, CTAS=3, EF=1),
            T.case("n4099_u1_l2p256", n=4099, UNROLL=1, L2=256),
            T.case("n4099_p3_l2p128", n=4099, BLOCK=32, CTAS=3, L2=128)] + big


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


# session 6 (docs/TUNING.md, "Session 6: what inductor's kernels do differently"): streaming
# stores (ST=1) and Triton's evict-first policy (POL=1) on the plain, torch's (b128_u1: inductor's
# XBLOCK=1024, 4 warps) and the best measured (b128_u4) geometries; small cases: a tail CTA
# (full vectors, then scalars) and a persistent grid with both
S6_CASES = [T.case("n4099_u1_pol_st", n=4099, UNROLL=1, POL=1, ST=1),
            T.case("n4099_p3_pol_st", n=4099, BLOCK=32, CTAS=3, POL=1, ST=1)] + [
    T.case(f"n64M_{name}", n=1 << 26, **params, **BENCH) for name, params in (
        ("b128_u4_stcs", dict(BLOCK=128, UNROLL=4, ST=1)), ("stcs", dict(ST=1)),
        ("b128_u1_pol", dict(BLOCK=128, UNROLL=1, POL=1)),
        ("b128_u4_pol", dict(BLOCK=128, UNROLL=4, POL=1)),
        ("b128_u1_stcs", dict(BLOCK=128, UNROLL=1, ST=1)))]

SWIGLU = T.suite(
    swiglu, inputs=lambda rng, n: dict(a=_bf16(rng, n), b=_bf16(rng, n),
                                       out=np.empty(n, BF16), n=n),
    reference=lambda a, b: {"out": (_f64(a) * _f64(b) / (1 + np.exp(-_f64(a)))).astype(BF16)},
    outputs=["out"], cases=_cases([(396, 0), (528, 64)]) + S6_CASES, tolerance=ONE_BF16_ULP,
    constraints=constraints,
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
    reference=_gelu_ref, outputs=["out"], cases=_cases([(528, 0)]), tolerance=ONE_BF16_ULP,
    constraints=constraints, flops=lambda n: 12 * n, bytes=lambda n: 4 * n,
    baselines=_torch("gelu_tanh", x="x"))
