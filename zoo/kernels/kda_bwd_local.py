"""Kimi Delta Attention backward, piece 3 of the chunked split (issue 18; kda_bwd_split.py has
the contract, docs/TUNING.md "The chunked backward" the plan): the intra-chunk gradients, one
CTA per (head, chunk), every chunk of every sequence at once (no serial chain). Correctness
first: f32 on the CUDA cores, every intermediate in shared memory; tensor cores come next.

Math (kda_bwd_split.chunk_local): from the chunk's own q, k, g_raw, beta and the pieces of the
reverse pass (dqe, dke, dkl [C, K]; dm, dtb [C, C]; dgs [K]), with the normalized k^, q^ (qs =
scale q^), the gate's cumulative log-decay G, P[i, j] = k^_i . k^_j exp(G_i - G_j) (j < i), T =
(I + Diag(beta) P)^-1:

    dbeta_j = sum_i dtb[i, j] T[i, j] + sum_n dA[j, n] P[j, n]
    dA = -strict_lower(T^T (dtb Diag(beta)) T^T),  dP = Diag(beta) dA
    da, db of the decayed pairwise products (P: a = b = k^; M: a = qs, b = k^)
    dqs = dqe exp(G) + da_M,  dk^ = dke exp(G) + dkl exp(G_C - G) + da_P + db_P + db_M
    dG = dqe qs exp(G) + dke k^ exp(G) - dkl k^ exp(G_C - G) + k^ (da_P - db_P) + qs da_M - k^ db_M,
    dG[C - 1] += dgs + colsum(dkl k^ exp(G_C - G)), dg = reverse cumulative sum of dG

then the L2 norms' (dx = r (dy - y (y . dy))) and the gate's chains (dg_raw = dg (-5 exp(A_log))
s (1 - s)) and the gate parameters' sums (kda_bwd's slots and counter, over the chunks of a head).

Decay factors (kda_chunk.py's 16-row block references, in log2 units): r_a = G at block a's
first row, L_i = 2^(G_i - r_a) in [2^-108, 1], D_j = 2^(r_b - G_j) <= 2^108, F_ab = 2^(r_a - r_b)
<= 1: exp(G_i - G_j) = L_i F_ab D_j, so nothing overflows under saturated gates. In the sums
over j of a block b, F_ab multiplies D_j k^_j (one factor per channel and block pair).

Inputs: q, k, g_raw [B, T, H, K] bf16; beta [B, T, H] bf16; A_log [H], dt_bias [H, K] f32;
chunk_tok, chunk_rows [chunks] s32 (each chunk's first token in the flattened B x T rows and
its valid rows, 1..64); the pieces dqe, dke, dkl [chunks, H, C, K], dm, dtb [chunks, H, C, C],
dgs [chunks, H, K] f32 (lower-triangular dm, dtb; rows past a sequence zero). Workspaces
(zeros): gred [chunks, H, 2, K] f32, cnt [H] u32. Outputs (f32): dq, dk, dg [B, T, H, K], dbeta
[B, T, H], dA_log [H], ddt_bias [H, K]. In the suite the pieces come from the float64 reverse
pass (kda_bwd_split.chunk_reverse) until piece 2 is a kernel; the outputs are the final
gradients, checked against kda_ref.backward under the public rule.

Phases (256 threads, ``bar.sync`` between): norms and beta -> gate, G, the operands KL = k^ L,
KD = k^ D, QL = qs L (thread per channel) -> P (thread per column and row block) -> T by
forward substitution (thread per column: a column of T depends on that column only, no
barrier) -> X = T^T dT and dm staged -> dA, dP -> dbeta; da, db (thread per channel and two
row blocks) and the elementwise terms -> the reverse scan and the gate chain (thread per
channel) beside the norms' row dots -> dq, dk -> the gate parameters' sums.

Shared memory: four [64, 129] f32 (KL, KD, QL, G; then dk^, dG, dqs), five [64, 65] f32 (P,
then dP; T; X; dm; dA o P): 216 KB, one CTA per SM. Strides 129 and 65 put a column's rows in
different banks.

Tags: linear-attention, backward, chunked, fused-gate, varlen
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import tirxh.lang as T
from tirxh.core import ir

# the zoo is a directory of kernel files, not a package (see kda_fwd.py)
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
import kda_bwd as BW  # noqa: E402 - after the path that finds it
import kda_bwd_split as SP  # noqa: E402
import kda_ref as R  # noqa: E402
from kda_chunk import Running, trips, unpack  # noqa: E402

TAGS = ("linear-attention", "backward", "chunked", "fused-gate", "varlen")

K = 128
C = R.CHUNK
NB = C // SP.BLOCK
BLK = SP.BLOCK
SK = K + 1                # row stride of the [C, K] buffers (f32 words)
SC = C + 1                # row stride of the [C, C] buffers
LOG2E = 1.4426950408889634
SCALE = K ** -0.5
G2 = R.LOWER_BOUND * LOG2E
_bf16 = BW._bf16          # one bf16 element -> f32 (``ld.global.nc.b16``, ``cvt.f32.bf16``)


class _Smem:
    """Every shared buffer (module docstring: 216 KB); comments name a buffer's second use."""

    def __init__(self):
        mk = dict(align=16)
        self.kl = T.shared(T.f32, (C, SK), name="sKL", **mk)      # then dk^
        self.kd = T.shared(T.f32, (C, SK), name="sKD", **mk)      # then dG
        self.ql = T.shared(T.f32, (C, SK), name="sQL", **mk)      # then dqs
        self.g = T.shared(T.f32, (C, SK), name="sGc", **mk)       # G (log2 units)
        self.p = T.shared(T.f32, (C, SC), name="sP", **mk)        # P (strict), then dP
        self.t = T.shared(T.f32, (C, SC), name="sT", **mk)
        self.x = T.shared(T.f32, (C, SC), name="sX", **mk)
        self.dm = T.shared(T.f32, (C, SC), name="sDM", **mk)
        self.ap = T.shared(T.f32, (C, SC), name="sAP", **mk)      # dtb, then dA o P
        self.ref = T.shared(T.f32, (NB, K), name="sRef", **mk)
        self.rn = T.shared(T.f32, (2, C), name="sRn", **mk)       # rk, scale rq
        self.beta = T.shared(T.f32, (C,), name="sBeta", **mk)
        self.db = T.shared(T.f32, (C,), name="sDb", **mk)
        self.col = T.shared(T.f32, (2, K), name="sCol", **mk)
        self.dot = T.shared(T.f32, (2, C), name="sDot", **mk)
        self.gsum = T.shared(T.f32, (2, K), name="sGateSum", **mk)
        self.flag = T.shared(T.u32, (1,), name="sLast", align=4)


