"""Kimi Delta Attention backward: the prep's tiles that piece 2c reads, stored once by the prep
launch and loaded by the pieces launch (issue 18; kda_fwd_bwd plan "tc4").

Why: plan "tc3" computes the chunk's prep (norms, gate, P, M, the inverse T, KE, QE, KL) in its
prep launch (kda_bwd_prep3) and again, identically, in its pieces launch (kda_bwd_pieces_tc,
PREP=2): the prep alone ran 2.65 ms at T8192 H96 (kda_bwd_prep_only, session 14), about a fifth
of the pieces' 12.0 ms. What the pieces' products read of it is KE, KL [C, K], M, T [C, C],
beta [C] and exp(G_C) [K]: 24,768 f32 words (97 KB) a chunk and head, 1.2 GB at T8192 H96
written once and read once (~0.6 ms of HBM at 4.3 TB/s, against the prep's 2.65 ms). The
values are the f32 words of the prep's own shared tiles, so the pieces compute from exactly
what they would have computed: their outputs are bit-identical (tests/zoo/test_kda_fwd_bwd.py).

Layout of `ptile` [chunks, H, WORDS] (f32, row-major within each matrix): KE at `KE0`, KL at
`KL0`, M at `M0`, T at `T0`, beta at `BETA0`, exp(G_C) at `EG0`. Every thread moves one column
of a matrix over a stride of rows (consecutive threads, consecutive words: coalesced global
accesses; consecutive banks of the 129-word-stride tiles: conflict-free shared ones), `UNROLL`
rows' loads in flight before their stores; or (`load_wide`, kda_bwd_pieces_ld VLOAD=1) by
16-byte loads, all of a thread's in flight at once, the same words into the same tiles.

Two more layouts (session 31), both moved by bulk copies of shared-memory images: the gate's
tiles for piece 3 (`gtile`, `GateStore` and `load_gates`: plan "tc6", 0.964x tc5's time) and
the pieces' tiles as an image (`pimg`, `store(image=True)` and `load_image`: plan "tc8", no
gain over "tc7"; docs/PERFORMANCE.md "Session 31").
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import tirxh.lang as T

if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
import kda_bwd as BW  # noqa: E402 - after the path that finds it
import kda_bwd_reverse as BR  # noqa: E402
from kda_chunk import C, K, unpack  # noqa: E402

KE0 = 0
KL0 = KE0 + C * K
M0 = KL0 + C * K
T0 = M0 + C * C
BETA0 = T0 + C * C
EG0 = BETA0 + C
WORDS = EG0 + K
THREADS = 256
UNROLL = 8

# The image layout (plan "tc8"): the same values where the prep's shared memory holds them, so
# the pieces launch loads them by three bulk copies (`load_image`): KE and KL as their [C, K + 1]
# tiles (padding words left zero), M and T back to back, then beta and exp(G_C).
IKE0 = 0
IKL0 = IKE0 + C * (K + 1)
IM0 = IKL0 + C * (K + 1)
IT0 = IM0 + C * C
IBETA0 = IT0 + C * C
IEG0 = IBETA0 + C
IWORDS = IEG0 + K


def _matrices(sm, image=False):
    """(offset, shared tile, columns, row stride) of each stored matrix (all C rows)."""
    if image:
        return [(IKE0, sm.ke, K, K + 1), (IKL0, sm.kl_, K, K + 1), (IM0, sm.m, C, C),
                (IT0, sm.t, C, C)]
    return [(KE0, sm.ke, K, K), (KL0, sm.kl_, K, K), (M0, sm.m, C, C), (T0, sm.t, C, C)]


def _passes(cols):
    """The thread's column and first row, and the rows a pass covers, for `cols` columns."""
    per = THREADS // cols
    return T.tid.x & (cols - 1), T.tid.x // cols, per


def _vectors(sm, image=False):
    """(offset, shared vector, length): beta and exp(G_C)."""
    return [(IBETA0 if image else BETA0, sm.beta, C), (IEG0 if image else EG0, sm.eg, K)]


