"""Kimi Delta Attention backward, piece 2a of the chain split (issue 18; kda_bwd_split.py has
the contract, docs/TUNING.md "The chunked backward: the chain"): the operands of
`kda_bwd_chain` for every chunk at once, one CTA per (head, chunk), from the chunk's own
inputs. Correctness first: f32 on the CUDA cores, kda_bwd_reverse's prep phases reused.

Math (kda_bwd_split.chain_operands), per chunk and head, with the chunk's prep (normalized k^,
scaled q^, the gate's cumulative log-decay G, KE = k^ 2^G, QE = qs 2^G, KL = k^ 2^(G_C - G),
M = lower(qs_i . k^_j 2^(G_i - G_j)), T = (I + Diag(beta) P)^-1, Tb = T Diag(beta)):

    W = Tb KE  [C, K],   U = QE - M W  [C, K]
    N = -W^T KL  [K, K] (written as kda_bwd_chain's `nfrag`: bf16 hi + lo B fragments)
    B^T = dO^T U  [V, K] (f32),   exp(G_C) [K] (f32)

since N = -KE^T Tb^T KL and B = (QE^T - KE^T Tb^T M^T) dO = U^T dO. With FORWARD=1 the forward
walk's operands (kda_bwd_split.state_operands): X = Tb^T KL [C, K], N = -X^T KE (= N^T of the
backward's: -KL^T Tb KE), B^T = V^T X, exp(G_C).

Phases (256 threads, ``bar.sync`` between): kda_bwd_reverse's prep (norms -> gate -> P, M ->
T beside KE, QE, KL, exp(G_C) and y = dO (V with FORWARD) staged) -> W ("col" threads: channel
d = t % 128, 32 rows) into the G tile -> U (col) into the P tile (FORWARD: X into the G tile,
no U) -> N (thread = input channel b = t % 128,
64 output channels 64 (t / 128) ..: 64 accumulators; the pair (b, b ^ 1) exchanged with
``shfl.sync.bfly`` so that the thread of the row's parity packs hi = ``cvt.rn.bf16x2.f32`` and
lo = the same of what hi leaves, and stores the two fragment words) and B^T (thread = value
column v, 64 channels: ``st.global.v4.f32`` along its row of B^T), exp(G_C).

Inputs: q, k, g_raw, y [B, T, H, 128] bf16 (y: dO, or V with FORWARD); beta [B, T, H] bf16; A_log [H], dt_bias [H, K]
f32; chunk_tok, chunk_rows [chunks] s32 (kda_bwd_local's chunk map). Outputs: nfrag [chunks,
H, 8, 16, 32, 4] u32, bt [chunks, H, V, K] f32, eg [chunks, H, K] f32 (kda_bwd_chain's
inputs). Rows past a sequence: k^ = q^ = 0, beta = 0, dO = 0, so they add nothing.

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
import kda_bwd_local as BL  # noqa: E402
import kda_bwd_reverse as BR  # noqa: E402
from kda_chunk import C, K, V, pack, unpack  # noqa: E402

TAGS = ("linear-attention", "backward", "chunked", "fused-gate", "varlen")

FULL = 0xFFFFFFFF
HALF = C // 2
ROWS = 64                 # output channels a thread accumulates in the N and B^T phases


def _left_tb(sm):
    """Col threads: W[i, d] = sum_j T[i, j] beta_j KE[j, d] into the G tile (sm.r)."""
    d, i0 = BR._roles()
    acc = BL._zeros(HALF)
    with T.range(C) as j:
        x = T.ptx.ld.shared.f32(sm.ke.at(j, d)) * T.ptx.ld.shared.f32(sm.beta.at(j))
        BR._rows32(acc, sm.t.at(i0, j), C * 4, x)
    for r in range(HALF):
        T.ptx.st.shared.f32(sm.r.at(i0 + r, d), acc[r])


def _right_tb(sm):
    """FORWARD, col threads: X[i, d] = beta_i sum_j T[j, i] KL[j, d] (X = Tb^T KL) into the
    G tile (sm.r)."""
    d, i0 = BR._roles()
    acc = BL._zeros(HALF)
    with T.range(C) as j:
        BR._rows32(acc, sm.t.at(j, i0), 4, T.ptx.ld.shared.f32(sm.kl_.at(j, d)))
    for r in range(HALF):
        i = i0 + r
        T.ptx.st.shared.f32(sm.r.at(i, d), acc[r] * T.ptx.ld.shared.f32(sm.beta.at(i)))


def _u(sm):
    """Col threads: U[i, d] = QE[i, d] - sum_j M[i, j] W[j, d] into the P tile (sm.dlt)."""
    d, i0 = BR._roles()
    acc = BL._zeros(HALF)
    with T.range(C) as j:
        BR._rows32(acc, sm.m.at(i0, j), C * 4, T.ptx.ld.shared.f32(sm.r.at(j, d)))
    for r in range(HALF):
        i = i0 + r
        T.ptx.st.shared.f32(sm.dlt.at(i, d), T.ptx.ld.shared.f32(sm.qe.at(i, d)) - acc[r])


def _outer(tile, col_tile, col, a0):
    """acc[r] = sum_i tile[i, a0 + r] col_tile[i, col] for the thread's 64 r: per row i one
    load of the thread's column operand and 64 broadcast loads of the row's contiguous words
    a0 .. a0 + 63 (the same for the whole warp)."""
    acc = BL._zeros(ROWS)
    with T.range(C) as i:
        x = T.ptx.ld.shared.f32(col_tile.at(i, col))
        base = tile.at(i, a0)
        for q in range(ROWS // 16):
            BL._fma_rows(acc[16 * q:16 * q + 16], base + 64 * q, 4, x)
    return acc


def _n_fragments(sm, ck, nfrag, right):
    """N[a, b] = -sum_i W[i, a] right[i, b] (W in sm.r; right: KL, or KE with FORWARD; thread:
    b = t % 128, a = a0 .. a0 + 63) as kda_bwd_chain's fragment words: for output row a = 8j +
    g and the input pair b_even = 16s + 2t' + 8 o, hi and lo words at ((((hc 8 + s) 16 + j) 32
    + 4 g + t') 4 + o (+ 2))."""
    b = T.tid.x & (K - 1)
    a0 = (T.tid.x >> 7) * ROWS
    acc = _outer(sm.r, right, b, a0)
    odd = (b & 1) == 1
    rem = b & 15
    hc = ck.c * ck.H + ck.h
    word0 = ((((hc * 8 + (b >> 4)) * 16 + (a0 >> 3)) * 32 + ((rem & 7) >> 1)) * 4
             + (rem >> 3))
    base = nfrag.at(word0)
    for r in range(ROWS):
        own = -acc[r]
        other = T.ptx.mov.f32(T.ptx.shfl.sync.bfly.b32(T.ptx.mov.b32(own), 1, 0x1F, FULL))
        lo = T.ptx.selp.f32(other, own, odd)
        hi = T.ptx.selp.f32(own, other, odd)
        hw = pack(lo, hi)
        hl, hh = unpack(hw)
        lw = pack(lo - hl, hi - hh)
        mine = odd if r & 1 else (b & 1) == 0
        at = base + 4 * ((r >> 3) * 128 + (r & 7) * 16)
        T.ptx.st.global_.b32(at, hw, pred=mine)
        T.ptx.st.global_.b32(at + 8, lw, pred=mine)


