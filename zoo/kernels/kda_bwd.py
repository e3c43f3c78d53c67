"""Kimi Delta Attention backward (issue 18): dq, dk, dv, dg, dbeta and dh0 of every sequence of a
batch or a varlen pack, through the fused gate (safe_gate, lower bound -5) and q/k L2
normalization of kda_fwd.py. Correctness first: this is the token-by-token reverse of the
recurrence, in float32, one CTA per (head, sequence); the faster chunked design is below.

Math (kda_ref.py has it in full; ``_recurrent_backward`` is this kernel's algorithm): per token t,
with the gate g = -5 s, s = sigmoid(exp(A_log) (g_raw + dt_bias)), k^ = k / |k|, q^ = q / |q|,
P = Diag(exp(g)) S_{t-1}, e = P^T k^, d = beta (v - e), S_t = P + k^ d^T, o = K^-1/2 S_t^T q^,
walking t from the last token down with dS (the gradient of the state S_t; dht at the end):

    dS += scale q^ do^T            dq^ = scale S_t do      dd = dS^T k^       dk^ = dS d + P de
    dbeta = dd . (v - e)           dv = beta dd            de = -beta dd      dP = dS + k^ de^T
    dg = rowsum(dP o P)            dS <- Diag(exp(g)) dP   (dh0 after the first token)

then through the normalization, dx = r (dy - y (y . dy)) with y = x r, r = (|x|^2 + 1e-6)^-1/2
(y . dy from column sums: q^ . dq^ = scale do . (P^T q^ + (q^ . k^) d), k^ . dk^ = d . dd + de . e),
and the gate, dg_raw = dg (-5 exp(A_log)) s (1 - s); with z = exp(A_log) (g_raw + dt_bias),
ddt_bias = sum over tokens of dg_raw and dA_log = sum over tokens and channels of dg_raw (g_raw +
dt_bias).

Inputs: q, k, g_raw [B, T, H, K] bf16; v, do [B, T, H, V] bf16; beta [B, T, H] bf16; A_log [H],
dt_bias [H, K] f32; h0, dht [N, H, K, V] f32; cu_seqlens [N + 1] s32 (fixed lengths: 0, T, 2T,
..); chunk_off [N + 1] s32 (first 64-token chunk of each sequence in `s0`); order [N] s32 (the
sequences, longest first: the grid's y order, so that a pack's long chains start first).
Outputs (f32): dq, dk, dg [B, T, H, K]; dv [B, T, H, V]; dbeta [B, T, H]; dh0 [N, H, K, V];
dA_log [H], ddt_bias [H, K] (the gate parameters', as FLA's autograd returns them).
Workspaces (zeros; each element of s0 and ws written and read back by the same thread, so no
synchronization guards them): s0 [chunks, H, K, V] f32 (every chunk's start state), ws [N H,
64, K, V] f32 (a chunk's per-token states, at the CTA's (grid y, head)); gred [N, H, 2, K] f32
(each CTA's per-channel sums of dg_raw and dg_raw (g_raw + dt_bias), at its grid y) and cnt
[H] u32 (CTAs of the head done; the last one sums the N slots in grid-y order, deterministic,
and resets it to zero for the next launch).

Algorithm, per CTA (head h, sequence n; 8 warps):
1. forward: the recurrence from h0 over the whole sequence, storing each chunk's start state S0
   in s0 (o is not needed).
2. reverse, chunk by chunk from the last: reload S0, re-run the chunk forward storing S_{t-1} of
   each of its tokens in ws, then walk its tokens backwards with dS in registers, reading
   S_{t-1} back. dS after the first token is dh0.

Layout (kda_decode.py's): warp w owns value columns 16w .. 16w + 15 and every key row of them;
lane l holds the 4 columns 16w + 4 (l % 4) .. + 3 of rows 16 (l / 4) .. + 15, so S and dS are 64
registers each. Column sums over rows (e, P^T q^, dS^T k^, |k|^2, |q|^2, k . q) are a
``shfl.sync.bfly`` butterfly over the row lanes (4, 8, 16): no shared memory, no barrier. Row sums
over columns (dq^, dk^, dg per key channel) and the scalars (dbeta, q^ . dq^, k^ . dk^) are a
butterfly over the column lanes (1, 2), then per warp to shared memory (double-buffered by token
parity), one ``bar.sync``, and thread k < 128 adds the 8 warps' partials of channel k, applies the
normalization and gate chains and stores. dv needs no reduction (its columns are the lane's).

Numerics: float32 throughout (no tensor cores, no bf16 rounding of intermediates); the gate with
``ex2.approx``/``rcp.approx``, the norms with ``rsqrt.approx`` (relative errors ~2^-22), so the
gradients stay ~1e-5 relative of the float64 reference (rule: atol = rtol = 0.01).

Cost: 3 passes over the sequence, each a serial chain of T token steps per (head, sequence), one
barrier per backward step, ~O(K V / 256) FMAs per thread per step, and the per-token state (64
KB of f32) written to ws and read back: 4 MB per CTA, more than L2 over all CTAs, so 128 KB of
HBM traffic per token and head (T8192 H96: 103 GB, 24 ms at 4.25 TB/s, this design's floor).
A correct baseline, not a fast kernel (docs/TUNING.md has its predicted times).

The faster fused design (docs/TUNING.md, KDA item 5): (a) the forward kernel (kda_fwd.py) also
stores S0 of every chunk (bf16 or f32, [chunks, H, K, V]); (b) a reverse pass per (value slice,
head, sequence) keeping dS^T on chip as mma.sync accumulators (as kda_fwd keeps S^T), per chunk
dDelta = M^T dO + KL dS1, dR = Tb^T dDelta, dS0 = QG^T dO + Diag(exp(G_C)) dS1 - KE^T dR
(kda_ref._chunked_backward), storing dR (= dv) and dDelta; (c) a per-chunk kernel, parallel over
all chunks, for the V-independent part: dM, dTb, dA = -strict_lower(T^T dTb Diag(beta) T^T), the
pairwise-product gradients with the 16-row block references of kda_chunk.py (no overflow under
saturated gates), and the reverse cumulative sum giving dg, plus the normalization/gate chains.

Tags: linear-attention, backward, state-in-registers, warp-shuffle, fused-gate, varlen
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import tirxh.lang as T

# the zoo is a directory of kernel files, not a package: tirxh's collection puts it on sys.path,
# other loaders (tests, tools) import a file by path, so the sibling modules are found from here
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
import kda_ref as R  # noqa: E402 - after the path that finds it
from kda_decode import _butterfly, _load_rows, _unpack  # noqa: E402

TAGS = ("linear-attention", "backward", "state-in-registers", "warp-shuffle", "fused-gate",
        "varlen")

K = V = 128
C = R.CHUNK               # tokens per checkpointed chunk (s0) and per ws window
ROWS = 16                 # state rows per lane
WARPS = V // 16           # 8 warps: 16 value columns each
PART = 3 * K + 4          # a warp's partials: dq^, dk^, dg rows; dbeta, q^.dq^, k^.dk^, pad
LOG2E = 1.4426950408889634
FULL = 0xFFFFFFFF
SCALE = K ** -0.5


def _cols_sum(values):
    """Sum each value over the 4 lanes of a row group (``shfl.sync.bfly`` 1, 2 + add)."""
    for off in (1, 2):
        values = [x + T.ptx.mov.f32(T.ptx.shfl.sync.bfly.b32(x, off, 0x1F, FULL))
                  for x in values]
    return values


class _Lane:
    """The lane's place in the state (rows row0 .. +15, columns col .. +3) and its gate
    constants: exp(-z) = 2^(c1 g_raw + c0[r]), c1 = -exp(A_log) log2(e), c0 = c1 dt_bias."""

    def __init__(self, A_log, dt_bias, h):
        self.lane = T.laneid()
        self.warp = T.tid.x >> 5
        self.cg, self.rg = self.lane & 3, self.lane >> 2
        self.col = self.warp * 16 + self.cg * 4
        self.row0 = self.rg * ROWS
        self.a = T.ptx.ex2.approx.f32(T.ptx.ld.global_.nc.f32(A_log.at(h)) * LOG2E)
        self.c1 = self.a * -LOG2E
        self.dt_bias = dt_bias
        self.db = dt_bias.at(h * K + self.row0)

    def c0(self):
        """c0 of the lane's 16 rows: reloaded for each token (4 ``ld.global.nc.v4.f32``, L1
        hits) rather than kept: 16 registers fewer across the walk, which has none to spare."""
        return [self.c1 * x for i in range(ROWS // 4)
                for x in T.ptx.ld.global_.nc.v4.f32(self.db + 16 * i)]

    def gate(self, graw, c0):
        """(exp(-z), s = sigmoid(z), decay = exp(-5 s)); exp(-z) clamped at 2^64 (s < 6e-20
        already rounds the decay to 1)."""
        e = T.ptx.ex2.approx.f32(T.ptx.min.f32(T.ptx.fma.rn.f32(graw, self.c1, c0), 64.0))
        s = T.ptx.rcp.approx.f32(e + 1.0)
        return e, s, T.ptx.ex2.approx.f32(s * (R.LOWER_BOUND * LOG2E))


def _state_io(S, ptr, offset, store):
    """The lane's 16 x 4 block of a [K, V] f32 state at element `offset` (row 0, column 0):
    16 ``ld/st.global.v4.f32``; loads ``mov`` into the mutable registers S."""
    base = ptr.at(offset)
    for r in range(ROWS):
        if store:
            T.ptx.st.global_.v4.f32(base + r * V * 4, S[r])
        else:
            vals = T.ptx.ld.global_.v4.f32(base + r * V * 4)
            for c in range(4):
                S[r][c].set(vals[c])


def _cols(ptr, offset):
    """4 bf16 values of a V-vector (the lane's columns) -> f32."""
    return [x for w in T.ptx.ld.global_.nc.v2.b32(ptr.at(offset)) for x in _unpack(w)]


def _bf16(ptr, offset):
    return T.ptx.cvt.f32.bf16(T.ptx.ld.global_.nc.b16(ptr.at(offset)))


def _forward_step(ln, S, tok, H, h, k, g_raw, v, beta):
    """S <- S_t of token `tok` from S_{t-1} (the lane's block, in place)."""
    kr = _load_rows(k, (tok * H + h) * K + ln.row0)
    gr = _load_rows(g_raw, (tok * H + h) * K + ln.row0)
    vc = _cols(v, (tok * H + h) * V + ln.col)
    bt = _bf16(beta, tok * H + h)
    pk = [None] * 4
    kk = None
    c0 = ln.c0()
    for r in range(ROWS):
        decay = ln.gate(gr[r], c0[r])[2]
        for c in range(4):
            T.ptx.mul.f32(S[r][c], S[r][c], decay)
            pk[c] = kr[r] * S[r][c] if r == 0 else T.ptx.fma.rn.f32(kr[r], S[r][c], pk[c])
        kk = kr[r] * kr[r] if r == 0 else T.ptx.fma.rn.f32(kr[r], kr[r], kk)
    tot = _butterfly(pk + [kk])
    rk = T.ptx.rsqrt.approx.f32(tot[4] + R.L2_EPS)
    d = [bt * (vc[c] - tot[c] * rk) for c in range(4)]
    for r in range(ROWS):
        kh = kr[r] * rk
        for c in range(4):
            T.ptx.fma.rn.f32(S[r][c], kh, d[c], S[r][c])


def _backward_step(ln, dS, ws_at, part, gacc, tok, H, h, ins, outs):
    """One token of the reverse walk: S_{t-1} (the lane's block) is read at `ws_at`, dS (the
    gradient of S_t) updated in place to that of S_{t-1}; the token's gradients are stored and
    channel k's gate-parameter terms added to its sums in `gacc` (shared, [2, K])."""
    q, k, g_raw, v, beta, do = ins
    dq, dk, dg, dv, dbeta = outs
    row = (tok * H + h) * K
    kr, qr, gr = (_load_rows(x, row + ln.row0) for x in (k, q, g_raw))
    vc = _cols(v, (tok * H + h) * V + ln.col)
    doc = _cols(do, (tok * H + h) * V + ln.col)
    bt = _bf16(beta, tok * H + h)
    Sp = [list(T.ptx.ld.global_.v4.f32(ws_at + r * V * 4)) for r in range(ROWS)]
    c0 = ln.c0()
    decay = []
    pk, pq, pd = [None] * 4, [None] * 4, [None] * 4
    kk = qq = kq = None
    for r in range(ROWS):                                   # P = Diag(exp(g)) S_{t-1}
        decay.append(ln.gate(gr[r], c0[r])[2])
        for c in range(4):
            Sp[r][c] = Sp[r][c] * decay[r]
            first = r == 0
            pk[c] = kr[r] * Sp[r][c] if first else T.ptx.fma.rn.f32(kr[r], Sp[r][c], pk[c])
            pq[c] = qr[r] * Sp[r][c] if first else T.ptx.fma.rn.f32(qr[r], Sp[r][c], pq[c])
            pd[c] = kr[r] * dS[r][c] if first else T.ptx.fma.rn.f32(kr[r], dS[r][c], pd[c])
        kk = kr[r] * kr[r] if r == 0 else T.ptx.fma.rn.f32(kr[r], kr[r], kk)
        qq = qr[r] * qr[r] if r == 0 else T.ptx.fma.rn.f32(qr[r], qr[r], qq)
        kq = kr[r] * qr[r] if r == 0 else T.ptx.fma.rn.f32(kr[r], qr[r], kq)
    tot = _butterfly(pk + pq + pd + [kk, qq, kq])
    rk = T.ptx.rsqrt.approx.f32(tot[12] + R.L2_EPS)
    rq = T.ptx.rsqrt.approx.f32(tot[13] + R.L2_EPS)
    kqh = tot[14] * rk * rq                                 # k^ . q^
    e = [tot[c] * rk for c in range(4)]                     # P^T k^
    res = [vc[c] - e[c] for c in range(4)]
    d = [bt * res[c] for c in range(4)]
    # dd = dS'^T k^ with dS' = dS + scale q^ do^T
    dd = [T.ptx.fma.rn.f32(kqh * SCALE, doc[c], tot[8 + c] * rk) for c in range(4)]
    de = [-(bt * dd[c]) for c in range(4)]
    T.ptx.st.global_.v4.f32(dv.at((tok * H + h) * V + ln.col), [bt * x for x in dd],
                            pred=ln.rg == 0)
    sb = sq = sk = sd = None                                # the lane's column sums
    for c in range(4):
        tb = dd[c] * res[c]
        tq = doc[c] * (T.ptx.fma.rn.f32(kqh, d[c], tot[4 + c] * rq) * SCALE)
        tk = T.ptx.fma.rn.f32(d[c], dd[c], de[c] * e[c])
        td = d[c] * doc[c]
        sb, sq, sk, sd = ((tb, tq, tk, td) if c == 0 else
                          (sb + tb, sq + tq, sk + tk, sd + td))
    rows = []
    for r in range(ROWS):
        kh, qs = kr[r] * rk, qr[r] * (rq * SCALE)
        pdo = dsd = pde = gsum = None
        for c in range(4):
            T.ptx.fma.rn.f32(dS[r][c], qs, doc[c], dS[r][c])
            P = Sp[r][c]
            pdo = P * doc[c] if c == 0 else T.ptx.fma.rn.f32(P, doc[c], pdo)
            dsd = dS[r][c] * d[c] if c == 0 else T.ptx.fma.rn.f32(dS[r][c], d[c], dsd)
            pde = P * de[c] if c == 0 else T.ptx.fma.rn.f32(P, de[c], pde)
            dP = T.ptx.fma.rn.f32(kh, de[c], dS[r][c])
            gsum = dP * P if c == 0 else T.ptx.fma.rn.f32(dP, P, gsum)
            T.ptx.mul.f32(dS[r][c], dP, decay[r])
        rows.append((T.ptx.fma.rn.f32(kh, sd, pdo) * SCALE, dsd + pde, gsum))
    red = _cols_sum([x for trio in rows for x in trio] + [sb, sq, sk])
    # the warp's partials (lanes of column group 0), then channel k < 128 adds the 8 warps'
    par = tok & 1
    with T.if_(ln.cg == 0):
        for j in range(3):
            for r4 in range(ROWS // 4):
                T.ptx.st.shared.v4.f32(part.at(par, ln.warp, ln.row0 + (j * K + 4 * r4)),
                                       [red[3 * (4 * r4 + i) + j] for i in range(4)])
        T.ptx.st.shared.v4.f32(part.at(par, ln.warp, 3 * K), red[-3:] + [red[-1]],
                               pred=ln.rg == 0)
    # channel ch's inputs, loaded by every thread (tid & 127) before the barrier so that their
    # latency overlaps the wait; only threads < 128 use them
    ch = T.tid.x & (K - 1)
    qx, kx, gx = (_bf16(x, row + ch) for x in (q, k, g_raw))
    dtb = T.ptx.ld.global_.nc.f32(ln.dt_bias.at(h * K + ch))
    T.ptx.bar.sync(0)
    with T.if_(T.tid.x < K):
        acc = [None] * 6
        for w in range(WARPS):
            vals = [T.ptx.ld.shared.f32(part.at(par, w, ch + j * K)) for j in range(3)]
            vals += list(T.ptx.ld.shared.v4.f32(part.at(par, w, 3 * K)))[:3]
            acc = vals if w == 0 else [a + x for a, x in zip(acc, vals)]
        dqh, dkh, dgs, db, qdq, kdk = acc
        T.ptx.st.global_.f32(dq.at(row + ch), rq * (dqh - qx * rq * qdq))
        T.ptx.st.global_.f32(dk.at(row + ch), rk * (dkh - kx * rk * kdk))
        ex, s, _ = ln.gate(gx, ln.c1 * dtb)
        # dg_raw = dg (-5 exp(A_log)) s (1 - s), 1 - s = exp(-z) s
        dgr = dgs * (ln.a * R.LOWER_BOUND) * s * (ex * s)
        T.ptx.st.global_.f32(dg.at(row + ch), dgr)
        # z = exp(A_log) (g_raw + dt_bias): ddt_bias += dg_raw, dA_log += dg_raw (g_raw + dt_bias)
        # (the thread's own shared slots: read and written by it alone, no barrier)
        T.ptx.st.shared.f32(gacc.at(0, ch), T.ptx.ld.shared.f32(gacc.at(0, ch)) + dgr)
        T.ptx.st.shared.f32(gacc.at(1, ch), T.ptx.fma.rn.f32(
            dgr, gx + dtb, T.ptx.ld.shared.f32(gacc.at(1, ch))))
        T.ptx.st.global_.f32(dbeta.at(tok * H + h), db, pred=ch == 0)


def _gate_params_grad(gsum, flag, gred, cnt, d_A_log, d_dt_bias, h, H):
    """dA_log [H] and ddt_bias [H, K] from every (head, sequence) CTA's per-channel sums
    `gsum`: each CTA stores its sums in its own slot of `gred` ([N, H, 2, K], by grid y) and
    counts itself in on the head's counter (``fence.acq_rel.gpu`` by every thread, ``bar.sync``,
    one ``atom.acq_rel.gpu.global.add.u32``); the last CTA of the head sums the N slots in grid-y
    order (``ld.global.cg``: L2, never a stale L1 line; bitwise the same whichever CTA arrives
    last: no atomics in the sum), stores ddt_bias (threads < K, one channel each) and dA_log
    (warp 0: 4 channels a lane, then a 5-step ``shfl.sync.bfly`` butterfly), and resets the
    counter for the next launch."""
    ch = T.tid.x & (K - 1)
    with T.if_(T.tid.x < K):
        own = gred.at((T.ctaid.y * H + h) * (2 * K) + ch)
        T.ptx.st.global_.f32(own, T.ptx.ld.shared.f32(gsum.at(0, ch)))
        T.ptx.st.global_.f32(own + K * 4, T.ptx.ld.shared.f32(gsum.at(1, ch)))
    T.ptx.fence.acq_rel.gpu()   # every thread's slot before the arrival below (cumulative)
    T.ptx.bar.sync(0)
    with T.if_(T.tid.x == 0):
        old = T.ptx.atom.acq_rel.gpu.global_.add.u32(cnt.at(h), 1)
        T.ptx.st.shared.u32(flag.at(0), old)
    T.ptx.bar.sync(0)
    with T.if_(T.ptx.ld.shared.u32(flag.at(0)) == T.nctaid.y - 1, uniform=True):
        with T.if_(T.tid.x < K):
            acc = T.reg(T.f32, init=0.0)
            with T.range(T.nctaid.y) as m:
                T.ptx.add.f32(acc, acc, T.ptx.ld.global_.cg.f32(
                    gred.at((m * H + h) * (2 * K) + ch)))
            T.ptx.st.global_.f32(d_dt_bias.at(h * K + ch), acc)
        with T.if_(T.tid.x < 32):
            acc = T.reg(T.f32, init=0.0)
            with T.range(T.nctaid.y) as m:
                at = gred.at((m * H + h) * (2 * K) + K + ch)
                for j in range(K // 32):
                    T.ptx.add.f32(acc, acc, T.ptx.ld.global_.cg.f32(at + j * 32 * 4))
            tot = acc
            for off in (1, 2, 4, 8, 16):
                tot = tot + T.ptx.mov.f32(T.ptx.shfl.sync.bfly.b32(tot, off, 0x1F, FULL))
            with T.if_(T.tid.x == 0):
                T.ptx.st.global_.f32(d_A_log.at(h), tot)
                T.ptx.st.relaxed.gpu.global_.u32(cnt.at(h), 0)   # ready for the next launch


def _grid(B, H, lens=None):
    """(heads, sequences): N = B rows, or the sequences of a varlen pack."""
    return (H, B if lens is None else len(lens))


@T.kernel(grid=_grid, block=32 * WARPS)
def kda_bwd(q: T.gptr[T.bf16], k: T.gptr[T.bf16], g_raw: T.gptr[T.bf16], v: T.gptr[T.bf16],
            beta: T.gptr[T.bf16], A_log: T.gptr[T.f32], dt_bias: T.gptr[T.f32],
            h0: T.gptr[T.f32], do: T.gptr[T.bf16], dht: T.gptr[T.f32],
            cu_seqlens: T.gptr[T.s32], chunk_off: T.gptr[T.s32], order: T.gptr[T.s32],
            s0: T.gptr[T.f32],
            ws: T.gptr[T.f32], dq: T.gptr[T.f32], dk: T.gptr[T.f32], dv: T.gptr[T.f32],
            dg: T.gptr[T.f32], dbeta: T.gptr[T.f32], dh0: T.gptr[T.f32],
            gred: T.gptr[T.f32], cnt: T.gptr[T.u32], dA_log: T.gptr[T.f32],
            ddt_bias: T.gptr[T.f32]):
    part = T.shared(T.f32, (2, WARPS, PART), name="sPart", align=16)
    gsum = T.shared(T.f32, (2, K), name="sGateSum", align=16)
    flag = T.shared(T.u32, (1,), name="sLast", align=4)
    with T.if_(T.tid.x < K):    # the channel threads' sums start at zero (their own slots)
        zero = T.reg(T.f32, init=0.0)
        T.ptx.st.shared.f32(gsum.at(0, T.tid.x), zero)
        T.ptx.st.shared.f32(gsum.at(1, T.tid.x), zero)
    h, H = T.ctaid.x, T.nctaid.x
    n = T.ptx.ld.global_.nc.u32(order.at(T.ctaid.y))       # longest sequences first
    ln = _Lane(A_log, dt_bias, h)
    start = T.ptx.ld.global_.nc.u32(cu_seqlens.at(n))
    length = T.ptx.ld.global_.nc.u32(cu_seqlens.at(n + 1)) - start
    cbase = T.ptx.ld.global_.nc.u32(chunk_off.at(n))
    nch = (length + (C - 1)) >> 6
    block = ln.row0 * V + ln.col                            # the lane's block in a [K, V] state
    S = [T.fragment(T.f32, 4) for _ in range(ROWS)]
    _state_io(S, h0, (n * H + h) * (K * V) + block, store=False)
    # 1. forward: every chunk's start state into s0
    with T.range(nch) as c:
        _state_io(S, s0, ((cbase + c) * H + h) * (K * V) + block, store=True)
        tok0 = start + (c << 6)
        with T.range(T.ptx.min.u32(length - (c << 6), C)) as i:
            _forward_step(ln, S, tok0 + i, H, h, k, g_raw, v, beta)
    # 2. reverse, chunk by chunk: recompute the chunk's S_{t-1} into ws, walk it backwards
    dS = [T.fragment(T.f32, 4) for _ in range(ROWS)]
    _state_io(dS, dht, (n * H + h) * (K * V) + block, store=False)
    ins, outs = (q, k, g_raw, v, beta, do), (dq, dk, dg, dv, dbeta)
    with T.range(nch) as cr:
        c = nch - 1 - cr
        _state_io(S, s0, ((cbase + c) * H + h) * (K * V) + block, store=False)
        tok0 = start + (c << 6)
        nv = T.ptx.min.u32(length - (c << 6), C)
        with T.range(nv) as i:
            _state_io(S, ws, ((T.ctaid.y * H + h) * C + i) * (K * V) + block, store=True)
            _forward_step(ln, S, tok0 + i, H, h, k, g_raw, v, beta)
        with T.range(nv) as ir:
            i = nv - 1 - ir
            _backward_step(ln, dS, ws.at(((T.ctaid.y * H + h) * C + i) * (K * V) + block),
                           part, gsum, tok0 + i, H, h, ins, outs)
    n = T.ptx.ld.global_.nc.u32(order.at(T.ctaid.y))       # again: no register kept for it
    _state_io(dS, dh0, (n * H + h) * (K * V) + block, store=True)
    _gate_params_grad(gsum, flag, gred, cnt, dA_log, ddt_bias, h, H)


# --- inputs, reference, cases ------------------------------------------------------------------

_REFS = R.RefCache()
GRADS = ("dq", "dk", "dv", "dg", "dbeta", "dh0", "dA_log", "ddt_bias")


def _offsets(B, T_, lens):
    """(cu_seqlens, chunk_off): token and 64-token chunk offsets of the sequences."""
    ln = [T_] * B if lens is None else list(lens)
    cu = np.concatenate([[0], np.cumsum(ln)]).astype(np.int32)
    chunks = np.concatenate([[0], np.cumsum([-(-x // C) for x in ln])]).astype(np.int32)
    return cu, chunks


def _reference(x, cu, varlen, method):
    g = R.backward(x["q"], x["k"], x["v"], x["g_raw"], x["beta"], x["A_log"], x["dt_bias"],
                   x["h0"], x["do"], x["dht"], cu_seqlens=cu if varlen else None, method=method)
    return {n: g[n].astype(np.float32) for n in GRADS}


def inputs(rng, B, T_, H, lens=None, gate="mixed"):
    """B rows of T_ tokens, or one row packing the sequences `lens`: raw KDA inputs (v and h0
    scaled as kda_fwd.inputs scales them: the smaller RMS of (o, ht) in [1, 2)), the output
    gradients do (bf16) and dht (f32, N(0, 1)), the offsets, zeroed workspaces and outputs."""
    cu, chunks = _offsets(B, T_, lens)
    N = len(cu) - 1
    x = R.raw_inputs(rng, B, T_, H, N=N, gate=gate)
    varlen = lens is not None
    o, ht = R.forward(**x, cu_seqlens=cu if varlen else None)
    c = R.unit_scale(o, ht)
    x["v"] = (x["v"].astype(np.float32) * c).astype(x["v"].dtype)
    x["h0"] = x["h0"] * np.float32(c)
    x["do"] = rng.standard_normal((B, T_, H, V), np.float32).astype(x["v"].dtype)
    x["dht"] = rng.standard_normal((N, H, K, V), np.float32)
    small = B * T_ * H < R_LARGE
    order = np.argsort(-np.diff(cu), kind="stable").astype(np.int32)
    arrays = dict(x, cu_seqlens=cu, chunk_off=chunks, order=order,
                  s0=np.zeros((int(chunks[-1]), H, K, V), np.float32),
                  ws=np.zeros((N * H, C, K, V), np.float32),
                  dq=np.zeros((B, T_, H, K), np.float32), dk=np.zeros((B, T_, H, K), np.float32),
                  dv=np.zeros((B, T_, H, V), np.float32), dg=np.zeros((B, T_, H, K), np.float32),
                  dbeta=np.zeros((B, T_, H), np.float32), dh0=np.zeros((N, H, K, V), np.float32),
                  gred=np.zeros((N, H, 2, K), np.float32), cnt=np.zeros(H, np.uint32),
                  dA_log=np.zeros(H, np.float32), ddt_bias=np.zeros((H, K), np.float32))
    if small:   # the reference now, while the inputs are at hand (the suite asks for it next)
        _REFS.put({n: arrays[n] for n in REF_ARGS},
                  _reference(x, cu, varlen, "recurrent"))
    return arrays


R_LARGE = 1 << 14        # tokens x heads from which the reference is the chunked one
REF_ARGS = ("q", "k", "v", "g_raw", "beta", "A_log", "dt_bias", "h0", "do", "dht",
            "cu_seqlens")


def reference(q, k, v, g_raw, beta, A_log, dt_bias, h0, do, dht, cu_seqlens, lens=None):
    """The float64 gradients (kda_ref.backward): token by token for small cases, the chunked
    reverse (equal to 1e-15, much faster) for large ones."""
    x = dict(q=q, k=k, v=v, g_raw=g_raw, beta=beta, A_log=A_log, dt_bias=dt_bias, h0=h0, do=do,
             dht=dht)
    cached = _REFS.get(dict(x, cu_seqlens=cu_seqlens))
    if cached is not None:
        return cached
    B, T_, H = np.shape(q)[:3]
    method = "recurrent" if B * T_ * H < R_LARGE else "chunked"
    return _reference(x, cu_seqlens, lens is not None, method)


def constraints(B, T_, H, lens=None):
    out, N = R.shape_problems(B, T_, H, lens, "y")
    chunks = sum(-(-x // C) for x in ([T_] * B if lens is None else lens))
    if max(B * T_, chunks * K, N * C * K) * H * K >= 1 << 32:
        out.append(f"B={B}, T_={T_}, H={H}, {N} sequences: every tensor (the workspaces s0 "
                   f"[{chunks}, H, K, V] and ws [N H, {C}, K, V] included) must hold fewer "
                   f"than 2^32 elements (32-bit element offsets)")
    return out


def _flops(B, T_, H):
    """Per token and head, the recurrence's multiply-adds over the K x V state: the forward
    (decay, e, update: 3 K V) twice (pass 1 and the recompute) and the backward (decay, e, P^T
    q, dS^T k, the q^ update, dq^, dk^ (2), dP, dg, dS: 11 K V); 2 FLOPs each."""
    return 2 * B * T_ * H * 17 * K * V


def _bytes(B, T_, H, lens=None):
    """q, k, g_raw, v read three times, do once, the gradients written (f32); per token the
    state read and written to the workspace (2 x 64 KB: what bounds this kernel's memory)."""
    N = B if lens is None else len(lens)
    tok = B * T_ * H
    return (tok * (3 * 2 * (3 * K + V) + 2 * V + 4 * (3 * K + V + 1) + 2 * 4 * K * V)
            + 3 * N * H * K * V * 4)


PACK6 = (1300, 547, 2048, 963, 271, 3063)      # the public varlen pack (8192 tokens)
PACK8 = (1024,) * 8

# the public rule for gradients: every element within atol = rtol = 0.01 (float32 arithmetic
# throughout: numsim's errors are ~1e-5 relative)
TOLERANCE = T.tolerance(rtol=0.01, atol=0.01)
_ARGS = dict(q="q", k="k", v="v", g="g_raw", beta="beta", A_log="A_log", dt_bias="dt_bias",
             h0="h0", l2norm=True)
_COMMON = dict(inputs=inputs, reference=reference, outputs=list(GRADS), tolerance=TOLERANCE,
               constraints=constraints, flops=_flops, bytes=_bytes)


def _baselines(varlen: bool) -> list:
    """FLA's chunk_kda forward + backward (its autograd), and that backward alone, on the same
    inputs (FLA draws its own output gradients: timing only)."""
    args = dict(_ARGS, cu_seqlens="cu_seqlens") if varlen else dict(_ARGS)
    return [{"name": "fla.chunk_kda.fwd_bwd", "args": args},
            {"name": "fla.chunk_kda.bwd", "args": args}]


# sync_check of 256 threads over a whole backward recurrence is ~2 minutes per case on 2 cores
# (numsim with an event trace): `tirxh check` over the zoo leaves the cases with this tag to
# tests/zoo/test_kda_bwd.py (zoo/tirx.toml: [sync_check] exclude_tags) and checks the smallest
SYNC_IN_TESTS = ("sync-slow",)

SUITE = T.suite(
    kda_bwd, baselines=_baselines(False), **_COMMON,
    cases=[
        # the smallest (what sync_check runs): one chunk of 40 tokens, saturated gates
        T.case("t40_h1_deep", B=1, T_=40, H=1, gate="deep"),
        # two rows of 65 tokens: a chunk and a 1-token tail each; slow gates
        T.case("b2_t65_h1_slow", B=2, T_=65, H=1, gate="slow", tags=SYNC_IN_TESTS),
        # three chunks (64, 64, 22), mixed gates (one head: `tirxh check`'s sync_check runs
        # every small case within numsim's 5M warp-instruction budget, ~22K per token and CTA)
        T.case("t150_h1_mixed", B=1, T_=150, H=1, tags=SYNC_IN_TESTS),
        T.case("t8192_h64", B=1, T_=8192, H=64, small=False, tags=("main",)),
        T.case("t8192_h96", B=1, T_=8192, H=96, small=False, tags=("main",)),
    ])

SUITE_VARLEN = T.suite(
    kda_bwd, baselines=_baselines(True), **_COMMON,
    cases=[
        # a pack of 4 sequences, one of a single token, one of exactly a chunk
        T.case("pack_17_1_64_30", B=1, T_=112, H=1, lens=(17, 1, 64, 30), gate="deep",
               tags=SYNC_IN_TESTS),
        T.case("pack6_h64", B=1, T_=8192, H=64, lens=PACK6, small=False, tags=("main",)),
        T.case("pack6_h96", B=1, T_=8192, H=96, lens=PACK6, small=False, tags=("main",)),
        T.case("pack8x1024_h64", B=1, T_=8192, H=64, lens=PACK8, small=False, tags=("main",)),
        T.case("pack8x1024_h96", B=1, T_=8192, H=96, lens=PACK8, small=False, tags=("main",)),
    ])
