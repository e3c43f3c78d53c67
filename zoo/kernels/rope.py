"""Rotary position embedding (RoPE, the rotate-half / GPT-NeoX layout) in place, sm_90a:

    for i < D/2:  x[t, h, i]       <- x[t, h, i] cos[t, i] - x[t, h, i + D/2] sin[t, i]
                  x[t, h, i + D/2] <- x[t, h, i + D/2] cos[t, i] + x[t, h, i] sin[t, i]

x: [tokens, H, D] bf16 (rotated in place); cos, sin: [tokens, D/2] f32 (the table of the
tokens' positions, as a model's rotary cache gathers it).

Algorithm: one CTA per token, NC x HG threads: NC = D/16 threads cover the 8-element chunks of
the first half of a head (the matching chunk of the second half is D/2 further), and HG head
groups split the H heads (thread g takes heads g, g + HG, ...). Each thread loads its 8 cos and
8 sin values once (``ld.global.v4.f32`` x 4) and reuses them for all its heads; for every head it
issues both 16-byte loads (``ld.global.v4.b32``) of all its heads before the first use, then
rotates in f32 (``fma``) and stores both halves back (``st.global.v4.b32``). Consecutive lanes
take consecutive chunks of a head, so each warp-wide access covers whole 128-byte lines. Heads
beyond H in the last round are predicated off (H need not be a multiple of HG); any token count
works (the grid is the tokens). Each thread writes only what it read: in place needs no
synchronization.

Techniques: vectorized 16-byte coalesced access, table reuse across heads in registers, several
loads in flight per thread, in-place update.
Work: 6 FLOPs per pair; bytes: x read and written once, the table read once.

Tags: vectorized, in-place, elementwise, table-reuse, bf16
"""

import numpy as np

import tirxh.lang as T
from tirxh.core.types import numpy_dtype

TAGS = ("vectorized", "in-place", "elementwise", "table-reuse", "bf16")

BF16 = numpy_dtype("bf16")
BENCH = dict(small=False, tags=("h200",))  # large cases: timed on the H200, never simulated


def unpack(word):
    """bf16x2 -> (lo, hi) f32: ``shl.b32`` / ``and.b32`` and ``mov.f32`` to retype."""
    return (T.ptx.mov.f32(T.ptx.shl.b32(word, 16)),
            T.ptx.mov.f32(T.ptx.and_.b32(word, 0xFFFF0000)))


def _threads(D, HG):
    return D // 16 * HG