def _row_norm(ptr, offset):
    """1 / sqrt(|x|^2 + 1e-6) of a 128-channel bf16 row: 16 ``ld.global.nc.v4.b32``, 4 chains."""
    return _norm_of(lambda v: T.ptx.ld.global_.nc.v4.b32(ptr.at(offset + 8 * v)))


def _norm_of(words, roll=False):
    """`_row_norm` of the row whose 16-byte piece v (8 bf16) `words(v)` loads as 4 words;
    `roll`: four runtime trips of four pieces (`trips`, `Running`: the same words)."""
    accs = [Running(roll) for _ in range(4)]
    for b, u in trips(K // 8, 4, roll):
        for i, w in enumerate(words(b * 4 + u)):
            for x in unpack(w):
                accs[i].fma(x, x)
    a = [acc.value for acc in accs]
    return T.ptx.rsqrt.approx.f32((a[0] + a[1]) + (a[2] + a[3]) + R.L2_EPS)


class StagedRows:
    """The chunk's raw q, k and g_raw rows ([C, K] bf16 each, 256 bytes a row) staged in shared
    memory by ``cp.async.cg`` (16 bytes a copy, a thread's 12 copies issued before any wait)
    for `_norms` and `_gate` to read (their `rows`) instead of global memory. Why: from global
    memory the gate's 192 scalar loads a thread (four warps) ran in dependent rounds behind the
    other SMs' traffic (session 30's profile: norms + gate 25.9% of piece 3's CTA, the first
    wave 2.7x faster in `gate` than the rest). The values are the same bf16 words, converted
    the same way: the outputs do not change by a bit. Measured in kda_bwd_prep3g (session 31,
    an H100, T8192 H96): the prep 0.950x, not the 0.80x a load-bound gate predicted. `bases`: name ("q", "k", "g") -> a shared
    buffer and byte offset holding C x 256 bytes, free until the gate's barrier."""

    ROW = K * 2
    NAMES = ("q", "k", "g")

    def __init__(self, bases, roll=0):
        self.bases, self.roll = bases, roll   # 1: `_gate`'s rows rolled; 2: the norms' too

    def stage(self, ck, srcs, commit=True):
        """Every thread: its 16-byte pieces t + 256 u (row (t + 256 u) / 16) of each tensor in
        `srcs` (name -> global bf16 tensor [B, T, H, K]; in NAMES' order), one commit group
        (`commit`=False: the caller commits, with copies of its own in the group); rows past
        the chunk copy its last valid row (ck.row clamps; the norms and gate mask them)."""
        per = C * (self.ROW // 16) // 256
        t = T.tid.x
        for name in (n for n in self.NAMES if n in srcs):
            buf, off = self.bases[name]
            dst = buf.ptr(off) + t * 16
            for u in range(per):
                j = t + 256 * u
                src = srcs[name].at(ck.row(j >> 4) + (j & 15) * 8)
                T.ptx.cp.async_.cg.shared.global_(ir.Addr(dst, 4096 * u), src, 16)
        if commit:
            T.ptx.cp.async_.commit_group()

    def wait(self):
        """The thread's copies landed (the caller's barrier publishes everyone's)."""
        T.ptx.cp.async_.wait_group(0)

    def elem(self, name, b, u, d):
        """Row BLK b + u, channel d of tensor `name` as f32 (``ld.shared.b16``,
        ``cvt.f32.bf16``): b a trace-time int (one address a row) or a runtime loop's register
        (one address a block, `_gate` rolled)."""
        buf, off = self.bases[name]
        if isinstance(b, int):
            at = ir.Addr(buf.ptr(off) + d * 2, (b * BLK + u) * self.ROW)
        else:
            at = ir.Addr(buf.ptr(off) + d * 2 + b * (BLK * self.ROW), u * self.ROW)
        return T.ptx.cvt.f32.bf16(T.ptx.ld.shared.b16(at))

    def at(self, name, i, d):
        """Row i (an expression), channel d of tensor `name` as f32 (`elem`'s conversion)."""
        buf, off = self.bases[name]
        return T.ptx.cvt.f32.bf16(T.ptx.ld.shared.b16(buf.ptr(off) + i * self.ROW + d * 2))

    def words(self, name, t):
        """Row t's 16-byte piece v (8 bf16) of tensor `name` as 4 words: a function of v, a
        trace-time int (a constant offset) or a runtime loop's register (`norm`'s and
        `_row_dot`'s `words`)."""
        buf, off = self.bases[name]
        row = buf.ptr(off) + t * self.ROW
        return lambda v: T.ptx.ld.shared.v4.b32(ir.Addr(row, 16 * v) if isinstance(v, int)
                                                else row + 16 * v)

    def norm(self, name, t):
        """`_row_norm` of row t of tensor `name` (16 ``ld.shared.v4.b32``: `words`)."""
        return _norm_of(self.words(name, t), roll=self.roll >= 2)


class _Chunk:
    """The CTA's chunk: head h of H, chunk c (grid y), its first token and valid rows."""

    def __init__(self, chunk_tok, chunk_rows):
        self.h, self.H, self.c = T.ctaid.x, T.nctaid.x, T.ctaid.y
        self.tok0 = T.ptx.ld.global_.nc.u32(chunk_tok.at(self.c))
        self.nv = T.ptx.ld.global_.nc.u32(chunk_rows.at(self.c))

    def row(self, i):
        """Element offset of channel 0 of row i in a [B, T, H, K] tensor (rows past the
        sequence clamped to its last: always a valid address; their values are masked)."""
        tok = self.tok0 + T.ptx.min.u32(self.nv - 1, i)
        return (tok * self.H + self.h) * K

    def piece(self, i, n):
        """Element offset of row i of a [chunks, H, C, n] piece."""
        return ((self.c * self.H + self.h) * C + i) * n


def _gate_consts(A_log, dt_bias, ck, d):
    """(exp(A_log), c1, c0, dt_bias[d]) of the head: exp(-z) = 2^(c1 g_raw + c0), c1 =
    -exp(A_log) log2(e), c0 = c1 dt_bias[d]."""
    return _gate_consts_of(lambda: T.ptx.ld.global_.nc.f32(A_log.at(ck.h)),
                           lambda: T.ptx.ld.global_.nc.f32(dt_bias.at(ck.h * K + d)))


def _gate_consts_of(a_log, dt_bias):
    """`_gate_consts` from the loads `a_log()` of A_log[h] and `dt_bias()` of dt_bias[h, d]
    (called in that order, between the instructions they always sat between)."""
    a = T.ptx.ex2.approx.f32(a_log() * LOG2E)
    dtb = dt_bias()
    c1 = a * -LOG2E
    return a, c1, c1 * dtb, dtb


def _sigmoid(graw, c1, c0):
    """(exp(-z), s = sigmoid(z)), exp(-z) clamped at 2^64."""
    e = T.ptx.ex2.approx.f32(T.ptx.min.f32(T.ptx.fma.rn.f32(graw, c1, c0), 64.0))
    return e, T.ptx.rcp.approx.f32(e + 1.0)


def _norms(sm, ck, q, k, beta, rows=None):
    """Threads 0..63: rk, scale rq and beta of row t (0 past the valid rows); q and k from
    `rows` (`StagedRows`) if given."""
    t = T.tid.x
    with T.if_(t < C):
        valid = t < ck.nv
        off = ck.row(t)
        norm = ((lambda n, src: _row_norm(src, off)) if rows is None
                else (lambda n, src: rows.norm(n, t)))
        rk = T.ptx.selp.f32(norm("k", k), 0.0, valid)
        rq = T.ptx.selp.f32(norm("q", q), 0.0, valid)
        T.ptx.st.shared.f32(sm.rn.at(0, t), rk)
        T.ptx.st.shared.f32(sm.rn.at(1, t), rq * SCALE)
        b = _bf16(beta, (ck.tok0 + T.ptx.min.u32(ck.nv - 1, t)) * ck.H + ck.h)
        T.ptx.st.shared.f32(sm.beta.at(t), T.ptx.selp.f32(b, 0.0, valid))


def _gate(sm, ck, q, k, g_raw, A_log, dt_bias, rows=None):
    """Threads 0..127, channel d: the gate of every row, G (log2 units), the block references
    r_a, and KL = k^ L, KD = k^ D, QL = qs L (L = 2^(G - r_a), D = 1 / L); q, k and g_raw
    from `rows` (`StagedRows`) if given. Staged rows that say `roll` run the rows as a runtime
    loop over the blocks (`trips`: ~2,900 SASS instructions fewer, kda_bwd_prep3g ROLL >= 1),
    the same words."""
    roll = rows is not None and rows.roll
    d = T.tid.x
    with T.if_(d < K):
        _, c1, c0, _ = _gate_consts(A_log, dt_bias, ck, d)
        G, ref = Running(roll), None
        for b, u in trips(C, BLK, roll):
            i = b * BLK + u
            if rows is None:
                off = ck.row(i) + d

                def load(n, off=off):
                    return _bf16({"g": g_raw, "k": k, "q": q}[n], off)
            else:
                if not roll:
                    ck.row(i) + d    # traced as it always was (dead code: ptxas drops it)

                def load(n, b=b, u=u):
                    return rows.elem(n, b, u, d)
            ref = _gate_row(sm, ck, G, ref, load, c1, c0, b, u, i, d)


def _gate_row(sm, ck, G, ref, load, c1, c0, b, u, i, d):
    """One row i (= b BLK + u) of the gate for channel d (`_gate`, `_gate_halves`): G advanced by
    the row's gate, the block reference taken at its first row (returned, for the block's later
    rows), KL, KD, QL and G stored; `load(name)` gives the row's g, k or q as f32."""
    valid = i < ck.nv
    G.add(T.ptx.selp.f32(_sigmoid(load("g"), c1, c0)[1] * G2, 0.0, valid))
    if u == 0:
        ref = G.snapshot()
        T.ptx.st.shared.f32(sm.ref.at(b, d), ref)
    lf = T.ptx.ex2.approx.f32(G.value - ref)
    df = T.ptx.ex2.approx.f32(ref - G.value)
    kn = load("k") * T.ptx.ld.shared.f32(sm.rn.at(0, i))
    qn = load("q") * T.ptx.ld.shared.f32(sm.rn.at(1, i))
    T.ptx.st.shared.f32(sm.kl.at(i, d), kn * lf)
    T.ptx.st.shared.f32(sm.kd.at(i, d), kn * df)
    T.ptx.st.shared.f32(sm.ql.at(i, d), qn * lf)
    T.ptx.st.shared.f32(sm.g.at(i, d), G.value)
    return ref


def _gate_halves(sm, ck, q, k, g_raw, A_log, dt_bias, rows):
    """`_gate` on all 256 threads (kda_bwd_prep3g GATE=1): thread t takes channel t % 128 and
    the rows of its half, t / 128 (blocks 0-1, or 2-3), from the staged `rows` only. A thread
    of the second half first runs the first half's running sum on its own (the sigmoids and
    adds alone: no exponentials, loads of k and q, or stores), so its G starts from the same
    register value by the same instructions in the same order: the same words as `_gate`.
    Why: `_gate` runs its 64 dependent rows on four warps, one an SM sub-partition, with no
    other warp to issue while it waits (session 35's profile of plan tc19's prep at T8192 H16
    on an H200: 7.68 us, 15.7% of a CTA)."""
    t = T.tid.x
    d, half = t & (K - 1), t >> 7
    _, c1, c0, _ = _gate_consts(A_log, dt_bias, ck, d)
    G = Running(True)
    first = half * (NB // 2)

    with T.range(first, unroll=1) as b:     # the rows before the half's own: G alone
        for u in range(BLK):
            gate = _sigmoid(rows.elem("g", b, u, d), c1, c0)[1]
            G.add(T.ptx.selp.f32(gate * G2, 0.0, b * BLK + u < ck.nv))
    ref = None
    with T.range(first, first + NB // 2, unroll=1) as b:
        for u in range(BLK):
            ref = _gate_row(sm, ck, G, ref, lambda n, b=b, u=u: rows.elem(n, b, u, d), c1, c0,
                            b, u, b * BLK + u, d)


def _zeros(n):
    return [T.reg(T.f32, init=0.0) for _ in range(n)]


def _fma_rows(acc, base, step, v):
    """acc[r] += (f32 at base + r * step bytes) * v for the 16 rows r of a block: one address
    computed, the rest immediate offsets (``ld.shared.f32 [base + imm]``, ``fma``)."""
    for r in range(BLK):
        T.ptx.fma.rn.f32(acc[r], T.ptx.ld.shared.f32(base + r * step), v, acc[r])


def _factor(sm, hi, lo, d):
    """F = 2^(r_hi - r_lo) of channel d (1 on the diagonal, hi = lo)."""
    return T.ptx.ex2.approx.f32(T.ptx.ld.shared.f32(sm.ref.at(hi, d))
                                - T.ptx.ld.shared.f32(sm.ref.at(lo, d)))


def _pairs(sm, ck, dtb):
    """P[i, j] = sum_d KL[i, d] F_ab[d] KD[j, d] for j < i (0 elsewhere): thread = (column j,
    row block a); the 16 rows of the block accumulate together. First the thread stages its 16
    elements of dtb in sAP (free until dA): 16 global loads in flight at once, where the X
    phase's row loop would wait for one at a time."""
    t = T.tid.x
    j, a = t & (C - 1), t >> 6
    b = j >> 4
    for r in range(BLK):
        m = a * BLK + r
        T.ptx.st.shared.f32(sm.ap.at(m, j), T.ptx.ld.global_.f32(dtb.at(ck.piece(m, C) + j)))
    acc = _zeros(BLK)
    with T.if_(b <= a):
        with T.range(K) as d:
            kd = T.ptx.ld.shared.f32(sm.kd.at(j, d)) * _factor(sm, a, b, d)
            _fma_rows(acc, sm.kl.at(a * BLK, d), SK * 4, kd)
    for r in range(BLK):
        i = a * BLK + r
        T.ptx.st.shared.f32(sm.p.at(i, j), T.ptx.selp.f32(acc[r], 0.0, j < i))


def _inverse(sm):
    """Threads 0..63, column j of T = (I + Diag(beta) P)^-1 by forward substitution:
    T[i, j] = [i = j] - beta_i sum_{m < i} P[i, m] T[m, j] (the column in registers)."""
    j = T.tid.x
    with T.if_(j < C):
        col = []
        for i in range(C):
            one = T.ptx.selp.f32(1.0, 0.0, j == i)
            if i == 0:
                val = one
            else:
                s = None
                for m in range(i):
                    p = T.ptx.ld.shared.f32(sm.p.at(i, m))
                    s = p * col[m] if s is None else T.ptx.fma.rn.f32(p, col[m], s)
                val = T.ptx.fma.rn.f32(-T.ptx.ld.shared.f32(sm.beta.at(i)), s, one)
            col.append(val)
            T.ptx.st.shared.f32(sm.t.at(i, j), val)


def _t_dt(sm, ck, dm):
    """X = T^T (dtb Diag(beta)) (thread = column j, row block mb of X; dtb staged in sAP), the
    first dbeta term colsum(dtb o T) (row block 0's threads), and dm staged in shared memory."""
    t = T.tid.x
    j, mb = t & (C - 1), t >> 6
    acc = _zeros(BLK)
    db = T.reg(T.f32, init=0.0)
    bj = T.ptx.ld.shared.f32(sm.beta.at(j))
    with T.range(C) as i:
        dtv = T.ptx.ld.shared.f32(sm.ap.at(i, j))
        _fma_rows(acc, sm.t.at(i, mb * BLK), 4, dtv * bj)
        T.ptx.fma.rn.f32(db, dtv, T.ptx.ld.shared.f32(sm.t.at(i, j)), db)
    for r in range(BLK):
        m = mb * BLK + r
        T.ptx.st.shared.f32(sm.x.at(m, j), acc[r])
        T.ptx.st.shared.f32(sm.dm.at(m, j), T.ptx.ld.global_.f32(dm.at(ck.piece(m, C) + j)))
    with T.if_(mb == 0):
        T.ptx.st.shared.f32(sm.db.at(j), db)


def _da(sm):
    """dA = -strict_lower(X T^T) (thread = column n, row block mb): dA o P into sAP (the second
    dbeta term), dP = Diag(beta) dA over P (each element read, then written, by one thread)."""
    t = T.tid.x
    n, mb = t & (C - 1), t >> 6
    acc = _zeros(BLK)
    with T.range(C) as j:
        _fma_rows(acc, sm.x.at(mb * BLK, j), SC * 4, T.ptx.ld.shared.f32(sm.t.at(n, j)))
    for r in range(BLK):
        m = mb * BLK + r
        dA = T.ptx.selp.f32(-acc[r], 0.0, n < m)
        T.ptx.st.shared.f32(sm.ap.at(m, n), dA * T.ptx.ld.shared.f32(sm.p.at(m, n)))
        T.ptx.st.shared.f32(sm.p.at(m, n), dA * T.ptx.ld.shared.f32(sm.beta.at(m)))


def _dbeta(sm, ck, dbeta):
    """Threads 0..63: dbeta of row i = sDb[i] + rowsum(dA o P)[i], stored where valid."""
    i = T.tid.x
    with T.if_(i < C):
        s = T.ptx.ld.shared.f32(sm.db.at(i))
        for n in range(C):
            s = s + T.ptx.ld.shared.f32(sm.ap.at(i, n))
        T.ptx.st.global_.f32(dbeta.at((ck.tok0 + i) * ck.H + ck.h), s, pred=i < ck.nv)


def _block_grads(sm, a, d):
    """For row block a (runtime) and channel d: (da_P, da_M, db_P, db_M) of its 16 rows."""
    acc_p, acc_m = _zeros(BLK), _zeros(BLK)
    for b in range(NB):                  # da: rows of a against the columns of blocks b <= a
        with T.if_(a >= b):
            f = _factor(sm, a, b, d)
            with T.range(BLK) as jj:
                j = jj + b * BLK
                kd = T.ptx.ld.shared.f32(sm.kd.at(j, d)) * f
                _fma_rows(acc_p, sm.p.at(a * BLK, j), SC * 4, kd)
                _fma_rows(acc_m, sm.dm.at(a * BLK, j), SC * 4, kd)
    dbp, dbm = _zeros(BLK), _zeros(BLK)
    for a2 in range(NB):                 # db: columns of a against the rows of blocks a2 >= a
        with T.if_(a2 >= a):
            f = _factor(sm, a2, a, d)
            with T.range(BLK) as ii:
                i = ii + a2 * BLK
                _fma_rows(dbp, sm.p.at(i, a * BLK), 4, T.ptx.ld.shared.f32(sm.kl.at(i, d)) * f)
                _fma_rows(dbm, sm.dm.at(i, a * BLK), 4, T.ptx.ld.shared.f32(sm.ql.at(i, d)) * f)
    out = []
    ref = T.ptx.ld.shared.f32(sm.ref.at(a, d))
    for r in range(BLK):
        G = T.ptx.ld.shared.f32(sm.g.at(a * BLK + r, d))
        lf, df = T.ptx.ex2.approx.f32(G - ref), T.ptx.ex2.approx.f32(ref - G)
        out.append((acc_p[r] * lf, acc_m[r] * lf, dbp[r] * df, dbm[r] * df))
    return out


def _elementwise(sm, ck, q, k, pieces):
    """Thread = (channel d, row blocks 2 hf, 2 hf + 1): the pairwise gradients, then per row
    dqs, dk^, dG (kept in registers across the barrier that frees KL, KD, QL, then written over
    them) and the partial column sum of dkl k^ exp(G_C - G)."""
    dqe, dke, dkl = pieces
    t = T.tid.x
    d, hf = t & (K - 1), t >> 7
    GC = T.ptx.ld.shared.f32(sm.g.at(C - 1, d))
    res, col = [], None
    for bl in range(2):
        a = hf * 2 + bl
        for r, (dap, dam, dbp, dbm) in enumerate(_block_grads(sm, a, d)):
            i = a * BLK + r
            G = T.ptx.ld.shared.f32(sm.g.at(i, d))
            eg, egc = T.ptx.ex2.approx.f32(G), T.ptx.ex2.approx.f32(GC - G)
            off = ck.row(i) + d
            kh = _bf16(k, off) * T.ptx.ld.shared.f32(sm.rn.at(0, i))
            qs = _bf16(q, off) * T.ptx.ld.shared.f32(sm.rn.at(1, i))
            xq, xk, xl = (T.ptx.ld.global_.f32(p.at(ck.piece(i, K) + d)) for p in (dqe, dke, dkl))
            dqs = T.ptx.fma.rn.f32(xq, eg, dam)
            dkh = T.ptx.fma.rn.f32(xk, eg, T.ptx.fma.rn.f32(xl, egc, dap + dbp + dbm))
            kl = kh * egc
            dG = (xq * (qs * eg) + xk * (kh * eg) - xl * kl + kh * (dap - dbp - dbm)
                  + qs * dam)
            col = xl * kl if col is None else T.ptx.fma.rn.f32(xl, kl, col)
            res.append((i, dqs, dkh, dG))
    T.ptx.bar.sync(0)
    for i, dqs, dkh, dG in res:
        T.ptx.st.shared.f32(sm.ql.at(i, d), dqs)
        T.ptx.st.shared.f32(sm.kl.at(i, d), dkh)
        T.ptx.st.shared.f32(sm.kd.at(i, d), dG)
    T.ptx.st.shared.f32(sm.col.at(hf, d), col)


def _scan_and_dots(sm, ck, q, k, g_raw, A_log, dt_bias, dgs, dg, roll=False, staged=None):
    """Threads 0..127, channel d: dg = reverse cumulative sum of dG (with the chunk's last-row
    terms), the gate's chain (stored where valid) and the gate parameters' sums into sGateSum.
    Threads 128..255: the norms' row dots k^ . dk^ and q^ . dq^ into sDot. `roll`: the rows
    and the dots' pieces as runtime loops (`trips`, `Running`: the same words;
    kda_bwd_local_lg ROLL=1). The two halves are iket ranges of their own (`scan_chain` on
    warps 0..3, `row_dots` on 4..7; nothing in a normal build): the summary's per-role means
    say which half the CTA's `scan` wall waits for. `staged` (kda_bwd_local_tc.ScanStage):
    g_raw's rows, dgs's, dt_bias's and A_log's words from shared memory, copied there
    earlier, instead of global loads (the same words: the same outputs)."""
    t = T.tid.x
    with T.if_(t < K), T.iket.range("scan_chain"):
        d = t
        if staged is None:
            a, c1, c0, dtb = _gate_consts(A_log, dt_bias, ck, d)
        else:
            a, c1, c0, dtb = _gate_consts_of(staged.a_log, lambda: staged.dt_bias(d))
        cols = T.ptx.ld.shared.f32(sm.col.at(0, d)) + T.ptx.ld.shared.f32(sm.col.at(1, d))
        run = Running(roll, cols + (T.ptx.ld.global_.f32(dgs.at((ck.c * ck.H + ck.h) * K + d))
                                    if staged is None else staged.dgs(d)))
        sdt, sa = Running(roll), Running(roll)
        for b, u in trips(C, BLK, roll, reverse=True):
            i = b * BLK + u
            run.add(T.ptx.ld.shared.f32(sm.kd.at(i, d)))
            off = ck.row(i) + d
            gr = _bf16(g_raw, off) if staged is None else staged.graw(b, u, d)
            e, s = _sigmoid(gr, c1, c0)
            valid = i < ck.nv
            dgr = T.ptx.selp.f32(run.value * (a * R.LOWER_BOUND) * s * (e * s), 0.0, valid)
            T.ptx.st.global_.f32(dg.at(off), dgr, pred=valid)
            sdt.add(dgr)
            sa.fma(dgr, gr + dtb)
        T.ptx.st.shared.f32(sm.gsum.at(0, d), sdt.value)
        T.ptx.st.shared.f32(sm.gsum.at(1, d), sa.value)
    row = t & (C - 1)
    rows = None if staged is None else staged.qk
    for x, (src, buf, lo) in enumerate(((k, sm.kl, K), (q, sm.ql, K + C))):
        with T.if_((t >= lo) & (t < lo + C)), T.iket.range("row_dots"):    # x = 0: k^ . dk^
            _row_dot(sm, ck, src, buf, x, row, roll,                   # 1: qs . dqs
                     None if rows is None else rows.words("kq"[x], row))


def _row_dot(sm, ck, src, buf, x, row, roll=False, words=None):
    """(raw row of `src`) . (row of `buf`) x its norm factor (rk, or scale rq) into sDot[x];
    `roll`: four runtime trips of four 16-byte pieces (the same words); `words(v)`, if given,
    the row's 16-byte piece v from elsewhere (`StagedRows.words`: the same words)."""
    off = ck.row(row)
    dot = Running(roll)
    for b, u in trips(K // 8, 4, roll):
        v = b * 4 + u
        piece = (T.ptx.ld.global_.nc.v4.b32(src.at(off + 8 * v)) if words is None
                 else words(v))
        for w, wd in enumerate(piece):
            for e, val in enumerate(unpack(wd)):
                dot.fma(val, T.ptx.ld.shared.f32(buf.at(row, 8 * v + 2 * w + e)))
    T.ptx.st.shared.f32(sm.dot.at(x, row), dot.value * T.ptx.ld.shared.f32(sm.rn.at(x, row)))


def _dq_dk(sm, ck, q, k, dq, dk, roll=False, rows=None):
    """Every thread, channel d, rows hf, hf + 2, ..: dk = rk (dk^ - k^ (k^ . dk^)) and dq = rq
    (dq^ - q^ (q^ . dq^)) with dq^ = scale dqs (sDot holds the dots over k^, qs). Unrolled: the
    rows' global loads can be in flight together; `roll`: four runtime trips of 8 rows; `rows`
    (`StagedRows` with "q" and "k"), if given, q's and k's rows from shared memory (the same
    words)."""
    t = T.tid.x
    d, hf = t & (K - 1), t >> 7
    for b, u in trips(C // 2, 8, roll):
        i = hf + 2 * (b * 8 + u)
        off = ck.row(i) + d
        valid = i < ck.nv
        rk = T.ptx.ld.shared.f32(sm.rn.at(0, i))
        rqs = T.ptx.ld.shared.f32(sm.rn.at(1, i))           # scale rq
        if rows is None:
            kh, qs = _bf16(k, off) * rk, _bf16(q, off) * rqs
        else:
            kh, qs = rows.at("k", i, d) * rk, rows.at("q", i, d) * rqs
        dkh = T.ptx.ld.shared.f32(sm.kl.at(i, d))
        dqs = T.ptx.ld.shared.f32(sm.ql.at(i, d))
        # k: (k^ . dk^) = dot(k, dk^) rk; q: q^ . dq^ = (qs / scale) . (scale dqs) = qs . dqs
        T.ptx.st.global_.f32(dk.at(off), rk * (dkh - kh * T.ptx.ld.shared.f32(sm.dot.at(0, i))),
                             pred=valid)
        dqh = dqs * SCALE
        qh = qs * (1.0 / SCALE)
        T.ptx.st.global_.f32(dq.at(off), (rqs * (1.0 / SCALE))
                             * (dqh - qh * T.ptx.ld.shared.f32(sm.dot.at(1, i))), pred=valid)


def _chunks(B, T_, lens=None):
    return sum(-(-x // C) for x in ([T_] * B if lens is None else lens))


def _grid(B, T_, H, lens=None):
    """(heads, chunks of every sequence)."""
    return (H, _chunks(B, T_, lens))


@T.kernel(grid=_grid, block=256)
def kda_bwd_local(q: T.gptr[T.bf16], k: T.gptr[T.bf16], g_raw: T.gptr[T.bf16],
                  beta: T.gptr[T.bf16], A_log: T.gptr[T.f32], dt_bias: T.gptr[T.f32],
                  chunk_tok: T.gptr[T.s32], chunk_rows: T.gptr[T.s32],
                  dqe: T.gptr[T.f32], dke: T.gptr[T.f32], dkl: T.gptr[T.f32],
                  dm: T.gptr[T.f32], dtb: T.gptr[T.f32], dgs: T.gptr[T.f32],
                  gred: T.gptr[T.f32], cnt: T.gptr[T.u32],
                  dq: T.gptr[T.f32], dk: T.gptr[T.f32], dg: T.gptr[T.f32],
                  dbeta: T.gptr[T.f32], dA_log: T.gptr[T.f32], ddt_bias: T.gptr[T.f32]):
    sm = _Smem()
    ck = _Chunk(chunk_tok, chunk_rows)
    _norms(sm, ck, q, k, beta)
    T.ptx.bar.sync(0)
    _gate(sm, ck, q, k, g_raw, A_log, dt_bias)
    T.ptx.bar.sync(0)
    _pairs(sm, ck, dtb)
    T.ptx.bar.sync(0)
    _inverse(sm)
    T.ptx.bar.sync(0)
    _t_dt(sm, ck, dm)
    T.ptx.bar.sync(0)
    _da(sm)
    T.ptx.bar.sync(0)
    _dbeta(sm, ck, dbeta)
    _elementwise(sm, ck, q, k, (dqe, dke, dkl))
    T.ptx.bar.sync(0)
    _scan_and_dots(sm, ck, q, k, g_raw, A_log, dt_bias, dgs, dg)
    T.ptx.bar.sync(0)
    _dq_dk(sm, ck, q, k, dq, dk)
    BW._gate_params_grad(sm.gsum, sm.flag, gred, cnt, dA_log, ddt_bias, ck.h, ck.H)


# --- inputs, reference, cases ------------------------------------------------------------------

OUTPUTS = ("dq", "dk", "dg", "dbeta", "dA_log", "ddt_bias")


def _chunk_map(B, T_, lens):
    """Each chunk's first token (in the flattened B x T rows) and valid rows, sequence order."""
    tok, rows = [], []
    for b, t0, t1 in R.spans(B, T_, BW._offsets(B, T_, lens)[0] if lens is not None else None):
        for c in range(-(-(t1 - t0) // C)):
            tok.append(b * T_ + t0 + c * C)
            rows.append(min(C, t1 - t0 - c * C))
    return np.array(tok, np.int32), np.array(rows, np.int32)


def _pieces(x, cu, B, T_, H, lens):
    """The reverse pass's pieces of every chunk (float64 kda_bwd_split.chunk_reverse, laid out
    [chunks, H, ...] in sequence order, f32)."""
    out = {n: [] for n in SP.PIECES}
    for n, (b, t0, t1) in enumerate(R.spans(B, T_, cu if lens is not None else None)):
        qn, kn, gn, bn = R._prepare(x["q"], x["k"], x["g_raw"], x["beta"], x["A_log"],
                                    x["dt_bias"], b, t0, t1)
        vn = np.asarray(x["v"][b, t0:t1], np.float64)
        S0, _ = SP.chunk_states(kn, vn, gn, bn, x["h0"][n])
        rev = SP.chunk_reverse(qn, kn, vn, gn, bn, S0, SCALE,
                               np.asarray(x["do"][b, t0:t1], np.float64), x["dht"][n])
        for name in SP.PIECES:
            out[name].append(np.moveaxis(rev[name], 0, 1))
    return {n: np.ascontiguousarray(np.concatenate(v), np.float32) for n, v in out.items()}


def _outputs(B, T_, H, chunks):
    """Zeroed workspaces (slots, counters) and outputs."""
    return dict(gred=np.zeros((chunks, H, 2, K), np.float32), cnt=np.zeros(H, np.uint32),
                dq=np.zeros((B, T_, H, K), np.float32), dk=np.zeros((B, T_, H, K), np.float32),
                dg=np.zeros((B, T_, H, K), np.float32), dbeta=np.zeros((B, T_, H), np.float32),
                dA_log=np.zeros(H, np.float32), ddt_bias=np.zeros((H, K), np.float32))


def inputs(rng, B, T_, H, lens=None, gate="mixed"):
    """kda_bwd's inputs (the same raw tensors, scaled the same way), the pieces from the
    float64 reverse pass, the chunk map, zeroed workspaces and outputs."""
    x = BW.inputs(rng, B, T_, H, lens=lens, gate=gate)
    tok, rows = _chunk_map(B, T_, lens)
    keep = ("q", "k", "v", "g_raw", "beta", "A_log", "dt_bias", "h0", "do", "dht", "cu_seqlens")
    return dict({n: x[n] for n in keep}, **_pieces(x, x["cu_seqlens"], B, T_, H, lens),
                chunk_tok=tok, chunk_rows=rows, **_outputs(B, T_, H, len(tok)))


def timing_inputs(rng, B, T_, H, lens=None, gate="mixed"):
    """The large (timing) cases: raw inputs and synthetic pieces of the right structure (N(0, 1),
    dm and dtb lower triangular, rows past a sequence zero), no reference: the pieces of a
    T8192 H96 case are 1.6 GB from a float64 reverse pass the host would spend minutes on, and
    the kernel's time does not depend on the values. SUITE's small cases are its check (the
    bench's smoke step runs them on the GPU before anything is timed)."""
    x = R.raw_inputs(rng, B, T_, H, gate=gate)
    tok, rows = _chunk_map(B, T_, lens)
    n = len(tok)
    live = (np.arange(C)[None, :] < rows[:, None])[:, None, :, None]        # [n, 1, C, 1]
    pieces = {}
    for name in ("dqe", "dke", "dkl"):
        pieces[name] = rng.standard_normal((n, H, C, K), np.float32) * live
    for name in ("dm", "dtb"):
        pieces[name] = np.tril(rng.standard_normal((n, H, C, C), np.float32)) * live
    pieces["dgs"] = rng.standard_normal((n, H, K), np.float32)
    keep = ("q", "k", "g_raw", "beta", "A_log", "dt_bias")
    return dict({m: x[m] for m in keep}, **pieces, chunk_tok=tok, chunk_rows=rows,
                **_outputs(B, T_, H, n))


def reference(q, k, v, g_raw, beta, A_log, dt_bias, h0, do, dht, cu_seqlens, lens=None):
    """The final float64 gradients of the outputs this piece produces (kda_ref.backward)."""
    g = R.backward(q, k, v, g_raw, beta, A_log, dt_bias, h0, do, dht,
                   cu_seqlens=cu_seqlens if lens is not None else None, method="chunked")
    return {n: g[n].astype(np.float32) for n in OUTPUTS}


def constraints(B, T_, H, lens=None):
    out, N = R.shape_problems(B, T_, H, lens, "y")
    chunks = _chunks(B, T_, lens)
    if chunks > 65535:
        out.append(f"{chunks} chunks: at most 65535 (grid y)")
    if chunks * H * C * K >= 1 << 32 or B * T_ * H * K >= 1 << 32:
        out.append(f"B={B}, T_={T_}, H={H}: every tensor (the pieces [{chunks}, H, {C}, {K}] "
                   f"included) must hold fewer than 2^32 elements (32-bit element offsets)")
    return out


TOLERANCE = BW.TOLERANCE      # the public rule: atol = rtol = 0.01 on every element

# sync_check is ~9x numsim's ~10-20 s per CTA: `tirxh check` over the zoo sync-checks the
# one-CTA case and leaves the multi-CTA ones (tagged) to numsim there and to
# tests/zoo/test_kda_bwd_local.py (zoo/tirx.toml: [sync_check] exclude_tags)

def _bytes(B, T_, H, lens=None):
    """q, k, g_raw (bf16) and beta read, the pieces read (2 C^2 + 3 C K + K f32 per chunk and
    head), dq, dk, dg and dbeta written (f32): ~4.3 KB per token and head."""
    chunks = _chunks(B, T_, lens)
    return (B * T_ * H * (3 * 2 * K + 2 + 4 * (3 * K + 1))
            + chunks * H * 4 * (2 * C * C + 3 * C * K + K))


SUITE = T.suite(
    kda_bwd_local, inputs=inputs, reference=reference, outputs=list(OUTPUTS),
    tolerance=TOLERANCE, constraints=constraints,
    cases=[
        # the smallest (what `tirxh check`'s sync_check runs): one 20-row tail chunk, deep gates
        T.case("t20_h1_deep", B=1, T_=20, H=1, gate="deep"),
        # two chunks (64 + a 22-row tail), saturated gates: the block-local factors' case
        T.case("t86_h1_deep", B=1, T_=86, H=1, gate="deep", tags=BW.SYNC_IN_TESTS),
        # a varlen pack (a one-token sequence, one of exactly a chunk), 2 heads, mixed gates
        T.case("pack_9_1_64_h2", B=1, T_=74, H=2, lens=(9, 1, 64), gate="mixed",
               tags=BW.SYNC_IN_TESTS),
    ])

# timing only (no reference: `timing_inputs`), tagged "timing": `benchmarks/kda_bench.sh local`
# times them and leaves them out of its smoke step
SUITE_TIMING = T.suite(
    kda_bwd_local, inputs=timing_inputs, outputs=list(OUTPUTS), constraints=constraints,
    bytes=_bytes,
    cases=[T.case("t8192_h96", B=1, T_=8192, H=96, small=False, tags=("timing",)),
           T.case("t8192_h64", B=1, T_=8192, H=64, small=False, tags=("timing",)),
           T.case("pack6_h96", B=1, T_=8192, H=96, lens=BW.PACK6, small=False,
                  tags=("timing",))])