def store(sm, hc, ptile, image=False, roll=False):
    """The prep's tiles of (chunk, head) `hc` from shared memory into `ptile` (after the prep's
    last barrier; reads only); `image`: in the image layout (`IWORDS` a chunk and head);
    `roll`: each matrix's passes a runtime loop (``.pragma "nounroll"``: one body of UNROLL
    rows instead of 2 or 4, the same words)."""
    base = hc * (IWORDS if image else WORDS)
    for off, tile, cols, stride in _matrices(sm, image):
        _store_matrix(tile, cols, ptile, base + off, stride, roll)
    if image:   # the tiles' padding words, zero (the bulk copies read every word)
        with T.if_(T.tid.x < 2 * C):
            r = T.tid.x & (C - 1)
            pad = base + IKE0 + (T.tid.x >> 6) * (IKL0 - IKE0) + r * (K + 1) + K
            T.ptx.st.global_.f32(ptile.at(pad), 0.0)
    for off, vec, n in _vectors(sm, image):
        with T.if_(T.tid.x < n):
            T.ptx.st.global_.f32(ptile.at(base + off + T.tid.x),
                                 T.ptx.ld.shared.f32(vec.at(T.tid.x)))


def _store_matrix(tile, cols, dst, at, stride, roll=False):
    """The C x `cols` shared `tile` into `dst` from element `at`, rows `stride` words apart
    (`store`'s passes: consecutive threads on consecutive columns, UNROLL rows' shared loads
    before their global stores; `roll`: the passes a runtime loop)."""
    col, r0, per = _passes(cols)
    with T.range(C // per // UNROLL, unroll=1 if roll else None) as i8:
        rows = [r0 + per * (i8 * UNROLL + u) for u in range(UNROLL)]
        vals = [T.ptx.ld.shared.f32(tile.at(r, col)) for r in rows]
        for r, x in zip(rows, vals):
            T.ptx.st.global_.f32(dst.at(at + r * stride + col), x)


def _load_matrix(tile, base, cols, ptile, off=None):
    """The C x `cols` matrix whose words start at `ptile` element `base` (+ `off`, a Python int
    added inside each address) into `tile`."""
    col, r0, per = _passes(cols)
    with T.range(C // per // UNROLL) as i8:
        rows = [r0 + per * (i8 * UNROLL + u) for u in range(UNROLL)]
        vals = [T.ptx.ld.global_.f32(ptile.at((base if off is None else base + off)
                                              + r * cols + col)) for r in rows]
        for r, x in zip(rows, vals):
            T.ptx.st.shared.f32(tile.at(r, col), x)


def load(sm, hc, ptile):
    """`store`'s words of (chunk, head) `hc` back into the same shared tiles (the caller's
    barrier publishes them)."""
    base = hc * WORDS
    for off, tile, cols, _ in _matrices(sm):
        _load_matrix(tile, base, cols, ptile, off)
    for off, vec, n in _vectors(sm):
        with T.if_(T.tid.x < n):
            T.ptx.st.shared.f32(vec.at(T.tid.x),
                                T.ptx.ld.global_.f32(ptile.at(base + off + T.tid.x)))


def load_wide(sm, hc, ptile, ck, y):
    """`load`'s words and `stage`'s dO (kda_bwd_pieces_ld VLOAD=1) by 16-byte global loads,
    every one of the thread's 30 in flight before its first shared store (`_wide`). Why: `load`
    issues 97 scalar loads a thread in dependent rounds of 8 and `stage` 32 two-byte loads in
    rounds of 8, about 16 global round trips: 9.47 us of a 42.5 us CTA (session 36's profile,
    H100, T8192 H16; one 8-warp CTA an SM, its phases serial, so the latency is exposed). The
    same words in the same shared locations (the caller's barrier publishes them).

    The body is a one-trip runtime loop (``.pragma "nounroll"``): straight-line, ptxas filled
    the loads' latency with the products' address arithmetic hoisted above the barrier (by a
    rough count of the SASS, 34 registers written before it and read after it; 20 in the loop,
    17 with `load`'s loops) and spilled 16 bytes in the products; in the loop it does not (255
    registers, no spills, as with `load`)."""
    with T.range(1, unroll=1):
        _wide(sm, hc, ptile, ck, y)


def _wide(sm, hc, ptile, ck, y):
    """`load_wide`'s loads, then its stores: eight ``ld.global.nc.v4.f32`` of KE and of KL, four
    of M and of T (`_quads`), one ``ld.global.nc.f32`` of beta and of exp(G_C) (every thread
    loads a word inside the vector; n threads store it), four ``ld.global.nc.v4.b32`` of dO
    (`_do_chunks`; rows past the sequence read the last row, `_Chunk.row`, and store zeros):
    114 registers of values at the launch's start, where little else is live."""
    base = hc * WORDS
    tiles = [(tile, r, c, T.ptx.ld.global_.nc.v4.f32(ptile.at(base + off + r * cols + c)))
             for off, tile, cols, _ in _matrices(sm) for r, c in _quads(cols)]
    vecs = [(vec, n, T.ptx.ld.global_.nc.f32(ptile.at(base + off + (T.tid.x & (n - 1)))))
            for off, vec, n in _vectors(sm)]
    rows = [(r, c, T.ptx.ld.global_.nc.v4.b32(y.at(ck.row(r) + c))) for r, c in _do_chunks()]
    for tile, r, c, xs in tiles:
        _put(tile, r, c, list(xs))
    for vec, n, x in vecs:
        T.ptx.st.shared.f32(vec.at(T.tid.x & (n - 1)), x, pred=T.tid.x < n)
    for r, c, words in rows:
        xs = [x for w in words for x in unpack(T.ptx.selp.b32(w, 0, r < ck.nv))]
        _put(sm.do, r, c, xs)


def _quads(cols):
    """(row, first column) of each of this thread's 16-byte pieces of a C x `cols` f32 matrix
    (`cols` 64 or 128, S = `cols` / 32 segments of 32 columns a row): warp w's j-th piece is
    the matrix's unit u = w + 8 j of 4 rows by 32 columns (row block b = u / S, segment
    s = u % S = w % S), lane l row 4 b + l / 8, columns 32 s + 4 (l % 8) .. (so the thread's
    rows step by 32 / S). A quarter warp reads one 128-byte line (coalesced), and at each of
    the four scalar stores into a 129-word-stride tile the bank (row + col) mod 32 = (l / 8 +
    4 (l % 8) + const) mod 32 differs in every lane (conflict-free; a quarter warp's 16-byte
    stores into a 64-word-stride tile are one 128-byte line)."""
    segs = cols // 32
    w, lane = T.tid.x >> 5, T.tid.x & 31
    row = ((w >> (segs.bit_length() - 1)) << 2) + (lane >> 3)
    col = ((w & (segs - 1)) << 5) + ((lane & 7) << 2)
    step = 4 * (8 // segs)           # rows between the warp's units: 8 warps a round
    return [(row + step * j, col) for j in range(C * cols // 4 // THREADS)]


def _do_chunks():
    """(row, first column) of each of this thread's 16-byte chunks of dO's [C, K] bf16 rows:
    warp w's j-th covers 8 rows and 32 columns (unit w + 8 j: row block b = w / 4 + 2 j,
    segment s = w % 4), lane l row 8 b + l / 4, columns 32 s + 8 (l % 4) .. Four lanes read 64
    contiguous bytes (two full sectors), and at each of the eight scalar stores the bank
    (l / 4 + 8 (l % 4) + const) mod 32 differs in every lane."""
    w, lane = T.tid.x >> 5, T.tid.x & 31
    row = ((w >> 2) << 3) + (lane >> 2)
    col = ((w & 3) << 5) + ((lane & 3) << 3)
    return [(row + 16 * j, col) for j in range(C * K // 8 // THREADS)]


def _put(tile, r, c, xs):
    """f32 values `xs` into `tile` at row r, columns c ..: one ``st.shared.v4.f32`` each 4 where
    the row stride keeps 16 bytes aligned (M, T: 64 words), else one ``st.shared.f32`` each
    (KE, KL, dO: 129 words)."""
    at = tile.at(r, c)
    if tile.shape[-1] % 4 == 0:
        for i in range(0, len(xs), 4):
            T.ptx.st.shared.v4.f32(at + 4 * i, xs[i:i + 4])
    else:
        for e, x in enumerate(xs):
            T.ptx.st.shared.f32(at + 4 * e, x)


def next_wave(stride):
    """(hc + `stride`, whether that CTA is in the grid): the (chunk, head) of the CTA that
    starts about when this one ends (hc = ctaid.y H + ctaid.x is the launch order, and
    `stride` CTAs are resident at once: one an SM), for the launches' NEXT prefetches."""
    nxt = T.ctaid.y * T.nctaid.x + T.ctaid.x + stride
    return nxt, nxt < T.nctaid.x * T.nctaid.y


def chunk_of(chunk_tok, chunk_rows, hc):
    """The chunk of (chunk, head) `hc` as kda_bwd_reverse._Chunk (its `row` clamps to the
    sequence as the loads do), its chunk index clamped to the grid so that the chunk map's
    loads stay inside it when `hc` is past the last CTA."""
    H = T.nctaid.x
    c = T.ptx.min.u32(hc / H, T.nctaid.y - 1)
    return BR._Chunk(hc - c * H, H, T.ptx.ld.global_.nc.u32(chunk_tok.at(c)),
                     T.ptx.ld.global_.nc.u32(chunk_rows.at(c)), c, 0)


def prefetch_runs(runs, ok):
    """``prefetch.global.L2`` of every line of `runs`, (f32 tensor, first element, lines) each
    starting on a 128-byte line, as one concatenated run of lines: thread t takes lines t +
    256 j, one instruction a (j, run) pair that meets (predicated on the line lying in that
    run), all predicated on `ok` too. Used by the launches' NEXT prefetches (the CTA one wave
    ahead: kda_bwd_pieces_ld, kda_bwd_local_lg)."""
    t = T.tid.x
    total = sum(n for _, _, n in runs)
    for j in range(T.cdiv(total, THREADS)):
        lo, hi = j * THREADS, (j + 1) * THREADS
        q_ = t + lo
        first = 0
        for ptr, base, n in runs:
            if first < hi and first + n > lo:
                live = ok
                if first > lo:
                    live = live & (q_ >= first)
                if first + n < hi:
                    live = live & (q_ < first + n)
                line = q_ if first == 0 else q_ - first
                T.ptx.prefetch.global_.L2(ptr.at(base + (line << 5)), pred=live)
            first += n


def load_t(tile, hc, ptile, image=False):
    """T alone (the words at `T0`, or `IT0` in the image layout) of (chunk, head) `hc` into
    `tile` (kda_bwd_local_ld: piece 3's own inverse replaced by the prep's; the caller's
    barrier publishes it)."""
    _load_matrix(tile, hc * IWORDS + IT0 if image else hc * WORDS + T0, C, ptile)


def load_image(sm, hc, ptile, bar):
    """Thread 0: the three bulk copies of (chunk, head) `hc`'s image into the prep's own tiles
    on `bar` (`_bulk_in`; kda_bwd_pieces_ld BULK=1: KE and KL, M and T, beta and exp(G_C) are
    each back to back in kda_bwd_reverse's shared memory; tests/zoo/test_kda_bwd_prep_tiles.py
    checks it)."""
    _bulk_in(bar, ptile, hc * IWORDS, [(sm.ke.at(0, 0), IKE0, IM0 - IKE0),
                                       (sm.m.at(0, 0), IM0, IBETA0 - IM0),
                                       (sm.beta.at(0), IBETA0, IWORDS - IBETA0)])


def _bulk_in(bar, src, base, ranges):
    """Thread 0: ``mbarrier.arrive.expect_tx`` on `bar` with the ranges' bytes, then one bulk
    copy a range ((shared destination, word offset from `base` in `src`, words))."""
    bulk_load = T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"]
    with T.if_(T.tid.x == 0):
        bar.arrive_expect_tx(sum(words for _, _, words in ranges) * 4)
        for dst, off, words in ranges:
            bulk_load(dst, src.at(base + off if off else base), words * 4, bar)


def one_shot_mbarrier():
    """An mbarrier for one phase of bulk copies, initialised by thread 0 (arrival count 1:
    its own ``arrive.expect_tx``); the caller's barrier publishes the initialisation before
    any thread waits on it."""
    full = T.mbarrier(1)
    with T.if_(T.tid.x == 0):
        full[0].init(1)
        T.ptx.fence.mbarrier_init.release.cluster()
    return full[0]


def stage(tile, ck, y):
    """y (dO) of the chunk into `tile` as f32 (rows past the sequence zero): thread t, column
    t % 128, rows 32 (t / 128) ..; the values kda_bwd_reverse._decayed stages."""
    col = T.tid.x & (K - 1)
    i0 = (T.tid.x >> 7) * (C // 2)
    with T.range(C // 2 // UNROLL) as i8:
        rows = [i0 + i8 * UNROLL + u for u in range(UNROLL)]
        vals = [BW._bf16(y, ck.row(i) + col) for i in rows]
        for i, x in zip(rows, vals):
            T.ptx.st.shared.f32(tile.at(i, col), T.ptx.selp.f32(x, 0.0, i < ck.nv))


def outputs(H, chunks):
    """A zeroed `ptile` for `chunks` chunks of H heads."""
    return {"ptile": np.zeros((chunks, H, WORDS), np.float32)}


def image_outputs(H, chunks):
    """A zeroed `pimg` (the image layout's `ptile`) for `chunks` chunks of H heads."""
    return {"pimg": np.zeros((chunks, H, IWORDS), np.float32)}


# --- the gate's tiles for piece 3 (plan "tc6") ---------------------------------------------------
#
# Piece 3 (kda_bwd_local_tc) begins with the same norms and gate phases as the prep
# (kda_bwd_local._norms, ._gate on the same inputs: the same f32 words), 25.9% of its CTA time
# in session 30's profile. Both kernels keep KL, KD, QL and G as four [C, K + 1] f32 tiles one
# after another from the start of shared memory, and rn [2, C] with beta [C] right after each
# other (tests/zoo/test_kda_bwd_gate_tiles.py checks both layouts), so each range moves as one
# bulk copy of its shared-memory image, padding column included (never read): `gtile`
# [chunks, H, GATE_WORDS]. The block references r_a are G's rows 0, 16, 32, 48
# (kda_bwd_local._gate stores the same register into both), so piece 3 takes them from G.

GATE_TILES = 4 * C * (K + 1)     # KL, KD, QL, G
GATE_VECS = 2 * C + C            # rn (rk, scale rq) and beta
GATE_WORDS = GATE_TILES + GATE_VECS
# With P (plan "tc36": kda_bwd_prep3g PSTORE=1, kda_bwd_local_lg PLOAD=1): the prep's P, the
# chunk's strict-lower pairs (zeros on and above the diagonal), row-major at GATE_P0 after the
# gate's words, so a (chunk, head) takes GATE_WORDS_P (a line-aligned 16 KB more: the
# bulk copies' addresses stay 16-byte aligned); the plans without P keep GATE_WORDS.
GATE_P0 = GATE_WORDS
GATE_WORDS_P = GATE_P0 + C * C


def gate_words(p=False):
    """A (chunk, head)'s words in `gtile`: with P (`p`) or without."""
    return GATE_WORDS_P if p else GATE_WORDS


class GateStore:
    """The prep's half (kda_bwd_prep3g): `store` after the gate's barrier (every thread fenced
    its writes for the copy engine before it: ``fence.proxy.async.shared::cta``), `stored`
    before anything overwrites the tiles (the caller's barrier after it publishes the wait)."""

    def __init__(self, hc, gtile, p=False):
        self.base, self.gtile = hc * gate_words(p), gtile

    def pad(self, sm):
        """Threads 0..C-1 zero the padding word of their row of each tile (before the norms):
        the copy reads every word of the image, and the gate writes no padding."""
        with T.if_(T.tid.x < C):
            for tile in (sm.kl, sm.kd, sm.ql, sm.g):
                T.ptx.st.shared.f32(tile.at(T.tid.x, K), 0.0)

    def store(self, sm):
        """Thread 0: the two bulk copies into `gtile`, one bulk async-group."""
        bulk_store = T.ptx["cp.async.bulk.global.shared::cta.bulk_group"]
        with T.if_(T.tid.x == 0):
            for src, off, words in _gate_ranges(sm):
                bulk_store(self.gtile.at(self.base + off if off else self.base), src,
                           words * 4)
            T.ptx.cp.async_.bulk.commit_group()

    def store_p(self, sm, roll=False):
        """Every thread: the prep's P (sP, [C, K + 1] words a row: not the layout of piece 3's
        sP, so not a bulk copy of its image) at `GATE_P0`, row-major, after the prep's last
        barrier (reads only; nothing after the inverse writes sP); `roll`: `store`'s."""
        _store_matrix(sm.p, C, self.gtile, self.base + GATE_P0, C, roll)

    def stored(self):
        """Thread 0 waits until the group is complete (read and written: nothing is left in
        flight when the CTA exits)."""
        with T.if_(T.tid.x == 0):
            T.ptx.cp.async_.bulk.wait_group(0)


def _gate_ranges(sm):
    """(shared start, word offset in a chunk and head's `gtile`, words): the two ranges."""
    return [(sm.kl.at(0, 0), 0, GATE_TILES), (sm.rn.at(0, 0), GATE_TILES, GATE_VECS)]


def load_gates(sm, hc, gtile, bar, p=False):
    """Thread 0: `GateStore`'s two bulk copies of (chunk, head) `hc` back into kda_bwd_local's
    tiles (the same layout) on `bar` (`_bulk_in`); `p`: `gtile` has P's words too."""
    _bulk_in(bar, gtile, hc * gate_words(p), _gate_ranges(sm))


def load_p(tile, hc, gtile):
    """`GateStore.store_p`'s P of (chunk, head) `hc` into `tile` (kda_bwd_local_lg PLOAD=1:
    piece 3's pair products replaced by the prep's; the caller's barrier publishes it)."""
    _load_matrix(tile, hc * GATE_WORDS_P + GATE_P0, C, gtile)


def refs_from_g(sm, blk):
    """Threads 0..K-1, channel d: the block references r_a = G[a * blk, d] into sm.ref."""
    d = T.tid.x
    with T.if_(d < K):
        for a in range(C // blk):
            T.ptx.st.shared.f32(sm.ref.at(a, d), T.ptx.ld.shared.f32(sm.g.at(a * blk, d)))


def gate_outputs(H, chunks, p=False):
    """A zeroed `gtile` for `chunks` chunks of H heads (`p`: with P's words)."""
    return {"gtile": np.zeros((chunks, H, gate_words(p)), np.float32)}


def synthetic(rng, H, chunks, names=("ptile", "gtile"), p=False):
    """The stored tiles of a timing case (a plan's later launch profiled or timed alone, with
    no prep launch before it): each of `names` at its layout's size, uniform in [-1, 0) (finite
    exponentials wherever a launch takes one; the time does not depend on the values); `p`:
    `gtile` with P's words (plan "tc36")."""
    words = {"ptile": WORDS, "pimg": IWORDS, "gtile": gate_words(p)}
    return {n: rng.random((chunks, H, words[n]), np.float32) - np.float32(1) for n in names}
