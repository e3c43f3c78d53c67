"""Kimi Delta Attention backward, piece 3 of the chunked split with its products on tensor cores
(issue 18; docs/TUNING.md "Forward + backward at 3x"): the same inputs, outputs and parameter
order as kda_bwd_local (dq, dk, dg, dbeta, dA_log, ddt_bias of every chunk at once, one CTA per
(head, chunk), from the chunk's own q, k, g_raw, beta and the reverse pass's pieces), so
kda_fwd_bwd's plan "tc" can swap it in.

Math: kda_bwd_local's (its module docstring). What changes: the f32 phases that build the
operands (norms, gate and the decayed KL, KD, QL, the inverse T) and the ones
after the products (dbeta, the reverse scan and gate chain, the norms' dots, dq and dk, the gate
parameters' sums) are kda_bwd_local's functions, unchanged; the products between them are
kda_bwd_pieces_tc's split-operand ``mma.sync.m16n8k16`` (every f32 operand as bf16 hi + lo,
three mma a product: lo hi + hi lo + hi hi; the pair gradients three ways, below) instead of
f32 FMAs with one ``ld.shared`` each:

    X = T^T dtb Diag(beta)                    [C, C]   (kda_bwd_pieces_tc._product)
    dA = -strict_lower(X T^T), dA o P, dP      [C, C]   (the same)
    P = strict_lower(KL F KD^T)               [C, C]   (F folded into KL's fragment)
    da_P, da_M = (dP, dm) (KD F_a.)  x L       [C, K]   (one B fragment for both A operands)
    db_P + db_M = (dP^T (KL F_.b) + dm^T (QL F_.b)) x D   (one accumulator: only the sum is used)

The pair gradients (da, db) split both operands three ways (hi + mid + lo, six mma a product:
`_block_products`): dG's sums cancel, and with the two-way split dg and ddt_bias (a head's sum
of dg over every token) carried 16x kda_bwd_local's error and grew with the chunks (numsim,
mixed gates: ddt_bias 0.13 of the public allowance at 2 chunks, 0.30 at 10; three ways 0.020
and 0.014, kda_bwd_local's 0.008 and 0.023).

The decay factors stay kda_bwd_local's 16-row block references: a k-step of 16 contraction rows
is exactly one row block s, so its B fragment's elements (one channel d a lane and n-tile) take
one factor F = 2^(r_a - r_s) (da) or 2^(r_s - r_a) (db), a = the warp's m-tile, before the
split; k-steps past the triangle (s > a for da, s < a for db) are skipped (their factors can
overflow; their dP, dm are zero). P's block (a, b) takes F_ab on its A operand KL (the
contraction index: one factor an element of the fragment, `_Decayed`); blocks past the diagonal
are skipped and stored as zeros. The elementwise terms (dqs, dk^, dG) are computed per
accumulator element, in the mma C layout, and the chunk's column sum of dkl k^ exp(G_C - G)
by a ``shfl.sync.bfly`` over a warp's 8 row groups and a [4, K] shared partial per m-tile.

Work split: warp w takes m-tile w % 4 (16 rows) and column half w / 4 of each output
(kda_bwd_pieces_tc._Lane); the da and db accumulators (3 x 32 a lane) stay in registers across
the barrier that frees KL, KD, QL, and the elementwise results go straight into those tiles.

Phases (``bar.sync`` between): norms and beta -> gate, G, KL, KD, QL -> P (dtb staged) -> T ->
X (mma), dbeta's colsum(dtb o T), dm staged -> dA (mma), dA o P, dP -> dbeta; the db and da
products -> the elementwise terms into the freed tiles, column partials -> (the partials
folded) the reverse scan and gate chain, the norms' dots -> dq, dk -> the gate parameters' sums.

Shared memory: kda_bwd_local's 216 KB and the [4, K] column partials (2 KB).

Each phase is an iket range (nothing in a normal build): session 30's profile at T8192 H64 (an
H100) put a CTA's 120.6 us at `grads` 25.1%, `gate` 21.0%, `inverse` 15.7%, `scan` 13.2%
(docs/PERFORMANCE.md "Session 30"; the summary's CTA phases, since a warp idle in a phase
records the barrier's wait in its next range). kda_bwd_local_ld (plan "tc5" of kda_fwd_bwd) is
this kernel with T loaded from the tiles the prep launch stored (kda_bwd_prep_tiles.load_t)
instead of the two warps' forward substitution: 0.863x the launch's time, the plan 0.950x.
kda_bwd_local_lg (plan "tc6") loads the norms' and gate's tiles too (two bulk copies on an
mbarrier, T's load under them), in place of the norms and gate phases.

Tags: linear-attention, backward, chunked, fused-gate, mma-sync, split-bf16, varlen
"""

from __future__ import annotations

import sys
from pathlib import Path

import tirxh.lang as T

# the zoo is a directory of kernel files, not a package (see kda_fwd.py)
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
import kda_bwd as BW  # noqa: E402 - after the path that finds it
import kda_bwd_local as BL  # noqa: E402
import kda_bwd_pieces_tc as TC  # noqa: E402
import kda_bwd_prep_tiles as PTL  # noqa: E402
from kda_chunk import C, K, mma, pack, unpack  # noqa: E402

TAGS = ("linear-attention", "backward", "chunked", "fused-gate", "mma-sync", "split-bf16",
        "varlen")

NB, SK, SC = BL.NB, BL.SK, BL.SC
FULL = TC.FULL
A_PAIRS, B_PAIRS = TC.A_PAIRS, TC.B_PAIRS


