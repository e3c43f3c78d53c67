"""Kimi Delta Attention chunked forward on Hopper (issue 18): o and the final state of every
sequence of a batch or a varlen pack, with the gate and the q/k L2 normalization fused.

Math (kda_ref.py has it in full, and the float64 references): per sequence n and head h, state
S in R^{K x V} (K = V = 128), chunks of C = 64 tokens. With the gate g = -5 sigmoid(exp(A_log)
(g_raw + dt_bias)), its within-chunk cumulative sum G (per channel), normalized q^, k^, and the
state S0 at the chunk's start:

    A     = strict_lower(beta_i k^_i . exp(G_i - G_j) k^_j)      (64 x 64)
    Tb    = (I + A)^-1 Diag(beta)                                  (the UT/WY transform)
    Delta = Tb (V - (K^ exp(G)) S0)                                the chunk's new values
    O     = (scale Q^ exp(G)) S0 + M Delta,   M = lower(scale q^_i . exp(G_i - G_j) k^_j)
    S     = Diag(exp(G_63)) S0 + (K^ exp(G_63 - G))^T Delta

Inputs: q, k, g_raw [B, T, H, K] bf16 (through TMA tensor maps); v [B, T, H, V] bf16; beta
[B, T, H] bf16; A_log [H], dt_bias [H, K] f32; h0 [N, H, K, V] f32; cu_seqlens [N + 1] s32 (for
fixed lengths 0, T, 2T, ...: the batch is a pack whose sequences start at row boundaries); order
[N] s32 (the sequences, longest first). Outputs: o [B, T, H, V] bf16, ht [N, H, K, V] f32.

Work split: CTA (value slice, head, sequence) walks its sequence's chunks with the state slice
S^T (BV value rows x 128 key channels, f32) in the registers of its warps (warp w: value rows
16w .. 16w + 15 as mma.sync accumulators): the value columns of S are independent, so BV = 64
gives 2 CTAs per head (more parallelism for few heads) and BV = 128 one. Every warp takes part
in every phase of a chunk, phases separated by ``bar.sync``:

1. loads: one thread issues TMA for chunk c + STAGES - 1 (q, k, g_raw: two 64-channel boxes of
   64 rows each, v: BV / 64 boxes; 128-byte swizzle) on the stage's mbarrier, then everyone waits
   for chunk c. Rows past the sequence (the tail of a chunk, a varlen neighbour, zero fill past
   the tensor) are masked below: k^ = q^ = 0, beta = 0, g = 0, and their outputs are not stored.
2. norms: row sums of squares of q and k (16-byte shared loads, a shuffle across the two
   halves of a row): rk = rsqrt(|k|^2 + 1e-6), rq = scale rsqrt(|q|^2 + 1e-6); beta from global.
3. gate: a thread per (channel pair, 16-row block) computes the gate of its rows (``fma``,
   ``ex2``, ``rcp``), their cumulative sum from the block's first row, and writes in place (bf16x2,
   over the raw tiles) KL = k^ 2^(G_i - r_a), QL = q^ 2^(G_i - r_a) and KD = k^ 2^(r_a - G_i) (the
   reciprocal by Newton steps on the FMA pipe: the MUFU pipe is this phase's bottleneck) with
   r_a the cumulative log-decay at the block's first row: within 16 rows |G_i - r_a| <= 75
   (gate bound 5), so no factor exceeds e^75 and nothing overflows however deep the decay
   (a naive exp(G_i) exp(-G_j) over 64 rows would reach e^320). Per channel, the block references
   give the factors between blocks (F_ab = 2^(r_a - r_b), E_a = 2^(r_a), 2^(G_63 - r_b), 2^(G_63)).
4. A and M: mma.sync over 16 x 16 blocks (i in block a, j in block b <= a): KL_a KD_b^T (the
   right operand scaled by F_ab with ``mul.bf16x2`` off the diagonal) and QL_a KD_b^T; A rows
   scaled by beta and masked (f32 to shared memory), M masked (bf16, ``stmatrix``).
5. (I + A)^-1 in 16 x 16 blocks: the diagonal blocks by forward substitution in f32 (a lane per
   column), the blocks below them column by column with mma.sync on the transposes
   (T_ab^T = -(sum_m T_mb^T A_am^T) D_a^T), written as Tb = T Diag(beta) with ``stmatrix.trans``.
   Meanwhile the raw-tile operands become KE = KL E_a, QG = QL E_a and KLL = KD 2^(G_63 - r_b).
6. state (each warp, its 16 value rows; A operands straight from the accumulators):
   Y = S0^T [KE; QG]^T (one pass over S0^T), Z = V^T - Y_k, Delta^T = Z Tb^T, O^T = Y_q +
   Delta^T M^T (block-triangular: the zero blocks are skipped), staged with ``stmatrix.trans``
   over the warp's own (already read) columns of the V tile and stored as 16-byte rows where
   valid; S0^T <- S0^T Diag(2^G_63) + Delta^T KLL.

Variants (constants): BV = 64 or 128 value columns per CTA (4 or 8 warps), STAGES = 1 or 2 input
stages (BV = 64 with one stage: 106 KB of shared memory, two CTAs per SM; two stages 164 KB;
BV = 128 with two 180 KB). One thread's mbarrier-tracked TMA and the CTA barriers are the only
synchronization; every thread runs every chunk, so no barrier waits on an exited thread.

Numerics: the MMA operands are bf16 (the state, the residual Z and Delta rounded once per chunk),
accumulation f32; the state itself stays f32 across chunks. A numpy model of exactly these
roundings gives a normalized RMS error ~0.004 against float64 (rule: 0.03) for mixed, saturated
and slow gates and 4096-token sequences.

Tags: linear-attention, chunked-scan, mma-sync, tma, mbarrier-pipeline, swizzle-128b,
state-in-registers, fused-gate, varlen
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import numpy as np

import tirxh.lang as T
from tirxh.core.ir import Addr
from tirxh.core.types import numpy_dtype

# the zoo is a directory of kernel files, not a package: tirxh's collection puts it on sys.path,
# other loaders (tests, tools) import a file by path, so the sibling reference is found from here
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
import kda_ref as R  # noqa: E402 - after the path that finds it

TAGS = ("linear-attention", "chunked-scan", "mma-sync", "tma", "mbarrier-pipeline",
        "swizzle-128b", "state-in-registers", "fused-gate", "varlen")

K = V = 128
C = 64                     # tokens per chunk
NB = 4                     # 16-row blocks per chunk
TILE = 64 * 64 * 2         # one 64 x 64 bf16 tile, 128-byte rows (8 KB)
LOG2E = 1.4426950408889634
SCALE = K ** -0.5
G2 = R.LOWER_BOUND * LOG2E  # the gate in log2 units: g2 = G2 * sigmoid(z)
MMA = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
FULL = 0xFFFFFFFF
PAIRS = [(1, 0), (2, 0), (3, 0), (2, 1), (3, 1), (3, 2)]   # (a, b): blocks b < a
A_STRIDE = 72              # f32 words per row of A in shared memory (conflict-free v2 stores)
D_STRIDE = 20              # f32 words per row of a diagonal inverse block


# --- small helpers ---------------------------------------------------------------------------

def _unpack(word):
    """bf16x2 -> (lo, hi) f32: ``shl.b32`` / ``and.b32`` and ``mov.f32``."""
    return (T.ptx.mov.f32(T.ptx.shl.b32(word, 16)),
            T.ptx.mov.f32(T.ptx.and_.b32(word, 0xFFFF0000)))


def _pack(lo, hi):
    """Two f32 -> bf16x2 (lo in the low half): ``cvt.rn.bf16x2.f32 d, hi, lo``."""
    return T.ptx.cvt.rn.bf16x2.f32(hi, lo)


def _afrag(c0, c1):
    """The A fragment of a 16 x 16 tile from the accumulators of its two 16 x 8 halves (the
    mma.sync C layout, rows g / g + 8, columns 2t..): 4 x ``cvt.rn.bf16x2.f32``."""
    return [_pack(c0[0], c0[1]), _pack(c0[2], c0[3]), _pack(c1[0], c1[1]), _pack(c1[2], c1[3])]


def _mma(acc, a, b):
    T.ptx[MMA](acc, a, b, acc)


def _rcp_fma(x):
    """1 / x for a positive normal f32 without the MUFU pipe (which the gate phase saturates):
    the estimate bits 0x7EF311C3 - bits(x) (relative error <= 12%), then two Newton steps
    r (2 - x r) (error < 2e-4; the result only feeds bf16 operands, whose rounding is 2e-3):
    ``sub.u32``, 2 x (``fma``, ``mul``)."""
    r = T.ptx.mov.f32(T.ptx.mov.b32(T.ptx.sub.u32(0x7EF311C3, T.ptx.mov.b32(x))))
    nx = T.ptx.neg.f32(x)
    for _ in range(2):
        r = r * T.ptx.fma.rn.f32(nx, r, 2.0)
    return r


class Lanes:
    """The lane roles of one warp: g = lane / 4, t = lane % 4 (mma fragments), and the shared
    address offsets of the two ``ldmatrix``/``stmatrix`` x4 patterns over 128-byte-swizzled
    tiles (16-byte chunk ch of row r at chunk ch ^ (r % 8)), for the chunk pairs cp = 0..3
    (channels 16 cp .. 16 cp + 15 of a 64-column half):

    - "A": matrix m = lane / 8 covers rows (m & 1) * 8 .. +7 and chunk 2 cp + (m >> 1): an A
      operand stored row-major, or a B operand stored k-major read ``.trans``;
    - "B": rows (m >> 1) * 8 .. +7 and chunk 2 cp + (m & 1): a B operand stored n-major, an A
      operand stored k-major read ``.trans``, ``stmatrix.trans`` of a C fragment.
    Each is row * 128 + ((2 cp + sel) ^ (lane % 8)) * 16 (8 registers, made once)."""

    def __init__(self):
        self.lane = T.laneid()
        self.g, self.t = self.lane >> 2, self.lane & 3
        mi, ri = self.lane >> 3, self.lane & 7
        self.off, self.rowx = {}, {}
        for name, row, sel in (("A", ((mi & 1) << 3) + ri, mi >> 1),
                               ("B", ((mi >> 1) << 3) + ri, mi & 1)):
            x = sel ^ ri
            self.rowx[name] = (row << 7, x)
            self.off[name] = [(row << 7) + ((x ^ (2 * cp)) << 4) for cp in range(4)]

    def bases(self, tile_base, name: str) -> list:
        """`tile_base` + the pattern's 4 offsets (4 ``add.u32``)."""
        return [tile_base + o for o in self.off[name]]

    def at(self, tile_base, name: str, cp):
        """`tile_base` + the pattern's offset for a chunk pair held in a register."""
        row, x = self.rowx[name]
        return tile_base + row + ((x ^ (cp << 1)) << 4)


