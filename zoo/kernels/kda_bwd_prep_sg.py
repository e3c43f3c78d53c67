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

WALK=1 (the default, and the small cases): the prep, then kda_bwd_prep_tc's reverse walk (N,
B^T = dO^T U), a drop-in for kda_bwd_prep_tc[pmt_..]. WALK=0: the prep and exp(G_C) only, the
twin of kda_bwd_prep_only (its timing cases are named po_..).

Inputs and outputs: kda_bwd_prep_tc's (q, k, g_raw, y = dO [B, T, H, 128] bf16; beta [B, T, H]
bf16; A_log [H], dt_bias [H, K] f32; chunk_tok, chunk_rows [chunks] s32; nfrag, bt, eg).

Tags: linear-attention, backward, chunked, fused-gate, mma-sync, split-bf16, varlen
"""

from __future__ import annotations

import sys
from pathlib import Path

import tirxh.lang as T

# the zoo is a directory of kernel files, not a package (see kda_fwd.py)
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
import kda_bwd_chain_prep as PR  # noqa: E402 - after the path that finds it
import kda_bwd_local as BL  # noqa: E402
import kda_bwd_pieces_tc as TC  # noqa: E402
import kda_bwd_prep_tc as PT  # noqa: E402
import kda_bwd_reverse as BR  # noqa: E402
from kda_chunk import C, K  # noqa: E402

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


def prep(sm, ck, q, k, g_raw, beta, A_log, dt_bias, y):
    """kda_bwd_pieces_tc.prep at PREP=2 with the staged gate: stage loads, the norms (their
    loads beside the staging's), stage stores, ``bar.sync``, the gate from shared, then P and
    M, T blockwise, KE, QE, KL and y staged (kda_bwd_chain_prep.prep's phases unchanged)."""
    words = _stage_loads(ck, q, k, g_raw)
    BL._norms(sm, ck, q, k, beta)
    _stage_stores(sm, words)
    T.ptx.bar.sync(0)
    _gate(sm, ck, A_log, dt_bias)
    T.ptx.bar.sync(0)
    TC._pairs_tc(sm)
    T.ptx.bar.sync(0)
    TC._blocked_inverse(sm)
    BR._decayed(sm, ck, q, k, y)
    T.ptx.bar.sync(0)


@T.kernel(grid=PR._grid, block=256)
def kda_bwd_prep_sg(q: T.gptr[T.bf16], k: T.gptr[T.bf16], g_raw: T.gptr[T.bf16],
                    beta: T.gptr[T.bf16], A_log: T.gptr[T.f32], dt_bias: T.gptr[T.f32],
                    y: T.gptr[T.bf16], chunk_tok: T.gptr[T.s32], chunk_rows: T.gptr[T.s32],
                    nfrag: T.gptr[T.u32], bt: T.gptr[T.f32], eg: T.gptr[T.f32],
                    WALK: T.const = 1):
    sm, ck = PR.chunk_cta(chunk_tok, chunk_rows)
    prep(sm, ck, q, k, g_raw, beta, A_log, dt_bias, y)      # y in sm.do
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


def constraints(B, T_, H, lens=None, WALK=1):
    return PR.constraints(B, T_, H, lens, 0) + check_walk(WALK)


def _bytes(B, T_, H, lens=None, WALK=1):
    """kda_bwd_prep_tc's bytes with the walk (N's fragments and B^T written), else
    kda_bwd_prep_only's (q, k, g_raw, dO, beta read, exp(G_C) written)."""
    if WALK:
        return PR._bytes(B, T_, H, lens)
    return B * T_ * H * (4 * 2 * K + 2) + BL._chunks(B, T_, lens) * H * 4 * K


def _flops(B, T_, H, lens=None, WALK=1):
    """kda_bwd_prep_tc's PREP=2 reverse walk's, or the prep's products alone."""
    if WALK:
        return PT._flops(B, T_, H, lens, 0, 2)
    return 2 * TC.pm_macs(2) * BL._chunks(B, T_, lens) * H


SUITE = T.suite(
    kda_bwd_prep_sg, inputs=inputs, reference=reference, outputs=["bt", "eg"],
    tolerance=TOLERANCE, constraints=constraints, bytes=_bytes, flops=_flops,
    flops_dtype="bf16",
    # kda_bwd_chain_prep's reverse-walk cases: one 20-row chunk (deep gates), the varlen pack
    cases=[c for c in PR.SUITE.cases if not c.params.get("FORWARD")])

# timing only (no reference), tagged "timing": the T8192 shapes with the walk (as kda_bwd_prep_tc
# [pmt_..]) and without it (po_.., as kda_bwd_prep_only); `benchmarks/kda_bench.sh calib` with
# CALIB_EXTRA=kda_bwd_prep_sg times them beside those two in one job
SUITE_TIMING = T.suite(
    kda_bwd_prep_sg, inputs=timing_inputs, outputs=["bt", "eg"], constraints=constraints,
    bytes=_bytes, flops=_flops, flops_dtype="bf16",
    cases=[c for c in PR.SUITE_TIMING.cases if c.name.startswith("t8192")]
    + [T.case("po_" + c.name, small=c.small, tags=c.tags, WALK=0, **c.params)
       for c in PR.SUITE_TIMING.cases if c.name.startswith("t8192")])
