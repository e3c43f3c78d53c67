"""Kimi Delta Attention backward: piece 2a's prep alone, a calibration kernel (issue 18;
docs/PERFORMANCE.md "Session 13, branch kdabwd10"). kda_bwd_prep_tc PREP=2 up to its walk and
nothing after it: the chunk's norms, gate, P and M, T, KE, QE, KL and exp(G_C) (the prep of
kda_bwd_pieces_tc.prep, PREP=2, dO staged in sm.do), then exp(G_C) written, one CTA per (head,
chunk), 256 threads, the same shared memory (one CTA an SM).

Why it exists: session 13 measured kda_bwd_prep2 at 0.933 of kda_bwd_prep_tc's two launches
(pmt_ + pmt_fwd_; predicted 0.76), so the prep that prep2 computes once is ~7% of the two
launches' time where the instruction counts gave it ~44%. Those three figures fix the prep's
cost only up to the V staging of prep2 (prep = 14.0K cycles a chunk + that staging). Timed
beside pmt_ and pmt_fwd_ in one job (`benchmarks/kda_bench.sh calib`), this kernel measures the
prep directly, and with it each walk's products (pmt_ - this, pmt_fwd_ - this): the terms of
the backward's cycle model, and the first term of any fused backward's budget.

Inputs: q, k, g_raw, do [B, T, H, 128] bf16; beta [B, T, H] bf16; A_log [H], dt_bias [H, K]
f32; chunk_tok, chunk_rows [chunks] s32. Output: eg [chunks, H, K] f32 (exp(G_C), as
kda_bwd_prep_tc's).

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
import kda_bwd_chain_prep as PR  # noqa: E402
import kda_bwd_local as BL  # noqa: E402
import kda_bwd_pieces_tc as TC  # noqa: E402
from kda_chunk import K  # noqa: E402

TAGS = ("linear-attention", "backward", "chunked", "fused-gate", "mma-sync", "split-bf16",
        "varlen")

PREP = 2                  # the prep of kda_bwd_prep_tc's pmt_ cases (P, M and T's blocks on mma)


@T.kernel(grid=PR._grid, block=256)
def kda_bwd_prep_only(q: T.gptr[T.bf16], k: T.gptr[T.bf16], g_raw: T.gptr[T.bf16],
                      beta: T.gptr[T.bf16], A_log: T.gptr[T.f32], dt_bias: T.gptr[T.f32],
                      do: T.gptr[T.bf16], chunk_tok: T.gptr[T.s32],
                      chunk_rows: T.gptr[T.s32], eg: T.gptr[T.f32]):
    sm, ck = PR.chunk_cta(chunk_tok, chunk_rows)
    TC.prep(sm, ck, q, k, g_raw, beta, A_log, dt_bias, do, PREP)    # dO in sm.do
    with T.if_(T.tid.x < K):
        d = T.tid.x
        T.ptx.st.global_.f32(eg.at((ck.c * ck.H + ck.h) * K + d),
                             T.ptx.ld.shared.f32(sm.eg.at(d)))


# --- inputs, reference, cases ------------------------------------------------------------------

OUTPUTS = ("eg",)
_RAW = ("q", "k", "g_raw", "beta", "A_log", "dt_bias", "do")


def _args(x, H, tok, rows):
    return dict({n: x[n] for n in _RAW}, chunk_tok=tok, chunk_rows=rows,
                eg=np.zeros((len(tok), H, K), np.float32))


def inputs(rng, B, T_, H, lens=None, gate="mixed"):
    """kda_bwd's inputs for the shape and gate regime as the kernel's, with cu_seqlens kept for
    the reference."""
    x = BW.inputs(rng, B, T_, H, lens=lens, gate=gate)
    tok, rows = BL._chunk_map(B, T_, lens)
    return dict(_args(x, H, tok, rows), cu_seqlens=x["cu_seqlens"])


def reference(q, k, g_raw, beta, A_log, dt_bias, do, cu_seqlens, lens=None, **_):
    """exp(G_C) of every chunk and head (kda_bwd_chain_prep.reference's eg, float64)."""
    return dict(eg=PR.reference(q, k, g_raw, beta, A_log, dt_bias, do, cu_seqlens,
                                lens=lens)["eg"])


def timing_inputs(rng, B, T_, H, lens=None, gate="mixed"):
    """The large (timing) cases: kda_bwd_chain_prep's timing inputs with its y as dO (the
    kernel's time does not depend on the values), no reference."""
    x = PR.timing_inputs(rng, B, T_, H, lens, gate)
    return _args(dict(x, do=x["y"]), H, x["chunk_tok"], x["chunk_rows"])


def constraints(B, T_, H, lens=None):
    return BL.constraints(B, T_, H, lens)


def _bytes(B, T_, H, lens=None):
    """q, k, g_raw, do (bf16) and beta read, exp(G_C) written: 131 KB a chunk and head."""
    return B * T_ * H * (4 * 2 * K + 2) + BL._chunks(B, T_, lens) * H * 4 * K


def _flops(B, T_, H, lens=None):
    """The prep's products (P, M and T's blocks, three bf16 mma each) at 2 FLOPs a
    multiply-add."""
    return 2 * TC.pm_macs(PREP) * BL._chunks(B, T_, lens) * H


SUITE = T.suite(
    kda_bwd_prep_only, inputs=inputs, reference=reference, outputs=["eg"],
    tolerance=PR.TOLERANCE, constraints=constraints, bytes=_bytes, flops=_flops,
    flops_dtype="bf16",
    cases=[
        # one 20-row chunk, deep gates
        T.case("t20_h1_deep", B=1, T_=20, H=1, gate="deep"),
        # a varlen pack (2 chunks, a one-token sequence, a tail) on 2 heads, mixed gates
        T.case("pack_80_1_30_h2", B=1, T_=111, H=2, lens=(80, 1, 30), gate="mixed",
               tags=BW.SYNC_IN_TESTS),
    ])

# timing only (no reference), tagged "timing": T8192 at H96 and H64 and the public pack
# (`benchmarks/kda_bench.sh calib` times T8192 beside kda_bwd_prep_tc's pmt_ and pmt_fwd_)
SUITE_TIMING = T.suite(
    kda_bwd_prep_only, inputs=timing_inputs, outputs=["eg"], constraints=constraints,
    bytes=_bytes, flops=_flops, flops_dtype="bf16", cases=list(BL.SUITE_TIMING.cases))
