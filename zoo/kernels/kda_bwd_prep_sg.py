"""Kimi Delta Attention backward: piece 2a's prep with its gate phase reading the chunk's g_raw,
k and q from shared memory, staged there in one round of wide loads (issue 18;
docs/PERFORMANCE.md "Session 14, branch kdabwd11").

Why: session 14 measured the prep alone (kda_bwd_prep_only) at 2.65 ms at T8192 H96, ~56K
cycles a chunk-head, half of piece 2a. Its SASS waits on global loads in ~45 dependent rounds
on one CTA of 8 warps an SM, nothing else resident to hide them: the norms 3, the gate **25-26**
(kda_bwd_local._gate: threads 0..127, 64 rows of 3 scalar ``ld.global.nc.b16`` each, issued by
ptxas ~5-14 at a time between the uses of the row's sigmoid) and the second gate pass 16 (8
iterations of 2). Here all 256 threads first copy the chunk's three [64, 128] bf16 tiles
(rows past the sequence clamped to its last, as the gate's own loads) into shared memory free
until the P, M phase (g_raw and k into the P tile's 33 KB, q into M's 16 KB): 12
``ld.global.nc.v4.b32`` a thread, issued before any is stored, beside the norms' own loads.
The gate then reads ``ld.shared.b16`` (lane d at column d: two lanes a word, one wavefront).
Every value is the same bf16 element converted by the same ``cvt``, and every later phase is
kda_bwd_pieces_tc.prep's PREP=2 code: the outputs are bit-identical to kda_bwd_prep_tc's
(tests/zoo/test_kda_bwd_prep_sg.py).

STAGE=2 stages the second pass's loads too (16 rounds there: kda_bwd_reverse._decayed's k, q
and dO in 8-row iterations): dO by all 256 threads straight into its f32 tile after P and M,
k and q into the P tile after T's blocks (one barrier more), KE, QE, KL from there; ptxas
issues both rounds' loads before the barriers they follow, under P, M and T's blocks.

WALK=1 (the default, and the small cases): the prep, then kda_bwd_prep_tc's reverse walk (N,
B^T = dO^T U), a drop-in for kda_bwd_prep_tc[pmt_..]. WALK=0: the prep and exp(G_C) only, the
twin of kda_bwd_prep_only (its timing cases are named po_.. at STAGE=1, po2_.. at STAGE=2).

Inputs and outputs: kda_bwd_prep_tc's (q, k, g_raw, y = dO [B, T, H, 128] bf16; beta [B, T, H]
bf16; A_log [H], dt_bias [H, K] f32; chunk_tok, chunk_rows [chunks] s32; nfrag, bt, eg).

Tags: linear-attention, backward, chunked, fused-gate, mma-sync, split-bf16, varlen
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import tirxh.lang as T

# the zoo is a directory of kernel files, not a package (see kda_fwd.py)
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
import kda_bwd_chain_prep as PR  # noqa: E402 - after the path that finds it
import kda_bwd_local as BL  # noqa: E402
import kda_bwd_pieces_tc as TC  # noqa: E402
import kda_bwd_prep_tc as PT  # noqa: E402
import kda_bwd_reverse as BR  # noqa: E402
from kda_chunk import C, K, unpack  # noqa: E402

TAGS = ("linear-attention", "backward", "chunked", "fused-gate", "mma-sync", "split-bf16",
        "varlen")

ROW = K * 2               # bytes of a staged bf16 row
TILE = C * ROW            # 16 KB: one staged [64, 128] bf16 tile
CHUNKS = TILE // 16 // 256  # 16-byte chunks of a tile a thread (4)


def _staged(sm):
    """Shared byte addresses of the staged g_raw, k and q tiles: g_raw and k in the P tile
    (33,024 bytes), q in the M tile (16,384), both first written by the P, M phase."""
    return sm.p.ptr(), sm.p.ptr() + TILE, sm.m.ptr()


def _stage_loads(ck, q, k, g_raw):
    """Thread t's 16-byte chunks u = 0..3 of each tile: row 16 u + t / 16 (clamped into the
    sequence by ck.row), columns 8 (t % 16) ..; all 12 loads issued here, none used."""
    t = T.tid.x
    row, col = t >> 4, (t & 15) << 3
    return [T.ptx.ld.global_.nc.v4.b32(src.at(ck.row(row + 16 * u) + col))
            for src in (g_raw, k, q) for u in range(CHUNKS)]


def _stage_stores(sm, words):
    """The chunks of `_stage_loads` into the tiles: chunk u of thread t at byte 4096 u + 16 t
    (row 16 u + t / 16, column 8 (t % 16)); a warp's v4 stores cover 512 contiguous bytes."""
    t16 = T.tid.x << 4
    for n, base in enumerate(_staged(sm)):
        for u in range(CHUNKS):
            T.ptx.st.shared.v4.b32(base + t16 + 256 * 16 * u, words[n * CHUNKS + u])


