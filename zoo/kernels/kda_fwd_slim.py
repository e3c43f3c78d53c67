"""Kimi Delta Attention forward at H64 (issue 18, session 8): `kda_fwd_slim`'s v64ws8l (8 prep +
4 state warps, BV = 64, the batched prep with the gate as a runtime loop; kda_fwd.py has the
algorithm and the math) with the prep's path shortened in two ways that add no code:

- AHEAD = 1: the norms of chunk c + 1 (rk, rq and beta: kda_chunk.norms) are made by prep warps
  4 .. 7 while warps 0 .. 3 invert chunk c's diagonal blocks and the blocks below them (the
  only warps those two phases use: warps 4 .. 7 waited at the barrier). The norms phase and
  one CTA-wide barrier leave every chunk's prep; the two inverse phases meet at a named
  barrier of their own 128 threads. beta gets a copy per stage (chunk c's inverse still reads
  its own while chunk c + 1's is written); chunk 0's norms are made before the loop.
- BLOCKS = 2: the A and M blocks (phase 4) in two warp-uniform paths instead of one branch per
  warp: each warp's row block a is a register, and its blocks (a, b <= a) are computed side by
  side (the dependent mma chains overlap as in v64ws8l) for b = 0 .. 3 (warps of row blocks 2
  and 3) or b = 0 .. 1 (row blocks 0 and 1) in a runtime loop over the channel steps; a block
  past the warp's diagonal is computed and not stored. 9.2 KB of SASS where the unrolled form
  has 23.4 KB, for a walk ~0.3K cycles longer (kda_chunk.blocks_slim, one block a trip, made
  the chains follow each other: +1.0K, and v64ws8m was measured 3.7% slower than v64ws8l).

Work split, inputs, outputs and numerics are kda_fwd's: CTA (value slice of 64 columns, head,
sequence), the state S^T in the registers of the 4 state warps, chunks of 64 tokens through a
two-stage TMA ring handed over on mbarriers; o [B, T, H, V] bf16 and ht [N, H, K, V] f32.
docs/TUNING.md ("H64: the prep's path", session 8) has the model and the predictions.

Tags: linear-attention, chunked-scan, mma-sync, tma, mbarrier-pipeline, swizzle-128b,
state-in-registers, fused-gate, varlen, warp-specialization
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import tirxh.lang as T
from tirxh.core.ir import Addr

# the zoo is a directory of kernel files, not a package (see kda_fwd.py)
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
import kda_chunk as P  # noqa: E402 - after the path that finds it
import kda_fwd as F  # noqa: E402
from kda_chunk import K, ld4, mma  # noqa: E402

TAGS = ("linear-attention", "chunked-scan", "mma-sync", "tma", "mbarrier-pipeline",
        "swizzle-128b", "state-in-registers", "fused-gate", "varlen", "warp-specialization")


# --- phase 4 in two warp-uniform paths (BLOCKS = 2) --------------------------------------------

def blocks_wide(sm, ck, ln, NW):
    """The A/M blocks with 8 prep warps (one unit per warp: kda_chunk.units), as two
    warp-uniform paths: x = warp & 1 (A from KL, or M from QL) and the row block
    a = 3 - warp / 2 are registers; warps with a >= 2 compute blocks b = 0 .. 3 side by side,
    warps with a <= 1 blocks 0 .. 1 (`_wide`); a block past the diagonal is not stored."""
    if NW != 8:
        raise ValueError(f"blocks_wide: {NW} prep warps; it takes 8 (one A/M unit per warp)")
    warp = T.tid.x >> 5
    xq = warp & 1                                    # 0: A (KL, beta, f32), 1: M (QL, bf16)
    pa = T.ptx.selp.u32(ck.q, ck.k, xq == 1)        # KL or QL
    a = 3 - (warp >> 1)                              # units(): row blocks 3, 3, 2, 2, 1, 1, 0, 0
    arow = a << 11                                   # 16 rows x 128 bytes
    unit = (sm, ck, ln, pa, a, arow, xq)
    with T.if_(a >= 2, uniform=True):
        _wide(*unit, amin=2, amax=3)
    with T.if_(a < 2, uniform=True):
        _wide(*unit, amin=0, amax=1)


def _wide(sm, ck, ln, pa, a, arow, xq, amin, amax):
    """Blocks (a, b) for b = 0 .. amax of a warp whose row block a is in [amin, amax], side by
    side in a runtime loop over the 8 channel steps, two a trip (``.pragma "nounroll"``: two
    steps' code, and each trip's mma pairs of the amax + 1 blocks independent of each other:
    unrolled, ptxas scheduled them block after block, doubling the chain). KD_b's fragments are scaled
    by F_ab (sF row PAIRS.index((a, b)) = (a - 1) + b (5 - b) / 2) where b < a: always for
    b < amin (no select), by a select of bf16 1.0 on the diagonal for amin <= b < amax, and
    never for b = amax (the diagonal, or a block past it that is not stored)."""
    one = 0x3F803F80                                 # bf16x2 (1.0, 1.0)
    bs = range(amax + 1)
    diag = {b: a == b for b in bs}
    fbase = {}
    for b in bs:
        if b < amax:
            pair = (a - 1) + ((b * (5 - b)) >> 1)
            if b >= amin:
                pair = T.ptx.selp.u32(0, pair, diag[b])
            fbase[b] = sm.f.ptr() + pair * (2 * K) + (ln.t << 2)
    beta = [T.ptx.ld.shared.f32(sm.beta.at((a << 4) + ln.g + 8 * hh)) for hh in range(2)]
    acc = {b: [T.fragment(T.f32, 4, init=0.0) for _ in range(2)] for b in bs}
    with T.range(4, unroll=1) as s2:                 # channels 32 s2 .. 32 s2 + 31: 2 steps
        half = (s2 >> 1) << 13                       # the 64-channel half's tile (8 KB)
        for j in range(2):                           # step s = 2 s2 + j
            cp = ((s2 & 1) << 1) + j
            af = ld4(ln.at(pa, "A", cp) + half + arow, 0, 0)
            pb = ln.at(ck.g, "B", cp) + half
            for b in bs:
                bf = ld4(pb, 0, 16 * b)
                if b < amax:
                    fa = fbase[b] + (s2 << 6)
                    f = [T.ptx.ld.shared.b32(Addr(fa, 32 * j + 16 * i)) for i in range(2)]
                    if b >= amin:
                        f = [T.ptx.selp.b32(one, w, diag[b]) for w in f]
                    bf = [T.ptx.mul.rn.bf16x2(bf[i], f[i & 1]) for i in range(4)]
                mma(acc[b][0], af, bf[0:2])
                mma(acc[b][1], af, bf[2:4])
    for b in bs:
        with T.if_(a >= b, uniform=True) if b > amin else contextlib.nullcontext():
            P.block_out_slim(sm, ln, acc[b], a, arow, b, xq, diag[b], beta)


# --- the kernel --------------------------------------------------------------------------------

class _SmemAhead(F._SmemWS):
    """kda_fwd's warp-specialized shared memory with a second sBeta (`beta1`): with AHEAD the
    norms of chunk c + 1 write its beta while chunk c's inverse reads chunk c's."""

    SLOTS = F._SmemWS.SLOTS + ("beta",)

    def __init__(self, BV: int):
        super().__init__(BV)
        self.beta1 = T.shared(T.f32, (P.C,), name="sBeta1", align=16, dynamic=True)


@T.kernel(grid=F._grid, block=lambda BV=64, PREP=8: F._block(BV, 0, PREP), min_blocks=1)
def kda_fwd_ahead(q_map: T.tensormap, k_map: T.tensormap, g_map: T.tensormap,
                  v_map: T.tensormap, q: T.gptr[T.bf16], k: T.gptr[T.bf16],
                  g_raw: T.gptr[T.bf16], v: T.gptr[T.bf16], beta: T.gptr[T.bf16],
                  A_log: T.gptr[T.f32], dt_bias: T.gptr[T.f32], h0: T.gptr[T.f32],
                  cu_seqlens: T.gptr[T.s32], order: T.gptr[T.s32], o: T.gptr[T.bf16],
                  ht: T.gptr[T.f32], Trow: T.u32, BV: T.const = 64, PREP: T.const = 8,
                  AHEAD: T.const = 1, BLOCKS: T.const = 2):
    """`kda_fwd_slim` (BV 64, 8 prep + 4 state warps, the gate loop) with AHEAD = 1 the next
    chunk's norms beside the inverse and with BLOCKS = 2 the A/M blocks in two warp-uniform
    paths (the module docstring says why). A kernel of its own: kda_fwd_slim's PTX is
    unchanged."""
    F._forward_ws((q_map, k_map, g_map, v_map), beta, A_log, dt_bias, h0, cu_seqlens, order, o,
                  ht, Trow, BV, PREP, BATCH=8, slim=True,
                  blocks=blocks_wide if BLOCKS == 2 else None, ahead=bool(AHEAD),
                  smem=_SmemAhead)


# --- cases -------------------------------------------------------------------------------------

VARIANTS = {"v64ws8n": dict(BV=64, PREP=8, AHEAD=0, BLOCKS=2),
            "v64ws8p": dict(BV=64, PREP=8, AHEAD=1, BLOCKS=0),
            "v64ws8q": dict(BV=64, PREP=8, AHEAD=1, BLOCKS=2)}
CONTROL = "v64ws8l"     # kda_fwd_slim's variant these are timed beside (kda_bench.sh wsd)


def constraints(B, T_, H, lens=None, BV=64, PREP=8, AHEAD=1, BLOCKS=2):
    if (BV, PREP) != (64, 8):
        return [f"BV={BV}, PREP={PREP}: kda_fwd_ahead is the 8 prep + 4 state warp form "
                f"(BV = 64, PREP = 8): the look-ahead uses prep warps 4 .. 7, blocks_wide one "
                f"A/M unit per warp"]
    out = []
    if AHEAD not in (0, 1):
        out.append(f"AHEAD={AHEAD} must be 0 or 1 (chunk c + 1's norms beside chunk c's inverse)")
    if BLOCKS not in (0, 2):
        out.append(f"BLOCKS={BLOCKS} must be 0 (kda_chunk.blocks, unrolled) or 2 (blocks_wide)")
    return out + F.constraints(B, T_, H, lens, BV=BV, PREP=PREP, BATCH=8)


def _large(name, lens=None) -> list:
    """T8192 H64 (or a pack at H64) with each variant; tagged "alt" (kda_bench.sh's main group
    times kda_fwd's MAIN only)."""
    return [T.case(f"{name}_h64_{v}", small=False, tags=("alt",), B=1, T_=8192, H=64,
                   lens=lens, **params) for v, params in VARIANTS.items()]


_COMMON = dict(F._COMMON, constraints=constraints)

SUITE = T.suite(
    kda_fwd_ahead, baselines=F._baselines(False), **_COMMON,
    cases=[
        # one chunk: the prologue's norms only (the look-ahead's c + 1 < nchunks never holds)
        T.case("t40_h1_v64ws8q", B=1, T_=40, H=1, AHEAD=1, BLOCKS=2),
        # three chunks (64, 64, 22) with saturated gates: chunk 1's norms into stage 1 and
        # chunk 2's into stage 0 (after the state warps released chunk 0) beside the inverse
        T.case("t150_h1_v64ws8q_deep", B=1, T_=150, H=1, AHEAD=1, BLOCKS=2, gate="deep"),
        # the look-ahead with the unrolled blocks: two rows of a chunk and a 1-token tail over
        # two value slices (the tail's norms made ahead, its 63 masked rows)
        T.case("b2_t65_h1_v64ws8p_slow", B=2, T_=65, H=1, AHEAD=1, BLOCKS=0, gate="slow"),
        # the two block paths alone: two chunks (64 + 36)
        T.case("t100_h1_v64ws8n", B=1, T_=100, H=1, AHEAD=0, BLOCKS=2),
        *_large("t8192"),
    ])

SUITE_VARLEN = T.suite(
    kda_fwd_ahead, baselines=F._baselines(True), **_COMMON,
    cases=[
        # a pack of 3 (2, 1 and 1 chunks in one row): the look-ahead within the first
        # sequence only, neighbours' rows masked in the norms made ahead
        T.case("pack_100_8_30_v64ws8q", B=1, T_=138, H=1, lens=(100, 8, 30), AHEAD=1,
               BLOCKS=2, gate="deep"),
        *_large("pack6", lens=F.PACK6),
        *_large("pack8x1024", lens=F.PACK8),
    ])
