"""Kimi Delta Attention backward, piece 2a for both walks with conflict-free operands (issue
18; docs/PERFORMANCE.md "Session 13, branch kdabwd10", the plan's step 3): kda_bwd_prep2's prep
and products, with every walk operand split ONCE into bf16 hi and lo planes in the forward's
128-byte-swizzled layout (kda_chunk.Lanes: 16-byte chunk ch of row r at ch ^ (r % 8)) and its
mma fragments read by ``ldmatrix.x4`` instead of scalar ``ld.shared.f32`` from the prep's
[64, 129]-word f32 tiles.

Why: prep2's walks read each fragment element with one ``ld.shared.f32``; lane (g, t) of a
fragment reads row g, column 2t of a 129-word-stride tile, bank (g + 2t) mod 32, so four lanes
share a bank (eight on the 64-word M and T tiles), and every element is split into hi and lo
again at every load. Measured (session 13, d7) the walks ran at ~23 SM cycles a split
mma.sync, ~82% of a launch. One ``ldmatrix.x4`` delivers a whole 16 x 16 operand (or two
n-tiles' B fragments) in 4 wavefronts, the minimum for 512 bytes, and the split is paid once.

The split values are the same as prep2's (hi = rn(x), lo = rn(x - hi) of the same f32
element; kda_bwd_pieces_tc._split2 elementwise) and each product keeps prep2's mma order (per
k-step, per n-tile: lo hi, hi lo, hi hi), so the outputs are bit-identical to kda_bwd_prep2's
(tests/zoo/test_kda_bwd_prep3.py).

Planes (`Planes`): an f32 matrix [C, n] (n = 64 or 128) as two bf16 planes, hi then lo, each
n / 64 halves of [C rows][128 bytes]; an exact matrix (dO, V: bf16 inputs) has the hi plane
only. Fragment loads (`Planes.a`, `.at`, `.b`): a row-major A operand by ``ldmatrix.x4``
(kda_chunk pattern "A"); an A operand stored k-major (W^T, X^T, dO^T, V^T, T^T) by
``ldmatrix.x4.trans`` (pattern "B"); a k-major B operand (KE, KL, W, U, X), two n-tiles at
once, by ``ldmatrix.x4.trans`` (pattern "A").

Phases (256 threads, ``bar.sync`` between): kda_bwd_prep2's prep -> `split_operands` (KE, KL;
then dO, Tb, T, M: each round's loads before its barrier, the planes over their sources) ->
`reverse_walk` -> a barrier -> V staged (`stage_v`) -> `forward_walk`; exp(G_C) stored.

kda_bwd_prep3s (session 28, plan "tc4" of kda_fwd_bwd) is the same launch that also stores the
prep's tiles piece 2c reads into `ptile` (kda_bwd_prep_tiles.store, between the prep and the
split), so kda_bwd_pieces_ld need not compute the prep again. kda_bwd_prep3g (session 31,
plan "tc6") also copies the norms' and gate's tiles out for piece 3 (kda_bwd_prep_tiles.
GateStore: two bulk copies issued after the gate's barrier, waited for before `_decayed`
overwrites KL, KD, QL behind one more barrier).

Inputs, outputs, cases and timing cases: kda_bwd_prep2's (the same interface, so the plan can
swap it in; `benchmarks/kda_bench.sh prep3` times both in one job).

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
import kda_bwd_prep2 as P2  # noqa: E402
import kda_bwd_prep_tc as PT  # noqa: E402
import kda_bwd_prep_tiles as PTL  # noqa: E402
import kda_bwd_reverse as BR  # noqa: E402
from kda_chunk import C, K, TILE, Lanes, ld4, mma, pack, trips, unpack  # noqa: E402

TAGS = ("linear-attention", "backward", "chunked", "fused-gate", "mma-sync", "split-bf16",
        "varlen")


# --- split planes in the swizzled layout ----------------------------------------------------

class Planes:
    """The bf16 hi and lo planes of an f32 [C, n] matrix at shared byte address `base`
    (128-byte aligned: the swizzle is conflict-free only on whole 128-byte lines): hi at
    `base`, lo one plane (C n 2 bytes) after it; `exact` (a bf16-valued matrix) has no lo
    plane and its products skip the mma that would multiply it."""

    def __init__(self, base, n, exact=False):
        if n not in (64, 128):
            raise ValueError(f"Planes: n must be 64 or 128 columns, got {n}")
        self.base, self.n, self.exact = base, n, exact
        self.size = C * n * 2

    def planes(self):
        """Byte addresses of the planes present: (hi,) or (hi, lo)."""
        return (self.base,) if self.exact else (self.base, self.base + self.size)

    def bytes(self):
        return self.size * len(self.planes())

    @staticmethod
    def offset(row, col):
        """Byte offset of element (row, col) in a plane: half col / 64, row's 128-byte line,
        16-byte chunk (col / 8) ^ (row % 8), then 2 bytes an element."""
        return ((col >> 6) * TILE + (row << 7) + ((((col >> 3) & 7) ^ (row & 7)) << 4)
                + ((col & 7) << 1))

    def store_pair(self, row, col, x0, x1):
        """Split the f32 pair at (row, col), (row, col + 1) (col even) into the planes: one
        ``st.shared.b32`` a plane."""
        off = self.offset(row, col)
        if self.exact:
            T.ptx.st.shared.b32(self.base + off, pack(x0, x1))
            return
        hi, lo = TC._split2(x0, x1)
        T.ptx.st.shared.b32(self.base + off, hi)
        T.ptx.st.shared.b32(self.base + self.size + off, lo)

    def store_chunk(self, row, col, xs):
        """Split the 8 f32 of row `row`, columns col .. col + 7 (col a multiple of 8) into the
        planes: one ``st.shared.v4.b32`` a plane."""
        pairs = [(xs[e], xs[e + 1]) for e in range(0, 8, 2)]
        off = self.offset(row, col)
        if self.exact:
            T.ptx.st.shared.v4.b32(self.base + off, [pack(*p) for p in pairs])
            return
        split = [TC._split2(*p) for p in pairs]
        T.ptx.st.shared.v4.b32(self.base + off, [h for h, _ in split])
        T.ptx.st.shared.v4.b32(self.base + self.size + off, [lo for _, lo in split])

    def _ld(self, lanes, pattern, row0, col0, trans):
        """ldmatrix.x4 of each plane at rows row0 .., columns col0 .. col0 + 15 (col0 a
        multiple of 16; row0 a multiple of 8; either may be a register)."""
        out = []
        for p in self.planes():
            at = lanes.at(p + (col0 >> 6) * TILE + (row0 << 7), pattern, (col0 & 63) >> 4)
            out.append(ld4(at, 0, 0, trans=trans))
        return out[0], (None if self.exact else out[1])

    def a(self, lanes, m0, k0):
        """A fragment (hi, lo) of rows m0 .. m0 + 15, columns k0 .. k0 + 15 (row-major)."""
        return self._ld(lanes, "A", m0, k0, False)

    def at(self, lanes, m0, k0):
        """A fragment (hi, lo) of the transpose: A[m, k] = this[k, m] for m0 .., k0 .."""
        return self._ld(lanes, "B", k0, m0, True)

    def b(self, lanes, k0, n0):
        """B fragments (hi, lo) of two n-tiles, B[k, n] = this[k, n] for k0 .. k0 + 15 and
        n0 .. n0 + 15: registers 0, 1 the n-tile n0, 2, 3 the n-tile n0 + 8."""
        return self._ld(lanes, "A", k0, n0, True)

    def bt(self, lanes, k0, n0):
        """`b` of the transpose, B[k, n] = this[n, k] (stored n-major: no ``.trans``)."""
        return self._ld(lanes, "B", n0, k0, False)


def rows_of(tile):
    """A chunk reader of a [C, 129]-stride f32 tile (the prep's): 8 ``ld.shared.f32``; its
    lanes run down the rows (bank (r + c) mod 32: conflict-free)."""
    return (lambda r, c: [T.ptx.ld.shared.f32(tile.at(r, c + e)) for e in range(8)]), "rows"


def cols_of(tile, scale=None):
    """A chunk reader of a [C, 64] f32 tile (M, T): 2 ``ld.shared.v4.f32``, element (r, c)
    times the f32 at scale(c) if given (Tb = T Diag(beta), kda_bwd_pieces_tc._tb's product);
    its lanes run along the chunks of a row (a stride of 64 words puts a column on one bank)."""
    def read(r, c):
        xs = list(T.ptx.ld.shared.v4.f32(tile.at(r, c))) + \
            list(T.ptx.ld.shared.v4.f32(tile.at(r, c + 4)))
        if scale is None:
            return xs
        bs = list(T.ptx.ld.shared.v4.f32(scale(c))) + list(T.ptx.ld.shared.v4.f32(scale(c + 4)))
        return [x * b for x, b in zip(xs, bs)]
    return read, "cols"


def convert(jobs):
    """Split f32 matrices into their planes, in place or not: every thread loads its elements
    of every job, one ``bar.sync`` (the planes may overwrite the sources), then stores each
    16-byte chunk of each plane with one ``st.shared.v4.b32`` (a quarter warp's 8 chunks
    cover 128 bytes: conflict-free in either lane order). A job is ((read, along), planes)
    with a reader of `rows_of` or `cols_of`: thread t takes chunks q = t + 256 i at row
    q % 64, chunk q / 64 ("rows") or row q / (n / 8), chunk q % (n / 8) ("cols")."""
    held = []
    for (read, along), pl in jobs:
        per = pl.n // 8
        for i in range(C * per // 256):
            q = T.tid.x + 256 * i
            if along == "rows":
                row, col = q & (C - 1), (q >> 6) << 3
            else:
                row, col = q // per, (q % per) << 3
            held.append((pl, row, col, read(row, col)))
    T.ptx.bar.sync(0)
    for pl, row, col, xs in held:
        pl.store_chunk(row, col, xs)


def product(ln, lanes, acc, a, b, n0s, ksteps):
    """acc[j] += A[m0 .., :] B[:, n0s[j] ..] over 16 ksteps columns: kda_bwd_pieces_tc._product
    on fragments read from planes, the same mma in the same order (per k-step the A fragment,
    then per n-tile lo hi, hi lo, hi hi), so the sums are bit-identical. `a(s)` -> the A
    fragment (hi, lo) of k-step s; `b(s, n0)` -> the B fragments of n-tiles n0, n0 + 8.
    `ln.roll` (ROLL >= 1): a runtime loop (``.pragma "nounroll"``), one body instead of ksteps."""
    with T.range(ksteps, unroll=1 if ln.roll else None) as s:
        ahi, alo = a(s)
        for p in range(len(n0s) // 2):
            bhi, blo = b(s, n0s[2 * p])
            for o in range(2):
                j = 2 * p + o
                bh = bhi[2 * o:2 * o + 2]
                bl = None if blo is None else blo[2 * o:2 * o + 2]
                if alo is not None:
                    mma(acc[j], alo, bh)
                if bl is not None:
                    mma(acc[j], ahi, bl)
                mma(acc[j], ahi, bh)


# --- the kernel --------------------------------------------------------------------------------

class _Operands:
    """The walks' planes in kda_bwd_reverse._Smem's slots after the prep (every [64, 129] f32
    slot is 258 lines of 128 bytes, so all start on a line): KE and KL in place; dO (exact)
    in the first 16 KB of its slot, Tb = T Diag(beta) in the second 16 KB; T and M in place;
    W, then X, in the G slot (sm.r); U in the P slot (sm.dlt); V (exact) in the QE slot once
    U is formed."""

    def __init__(self, sm):
        self.ke = Planes(sm.ke.ptr(), 128)
        self.kl = Planes(sm.kl_.ptr(), 128)
        self.do = Planes(sm.do.ptr(), 128, exact=True)
        self.tb = Planes(sm.do.ptr() + C * 128 * 2, 64)
        self.t = Planes(sm.t.ptr(), 64)
        self.m = Planes(sm.m.ptr(), 64)
        self.r = Planes(sm.r.ptr(), 128)
        self.u = Planes(sm.dlt.ptr(), 128)
        self.v = Planes(sm.qe.ptr(), 128, exact=True)


def split_operands(sm, op):
    """The prep's f32 operands into planes, two rounds (each thread holds 64 then 80 f32
    across its round's barrier), the last store published by a third barrier."""
    convert([(rows_of(sm.ke), op.ke), (rows_of(sm.kl_), op.kl)])
    convert([(rows_of(sm.do), op.do), (cols_of(sm.t, lambda c: sm.beta.at(c)), op.tb),
             (cols_of(sm.t), op.t), (cols_of(sm.m), op.m)])
    T.ptx.bar.sync(0)


def _store(ln, n0s, acc, pl, fn=None):
    """The warp's accumulators (fn(row, col, x) applied to each element if given) into the
    planes, a ``st.shared.b32`` a pair and plane (a warp's 8 rows x 4 words of a chunk land on
    8 distinct swizzled chunks: conflict-free)."""
    for j, n0 in enumerate(n0s):
        for h in range(2):
            row, col = ln.m0 + ln.g + 8 * h, n0 + 2 * ln.t
            xs = [acc[j][2 * h + e] for e in range(2)]
            if fn is not None:
                xs = [fn(row, col + e, x) for e, x in enumerate(xs)]
            pl.store_pair(row, col, *xs)


def _mul(ln, lanes, a, b, at=False, rows=0):
    """A B ([C or K, C] x [C, K], contraction over the chunk's 64 rows) for the warp's m-tile
    `rows` further down (an int, or a runtime loop's register) and its 8 n-tiles: A from
    planes `a` (row-major, or `at`: a's transpose), B from planes `b` (k-major)."""
    lr = ln if isinstance(rows, int) and not rows else ln.below(rows)
    wide = ln.cols(K)
    acc = TC._acc(len(wide))
    afrag = (lambda s: a.at(lanes, lr.m0, s << 4)) if at else (
        lambda s: a.a(lanes, lr.m0, s << 4))
    product(lr, lanes, acc, afrag, lambda s, n0: b.b(lanes, s << 4, n0), wide, C // 16)
    return lr, wide, acc


def _n_and_b(ln, lanes, hc, nfrag, bt, left, right, y, bleft):
    """N = -left^T right as kda_bwd_chain's fragment words; B^T = y^T bleft (y exact), each
    in its two 64-row halves; `ln.roll` >= 2 (ROLL=2): the halves two trips of a runtime loop
    (`trips`: the same words)."""
    for half, _ in trips(2, 1, ln.roll >= 2):
        lr, _, acc = _mul(ln, lanes, left, right, at=True, rows=half * C)
        PT.n_words(lr, hc, nfrag, acc)
    for half, _ in trips(2, 1, ln.roll >= 2):
        lr, wide, acc = _mul(ln, lanes, y, bleft, at=True, rows=half * C)
        PT.bt_rows(lr, hc, bt, wide, acc)


def reverse_walk(sm, op, ln, lanes, hc, nfrag, bt, after_u=None):
    """W = Tb KE (planes into the G slot); U = QE - M W (QE still f32; planes into the P
    slot); N = -W^T KL; B^T = dO^T U: kda_bwd_prep_tc.walk's FORWARD=0 products. `after_u()`
    runs once U's barrier has freed QE's slot (VSTAGE=2: V's copies issued there)."""
    with T.iket.range("w"):
        _, wide, acc = _mul(ln, lanes, op.tb, op.ke)
        _store(ln, wide, acc, op.r)
    T.ptx.bar.sync(0)
    with T.iket.range("u"):
        _, wide, acc = _mul(ln, lanes, op.m, op.r)
        _store(ln, wide, acc, op.u,
               lambda r, c, x: T.ptx.ld.shared.f32(sm.qe.at(r, c)) - x)
    T.ptx.bar.sync(0)
    if after_u is not None:
        after_u()
    with T.iket.range("n_b"):
        _n_and_b(ln, lanes, hc, nfrag, bt, op.r, op.kl, op.do, op.u)


def stage_v(ck, v, pl):
    """V of the chunk as an exact bf16 plane (rows past the sequence zero): thread t, column
    t % 128, rows 32 (t / 128) ..; a warp's 32 columns of one row are 64 bytes of one swizzled
    line (one wavefront a ``st.shared.b16``). The bf16 input moves without conversion."""
    col = T.tid.x & (K - 1)
    i0 = (T.tid.x >> 7) * (C // 2)
    with T.range(C // 2 // P2.UNROLL) as i8:
        for u in range(P2.UNROLL):
            i = i0 + i8 * P2.UNROLL + u
            x = T.ptx.ld.global_.nc.b16(v.at(ck.row(i) + col))
            T.ptx.st.shared.b16(pl.base + Planes.offset(i, col),
                                T.ptx.selp.b16(x, 0, i < ck.nv))


def _v_chunks():
    """(row, first column) of this thread's 16-byte chunks of V's [C, K] bf16 tile: chunks
    t + 256 j, 16 a row."""
    out = []
    for j in range(C * K // 8 // 256):
        q_ = T.tid.x + 256 * j
        out.append((q_ >> 4, (q_ & 15) << 3))
    return out


def stage_v_chunks(ck, v, pl):
    """`stage_v` by 16-byte chunks: thread t takes chunks q = t + 256 j (j < 4) of the chunk's
    1,024 (row q / 16, columns 8 (q % 16) ..), all four ``ld.global.nc.v4.b32`` in flight
    before any store, and stores each with one ``st.shared.v4.b32`` (a quarter warp's 8 chunks
    are one 128-byte line: conflict-free); rows past the sequence zero. The same plane bytes.
    Why: `stage_v` issues 32 two-byte loads a thread in rounds of 8, four dependent global
    round trips (session 36's profile: 3.84 us, 8% of a CTA, for 16 KB)."""
    held = [(row, col, T.ptx.ld.global_.nc.v4.b32(v.at(ck.row(row) + col)))
            for row, col in _v_chunks()]
    for row, col, words in held:
        T.ptx.st.shared.v4.b32(pl.base + Planes.offset(row, col),
                               [T.ptx.selp.b32(w, 0, row < ck.nv) for w in words])


def stage_v_async(ck, v, pl):
    """`stage_v_chunks` by ``cp.async.cg`` (16 bytes a copy, the thread's four in one commit
    group; rows past the sequence zero-filled: src-size 0): issued as soon as QE's slot is free
    (after U), so the copies land while N and B^T are multiplied; the caller waits for the
    group before the barrier that publishes V. The same plane bytes."""
    for row, col in _v_chunks():
        T.ptx.cp.async_.cg.shared.global_(pl.base + Planes.offset(row, col),
                                          v.at(ck.row(row) + col), 16,
                                          T.ptx.selp.u32(16, 0, row < ck.nv))
    T.ptx.cp.async_.commit_group()


# columns of `decayed_chunks`' loop trip: a warp's 8 rows x 4 chunks of 8 channels
SLICE = 32


def decayed_chunks(sm, ck, q, k, do, ahead=False):
    """kda_bwd_reverse._decayed by 16-byte loads: KE = k^ 2^G, QE = qs 2^G, KL = k^ 2^(G_C - G)
    and dO staged (rows past the sequence zero), the same products of the same words, and
    exp(G_C). Thread t takes rows 8 (t / 32) + t % 8 and the 8 channels 8 ((t % 32) / 8) +
    32 j .. of each of the K / 32 trips j of a runtime loop: one ``ld.global.nc.v4.b32`` of
    k, q and dO each a trip (a quarter warp's rows are 64 contiguous bytes of each row), and a
    warp's 32 lanes store each of their 8 elements at banks (row + channel) mod 32, all
    distinct. `ahead` (DECAY=4): the next trip's loads issued before this trip's arithmetic,
    held in registers across the loop's back edge. Why: `_decayed` loads two bytes an element
    in 8 dependent rounds of 8 rows (session 36's profile, an H100: 6.91 us, 14% of a CTA, for
    48 KB; V's staging by 16-byte loads went from 3.84 to 2.05 us), and unrolling it further
    grew the loop body until every phase slowed (DECAY=2)."""
    t = T.tid.x
    with T.if_(t < K):
        T.ptx.st.shared.f32(sm.eg.at(t), T.ptx.ex2.approx.f32(
            T.ptx.ld.shared.f32(sm.g.at(C - 1, t))))
    lane = t & 31
    row = ((t >> 5) << 3) + (lane & 7)
    sub = (lane >> 3) << 3
    src = ck.row(row) + sub
    rk = T.ptx.ld.shared.f32(sm.rn.at(0, row))
    rq = T.ptx.ld.shared.f32(sm.rn.at(1, row))
    valid = row < ck.nv

    def loads(j):
        return [T.ptx.ld.global_.nc.v4.b32(p.at(src + j * SLICE)) for p in (k, q, do)]

    def trip(j, words):
        col = j * SLICE + sub
        kx, qx, dx = ([x for w in ws for x in unpack(w)] for ws in words)
        for e in range(8):
            c = col + e
            G = T.ptx.ld.shared.f32(sm.g.at(row, c))
            eg = T.ptx.ex2.approx.f32(G)
            kn, qn = kx[e] * rk, qx[e] * rq
            T.ptx.st.shared.f32(sm.ke.at(row, c), kn * eg)
            T.ptx.st.shared.f32(sm.qe.at(row, c), qn * eg)
            GC = T.ptx.ld.shared.f32(sm.g.at(C - 1, c))
            T.ptx.st.shared.f32(sm.kl_.at(row, c), kn * T.ptx.ex2.approx.f32(GC - G))
            T.ptx.st.shared.f32(sm.do.at(row, c), T.ptx.selp.f32(dx[e], 0.0, valid))

    trips_ = K // SLICE
    if not ahead:
        with T.range(trips_, unroll=1) as j:
            trip(j, loads(j))
        return
    held = [[T.reg(T.b32, init=w) for w in ws] for ws in loads(0)]
    with T.range(trips_, unroll=1) as j:
        nxt = loads((j + 1) & (trips_ - 1))     # the last trip's reload of trip 0 is unused
        trip(j, held)
        for hs, ws in zip(held, nxt):
            for h, w in zip(hs, ws):
                h.set(w)


def _half_row(ck, t):
    """Element offset of thread t's 128-byte line of a [B, T, H, 128] bf16 tensor in the
    prefetches: row (t / 2) % C of the chunk at `ck.row` (clamped to the sequence), half t % 2."""
    return ck.row((t >> 1) & (C - 1)) + ((t & 1) << 6)


def prefetch_decayed(ck, q, k, do):
    """``prefetch.global.L2`` of every 128-byte line the decayed operands' phase reads: the
    chunk's 64 rows of k and dO (threads 0..127) and of q (threads 128..255), 256 bytes a
    row: thread t row (t / 2) % 64, line t % 2, at `ck.row` (rows past the sequence clamped
    as the loads clamp them), so each address lies inside its tensor. Issued as the gate
    phase ends (kda_bwd_prep3g PREFETCH=1), ~8.7 us before the decayed phase (pairs and the
    inverse between). Why: the phase stayed at 5.63 us with 16-byte loads, a trip ahead or
    not (session 37, an H100, T8192 H16), and piece 3's elementwise terms went from 12.8 to
    7.2 us with their lines prefetched one phase ahead (kda_bwd_local_lg PREFETCH=2)."""
    t = T.tid.x
    off = _half_row(ck, t)
    first = t < 2 * C
    T.ptx.prefetch.global_.L2(k.at(off), pred=first)
    T.ptx.prefetch.global_.L2(do.at(off), pred=first)
    T.ptx.prefetch.global_.L2(q.at(off), pred=~first)


def prefetch_next_rows(chunk_tok, chunk_rows, q, k, g_raw, stride):
    """``prefetch.global.L2`` of every line the `rows` phase of CTA hc + `stride` will copy
    (kda_bwd_prep3g NEXT = `stride`, the CTAs resident at once: one an SM), hc = ctaid.y H +
    ctaid.x this CTA's (chunk, head) and launch order: the 64 rows of q, k and g_raw of its
    chunk and head at `_Chunk.row` (clamped as kda_bwd_local.StagedRows.stage clamps them),
    256 bytes a row: threads 0..127 row t / 2, line t % 2 of q and of g_raw, threads 128..255
    of k; none past the grid's last CTA (the chunk index clamped so the chunk map's loads stay
    inside it). Issued before the forward walk, ~7 us before this CTA ends and the next wave's
    starts. Why: `rows` is the launch's first phase (2.82 us of a 43.26 us CTA: session 37, an
    H100, T8192 H16), its 48 KB from HBM with nothing of its own CTA to hide them behind;
    kda_bwd_pieces_ld NEXT is the same."""
    t = T.tid.x
    nxt, ok = PTL.next_wave(stride)
    ck = PTL.chunk_of(chunk_tok, chunk_rows, nxt)
    off = _half_row(ck, t)
    first = t < 2 * C
    T.ptx.prefetch.global_.L2(q.at(off), pred=ok & first)
    T.ptx.prefetch.global_.L2(g_raw.at(off), pred=ok & first)
    T.ptx.prefetch.global_.L2(k.at(off), pred=ok & ~first)


def _gate_then_prefetch(gate, do):
    """The gate phase `gate` (kda_bwd_chain_prep.prep's signature), then `prefetch_decayed`
    (inside the gate's iket range, before the barrier that ends it)."""
    def run(sm, ck, q, k, g_raw, A_log, dt_bias, rows):
        gate(sm, ck, q, k, g_raw, A_log, dt_bias, rows)
        prefetch_decayed(ck, q, k, do)
    return run


def forward_walk(sm, op, ln, lanes, hc, nfrag, bt):
    """X = Diag(beta) T^T KL (planes into the G slot, after the reverse walk's last read of
    W); N = -X^T KE; B^T = V^T X: kda_bwd_prep_tc.walk's FORWARD=1 products. The barrier after
    X also publishes V."""
    with T.iket.range("x"):
        _, wide, acc = _mul(ln, lanes, op.t, op.kl, at=True)
        _store(ln, wide, acc, op.r, lambda r, c, x: x * T.ptx.ld.shared.f32(sm.beta.at(r)))
    T.ptx.bar.sync(0)
    with T.iket.range("n_b_f"):
        _n_and_b(ln, lanes, hc, nfrag, bt, op.r, op.ke, op.v, op.r)


@T.kernel(grid=PR._grid, block=256)
def kda_bwd_prep3(q: T.gptr[T.bf16], k: T.gptr[T.bf16], g_raw: T.gptr[T.bf16],
                  v: T.gptr[T.bf16], beta: T.gptr[T.bf16], A_log: T.gptr[T.f32],
                  dt_bias: T.gptr[T.f32], do: T.gptr[T.bf16], chunk_tok: T.gptr[T.s32],
                  chunk_rows: T.gptr[T.s32], nfrag_f: T.gptr[T.u32], bt_f: T.gptr[T.f32],
                  nfrag: T.gptr[T.u32], bt: T.gptr[T.f32], eg: T.gptr[T.f32],
                  PREP: T.const = 2):
    _both_walks(q, k, g_raw, v, beta, A_log, dt_bias, do, chunk_tok, chunk_rows, nfrag_f, bt_f,
                nfrag, bt, eg, PREP)


@T.kernel(grid=PR._grid, block=256)
def kda_bwd_prep3s(q: T.gptr[T.bf16], k: T.gptr[T.bf16], g_raw: T.gptr[T.bf16],
                   v: T.gptr[T.bf16], beta: T.gptr[T.bf16], A_log: T.gptr[T.f32],
                   dt_bias: T.gptr[T.f32], do: T.gptr[T.bf16], chunk_tok: T.gptr[T.s32],
                   chunk_rows: T.gptr[T.s32], nfrag_f: T.gptr[T.u32], bt_f: T.gptr[T.f32],
                   nfrag: T.gptr[T.u32], bt: T.gptr[T.f32], eg: T.gptr[T.f32],
                   ptile: T.gptr[T.f32], PREP: T.const = 2):
    """kda_bwd_prep3, and the prep's tiles piece 2c reads stored into `ptile`
    (kda_bwd_prep_tiles: plan "tc4" of kda_fwd_bwd computes the prep once for both)."""
    _both_walks(q, k, g_raw, v, beta, A_log, dt_bias, do, chunk_tok, chunk_rows, nfrag_f, bt_f,
                nfrag, bt, eg, PREP, ptile)


@T.kernel(grid=PR._grid, block=256)
def kda_bwd_prep3g(q: T.gptr[T.bf16], k: T.gptr[T.bf16], g_raw: T.gptr[T.bf16],
                   v: T.gptr[T.bf16], beta: T.gptr[T.bf16], A_log: T.gptr[T.f32],
                   dt_bias: T.gptr[T.f32], do: T.gptr[T.bf16], chunk_tok: T.gptr[T.s32],
                   chunk_rows: T.gptr[T.s32], nfrag_f: T.gptr[T.u32], bt_f: T.gptr[T.f32],
                   nfrag: T.gptr[T.u32], bt: T.gptr[T.f32], eg: T.gptr[T.f32],
                   ptile: T.gptr[T.f32], gtile: T.gptr[T.f32], PREP: T.const = 2,
                   STAGE: T.const = 0, IMG: T.const = 0,
                   ROLL: T.const.one_of(0, 1, 2, 3) = 0, GATE: T.const.one_of(0, 1) = 0,
                   DECAY: T.const.one_of(0, 1, 2, 3, 4) = 0,
                   VSTAGE: T.const.one_of(0, 1, 2) = 0, PREFETCH: T.const.one_of(0, 1) = 0,
                   NEXT: T.const = 0, PSTORE: T.const.one_of(0, 1) = 0):
    """kda_bwd_prep3s, and the norms' and gate's tiles piece 3 reads copied into `gtile` by two
    bulk copies while P, M and T are computed (kda_bwd_prep_tiles.GateStore: plan "tc6" of
    kda_fwd_bwd computes them once for piece 3 too). STAGE=1: the norms and gate read q, k and
    g_raw staged in shared memory first (kda_bwd_local.StagedRows, in P's tile and M: plan
    "tc7"), the same words. IMG=1: `ptile` in kda_bwd_prep_tiles' image layout (plan "tc8",
    whose pieces launch loads it by bulk copies). ROLL=1: the walks' products and (with
    STAGE=1) the gate's rows as runtime loops (plan "tc10"): session 32's ncu profile put 40%
    of this launch's warp samples on instruction fetch (`no_instruction`) in its ~180 KB of
    straight-line code;
    the same instructions in the same order, so the same words. Measured (session 32, an H100,
    T8192 H96): 6.74 ms against 8.93. ROLL=2 (plan "tc12"): the norms' row dots, the tiles'
    store and the walks' two halves rolled too (112 KB against ROLL=1's 136): measured
    (session 33, an H100, plan "tc14" against "tc13") 4.90 ms against ROLL=1's 6.73. ROLL=3
    (plan "tc15"): T's blocked inverse too (kda_bwd_pieces_tc._blocked_inverse_rolled: 93 KB),
    the same words; measured (session 34, an H100, T8192 H96) 5.07 ms against ROLL=2's 4.88:
    below ~110 KB the code's size no longer paid (the likely cost, not profiled: the rolled
    substitution's longer dependent chains). Kept as a measured variant, not the default.
    GATE=1 (with STAGE=1): the gate's rows on all eight warps, each half of the CTA taking
    half the rows (kda_bwd_local._gate_halves), the same words. DECAY=1, 2: the decayed
    operands' phase (kda_bwd_reverse._decayed) with 16, 32 rows' global loads in flight a loop
    iteration instead of 8 (session 35's profile: 5.89 us, 12% of a CTA, for 64 rows' loads of
    k, q and dO in 8 dependent rounds), the same arithmetic; the loop body grows with them
    (SASS 117.9 KB with GATE=1, 139.9 KB at DECAY=2); measured (session 36, an H100, T8192
    H96) DECAY=2 1.40x slower than DECAY=0 in the prep launch, every phase slower: kept as a
    measured variant. DECAY=3: the phase by 16-byte loads in a runtime loop of four trips
    (`decayed_chunks`), DECAY=4 with each trip's loads issued a trip ahead; the same words.
    VSTAGE=1: V staged by 16-byte chunks (`stage_v_chunks`), the same
    plane bytes; VSTAGE=2: by ``cp.async`` issued after U, landing during N and B^T
    (`stage_v_async`), the same plane bytes. PREFETCH=1: the decayed phase's lines of k, q and
    dO prefetched into L2 as the gate phase ends (`prefetch_decayed`), hints only: the same
    words. NEXT=S (STAGE=1; S the CTAs resident at once, 132 on an H100 or H200): the rows
    the `rows` phase of CTA hc + S will copy prefetched before the forward walk
    (`prefetch_next_rows`); hints too. PSTORE=1: P, the strict-lower pairs its `pairs` phase
    computed (kept in sP: nothing after the inverse writes it), stored in `gtile` after the
    gate's words (kda_bwd_prep_tiles.GateStore.store_p, GATE_P0: a (chunk, head) then takes
    GATE_WORDS_P) for piece 3 to load instead of computing it again (kda_bwd_local_lg
    PLOAD=1, plan "tc36"): 16 KB more a chunk written. Why: session 37's iket profile (an
    H100, T8192 H16) put piece 3's `pairs` at 5.12 of a 39.17 us CTA, the same product the
    prep has already made. Measured (session 38, an H100, T8192 H96): this launch ~1.020x
    PSTORE=0's time, piece 3 0.939x, the plan 0.988x."""
    if NEXT < 0 or (NEXT and not STAGE):
        raise ValueError(f"kda_bwd_prep3g: NEXT must be a CTA count >= 0 and needs STAGE=1 "
                         f"(the staged rows it prefetches), got NEXT={NEXT}, STAGE={STAGE}")
    if GATE and not STAGE:   # the plans bind constants without a suite's constraints
        raise ValueError("kda_bwd_prep3g: GATE=1 reads the staged rows: it needs STAGE=1")
    _both_walks(q, k, g_raw, v, beta, A_log, dt_bias, do, chunk_tok, chunk_rows, nfrag_f, bt_f,
                nfrag, bt, eg, PREP, ptile, gtile, STAGE, IMG, ROLL, GATE, DECAY, VSTAGE,
                PREFETCH, NEXT, PSTORE)


def _gate_phase(GATE, PREFETCH, do):
    """The gate phase of GATE (None: kda_bwd_local._gate as it is), and PREFETCH=1's
    prefetches after it."""
    gate = BL._gate_halves if GATE else (BL._gate if PREFETCH else None)
    return _gate_then_prefetch(gate, do) if PREFETCH else gate


def _decayed_phase(DECAY):
    """The decayed operands' phase of DECAY (None: kda_bwd_reverse._decayed as it is)."""
    if DECAY in (1, 2):
        return lambda sm, ck, q, k, y: BR._decayed(sm, ck, q, k, y, (16, 32)[DECAY - 1])
    if DECAY in (3, 4):
        return lambda sm, ck, q, k, y: decayed_chunks(sm, ck, q, k, y, ahead=DECAY == 4)
    return None


def _both_walks(q, k, g_raw, v, beta, A_log, dt_bias, do, chunk_tok, chunk_rows, nfrag_f, bt_f,
                nfrag, bt, eg, PREP, ptile=None, gtile=None, STAGE=0, IMG=0, ROLL=0, GATE=0,
                DECAY=0, VSTAGE=0, PREFETCH=0, NEXT=0, PSTORE=0):
    """The module docstring's phases; with `ptile`, the prep's tiles stored there first (its
    last barrier has published them; the split's first round only reads them before its own
    barrier); with `gtile`, the gate's tiles copied out during the prep; with STAGE=1, the
    raw rows staged for the norms and gate."""
    sm, ck = PR.chunk_cta(chunk_tok, chunk_rows)
    hc = ck.c * ck.H + ck.h
    gates = None if gtile is None else PTL.GateStore(hc, gtile, p=bool(PSTORE))
    rows = (BL.StagedRows({"q": (sm.p, 0), "k": (sm.p, C * K * 2), "g": (sm.m, 0)},
                          roll=ROLL) if STAGE else None)
    TC.prep(sm, ck, q, k, g_raw, beta, A_log, dt_bias, do, PREP, gates, rows,
            roll=ROLL >= 3, gate=_gate_phase(GATE, PREFETCH, do),
            decayed=_decayed_phase(DECAY))                     # dO in sm.do
    if ptile is not None:
        with T.iket.range("tiles_store"):
            PTL.store(sm, hc, ptile, image=bool(IMG), roll=ROLL >= 2)
            if PSTORE:
                gates.store_p(sm, roll=ROLL >= 2)
    op = _Operands(sm)
    with T.iket.range("split"):
        split_operands(sm, op)
    ln, lanes = TC._Lane(roll=ROLL), Lanes()

    def v_copies():
        with T.iket.range("stage_v"):
            stage_v_async(ck, v, op.v)

    # its iket ranges: w, u, (VSTAGE=2: stage_v), n_b
    reverse_walk(sm, op, ln, lanes, hc, nfrag, bt, v_copies if VSTAGE == 2 else None)
    if VSTAGE == 2:
        with T.iket.range("v_wait"):
            T.ptx.cp.async_.wait_group(0)   # the barrier below publishes V
    T.ptx.bar.sync(0)           # W (G slot) and QE's slot read for the last time
    if VSTAGE < 2:
        with T.iket.range("stage_v"):
            (stage_v_chunks if VSTAGE else stage_v)(ck, v, op.v)
    if NEXT:
        with T.iket.range("next"):
            prefetch_next_rows(chunk_tok, chunk_rows, q, k, g_raw, NEXT)
    forward_walk(sm, op, ln, lanes, hc, nfrag_f, bt_f)   # x, n_b_f
    with T.if_(T.tid.x < K):
        d = T.tid.x
        T.ptx.st.global_.f32(eg.at(hc * K + d), T.ptx.ld.shared.f32(sm.eg.at(d)))


# --- inputs, reference, cases: kda_bwd_prep2's ---------------------------------------------------

OUTPUTS = P2.OUTPUTS
inputs = P2.inputs
reference = P2.reference
timing_inputs = P2.timing_inputs
constraints = P2.constraints
_bytes = P2._bytes
_flops = P2._flops          # the same mma.sync, read from planes
TOLERANCE = P2.TOLERANCE

SUITE = T.suite(
    kda_bwd_prep3, inputs=inputs, reference=reference, outputs=["bt_f", "bt", "eg"],
    tolerance=TOLERANCE, constraints=constraints, bytes=_bytes, flops=_flops,
    flops_dtype="bf16", cases=list(P2.SUITE.cases))

# timing only (no reference), tagged "timing": kda_bwd_prep2's (T8192 at H96 and H64, the public
# pack); `benchmarks/kda_bench.sh prep3` times them beside kda_bwd_prep2 in one job a shape
SUITE_TIMING = T.suite(
    kda_bwd_prep3, inputs=timing_inputs, outputs=["bt_f", "bt", "eg"], constraints=constraints,
    bytes=_bytes, flops=_flops, flops_dtype="bf16", cases=list(P2.SUITE_TIMING.cases))


def g_timing_inputs(rng, B, T_, H, lens=None, gate="mixed", PSTORE=0):
    """kda_bwd_prep3g's timing inputs: kda_bwd_prep2's, and zeroed `ptile` and `gtile` (with
    P's words for PSTORE=1)."""
    x = timing_inputs(rng, B, T_, H, lens, gate)
    n = len(x["chunk_tok"])
    return dict(x, **PTL.outputs(H, n), **PTL.gate_outputs(H, n, p=bool(PSTORE)))


# plan "tc7"'s prep launch alone (STAGE=1) at T8192 H64, timing only: for `tirxh profile`
# (ncu), as kda_bwd_local_tc.SUITE_LG_TIMING; `tc19_t8192_h16`: plan "tc19"'s prep (ROLL=2)
# at H16 (`tc20_` to `tc26_`, `tc31_`, `tc35_`, `tc36_`: those plans'): 2,048 CTAs, ~15 waves
# an H100, a CTA's phases as at H96 and its inputs a quarter of H64's, so an iket profile
# builds and uploads in seconds
SUITE_G_TIMING = T.suite(
    kda_bwd_prep3g, inputs=g_timing_inputs, outputs=["bt_f", "bt", "eg"],
    constraints=constraints, bytes=_bytes, flops=_flops, flops_dtype="bf16",
    cases=[T.case(c.name, small=False, tags=c.tags, STAGE=1, **c.params)
           for c in P2.SUITE_TIMING.cases if c.name == "t8192_h64"]
    + [T.case(f"tc{p}_t8192_h16", B=1, T_=8192, H=16, small=False, tags=("timing",),
              STAGE=1, ROLL=2, **extra)
       for p, extra in ((19, {}), (20, dict(GATE=1)), (21, dict(GATE=1, DECAY=1)),
                        (22, dict(GATE=1, DECAY=2)), (23, dict(GATE=1, VSTAGE=1)),
                        (24, dict(GATE=1, VSTAGE=2)), (25, dict(GATE=1, VSTAGE=2, DECAY=3)),
                        (26, dict(GATE=1, VSTAGE=2, DECAY=4)),
                        (31, dict(GATE=1, VSTAGE=2, DECAY=3, PREFETCH=1)),
                        (35, dict(GATE=1, VSTAGE=2, DECAY=3, PREFETCH=1, NEXT=132)),
                        (36, dict(GATE=1, VSTAGE=2, DECAY=3, PREFETCH=1, NEXT=132,
                                  PSTORE=1)))])
