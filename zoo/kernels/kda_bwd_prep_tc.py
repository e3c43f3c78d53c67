"""Kimi Delta Attention backward, piece 2a of the chain split with its products on tensor cores
(issue 18; docs/TUNING.md "Forward + backward at 3x"): the same inputs and outputs as
kda_bwd_chain_prep (kda_bwd_chain's operands of every chunk at once, one CTA per (head, chunk);
with FORWARD=1 the forward walk's), so kda_fwd_bwd's plan "tc" swaps it in for both walks.

Math (kda_bwd_split.chain_operands / state_operands), per chunk and head, with the chunk's prep:

    W = Tb KE,  U = QE - M W  [C, K];  N = -W^T KL  [K, K];  B^T = dO^T U  [V, K]
    FORWARD:  X = Tb^T KL  [C, K];  N = -X^T KE;  B^T = V^T X

What changes against kda_bwd_chain_prep: its prep (kda_bwd_chain_prep.prep, f32 CUDA cores) is
unchanged at PREP=0; the four products after it are kda_bwd_pieces_tc's split-operand
``mma.sync`` (bf16 hi + lo, three mma a product, two for B^T whose dO or V is exact in bf16),
warp w on m-tile w % 4 and half the columns ([128, 128] outputs in two passes of 64 rows).
N's accumulators need no exchange to become kda_bwd_chain's fragment words: lane (g, t) holds
N[a, b .. b + 1] for rows a = m0 + g (+ 8) and columns b = n0 + 2t, which is the B-fragment
pair of N^T for k-step b / 16, n-tile a / 8 and the same lane; its two n-tiles 16 s and 16 s +
8 give the four words (hi b0, hi b1, lo b0, lo b1) of one ``st.global.v4.b32``.

PREP (kda_bwd_pieces_tc.prep): 1 computes the prep's P and M as split mma as well, 2 also T's
blocks; 0 (the default) is the f32 prep, so one job can time the forms side by side.
MSW (with PREP=2 and the reverse walk): 1 stores the [C, C] M tile, 2 M and T, XOR-swizzled by
row (`SwizzledM`: session 15's ncu profile found their fragment pairs 8-way conflicted; 2-way
with it, outputs bit-identical; cases pmtm_).

Inputs and outputs: kda_bwd_chain_prep's (q, k, g_raw, y [B, T, H, 128] bf16, y = dO or V with
FORWARD; beta [B, T, H] bf16; A_log [H], dt_bias [H, K] f32; chunk_tok, chunk_rows [chunks] s32
-> nfrag [chunks, H, 8, 16, 32, 4] u32, bt [chunks, H, V, K] f32, eg [chunks, H, K] f32).

Tags: linear-attention, backward, chunked, fused-gate, mma-sync, split-bf16, varlen
"""

from __future__ import annotations

import sys
from pathlib import Path

import tirxh.lang as T

# the zoo is a directory of kernel files, not a package (see kda_fwd.py)
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
import kda_bwd_chain as CH  # noqa: E402,F401 - after the path; tests read mod.CH
import kda_bwd_chain_prep as PR  # noqa: E402
import kda_bwd_local as BL  # noqa: E402
import kda_bwd_pieces_tc as TC  # noqa: E402
from kda_chunk import C, K, V  # noqa: E402

TAGS = ("linear-attention", "backward", "chunked", "fused-gate", "mma-sync", "split-bf16",
        "varlen")

SK = TC.SK
_shared = TC._shared


def _rows_scaled(ln, n0s, acc, tile, beta):
    """tile[i, c] = beta_i acc (X = Diag(beta) T^T KL)."""
    for j, e, row, col in TC._elements(ln, n0s):
        T.ptx.st.shared.f32(tile.at(row, col), acc[j][e] * T.ptx.ld.shared.f32(beta.at(row)))