def _ld4(base_cp, half, row0, trans=False):
    """``ldmatrix.x4`` (``.trans``) at [base + half * 8 KB + row0 * 128]."""
    op = (T.ptx.ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 if trans
          else T.ptx.ldmatrix.sync.aligned.m8n8.x4.shared.b16)
    return list(op(Addr(base_cp, half * TILE + row0 * 128)))


def _st4(base_cp, half, row0, regs, trans=False):
    op = (T.ptx.stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 if trans
          else T.ptx.stmatrix.sync.aligned.m8n8.x4.shared.b16)
    op(Addr(base_cp, half * TILE + row0 * 128), regs)


# --- shared memory ---------------------------------------------------------------------------

class Smem:
    """Every shared buffer of the kernel (dynamic window; the swizzled tiles 1024-aligned)."""

    def __init__(self, BV: int, STAGES: int):
        sw = dict(align=1024, swizzle=128, dynamic=True)
        self.q = T.shared(T.bf16, (STAGES, 2, 64, 64), name="sQ", **sw)
        self.k = T.shared(T.bf16, (STAGES, 2, 64, 64), name="sK", **sw)
        self.g = T.shared(T.bf16, (STAGES, 2, 64, 64), name="sG", **sw)
        self.v = T.shared(T.bf16, (STAGES, BV // 64, 64, 64), name="sV", **sw)  # V, then O
        self.m = T.shared(T.bf16, (64, 64), name="sM", **sw)
        self.tb = T.shared(T.bf16, (64, 64), name="sTb", **sw)
        self.a = T.shared(T.f32, (C, A_STRIDE), name="sA", align=16, dynamic=True)
        self.d = T.shared(T.f32, (NB, 16, D_STRIDE), name="sD", align=16, dynamic=True)
        self.f = T.shared(T.bf16, (len(PAIRS), K), name="sF", align=16, dynamic=True)
        self.e = T.shared(T.bf16, (NB, K), name="sE", align=16, dynamic=True)
        self.eg = T.shared(T.bf16, (NB, K), name="sEg", align=16, dynamic=True)
        self.egl = T.shared(T.f32, (K,), name="sEgl", align=16, dynamic=True)
        self.ref = T.shared(T.f32, (NB, 2, K), name="sRef", align=16, dynamic=True)
        self.rn = T.shared(T.f32, (2, C), name="sRn", align=16, dynamic=True)
        self.beta = T.shared(T.f32, (C,), name="sBeta", align=16, dynamic=True)
        self.full = T.mbarrier(STAGES, name="full", dynamic=True)
        self.STAGES, self.BV = STAGES, BV


class Chunk:
    """Per chunk: its stage, the number of valid rows `nv` and the tiles' base registers."""

    def __init__(self, sm: Smem, stage, nv):
        self.stage, self.nv = stage, nv
        self.q = sm.q.ptr() + stage * (2 * TILE)
        self.k = sm.k.ptr() + stage * (2 * TILE)
        self.g = sm.g.ptr() + stage * (2 * TILE)
        self.v = sm.v.ptr() + stage * ((sm.BV // 64) * TILE)


# --- phase 2: norms and beta ------------------------------------------------------------------

def _norms(sm, ck, beta, tok0, H, h, NW):
    """rk (row 0..63) and rq * scale into sRn, beta into sBeta (0 past the valid rows).

    With 4 warps a thread sums a whole row (both 64-channel halves: 16 ``ld.shared.v4``); with
    8 a half row and one ``shfl.sync.bfly`` 16 adds the other half."""
    tid = T.tid.x
    w, lane = tid >> 5, T.laneid()
    if NW == 4:
        x, row, halves = w >> 1, ((w & 1) << 5) + lane, (0, 1)
    else:
        x, row = w >> 2, ((w & 3) << 4) + (lane & 15)
        halves = None
    tile = T.ptx.selp.u32(ck.q, ck.k, x == 1)
    rsw = row & 7
    accs = [None] * 4                      # four chains: the sum is latency bound otherwise
    for hf in (halves if halves is not None else (None,)):
        half_off = hf * TILE if hf is not None else (lane >> 4) * TILE
        base = tile + half_off + (row << 7)
        for c in range(8):
            words = T.ptx.ld.shared.v4.b32(base + ((rsw ^ c) << 4))
            for i, wd in enumerate(words):
                for val in _unpack(wd):
                    a = accs[i]
                    accs[i] = val * val if a is None else T.ptx.fma.rn.f32(val, val, a)
    acc = (accs[0] + accs[1]) + (accs[2] + accs[3])
    if halves is None:
        acc = acc + T.ptx.mov.f32(T.ptx.shfl.sync.bfly.b32(acc, 16, 0x1F, FULL))
    r = T.ptx.rsqrt.approx.f32(acc + R.L2_EPS)
    r = T.ptx.selp.f32(r, 0.0, row < ck.nv)
    r = T.ptx.selp.f32(r * SCALE, r, x == 1)
    if halves is not None:
        T.ptx.st.shared.f32(sm.rn.at(x, row), r)
    else:
        with T.if_(lane < 16):
            T.ptx.st.shared.f32(sm.rn.at(x, row), r)
    with T.if_(tid < C):
        b = T.reg(T.f32, init=0.0)
        with T.if_(tid < ck.nv):
            b.set(T.ptx.cvt.f32.bf16(T.ptx.ld.global_.nc.b16(beta.at((tok0 + tid) * H + h))))
        T.ptx.st.shared.f32(sm.beta.at(tid), b)


# --- phase 3: gate, block-local decays, in-place operands -------------------------------------

class GateLanes:
    """A thread's channel pair p (channels 2p, 2p + 1) and 16-row blocks for the gate phase,
    with the 8 swizzled element offsets of its pair in a tile (rows r % 8 = 0..7) and its gate
    constants: exp(-z) = 2^(c1 g_raw + c0), c1 = -exp(A_log[h]) log2(e), c0 = c1 dt_bias."""

    def __init__(self, NT, A_log, dt_bias, h):
        tid = T.tid.x
        self.p = tid & 63
        half, j = self.p >> 5, (self.p & 31) >> 2
        inner = (half * TILE) + ((self.p & 3) << 2)
        self.eoff = [inner + ((j ^ r8) << 4) for r8 in range(8)]
        self.nblk = 4 // (NT // 64)                # blocks per thread
        self.blk0 = (tid >> 6) * self.nblk          # its first block
        c1 = T.ptx.ex2.approx.f32(T.ptx.ld.global_.nc.f32(A_log.at(h)) * LOG2E) * -LOG2E
        db = T.ptx.ld.global_.nc.v2.f32(dt_bias.at(h * K + 2 * self.p))
        self.c1, self.c0 = c1, [c1 * db[0], c1 * db[1]]


def _gate(sm, ck, gl):
    """In place over the chunk's raw tiles (each element read and written by one thread):
    sK <- KL, sQ <- QL (q^ scale 2^(G - r_a)), sG <- KD = k^ 2^(r_a - G); per block and channel
    the block's total and first-row gate (log2 units) into sRef."""
    for bl in range(gl.nblk):
        a = gl.blk0 + bl
        rowb = a << 11                               # 16 rows x 128 bytes
        addrs = {n: [tb + rowb + o for o in gl.eoff] for n, tb in (("q", ck.q), ("k", ck.k),
                                                                     ("g", ck.g))}
        s = [None, None]
        ref = [None, None]
        for i in range(16):
            r8 = i & 7
            at = {n: Addr(v[r8], i * 128) for n, v in addrs.items()}
            row = (a << 4) + i
            valid = row < ck.nv
            gw = T.ptx.ld.shared.b32(at["g"])
            kw = T.ptx.ld.shared.b32(at["k"])
            qw = T.ptx.ld.shared.b32(at["q"])
            rk = T.ptx.ld.shared.f32(sm.rn.at(0, row))
            rq = T.ptx.ld.shared.f32(sm.rn.at(1, row))
            graw, kv, qv = _unpack(gw), _unpack(kw), _unpack(qw)
            kl, ql, kd = [], [], []
            for e in range(2):
                x = T.ptx.min.f32(T.ptx.fma.rn.f32(graw[e], gl.c1, gl.c0[e]), 64.0)
                sig = T.ptx.rcp.approx.f32(T.ptx.ex2.approx.f32(x) + 1.0)
                g2 = T.ptx.selp.f32(sig * G2, 0.0, valid)
                if i == 0:
                    s[e] = g2
                    ref[e] = g2
                    lfac = dfac = None
                else:
                    s[e] = s[e] + g2
                    lfac = T.ptx.ex2.approx.f32(s[e] - ref[e])   # in [2^-108, 1]: normal
                    dfac = _rcp_fma(lfac)
                kn = kv[e] * rk
                qn = qv[e] * rq
                kl.append(kn if lfac is None else kn * lfac)
                ql.append(qn if lfac is None else qn * lfac)
                kd.append(kn if dfac is None else kn * dfac)
            T.ptx.st.shared.b32(at["k"], _pack(*kl))
            T.ptx.st.shared.b32(at["q"], _pack(*ql))
            T.ptx.st.shared.b32(at["g"], _pack(*kd))
        for e in range(2):
            T.ptx.st.shared.f32(sm.ref.at(a, 0, 2 * gl.p + e), s[e])
            T.ptx.st.shared.f32(sm.ref.at(a, 1, 2 * gl.p + e), ref[e])


def _factors(sm, NT):
    """Per channel, from the blocks' totals and first-row gates: r_a (cumulative log-decay at
    block a's first row), G_63, and F_ab = 2^(r_a - r_b) (a > b), E_a = 2^(r_a), 2^(G_63 - r_b)
    as bf16, 2^(G_63) as f32. Threads 0..127, one channel each."""
    c = T.tid.x
    with T.if_(c < K) if NT > K else contextlib.nullcontext():
        tot = [T.ptx.ld.shared.f32(sm.ref.at(a, 0, c)) for a in range(NB)]
        first = [T.ptx.ld.shared.f32(sm.ref.at(a, 1, c)) for a in range(NB)]
        r = [first[0]]
        run = tot[0]
        for a in range(1, NB):
            r.append(run + first[a])
            run = run + tot[a]
        gl = run
        bf = T.ptx.cvt.rn.bf16.f32
        for i, (a, b) in enumerate(PAIRS):
            T.ptx.st.shared.b16(sm.f.at(i, c), bf(T.ptx.ex2.approx.f32(r[a] - r[b])))
        for a in range(NB):
            T.ptx.st.shared.b16(sm.e.at(a, c), bf(T.ptx.ex2.approx.f32(r[a])))
            T.ptx.st.shared.b16(sm.eg.at(a, c), bf(T.ptx.ex2.approx.f32(gl - r[a])))
        T.ptx.st.shared.f32(sm.egl.at(c), T.ptx.ex2.approx.f32(gl))


# --- phase 4: the A and M blocks ---------------------------------------------------------------

def _units(NW) -> list:
    """The (operand, row block) units of phase 4 per warp: ("k", a) makes A's blocks (a, b <= a),
    ("q", a) M's; a unit of row block a has a + 1 blocks (20 in all), balanced over the warps."""
    order = [("k", 3), ("q", 3), ("k", 2), ("q", 2), ("k", 1), ("q", 1), ("k", 0), ("q", 0)]
    if NW == 4:
        return [[order[0], order[6]], [order[1], order[7]], [order[2], order[4]],
                [order[3], order[5]]]
    return [[u] for u in order]


def _blocks(sm, ck, ln, NW):
    """Each warp its units: A fragments of KL_a (or QL_a) for the 8 channel steps, times KD_b^T
    (scaled by F_ab off the diagonal); A: rows times beta, masked to j < i, f32 into sA; M:
    masked to j <= i, bf16 into sM (``stmatrix``)."""
    warp = T.tid.x >> 5
    pa = {n: ln.bases(getattr(ck, n), "A") for n in ("k", "q")}
    pb = ln.bases(ck.g, "B")
    pm = ln.bases(sm.m.ptr(), "A")
    for w, units in enumerate(_units(NW)):
        with T.if_(warp == w, uniform=True):
            for x, a in units:
                af = [_ld4(pa[x][s & 3], s >> 2, 16 * a) for s in range(8)]
                for b in range(a + 1):
                    acc = [T.fragment(T.f32, 4, init=0.0) for _ in range(2)]
                    pair = PAIRS.index((a, b)) if b < a else None
                    for s in range(8):
                        bf = _ld4(pb[s & 3], s >> 2, 16 * b)
                        if pair is not None:   # KD_b 2^(r_a - r_b): channels 16s + 2t (+8)
                            f0 = T.ptx.ld.shared.b32(sm.f.at(pair, 16 * s + 2 * ln.t))
                            f1 = T.ptx.ld.shared.b32(sm.f.at(pair, 16 * s + 8 + 2 * ln.t))
                            bf = [T.ptx.mul.rn.bf16x2(bf[0], f0), T.ptx.mul.rn.bf16x2(bf[1], f1),
                                  T.ptx.mul.rn.bf16x2(bf[2], f0), T.ptx.mul.rn.bf16x2(bf[3], f1)]
                        _mma(acc[0], af[s], bf[0:2])
                        _mma(acc[1], af[s], bf[2:4])
                    _block_out(sm, ln, x, a, b, acc, pm)


def _block_out(sm, ln, x, a, b, acc, pm):
    """Mask (diagonal blocks), scale and store one 16 x 16 block: C element (n, e) of the
    thread is row g (e < 2) or g + 8, column 8n + 2t + (e & 1)."""
    g, t = ln.g, ln.t
    if x == "k":
        beta = [T.ptx.ld.shared.f32(sm.beta.at(16 * a + g + 8 * hh)) for hh in range(2)]
    acc = [list(f) for f in acc]
    for n in range(2):
        for e in range(4):
            hh = e >> 1
            v = acc[n][e]
            if a == b:
                col, row = 8 * n + 2 * t + (e & 1), g + 8 * hh
                keep = col < row if x == "k" else col <= row
                v = T.ptx.selp.f32(v, 0.0, keep)
            if x == "k":
                v = v * beta[hh]
            acc[n][e] = v
    if x == "k":
        for n in range(2):
            for hh in range(2):
                T.ptx.st.shared.v2.f32(sm.a.at(16 * a + g + 8 * hh, 16 * b + 8 * n + 2 * t),
                                       [acc[n][2 * hh], acc[n][2 * hh + 1]])
    else:
        regs = [_pack(acc[0][0], acc[0][1]), _pack(acc[0][2], acc[0][3]),
                _pack(acc[1][0], acc[1][1]), _pack(acc[1][2], acc[1][3])]
        _st4(pm[b], 0, 16 * a, regs)


# --- phase 5: operands for the state, and (I + A)^-1 -------------------------------------------

def _materialize(sm, ck, NT):
    """In place: sK <- KE = KL E_a, sQ <- QG = QL E_a, sG <- KLL = KD 2^(G_63 - r_b), with one
    ``mul.rn.bf16x2`` per element pair (16-byte vectors; the factor row of the vector's block)."""
    tid = T.tid.x
    lchunk = tid & 15
    rows0 = tid >> 4                             # the thread's rows: rows0 + NT/16 * k
    step = NT // 16
    phys = ((lchunk & 7) ^ (rows0 & 7)) << 4
    base_off = (lchunk >> 3) * TILE + (rows0 << 7) + phys
    for tile, table in ((ck.k, sm.e), (ck.q, sm.e), (ck.g, sm.eg)):
        base = tile + base_off
        fbase = table.ptr() + (lchunk << 4)
        for kk in range(C * 16 // NT):
            a = (kk * step) // 16
            addr = Addr(base, kk * step * 128)
            data = T.ptx.ld.shared.v4.b32(addr)
            fac = T.ptx.ld.shared.v4.b32(Addr(fbase, a * 2 * K))
            T.ptx.st.shared.v4.b32(addr, [T.ptx.mul.rn.bf16x2(d, f) for d, f in zip(data, fac)])


def _diag_inverse(sm, NW):
    """Warp a < 4: D_a = (I + A_aa)^-1 by forward substitution in f32, lane j < 16 column j:
    x_i = [i == j] - sum_{m < i} A[i, m] x_m (A rows broadcast from shared memory); into sD."""
    warp, lane = T.tid.x >> 5, T.laneid()
    j = lane & 15
    for a in range(NB):
        with T.if_(warp == a, uniform=True):
            x = []
            for i in range(16):
                acc = T.ptx.selp.f32(1.0, 0.0, j == i)
                row = [T.ptx.ld.shared.f32(sm.a.at(16 * a + i, 16 * a + m)) for m in range(i)]
                for m in range(i):
                    acc = T.ptx.fma.rn.f32(T.ptx.neg.f32(row[m]), x[m], acc)
                x.append(acc)
            with T.if_(lane < 16):
                for i in range(16):
                    T.ptx.st.shared.f32(sm.d.at(a, i, j), x[i])


def _inverse_blocks(sm, ln):
    """Warp b < 4: its diagonal block Tb_bb = D_b Diag(beta_b), then (b < 3) the blocks below it
    in column b: with U_m = T_mb^T (C fragments), U_a = -(sum_{m=b}^{a-1} U_m A_am^T) D_a^T;
    each stored as Tb_ab = U_a^T Diag(beta_b) (bf16, ``stmatrix.trans``)."""
    warp = T.tid.x >> 5
    g, t = ln.g, ln.t
    pt = ln.bases(sm.tb.ptr(), "B")
    for b in range(NB):
        with T.if_(warp == b, uniform=True):
            beta = [T.ptx.ld.shared.f32(sm.beta.at(16 * b + g + 8 * hh)) for hh in range(2)]
            # U_b = D_b^T: element (row g (+8), column 8n + 2t + e) is D_b[8n + 2t + e][g (+8)]
            u = [[T.ptx.ld.shared.f32(sm.d.at(b, 8 * n + 2 * t + (e & 1), g + 8 * (e >> 1)))
                  for e in range(4)] for n in range(2)]
            us = {b: u}
            _store_tb(pt, b, b, u, beta)
            for a in range(b + 1, NB):
                p = [T.fragment(T.f32, 4, init=0.0) for _ in range(2)]
                for m in range(b, a):
                    af = _afrag(*us[m])
                    for n in range(2):   # B = A_am^T: (k = z, n = y) -> A_am[y][z]
                        rows = 16 * a + 8 * n + g
                        b0 = T.ptx.ld.shared.v2.f32(sm.a.at(rows, 16 * m + 2 * t))
                        b1 = T.ptx.ld.shared.v2.f32(sm.a.at(rows, 16 * m + 8 + 2 * t))
                        _mma(p[n], af, [_pack(*b0), _pack(*b1)])
                af = _afrag(p[0], p[1])
                ua = [T.fragment(T.f32, 4, init=0.0) for _ in range(2)]
                for n in range(2):       # B = D_a^T -> D_a[y][z]
                    d0 = T.ptx.ld.shared.v2.f32(sm.d.at(a, 8 * n + g, 2 * t))
                    d1 = T.ptx.ld.shared.v2.f32(sm.d.at(a, 8 * n + g, 8 + 2 * t))
                    _mma(ua[n], af, [_pack(*d0), _pack(*d1)])
                ua = [[T.ptx.neg.f32(v) for v in ua[n]] for n in range(2)]
                us[a] = ua
                _store_tb(pt, a, b, ua, beta)


def _store_tb(pt, a, b, u, beta):
    """Tb block (a, b) from U = T_ab^T: rows of U (columns j of Tb) scaled by beta_j."""
    regs = []
    for n in range(2):
        regs += [_pack(u[n][0] * beta[0], u[n][1] * beta[0]),
                 _pack(u[n][2] * beta[1], u[n][3] * beta[1])]
    _st4(pt[b], 0, 16 * a, [regs[0], regs[1], regs[2], regs[3]], trans=True)


# --- phase 6: the state ------------------------------------------------------------------------

def _state_step(sm, ck, ln, st, o, row_tok, H, h, vcol0):
    """One warp's value rows: Y, Z, Delta, O (stored), then the state update; `st` is the warp's
    S^T (16 C fragments: channels 8j .. 8j + 7)."""
    warp = T.tid.x >> 5
    wv = warp & 3                                   # chunk pair of the warp's rows in its half
    vh = warp >> 2                                  # 64-column half of the value slice
    pk, pq = ln.bases(ck.k, "B"), ln.bases(ck.q, "B")
    yk = [T.fragment(T.f32, 4, init=0.0) for _ in range(8)]
    yq = [T.fragment(T.f32, 4, init=0.0) for _ in range(8)]
    for s in range(8):                              # channels 16s .. 16s + 15
        af = _afrag(st[2 * s], st[2 * s + 1])
        for p in range(4):                          # positions 16p .. 16p + 15
            bk = _ld4(pk[s & 3], s >> 2, 16 * p)
            _mma(yk[2 * p], af, bk[0:2])
            _mma(yk[2 * p + 1], af, bk[2:4])
            bq = _ld4(pq[s & 3], s >> 2, 16 * p)
            _mma(yq[2 * p], af, bq[0:2])
            _mma(yq[2 * p + 1], af, bq[2:4])
    # Z = V^T - Y_k as A fragments (positions 16p ..): V^T by ldmatrix.trans from sV
    pv = ln.at(ck.v + vh * TILE, "B", wv)
    zf = []
    for p in range(4):
        vr = _ld4(pv, 0, 16 * p, trans=True)
        z = []
        for n, (lo_reg, hi_reg) in enumerate(((vr[0], vr[1]), (vr[2], vr[3]))):
            acc = yk[2 * p + n]
            lo, hi = _unpack(lo_reg), _unpack(hi_reg)
            z.append([lo[0] - acc[0], lo[1] - acc[1], hi[0] - acc[2], hi[1] - acc[3]])
        zf.append(_afrag(z[0], z[1]))
    # Delta^T = Z Tb^T; O^T = Y_q + Delta^T M^T (block lower triangular: k-blocks jb <= ib)
    ptb, pm = ln.bases(sm.tb.ptr(), "B"), ln.bases(sm.m.ptr(), "B")
    dl = [T.fragment(T.f32, 4, init=0.0) for _ in range(8)]
    for ib in range(4):
        for jb in range(ib + 1):
            bt = _ld4(ptb[jb], 0, 16 * ib)
            _mma(dl[2 * ib], zf[jb], bt[0:2])
            _mma(dl[2 * ib + 1], zf[jb], bt[2:4])
    df = [_afrag(dl[2 * p], dl[2 * p + 1]) for p in range(4)]
    for ib in range(4):
        for jb in range(ib + 1):
            bm = _ld4(pm[jb], 0, 16 * ib)
            _mma(yq[2 * ib], df[jb], bm[0:2])
            _mma(yq[2 * ib + 1], df[jb], bm[2:4])
    _store_o(ck, ln, yq, o, row_tok, H, h, vcol0, wv, vh)
    # S^T <- S^T Diag(2^G_63) + Delta^T KLL (B = KLL [pos][ch], k-major: ldmatrix.trans)
    for j in range(16):
        eg = T.ptx.ld.shared.v2.f32(sm.egl.at(8 * j + 2 * ln.t))
        for e in range(4):
            T.ptx.mul.f32(st[j][e], st[j][e], eg[e & 1])
    pg = ln.bases(ck.g, "A")
    for q in range(8):                              # channels 16q .. 16q + 15
        for p in range(4):                          # positions 16p .. 16p + 15
            bl = _ld4(pg[q & 3], q >> 2, 16 * p, trans=True)
            _mma(st[2 * q], df[p], bl[0:2])
            _mma(st[2 * q + 1], df[p], bl[2:4])


def _store_o(ck, ln, yq, o, row_tok, H, h, vcol0, wv, vh):
    """O^T (16 value rows x 64 positions) -> bf16 -> over the warp's own columns of the V tile
    (read only by this warp, and already read: ``stmatrix.trans``) -> each lane 4 x 16 bytes of
    the warp's 32-byte row segments, for rows < nv (``st.global.v4.b32``)."""
    po = ln.at(ck.v + vh * TILE, "B", wv)
    for p in range(4):
        _st4(po, 0, 16 * p, _afrag(yq[2 * p], yq[2 * p + 1]), trans=True)
    T.ptx.bar.warp.sync(FULL)
    lane = ln.lane
    sel = lane & 1
    r0 = lane >> 1                                  # rows r0 + 16 i
    src = ck.v + vh * TILE + (r0 << 7) + ((((2 * wv) + sel) ^ (r0 & 7)) << 4)
    dst = o.at((row_tok + r0) * (H * V) + h * V + vcol0 + 8 * sel).base
    step = T.ptx.cvt.u64.u32(H * (16 * V * 2))     # 16 rows of o, in bytes
    for i in range(4):
        words = T.ptx.ld.shared.v4.b32(Addr(src, i * 16 * 128))
        T.ptx.st.global_.v4.b32(Addr(dst, 0), words, pred=(r0 + 16 * i) < ck.nv)
        if i < 3:
            dst = dst + step


# --- the kernel --------------------------------------------------------------------------------

def _grid(B, H, lens=None, BV=64):
    """(value slices, heads, sequences): N = B rows, or the sequences of a varlen pack."""
    return (V // BV, H, B if lens is None else len(lens))


def _block(BV=64):
    return 32 * (BV // 16)


@T.kernel(grid=_grid, block=_block)
def kda_fwd(q_map: T.tensormap, k_map: T.tensormap, g_map: T.tensormap, v_map: T.tensormap,
            q: T.gptr[T.bf16], k: T.gptr[T.bf16], g_raw: T.gptr[T.bf16], v: T.gptr[T.bf16],
            beta: T.gptr[T.bf16], A_log: T.gptr[T.f32], dt_bias: T.gptr[T.f32],
            h0: T.gptr[T.f32], cu_seqlens: T.gptr[T.s32], order: T.gptr[T.s32],
            o: T.gptr[T.bf16], ht: T.gptr[T.f32], Trow: T.u32, BV: T.const = 64,
            STAGES: T.const = 2):
    NW = BV // 16
    NT = 32 * NW
    sm = Smem(BV, STAGES)
    tid = T.tid.x
    warp = tid >> 5
    H = T.nctaid.y
    h = T.ctaid.y
    n = T.ptx.ld.global_.nc.u32(order.at(T.ctaid.z))
    start = T.ptx.ld.global_.nc.u32(cu_seqlens.at(n))
    length = T.ptx.ld.global_.nc.u32(cu_seqlens.at(n + 1)) - start
    bidx = start / Trow                              # the batch row and token of the start
    t0 = start - bidx * Trow
    nchunks = (length + (C - 1)) >> 6
    vcol0 = T.ctaid.x * BV + (warp << 4)             # the warp's first value column
    ln = Lanes()
    gl = GateLanes(NT, A_log, dt_bias, h)
    # S^T of the warp: rows v = vcol0 + g (+8), channels 8j + 2t (+1) (f32 loads, each 8 lanes
    # one 32-byte sector of a row of h0 [k][v])
    hbase = (n * H + h) * (K * V) + vcol0 + ln.g
    st = [T.fragment(T.f32, 4) for _ in range(16)]
    for j in range(16):
        for e in range(4):
            ch = 8 * j + 2 * ln.t + (e & 1)
            T.ptx.ld.global_.f32(st[j][e], h0.at(hbase + ch * V + 8 * (e >> 1)))
    with T.if_(tid == 0):
        for s in range(STAGES):
            sm.full[s].init(1)
        T.ptx.fence.mbarrier_init.release.cluster()
    T.ptx.bar.sync(0)
    stage_bytes = 3 * 2 * TILE + (BV // 64) * TILE
    tma = T.ptx["cp.async.bulk.tensor.4d.shared::cluster.global.tile"
                ".mbarrier::complete_tx::bytes"]

    def issue(c, stage):
        """Thread 0: the TMA loads of chunk c into `stage`."""
        row = t0 + (c << 6)
        sm.full[stage].arrive_expect_tx(stage_bytes)
        for buf, tmap in ((sm.q, q_map), (sm.k, k_map), (sm.g, g_map)):
            for hf in range(2):
                tma(buf.ptr() + stage * (2 * TILE) + hf * TILE, tmap[64 * hf, h, row, bidx],
                    sm.full[stage])
        for vh in range(BV // 64):
            tma(sm.v.ptr() + stage * ((BV // 64) * TILE) + vh * TILE,
                v_map[T.ctaid.x * BV + 64 * vh, h, row, bidx], sm.full[stage])

    with T.if_(tid == 0):
        for c in range(STAGES - 1):
            with T.if_(c < nchunks):
                issue(c, c)
    ring = T.pipeline(STAGES)
    with T.range(nchunks) as c:
        with T.if_(tid == 0):
            nxt = c + (STAGES - 1)
            with T.if_(nxt < nchunks):
                issue(nxt, T.ptx.rem.u32(nxt, STAGES) if STAGES > 1 else 0)
        sm.full[ring.stage].wait(ring.phase)
        nv = T.ptx.min.u32(length - (c << 6), C)
        ck = Chunk(sm, ring.stage, nv)
        tok0 = start + (c << 6)
        _norms(sm, ck, beta, tok0, H, h, NW)
        T.ptx.bar.sync(0)
        _gate(sm, ck, gl)
        T.ptx.bar.sync(0)
        _factors(sm, NT)
        T.ptx.bar.sync(0)
        _blocks(sm, ck, ln, NW)
        T.ptx.bar.sync(0)
        _materialize(sm, ck, NT)
        _diag_inverse(sm, NW)
        T.ptx.bar.sync(0)
        _inverse_blocks(sm, ln)
        T.ptx.bar.sync(0)
        _state_step(sm, ck, ln, st, o, tok0, H, h, vcol0)
        T.ptx.fence.proxy.async_.shared__cta()   # generic writes to the stage before TMA reuse
        T.ptx.bar.sync(0)
        ring.advance()
    for j in range(16):
        for e in range(4):
            ch = 8 * j + 2 * ln.t + (e & 1)
            T.ptx.st.global_.f32(ht.at(hbase + ch * V + 8 * (e >> 1)), st[j][e])


# --- inputs, reference, cases ------------------------------------------------------------------

_REFS = R.RefCache()
_INPUTS: list = []      # [(key, arrays)]: the variants of a benchmark shape share its inputs
LARGE = 1 << 20         # tokens x heads above which inputs (and their reference) are reused


def _tensormaps():
    box = (1, 64, 1, 64)      # (batch, token, head, channel): 64 tokens x 64 channels (128 B)
    return {f"{n}_map": T.TensorMap(src, box=box, swizzle=128)
            for n, src in (("q", "q"), ("k", "k"), ("g", "g_raw"), ("v", "v"))}


def _make(rng, B, T_, H, lens, gate):
    cu = (np.arange(B + 1) * T_ if lens is None
          else np.concatenate([[0], np.cumsum(lens)])).astype(np.int32)
    N = len(cu) - 1
    x = R.raw_inputs(rng, B, T_, H, N=N, gate=gate)
    o_ref, ht_ref = R.forward(**x, cu_seqlens=None if lens is None else cu)
    c = R.unit_scale(o_ref, ht_ref)
    x["v"] = (x["v"].astype(np.float32) * c).astype(x["v"].dtype)
    x["h0"] = x["h0"] * np.float32(c)
    order = np.argsort(-np.diff(cu), kind="stable").astype(np.int32)
    arrays = dict(x, cu_seqlens=cu, order=order)
    _REFS.put({n: arrays[n] for n in ("q", "k", "v", "g_raw", "beta", "h0", "cu_seqlens")},
              {"o": (o_ref * c).astype(np.float32), "ht": (ht_ref * c).astype(np.float32)})
    return arrays


def inputs(rng, B, T_, H, lens=None, gate="mixed"):
    """B rows of T_ tokens, or one row packing the sequences `lens`: raw KDA inputs with v and
    h0 scaled by a power of two so that the smaller RMS of (o, ht) lies in [1, 2)
    (kda_ref.unit_scale); `order` lists the sequences longest first (the grid's z order, so
    the longest start first). Large shapes are made once per seed for all their variants."""
    st = rng.bit_generator.state["state"]
    key = (B, T_, H, lens, gate, st["state"], st["inc"])
    hit = next((a for k, a in _INPUTS if k == key), None)
    if hit is None:
        hit = _make(rng, B, T_, H, lens, gate)
        if B * T_ * H >= LARGE:
            _INPUTS.append((key, hit))
            del _INPUTS[:-4]
    N = len(hit["cu_seqlens"]) - 1
    return dict(hit, Trow=T_, o=np.empty((B, T_, H, V), numpy_dtype("bf16")),
                ht=np.empty((N, H, K, V), np.float32), **_tensormaps())


def reference(q, k, v, g_raw, beta, A_log, dt_bias, h0, cu_seqlens, lens=None):
    cached = _REFS.get(dict(q=q, k=k, v=v, g_raw=g_raw, beta=beta, h0=h0,
                            cu_seqlens=cu_seqlens))
    if cached is not None:
        return cached
    o, ht = R.forward(q, k, v, g_raw, beta, A_log, dt_bias, h0,
                      cu_seqlens=None if lens is None else cu_seqlens)
    return {"o": o.astype(np.float32), "ht": ht.astype(np.float32)}


def constraints(B, T_, H, lens=None, BV=64, STAGES=2):
    out = []
    if BV not in (64, 128):
        out.append(f"BV={BV} must be 64 or 128 (value columns per CTA: 16 per warp)")
    if STAGES not in (1, 2):
        out.append(f"STAGES={STAGES} must be 1 or 2")
    if lens is not None and (B != 1 or sum(lens) != T_ or min(lens) < 0):
        out.append(f"lens={lens!r}: a varlen pack is one row (B=1) of T_={T_} tokens")
    if min(B, T_, H) < 1 or H > 65535:
        out.append(f"B={B}, T_={T_}, H={H} must be positive (H <= 65535)")
    return out


def _tokens(B, T_):
    return B * T_


def _flops(B, T_, H):
    """The chunked algorithm's matrix products per token and head: the A and M blocks (C K
    each, lower half), Y = S0^T [KE; QG]^T (2 K V), Delta and O (C V each, lower half), the state
    update (K V); 2 FLOPs per multiply-add."""
    return 2 * _tokens(B, T_) * H * (C * K + 2 * K * V + C * V + K * V)


def _bytes(B, T_, H, lens=None):
    """q, k, g_raw, v, beta read and o written once, h0 read and ht written per sequence."""
    N = B if lens is None else len(lens)
    return _tokens(B, T_) * H * (2 * (3 * K + V) + 2 + 2 * V) + 2 * N * H * K * V * 4


PACK6 = (1300, 547, 2048, 963, 271, 3063)      # the public varlen pack (8192 tokens)
PACK8 = (1024,) * 8
VARIANTS = {"v64s2": dict(BV=64, STAGES=2), "v64s1": dict(BV=64, STAGES=1),
            "v128s2": dict(BV=128, STAGES=2)}
MAIN = {64: "v64s2", 96: "v128s2", 32: "v64s2"}   # predicted fastest (docs/TUNING.md)


def _large(name, lens=None, B=1, T_=8192, heads=(64, 96)) -> list:
    out = []
    for H in heads:
        for v, params in VARIANTS.items():
            role = "main" if v == MAIN[H] else "alt"
            out.append(T.case(f"{name}_h{H}_{v}", small=False, tags=(role,), B=B, T_=T_, H=H,
                              lens=lens, **params))
    return out


# the public correctness rule: every element within rtol 0.05 and 0.5 x RMS(ref) (the outputs
# are scaled to an RMS of at least 1, so atol 0.5 is at least as strict), and a normalized RMS
# error below 0.03 (numsim measures ~0.004)
TOLERANCE = T.tolerance(rtol=0.05, atol=0.5, rms=0.03)
_ARGS = dict(q="q", k="k", v="v", g="g_raw", beta="beta", A_log="A_log", dt_bias="dt_bias",
             h0="h0", ht="ht", l2norm=True)
_COMMON = dict(inputs=inputs, reference=reference, outputs=["o", "ht"], tolerance=TOLERANCE,
               constraints=constraints, flops=_flops, bytes=_bytes)


def _baselines(varlen: bool) -> list:
    """FLA's chunk_kda forward, and its forward + backward, on the same buffers (gate and L2
    norm fused, h0 in, ht out; the varlen pack through cu_seqlens)."""
    args = dict(_ARGS, cu_seqlens="cu_seqlens") if varlen else dict(_ARGS)
    fwd_bwd = {n: a for n, a in args.items() if n != "ht"}
    return [{"name": "fla.chunk_kda", "args": args},
            {"name": "fla.chunk_kda.fwd_bwd", "args": fwd_bwd}]


SUITE = T.suite(
    kda_fwd, baselines=_baselines(False), **_COMMON,
    cases=[
        # the smallest (what sync_check runs): one CTA, one chunk of 40 tokens, saturated gates
        T.case("t40_h1_v128_deep", B=1, T_=40, H=1, BV=128, gate="deep"),
        # two CTAs per head, two rows of 65 tokens (a chunk and a 1-token tail), one stage
        T.case("b2_t65_h1_v64s1_slow", B=2, T_=65, H=1, STAGES=1, gate="slow"),
        *_large("t8192"),
        *_large("b2_t4096", B=2, T_=4096, heads=(32,)),
    ])

SUITE_VARLEN = T.suite(
    kda_fwd, baselines=_baselines(True), **_COMMON,
    cases=[
        # a pack of 3 short sequences (3 CTAs)
        T.case("pack_17_8_30_v128", B=1, T_=55, H=1, lens=(17, 8, 30), BV=128),
        *_large("pack6", lens=PACK6),
        *_large("pack8x1024", lens=PACK8),
    ])
