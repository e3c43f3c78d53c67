"""Kimi Delta Attention backward, piece 2c of the chain split (issue 18; kda_bwd_split.py has
the contract, docs/TUNING.md "The chunked backward: the chain"): dv and the pieces piece 3
reads (kda_bwd_split.PIECES) of every chunk at once, one CTA per (head, chunk), from the
chunk's S0 and the gradient of its final state dS1 (kda_bwd_chain's two walks). Correctness
first: kda_bwd_reverse's chunk body without its state update (f32 CUDA cores, the same phases
and shared memory), so nothing crosses chunks.

Math (kda_bwd_split.chunk_pieces): per chunk and head, with the chunk's prep,

    R = V - KE S0,  Delta = Tb R,  dDelta = M^T dO + KL dS1,  dR = Tb^T dDelta  (= dv)
    dqe = dO S0^T, dke = -dR S0^T, dkl = Delta dS1^T, dm = lower(dO Delta^T),
    dtb = lower(dDelta R^T), dgs = exp(G_C) rowsum(dS1 o S0)

Inputs: q, k, g_raw, v, do [B, T, H, 128] bf16; beta [B, T, H] bf16; A_log [H], dt_bias [H, K]
f32; chunk_tok, chunk_rows [chunks] s32 (kda_bwd_local's chunk map); s0, ds1 [chunks, H, K, V]
f32 (kda_bwd_chain's `xs` of the forward and the reverse walk). Outputs: dv [B, T, H, V] f32;
dqe, dke, dkl [chunks, H, C, K], dm, dtb [chunks, H, C, C], dgs [chunks, H, K] f32
(kda_bwd_local's inputs; rows past a sequence and the upper triangles zero).

Tags: linear-attention, backward, chunked, fused-gate, varlen
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
import kda_bwd_reverse as BR  # noqa: E402
import kda_bwd_split as SP  # noqa: E402
from kda_chunk import C, K, V  # noqa: E402

TAGS = ("linear-attention", "backward", "chunked", "fused-gate", "varlen")


_grid = PR._grid        # (heads, chunks of every sequence)


@T.kernel(grid=_grid, block=256)
def kda_bwd_chain_pieces(q: T.gptr[T.bf16], k: T.gptr[T.bf16], g_raw: T.gptr[T.bf16],
                         v: T.gptr[T.bf16], beta: T.gptr[T.bf16], A_log: T.gptr[T.f32],
                         dt_bias: T.gptr[T.f32], do: T.gptr[T.bf16],
                         chunk_tok: T.gptr[T.s32], chunk_rows: T.gptr[T.s32],
                         s0: T.gptr[T.f32], ds1: T.gptr[T.f32], dv: T.gptr[T.f32],
                         dqe: T.gptr[T.f32], dke: T.gptr[T.f32], dkl: T.gptr[T.f32],
                         dm: T.gptr[T.f32], dtb: T.gptr[T.f32], dgs: T.gptr[T.f32]):
    sm, ck = PR.chunk_cta(chunk_tok, chunk_rows)
    BR._chunk(sm, ck, (q, k, g_raw, v, beta, A_log, dt_bias, do), s0,
              BR._Mat(ds1, ck.state()), (dv, dqe, dke, dkl, dm, dtb, dgs), update=False)


# --- inputs, reference, cases ------------------------------------------------------------------

OUTPUTS = ("dv",) + SP.PIECES
_RAW = ("q", "k", "g_raw", "v", "beta", "A_log", "dt_bias", "do")


def _outputs(B, T_, H, chunks):
    out = BR._outputs(B, T_, H, 1, chunks)
    del out["dh0"]
    return out


def _ds1(x, lens):
    """dS1 of every chunk of every sequence, [chunks, H, K, V] f32 (kda_bwd_split.chain in
    float64 from chain_operands: what kda_bwd_chain computes)."""
    Nm, Bm, egm = CH._operands(x, lens)
    out = np.zeros(Bm.shape)
    for n in range(len(x["cu_seqlens"]) - 1):
        c0, c1 = int(x["chunk_off"][n]), int(x["chunk_off"][n + 1])
        xs, _ = SP.chain(*(np.moveaxis(a[c0:c1], 0, 1) for a in (egm, Nm, Bm)), x["dht"][n])
        out[c0:c1] = np.moveaxis(xs, 0, 1)
    return out.astype(np.float32)


def pieces_inputs(x, s0, ds1, lens=None):
    """The kernel's arguments from kda_bwd's inputs `x`, S0 and dS1 of every chunk."""
    B, T_, H = x["q"].shape[:3]
    tok, rows = BL._chunk_map(B, T_, lens)
    return dict({n: x[n] for n in _RAW}, chunk_tok=tok, chunk_rows=rows, s0=s0, ds1=ds1,
                **_outputs(B, T_, H, len(tok)))


def inputs(rng, B, T_, H, lens=None, gate="mixed"):
    """kda_bwd's inputs for the shape and gate regime, S0 (float64 forward, f32) and dS1
    (float64 chain, f32) of every chunk, as the kernel's arguments; cu_seqlens kept for the
    reference."""
    x = BW.inputs(rng, B, T_, H, lens=lens, gate=gate)
    return dict(pieces_inputs(x, BR._states(x, lens), _ds1(x, lens), lens),
                cu_seqlens=x["cu_seqlens"])


def reference(q, k, v, g_raw, beta, A_log, dt_bias, do, cu_seqlens, s0, ds1, lens=None, **_):
    """kda_bwd_split.chunk_pieces of every sequence (float64, from the kernel's own f32 S0
    and dS1), laid out as the kernel's outputs."""
    x = dict(q=q, k=k, g_raw=g_raw, beta=beta, A_log=A_log, dt_bias=dt_bias,
             cu_seqlens=cu_seqlens)
    B, T_, H = np.shape(q)[:3]
    out = _outputs(B, T_, H, len(s0))
    base = 0
    for n, b, t0, t1, qn, kn, gn, bn in BR._sequences(x, lens):
        nch = -(-(t1 - t0) // C)

        def seq(a):
            return np.moveaxis(np.asarray(a[base:base + nch], np.float64), 0, 1)
        got = SP.chunk_pieces(qn, kn, np.asarray(v[b, t0:t1], np.float64), gn, bn, seq(s0),
                              BR.SCALE, np.asarray(do[b, t0:t1], np.float64), seq(ds1))
        out["dv"][b, t0:t1] = np.moveaxis(got["dv"], 0, 2).reshape((nch * C, H, V))[:t1 - t0]
        for name in SP.PIECES:
            out[name][base:base + nch] = np.moveaxis(got[name], 0, 1)
        base += nch
    return out


def timing_inputs(rng, B, T_, H, lens=None, gate="mixed"):
    """The large (timing) cases: kda_bwd_reverse's (raw inputs, synthetic S0), with a
    synthetic dS1 (N(0, 1) / 16) and the chunk map; no reference."""
    x = BR.timing_inputs(rng, B, T_, H, lens, gate)
    ds1 = rng.standard_normal(x["s0"].shape, np.float32) * np.float32(1 / 16)
    return pieces_inputs(x, x["s0"], ds1, lens)


def constraints(B, T_, H, lens=None):
    return BL.constraints(B, T_, H, lens) + [
        p for p in BR.constraints(B, T_, H, lens) if "2^32" in p]


def _bytes(B, T_, H, lens=None):
    """kda_bwd_reverse's bytes with dS1 read (64 KB a chunk and head) and no dh0."""
    return BR._bytes(B, T_, H, lens) + BL._chunks(B, T_, lens) * H * K * V * 4


# kda_bwd_reverse's rule (f32 throughout: ~1e-6 normalized RMS there)
TOLERANCE = BR.TOLERANCE

SUITE = T.suite(
    kda_bwd_chain_pieces, inputs=inputs, reference=reference, outputs=list(OUTPUTS),
    tolerance=TOLERANCE, constraints=constraints, bytes=_bytes,
    cases=[
        # the smallest (what `tirxh check`'s sync_check runs): one 20-row chunk, deep gates
        T.case("t20_h1_deep", B=1, T_=20, H=1, gate="deep"),
        # a varlen pack (2 chunks, a one-token sequence, a tail) on 2 heads, mixed gates
        T.case("pack_80_1_30_h2", B=1, T_=111, H=2, lens=(80, 1, 30), gate="mixed",
               tags=BW.SYNC_IN_TESTS),
    ])

# timing only (no reference: `timing_inputs`), tagged "timing": kda_bwd_local's shapes
SUITE_TIMING = T.suite(
    kda_bwd_chain_pieces, inputs=timing_inputs, outputs=list(OUTPUTS), constraints=constraints,
    bytes=_bytes, cases=list(BL.SUITE_TIMING.cases))
