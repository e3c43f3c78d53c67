"""Kimi Delta Attention backward, piece 2c of the chain split with its products on tensor cores
(issue 18; docs/TUNING.md "Forward + backward at 3x"): the same inputs and outputs as
kda_bwd_chain_pieces (dv and the pieces piece 3 reads, every chunk at once, one CTA per (head,
chunk), from the chunk's S0 and dS1), so kda_fwd_bwd's plan can swap it in (plan "tc").

Math (kda_bwd_split.chunk_pieces), per chunk and head, with the chunk's prep,

    R = V - KE S0,  Delta = Tb R,  dDelta = M^T dO + KL dS1,  dR = Tb^T dDelta  (= dv)
    dqe = dO S0^T, dke = -dR S0^T, dkl = Delta dS1^T, dm = lower(dO Delta^T),
    dtb = lower(dDelta R^T), dgs = exp(G_C) rowsum(dS1 o S0)

What changes against kda_bwd_chain_pieces: the prep (norms, gate, P, M, the inverse T, KE, QE,
KL, dO staged) is kda_bwd_reverse's f32 phases, unchanged, into the same f32 shared tiles; the
nine products after it are ``mma.sync.m16n8k16`` (bf16 operands, f32 accumulators) instead of
f32 FMAs with one ``ld.shared`` each. Every operand is split into bf16 hi + lo (hi =
``cvt.rn.bf16x2.f32`` of the f32 pair, lo = the same of what hi leaves) and each product is
three mma (lo hi + hi lo + hi hi; lo lo is ~2^-16 of the sum), two where one operand is dO
(bf16 input values, exact: its lo is zero): benchmarks/kda_precision.py
shows plain bf16 operands in piece 2 missing the public backward rule by up to 27x (dk) and
170x (dbeta), and every operand split meeting it with >= 20x to spare. Operands come straight
from the f32 tiles (``ld.shared.f32`` pairs, stride 129) and, for S0 and dS1, from global memory
(``ld.global.f32``, L1/L2), split in registers as they are loaded: no bf16 copies to stage.

Work split (products): warp w takes m-tile w % 4 (16 rows) of a [C, 128] output and the
column half w / 4 (8 n-tiles of 8: 32 accumulators), or 4 n-tiles of a [C, C] output; the
contraction runs in a device loop of 16-wide k-steps (A fragment once a k-step, B fragments per
n-tile). dgs: warp w, key rows 16 w .. 16 w + 15, a row's S0 and dS1 read as one
``ld.global.v4.f32`` per lane and summed by a ``shfl.sync.bfly`` butterfly.

Phases (``bar.sync`` between): prep -> R (into the G tile), dgs -> Delta (into the P tile),
dqe -> dkl, dm, then dDelta into registers (Delta still in the P tile) -> dDelta into the P tile
-> dR (dv stored; registers), dtb -> dR into the R tile -> dke.

PREP (also kda_bwd_prep_tc's): 0 runs the prep's f32 phases as above; 1 computes its P and M
as split mma too (`_pairs_tc`: the block factor on KD^T's B fragment, one split B for both);
2 also T (`_diag_inverse`: the four 16 x 16 diagonal inverses in f32 at once; `_inverse_tc`:
the blocks below the diagonal as split mma, warp b the column b), which shortens the f32
inverse's serial chain (docs/TUNING.md "Forward + backward at 3x").

Inputs and outputs: kda_bwd_chain_pieces's (q, k, g_raw, v, do [B, T, H, 128] bf16; beta [B,
T, H] bf16; A_log [H], dt_bias [H, K] f32; chunk_tok, chunk_rows [chunks] s32; s0, ds1 [chunks,
H, K, V] f32 -> dv [B, T, H, V]; dqe, dke, dkl [chunks, H, C, K]; dm, dtb [chunks, H, C, C];
dgs [chunks, H, K] f32).

TF32 (session 12, branch kdatf32): 0 the split products above; 1 the nine products single-pass
tf32 (``mma.sync.m16n8k8`` .tf32, each operand element loaded once and rounded with
``cvt.rna.tf32.f32``: `_product_tf32`; the prep's products, PREP=1 and 2, stay split). It meets
the public backward rule only at unit input scale (v, h0 ~ N(0, 1): `inputs(unit=True)`,
SUITE_TF32), not at kda_bwd's scale c = 32-128 (docs/PERFORMANCE.md "Session 12, branch
kdaprec", "Session 12, branch kdatf32").

kda_bwd_pieces_ld (session 28, plan "tc4" of kda_fwd_bwd): the same products with the prep's
tiles (KE, KL, M, T, beta, exp(G_C)) loaded from `ptile`, where kda_bwd_prep3s stored them
(kda_bwd_prep_tiles), and dO staged, instead of the prep computed a second time: bit-identical
outputs (tests/zoo/test_kda_bwd_prep_tiles.py), no q, k, g_raw, beta read. With FRAGS=1
(session 33, plan "tc13") S0 and dS1 come as the chains' split fragments (kda_bwd_chain
FRAGS=1): one ``ld.global.v4.b32`` gives a B fragment pair's hi and lo words, and the products
of S0^T and dS1^T turn each word into the transposed block's by ``movmatrix.trans``; the
outputs are FRAGS=0's bit for bit but dgs (its sum from hi + lo: `_dgs_split`). With PLANES=1
(session 34, plan "tc16") the G and P tiles hold R, Delta, dDelta and dR as split bf16 planes
(kda_bwd_prep3.Planes, stored split by the warp that computes them) whose fragments the
products read by ``ldmatrix.x4`` (`_Plane`, `_Slots`), instead of every warp loading f32
elements and splitting them again a k-step; PLANES=2 (plan "tc17") also keeps the products'
k-steps runtime loops; PLANES=3 and 4 (plans "tc18", "tc19") every shared operand, the loaded
tiles split once (kda_bwd_prep3.split_operands), 3 rolled and 4 unrolled. All bit for bit
PLANES=0. Measured (session 34, an H100, T8192 H96, inside the plans): PLANES=0 5.92 ms, 1
4.35, 2 5.17, 3 4.87, 4 3.84.

Tags: linear-attention, backward, chunked, fused-gate, mma-sync, split-bf16, varlen
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import numpy as np

import tirxh.lang as T

# the zoo is a directory of kernel files, not a package (see kda_fwd.py)
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
import kda_bwd as BW  # noqa: E402 - after the path that finds it
import kda_bwd_chain as CH  # noqa: E402
import kda_bwd_chain_pieces as PC  # noqa: E402
import kda_bwd_chain_prep as PR  # noqa: E402
import kda_bwd_local as BL  # noqa: E402
import kda_bwd_prep_tiles as PTL  # noqa: E402
import kda_bwd_reverse as BR  # noqa: E402
import kda_ref as R  # noqa: E402
from kda_chunk import C, K, V, Lanes, mma, pack, unpack  # noqa: E402

SK = BR.SK               # row stride (f32 words) of the prep's [C, 128] tiles

TAGS = ("linear-attention", "backward", "chunked", "fused-gate", "mma-sync", "split-bf16",
        "varlen")

FULL = 0xFFFFFFFF
A_PAIRS = [(0, 0), (8, 0), (0, 8), (8, 8)]     # an A fragment's f32 pairs (rows g, g + 8)
B_PAIRS = [(0, 0), (8, 0)]                     # a B fragment's (k rows 2t, 2t + 8)


# --- split-operand products from f32 sources ----------------------------------------------------

def _split2(x0, x1):
    """(hi, lo) bf16x2 words of the f32 pair: hi = rn(x), lo = rn(x - hi) (``cvt.rn.bf16x2``,
    ``shl``/``and``, 2 ``sub``, ``cvt.rn.bf16x2``)."""
    hi = pack(x0, x1)
    h0, h1 = unpack(hi)
    return hi, pack(x0 - h0, x1 - h1)


class _Src:
    """An f32 matrix read element by element: element (r, c) at address at(r, c), and (r + dr,
    c + dc) at dr rs + dc cs bytes from it, so a fragment costs one address and immediate
    offsets. `scale`, if given, multiplies element (r, c) by the f32 at scale(c) (+ dc 4).
    `exact`: every element is a bf16 value (dO staged from its bf16 input), so its lo part is
    zero and the products skip the mma that would multiply it."""

    def __init__(self, at, rs, cs, ld, scale=None, exact=False, ahead=False):
        self.at, self.rs, self.cs, self.ld, self.scale = at, rs, cs, ld, scale
        self.exact, self.ahead = exact, ahead

    def fragments(self, ln, s, k0, n0s):
        """(hi, lo) B fragments of the n-tiles at n0s, k-step column k0 (lane's rows), one
        n-tile at a time: its loads and split right before its mma (`_product`)."""
        base = self.at(k0, n0s[0] + ln.g)
        for j in range(len(n0s)):
            yield _frag(self, base + 8 * j * self.cs, None, B_PAIRS, (1, 0))

    def a_fragment(self, ln, s, r, k0):
        """(hi, lo) A fragment of rows r, r + 8 at k-step column k0 (the lane's)."""
        return _frag(self, self.at(r, k0), self.scale and self.scale(k0), A_PAIRS, (0, 1))

    def one(self, base, sbase, r, c):
        """The f32 element at (r, c) from `base` (times its scale)."""
        x = self.ld(base + r * self.rs + c * self.cs)
        if self.scale is not None:
            x = x * T.ptx.ld.shared.f32(sbase + 4 * c)
        return x

    def pair(self, base, sbase, dr, dc, step):
        """The f32 pair at (dr, dc) and (dr, dc) + step, step (1, 0) or (0, 1)."""
        return [self.one(base, sbase, dr + e * step[0], dc + e * step[1]) for e in range(2)]


def _shared(tile, stride, transposed=False, exact=False):
    """A row-major f32 tile of `stride` words a row (or its transpose)."""
    def ld(a):
        return T.ptx.ld.shared.f32(a)
    if transposed:
        return _Src(lambda r, c: tile.at(c, r), 4, 4 * stride, ld, exact=exact)
    return _Src(lambda r, c: tile.at(r, c), 4 * stride, 4, ld, exact=exact)


def _global(mat, transposed=False, ahead=False):
    """A [K, V] f32 global state (``ld.global.f32``: L1 and L2 serve the repeats) as B[kk, v],
    or B[v, kk] transposed. `ahead`: `_product` loads its next k-step's words before the
    current one's mma (`_product_ahead`)."""
    def ld(a):
        return T.ptx.ld.global_.f32(a)
    if transposed:
        return _Src(lambda r, c: mat.at(c * V + r), 4, 4 * V, ld, ahead=ahead)
    return _Src(lambda r, c: mat.at(r * V + c), 4 * V, 4, ld, ahead=ahead)


class _Split:
    """S0 or dS1 of one chunk and head as the chain's FRAGS=1 words (kda_bwd_chain.
    state_fragments, at element `off` of the global tensor): every B fragment arrives split,
    two ``ld.global.v4.b32`` (hi and lo) for two n-tiles, instead of four scalar f32 loads and
    a split each. As the [K, V] operand S (k = the channel) words (0, 2) and (1, 3) of a
    stored fragment are B fragments; as S^T (k = the value) each word goes through
    ``movmatrix.trans`` (the 8 x 8 block's transpose in the same register layout), words
    (0, 1) and (2, 3) then the B fragments."""

    ahead = False                 # `_product` asks every B source

    def __init__(self, buf, off, transposed=False):
        self.buf, self.off, self.transposed = buf, off, transposed

    def fragments(self, ln, s, k0, n0s):
        """[(hi, lo)] B fragments of the warp's 8 n-tiles n0s at k-step s (runtime)."""
        blk = n0s[0] >> 4                 # the n-tiles' first 16-wide block
        if self.transposed:               # k-step = value block s, n = channel blocks
            base = self.buf.at(self.off + (((s << 3) + blk) << 8) + 4 * T.laneid())
            step = CH.split_offset(0, 1, 0)
        else:                             # k-step = channel block s, n = value blocks
            base = self.buf.at(self.off + (((blk << 3) + s) << 8) + 4 * T.laneid())
            step = CH.split_offset(1, 0, 0)
        out = []
        for jj in SPLIT_BLOCKS:
            hi, lo = [T.ptx.ld.global_.v4.b32(base + 4 * (jj * step + CH.split_offset(0, 0, p)))
                      for p in range(2)]
            if self.transposed:
                hi, lo = [_movt(x) for x in hi], [_movt(x) for x in lo]
                pairs = ((0, 1), (2, 3))
            else:
                pairs = ((0, 2), (1, 3))
            out += [([hi[a], hi[b]], [lo[a], lo[b]]) for a, b in pairs]
        return out


SPLIT_BLOCKS = range(4)       # a warp's 8 n-tiles: 4 blocks of 16


class _Plane:
    """An f32 matrix held as split bf16 planes (kda_bwd_prep3.Planes: hi and lo, 128-byte
    swizzled; an exact one hi only) and read by ``ldmatrix.x4`` (PLANES >= 1): as the A
    operand (row-major) or the B operand stored k-major (B[k, n] = this[k, n]), or,
    `transposed`, as the operand this^T (A by ``.trans``, B stored n-major), two n-tiles a
    load and plane. The words are the f32 source's split (hi = rn(x), lo = rn(x - hi)
    elementwise, as `_split2`), so the products' sums are the same bits."""

    ahead = False                 # `_product` asks every B source

    def __init__(self, planes, lanes, transposed=False):
        self.pl, self.lanes, self.transposed = planes, lanes, transposed

    def a_fragment(self, ln, s, r, k0):
        if self.transposed:
            return self.pl.at(self.lanes, ln.m0, s << 4)
        return self.pl.a(self.lanes, ln.m0, s << 4)

    def fragments(self, ln, s, k0, n0s):
        out = []
        load = self.pl.bt if self.transposed else self.pl.b
        for p in range(len(n0s) // 2):
            hi, lo = load(self.lanes, s << 4, n0s[2 * p])
            out += [(hi[2 * o:2 * o + 2], None if lo is None else lo[2 * o:2 * o + 2])
                    for o in range(2)]
        return out


def _movt(word):
    return T.ptx.movmatrix.sync.aligned.m8n8.trans.b16(word)


def _frag(src, base, sbase, coords, step):
    """The hi and lo fragment words of the f32 pairs at `coords` (offsets from `base`); lo is
    None for an exact source (its pairs convert without rounding)."""
    his, los = [], []
    for dr, dc in coords:
        pair = src.pair(base, sbase, dr, dc, step)
        if src.exact:
            his.append(pack(*pair))
            continue
        hi, lo = _split2(*pair)
        his.append(hi)
        los.append(lo)
    return his, (los or None)


class _Lane:
    """The warp's tile roles: g = lane / 4, t = lane % 4, its m-tile (rows m0 .. m0 + 15) and
    column half (w / 4)."""

    def __init__(self, tf32=0, roll=0):
        self.tf32, self.roll = tf32, roll   # roll: kda_bwd_prep3's product loops (ROLL)
        lane = T.laneid()
        w = T.tid.x >> 5
        self.g, self.t = lane >> 2, lane & 3
        self.m0 = (w & 3) << 4
        self.half = w >> 2

    def below(self, rows):
        """The same roles `rows` rows further down (the second half of a [128, n] output)."""
        out = copy.copy(self)
        out.m0 = self.m0 + rows
        return out

    def cols(self, n):
        """First columns of the warp's n-tiles of an [C, n] output (n / 16 tiles of 8)."""
        tiles = n // 16
        return [self.half * (8 * tiles) + 8 * j for j in range(tiles)]


def _product(ln, acc, a, b, n0s, ksteps):
    """acc[j] += A[m0 .., :] B[:, n0s[j] ..] over 16 ksteps columns of A (`_Src` operands),
    each product three mma.sync of the split operands (two when one is exact: lo hi or hi lo
    is zero): per k-step one address for A's fragment and one for the B fragments of every
    n-tile (they sit 8 cs apart). TF32=1 (`ln.tf32`): `_product_tf32` instead."""
    if ln.tf32:
        return _product_tf32(ln, acc, a, b, n0s, ksteps)
    if b.ahead:
        return _product_ahead(ln, acc, a, b, n0s, ksteps)
    r = ln.m0 + ln.g
    with T.range(ksteps, unroll=1 if ln.roll else None) as s:
        k0 = (s << 4) + 2 * ln.t
        ahi, alo = a.a_fragment(ln, s, r, k0)
        for j, (bhi, blo) in enumerate(b.fragments(ln, s, k0, n0s)):
            _split_mma(acc[j], ahi, alo, bhi, blo)


def _split_mma(acc, ahi, alo, bhi, blo):
    """One n-tile's split product: lo hi, hi lo, hi hi (an exact operand's missing lo part
    skips its mma)."""
    if alo is not None:
        mma(acc, alo, bhi)
    if blo is not None:
        mma(acc, ahi, blo)
    mma(acc, ahi, bhi)


def _b_words(b, ln, n0s, k0):
    """The f32 words of every n-tile's B fragment at k-step column k0: [n-tile][pair][2]."""
    base = b.at(k0, n0s[0] + ln.g)
    return [[b.pair(base + 8 * j * b.cs, None, dr, dc, (1, 0)) for dr, dc in B_PAIRS]
            for j in range(len(n0s))]


def _product_ahead(ln, acc, a, b, n0s, ksteps):
    """`_product` with B's words one k-step ahead: each iteration issues the next k-step's
    global loads (the last one reloads its own: the index is clamped) before the current
    k-step's split and mma, and carries them in registers to the next. Why: session 32's ncu
    profile of kda_bwd_pieces_ld put 32.5% of its warp samples on the split's first
    ``cvt.rn.bf16x2`` waiting (long scoreboard) for these loads, issued right before it.
    Measured (session 32, an H100, plan "tc9"): the launch 1.030x slower, so the waits were the
    loads' throughput, not their latency; kept as a measured variant, not the default."""
    r = ln.m0 + ln.g
    first = _b_words(b, ln, n0s, 2 * ln.t)
    cur = [[[T.reg(T.f32) for _ in pair] for pair in frag] for frag in first]
    for regs, vals in zip(_flat(cur), _flat(first)):
        regs.set(vals)
    with T.range(ksteps) as s:
        k0 = (s << 4) + 2 * ln.t
        nxt = _b_words(b, ln, n0s, (T.ptx.min.u32(s + 1, ksteps - 1) << 4) + 2 * ln.t)
        abase = a.at(r, k0)
        asc = a.scale and a.scale(k0)
        ahi, alo = _frag(a, abase, asc, A_PAIRS, (0, 1))
        for j, frag in enumerate(cur):
            split = [_split2(*pair) for pair in frag]
            _split_mma(acc[j], ahi, alo, [h for h, _ in split], [lo for _, lo in split])
        for regs, vals in zip(_flat(cur), _flat(nxt)):
            regs.set(vals)


def _flat(words):
    """`_b_words`' registers in one list, n-tile by n-tile."""
    return [x for frag in words for pair in frag for x in pair]


TF32_MMA = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
A_TF32 = [(0, 0), (8, 0), (0, 4), (8, 4)]     # an m16n8k8 A fragment (rows g, g + 8; cols t, t + 4)
B_TF32 = [(0, 0), (4, 0)]                     # its B fragment (k rows t, t + 4)


def _tf32(src, base, sbase, coords):
    """The fragment words of the f32 elements at `coords`, each rounded to nearest tf32
    (``cvt.rna.tf32.f32``: truncation, the raw f32 bits, keeps no margin under the rule, docs/
    PERFORMANCE.md "Session 12, branch kdaprec")."""
    return [T.ptx.cvt.rna.tf32.f32(src.one(base, sbase, r, c)) for r, c in coords]


def _product_tf32(ln, acc, a, b, n0s, ksteps):
    """`_product` as single-pass tf32 (TF32=1): per 16-wide k-step two ``mma.sync.m16n8k8``
    (k columns k0 .. k0 + 7, k0 + 8 .. k0 + 15) an n-tile, every operand element loaded once
    and rounded (``cvt.rna.tf32.f32``), no hi / lo split: ~8x bf16's rounding, enough for the
    public backward rule only at unit input scale (v, h0 ~ N(0, 1))."""
    r = ln.m0 + ln.g
    with T.range(ksteps) as s:
        k0 = (s << 4) + ln.t
        abase = a.at(r, k0)
        asc = a.scale and a.scale(k0)
        bbase = b.at(k0, n0s[0] + ln.g)
        for h in (0, 8):
            af = _tf32(a, abase, asc, [(dr, dc + h) for dr, dc in A_TF32])
            for j in range(len(n0s)):
                bf = _tf32(b, bbase + 8 * j * b.cs, None, [(dr + h, dc) for dr, dc in B_TF32])
                T.ptx[TF32_MMA](acc[j], af, bf, acc[j])


def _acc(n):
    return [BL._zeros(4) for _ in range(n)]


def _elements(ln, n0s):
    """(j, e, row, col) of every accumulator element of the warp (the mma C layout)."""
    for j, n0 in enumerate(n0s):
        for e in range(4):
            yield j, e, ln.m0 + ln.g + 8 * (e >> 1), n0 + 2 * ln.t + (e & 1)


def _pairs_of(ln, n0s, acc):
    """(row, col, [x, x']) of each adjacent pair of accumulator elements (col even)."""
    for j, n0 in enumerate(n0s):
        for h in range(2):
            yield (ln.m0 + ln.g + 8 * h, n0 + 2 * ln.t, [acc[j][2 * h], acc[j][2 * h + 1]])


def _tb(sm):
    """Tb = T Diag(beta) as A[i, j] = T[i, j] beta_j."""
    src = _shared(sm.t, C)
    src.scale = lambda c: sm.beta.at(c)
    return src


def _to_tile(ln, n0s, acc, tile):
    for j, e, row, col in _elements(ln, n0s):
        T.ptx.st.shared.f32(tile.at(row, col), acc[j][e])


def _piece_out(ln, ck, out, a, b, ksteps, sign=1.0):
    """out[i, kk] = sign A B (dqe, dke, dkl: [chunks, H, C, K]), pairs as ``st.global.v2``."""
    n0s = ln.cols(K)
    acc = _acc(len(n0s))
    _product(ln, acc, a, b, n0s, ksteps)
    for row, col, xs in _pairs_of(ln, n0s, acc):
        vals = xs if sign == 1.0 else [x * sign for x in xs]
        T.ptx.st.global_.v2.f32(out.at(ck.piece(row, K) + col), vals)


def _lower_out(ln, ck, out, a, b):
    """out[i, j] = (A B)[i, j] for j <= i, zero above (dm, dtb: [chunks, H, C, C])."""
    n0s = ln.cols(C)
    acc = _acc(len(n0s))
    _product(ln, acc, a, b, n0s, V // 16)
    for row, col, xs in _pairs_of(ln, n0s, acc):
        vals = [T.ptx.selp.f32(x, 0.0, col + e <= row) for e, x in enumerate(xs)]
        T.ptx.st.global_.v2.f32(out.at(ck.piece(row, C) + col), vals)


def _dgs(ck, sm, s0, ds1, dgs):
    """dgs[kk] = exp(G_C, kk) sum_v dS1[kk, v] S0[kk, v]: warp w, key rows 16 w .. 16 w + 15,
    lane 4 values a row (``ld.global.v4.f32``), a 5-step butterfly."""
    lane = T.laneid()
    w = T.tid.x >> 5
    for r in range(K // 8):
        kk = (w << 4) + r
        a = T.ptx.ld.global_.v4.f32(s0.at(kk * V + 4 * lane))
        b = T.ptx.ld.global_.v4.f32(ds1.at(kk * V + 4 * lane))
        s = a[0] * b[0]
        for e in range(1, 4):
            s = T.ptx.fma.rn.f32(a[e], b[e], s)
        for m in (16, 8, 4, 2, 1):
            s = s + T.ptx.mov.f32(T.ptx.shfl.sync.bfly.b32(T.ptx.mov.b32(s), m, 0x1F, FULL))
        T.ptx.st.global_.f32(dgs.at((ck.c * ck.H + ck.h) * K + kk),
                             s * T.ptx.ld.shared.f32(sm.eg.at(kk)), pred=lane == 0)


def _dgs_split(ck, sm, s0, ds1, dgs):
    """`_dgs` from the split fragments (FRAGS=1): warp w, key rows 16 w .. 16 w + 15 (k-step
    w of the stored words), lane (g, t) its channels 2t, 2t + 1, 2t + 8, 2t + 9 of value rows
    g, g + 8 of every value block (``ld.global.v4.b32`` of each state's hi and lo words a
    block), each element hi + lo (f32), then the sums over g by a 3-step butterfly; lanes 0-3
    store. Not bit for bit `_dgs` (hi + lo carries ~16 bits of the f32 states, and the order
    of the sum differs): within 2^-12 of it."""
    lane = T.laneid()
    w = T.tid.x >> 5
    sums = [None] * 4                      # c = 2 e + p: channel 2t + 8 p + e
    for vb in range(V // 16):
        words = []
        for mat in (s0, ds1):
            hi, lo = [T.ptx.ld.global_.v4.b32(mat.at((w << 8) + 4 * lane)
                                              + 4 * CH.split_offset(vb, 0, p))
                      for p in range(2)]
            words.append((hi, lo))
        for c in range(4):
            e, p = c >> 1, c & 1
            for a in (2 * p, 2 * p + 1):   # value rows g and g + 8
                x, y = [unpack(hi[a])[e] + unpack(lo[a])[e] for hi, lo in words]
                sums[c] = x * y if sums[c] is None else T.ptx.fma.rn.f32(x, y, sums[c])
    t = lane & 3
    for c, total in enumerate(sums):
        for m in (4, 8, 16):
            total = total + T.ptx.mov.f32(T.ptx.shfl.sync.bfly.b32(T.ptx.mov.b32(total), m,
                                                                   0x1F, FULL))
        kk = (w << 4) + 2 * t + 8 * (c & 1) + (c >> 1)
        T.ptx.st.global_.f32(dgs.at((ck.c * ck.H + ck.h) * K + kk),
                             total * T.ptx.ld.shared.f32(sm.eg.at(kk)), pred=lane < 4)


# --- the prep's P and M on tensor cores (PREP=1) ------------------------------------------------

def _pairs_tc(sm):
    """P[i, j] = sum_d KL_b[i, d] F_ab[d] KD_b[j, d] (j < i) and M[i, j] = sum_d QL_b[i, d]
    F_ab[d] KD_b[j, d] (j <= i), zeros elsewhere (kda_bwd_reverse._pairs' values) as split
    ``mma.sync``: warp w takes m-tile a = w % 4 (rows of block a) and the column blocks b = 2 (w
    / 4) and 2 (w / 4) + 1, a block skipped past the diagonal (b > a: zeros stored, its factor
    could overflow). Per k-step (16 channels d) the four factors F_ab of the lane's channels
    (k0, k0 + 1, k0 + 8, k0 + 9: ``ex2`` of two ``ld.shared``) scale KD^T's B fragment before
    its split, and that one split B serves both products (A = KL for P, QL for M): 3 + 3 mma an
    n-tile. KD_b F_ab = k^ 2^(r_a - G_j) <= |k^| (j in block b <= a), KL and QL <= 1: the
    operands the f32 phase multiplies, split into bf16 hi + lo."""
    ln = _Lane()
    a = ln.m0 >> 4
    r = ln.m0 + ln.g
    kl, ql = _shared(sm.kl, SK), _shared(sm.ql, SK)
    kdt = _shared(sm.kd, SK, transposed=True)
    for bl in range(2):
        b = 2 * ln.half + bl
        n0s = [16 * b, 16 * b + 8]
        acc_p, acc_m = _acc(2), _acc(2)
        with T.if_(b <= a):
            with T.range(K // 16) as s:
                k0 = (s << 4) + 2 * ln.t
                f = [BL._factor(sm, a, b, k0 + dc) for dc in (0, 1, 8, 9)]
                afr = [_frag(src, src.at(r, k0), None, A_PAIRS, (0, 1)) for src in (kl, ql)]
                bbase = kdt.at(k0, n0s[0] + ln.g)
                for j in range(2):
                    bhi, blo = [], []
                    for h, (dr, _) in enumerate(B_PAIRS):
                        x0, x1 = kdt.pair(bbase + 8 * j * kdt.cs, None, dr, 0, (1, 0))
                        hi, lo = _split2(x0 * f[2 * h], x1 * f[2 * h + 1])
                        bhi.append(hi)
                        blo.append(lo)
                    for out, (ahi, alo) in ((acc_p[j], afr[0]), (acc_m[j], afr[1])):
                        mma(out, alo, bhi)
                        mma(out, ahi, blo)
                        mma(out, ahi, bhi)
        for j, e, row, col in _elements(ln, n0s):
            T.ptx.st.shared.f32(sm.p.at(row, col), T.ptx.selp.f32(acc_p[j][e], 0.0, col < row))
            T.ptx.st.shared.f32(sm.m.at(row, col), T.ptx.selp.f32(acc_m[j][e], 0.0, col <= row))


NB = C // 16              # 16-row blocks of a chunk


def _diag_inverse(sm):
    """Warp a < 4, lane j < 16: column j of D_a = (I + Diag(beta) P)_aa^-1 (block a's 16 x 16
    diagonal block of T) by forward substitution in f32, into sm.t; warps 4..7 write the
    zeros of T's six blocks above the diagonal (12 elements a thread)."""
    w, lane = T.tid.x >> 5, T.laneid()
    j = lane & 15
    with T.if_(w < NB, uniform=True):
        r0 = w << 4
        x = []
        for i in range(16):
            one = T.ptx.selp.f32(1.0, 0.0, j == i)
            if i == 0:
                x.append(one)
                continue
            s = None
            for m in range(i):
                p = T.ptx.ld.shared.f32(sm.p.at(r0 + i, r0 + m))
                s = p * x[m] if s is None else T.ptx.fma.rn.f32(p, x[m], s)
            x.append(T.ptx.fma.rn.f32(-T.ptx.ld.shared.f32(sm.beta.at(r0 + i)), s, one))
        with T.if_(lane < 16):
            for i in range(16):
                T.ptx.st.shared.f32(sm.t.at(r0 + i, r0 + j), x[i])
    _upper_zeros(sm, w)


def _upper_zeros(sm, w):
    """Warps w = 4..7 write the zeros of T's six blocks above the diagonal (12 elements a
    thread)."""
    with T.if_(w >= NB, uniform=True):
        u = T.tid.x - 32 * NB                    # 0..127
        for q in range(12):                      # 6 blocks x 256 elements over 128 threads
            e = q * 128 + u
            blk, within = e >> 8, e & 255
            # blocks (a, b) above the diagonal in order (0,1) (0,2) (0,3) (1,2) (1,3) (2,3)
            a = T.ptx.selp.u32(0, T.ptx.selp.u32(1, 2, blk < 5), blk < 3)
            b = T.ptx.selp.u32(blk + 1, T.ptx.selp.u32(blk - 1, 3, blk < 5), blk < 3)
            T.ptx.st.shared.f32(sm.t.at((a << 4) + (within >> 4), (b << 4) + (within & 15)),
                                0.0)


def _split_b(tile, row, col0, scale=None):
    """The B fragment (hi and lo words) of the f32 row `row` of `tile` at columns col0 + (0,
    1, 8, 9) (B[k, n] = tile[n, k]: the lane's n is `row`), times `scale` if given. A tile
    with its own `b_row` (kda_bwd_prep_tc.SwizzledM: two ``ld.shared.v2.f32``) loads them."""
    x = (tile.b_row(row, col0) if hasattr(tile, "b_row") else
         [T.ptx.ld.shared.f32(tile.at(row, col0 + dc)) for dc in (0, 1, 8, 9)])
    if scale is not None:
        x = [v * scale for v in x]
    (h0, l0), (h1, l1) = _split2(x[0], x[1]), _split2(x[2], x[3])
    return [h0, h1], [l0, l1]


def _split_a(c0, c1):
    """The A fragment (hi, lo words) of a 16 x 16 f32 tile held as the C fragments of its two
    16 x 8 halves (kda_chunk.afrag's layout, split)."""
    words = [_split2(c[2 * h], c[2 * h + 1]) for c in (c0, c1) for h in range(2)]
    return [w[0] for w in words], [w[1] for w in words]


def _mma3(acc, a, b):
    """acc += A B as the split's three mma (lo hi, hi lo, hi hi)."""
    mma(acc, a[1], b[0])
    mma(acc, a[0], b[1])
    mma(acc, a[0], b[0])


def _inverse_tc(sm):
    """T's blocks below the diagonal from the diagonal blocks D_a (`_diag_inverse`, after a
    barrier), warp b < 3 the column b, as kda_chunk.inverse_blocks in transposed form: U_a =
    T_ab^T, U_b = D_b^T, U_a = -(sum_{m=b}^{a-1} U_m A_am^T) D_a^T for a = b + 1 .. 3 (A =
    Diag(beta) P), every product split mma (U from the C fragments, A_am^T and D_a^T from the
    P and T tiles, split as loaded). Lane (g, t) holds U_a[g (+ 8), 8 n + 2 t (+ 1)] = T[16 a
    + 8 n + 2 t (+ 1), 16 b + g (+ 8)], stored into sm.t."""
    ln = _Lane()
    w = T.tid.x >> 5
    g, t = ln.g, ln.t
    for b in range(NB - 1):
        with T.if_(w == b, uniform=True):
            # U_b = D_b^T: element (g + 8 (e >> 1), 8 n + 2 t + (e & 1)) = T[16 b + that col, ..]
            us = {b: [[T.ptx.ld.shared.f32(sm.t.at(16 * b + 8 * n + 2 * t + (e & 1),
                                                   16 * b + g + 8 * (e >> 1)))
                       for e in range(4)] for n in range(2)]}
            for a in range(b + 1, NB):
                s = _acc(2)
                for m in range(b, a):
                    af = _split_a(*us[m])
                    for n in range(2):
                        row = 16 * a + 8 * n + g
                        bf = _split_b(sm.p, row, 16 * m + 2 * t,
                                      T.ptx.ld.shared.f32(sm.beta.at(row)))
                        _mma3(s[n], af, bf)
                af = _split_a(*s)
                ua = _acc(2)
                for n in range(2):
                    _mma3(ua[n], af, _split_b(sm.t, 16 * a + 8 * n + g, 16 * a + 2 * t))
                ua = [[T.ptx.neg.f32(v) for v in ua[n]] for n in range(2)]
                us[a] = ua
                for n in range(2):
                    for e in range(4):
                        T.ptx.st.shared.f32(sm.t.at(16 * a + 8 * n + 2 * t + (e & 1),
                                                    16 * b + g + 8 * (e >> 1)), ua[n][e])


def _blocked_inverse(sm):
    """T blockwise: `_diag_inverse`, ``bar.sync``, `_inverse_tc`."""
    _diag_inverse(sm)
    T.ptx.bar.sync(0)
    _inverse_tc(sm)


def _diag_inverse_rolled(sm):
    """`_diag_inverse` with its 16 rows as a runtime loop (kda_bwd_prep3g ROLL=3): the column's
    x in 16 registers that start at 0, row i's sum over all 15 earlier slots (P's diagonal
    block is zero on and above the diagonal, and the slots past i - 1 still hold 0, so each
    extra ``fma`` adds +0 to the sum: the same words), x_i written into its slot by ``selp``
    (a register cannot be indexed at run time). Why: the unrolled substitution was 571 of the
    prep's 7,224 SASS instructions, straight-line code every CTA fetches again."""
    w, lane = T.tid.x >> 5, T.laneid()
    j = lane & 15
    with T.if_(w < NB, uniform=True):
        r0 = w << 4
        x = [T.reg(T.f32, init=0.0) for _ in range(16)]
        x[0].set(T.ptx.selp.f32(1.0, 0.0, j == 0))
        with T.range(1, 16, unroll=1) as i:
            s = T.ptx.ld.shared.f32(sm.p.at(r0 + i, r0)) * x[0]
            for m in range(1, 15):
                s = T.ptx.fma.rn.f32(T.ptx.ld.shared.f32(sm.p.at(r0 + i, r0 + m)), x[m], s)
            xi = T.ptx.fma.rn.f32(-T.ptx.ld.shared.f32(sm.beta.at(r0 + i)), s,
                                  T.ptx.selp.f32(1.0, 0.0, j == i))
            for m in range(1, 16):
                x[m].set(T.ptx.selp.f32(xi, x[m], i == m))
        with T.if_(lane < 16):
            for i in range(16):
                T.ptx.st.shared.f32(sm.t.at(r0 + i, r0 + j), x[i])
    _upper_zeros(sm, w)


def _inverse_tc_rolled(sm):
    """`_inverse_tc` as runtime loops (kda_bwd_prep3g ROLL=3): warp b < 3 (b = w) walks a = b +
    1 .. 3 and m = b .. a - 1, reading U_m's C fragments back from sm.t, where `_diag_inverse`
    (m = b) or an earlier trip (m > b: U_m = T_mb^T, stored as computed) put them, instead of
    keeping them in registers indexed at trace time. Each lane reads back only the elements it
    stored (U_m's C fragment is the layout it was stored from), so program order alone orders
    them: no barrier. The same products in the same order: the same words. Why: the unrolled
    form was 1,289 SASS instructions (the three warps' branches, each a's and m's products
    spelled out)."""
    ln = _Lane()
    w = T.tid.x >> 5
    g, t = ln.g, ln.t
    with T.if_(w < NB - 1, uniform=True):
        b = w
        with T.range(b + 1, NB, unroll=1) as a:
            s = _acc(2)
            with T.range(b, a, unroll=1) as m:
                um = [[T.ptx.ld.shared.f32(sm.t.at((m << 4) + 8 * n + 2 * t + (e & 1),
                                                   (b << 4) + g + 8 * (e >> 1)))
                       for e in range(4)] for n in range(2)]
                af = _split_a(*um)
                for n in range(2):
                    row = (a << 4) + 8 * n + g
                    bf = _split_b(sm.p, row, (m << 4) + 2 * t,
                                  T.ptx.ld.shared.f32(sm.beta.at(row)))
                    _mma3(s[n], af, bf)
            af = _split_a(*s)
            ua = _acc(2)
            for n in range(2):
                _mma3(ua[n], af, _split_b(sm.t, (a << 4) + 8 * n + g, (a << 4) + 2 * t))
            for n in range(2):
                for e in range(4):
                    T.ptx.st.shared.f32(sm.t.at((a << 4) + 8 * n + 2 * t + (e & 1),
                                                (b << 4) + g + 8 * (e >> 1)),
                                        T.ptx.neg.f32(ua[n][e]))


def _blocked_inverse_rolled(sm):
    """`_blocked_inverse` with both parts as runtime loops (ROLL=3)."""
    _diag_inverse_rolled(sm)
    T.ptx.bar.sync(0)
    _inverse_tc_rolled(sm)


def prep(sm, ck, q, k, g_raw, beta, A_log, dt_bias, y, PREP=0, gates=None, rows=None,
         roll=False, gate=None, decayed=None):
    """kda_bwd_chain_prep.prep (norms -> gate -> P, M -> T beside KE, QE, KL, exp(G_C) and y
    staged in sm.do, each ended by ``bar.sync``) with PREP=1's P and M on tensor cores
    (`_pairs_tc`) and PREP=2's T blockwise (`_blocked_inverse`); PREP=0 is the f32 prep.
    `gates`, `rows`, `gate`, `decayed`: kda_bwd_chain_prep.prep's; `roll`: PREP=2's T as
    runtime loops (`_blocked_inverse_rolled`)."""
    inverse = (_blocked_inverse_rolled if roll else _blocked_inverse) if PREP == 2 else None
    PR.prep(sm, ck, q, k, g_raw, beta, A_log, dt_bias, y,
            pairs=_pairs_tc if PREP else None, inverse=inverse, gates=gates, rows=rows,
            gate=gate, decayed=decayed)


def check_prep(PREP):
    """The rule of the PREP constant (0: the f32 prep, 1: P and M on tensor cores, 2: T's
    blocks too)."""
    return [] if PREP in (0, 1, 2) else [
        f"PREP={PREP} must be 0 (the f32 prep), 1 (P and M on tensor cores) or 2 (and T)"]


@T.kernel(grid=PC._grid, block=256)
def kda_bwd_pieces_tc(q: T.gptr[T.bf16], k: T.gptr[T.bf16], g_raw: T.gptr[T.bf16],
                      v: T.gptr[T.bf16], beta: T.gptr[T.bf16], A_log: T.gptr[T.f32],
                      dt_bias: T.gptr[T.f32], do: T.gptr[T.bf16],
                      chunk_tok: T.gptr[T.s32], chunk_rows: T.gptr[T.s32],
                      s0: T.gptr[T.f32], ds1: T.gptr[T.f32], dv: T.gptr[T.f32],
                      dqe: T.gptr[T.f32], dke: T.gptr[T.f32], dkl: T.gptr[T.f32],
                      dm: T.gptr[T.f32], dtb: T.gptr[T.f32], dgs: T.gptr[T.f32],
                      PREP: T.const = 0, TF32: T.const = 0):
    sm, ck = PR.chunk_cta(chunk_tok, chunk_rows)
    prep(sm, ck, q, k, g_raw, beta, A_log, dt_bias, do, PREP)    # dO in sm.do
    _products(sm, ck, v, s0, ds1, dv, dqe, dke, dkl, dm, dtb, dgs, TF32)


def _prefetch_state(ck, v, s0, ds1):
    """``prefetch.global.L2`` of every 128-byte line of the chunk's S0 and dS1 and of the V rows
    `r` reads (kda_bwd_pieces_ld PREFETCH=1), 4.5 a thread: each state is the 64 KB at
    element `ck.state()` (FRAGS=1's split fragments, `_Split` and `_dgs_split`, fill the f32
    state's very bytes, and every product of S0 or dS1 reads all of them: 512 lines; thread t
    lines t and t + 256 of each), and V's C rows of 256 bytes at `ck.row` (rows past the
    sequence clamped as `r`'s loads clamp them; threads t < 2C: row t / 2, line t % 2).
    Addresses as the loads form theirs, so each lies inside its tensor. Why: an iket profile
    (an H100, T8192 H16, one 8-warp CTA an SM, phases serial) put `r` at 9.22 of a CTA's
    39.17 us and dgs, dqe, dkl_dm, ddelta and dke, which read S0 or dS1 too, at 17.9 more;
    issued at tiles_load's end, the states' 128 KB and V's 16 KB come from HBM into L2 while
    the operands are split, ahead of those phases' dependent loads (kda_bwd_local_lg
    PREFETCH=2 cut its elementwise phase from 12.8 to 7.17 us so). VLOAD=1's `load_wide`
    stores its loads' words inside its loop, so ptxas places these after those stores (its
    loads returned), not among the loads."""
    t = T.tid.x
    for mat in (s0, ds1):
        for j in range(2):
            T.ptx.prefetch.global_.L2(mat.at(ck.state() + ((t + (j << 8)) << 5)))
    T.ptx.prefetch.global_.L2(v.at(ck.row(t >> 1) + ((t & 1) << 6)), pred=t < 2 * C)


def _prefetch_next(chunk_tok, chunk_rows, ptile, do, stride, part=None):
    """``prefetch.global.L2`` of every line the `tiles_load` phase of CTA hc + `stride` will read
    (kda_bwd_pieces_ld NEXT = `stride`, the number of CTAs resident at once: one an SM), where
    hc = ctaid.y H + ctaid.x is this CTA's (chunk, head) and launch order: its stored tiles
    (774 lines from element (hc + stride) WORDS; thread t lines t + 256 j) and its
    chunk's 64 dO rows (threads t < 2C: row t / 2 at `_Chunk.row`, clamped as `load_wide`
    clamps it, line t % 2); none past the grid's last CTA (the chunk index clamped so the
    chunk map's loads stay inside it). Issued before the last phase, ~4 us before this CTA
    ends and the CTA of the next wave starts. Why: `tiles_load` is the launch's first phase,
    so no phase of its own CTA can hide it (5.89 of a 33.54 us CTA with VLOAD=1 and PREFETCH=1,
    session 37, an H100, T8192 H16), but the CTA one wave earlier can bring its lines into
    L2 (prefetched one phase ahead, piece 3's elementwise terms went from 12.8 to 7.2 us).
    `part` (kda_bwd_pieces_ld NEXTAT=2): 0 the first half of the tiles' lines only, 1 the
    second half and the dO rows; None all of them."""
    t = T.tid.x
    nxt, ok = PTL.next_wave(stride)
    lines = PTL.WORDS * 4 // 128                                               # 774 lines
    half = lines // 2
    first, n = {None: (0, lines), 0: (0, half), 1: (half, lines - half)}[part]
    PTL.prefetch_runs([(ptile, nxt * PTL.WORDS + first * 32, n)], ok)
    if part == 0:
        return
    ck = PTL.chunk_of(chunk_tok, chunk_rows, nxt)
    T.ptx.prefetch.global_.L2(do.at(ck.row(t >> 1) + ((t & 1) << 6)), pred=ok & (t < 2 * C))


@T.kernel(grid=PC._grid, block=256)
def kda_bwd_pieces_ld(v: T.gptr[T.bf16], do: T.gptr[T.bf16], chunk_tok: T.gptr[T.s32],
                      chunk_rows: T.gptr[T.s32], ptile: T.gptr[T.f32], s0: T.gptr[T.f32],
                      ds1: T.gptr[T.f32], dv: T.gptr[T.f32], dqe: T.gptr[T.f32],
                      dke: T.gptr[T.f32], dkl: T.gptr[T.f32], dm: T.gptr[T.f32],
                      dtb: T.gptr[T.f32], dgs: T.gptr[T.f32], TF32: T.const = 0,
                      BULK: T.const = 0, AHEAD: T.const = 0, FRAGS: T.const = 0,
                      PLANES: T.const = 0, VLOAD: T.const.one_of(0, 1) = 0,
                      PREFETCH: T.const.one_of(0, 1) = 0, NEXT: T.const = 0,
                      NEXTAT: T.const.one_of(0, 1, 2) = 0):
    """kda_bwd_pieces_tc with the prep's tiles loaded from `ptile` (kda_bwd_prep3s stored
    them: kda_bwd_prep_tiles) instead of computed again, and dO staged; the same products.
    BULK=1 (plan "tc8"): `ptile` in the image layout, loaded by three bulk copies on an
    mbarrier while dO is staged (kda_bwd_prep_tiles.load_image), instead of 97 scalar loads a
    thread in rounds of 8; every thread waits on the mbarrier after the barrier that publishes
    dO and the mbarrier's initialisation. FRAGS=1 (plan "tc13"): `s0` and `ds1` hold the
    chains' split fragments (kda_bwd_chain FRAGS=1), read by `_Split`; dgs from them
    (`_dgs_split`). VLOAD=1 (BULK=0): the tiles and dO by 16-byte loads, all of a thread's
    in flight at once (kda_bwd_prep_tiles.load_wide: the tiles_load phase was 9.47 us of a
    42.5 us CTA in session 36's profile, H100, T8192 H16); the same shared words.
    PREFETCH=1: ``prefetch.global.L2`` of S0's, dS1's and `r`'s V lines after the tiles'
    loads, before the barrier (`_prefetch_state`: `r` was 9.22 us of a 39.17 us CTA,
    H100, T8192 H16); a hint, so the same words as PREFETCH=0. NEXT=S (BULK=0; S the CTAs
    resident at once, 132 on an H100 or H200): the lines `tiles_load` of CTA hc + S will read
    prefetched before the last product (`_prefetch_next`: `tiles_load` was 5.89 us of a 33.54
    us CTA); hints too. NEXTAT=1 (with NEXT): those prefetches before dR instead (`dr`, `dtb`
    and `dr_store` read shared memory only, ~3.6 us before dke). Why: session 38's profile (an
    H100, T8192 H16) put `dke` at 6.14 us with NEXT's 774 lines issued right before it, 4.35
    without: its own loads of S0 queued behind them. NEXTAT=2: half the tiles' lines before
    dR, the other half and dO's rows before dke (the same five instructions a thread). Why:
    NEXTAT=1 (session 39, the same card and shape) took `dke` to 5.12 us but the next CTA's
    `tiles_load` from 2.82 to 4.61 (more of its lines not yet in L2, or gone, when it starts):
    half at each point splits the queue that `dke` waits behind and the age of the lines."""
    bad = check_frags(FRAGS, TF32, AHEAD) + check_planes(PLANES, TF32, AHEAD)
    if NEXTAT and not NEXT:
        bad.append(f"NEXTAT={NEXTAT} moves NEXT's prefetches: it needs NEXT")
    if BULK and NEXT:
        bad.append("NEXT prefetches the stored layout's words; BULK=1 reads the image layout")
    if BULK and VLOAD:
        bad.append("VLOAD=1 replaces BULK=0's thread loads; BULK=1 loads by bulk copies")
    if bad:                          # the plans bind constants without a suite's constraints
        raise ValueError("kda_bwd_pieces_ld: " + "; ".join(bad))
    sm, ck = PR.chunk_cta(chunk_tok, chunk_rows)
    hc = ck.c * ck.H + ck.h
    with T.iket.range("tiles_load"):
        if BULK:
            full = PTL.one_shot_mbarrier()
            PTL.load_image(sm, hc, ptile, full)
            PTL.stage(sm.do, ck, do)
        elif VLOAD:
            PTL.load_wide(sm, hc, ptile, ck, do)    # dO too: one round of loads
        else:
            PTL.load(sm, hc, ptile)
            PTL.stage(sm.do, ck, do)
        if PREFETCH:
            with T.iket.range("prefetch"):
                _prefetch_state(ck, v, s0, ds1)
    T.ptx.bar.sync(0)
    if BULK:
        full.wait(0)
    if NEXT < 0:                     # the plans bind constants without a suite's constraints
        raise ValueError(f"kda_bwd_pieces_ld: NEXT must be a CTA count >= 0, got {NEXT}")

    def next_wave(part=None):
        def issue():
            with T.iket.range("next" if part is None else f"next{part}"):
                _prefetch_next(chunk_tok, chunk_rows, ptile, do, NEXT, part)
        return issue
    before = {}
    if NEXT:
        before = ({"dr": next_wave(0), "dke": next_wave(1)} if NEXTAT == 2
                  else {("dr" if NEXTAT else "dke"): next_wave()})
    _products(sm, ck, v, s0, ds1, dv, dqe, dke, dkl, dm, dtb, dgs, TF32, AHEAD, FRAGS, PLANES,
              before)


class _Slots:
    """The products' shared operands: f32 tiles (PLANES=0) or split bf16 planes in the same
    bytes (`_Plane`: each element split once, when it is stored, instead of again by every
    warp and k-step that loads it). PLANES=1 and 2: the G and P tiles (R, then dR; Delta, then
    dDelta), split as the products store them; PLANES=3 and 4: every operand, the prep's
    tiles (KE, KL, Tb = T Diag(beta), T, M) and dO split once after they are loaded
    (kda_bwd_prep3.split_operands: the planes kda_bwd_prep3's walks read, in the same
    slots)."""

    def __init__(self, sm, planes):
        self.sm, self.planes = sm, None
        if planes:
            import kda_bwd_prep3 as P3    # imports this module: resolved at trace time
            self.lanes = Lanes()
            op = P3._Operands(sm)
            self.planes = {"r": op.r, "dlt": op.u}
            if planes >= 3:              # PLANES=3 and 4: every operand
                P3.split_operands(sm, op)
                self.planes.update(ke=op.ke, kl_=op.kl, do=op.do, tb=op.tb, t=op.t, m=op.m)

    def src(self, name, transposed=False):
        """Operand `name` (a tile of kda_bwd_reverse._Smem, or "tb": T Diag(beta)) as an A or
        k-major B operand, or (`transposed`) as the operand tile^T."""
        if self.planes is not None and name in self.planes:
            return _Plane(self.planes[name], self.lanes, transposed)
        if name == "tb":
            return _tb(self.sm)
        stride = C if name in ("m", "t") else SK
        return _shared(getattr(self.sm, name), stride, transposed, exact=name == "do")

    def store(self, ln, n0s, acc, name, fn=None):
        """The warp's accumulators into tile `name`; on planes, fn(row, col, x) of each
        element if given (the f32 form's callers apply theirs as they store)."""
        if self.planes is None:
            if fn is not None:
                raise ValueError("_Slots.store: fn applies to planes only")
            return _to_tile(ln, n0s, acc, getattr(self.sm, name))
        for row, col, xs in _pairs_of(ln, n0s, acc):
            if fn is not None:
                xs = [fn(row, col + e, x) for e, x in enumerate(xs)]
            self.planes[name].store_pair(row, col, *xs)


def _products(sm, ck, v, s0, ds1, dv, dqe, dke, dkl, dm, dtb, dgs, TF32, AHEAD=0, FRAGS=0,
              PLANES=0, before=None):
    """The module docstring's phases after the prep (its tiles published by a barrier).
    AHEAD=1: the products that read S0 or dS1 from global memory load them a k-step ahead
    (`_product_ahead`). FRAGS=1: S0 and dS1 are the chains' split fragments (`_Split`).
    PLANES=1: R, Delta, dDelta and dR as split planes (`_Slots`); PLANES=2 also keeps every
    product's k-steps a runtime loop (ptxas unrolls the plane products otherwise: 87 KB of
    SASS, not 60); PLANES=3: every shared operand as planes, the products rolled as in 2;
    PLANES=4: every operand as planes, the products as ptxas unrolls them (as 1).
    `before`: {phase name: fn}, each fn() run right before that phase (kda_bwd_pieces_ld NEXT:
    the next wave's prefetches before "dke", or with NEXTAT=1 before "dr", whose two products
    and dtb's read shared memory only). Each product is an iket range, the barriers outside
    (nothing in a normal build)."""
    before = before or {}
    ln = _Lane(TF32, roll=PLANES in (2, 3))
    S0 = BR._Mat(s0, ck.state())
    dS = BR._Mat(ds1, ck.state())
    slots = _Slots(sm, PLANES)

    def state(mat, transposed=False):
        if FRAGS:
            return _Split(mat.ptr, mat.off, transposed)
        return _global(mat, transposed, AHEAD)
    wide = ln.cols(V)
    # R = V - KE S0 (rows past the sequence: V = 0, KE = 0) into the G tile
    with T.iket.range("r"):
        acc = _acc(len(wide))
        _product(ln, acc, slots.src("ke"), state(S0), wide, K // 16)
        if PLANES:
            slots.store(ln, wide, acc, "r", lambda row, col, x: T.ptx.selp.f32(
                BW._bf16(v, ck.row(row) + col), 0.0, row < ck.nv) - x)
        else:
            for j, e, row, col in _elements(ln, wide):
                x = T.ptx.selp.f32(BW._bf16(v, ck.row(row) + col), 0.0, row < ck.nv)
                T.ptx.st.shared.f32(sm.r.at(row, col), x - acc[j][e])
    with T.iket.range("dgs"):
        if FRAGS:
            _dgs_split(ck, sm, S0, dS, dgs)
        else:
            _dgs(ck, sm, S0, dS, dgs)
    T.ptx.bar.sync(0)
    # Delta = T Diag(beta) R into the P tile; dqe = dO S0^T
    with T.iket.range("delta"):
        acc = _acc(len(wide))
        _product(ln, acc, slots.src("tb"), slots.src("r"), wide, C // 16)
        slots.store(ln, wide, acc, "dlt")
    with T.iket.range("dqe"):
        _piece_out(ln, ck, dqe, slots.src("do"), state(S0, True), V // 16)
    T.ptx.bar.sync(0)
    # dkl = Delta dS1^T, dm = lower(dO Delta^T); dDelta = M^T dO + KL dS1 kept in registers
    with T.iket.range("dkl_dm"):
        _piece_out(ln, ck, dkl, slots.src("dlt"), state(dS, True), V // 16)
        _lower_out(ln, ck, dm, slots.src("do"), slots.src("dlt", True))
    with T.iket.range("ddelta"):
        d_delta = _acc(len(wide))
        _product(ln, d_delta, slots.src("m", True), slots.src("do"), wide, C // 16)
        _product(ln, d_delta, slots.src("kl_"), state(dS), wide, K // 16)
    T.ptx.bar.sync(0)
    with T.iket.range("ddelta_store"):
        slots.store(ln, wide, d_delta, "dlt")
    T.ptx.bar.sync(0)
    # dR = Diag(beta) T^T dDelta (= dv, stored where the row is valid); dtb = lower(dDelta R^T)
    if "dr" in before:
        before["dr"]()
    with T.iket.range("dr"):
        acc = _acc(len(wide))
        _product(ln, acc, slots.src("t", True), slots.src("dlt"), wide, C // 16)
        d_r = []
        for h, (row, col, xs) in enumerate(_pairs_of(ln, wide, acc)):
            bj = T.ptx.ld.shared.f32(sm.beta.at(row))
            xs = [x * bj for x in xs]
            T.ptx.st.global_.v2.f32(dv.at(ck.row(row) + col), xs, pred=row < ck.nv)
            if h % 2 == 0:
                d_r.append([])
            d_r[-1] += xs
    with T.iket.range("dtb"):
        _lower_out(ln, ck, dtb, slots.src("dlt"), slots.src("r", True))
    T.ptx.bar.sync(0)
    with T.iket.range("dr_store"):
        slots.store(ln, wide, d_r, "r")
    T.ptx.bar.sync(0)
    if "dke" in before:
        before["dke"]()
    # dke = -dR S0^T
    with T.iket.range("dke"):
        _piece_out(ln, ck, dke, slots.src("r"), state(S0, True), V // 16, sign=-1.0)


# --- inputs, reference, cases: kda_bwd_chain_pieces's ------------------------------------------

OUTPUTS = PC.OUTPUTS
reference = PC.reference
timing_inputs = PC.timing_inputs
_bytes = PC._bytes


def unit_inputs(rng, B, T_, H, lens=None, gate="mixed"):
    """kda_bwd.inputs with v and h0 as raw_inputs draws them (c = 1)."""
    first = copy.deepcopy(rng)                 # kda_bwd.inputs draws raw_inputs first
    x = BW.inputs(rng, B, T_, H, lens=lens, gate=gate)
    raw = R.raw_inputs(first, B, T_, H, N=len(x["cu_seqlens"]) - 1, gate=gate)
    return dict(x, v=raw["v"], h0=raw["h0"])


def inputs(rng, B, T_, H, lens=None, gate="mixed", unit=False):
    """kda_bwd_chain_pieces.inputs; `unit`: v and h0 as drawn (N(0, 1), c = 1: the same draws,
    not multiplied by kda_bwd's power of two c = 32-128 that puts the forward's output RMS in
    [1, 2)), S0 and dS1 from those: the scale at which TF32=1 meets the public backward rule
    (docs/PERFORMANCE.md "Session 12, branch kdaprec")."""
    if not unit:
        return PC.inputs(rng, B, T_, H, lens, gate)
    x = unit_inputs(rng, B, T_, H, lens, gate)
    return dict(PC.pieces_inputs(x, BR._states(x, lens), PC._ds1(x, lens), lens),
                cu_seqlens=x["cu_seqlens"])


def check_tf32(TF32):
    """The rule of the TF32 constant (0: the split bf16 products, 1: single-pass tf32)."""
    return [] if TF32 in (0, 1) else [
        f"TF32={TF32} must be 0 (split bf16 products) or 1 (single-pass tf32)"]


def check_frags(FRAGS, TF32=0, AHEAD=0):
    """The rule of kda_bwd_pieces_ld's FRAGS constant (1: S0 and dS1 as split fragments, which
    only the split products read: not with TF32 or AHEAD, whose loads are element by
    element)."""
    if FRAGS not in (0, 1):
        return [f"FRAGS={FRAGS} must be 0 (f32 states) or 1 (the chains' split fragments)"]
    if FRAGS and (TF32 or AHEAD):
        return [f"FRAGS=1 reads split fragments, which TF32={TF32} and AHEAD={AHEAD} do not: "
                f"leave both 0"]
    return []


def check_planes(PLANES, TF32=0, AHEAD=0):
    """The rule of kda_bwd_pieces_ld's PLANES constant (1: R, Delta, dDelta, dR as split
    planes; 2: and the products' k-steps rolled; 3: every shared operand as planes, rolled;
    4: every shared operand as planes), which only the split products read."""
    if PLANES not in (0, 1, 2, 3, 4):
        return [f"PLANES={PLANES} must be 0 (f32 tiles), 1 (R and Delta as split planes), 2 "
                f"(and the products rolled), 3 (every operand as planes, rolled) or 4 (every "
                f"operand as planes)"]
    if PLANES and (TF32 or AHEAD):
        return [f"PLANES={PLANES} feeds the split products, which TF32={TF32} and AHEAD={AHEAD} "
                f"replace: leave both 0"]
    return []


def constraints(B, T_, H, lens=None, PREP=0, TF32=0, AHEAD=0, FRAGS=0, PLANES=0):
    return (PC.constraints(B, T_, H, lens) + check_prep(PREP) + check_tf32(TF32)
            + check_frags(FRAGS, TF32, AHEAD) + check_planes(PLANES, TF32, AHEAD))


def pm_macs(PREP):
    """Multiply-adds of the prep's products a chunk as mma work, three bf16 mma each (the
    split): PREP >= 1 P and M over the 10 of 16 blocks on or below the diagonal (K deep);
    PREP=2 also T's blocks below the diagonal (`_inverse_tc`: 6 blocks' D_a products and 10
    [16, 16, 16] products A_am T_mb)."""
    pm = 3 * 2 * (10 * C * C * K) // 16 if PREP else 0
    return pm + (3 * 16 * 16 ** 3 if PREP == 2 else 0)


def _flops(B, T_, H, lens=None, PREP=0, TF32=0):
    """The products' mma work at 2 FLOPs a multiply-add, per chunk and head: R, dkl, dke,
    dDelta's KL dS1 (C K V each), Delta, dR, dtb (C C V) as three bf16 mma (the split); dqe
    (C K V), dm and dDelta's M^T dO (C C V) as two (dO exact); PREP=1 adds P and M,
    PREP=2 T's blocks too (`pm_macs`). TF32=1: all nine single pass, each multiply-add counted
    twice (the suites' rate is bf16's, and tf32 mma runs at half of it)."""
    if TF32:
        per = 2 * (5 * C * K * V + 5 * C * C * V) + pm_macs(PREP)
    else:
        per = (3 * (4 * C * K * V + 3 * C * C * V) + 2 * (C * K * V + 2 * C * C * V)
               + pm_macs(PREP))
    return 2 * per * BL._chunks(B, T_, lens) * H


# split bf16 products (hi + lo: ~2^-16 relative a product) in f32 accumulation: the f32
# kernel's rule (every element within rtol 1e-3 + 1e-3 RMS(ref), normalized RMS 1e-4)
TOLERANCE = PC.TOLERANCE

PREFIX = {1: "pm_", 2: "pmt_"}     # case-name prefixes: PREP=1 (P, M), PREP=2 (P, M and T)
TF_PREFIX = "tf"                   # TF32=1 (before PREFIX's: tfpmt_ is PREP=2 with tf32)


def prep_twins(cases):
    """The PREP=1 and PREP=2 twins (PREFIX + name, the same parameters) of `cases`."""
    return [T.case(PREFIX[p] + c.name, small=c.small, tags=c.tags, PREP=p, **c.params)
            for p in (1, 2) for c in cases]


def timing_cases(cases):
    """`cases` and the PREP=1 and 2 twins of their T8192 shapes (`benchmarks/kda_bench.sh tc2`
    times the three forms of a shape in one job)."""
    return list(cases) + prep_twins([c for c in cases if c.name.startswith("t8192")])


def tf32_twins(cases):
    """The TF32=1 twins (tf + name) of `cases`' PREP=2 ones (`kda_bench.sh tf32` times
    pmt_ and tfpmt_ of a shape in one job)."""
    return [T.case(TF_PREFIX + c.name, small=c.small, tags=c.tags, TF32=1, **c.params)
            for c in cases if c.params.get("PREP") == 2]


# PREP=1 and 2 (P and M, and T, on tensor cores): the smallest case and three saturated chunks
# with a tail
PM_CASES = [T.case("t20_h1_deep", B=1, T_=20, H=1, gate="deep"),
            T.case("t150_h1_deep", B=1, T_=150, H=1, gate="deep", tags=BW.SYNC_IN_TESTS)]

SUITE = T.suite(
    kda_bwd_pieces_tc, inputs=inputs, reference=reference, outputs=list(OUTPUTS),
    tolerance=TOLERANCE, constraints=constraints, bytes=_bytes, flops=_flops,
    flops_dtype="bf16", cases=[
        # the smallest (what `tirxh check`'s sync_check runs): one 20-row chunk, deep gates
        T.case("t20_h1_deep", B=1, T_=20, H=1, gate="deep"),
        # three chunks (64, 64, 22: a tail) under saturated gates
        T.case("t150_h1_deep", B=1, T_=150, H=1, gate="deep", tags=BW.SYNC_IN_TESTS),
        # a varlen pack (2 chunks, a one-token sequence, a tail) on 2 heads, mixed gates
        T.case("pack_80_1_30_h2", B=1, T_=111, H=2, lens=(80, 1, 30), gate="mixed",
               tags=BW.SYNC_IN_TESTS),
    ] + prep_twins(PM_CASES))


# TF32=1 (single-pass tf32 products) at unit input scale (`inputs(unit=True)`, the only scale
# where it meets the public backward rule): its piece-level rule is looser than the split's
# (tf32 rounds each operand to 2^-11 relative, ~30x the split's); what must hold is the
# chained check against kda_ref.backward (tests/zoo/test_kda_bwd_pieces_tc.py)
TOLERANCE_TF32 = T.tolerance(rtol=1e-2, atol_rms=1e-2, rms=2e-3)

SUITE_TF32 = T.suite(
    kda_bwd_pieces_tc, inputs=inputs, reference=reference, outputs=list(OUTPUTS),
    tolerance=TOLERANCE_TF32, constraints=constraints, bytes=_bytes, flops=_flops,
    flops_dtype="bf16", cases=[
        T.case("tf_t20_h1_deep", B=1, T_=20, H=1, gate="deep", unit=True, TF32=1),
        # three chunks (64, 64, 22: a tail) under saturated gates
        T.case("tf_t150_h1_deep", B=1, T_=150, H=1, gate="deep", unit=True, TF32=1),
        # the varlen pack (2 chunks, a one-token sequence, a tail) on 2 heads, mixed gates
        T.case("tf_pack_80_1_30_h2", B=1, T_=111, H=2, lens=(80, 1, 30), gate="mixed",
               unit=True, TF32=1),
    ])


# timing only (no reference: `timing_inputs`), tagged "timing": kda_bwd_local's shapes and
# the PREP=1 and 2 twins at T8192; `benchmarks/kda_bench.sh tc` times T8192 H96 beside
# kda_bwd_chain_pieces, `tc2` PREP=0, 1 and 2 side by side; `tf32` PREP=2's TF32=1 twins
# (tfpmt_) after PREP=2
_TIMING = timing_cases(BL.SUITE_TIMING.cases)
SUITE_TIMING = T.suite(
    kda_bwd_pieces_tc, inputs=timing_inputs, outputs=list(OUTPUTS), constraints=constraints,
    bytes=_bytes, flops=_flops, flops_dtype="bf16",
    cases=_TIMING + tf32_twins(_TIMING))


def ld_timing_inputs(rng, B, T_, H, lens=None, gate="mixed", FRAGS=0):
    """kda_bwd_pieces_ld's timing inputs: kda_bwd_pieces_tc's, and a synthetic `ptile`
    (kda_bwd_prep_tiles.synthetic: what plan "tc7"'s prep launch would have stored). FRAGS=1:
    S0 and dS1 as the chains' split fragments of the same synthetic states
    (kda_bwd_chain.state_fragments), since f32 words read as bf16 pairs hold Inf and NaN
    patterns (1 in 256 low halves): the launch's first run on them wrote non-finite outputs,
    which the protocol's correctness step refuses before any timing or profile."""
    x = timing_inputs(rng, B, T_, H, lens, gate)
    if FRAGS:
        for name in ("s0", "ds1"):
            x[name] = CH.state_fragments(x[name]).view(np.float32).reshape(x[name].shape)
    return dict(x, **PTL.synthetic(rng, H, len(x["chunk_tok"]), ("ptile",)))


# plan "tc7"'s pieces launch alone at T8192 H64 (timing only): for `tirxh profile` (ncu), as
# kda_bwd_local_tc.SUITE_LG_TIMING; `ahead_`: plan "tc9"'s (AHEAD=1), `frags_`: plan "tc13"'s
# (FRAGS=1: the synthetic S0 and dS1 read as fragment words; the time does not depend on them);
# `tc19_t8192_h16`: plan "tc19"'s (FRAGS=1, PLANES=4) at H16, for iket (as kda_bwd_prep3's);
# `tc27_`: plan "tc27"'s (VLOAD=1); `tc30_`: tc27's with PREFETCH=1; `tc33_`: tc30's with NEXT=132;
# `tc38_`: tc33's with NEXTAT=1; `tc41_`: with NEXTAT=2
_LD_CASES = [c for c in BL.SUITE_TIMING.cases if c.name == "t8192_h64"]
SUITE_LD_TIMING = T.suite(
    kda_bwd_pieces_ld, inputs=ld_timing_inputs, outputs=list(OUTPUTS), constraints=constraints,
    bytes=_bytes, flops=_flops, flops_dtype="bf16",
    cases=_LD_CASES + [T.case(prefix + c.name, small=False, tags=c.tags, **extra, **c.params)
                       for prefix, extra in (("ahead_", dict(AHEAD=1)),
                                             ("frags_", dict(FRAGS=1)))
                       for c in _LD_CASES]
    + [T.case(f"tc{p}_t8192_h16", B=1, T_=8192, H=16, small=False, tags=("timing",), FRAGS=1,
              PLANES=4, **extra) for p, extra in ((19, {}), (27, dict(VLOAD=1)),
                                                   (30, dict(VLOAD=1, PREFETCH=1)),
                                                   (33, dict(VLOAD=1, PREFETCH=1, NEXT=132)),
                                                   (38, dict(VLOAD=1, PREFETCH=1, NEXT=132,
                                                             NEXTAT=1)),
                                                   (41, dict(VLOAD=1, PREFETCH=1, NEXT=132,
                                                             NEXTAT=2)))])