def _b_rows(sm, ck, bt, left):
    """B^T[v, d] = sum_i Y[i, v] left[i, d] (Y: dO, or V with FORWARD, staged in sm.do; left:
    U, or X with FORWARD; thread: v = t % 128, d = d0 .. d0 + 63), stored along the thread's
    row of bt (16 ``st.global.v4.f32``)."""
    v = T.tid.x & (V - 1)
    d0 = (T.tid.x >> 7) * ROWS
    acc = _outer(left, sm.do, v, d0)
    row = bt.at(((ck.c * ck.H + ck.h) * V + v) * K + d0)
    for q in range(ROWS // 4):
        T.ptx.st.global_.v4.f32(row + 16 * q, acc[4 * q:4 * q + 4])


def _grid(B, T_, H, lens=None):
    """(heads, chunks of every sequence)."""
    return BL._grid(B, T_, H, lens)


def chunk_cta(chunk_tok, chunk_rows):
    """kda_bwd_reverse's shared memory and chunk (grid x the head, y the chunk: its first
    token and valid rows from kda_bwd_local's chunk map), for a CTA per head and chunk."""
    c = T.ctaid.y
    return BR._Smem(), BR._Chunk(T.ctaid.x, T.nctaid.x,
                                 T.ptx.ld.global_.nc.u32(chunk_tok.at(c)),
                                 T.ptx.ld.global_.nc.u32(chunk_rows.at(c)), c, 0)


def prep(sm, ck, q, k, g_raw, beta, A_log, dt_bias, y, pairs=None, inverse=None, gates=None,
         rows=None, gate=None, decayed=None):
    """kda_bwd_reverse's prep phases of one chunk (norms -> gate -> P, M -> T beside KE, QE,
    KL, exp(G_C) and y staged in sm.do), each ended by ``bar.sync``; shared with
    kda_bwd_pieces_tc, whose products read the same tiles. `pairs(sm)` and `inverse(sm)`, if
    given, replace the P, M phase (kda_bwd_reverse._pairs) and the T phase
    (kda_bwd_local._inverse): kda_bwd_pieces_tc's tensor-core forms (its PREP constant).
    `gates` (kda_bwd_prep_tiles.GateStore), if given, copies the norms' and gate's tiles out
    while P, M and T are computed: `_decayed` overwrites KL, KD, QL, so its stores wait for the
    copy behind one more barrier. `rows` (kda_bwd_local.StagedRows), if given, stages q, k and
    g_raw for the norms and gate first, behind a barrier of its own; `gate`, if given, replaces
    the gate phase (kda_bwd_local._gate_halves, which reads `rows`); `decayed(sm, ck, q, k,
    y)`, if given, replaces the decayed operands' phase (kda_bwd_reverse._decayed). Each
    phase is an iket range, the barriers outside (nothing in a normal build): `tirxh profile
    --iket` of a launch that calls this gives each phase's wall."""
    if gates is not None:
        gates.pad(sm)
    if rows is not None:
        with T.iket.range("rows"):
            rows.stage(ck, {"q": q, "k": k, "g": g_raw})
            rows.wait()
        T.ptx.bar.sync(0)
    with T.iket.range("norms"):
        BL._norms(sm, ck, q, k, beta, rows)
    T.ptx.bar.sync(0)
    with T.iket.range("gate"):
        (gate or BL._gate)(sm, ck, q, k, g_raw, A_log, dt_bias, rows)
        if gates is not None:
            T.ptx.fence.proxy.async_.shared__cta()   # the tiles' generic writes -> the copy engine
    T.ptx.bar.sync(0)
    with T.iket.range("pairs"):
        if gates is not None:
            gates.store(sm)
        (pairs or BR._pairs)(sm)
    T.ptx.bar.sync(0)
    with T.iket.range("inverse"):
        (inverse or BL._inverse)(sm)
        if gates is not None:
            gates.stored()
    if gates is not None:
        T.ptx.bar.sync(0)
    with T.iket.range("decayed"):
        (decayed or BR._decayed)(sm, ck, q, k, y)
    T.ptx.bar.sync(0)


@T.kernel(grid=_grid, block=256)
def kda_bwd_chain_prep(q: T.gptr[T.bf16], k: T.gptr[T.bf16], g_raw: T.gptr[T.bf16],
                       beta: T.gptr[T.bf16], A_log: T.gptr[T.f32], dt_bias: T.gptr[T.f32],
                       y: T.gptr[T.bf16], chunk_tok: T.gptr[T.s32],
                       chunk_rows: T.gptr[T.s32], nfrag: T.gptr[T.u32], bt: T.gptr[T.f32],
                       eg: T.gptr[T.f32], FORWARD: T.const = 0):
    sm, ck = chunk_cta(chunk_tok, chunk_rows)
    prep(sm, ck, q, k, g_raw, beta, A_log, dt_bias, y)     # y (dO, or V) staged in sm.do
    if FORWARD:
        _right_tb(sm)
        T.ptx.bar.sync(0)
        _n_fragments(sm, ck, nfrag, sm.ke)
        _b_rows(sm, ck, bt, sm.r)
    else:
        _left_tb(sm)
        T.ptx.bar.sync(0)
        _u(sm)
        T.ptx.bar.sync(0)
        _n_fragments(sm, ck, nfrag, sm.kl_)
        _b_rows(sm, ck, bt, sm.dlt)
    with T.if_(T.tid.x < K):
        d = T.tid.x
        T.ptx.st.global_.f32(eg.at((ck.c * ck.H + ck.h) * K + d), T.ptx.ld.shared.f32(sm.eg.at(d)))


# --- inputs, reference, cases ------------------------------------------------------------------

OUTPUTS = ("nfrag", "bt", "eg")
_RAW = ("q", "k", "g_raw", "beta", "A_log", "dt_bias")


def _outputs(H, chunks):
    return dict(nfrag=np.zeros((chunks, H, CH.KS, CH.NT, 32, 4), np.uint32),
                bt=np.zeros((chunks, H, V, K), np.float32),
                eg=np.zeros((chunks, H, K), np.float32))


def prep_inputs(x, lens=None, FORWARD=0):
    """The kernel's arguments from kda_bwd's inputs `x`: the raw tensors (y = dO, or V with
    FORWARD), the chunk map, zeroed outputs."""
    B, T_, H = x["q"].shape[:3]
    tok, rows = BL._chunk_map(B, T_, lens)
    return dict({n: x[n] for n in _RAW}, y=x["v"] if FORWARD else x["do"], chunk_tok=tok,
                chunk_rows=rows, **_outputs(H, len(tok)))


def inputs(rng, B, T_, H, lens=None, gate="mixed", FORWARD=0):
    """kda_bwd's inputs for the shape and gate regime, as the kernel's (`prep_inputs`), with
    cu_seqlens kept for the reference."""
    x = BW.inputs(rng, B, T_, H, lens=lens, gate=gate)
    return dict(prep_inputs(x, lens, FORWARD), cu_seqlens=x["cu_seqlens"])


def reference(q, k, g_raw, beta, A_log, dt_bias, y, cu_seqlens, lens=None, FORWARD=0, **_):
    """kda_bwd_split.chain_operands (state_operands with FORWARD) of every sequence in float64
    (kda_bwd_chain._operands), N as `nfrag` (the bf16 hi + lo of the float64 N)."""
    x = dict(q=q, k=k, g_raw=g_raw, beta=beta, A_log=A_log, dt_bias=dt_bias,
             cu_seqlens=cu_seqlens, **{"v" if FORWARD else "do": y})
    Nm, Bm, egm = CH._operands(x, lens, forward=bool(FORWARD))
    return dict(nfrag=CH.fragments(Nm), bt=np.swapaxes(Bm, -1, -2).astype(np.float32),
                eg=egm.astype(np.float32))


def timing_inputs(rng, B, T_, H, lens=None, gate="mixed"):
    """The large (timing) cases: raw inputs and dO (the kernel's time does not depend on the
    values), no reference (SUITE's small cases are the check; the bench smokes them first)."""
    x = BL.timing_inputs(rng, B, T_, H, lens, gate)
    keep = ("q", "k", "g_raw", "beta", "A_log", "dt_bias", "chunk_tok", "chunk_rows")
    y = rng.standard_normal((B, T_, H, V), np.float32).astype(x["q"].dtype)
    return dict({n: x[n] for n in keep}, y=y, **_outputs(H, len(x["chunk_tok"])))


def constraints(B, T_, H, lens=None, FORWARD=0):
    out = BL.constraints(B, T_, H, lens)
    if FORWARD not in (0, 1):
        out.append(f"FORWARD={FORWARD} must be 0 (chain_operands) or 1 (state_operands)")
    return out


def _bytes(B, T_, H, lens=None):
    """q, k, g_raw, do (bf16) and beta read, N's fragments, B^T (f32) and exp(G_C) written:
    197 KB a chunk and head."""
    chunks = BL._chunks(B, T_, lens)
    return B * T_ * H * (4 * 2 * K + 2) + chunks * H * 4 * (CH.FRAG + V * K + K)


# f32 on the CUDA cores (ex2/rcp/rsqrt.approx in the prep, as kda_bwd_reverse): every element
# within rtol 1e-3 + 1e-3 RMS(ref), normalized RMS error below 1e-5 (the chain's own rule:
# these operands then carry the chain's precision)
TOLERANCE = T.tolerance(rtol=1e-3, atol_rms=1e-3, rms=1e-5)

# The suite checks bt and eg (here and on the GPU); nfrag's words are checked as what the chain
# multiplies by (hi + lo, kda_bwd_chain.unsplit) in tests/zoo/test_kda_bwd_chain_prep.py: a
# float64 N and the kernel's f32 N round to words that differ at bf16 rounding boundaries,
# where hi and lo trade an ulp and hi + lo does not move, so no elementwise rule on the words
# themselves holds.
SUITE = T.suite(
    kda_bwd_chain_prep, inputs=inputs, reference=reference, outputs=["bt", "eg"],
    tolerance=TOLERANCE,
    constraints=constraints, bytes=_bytes,
    cases=[
        # the smallest: one 20-row chunk, deep gates
        T.case("t20_h1_deep", B=1, T_=20, H=1, gate="deep"),
        # a varlen pack (2 chunks, a one-token sequence, a tail) on 2 heads, mixed gates
        T.case("pack_80_1_30_h2", B=1, T_=111, H=2, lens=(80, 1, 30), gate="mixed",
               tags=BW.SYNC_IN_TESTS),
        # FORWARD (the forward walk's operands): one 20-row chunk, deep gates
        T.case("fwd_t20_h1_deep", B=1, T_=20, H=1, gate="deep", FORWARD=1),
        # FORWARD over the pack on 2 heads
        T.case("fwd_pack_80_1_30_h2", B=1, T_=111, H=2, lens=(80, 1, 30), FORWARD=1,
               tags=BW.SYNC_IN_TESTS),
    ])

# timing only (no reference: `timing_inputs`), tagged "timing": `benchmarks/kda_bench.sh chain`
# times T8192 H96 after the chain's first shape (PREP_SHAPES); kda_bwd_local's shapes
SUITE_TIMING = T.suite(
    kda_bwd_chain_prep, inputs=timing_inputs, outputs=["bt", "eg"], constraints=constraints,
    bytes=_bytes, cases=list(BL.SUITE_TIMING.cases))