def _bf16s(addr):
    """One staged bf16 element -> f32 (``ld.shared.b16``, ``cvt.f32.bf16``: the same value as
    kda_bwd_local._bf16 of the same element)."""
    return T.ptx.cvt.f32.bf16(T.ptx.ld.shared.b16(addr))


def _gate(sm, ck, A_log, dt_bias):
    """kda_bwd_local._gate with its three loads a row from the staged tiles: threads 0..127,
    channel d, G (log2 units), the block references r_a, KL = k^ L, KD = k^ D, QL = qs L."""
    d = T.tid.x
    gb, kb, qb = _staged(sm)
    with T.if_(d < K):
        _, c1, c0, _ = BL._gate_consts(A_log, dt_bias, ck, d)
        d2 = d << 1
        G = ref = None
        for i in range(C):
            off = d2 + i * ROW
            valid = i < ck.nv
            s = BL._sigmoid(_bf16s(gb + off), c1, c0)[1]
            g2 = T.ptx.selp.f32(s * BL.G2, 0.0, valid)
            G = g2 if i == 0 else G + g2
            if i % BL.BLK == 0:
                ref = G
                T.ptx.st.shared.f32(sm.ref.at(i // BL.BLK, d), ref)
            lf = T.ptx.ex2.approx.f32(G - ref)
            df = T.ptx.ex2.approx.f32(ref - G)
            kn = _bf16s(kb + off) * T.ptx.ld.shared.f32(sm.rn.at(0, i))
            qn = _bf16s(qb + off) * T.ptx.ld.shared.f32(sm.rn.at(1, i))
            T.ptx.st.shared.f32(sm.kl.at(i, d), kn * lf)
            T.ptx.st.shared.f32(sm.kd.at(i, d), kn * df)
            T.ptx.st.shared.f32(sm.ql.at(i, d), qn * lf)
            T.ptx.st.shared.f32(sm.g.at(i, d), G)


def _y_rows(sm, ck, y):
    """y (dO) into its f32 tile sm.do (rows past the sequence zero) by all 256 threads, the
    tile free since P and M: 16 ``ld.global.nc.b32`` a thread (two columns each; pair j of
    thread t at row 4 j + t / 64, columns 2 (t % 64) ..), all issued before the first store,
    where kda_bwd_reverse._decayed's threads 128..255 wait on 8 rounds of 8 scalar loads."""
    t = T.tid.x
    row0, col = t >> 6, (t & 63) << 1
    words = [T.ptx.ld.global_.nc.b32(y.at(ck.row(row0 + 4 * j) + col)) for j in range(16)]
    for j, w in enumerate(words):
        i = row0 + 4 * j
        for e, x in enumerate(unpack(w)):
            T.ptx.st.shared.f32(sm.do.at(i, col + e), T.ptx.selp.f32(x, 0.0, i < ck.nv))


def _kq_tiles(sm, ck, q, k):
    """k and q of the chunk into the P tile (free once T's blocks are formed: after the
    caller's barrier), as `_stage_loads` / `_stage_stores` place them: 8 v4 loads a thread."""
    t = T.tid.x
    row, col = t >> 4, (t & 15) << 3
    words = [T.ptx.ld.global_.nc.v4.b32(src.at(ck.row(row + 16 * u) + col))
             for src in (k, q) for u in range(CHUNKS)]
    t16 = t << 4
    for n, base in enumerate((sm.p.ptr(), sm.p.ptr() + TILE)):
        for u in range(CHUNKS):
            T.ptx.st.shared.v4.b32(base + t16 + 256 * 16 * u, words[n * CHUNKS + u])


def _decayed(sm):
    """kda_bwd_reverse._decayed's threads 0..127 with k and q read from the P tile
    (`_kq_tiles`): channel d, KE = k^ 2^G, QE = qs 2^G, KL = k^ 2^(G_C - G), exp(G_C)."""
    d = T.tid.x
    kb, qb = sm.p.ptr(), sm.p.ptr() + TILE
    with T.if_(d < K):
        GC = T.ptx.ld.shared.f32(sm.g.at(C - 1, d))
        T.ptx.st.shared.f32(sm.eg.at(d), T.ptx.ex2.approx.f32(GC))
        d2 = d << 1
        with T.range(C // BR.UNROLL) as i8:
            for u in range(BR.UNROLL):
                i = i8 * BR.UNROLL + u
                G = T.ptx.ld.shared.f32(sm.g.at(i, d))
                e = T.ptx.ex2.approx.f32(G)
                off = d2 + i * ROW
                kn = _bf16s(kb + off) * T.ptx.ld.shared.f32(sm.rn.at(0, i))
                qs = _bf16s(qb + off) * T.ptx.ld.shared.f32(sm.rn.at(1, i))
                T.ptx.st.shared.f32(sm.ke.at(i, d), kn * e)
                T.ptx.st.shared.f32(sm.qe.at(i, d), qs * e)
                T.ptx.st.shared.f32(sm.kl_.at(i, d), kn * T.ptx.ex2.approx.f32(GC - G))


def prep(sm, ck, q, k, g_raw, beta, A_log, dt_bias, y, STAGE=1):
    """kda_bwd_pieces_tc.prep at PREP=2 with the staged gate: stage loads, the norms (their
    loads beside the staging's), stage stores, ``bar.sync``, the gate from shared, then P and
    M, T blockwise, KE, QE, KL and y staged (kda_bwd_chain_prep.prep's phases unchanged).
    STAGE=2 also stages the second pass: y into its tile by all threads before T's blocks
    (beside them), then a barrier, k and q into the P tile, a barrier, KE, QE, KL from there."""
    words = _stage_loads(ck, q, k, g_raw)
    BL._norms(sm, ck, q, k, beta)
    _stage_stores(sm, words)
    T.ptx.bar.sync(0)
    _gate(sm, ck, A_log, dt_bias)
    T.ptx.bar.sync(0)
    TC._pairs_tc(sm)
    T.ptx.bar.sync(0)
    if STAGE == 2:
        _y_rows(sm, ck, y)
        TC._blocked_inverse(sm)
        T.ptx.bar.sync(0)
        _kq_tiles(sm, ck, q, k)
        T.ptx.bar.sync(0)
        _decayed(sm)
    else:
        TC._blocked_inverse(sm)
        BR._decayed(sm, ck, q, k, y)
    T.ptx.bar.sync(0)


@T.kernel(grid=PR._grid, block=256)
def kda_bwd_prep_sg(q: T.gptr[T.bf16], k: T.gptr[T.bf16], g_raw: T.gptr[T.bf16],
                    beta: T.gptr[T.bf16], A_log: T.gptr[T.f32], dt_bias: T.gptr[T.f32],
                    y: T.gptr[T.bf16], chunk_tok: T.gptr[T.s32], chunk_rows: T.gptr[T.s32],
                    nfrag: T.gptr[T.u32], bt: T.gptr[T.f32], eg: T.gptr[T.f32],
                    WALK: T.const = 1, STAGE: T.const = 1):
    sm, ck = PR.chunk_cta(chunk_tok, chunk_rows)
    prep(sm, ck, q, k, g_raw, beta, A_log, dt_bias, y, STAGE)      # y in sm.do
    hc = ck.c * ck.H + ck.h
    if WALK:
        PT.walk(sm, hc, nfrag, bt, 0, sm.do)
    with T.if_(T.tid.x < K):
        d = T.tid.x
        T.ptx.st.global_.f32(eg.at(hc * K + d), T.ptx.ld.shared.f32(sm.eg.at(d)))


# --- inputs, reference, cases: kda_bwd_prep_tc's reverse walk (FORWARD=0) -------------------------

OUTPUTS = PR.OUTPUTS
inputs = PR.inputs
reference = PR.reference
timing_inputs = PR.timing_inputs
TOLERANCE = PR.TOLERANCE


def check_walk(WALK):
    return [] if WALK in (0, 1) else [
        f"WALK={WALK} must be 1 (the prep and the reverse walk) or 0 (the prep alone)"]


def check_stage(STAGE):
    return [] if STAGE in (1, 2) else [
        f"STAGE={STAGE} must be 1 (the gate's inputs staged) or 2 (and the second pass's)"]


def constraints(B, T_, H, lens=None, WALK=1, STAGE=1):
    return PR.constraints(B, T_, H, lens, 0) + check_walk(WALK) + check_stage(STAGE)


def _bytes(B, T_, H, lens=None, WALK=1, STAGE=1):
    """kda_bwd_prep_tc's bytes with the walk (N's fragments and B^T written), else
    kda_bwd_prep_only's (q, k, g_raw, dO, beta read, exp(G_C) written)."""
    if WALK:
        return PR._bytes(B, T_, H, lens)
    return B * T_ * H * (4 * 2 * K + 2) + BL._chunks(B, T_, lens) * H * 4 * K


def _flops(B, T_, H, lens=None, WALK=1, STAGE=1):
    """kda_bwd_prep_tc's PREP=2 reverse walk's, or the prep's products alone."""
    if WALK:
        return PT._flops(B, T_, H, lens, 0, 2)
    return 2 * TC.pm_macs(2) * BL._chunks(B, T_, lens) * H


SUITE = T.suite(
    kda_bwd_prep_sg, inputs=inputs, reference=reference, outputs=["bt", "eg"],
    tolerance=TOLERANCE, constraints=constraints, bytes=_bytes, flops=_flops,
    flops_dtype="bf16",
    # kda_bwd_chain_prep's reverse-walk cases (one 20-row chunk, deep gates; the varlen pack on
    # 2 heads) and their STAGE=2 twins (s2_)
    cases=[c for c in PR.SUITE.cases if not c.params.get("FORWARD")]
    + [T.case("s2_" + c.name, small=c.small, tags=c.tags, STAGE=2, **c.params)
       for c in PR.SUITE.cases if not c.params.get("FORWARD")])

# timing only (no reference), tagged "timing": the T8192 shapes with the walk and both stagings
# (a drop-in for kda_bwd_prep_tc[pmt_..]) and the prep alone at STAGE 1 and 2 (po_.., po2_..,
# as kda_bwd_prep_only); `benchmarks/kda_bench.sh calib` with CALIB_EXTRA=kda_bwd_prep_sg times
# them beside those two in one job
_T8192 = [c for c in PR.SUITE_TIMING.cases if c.name.startswith("t8192")]
SUITE_TIMING = T.suite(
    kda_bwd_prep_sg, inputs=timing_inputs, outputs=["bt", "eg"], constraints=constraints,
    bytes=_bytes, flops=_flops, flops_dtype="bf16",
    cases=[T.case(c.name, small=c.small, tags=c.tags, STAGE=2, **c.params) for c in _T8192])
# the prep alone (WALK=0) writes exp(G_C) only: its own suite declares "eg" alone, as
# kda_bwd_prep_only's does. Declared with "bt" too (session 15, H200,
# /work/notes/s15/d6/calibsg/call.log) both failed: KCoral poisons a declared output before the
# first launch, and 'bt', never written, held NaN on the check of that launch
def prep_timing_inputs(rng, B, T_, H, lens=None, gate="mixed"):
    """`timing_inputs` with 'bt' one element: WALK=0 never touches it past loading its
    parameter (tests/zoo/test_kda_bwd_prep_sg.py), and as an undeclared buffer it would
    otherwise be uploaded whole (201326592 f32 zeros, 805 MB, at T8192 H96)."""
    return dict(timing_inputs(rng, B, T_, H, lens, gate), bt=np.zeros(1, np.float32))


SUITE_TIMING_PREP = T.suite(
    kda_bwd_prep_sg, inputs=prep_timing_inputs, outputs=["eg"], constraints=constraints,
    bytes=_bytes, flops=_flops, flops_dtype="bf16",
    cases=[T.case(pre + c.name, small=c.small, tags=c.tags, WALK=0, STAGE=st, **c.params)
           for pre, st in (("po_", 1), ("po2_", 2)) for c in _T8192])