def _stage(tile, ck, piece):
    """tile = the chunk's [C, C] piece (16 elements a thread, consecutive threads on
    consecutive columns: 16 global loads in flight at once)."""
    t = T.tid.x
    for r in range(C * C // 256):
        m, c = r * 4 + (t >> 6), t & (C - 1)
        T.ptx.st.shared.f32(tile.at(m, c), T.ptx.ld.global_.f32(piece.at(ck.piece(m, C) + c)))


class _Decayed(TC._Src):
    """KL (rows of block a) with column d times F_ab[d] = 2^(r_a - r_b) as it is loaded: the
    A operand of P's block (a, b). kda_bwd_pieces_tc._product hands `scale(k0)` (here k0
    itself) to `pair` as its `sbase`."""

    def __init__(self, src, sm, a, b):
        super().__init__(src.at, src.rs, src.cs, src.ld, scale=lambda k0: k0)
        self.sm, self.a, self.b = sm, a, b

    def pair(self, base, k0, dr, dc, step):
        return [src * BL._factor(self.sm, self.a, self.b, k0 + dc + e * step[1])
                for e, src in enumerate(TC._Src.pair(
                    TC._Src(self.at, self.rs, self.cs, self.ld), base, None, dr, dc, step))]


def _pairs(sm, ln, ck, dtb, loaded=False):
    """P[i, j] = sum_d KL[i, d] F_ab[d] KD[j, d] for j < i, 0 elsewhere (mma): the warp's
    m-tile a against its two column blocks b (skipped past the diagonal, b > a: zeros stored);
    first dtb staged in sAP (free until dA). `loaded`: P is in sP already (the prep's,
    kda_bwd_local_lg PLOAD=1), only dtb is staged."""
    _stage(sm.ap, ck, dtb)
    if loaded:
        return
    a = ln.m0 >> 4
    kdt = TC._shared(sm.kd, SK, transposed=True)
    for bl in range(2):
        b = 2 * ln.half + bl
        n0s = [16 * b, 16 * b + 8]
        acc = TC._acc(2)
        with T.if_(b <= a):
            TC._product(ln, acc, _Decayed(TC._shared(sm.kl, SK), sm, a, b), kdt, n0s, K // 16)
        for j, e, row, col in TC._elements(ln, n0s):
            T.ptx.st.shared.f32(sm.p.at(row, col), T.ptx.selp.f32(acc[j][e], 0.0, col < row))


def _x_and_staging(sm, ln, ck, dm):
    """X = T^T dtb Diag(beta) (mma; dtb staged in sAP by `_pairs`) into sX; dbeta's
    first term colsum(dtb o T) into sDb (threads 0..63); dm staged in sDM (16 elements a
    thread, consecutive threads on consecutive columns)."""
    n0s = ln.cols(C)
    acc = TC._acc(len(n0s))
    TC._product(ln, acc, TC._shared(sm.t, SC, transposed=True), TC._shared(sm.ap, SC), n0s,
                C // 16)
    for j, e, row, col in TC._elements(ln, n0s):
        T.ptx.st.shared.f32(sm.x.at(row, col), acc[j][e] * T.ptx.ld.shared.f32(sm.beta.at(col)))
    _stage(sm.dm, ck, dm)
    t = T.tid.x
    with T.if_(t < C):
        s = None
        for i in range(C):
            x = T.ptx.ld.shared.f32(sm.ap.at(i, t))
            y = T.ptx.ld.shared.f32(sm.t.at(i, t))
            s = x * y if s is None else T.ptx.fma.rn.f32(x, y, s)
        T.ptx.st.shared.f32(sm.db.at(t), s)


def _da(sm, ln):
    """dA = -strict_lower(X T^T) (mma): dA o P into sAP (dbeta's second term), dP = Diag(beta)
    dA over P (each element read, then written, by the lane that computed it)."""
    n0s = ln.cols(C)
    acc = TC._acc(len(n0s))
    TC._product(ln, acc, TC._shared(sm.x, SC), TC._shared(sm.t, SC, transposed=True), n0s,
                C // 16)
    for j, e, m, n in TC._elements(ln, n0s):
        dA = T.ptx.selp.f32(-acc[j][e], 0.0, n < m)
        T.ptx.st.shared.f32(sm.ap.at(m, n), dA * T.ptx.ld.shared.f32(sm.p.at(m, n)))
        T.ptx.st.shared.f32(sm.p.at(m, n), dA * T.ptx.ld.shared.f32(sm.beta.at(m)))


def _scaled(src, f):
    """`src` with every element multiplied by the register f as it is loaded."""
    return TC._Src(src.at, src.rs, src.cs, lambda a: src.ld(a) * f)


def _frag3(src, base, coords, step):
    """(hi, mid, lo) bf16x2 fragment words of the f32 pairs at `coords` from `base`: x = hi +
    mid + lo to ~2^-24 (kda_bwd_pieces_tc._split2 twice)."""
    parts = ([], [], [])
    for dr, dc in coords:
        x0, x1 = src.pair(base, None, dr, dc, step)
        hi, mid = TC._split2(x0, x1)
        (h0, h1), (m0, m1) = unpack(hi), unpack(mid)
        for out, w in zip(parts, (hi, mid, pack((x0 - h0) - m0, (x1 - h1) - m1))):
            out.append(w)
    return parts


# the products of the three-way split kept (index sums <= 2), smallest first
SPLIT3 = [(1, 1), (2, 0), (0, 2), (1, 0), (0, 1), (0, 0)]


def _block_products(sm, ln, terms, first, stop, factor):
    """acc[j] += A[m0 .., 16 s ..] (B[16 s .., n0s[j] ..] x F_s) over the k-steps s in [first,
    stop) for each (A, B, acc) in `terms` ([C, C] and [C, K] `_Src`s): one three-way A
    fragment per distinct A and one scaled three-way B fragment per distinct B and n-tile, six
    mma a product (SPLIT3; the module docstring says why three ways). factor(s, d) is the B
    elements' factor of k-step (row block) s and channel d."""
    n0s = ln.cols(K)
    r = ln.m0 + ln.g
    with T.range(first, stop) as s:
        k0 = (s << 4) + 2 * ln.t
        afr = {}
        for a, _, _ in terms:
            if id(a) not in afr:
                afr[id(a)] = _frag3(a, a.at(r, k0), A_PAIRS, (0, 1))
        for j, n0 in enumerate(n0s):
            f = factor(s, n0 + ln.g)
            bfr = {}
            for _, b, _ in terms:
                if id(b) not in bfr:
                    bfr[id(b)] = _frag3(_scaled(b, f), b.at(k0, n0 + ln.g), B_PAIRS, (1, 0))
            for a, b, acc in terms:
                for x, y in SPLIT3:
                    mma(acc[j], afr[id(a)][x], bfr[id(b)][y])


def _grads(sm, ln):
    """The pairwise gradients of the warp's m-tile a and column half, unscaled: (da_P, da_M,
    db_P + db_M) accumulators; da over the row blocks s <= a with F = 2^(r_a - r_s), db over
    s >= a with F = 2^(r_s - r_a) (kda_bwd_local._block_grads' sums, as mma)."""
    a = ln.m0 >> 4
    n = len(ln.cols(K))
    dp, dmt = TC._shared(sm.p, SC), TC._shared(sm.dm, SC)
    dpt, dmtt = TC._shared(sm.p, SC, True), TC._shared(sm.dm, SC, True)
    dbs = TC._acc(n)
    terms = [(dpt, TC._shared(sm.kl, SK), dbs), (dmtt, TC._shared(sm.ql, SK), dbs)]
    _block_products(sm, ln, terms, a, NB, lambda s, d: BL._factor(sm, s, a, d))
    dap, dam = TC._acc(n), TC._acc(n)
    kd = TC._shared(sm.kd, SK)
    _block_products(sm, ln, [(dp, kd, dap), (dmt, kd, dam)], 0, a + 1,
                    lambda s, d: BL._factor(sm, a, s, d))
    return dap, dam, dbs


def _elementwise(sm, ln, ck, q, k, pieces, colq, roll=False, after_products=None):
    """After the products (and a barrier: they read KL, KD, QL of every row), per accumulator
    pair (row i, channels d, d + 1): dqs, dk^, dG (kda_bwd_local._elementwise's terms) over QL,
    KL, KD; the column sums of dkl k^ exp(G_C - G) over the warp's rows into colq[a]. `roll`
    (kda_bwd_local_lg ROLL=2): `_elementwise_rolled`. `after_products()`, if given, runs right
    after the products' barrier (kda_bwd_local_lg QKSTAGE=1: q's and k's rows copied into the
    P, dM and dtb tiles the products were the last to read)."""
    with T.iket.range("pair_products"):
        grads = _grads(sm, ln)
    T.ptx.bar.sync(0)
    if after_products is not None:
        with T.iket.range("stage_qk"):
            after_products()
    with T.iket.range("elementwise"):
        if roll:
            _elementwise_rolled(sm, ln, ck, q, k, pieces, colq, grads)
            return
        n0s = ln.cols(K)
        a = ln.m0 >> 4
        cols = []
        for j, n0 in enumerate(n0s):
            d = n0 + 2 * ln.t
            cols.append((d, _tile_terms(sm, ln, ck, q, k, pieces, a, d,
                                        [acc[j] for acc in grads])))
        for d, col in cols:
            _column_sums(ln, colq, a, d, col)


# n-tiles of `_elementwise_rolled`'s loop body (its trips: 8 / ELEMENTWISE_TILES)
ELEMENTWISE_TILES = 2


def _elementwise_rolled(sm, ln, ck, q, k, pieces, colq, grads):
    """`_elementwise` over the warp's 8 n-tiles as a runtime loop of ELEMENTWISE_TILES tiles a
    trip: a trip takes accumulators 0 .. ELEMENTWISE_TILES - 1 and then moves the rest down
    (``mov``: 72 a trip), since registers cannot be indexed at run time; each tile's column
    sums right after it. The same terms in the same order, so the same words. Why: the
    unrolled form was 1,951 of the launch's 6,680 SASS instructions, straight-line code that
    every CTA fetches again (kda_bwd_prep3g ROLL=3 has the same reason)."""
    a = ln.m0 >> 4
    n = len(ln.cols(K))
    with T.range(n // ELEMENTWISE_TILES, unroll=1) as trip:
        for u in range(ELEMENTWISE_TILES):
            d = ln.half * (K // 2) + ((trip * ELEMENTWISE_TILES + u) << 3) + 2 * ln.t
            col = _tile_terms(sm, ln, ck, q, k, pieces, a, d, [acc[u] for acc in grads])
            _column_sums(ln, colq, a, d, col)
        for acc in grads:
            for j in range(n - ELEMENTWISE_TILES):
                for e in range(4):
                    acc[j][e].set(acc[j + ELEMENTWISE_TILES][e])


def _tile_terms(sm, ln, ck, q, k, pieces, a, d, tile):
    """One n-tile's elementwise terms (channels d, d + 1 of rows m0 + g, m0 + g + 8 of m-tile
    a), from its accumulators `tile` = (da_P, da_M, db) of `_grads`: dqs, dk^, dG stored over
    QL, KL, KD; returns the lane's two column partials of dkl k^ exp(G_C - G)."""
    dap, dam, dbs = tile
    GC = [T.ptx.ld.shared.f32(sm.g.at(C - 1, d + e)) for e in range(2)]
    ref = [T.ptx.ld.shared.f32(sm.ref.at(a, d + e)) for e in range(2)]
    col = [None, None]
    for h in range(2):
        i = ln.m0 + ln.g + 8 * h
        off = ck.row(i) + d
        kh = [x * T.ptx.ld.shared.f32(sm.rn.at(0, i))
              for x in unpack(T.ptx.ld.global_.nc.b32(k.at(off)))]
        qs = [x * T.ptx.ld.shared.f32(sm.rn.at(1, i))
              for x in unpack(T.ptx.ld.global_.nc.b32(q.at(off)))]
        xq, xk, xl = (T.ptx.ld.global_.v2.f32(p.at(ck.piece(i, K) + d)) for p in pieces)
        for e in range(2):
            x = 2 * h + e
            G = T.ptx.ld.shared.f32(sm.g.at(i, d + e))
            lf, df = T.ptx.ex2.approx.f32(G - ref[e]), T.ptx.ex2.approx.f32(ref[e] - G)
            eg, egc = T.ptx.ex2.approx.f32(G), T.ptx.ex2.approx.f32(GC[e] - G)
            p_, m_, b_ = dap[x] * lf, dam[x] * lf, dbs[x] * df
            dqs = T.ptx.fma.rn.f32(xq[e], eg, m_)
            dkh = T.ptx.fma.rn.f32(xk[e], eg, T.ptx.fma.rn.f32(xl[e], egc, p_ + b_))
            kl = kh[e] * egc
            dG = (xq[e] * (qs[e] * eg) + xk[e] * (kh[e] * eg) - xl[e] * kl
                  + kh[e] * (p_ - b_) + qs[e] * m_)
            col[e] = xl[e] * kl if col[e] is None else T.ptx.fma.rn.f32(xl[e], kl, col[e])
            T.ptx.st.shared.f32(sm.ql.at(i, d + e), dqs)
            T.ptx.st.shared.f32(sm.kl.at(i, d + e), dkh)
            T.ptx.st.shared.f32(sm.kd.at(i, d + e), dG)
    return col


def _column_sums(ln, colq, a, d, col):
    """The column partials `col` of channels d, d + 1 summed over the 8 row groups g (lane bits
    2..4) into colq[a] (lanes g = 0 store)."""
    for e in range(2):
        s = col[e]
        for m in (4, 8, 16):
            s = s + T.ptx.mov.f32(T.ptx.shfl.sync.bfly.b32(T.ptx.mov.b32(s), m, 0x1F, FULL))
        T.ptx.st.shared.f32(colq.at(a, d + e), s, pred=ln.g == 0)


def _prefetch(ck, q, k, pieces, g_raw=None):
    """``prefetch.global.L2`` of every 128-byte line `_tile_terms` will read, four a thread:
    the three pieces' rows of the chunk and head (C rows of K f32, 512 bytes: four lines a row;
    thread t takes row t / 4, line t % 4 of each) and the C rows of k (warps 0..3) and q (warps
    4..7) at `ck.row` (rows past the sequence clamped as the loads clamp them; 256 bytes: two
    lines a row, thread t row (t / 2) % C, line t % 2). Addresses as the loads form theirs, so
    each lies inside its tensor. Why: session 36's iket profile (an H100, T8192 H16) put
    `elementwise` at 12.80 of a CTA's 45.06 us, ~2 us of it issue: the rest its ~128 KB of
    dependent global loads' latency (kda_bwd_local_lg PREFETCH). With `g_raw`, its C rows too
    (warps 0..3, as k's), which the scan reads a row at a time (kda_bwd_local_lg GRAW=1)."""
    t = T.tid.x
    i, d = t >> 2, (t & 3) << 5
    for p in pieces:
        T.ptx.prefetch.global_.L2(p.at(ck.piece(i, K) + d))
    off = ck.row((t >> 1) & (C - 1)) + ((t & 1) << 6)
    is_k = t < 2 * C
    T.ptx.prefetch.global_.L2(k.at(off), pred=is_k)
    T.ptx.prefetch.global_.L2(q.at(off), pred=~is_k)
    if g_raw is not None:
        T.ptx.prefetch.global_.L2(g_raw.at(off), pred=is_k)


# 128-byte lines of one (chunk, head)'s gate tiles (PTL.GATE_WORDS f32: 1,038 lines) and of a
# C x C f32 matrix of it (its stored T, its dtb and dm pieces: 128 lines); each starts on a line
GATE_LINES = PTL.GATE_WORDS * 4 // 128
T_LINES = C * C * 4 // 128


def _prefetch_next(gtile, ptile, dtb, dm, stride, p=False):
    """``prefetch.global.L2`` of every line CTA hc + `stride` will read in its first phases
    (kda_bwd_local_lg NEXT = `stride`, the CTAs resident at once: one an SM), hc = ctaid.y H +
    ctaid.x this CTA's (chunk, head) and launch order: `gates_load`'s gate tiles (GATE_LINES
    from element (hc + stride) GATE_WORDS of `gtile`, the two bulk copies' words) and stored
    T (T_LINES from (hc + stride) WORDS + T0 of `ptile`, `PTL.load_t`'s), and the dtb and dm
    pieces `pairs` and `x` stage (`_stage`: T_LINES each from (hc + stride) C C), as one run
    (`PTL.prefetch_runs`: thread t lines t + 256 j); none past the grid's last CTA. Issued
    before dq_dk, ~4 us before this CTA ends and the next wave's starts. Why: `gates_load` is
    the launch's first phase (2.05 us, p90 8.45, of a 39.17 us CTA: session 37, an H100, T8192
    H16), its 146 KB from HBM with nothing of its own CTA to hide them behind, and `pairs` and
    `x` each open on a staging round trip; the pieces launch's NEXT is the same. `p`: `gtile`
    with the prep's P after the gate's words (PLOAD=1), T_LINES more in the same run."""
    nxt, ok = PTL.next_wave(stride)
    PTL.prefetch_runs([(gtile, nxt * PTL.gate_words(p), GATE_LINES + (T_LINES if p else 0)),
                       (ptile, nxt * PTL.WORDS + PTL.T0, T_LINES),
                       (dtb, nxt * (C * C), T_LINES), (dm, nxt * (C * C), T_LINES)], ok)


class ScanStage:
    """The scan's operands copied into shared memory ahead of it (kda_bwd_local_lg GSTAGE=1):
    g_raw's C rows (`StagedRows` "g", 16 KB, into sT) and the head's dgs row, dt_bias row and
    A_log word (1,028 bytes at the start of sX), one ``cp.async`` group a thread, issued once
    `da` (the last reader of sT and sX) is behind a barrier and waited for before the barrier
    that opens the scan. Why: session 39's profile (an H100, T8192 H16) put the scan's
    `scan_chain` (warps 0..3) at 6.05 us of a 35.71 us CTA and the row dots at 1.78, and its
    ncu samples on the scan's global loads (g_raw's four dependent rounds of 16 rows, and the
    prologue's A_log -> ex2 and dgs loads) even with g_raw prefetched to L2 (GRAW=1): an L2 hit
    is still ~1 us a round at one CTA an SM. The same words, read as the global path reads
    them (`cvt.f32.bf16` of the same bf16; rows past the sequence clamped alike): the same
    outputs, bit for bit."""

    DT_BIAS, A_LOG = K * 4, 2 * K * 4       # byte offsets in sX (dgs's row at 0)

    def __init__(self, sm, qk=False):
        self.rows = BL.StagedRows({"g": (sm.t, 0)})
        self.vec = sm.x
        # QKSTAGE=1: q's and k's rows for the row dots and dq_dk, into sDM and sAP (free once
        # the pair products are behind their barrier)
        self.qk = BL.StagedRows({"q": (sm.dm, 0), "k": (sm.ap, 0)}) if qk else None

    def stage_qk(self, ck, q, k):
        """Every thread: its four 16-byte pieces of q's and of k's rows, a second group (the
        same `wait`)."""
        self.qk.stage(ck, {"q": q, "k": k})

    def stage(self, ck, g_raw, dgs, dt_bias, A_log):
        """Every thread: its four 16-byte pieces of g_raw's rows; threads 0..31 dgs's row and
        32..63 dt_bias's (16 bytes each), thread 64 A_log's word; one commit group."""
        self.rows.stage(ck, {"g": g_raw}, commit=False)
        t = T.tid.x
        with T.if_(t < 32):
            T.ptx.cp.async_.cg.shared.global_(
                self.vec.ptr(0) + t * 16, dgs.at((ck.c * ck.H + ck.h) * K + t * 4), 16)
        with T.if_((t >= 32) & (t < 64)):
            T.ptx.cp.async_.cg.shared.global_(
                self.vec.ptr(self.DT_BIAS) + (t - 32) * 16,
                dt_bias.at(ck.h * K + (t - 32) * 4), 16)
        with T.if_(t == 64):
            T.ptx.cp.async_.ca.shared.global_(self.vec.ptr(self.A_LOG), A_log.at(ck.h), 4)
        T.ptx.cp.async_.commit_group()

    def wait(self):
        """This thread's copies landed (the caller's barrier publishes everyone's)."""
        T.ptx.cp.async_.wait_group(0)

    def graw(self, b, u, d):
        return self.rows.elem("g", b, u, d)

    def dgs(self, d):
        return T.ptx.ld.shared.f32(self.vec.ptr(0) + d * 4)

    def dt_bias(self, d):
        return T.ptx.ld.shared.f32(self.vec.ptr(self.DT_BIAS) + d * 4)

    def a_log(self):
        return T.ptx.ld.shared.f32(self.vec.ptr(self.A_LOG))


def _fold_columns(sm, colq):
    """Threads 0..127, channel d: kda_bwd_local's two column partials from the four m-tiles'
    (the same thread reads them in the scan)."""
    d = T.tid.x
    with T.if_(d < K):
        for x in range(2):
            T.ptx.st.shared.f32(sm.col.at(x, d), T.ptx.ld.shared.f32(colq.at(2 * x, d))
                                + T.ptx.ld.shared.f32(colq.at(2 * x + 1, d)))


def _piece3(q, k, g_raw, beta, A_log, dt_bias, chunk_tok, chunk_rows, dqe, dke, dkl, dm, dtb,
            dgs, gred, cnt, dq, dk, dg, dbeta, dA_log, ddt_bias, inverse=None, gtile=None,
            roll=False, prefetch=0, before_dq_dk=None, p_stored=False, graw=False,
            gstage=False, qkstage=False):
    """Piece 3's phases (the module docstring), each an iket range with the barriers between
    them outside (nothing in a normal build): `tirxh profile --iket` then gives each phase's
    wall in the summary's CTA phase table. `inverse(sm, ck)` fills sT (T) instead of the
    forward substitution (kda_bwd_local_ld: the prep launch's stored T). With `gtile` (and
    `inverse`), the norms' and gate's tiles come from the prep launch too (`_loaded_gates`).
    `roll`: the scan, the row dots and dq_dk as runtime loops (kda_bwd_local_lg ROLL=1).
    `prefetch`: `_prefetch` of the elementwise terms' lines first (1) or right before the pair
    products (2) (kda_bwd_local_lg PREFETCH). `before_dq_dk()`, if given, runs before the
    dq_dk phase (kda_bwd_local_lg NEXT: the next wave's prefetches). `p_stored`: `gtile` holds
    the prep's P too (its stride GATE_WORDS_P) and `inverse` loads it into sP, so `pairs`
    only stages dtb (kda_bwd_local_lg PLOAD=1). `graw`: `_prefetch` takes g_raw's rows too
    (kda_bwd_local_lg GRAW=1). `gstage`: the scan's operands copied into shared memory
    (`ScanStage`) after `da`, the scan reading them there (kda_bwd_local_lg GSTAGE=1);
    `qkstage` (with `gstage`): q's and k's rows too, after the pair products, for the row dots
    and dq_dk (kda_bwd_local_lg QKSTAGE=1)."""
    sm = BL._Smem()
    colq = T.shared(T.f32, (NB, K), name="sColQ", align=16)
    ck = BL._Chunk(chunk_tok, chunk_rows)
    ln = TC._Lane()
    pieces = (dqe, dke, dkl)
    if prefetch == 1:
        with T.iket.range("prefetch"):
            _prefetch(ck, q, k, pieces, g_raw if graw else None)
    if gtile is None:
        with T.iket.range("norms"):
            BL._norms(sm, ck, q, k, beta)
        T.ptx.bar.sync(0)
        with T.iket.range("gate"):
            BL._gate(sm, ck, q, k, g_raw, A_log, dt_bias)
    else:
        with T.iket.range("gates_load"):
            _loaded_gates(sm, ck, gtile, inverse, p_stored)
    T.ptx.bar.sync(0)
    with T.iket.range("pairs"):
        _pairs(sm, ln, ck, dtb, p_stored)
    T.ptx.bar.sync(0)
    if gtile is None:
        with T.iket.range("inverse" if inverse is None else "t_load"):
            if inverse is None:
                BL._inverse(sm)
            else:
                inverse(sm, ck)
        T.ptx.bar.sync(0)
    with T.iket.range("x"):
        _x_and_staging(sm, ln, ck, dm)
    T.ptx.bar.sync(0)
    with T.iket.range("da"):
        _da(sm, ln)
    T.ptx.bar.sync(0)
    with T.iket.range("dbeta"):   # then `_elementwise`'s ranges: pair_products, elementwise
        BL._dbeta(sm, ck, dbeta)   # (sessions 30-35's "grads" was the three together)
    staged = ScanStage(sm, qkstage) if gstage else None
    if prefetch == 2 or staged is not None:
        with T.iket.range("prefetch"):
            if prefetch == 2:
                _prefetch(ck, q, k, pieces, g_raw if graw else None)
            if staged is not None:
                staged.stage(ck, g_raw, dgs, dt_bias, A_log)
    _elementwise(sm, ln, ck, q, k, pieces, colq, roll >= 2,
                 (lambda: staged.stage_qk(ck, q, k)) if qkstage else None)
    if staged is not None:
        staged.wait()
    T.ptx.bar.sync(0)
    with T.iket.range("scan"):
        _fold_columns(sm, colq)
        BL._scan_and_dots(sm, ck, q, k, g_raw, A_log, dt_bias, dgs, dg, roll, staged)
    T.ptx.bar.sync(0)
    if before_dq_dk is not None:
        with T.iket.range("next"):
            before_dq_dk()
    with T.iket.range("dq_dk"):
        BL._dq_dk(sm, ck, q, k, dq, dk, roll, staged.qk if staged is not None else None)
    with T.iket.range("params"):
        BW._gate_params_grad(sm.gsum, sm.flag, gred, cnt, dA_log, ddt_bias, ck.h, ck.H)


@T.kernel(grid=BL._grid, block=256)
def kda_bwd_local_tc(q: T.gptr[T.bf16], k: T.gptr[T.bf16], g_raw: T.gptr[T.bf16],
                     beta: T.gptr[T.bf16], A_log: T.gptr[T.f32], dt_bias: T.gptr[T.f32],
                     chunk_tok: T.gptr[T.s32], chunk_rows: T.gptr[T.s32],
                     dqe: T.gptr[T.f32], dke: T.gptr[T.f32], dkl: T.gptr[T.f32],
                     dm: T.gptr[T.f32], dtb: T.gptr[T.f32], dgs: T.gptr[T.f32],
                     gred: T.gptr[T.f32], cnt: T.gptr[T.u32],
                     dq: T.gptr[T.f32], dk: T.gptr[T.f32], dg: T.gptr[T.f32],
                     dbeta: T.gptr[T.f32], dA_log: T.gptr[T.f32], ddt_bias: T.gptr[T.f32]):
    _piece3(q, k, g_raw, beta, A_log, dt_bias, chunk_tok, chunk_rows, dqe, dke, dkl, dm, dtb,
            dgs, gred, cnt, dq, dk, dg, dbeta, dA_log, ddt_bias)


@T.kernel(grid=BL._grid, block=256)
def kda_bwd_local_ld(q: T.gptr[T.bf16], k: T.gptr[T.bf16], g_raw: T.gptr[T.bf16],
                     beta: T.gptr[T.bf16], A_log: T.gptr[T.f32], dt_bias: T.gptr[T.f32],
                     chunk_tok: T.gptr[T.s32], chunk_rows: T.gptr[T.s32],
                     dqe: T.gptr[T.f32], dke: T.gptr[T.f32], dkl: T.gptr[T.f32],
                     dm: T.gptr[T.f32], dtb: T.gptr[T.f32], dgs: T.gptr[T.f32],
                     gred: T.gptr[T.f32], cnt: T.gptr[T.u32], ptile: T.gptr[T.f32],
                     dq: T.gptr[T.f32], dk: T.gptr[T.f32], dg: T.gptr[T.f32],
                     dbeta: T.gptr[T.f32], dA_log: T.gptr[T.f32], ddt_bias: T.gptr[T.f32]):
    """kda_bwd_local_tc with T loaded from the tiles kda_bwd_prep3s stored (`ptile`, plan
    "tc5" of kda_fwd_bwd) instead of its own forward substitution: the same matrix (I +
    Diag(beta) P)^-1 from the prep's blocked inverse (PREP=2), so equal within rounding, not
    bit for bit. Why: session 30's iket profile put the inverse at 15.7% of a CTA's time (two
    warps' 2,016-FMA chain), the load is 16 KB a CTA."""
    _piece3(q, k, g_raw, beta, A_log, dt_bias, chunk_tok, chunk_rows, dqe, dke, dkl, dm, dtb,
            dgs, gred, cnt, dq, dk, dg, dbeta, dA_log, ddt_bias,
            inverse=lambda sm, ck: PTL.load_t(sm.t, ck.c * ck.H + ck.h, ptile))


def _loaded_gates(sm, ck, gtile, inverse, p=False):
    """KL, KD, QL, G, rn and beta by two bulk copies from the prep's `gtile` (thread 0 arms an
    mbarrier; kda_bwd_prep_tiles.load_gates; `p`: `gtile` has P's words too), T (and with
    PLOAD=1 P) by `inverse` meanwhile (sT and sP are no tiles of the copies), then every
    thread waits on the copies and threads 0..127 take the block references from G's rows
    (the caller's barrier publishes them)."""
    full = PTL.one_shot_mbarrier()
    PTL.load_gates(sm, ck.c * ck.H + ck.h, gtile, full, p)
    T.ptx.bar.sync(0)            # the mbarrier's initialisation, before anyone waits on it
    inverse(sm, ck)
    full.wait(0)
    PTL.refs_from_g(sm, BL.BLK)


@T.kernel(grid=BL._grid, block=256)
def kda_bwd_local_lg(q: T.gptr[T.bf16], k: T.gptr[T.bf16], g_raw: T.gptr[T.bf16],
                     beta: T.gptr[T.bf16], A_log: T.gptr[T.f32], dt_bias: T.gptr[T.f32],
                     chunk_tok: T.gptr[T.s32], chunk_rows: T.gptr[T.s32],
                     dqe: T.gptr[T.f32], dke: T.gptr[T.f32], dkl: T.gptr[T.f32],
                     dm: T.gptr[T.f32], dtb: T.gptr[T.f32], dgs: T.gptr[T.f32],
                     gred: T.gptr[T.f32], cnt: T.gptr[T.u32], ptile: T.gptr[T.f32],
                     gtile: T.gptr[T.f32],
                     dq: T.gptr[T.f32], dk: T.gptr[T.f32], dg: T.gptr[T.f32],
                     dbeta: T.gptr[T.f32], dA_log: T.gptr[T.f32], ddt_bias: T.gptr[T.f32],
                     IMG: T.const = 0, ROLL: T.const.one_of(0, 1, 2) = 0,
                     PREFETCH: T.const.one_of(0, 1, 2) = 0, NEXT: T.const = 0,
                     PLOAD: T.const.one_of(0, 1) = 0, GRAW: T.const.one_of(0, 1) = 0,
                     GSTAGE: T.const.one_of(0, 1) = 0, QKSTAGE: T.const.one_of(0, 1) = 0):
    """kda_bwd_local_ld with the norms' and gate's tiles (KL, KD, QL, G, rn, beta: 130 KB)
    loaded from what kda_bwd_prep3g copied out (`gtile`, plan "tc6" of kda_fwd_bwd) instead of
    its own norms and gate phases: the same f32 words (both run kda_bwd_local._norms and
    ._gate on the same inputs), so bit for bit kda_bwd_local_ld's outputs. Why: session 30's
    profile put norms + gate at 25.9% of a CTA's time (their 194 scalar global loads queue
    behind the other SMs' traffic); two bulk copies cost one thread a few instructions, and T's
    load runs under them. Measured (session 31, an H100, T8192 H96): the launch 0.861x
    local_ld's time, not the ~0.75x the phase's share predicted. `beta` is unread (kept: the plans bind one parameter list). IMG=1:
    `ptile` in kda_bwd_prep_tiles' image layout (plan "tc8"). ROLL=1 (plan "tc11"): the scan,
    the row dots and dq_dk as runtime loops, the same words (kda_chunk.trips, .Running): 6,680
    SASS instructions, not 9,888, as kda_bwd_prep3g ROLL=1 shrank the prep (whose profile waited
    on instruction fetch); measured (session 32, an H100, T8192 H96) 4.33 ms against 8.52.
    ROLL=2 (plan "tc15"): the elementwise terms too (`_elementwise_rolled`: 5,344 instructions,
    83 KB), the same words; measured (session 34, an H100) 4.28 ms against ROLL=1's 4.34 at
    T8192 H96, 2.90 against 2.91 at H64: what was left to fetch cost little.
    PREFETCH=1: ``prefetch.global.L2`` of every line the elementwise terms load (the three
    pieces' 96 KB and k's and q's 64 rows: `_prefetch`, four a thread) at the launch's start;
    PREFETCH=2: the same right before the pair products (~7 us ahead, so less likely evicted
    first). Why: session 36's iket profile (an H100, T8192 H16, ROLL=1) put `elementwise` at
    12.80 of a CTA's 45.06 us, most of it waiting on those dependent loads. Hints only: the
    same words as PREFETCH=0. NEXT=S (IMG=0; S the CTAs resident at once, 132 on an H100 or
    H200): the lines `gates_load` of CTA hc + S will read prefetched before dq_dk
    (`_prefetch_next`); hints too. PLOAD=1 (the prep with PSTORE=1, plan "tc36"): P loaded
    from `gtile` (after the gate's words) beside T, under the gate tiles' copies, in place of
    the `pairs` phase's split products (5.12 of a 39.17 us CTA: session 37, an H100, T8192
    H16); the prep's P folds each decay factor into KD's fragment where this kernel folds it
    into KL's, so dbeta (the one output P enters) differs by rounding: equal within it, not
    bit for bit. Measured (session 38, an H100, T8192 H96): `pairs` 5.12 -> 0.51 us, the
    launch 0.939x PLOAD=0's time. GRAW=1 (with PREFETCH): g_raw's C rows prefetched with the
    elementwise terms' lines (one more instruction, warps 0..3), ~15 us before the scan reads
    them a row at a time (plan "tc37"); a hint: the same words. Why: session 37's profile put
    `scan` at 6.14 of a 39.17 us CTA, g_raw the one operand of the later phases nothing
    prefetched. Measured (session 38): the launch 0.989x, `scan` unmoved (6.40 us): the scan
    does not wait on g_raw in L2 alone. GSTAGE=1 (GRAW=0; plan "tc39"): g_raw's rows, dgs's
    and dt_bias's rows and A_log copied into shared memory (`ScanStage`, ``cp.async`` after
    `da`, ~15 us ahead) and the scan reading them there: bit for bit GSTAGE=0's outputs.
    Measured (session 39, an H100): `scan` 6.40 -> 2.82 us at T8192 H16, the launch 0.915x
    GSTAGE=0's time at H96. QKSTAGE=1 (with GSTAGE=1; plan "tc40"): q's and k's rows copied
    into sDM and sAP right after the pair products' barrier (`ScanStage.stage_qk`, the
    `stage_qk` range), read there by the row dots and dq_dk (2.26 and 2.82 us of tc39's 32.51
    us CTA, each on q's and k's global loads): bit for bit."""
    if QKSTAGE and not GSTAGE:
        raise ValueError("kda_bwd_local_lg: QKSTAGE=1 adds q's and k's rows to GSTAGE's "
                         "copies: it needs GSTAGE=1")
    if GSTAGE and GRAW:
        raise ValueError("kda_bwd_local_lg: GSTAGE=1 copies g_raw's rows into shared memory; "
                         "GRAW=1's L2 prefetch of the same rows is redundant: give one of them")
    if GRAW and not PREFETCH:
        raise ValueError("kda_bwd_local_lg: GRAW=1 adds g_raw's rows to PREFETCH's lines: it "
                         "needs PREFETCH=1 or 2")
    if NEXT < 0 or (NEXT and IMG):   # the plans bind constants without a suite's constraints
        raise ValueError(f"kda_bwd_local_lg: NEXT must be a CTA count >= 0 and needs IMG=0 "
                         f"(the stored layout's T), got NEXT={NEXT}, IMG={IMG}")

    def inverse(sm, ck):
        hc = ck.c * ck.H + ck.h
        PTL.load_t(sm.t, hc, ptile, bool(IMG))
        if PLOAD:
            PTL.load_p(sm.p, hc, gtile)

    _piece3(q, k, g_raw, beta, A_log, dt_bias, chunk_tok, chunk_rows, dqe, dke, dkl, dm, dtb,
            dgs, gred, cnt, dq, dk, dg, dbeta, dA_log, ddt_bias, inverse=inverse,
            gtile=gtile, roll=ROLL, prefetch=PREFETCH, p_stored=bool(PLOAD), graw=bool(GRAW),
            gstage=bool(GSTAGE), qkstage=bool(QKSTAGE),
            before_dq_dk=((lambda: _prefetch_next(gtile, ptile, dtb, dm, NEXT, bool(PLOAD)))
                          if NEXT else None))


# --- inputs, reference, cases: kda_bwd_local's ---------------------------------------------------

OUTPUTS = BL.OUTPUTS
inputs = BL.inputs
reference = BL.reference
timing_inputs = BL.timing_inputs
constraints = BL.constraints
_bytes = BL._bytes


def _flops(B, T_, H, lens=None):
    """The products' mma work at 2 FLOPs a multiply-add, per chunk and head: X, dA (C C C each)
    and P as three bf16 mma (the split), da_P, da_M, db_P, db_M as six (the three-way split);
    P and the pair gradients over the 10 of 16 block pairs on or below the diagonal (10/16 C C
    K each)."""
    per = 3 * (2 * C * C * C + (10 * C * C * K) // 16) + 6 * 4 * (10 * C * C * K) // 16
    return 2 * per * BL._chunks(B, T_, lens) * H


TOLERANCE = BL.TOLERANCE      # the public rule: atol = rtol = 0.01 on every element

SUITE = T.suite(
    kda_bwd_local_tc, inputs=inputs, reference=reference, outputs=list(OUTPUTS),
    tolerance=TOLERANCE, constraints=constraints, bytes=_bytes, flops=_flops,
    flops_dtype="bf16", cases=list(BL.SUITE.cases))

# timing only (no reference: `timing_inputs`), tagged "timing": `benchmarks/kda_bench.sh tc`
# times T8192 H96 beside kda_bwd_local
SUITE_TIMING = T.suite(
    kda_bwd_local_tc, inputs=timing_inputs, outputs=list(OUTPUTS), constraints=constraints,
    bytes=_bytes, flops=_flops, flops_dtype="bf16", cases=list(BL.SUITE_TIMING.cases))


def lg_timing_inputs(rng, B, T_, H, lens=None, gate="mixed", PLOAD=0):
    """kda_bwd_local_lg's timing inputs: kda_bwd_local's, and synthetic `ptile` and `gtile`
    (kda_bwd_prep_tiles.synthetic: what plan "tc7"'s prep launch would have stored; with P's
    words for PLOAD=1)."""
    x = timing_inputs(rng, B, T_, H, lens, gate)
    return dict(x, **PTL.synthetic(rng, H, len(x["chunk_tok"]), p=bool(PLOAD)))


# plan "tc7"'s piece 3 alone at T8192 H64 (timing only): what `tirxh profile` (iket phases, ncu)
# needs, since the plan job times its launches but profiles none of them; `tc19_t8192_h16`:
# plan "tc19"'s (ROLL=1) at H16, for iket (as kda_bwd_prep3's); `tc28_`, `tc29_`: plans "tc28"
# and "tc29"'s (PREFETCH=1, 2); `tc34_`: "tc34"'s (PREFETCH=2, NEXT=132); `tc36_`, `tc37_`,
# `tc39_`, `tc40_`: those plans'
SUITE_LG_TIMING = T.suite(
    kda_bwd_local_lg, inputs=lg_timing_inputs, outputs=list(OUTPUTS), constraints=constraints,
    bytes=_bytes, flops=_flops, flops_dtype="bf16",
    cases=[c for c in BL.SUITE_TIMING.cases if c.name == "t8192_h64"]
    + [T.case(f"tc{p}_t8192_h16", B=1, T_=8192, H=16, small=False, tags=("timing",), ROLL=1,
              **extra)
       for p, extra in ((19, {}), (28, dict(PREFETCH=1)), (29, dict(PREFETCH=2)),
                        (34, dict(PREFETCH=2, NEXT=132)),
                        (36, dict(PREFETCH=2, NEXT=132, PLOAD=1)),
                        (37, dict(PREFETCH=2, NEXT=132, PLOAD=1, GRAW=1)),
                        (39, dict(PREFETCH=2, NEXT=132, PLOAD=1, GSTAGE=1)),
                        (40, dict(PREFETCH=2, NEXT=132, PLOAD=1, GSTAGE=1, QKSTAGE=1)))])