def _n_fragments(ln, hc, nfrag, left, right):
    """N = -left^T right ([K, K]: left, right [C, K] f32 tiles) as kda_bwd_chain's fragment
    words, one ``st.global.v4.b32`` a (k-step, n-tile) pair of accumulator tiles."""
    wide = ln.cols(K)
    for rows in (0, C):
        lr = ln.below(rows)
        acc = TC._acc(len(wide))
        TC._product(lr, acc, _shared(left, SK, transposed=True), _shared(right, SK), wide,
                    C // 16)
        n_words(lr, hc, nfrag, acc)


def n_words(lr, hc, nfrag, acc):
    """Store -acc (the warp's rows lr.m0 .. of N^T's accumulators, its 8 n-tiles) as
    kda_bwd_chain's fragment words (shared with kda_bwd_prep3, whose products differ only in
    where their fragments come from)."""
    # lane word of k-step 4 half, n-tile m0 / 8; then + s' (k-steps) and + h (n-tiles)
    first = (((hc * 8 + lr.half * 4) * 16 + (lr.m0 >> 3)) * 32 + 4 * lr.g + lr.t) * 4
    base = nfrag.at(first)
    for sp in range(len(acc) // 2):
        for h in range(2):
            words = [TC._split2(-acc[2 * sp + o][2 * h], -acc[2 * sp + o][2 * h + 1])
                     for o in range(2)]
            at = base + 4 * (sp * 16 * 32 * 4 + h * 32 * 4)
            T.ptx.st.global_.v4.b32(at, [words[0][0], words[1][0], words[0][1],
                                         words[1][1]])


def _b_rows(ln, hc, bt, y, left):
    """B^T[v, d] = sum_i Y[i, v] left[i, d] (Y exact bf16 in sm.do: two mma a product),
    ``st.global.v2.f32`` pairs along bt's rows."""
    wide = ln.cols(K)
    for rows in (0, C):
        lr = ln.below(rows)
        acc = TC._acc(len(wide))
        TC._product(lr, acc, _shared(y, SK, transposed=True, exact=True), _shared(left, SK),
                    wide, C // 16)
        bt_rows(lr, hc, bt, wide, acc)


def bt_rows(lr, hc, bt, wide, acc):
    """Store the warp's B^T accumulators (rows lr.m0 .., columns `wide`) as
    ``st.global.v2.f32`` pairs along bt's rows (shared with kda_bwd_prep3)."""
    for row, col, xs in TC._pairs_of(lr, wide, acc):
        T.ptx.st.global_.v2.f32(bt.at((hc * V + row) * K + col), xs)


def walk(sm, hc, nfrag, bt, FORWARD, y_tile):
    """One walk's products after the prep (kda_bwd_chain's operands of chunk-head `hc`): the
    reverse walk's W, U, N, B^T = dO^T U (dO in `y_tile`), or with FORWARD X, N, B^T = V^T X (V
    in `y_tile`). Writes the G and P tiles (sm.r, sm.dlt); reads T, beta, M, KE, KL, QE and
    `y_tile`. Shared by this kernel (one walk) and kda_bwd_prep2 (both walks, one prep)."""
    ln = TC._Lane()
    wide = ln.cols(K)
    acc = TC._acc(len(wide))
    if FORWARD:
        # X = Diag(beta) T^T KL into the G tile; N = -X^T KE; B^T = V^T X
        TC._product(ln, acc, _shared(sm.t, C, transposed=True), _shared(sm.kl_, SK), wide,
                    C // 16)
        _rows_scaled(ln, wide, acc, sm.r, sm.beta)
        T.ptx.bar.sync(0)
        _n_fragments(ln, hc, nfrag, sm.r, sm.ke)
        _b_rows(ln, hc, bt, y_tile, sm.r)
    else:
        # W = Tb KE into the G tile; U = QE - M W into the P tile; N = -W^T KL; B^T = dO^T U
        TC._product(ln, acc, _rows_of(sm.t, lambda c: sm.beta.at(c)), _shared(sm.ke, SK),
                    wide, C // 16)
        TC._to_tile(ln, wide, acc, sm.r)
        T.ptx.bar.sync(0)
        acc = TC._acc(len(wide))
        TC._product(ln, acc, _rows_of(sm.m), _shared(sm.r, SK), wide, C // 16)
        for j, e, row, col in TC._elements(ln, wide):
            T.ptx.st.shared.f32(sm.dlt.at(row, col),
                                T.ptx.ld.shared.f32(sm.qe.at(row, col)) - acc[j][e])
        T.ptx.bar.sync(0)
        _n_fragments(ln, hc, nfrag, sm.r, sm.kl_)
        _b_rows(ln, hc, bt, y_tile, sm.dlt)


class SwizzledM:
    """A [C, C] f32 tile (M with MSW=1; M and T with MSW=2) with its 16-column groups
    XOR-swizzled by row: element (r, c) at word r C + (c ^ 16 (r % 4)).

    Why (session 15's ncu profile of pmt_t8192_h96, docs/PERFORMANCE.md "Session 15, branch
    kdabwd12"): the reverse walk reads Tb's and M's A fragments (W = Tb KE, U = QE - M W) as
    ``ld.shared.f32`` pairs that ptxas merges into ``LDS.64`` (lane (g, t): rows g, g + 8,
    columns 2t, 2t + 1, 2t + 8, 2t + 9 of a k-step), and with a 64-word row every row starts
    in bank 0, so a half-warp's 16 pairs fall in 4 eight-byte bank pairs: 8 wavefronts an
    instruction for the ideal 2 (ncu: "L1 Conflicts Shared N-Way" 8 on all 32 such LDS.64,
    27.5M wavefronts for 6.9M ideal). The swizzle flips column bit 4 on odd rows (bit 5 on
    rows 2, 3 mod 4), so a half-warp's pairs cover 8 bank pairs: 4 wavefronts (2-way). Only
    column bits 4-5 change, so a fragment's offsets (+1, +8, +9 columns from a k-step's 2t:
    never out of its 16-column group; +8 rows: the same r % 4) stay immediates. Every writer
    and reader of these tiles on the PREP=2, FORWARD=0 path goes through ``at`` (the P, M
    phase, T's diagonal blocks, zeros and blocks below, the walk), so they agree by
    construction; anything that asked for the raw tile (``ptr()``) fails at trace time."""

    def __init__(self, tile):
        self.tile = tile

    def at(self, r, c):
        return self.tile.at(r, c ^ ((r & 3) << 4))

    def b_row(self, row, col0):
        """Elements (row, col0 + 0, 1, 8, 9), col0 even with col0 % 16 <= 6 (T's blocks below
        the diagonal: kda_bwd_pieces_tc._split_b), as two ``ld.shared.v2.f32`` from one
        address: through ``at`` per element ptxas cannot see (c + 1) ^ s = (c ^ s) + 1 and
        leaves the pairs as scalar LDS (ptxas 13.0: its 24 LDS.64 became 48 LDS)."""
        base = self.at(row, col0)
        return list(T.ptx.ld.shared.v2.f32(base)) + list(T.ptx.ld.shared.v2.f32(base + 32))


class _PairSrc(TC._Src):
    """kda_bwd_pieces_tc's `_Src` of a row-major SwizzledM tile whose row pairs ((r, c), (r, c
    + 1), c even) load as one ``ld.shared.v2.f32``: ptxas merges the two scalar loads into an
    ``LDS.64`` when it sees the row's word offset c even, which it does not through the XOR
    (ptxas 13.0: 24 of the walk's 52 LDS.64 became 48 LDS, each as conflicted as the pair),
    so the pair is explicit. The swizzle keeps a pair in one 8-byte word (it flips bits 4-5
    only). Elements and their scale as the scalar form's, so the products are bit-identical."""

    def pair(self, base, sbase, dr, dc, step):
        if tuple(step) != (0, 1):
            return super().pair(base, sbase, dr, dc, step)
        x = list(T.ptx.ld.shared.v2.f32(base + dr * self.rs + dc * self.cs))
        if self.scale is not None:
            x = [x[e] * T.ptx.ld.shared.f32(sbase + 4 * (dc + e)) for e in range(2)]
        return x


def _rows_of(tile, scale=None):
    """The A operand of the reverse walk's W = Tb KE (scale: beta) and U = QE - M W: `_shared`
    (TC._tb for Tb), or with a SwizzledM tile `_PairSrc` over the same elements."""
    if not isinstance(tile, SwizzledM):
        src = _shared(tile, C)
    else:
        src = _PairSrc(lambda r, c: tile.at(r, c), 4 * C, 4, T.ptx.ld.shared.f32)
    src.scale = scale
    return src


@T.kernel(grid=PR._grid, block=256)
def kda_bwd_prep_tc(q: T.gptr[T.bf16], k: T.gptr[T.bf16], g_raw: T.gptr[T.bf16],
                    beta: T.gptr[T.bf16], A_log: T.gptr[T.f32], dt_bias: T.gptr[T.f32],
                    y: T.gptr[T.bf16], chunk_tok: T.gptr[T.s32],
                    chunk_rows: T.gptr[T.s32], nfrag: T.gptr[T.u32], bt: T.gptr[T.f32],
                    eg: T.gptr[T.f32], FORWARD: T.const = 0, PREP: T.const = 0,
                    MSW: T.const = 0):
    sm, ck = PR.chunk_cta(chunk_tok, chunk_rows)
    if MSW:
        sm.m = SwizzledM(sm.m)
    if MSW == 2:
        sm.t = SwizzledM(sm.t)
    TC.prep(sm, ck, q, k, g_raw, beta, A_log, dt_bias, y, PREP)    # y in sm.do
    hc = ck.c * ck.H + ck.h
    walk(sm, hc, nfrag, bt, FORWARD, sm.do)
    with T.if_(T.tid.x < K):
        d = T.tid.x
        T.ptx.st.global_.f32(eg.at(hc * K + d), T.ptx.ld.shared.f32(sm.eg.at(d)))


# --- inputs, reference, cases: kda_bwd_chain_prep's ----------------------------------------------

OUTPUTS = PR.OUTPUTS
inputs = PR.inputs
prep_inputs = PR.prep_inputs
reference = PR.reference
timing_inputs = PR.timing_inputs
_bytes = PR._bytes


def constraints(B, T_, H, lens=None, FORWARD=0, PREP=0, MSW=0):
    msw = [] if MSW == 0 or (MSW in (1, 2) and PREP == 2 and FORWARD == 0) else [
        f"MSW={MSW} must be 0, or 1 (M swizzled) or 2 (M and T) with PREP=2 and FORWARD=0 "
        f"(the swizzled tiles are written by the tensor-core prep, read by the reverse walk)"]
    return PR.constraints(B, T_, H, lens, FORWARD) + TC.check_prep(PREP) + msw


def _flops(B, T_, H, lens=None, FORWARD=0, PREP=0, MSW=0):
    """The products' mma work at 2 FLOPs a multiply-add, per chunk and head: W, U (C C K) or X
    (C C K), and N (K C K) as three bf16 mma; B^T (V C K) as two (dO or V exact); PREP=1
    adds P and M, PREP=2 T's blocks too (kda_bwd_pieces_tc.pm_macs)."""
    first = C * C * K * (1 if FORWARD else 2)
    per = 3 * (first + K * C * K) + 2 * V * C * K + TC.pm_macs(PREP)
    return 2 * per * BL._chunks(B, T_, lens) * H


# kda_bwd_chain_prep's rule for B^T and exp(G_C); N is checked as hi + lo in the tests
TOLERANCE = PR.TOLERANCE

def msw_twins(cases):
    """The MSW=2 twins (pmtm_ + name: PREP=2, M and T swizzled) of `cases`' reverse-walk ones;
    `kda_bench.sh calib` with CALIB_EXTRA=pmtm_ times pmtm_t8192_h96 beside pmt_."""
    return [T.case("pmtm_" + c.name, small=c.small, tags=c.tags, PREP=2, MSW=2, **c.params)
            for c in cases if not c.params.get("FORWARD", 0)]


SUITE = T.suite(
    kda_bwd_prep_tc, inputs=inputs, reference=reference, outputs=["bt", "eg"],
    tolerance=TOLERANCE, constraints=constraints, bytes=_bytes, flops=_flops,
    flops_dtype="bf16",
    # the PREP=1 and 2 twins (P and M, and T, on tensor cores) of both walks' cases
    cases=list(PR.SUITE.cases) + TC.prep_twins(PR.SUITE.cases)
    + msw_twins(PR.SUITE.cases))



def forward_twins(cases):
    """The forward walk's PREP=2 twins (pmt_fwd_ + name, FORWARD=1) of `cases`' T8192
    shapes: `benchmarks/kda_bench.sh prep2` times both walks beside kda_bwd_prep2, which
    replaces the two launches."""
    return [T.case("pmt_fwd_" + c.name, small=c.small, tags=c.tags, FORWARD=1, PREP=2,
                   **c.params) for c in cases if c.name.startswith("t8192")]


# timing only (no reference), tagged "timing": kda_bwd_local's shapes and the PREP=1 and 2
# twins at T8192; `benchmarks/kda_bench.sh tc` times T8192 H96 beside kda_bwd_chain_prep, `tc2`
# PREP=0, 1 and 2 side by side (the reverse walk's: it leaves out the pmt_fwd_ twins, group
# prep2's)
SUITE_TIMING = T.suite(
    kda_bwd_prep_tc, inputs=timing_inputs, outputs=["bt", "eg"], constraints=constraints,
    bytes=_bytes, flops=_flops, flops_dtype="bf16",
    cases=TC.timing_cases(PR.SUITE_TIMING.cases) + forward_twins(PR.SUITE_TIMING.cases)
    + msw_twins([c for c in PR.SUITE_TIMING.cases if c.name.startswith("t8192")]))
