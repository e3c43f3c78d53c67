"""Kimi Delta Attention backward, piece 2a for BOTH walks in one launch (issue 18;
docs/TUNING.md "Forward + backward at 3x", the design's launch 2 `prep2`): the chunk's prep
(norms, gate, P, M, T, KE, QE, KL, exp(G_C)) once, then kda_bwd_prep_tc's products of the
reverse walk (kda_bwd_chain's operands: N, B^T = dO^T U) and of the forward walk (N, B^T = V^T
X), one CTA per (head, chunk). Plan "tc2" of kda_fwd_bwd runs kda_bwd_prep_tc twice (FORWARD=1
before the forward chain, FORWARD=0 before the reverse one), each launch computing the same
prep from the same inputs; at PREP=2 that prep is ~51K of a launch's ~105-115K
warp-instructions a chunk (numsim), the largest share of the piece furthest above its time
budget (docs/PERFORMANCE.md "Session 12, branch kdabwd9"). Here it is paid once and the
inputs q, k, g_raw, beta cross HBM once.

Phases (256 threads, ``bar.sync`` between; kda_bwd_prep_tc.walk is the products of one walk,
instruction for instruction): the prep with dO staged in sm.do (kda_bwd_pieces_tc.prep, its
PREP constant) -> the reverse walk (W into the G tile, U into the P tile, N and B^T written)
-> a barrier (the G tile is read by N) -> V staged into the QE tile (U was its last reader,
before the walk's own barrier; rows past the sequence zero, all 256 threads: thread = column
t % 128, rows 32 (t / 128) ..) -> the forward walk (X into the G tile, the walk's barrier, which
also publishes V, then N and B^T). Each walk's outputs are bit-identical to kda_bwd_prep_tc's
at the same PREP (tests/zoo/test_kda_bwd_prep2.py), so the chains read them unchanged; exp(G_C)
is one [chunks, H, K] output for both (the same values).

Inputs: q, k, g_raw, v, do [B, T, H, 128] bf16; beta [B, T, H] bf16; A_log [H], dt_bias [H, K]
f32; chunk_tok, chunk_rows [chunks] s32. Outputs: nfrag_f, bt_f (the forward walk's), nfrag, bt
(the reverse walk's) as kda_bwd_chain_prep's nfrag [chunks, H, 8, 16, 32, 4] u32 and bt
[chunks, H, V, K] f32; eg [chunks, H, K] f32.

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
import kda_bwd as BW  # noqa: E402 - after the path that finds it
import kda_bwd_chain as CH  # noqa: E402
import kda_bwd_chain_prep as PR  # noqa: E402
import kda_bwd_local as BL  # noqa: E402
import kda_bwd_pieces_tc as TC  # noqa: E402
import kda_bwd_prep_tc as PT  # noqa: E402
from kda_chunk import C, K, V  # noqa: E402

TAGS = ("linear-attention", "backward", "chunked", "fused-gate", "mma-sync", "split-bf16",
        "varlen")

UNROLL = 8                # rows of V staged per loop iteration (their global loads in flight)


def _stage_v(sm, ck, v):
    """V of the chunk into the QE tile (rows past the sequence zero): thread t, column t % 128,
    rows 32 (t / 128) .. + 31."""
    col = T.tid.x & (V - 1)
    i0 = (T.tid.x >> 7) * (C // 2)
    with T.range(C // 2 // UNROLL) as i8:
        for u in range(UNROLL):
            i = i0 + i8 * UNROLL + u
            x = BW._bf16(v, ck.row(i) + col)
            T.ptx.st.shared.f32(sm.qe.at(i, col), T.ptx.selp.f32(x, 0.0, i < ck.nv))


@T.kernel(grid=PR._grid, block=256)
def kda_bwd_prep2(q: T.gptr[T.bf16], k: T.gptr[T.bf16], g_raw: T.gptr[T.bf16],
                  v: T.gptr[T.bf16], beta: T.gptr[T.bf16], A_log: T.gptr[T.f32],
                  dt_bias: T.gptr[T.f32], do: T.gptr[T.bf16], chunk_tok: T.gptr[T.s32],
                  chunk_rows: T.gptr[T.s32], nfrag_f: T.gptr[T.u32], bt_f: T.gptr[T.f32],
                  nfrag: T.gptr[T.u32], bt: T.gptr[T.f32], eg: T.gptr[T.f32],
                  PREP: T.const = 2):
    sm, ck = PR.chunk_cta(chunk_tok, chunk_rows)
    TC.prep(sm, ck, q, k, g_raw, beta, A_log, dt_bias, do, PREP)    # dO in sm.do
    hc = ck.c * ck.H + ck.h
    PT.walk(sm, hc, nfrag, bt, 0, sm.do)
    T.ptx.bar.sync(0)
    _stage_v(sm, ck, v)
    PT.walk(sm, hc, nfrag_f, bt_f, 1, sm.qe)
    with T.if_(T.tid.x < K):
        d = T.tid.x
        T.ptx.st.global_.f32(eg.at(hc * K + d), T.ptx.ld.shared.f32(sm.eg.at(d)))


# --- inputs, reference, cases ------------------------------------------------------------------

OUTPUTS = ("nfrag_f", "bt_f", "nfrag", "bt", "eg")
_RAW = ("q", "k", "g_raw", "v", "beta", "A_log", "dt_bias", "do")


def _outputs(H, chunks):
    one = PR._outputs(H, chunks)
    return dict(nfrag_f=one["nfrag"], bt_f=one["bt"], nfrag=one["nfrag"].copy(),
                bt=one["bt"].copy(), eg=one["eg"])


def inputs(rng, B, T_, H, lens=None, gate="mixed", PREP=2):
    """kda_bwd's inputs for the shape and gate regime as the kernel's (the raw tensors, the
    chunk map, zeroed outputs), with cu_seqlens kept for the reference."""
    x = BW.inputs(rng, B, T_, H, lens=lens, gate=gate)
    tok, rows = BL._chunk_map(B, T_, lens)
    return dict({n: x[n] for n in _RAW}, chunk_tok=tok, chunk_rows=rows,
                cu_seqlens=x["cu_seqlens"], **_outputs(H, len(tok)))


def reference(q, k, g_raw, v, beta, A_log, dt_bias, do, cu_seqlens, lens=None, **_):
    """kda_bwd_chain_prep.reference of each walk (kda_bwd_split.chain_operands and
    state_operands in float64)."""
    raw = dict(q=q, k=k, g_raw=g_raw, beta=beta, A_log=A_log, dt_bias=dt_bias,
               cu_seqlens=cu_seqlens, lens=lens)
    back = PR.reference(y=do, FORWARD=0, **raw)
    fwd = PR.reference(y=v, FORWARD=1, **raw)
    return dict(nfrag_f=fwd["nfrag"], bt_f=fwd["bt"], nfrag=back["nfrag"], bt=back["bt"],
                eg=back["eg"])


def timing_inputs(rng, B, T_, H, lens=None, gate="mixed", PREP=2):
    """The large (timing) cases: raw inputs, V and dO of N(0, 1) (the kernel's time does not
    depend on the values), no reference (SUITE's small cases are the check)."""
    x = BL.R.raw_inputs(rng, B, T_, H, gate=gate)
    tok, rows = BL._chunk_map(B, T_, lens)
    do = rng.standard_normal((B, T_, H, V), np.float32).astype(x["q"].dtype)
    return dict({n: x[n] for n in ("q", "k", "g_raw", "v", "beta", "A_log", "dt_bias")}, do=do,
                chunk_tok=tok, chunk_rows=rows, **_outputs(H, len(tok)))


def constraints(B, T_, H, lens=None, PREP=2):
    return BL.constraints(B, T_, H, lens) + TC.check_prep(PREP)


def _bytes(B, T_, H, lens=None, PREP=2):
    """q, k, g_raw, v, do (bf16) and beta read once; both walks' N fragments and B^T (f32)
    and one exp(G_C) written: 329 KB a chunk and head (kda_bwd_prep_tc twice: 394 KB)."""
    chunks = BL._chunks(B, T_, lens)
    return B * T_ * H * (5 * 2 * K + 2) + chunks * H * 4 * (2 * (CH.FRAG + V * K) + K)


def _flops(B, T_, H, lens=None, PREP=2):
    """Both walks' products (kda_bwd_prep_tc's, FORWARD 0 and 1) and the prep's products
    once (kda_bwd_pieces_tc.pm_macs)."""
    walks = sum(PT._flops(B, T_, H, lens, FORWARD=f, PREP=0) for f in (0, 1))
    return walks + 2 * TC.pm_macs(PREP) * BL._chunks(B, T_, lens) * H


# kda_bwd_chain_prep's rule for both walks' B^T and exp(G_C); N is checked as hi + lo in the
# tests (the module docstring of kda_bwd_chain_prep says why no elementwise rule on the words)
TOLERANCE = PR.TOLERANCE

SUITE = T.suite(
    kda_bwd_prep2, inputs=inputs, reference=reference, outputs=["bt_f", "bt", "eg"],
    tolerance=TOLERANCE, constraints=constraints, bytes=_bytes, flops=_flops,
    flops_dtype="bf16",
    cases=[
        # the smallest: one 20-row chunk, deep gates
        T.case("t20_h1_deep", B=1, T_=20, H=1, gate="deep"),
        # three chunks (64, 64, 22: a tail) under saturated gates
        T.case("t150_h1_deep", B=1, T_=150, H=1, gate="deep", tags=BW.SYNC_IN_TESTS),
        # a varlen pack (2 chunks, a one-token sequence, a tail) on 2 heads, mixed gates
        T.case("pack_80_1_30_h2", B=1, T_=111, H=2, lens=(80, 1, 30), gate="mixed",
               tags=BW.SYNC_IN_TESTS),
        # odd T, one head, PREP=1 (the prep's T by the f32 inverse)
        T.case("pm_t77_h1_mixed", B=1, T_=77, H=1, gate="mixed", PREP=1,
               tags=BW.SYNC_IN_TESTS),
    ])

# timing only (no reference), tagged "timing": T8192 at H96 and H64 (`benchmarks/kda_bench.sh
# prep2` times them beside kda_bwd_prep_tc's two walks at PREP=2) and the public pack
SUITE_TIMING = T.suite(
    kda_bwd_prep2, inputs=timing_inputs, outputs=["bt_f", "bt", "eg"], constraints=constraints,
    bytes=_bytes, flops=_flops, flops_dtype="bf16", cases=list(BL.SUITE_TIMING.cases))