@T.kernel(grid=lambda tokens: tokens, block=_threads)
def rope(x: T.gptr[T.bf16], cos: T.gptr[T.f32], sin: T.gptr[T.f32], tokens: T.u32,
         H: T.const, D: T.const, HG: T.const = 16):
    nc, half = D // 16, D // 2
    rounds = -(-H // HG)
    tid = T.tid.x
    chunk = tid % nc
    group = tid / nc
    tok = T.ctaid.x
    col = chunk * 8
    tab = tok * half + col
    c = [v for k in (0, 16) for v in T.ptx.ld.global_.v4.f32(cos.at(tab) + k)]
    s = [v for k in (0, 16) for v in T.ptx.ld.global_.v4.f32(sin.at(tab) + k)]
    first = x.at((tok * H + group) * D + col)  # head `group`, chunk `chunk`, first half
    step = HG * D * 2  # bytes from one of the thread's heads to the next
    tail = (group + (rounds - 1) * HG < H) if H % HG else None
    loaded = []
    for r in range(rounds):
        p = tail if r == rounds - 1 else None
        if p is None:
            lo = T.ptx.ld.global_.v4.b32(first + r * step)
            hi = T.ptx.ld.global_.v4.b32(first + r * step + D)
        else:
            lo = [T.reg(T.b32, init=0) for _ in range(4)]
            hi = [T.reg(T.b32, init=0) for _ in range(4)]
            T.ptx.ld.global_.v4.b32(lo, first + r * step, pred=p)
            T.ptx.ld.global_.v4.b32(hi, first + r * step + D, pred=p)
        loaded.append((lo, hi, p))
    for r, (lo, hi, p) in enumerate(loaded):
        out_lo, out_hi = [], []
        for k in range(4):
            (a0, a1), (b0, b1) = unpack(lo[k]), unpack(hi[k])
            i0, i1 = 2 * k, 2 * k + 1
            r0 = T.ptx.fma.rn.f32(a0, c[i0], -(b0 * s[i0]))
            r1 = T.ptx.fma.rn.f32(a1, c[i1], -(b1 * s[i1]))
            q0 = T.ptx.fma.rn.f32(b0, c[i0], a0 * s[i0])
            q1 = T.ptx.fma.rn.f32(b1, c[i1], a1 * s[i1])
            out_lo.append(T.ptx.cvt.rn.bf16x2.f32(r1, r0))
            out_hi.append(T.ptx.cvt.rn.bf16x2.f32(q1, q0))
        T.ptx.st.global_.v4.b32(first + r * step, out_lo, pred=p)
        T.ptx.st.global_.v4.b32(first + r * step + D, out_hi, pred=p)


# --- cases, references, rules ------------------------------------------------------------------

def constraints(tokens, H, D, HG):
    out = []
    if D % 16 or D <= 0:
        out.append(f"D={D} must be a positive multiple of 16 (each half of a head is read as "
                   "16-byte vectors of 8 bf16)")
    elif not 32 <= D // 16 * HG <= 1024:
        out.append(f"D/16 * HG = {D // 16 * HG} threads per CTA must be in 32..1024 (choose HG)")
    if H < 1 or HG < 1:
        out.append(f"H={H} and HG={HG} must be at least 1")
    if tokens < 1 or tokens * H * D >= 1 << 32:
        out.append(f"tokens={tokens}: need 1 <= tokens and tokens * H * D < 2^32 (u32 offsets)")
    return out


def inputs(rng, tokens, H, D):
    half = D // 2
    pos = rng.integers(0, 32768, tokens)
    inv_freq = 10000.0 ** (-np.arange(half) / half)
    ang = pos[:, None] * inv_freq[None, :]
    return dict(x=rng.standard_normal((tokens, H, D), dtype=np.float32).astype(BF16),
                cos=np.cos(ang).astype(np.float32), sin=np.sin(ang).astype(np.float32),
                tokens=tokens)


def reference(x, cos, sin, D):
    x = np.asarray(x).astype(np.float64)
    c, s = cos.astype(np.float64)[:, None, :], sin.astype(np.float64)[:, None, :]
    x1, x2 = x[..., :D // 2], x[..., D // 2:]
    return {"x": np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1).astype(BF16)}


SUITE = T.suite(
    rope, inputs=inputs, reference=reference, outputs=["x"], inplace=["x"],
    cases=[T.case("t1_h1_d64", tokens=1, H=1, D=64, HG=8),
           T.case("t5_h7_d128", tokens=5, H=7, D=128, HG=4),
           T.case("t3_h32_d128", tokens=3, H=32, D=128),
           T.case("t16384_h32_d128", tokens=16384, H=32, D=128, **BENCH),
           T.case("t16384_h32_d128_hg8", tokens=16384, H=32, D=128, HG=8, **BENCH)],
    # f32 fma: the product terms carry ~2^-24 relative error and may cancel, so the error is
    # absolute (~1e-6 for |x| ~ 4); then one bf16 rounding: one ulp, 2^-7 of the magnitude
    tolerance=T.tolerance(rtol=2 ** -7, atol=1e-6), constraints=constraints,
    flops=lambda tokens, H, D: 3 * tokens * H * D,
    bytes=lambda tokens, H, D: 4 * tokens * H * D + 4 * tokens * D,
    baselines=[{"name": f"torch{c}.rope", "args": {"x": "x", "cos": "cos", "sin": "sin"}}
               for c in ("", ".compile")])
