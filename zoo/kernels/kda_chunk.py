"""The chunk preparation of the KDA forward (zoo/kernels/kda_fwd.py has the algorithm): every
phase of a chunk that does not depend on the state, on the chunk's raw tiles in shared memory,
by all warps of the CTA between ``bar.sync`` barriers (the kernel calls them in order):

    norms -> gate -> factors -> blocks -> materialize, diag_inverse -> inverse_blocks

and the fragment and address helpers the state phase shares. Not a kernel module: no suite.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import tirxh.lang as T
from tirxh.core.ir import Addr

# the zoo is a directory of kernel files, not a package (see kda_fwd.py)
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
import kda_ref as R  # noqa: E402 - after the path that finds it

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

def trips(n, block, roll, reverse=False):
    """(b, u) for item b block + u of n, in blocks of `block` (`reverse`: last first): trace-time
    ints (the loop unrolled whole), or with `roll` b the register of a runtime loop over the
    blocks (``.pragma "nounroll"``) and a block's items unrolled in its body. The caller's
    code per item is the same either way; only the code size differs (session 32: the KDA
    backward's prep and piece 3 spent most of their time fetching unrolled code)."""
    nb = n // block
    items = list(reversed(range(block))) if reverse else list(range(block))
    if not roll:
        for b in (reversed(range(nb)) if reverse else range(nb)):
            for u in items:
                yield b, u
        return
    with T.range(nb, unroll=1) as t:
        b = (nb - 1) - t if reverse else t
        for u in items:
            yield b, u


class Running:
    """A running f32 sum (`add`) or dot (`fma`) over `trips`: unrolled, its first term as it
    is (x, or x y) and each later one a new value; rolled, a register (started at `start`, or
    at -0) updated in place. -0 + x is x and fma(x, y, -0) is x y to the bit, so both forms
    give the same words. `value` is the sum so far; `snapshot` a copy that later terms leave
    alone."""

    def __init__(self, roll, start=None):
        self.roll, self.value = roll, start
        if roll:
            self.value = T.reg(T.f32, init=-0.0 if start is None else None)
            if start is not None:
                self.value.set(start)

    def add(self, x):
        if self.roll:
            self.value.set(self.value + x)
        else:
            self.value = x if self.value is None else self.value + x
        return self.value

    def fma(self, x, y):
        if self.roll:
            self.value.set(T.ptx.fma.rn.f32(x, y, self.value))
        else:
            self.value = x * y if self.value is None else T.ptx.fma.rn.f32(x, y, self.value)
        return self.value

    def snapshot(self):
        return T.ptx.mov.f32(self.value) if self.roll else self.value


def unpack(word):
    """bf16x2 -> (lo, hi) f32: ``shl.b32`` / ``and.b32`` and ``mov.f32``."""
    return (T.ptx.mov.f32(T.ptx.shl.b32(word, 16)),
            T.ptx.mov.f32(T.ptx.and_.b32(word, 0xFFFF0000)))


def pack(lo, hi):
    """Two f32 -> bf16x2 (lo in the low half): ``cvt.rn.bf16x2.f32 d, hi, lo``."""
    return T.ptx.cvt.rn.bf16x2.f32(hi, lo)


def afrag(c0, c1):
    """The A fragment of a 16 x 16 tile from the accumulators of its two 16 x 8 halves (the
    mma.sync C layout, rows g / g + 8, columns 2t..): 4 x ``cvt.rn.bf16x2.f32``."""
    return [pack(c0[0], c0[1]), pack(c0[2], c0[3]), pack(c1[0], c1[1]), pack(c1[2], c1[3])]


def mma(acc, a, b):
    T.ptx[MMA](acc, a, b, acc)


def rcp_fma(x):
    """1 / x for a positive normal f32 without the MUFU pipe (which the gate phase saturates):
    the estimate bits 0x7EF311C3 - bits(x) (relative error <= 5.1%), then two Newton steps
    r (2 - x r), each squaring the error (< 1e-5; the result only feeds bf16 operands, whose
    rounding is 2e-3):
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


def ld4(base_cp, half, row0, trans=False):
    """``ldmatrix.x4`` (``.trans``) at [base + half * 8 KB + row0 * 128]."""
    op = (T.ptx.ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 if trans
          else T.ptx.ldmatrix.sync.aligned.m8n8.x4.shared.b16)
    return list(op(Addr(base_cp, half * TILE + row0 * 128)))


def st4(base_cp, half, row0, regs, trans=False):
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

def norms(sm, ck, beta, tok0, H, h, NW, beta_first=False, tid=None):
    """rk (row 0..63) and rq * scale into sRn, beta into sBeta (0 past the valid rows).

    With 4 warps a thread sums a whole row (both 64-channel halves: 16 ``ld.shared.v4``); with
    8 a half row and one ``shfl.sync.bfly`` 16 adds the other half. `beta_first`: the global
    load of beta before the sums (its ~500-cycle latency under them, not after). `tid`: the
    thread's index among the NW warps doing it (default ``tid.x``: warps 0 .. NW - 1)."""
    tid = T.tid.x if tid is None else tid

    def load_beta():
        with T.if_(tid < C):
            b = T.reg(T.f32, init=0.0)
            with T.if_(tid < ck.nv):
                b.set(T.ptx.cvt.f32.bf16(T.ptx.ld.global_.nc.b16(beta.at((tok0 + tid) * H + h))))
            T.ptx.st.shared.f32(sm.beta.at(tid), b)
    if beta_first:
        load_beta()
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
                for val in unpack(wd):
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
    if not beta_first:
        load_beta()


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


def gate(sm, ck, gl, batch=0):
    """In place over the chunk's raw tiles (each element read and written by one thread):
    sK <- KL, sQ <- QL (q^ scale 2^(G - r_a)), sG <- KD = k^ 2^(r_a - G); per block and channel
    the block's total and first-row gate (log2 units) into sRef.

    `batch` = 0: row by row (load, compute, store), the order of the measured variants: ptxas
    cannot move row i + 1's loads above row i's stores (same tiles, addresses it cannot tell
    apart), so every row pays the shared-load latency and its whole dependent chain (LDS, ex2,
    rcp, the running sum, ex2, the Newton steps, pack, STS: ~220 cycles) before the next row
    starts. `batch` = b > 0: b rows' loads first, then their math, then their stores, so the
    rows' chains overlap (only the running sum is serial: one add per row), and the ex2 and the
    sigmoid's rcp are ``.ftz`` (no denormal fix-ups: 4 instructions per element of ~36; every
    ex2 input here gives a normal result or one that only enters 1 + x, the rcp's input is
    1 + x >= 1). Same values as row by row but for that flush."""
    ex2 = T.ptx.ex2.approx.ftz.f32 if batch else T.ptx.ex2.approx.f32
    rcp = T.ptx.rcp.approx.ftz.f32 if batch else T.ptx.rcp.approx.f32   # of 1 + x >= 1
    step = batch or 1
    for bl in range(gl.nblk):
        a = gl.blk0 + bl
        rowb = a << 11                               # 16 rows x 128 bytes
        addrs = {n: [tb + rowb + o for o in gl.eoff] for n, tb in (("q", ck.q), ("k", ck.k),
                                                                     ("g", ck.g))}
        s = [None, None]
        ref = [None, None]
        for i0 in range(0, 16, step):
            rows = range(i0, min(i0 + step, 16))
            at = {i: {n: Addr(v[i & 7], i * 128) for n, v in addrs.items()} for i in rows}
            words, valid = {}, {}
            for i in rows:                           # the loads of the batch
                row = (a << 4) + i
                valid[i] = row < ck.nv
                words[i] = (T.ptx.ld.shared.b32(at[i]["g"]), T.ptx.ld.shared.b32(at[i]["k"]),
                            T.ptx.ld.shared.b32(at[i]["q"]),
                            T.ptx.ld.shared.f32(sm.rn.at(0, row)),
                            T.ptx.ld.shared.f32(sm.rn.at(1, row)))
            out = {}
            for i in rows:                           # their math
                gw, kw, qw, rk, rq = words[i]
                graw, kv, qv = unpack(gw), unpack(kw), unpack(qw)
                kl, ql, kd = [], [], []
                for e in range(2):
                    x = T.ptx.min.f32(T.ptx.fma.rn.f32(graw[e], gl.c1, gl.c0[e]), 64.0)
                    sig = rcp(ex2(x) + 1.0)
                    g2 = T.ptx.selp.f32(sig * G2, 0.0, valid[i])
                    if i == 0:
                        s[e] = g2
                        ref[e] = g2
                        lfac = dfac = None
                    else:
                        s[e] = s[e] + g2
                        lfac = ex2(s[e] - ref[e])            # in [2^-108, 1]: normal
                        dfac = rcp_fma(lfac)
                    kn = kv[e] * rk
                    qn = qv[e] * rq
                    kl.append(kn if lfac is None else kn * lfac)
                    ql.append(qn if lfac is None else qn * lfac)
                    kd.append(kn if dfac is None else kn * dfac)
                out[i] = (kl, ql, kd)
            for i in rows:                           # their stores
                for n, vals in zip(("k", "q", "g"), out[i]):
                    T.ptx.st.shared.b32(at[i][n], pack(*vals))
        for e in range(2):
            T.ptx.st.shared.f32(sm.ref.at(a, 0, 2 * gl.p + e), s[e])
            T.ptx.st.shared.f32(sm.ref.at(a, 1, 2 * gl.p + e), ref[e])


def factors(sm, NT):
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

def units(NW) -> list:
    """The (operand, row block) units of phase 4 per warp: ("k", a) makes A's blocks (a, b <= a),
    ("q", a) M's; a unit of row block a has a + 1 blocks (20 in all), balanced over the warps."""
    order = [("k", 3), ("q", 3), ("k", 2), ("q", 2), ("k", 1), ("q", 1), ("k", 0), ("q", 0)]
    if NW == 4:
        return [[order[0], order[6]], [order[1], order[7]], [order[2], order[4]],
                [order[3], order[5]]]
    return [[u] for u in order]


def blocks(sm, ck, ln, NW, interleave=1):
    """Each warp its units: A fragments of KL_a (or QL_a) for the 8 channel steps, times KD_b^T
    (scaled by F_ab off the diagonal); A: rows times beta, masked to j < i, f32 into sA; M:
    masked to j <= i, bf16 into sM (``stmatrix``).

    `interleave` = n > 1: up to n of a unit's a + 1 blocks side by side (channel step outer,
    block inner), so their 2 n accumulators' chains of 8 dependent mma overlap instead of
    following each other block by block (same sums in the same order: the same values; n = 2
    where the prep's registers are few: 4 prep warps next to 8 state warps)."""
    warp = T.tid.x >> 5
    pa = {n: ln.bases(getattr(ck, n), "A") for n in ("k", "q")}
    pb = ln.bases(ck.g, "B")
    pm = ln.bases(sm.m.ptr(), "A")
    for w, mine in enumerate(units(NW)):
        with T.if_(warp == w, uniform=True):
            for x, a in mine:
                af = [ld4(pa[x][s & 3], s >> 2, 16 * a) for s in range(8)]
                groups = [list(range(b0, min(b0 + interleave, a + 1)))
                          for b0 in range(0, a + 1, interleave)]
                for bs in groups:
                    accs = {b: [T.fragment(T.f32, 4, init=0.0) for _ in range(2)] for b in bs}
                    for s in range(8):
                        for b in bs:
                            _block_step(sm, ln, pb, af, a, b, s, accs[b])
                    for b in bs:
                        _block_out(sm, ln, x, a, b, accs[b], pm)


def _block_step(sm, ln, pb, af, a, b, s, acc):
    """Channel step s of block (a, b): KD_b's B fragments (times F_ab off the diagonal), 2 mma."""
    pair = PAIRS.index((a, b)) if b < a else None
    bf = ld4(pb[s & 3], s >> 2, 16 * b)
    if pair is not None:   # KD_b 2^(r_a - r_b): channels 16s + 2t (+8)
        f0 = T.ptx.ld.shared.b32(sm.f.at(pair, 16 * s + 2 * ln.t))
        f1 = T.ptx.ld.shared.b32(sm.f.at(pair, 16 * s + 8 + 2 * ln.t))
        bf = [T.ptx.mul.rn.bf16x2(bf[0], f0), T.ptx.mul.rn.bf16x2(bf[1], f1),
              T.ptx.mul.rn.bf16x2(bf[2], f0), T.ptx.mul.rn.bf16x2(bf[3], f1)]
    mma(acc[0], af[s], bf[0:2])
    mma(acc[1], af[s], bf[2:4])


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
        regs = [pack(acc[0][0], acc[0][1]), pack(acc[0][2], acc[0][3]),
                pack(acc[1][0], acc[1][1]), pack(acc[1][2], acc[1][3])]
        st4(pm[b], 0, 16 * a, regs)


# --- phase 5: operands for the state, and (I + A)^-1 -------------------------------------------

def materialize(sm, ck, NT, batch=False):
    """In place: sK <- KE = KL E_a, sQ <- QG = QL E_a, sG <- KLL = KD 2^(G_63 - r_b), with one
    ``mul.rn.bf16x2`` per element pair (16-byte vectors; the factor row of the vector's block).

    `batch`: each tile's vectors (and factor rows) are all loaded before its first store, so
    their latencies overlap (row by row, ptxas keeps every load after the previous store: the
    same in-place hazard as the gate's)."""
    tid = T.tid.x
    lchunk = tid & 15
    rows0 = tid >> 4                             # the thread's rows: rows0 + NT/16 * k
    step = NT // 16
    phys = ((lchunk & 7) ^ (rows0 & 7)) << 4
    base_off = (lchunk >> 3) * TILE + (rows0 << 7) + phys
    n = C * 16 // NT
    for tile, table in ((ck.k, sm.e), (ck.q, sm.e), (ck.g, sm.eg)):
        base = tile + base_off
        fbase = table.ptr() + (lchunk << 4)
        for k0 in range(0, n, n if batch else 1):
            ks = range(k0, n if batch else k0 + 1)
            addr = {kk: Addr(base, kk * step * 128) for kk in ks}
            fa = {}
            data = {}
            for kk in ks:
                a = (kk * step) // 16
                data[kk] = T.ptx.ld.shared.v4.b32(addr[kk])
                if a not in fa:
                    fa[a] = T.ptx.ld.shared.v4.b32(Addr(fbase, a * 2 * K))
            for kk in ks:
                fac = fa[(kk * step) // 16]
                T.ptx.st.shared.v4.b32(addr[kk], [T.ptx.mul.rn.bf16x2(d, f)
                                                  for d, f in zip(data[kk], fac)])


def diag_inverse(sm, NW):
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


def inverse_blocks(sm, ln):
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
                    af = afrag(*us[m])
                    for n in range(2):   # B = A_am^T: (k = z, n = y) -> A_am[y][z]
                        rows = 16 * a + 8 * n + g
                        b0 = T.ptx.ld.shared.v2.f32(sm.a.at(rows, 16 * m + 2 * t))
                        b1 = T.ptx.ld.shared.v2.f32(sm.a.at(rows, 16 * m + 8 + 2 * t))
                        mma(p[n], af, [pack(*b0), pack(*b1)])
                af = afrag(p[0], p[1])
                ua = [T.fragment(T.f32, 4, init=0.0) for _ in range(2)]
                for n in range(2):       # B = D_a^T -> D_a[y][z]
                    d0 = T.ptx.ld.shared.v2.f32(sm.d.at(a, 8 * n + g, 2 * t))
                    d1 = T.ptx.ld.shared.v2.f32(sm.d.at(a, 8 * n + g, 8 + 2 * t))
                    mma(ua[n], af, [pack(*d0), pack(*d1)])
                ua = [[T.ptx.neg.f32(v) for v in ua[n]] for n in range(2)]
                us[a] = ua
                _store_tb(pt, a, b, ua, beta)


def _store_tb(pt, a, b, u, beta):
    """Tb block (a, b) from U = T_ab^T: rows of U (columns j of Tb) scaled by beta_j."""
    regs = []
    for n in range(2):
        regs += [pack(u[n][0] * beta[0], u[n][1] * beta[0]),
                 pack(u[n][2] * beta[1], u[n][3] * beta[1])]
    st4(pt[b], 0, 16 * a, [regs[0], regs[1], regs[2], regs[3]], trans=True)


# --- the prep's code made smaller (session 7, kda_fwd's SLIM kernel: docs/TUNING.md, "The prep's
# code size") ----------------------------------------------------------------------------------
#
# The warp-specialized variants' measured chunk time follows the size of the prep loop's code
# (~0.18K cycles per KB over six variants), not its dependent chains: the prep is straight-line
# code of 65-93 KB executed once per chunk. These forms compute the same quantities with a
# runtime loop (the gate) or one code path for every warp (the diagonal inverse).

def gate_slim(sm, ck, gl):
    """`gate` with BATCH = 8 as a runtime loop over the thread's (block, 8-row half) pairs
    (``.pragma "nounroll"``): one 8-row body instead of 2 or 4 unrolled copies. The running
    sum and the block's first-row gate are loop-carried registers (reset at a block's first
    half); row 0 takes the general form (its factor 2^(s - r_a) = 2^0 = 1 exactly), and
    D = 2^(r_a - G) is an ``ex2`` of its own instead of the Newton reciprocal (1 MUFU instead
    of 6 FMA-pipe instructions: the code, not the MUFU pipe, is what a chunk waits for). sRef
    is written at every half (the second overwrites the first with the block's total)."""
    ex2, rcp = T.ptx.ex2.approx.ftz.f32, T.ptx.rcp.approx.ftz.f32
    s_r = [T.reg(T.f32, init=0.0) for _ in range(2)]
    ref_r = [T.reg(T.f32, init=0.0) for _ in range(2)]
    with T.range(2 * gl.nblk, unroll=1) as it:
        a = gl.blk0 + (it >> 1)
        h8 = it & 1
        first = h8 == 0
        rowb = (a << 11) + (h8 << 10)                # 16 rows x 128 bytes, then 8 rows
        # row i of the half: swizzled column offset eoff[i] (its row % 8 is i), then i rows on
        row0 = (a << 4) + (h8 << 3)
        # the pair's swizzled offsets (GateLanes.eoff) made here, not held across the chunk
        # loop: 8 fewer live registers where 4 prep warps have 120
        half, j = gl.p >> 5, (gl.p & 31) >> 2
        inner = (half * TILE) + ((gl.p & 3) << 2) + rowb
        eoff = [inner + ((j ^ r8) << 4) for r8 in range(8)]
        base = {n: [tb + o for o in eoff] for n, tb in (("q", ck.q), ("k", ck.k), ("g", ck.g))}
        s = [T.ptx.selp.f32(0.0, s_r[e], first) for e in range(2)]
        ref = [ref_r[e] for e in range(2)]
        words, valid = [], []
        for i in range(8):                           # the loads of the 8 rows
            row = row0 + i
            valid.append(row < ck.nv)
            words.append((T.ptx.ld.shared.b32(Addr(base["g"][i], i * 128)),
                          T.ptx.ld.shared.b32(Addr(base["k"][i], i * 128)),
                          T.ptx.ld.shared.b32(Addr(base["q"][i], i * 128)),
                          T.ptx.ld.shared.f32(sm.rn.at(0, row)),
                          T.ptx.ld.shared.f32(sm.rn.at(1, row))))
        out = []
        for i in range(8):                           # their math
            gw, kw, qw, rk, rq = words[i]
            graw, kv, qv = unpack(gw), unpack(kw), unpack(qw)
            kl, ql, kd = [], [], []
            for e in range(2):
                x = T.ptx.min.f32(T.ptx.fma.rn.f32(graw[e], gl.c1, gl.c0[e]), 64.0)
                sig = rcp(ex2(x) + 1.0)
                g2 = T.ptx.selp.f32(sig * G2, 0.0, valid[i])
                if i == 0:                           # the block's first row: r_a = its gate
                    ref[e] = T.ptx.selp.f32(g2, ref[e], first)
                s[e] = s[e] + g2
                lfac = ex2(s[e] - ref[e])            # in [2^-108, 1]
                dfac = ex2(ref[e] - s[e])            # in [1, 2^108]
                kn = kv[e] * rk
                qn = qv[e] * rq
                kl.append(kn * lfac)
                ql.append(qn * lfac)
                kd.append(kn * dfac)
            out.append((kl, ql, kd))
        for i in range(8):                           # their stores
            for n, vals in zip(("k", "q", "g"), out[i]):
                T.ptx.st.shared.b32(Addr(base[n][i], i * 128), pack(*vals))
        for e in range(2):
            T.ptx.st.shared.f32(sm.ref.at(a, 0, 2 * gl.p + e), s[e])
            T.ptx.st.shared.f32(sm.ref.at(a, 1, 2 * gl.p + e), ref[e])
            s_r[e].set(s[e])
            ref_r[e].set(ref[e])


def diag_inverse_slim(sm):
    """`diag_inverse` with the block index a register (a = warp < 4): one code path instead of
    four unrolled copies (one per warp), the same forward substitution in the same order."""
    warp, lane = T.tid.x >> 5, T.laneid()
    j = lane & 15
    with T.if_(warp < NB, uniform=True):
        abase = sm.a.ptr() + warp * (16 * (A_STRIDE + 1) * 4)     # A[16a][16a]
        dbase = sm.d.ptr() + warp * (16 * D_STRIDE * 4) + (j << 2)
        x = []
        for i in range(16):
            acc = T.ptx.selp.f32(1.0, 0.0, j == i)
            row = [T.ptx.ld.shared.f32(Addr(abase, (i * A_STRIDE + m) * 4)) for m in range(i)]
            for m in range(i):
                acc = T.ptx.fma.rn.f32(T.ptx.neg.f32(row[m]), x[m], acc)
            x.append(acc)
        with T.if_(lane < 16):
            for i in range(16):
                T.ptx.st.shared.f32(Addr(dbase, i * D_STRIDE * 4), x[i])


def blocks_slim(sm, ck, ln, NW):
    """`blocks` as one runtime path for every warp: the warp's operand (x = warp & 1: A from KL
    for even warps, M from QL for odd ones: `units` gives each warp units of one operand) and
    row block a are registers, and the blocks (a, b <= a) of a unit a runtime loop (one block a
    trip: its 8 channel steps, 2 accumulators); F_ab's words are selected as bf16 1.0 on the
    diagonal (an exact product), the mask is col < row + x there. The unrolled form has one
    branch per warp (22-23 KB of SASS); this one ~2 blocks' worth, for a longer chain per block
    (8 dependent mma pairs a trip instead of up to 4 blocks side by side)."""
    warp = T.tid.x >> 5
    g, t = ln.g, ln.t
    xq = warp & 1                                    # 0: A (KL, beta, f32), 1: M (QL, bf16)
    pa = ln.bases(T.ptx.selp.u32(ck.q, ck.k, xq == 1), "A")
    pb = ln.bases(ck.g, "B")
    one = 0x3F803F80                                 # bf16x2 (1.0, 1.0)
    nunits = 1 if NW == 8 else 2
    with T.if_(warp < NW, uniform=True):
        with T.range(nunits, unroll=1) as u:
            hi = 3 - (warp >> 1)                     # units(): row blocks 3, 3, 2, 2, 1, 1, 0, 0
            a = hi if NW == 8 else T.ptx.selp.u32(hi, warp >> 1, u == 0)   # 4 warps: (3, 0), (2, 1)
            arow = a << 11                           # 16 rows x 128 bytes
            af = [ld4(pa[s & 3] + arow, s >> 2, 0) for s in range(8)]
            beta = [T.ptx.ld.shared.f32(sm.beta.at((a << 4) + g + 8 * hh)) for hh in range(2)]
            with T.range(a + 1, unroll=1) as b:
                diag = a == b
                # PAIRS.index((a, b)) for b < a: (a - 1) + b (5 - b) / 2; 0 on the diagonal
                pair = T.ptx.selp.u32(0, (a - 1) + ((b * (5 - b)) >> 1), diag)
                fbase = sm.f.ptr() + pair * (2 * K) + (t << 2)
                brow = b << 11
                acc = [T.fragment(T.f32, 4, init=0.0) for _ in range(2)]
                for s in range(8):
                    bf = ld4(pb[s & 3] + brow, s >> 2, 0)
                    f0 = T.ptx.selp.b32(one, T.ptx.ld.shared.b32(Addr(fbase, 32 * s)), diag)
                    f1 = T.ptx.selp.b32(one, T.ptx.ld.shared.b32(Addr(fbase, 32 * s + 16)),
                                        diag)
                    bf = [T.ptx.mul.rn.bf16x2(bf[0], f0), T.ptx.mul.rn.bf16x2(bf[1], f1),
                          T.ptx.mul.rn.bf16x2(bf[2], f0), T.ptx.mul.rn.bf16x2(bf[3], f1)]
                    mma(acc[0], af[s], bf[0:2])
                    mma(acc[1], af[s], bf[2:4])
                block_out_slim(sm, ln, acc, a, arow, b, xq, diag, beta)


def block_out_slim(sm, ln, acc, a, arow, b, xq, diag, beta):
    """Block (a, b)'s output in `blocks_slim`'s one-path form (also kda_fwd_slim.py's
    blocks_wide): a, b registers or constants, arow = a << 11 (the row block's byte offset in
    a tile), xq the warp's operand, diag the predicate a == b. Masked on the diagonal
    (col < row + xq); A rows times `beta` (f32 into sA) or M (bf16 into sM): ``selp``, ``mul``,
    ``st.shared.v2.f32`` or ``cvt.rn.bf16x2.f32`` and ``stmatrix``, each store behind a
    warp-uniform branch on xq."""
    g, t = ln.g, ln.t
    vals = [[None] * 4 for _ in range(2)]
    for n in range(2):
        for e in range(4):
            col, row = 8 * n + 2 * t + (e & 1), g + 8 * (e >> 1)
            v = T.ptx.selp.f32(acc[n][e], 0.0, col < row + xq)
            vals[n][e] = T.ptx.selp.f32(v, acc[n][e], diag)
    with T.if_(xq == 0, uniform=True):   # A: rows times beta, f32 into sA
        for n in range(2):
            for hh in range(2):
                at = sm.a.at((a << 4) + g + 8 * hh, (b << 4) + 8 * n + 2 * t)
                T.ptx.st.shared.v2.f32(at, [vals[n][2 * hh] * beta[hh],
                                            vals[n][2 * hh + 1] * beta[hh]])
    with T.if_(xq == 1, uniform=True):   # M: bf16 into sM (stmatrix)
        regs = [pack(vals[0][0], vals[0][1]), pack(vals[0][2], vals[0][3]),
                pack(vals[1][0], vals[1][1]), pack(vals[1][2], vals[1][3])]
        st4(ln.at(sm.m.ptr(), "A", b) + arow, 0, 0, regs)
