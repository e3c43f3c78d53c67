"""Kimi Delta Attention forward at H64 (issue 18, session 8): `kda_fwd_slim`'s v64ws8l (8 prep +
4 state warps, BV = 64, the batched prep with the gate as a runtime loop; kda_fwd.py has the
algorithm and the math) with the prep's path shortened in two ways that add no code:

- AHEAD = 1: the norms of chunk c + 1 (rk, rq and beta: kda_chunk.norms) are made by prep warps
  4 .. 7 while warps 0 .. 3 invert chunk c's diagonal blocks and the blocks below them (the
  only warps those two phases use: warps 4 .. 7 waited at the barrier). The norms phase and
  one CTA-wide barrier leave every chunk's prep; the two inverse phases meet at a named
  barrier of their own 128 threads. beta gets a copy per stage (chunk c's inverse still reads
  its own while chunk c + 1's is written); chunk 0's norms are made before the loop.
- BLOCKS = 2: the A and M blocks (phase 4) in two warp-uniform paths instead of one branch per
  warp: each warp's row block a is a register, and its blocks (a, b <= a) are computed side by
  side (the dependent mma chains overlap as in v64ws8l) for b = 0 .. 3 (warps of row blocks 2
  and 3) or b = 0 .. 1 (row blocks 0 and 1) in a runtime loop over the channel steps; a block
  past the warp's diagonal is computed and not stored. 9.2 KB of SASS where the unrolled form
  has 23.4 KB, for a walk ~0.3K cycles longer (kda_chunk.blocks_slim, one block a trip, made
  the chains follow each other: +1.0K, and v64ws8m was measured 3.7% slower than v64ws8l).

Work split, inputs, outputs and numerics are kda_fwd's: CTA (value slice of 64 columns, head,
sequence), the state S^T in the registers of the 4 state warps, chunks of 64 tokens through a
two-stage TMA ring handed over on mbarriers; o [B, T, H, V] bf16 and ht [N, H, K, V] f32.
docs/TUNING.md ("H64: the prep's path", session 8) has the model and the predictions.

`kda_fwd_pair` (session 10): a head's two value-slice CTAs in a 2-CTA cluster prepare each
chunk once, each CTA every other chunk, stored into the peer's stage by remote shared stores
(the prep, which the state warps wait for ~59% of the time at H64, was made twice per head);
docs/TUNING.md ("H64: one prep per head") has the model and the predictions. Session 11 (it
measured 0.685 ms, not 0.58: the copy sat on each CTA's own chain) adds OVERLAP (the own state
warps take the chunk beside the copy), TRI (M and Tb sent without their zero blocks) and WORK
(the raw q, k, g through a working buffer): docs/PERFORMANCE.md, "Session 11, branch kdapair2".

Tags: linear-attention, chunked-scan, mma-sync, tma, mbarrier-pipeline, swizzle-128b,
state-in-registers, fused-gate, varlen, warp-specialization
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
import kda_chunk as P  # noqa: E402 - after the path that finds it
import kda_fwd as F  # noqa: E402
from kda_chunk import C, K, V, ld4, mma  # noqa: E402

TAGS = ("linear-attention", "chunked-scan", "mma-sync", "tma", "mbarrier-pipeline",
        "swizzle-128b", "state-in-registers", "fused-gate", "varlen", "warp-specialization")


# --- phase 4 in two warp-uniform paths (BLOCKS = 2) --------------------------------------------

def blocks_wide(sm, ck, ln, NW):
    """The A/M blocks with 8 prep warps (one unit per warp: kda_chunk.units), as two
    warp-uniform paths: x = warp & 1 (A from KL, or M from QL) and the row block
    a = 3 - warp / 2 are registers; warps with a >= 2 compute blocks b = 0 .. 3 side by side,
    warps with a <= 1 blocks 0 .. 1 (`_wide`); a block past the diagonal is not stored."""
    if NW != 8:
        raise ValueError(f"blocks_wide: {NW} prep warps; it takes 8 (one A/M unit per warp)")
    warp = T.tid.x >> 5
    xq = warp & 1                                    # 0: A (KL, beta, f32), 1: M (QL, bf16)
    pa = T.ptx.selp.u32(ck.q, ck.k, xq == 1)        # KL or QL
    a = 3 - (warp >> 1)                              # units(): row blocks 3, 3, 2, 2, 1, 1, 0, 0
    arow = a << 11                                   # 16 rows x 128 bytes
    unit = (sm, ck, ln, pa, a, arow, xq)
    with T.if_(a >= 2, uniform=True):
        _wide(*unit, amin=2, amax=3)
    with T.if_(a < 2, uniform=True):
        _wide(*unit, amin=0, amax=1)


def _wide(sm, ck, ln, pa, a, arow, xq, amin, amax):
    """Blocks (a, b) for b = 0 .. amax of a warp whose row block a is in [amin, amax], side by
    side in a runtime loop over the 8 channel steps, two a trip (``.pragma "nounroll"``: two
    steps' code, and each trip's mma pairs of the amax + 1 blocks independent of each other:
    unrolled, ptxas scheduled them block after block, doubling the chain). KD_b's fragments are scaled
    by F_ab (sF row PAIRS.index((a, b)) = (a - 1) + b (5 - b) / 2) where b < a: always for
    b < amin (no select), by a select of bf16 1.0 on the diagonal for amin <= b < amax, and
    never for b = amax (the diagonal, or a block past it that is not stored)."""
    one = 0x3F803F80                                 # bf16x2 (1.0, 1.0)
    bs = range(amax + 1)
    diag = {b: a == b for b in bs}
    fbase = {}
    for b in bs:
        if b < amax:
            pair = (a - 1) + ((b * (5 - b)) >> 1)
            if b >= amin:
                pair = T.ptx.selp.u32(0, pair, diag[b])
            fbase[b] = sm.f.ptr() + pair * (2 * K) + (ln.t << 2)
    beta = [T.ptx.ld.shared.f32(sm.beta.at((a << 4) + ln.g + 8 * hh)) for hh in range(2)]
    acc = {b: [T.fragment(T.f32, 4, init=0.0) for _ in range(2)] for b in bs}
    with T.range(4, unroll=1) as s2:                 # channels 32 s2 .. 32 s2 + 31: 2 steps
        half = (s2 >> 1) << 13                       # the 64-channel half's tile (8 KB)
        for j in range(2):                           # step s = 2 s2 + j
            cp = ((s2 & 1) << 1) + j
            af = ld4(ln.at(pa, "A", cp) + half + arow, 0, 0)
            pb = ln.at(ck.g, "B", cp) + half
            for b in bs:
                bf = ld4(pb, 0, 16 * b)
                if b < amax:
                    fa = fbase[b] + (s2 << 6)
                    f = [T.ptx.ld.shared.b32(Addr(fa, 32 * j + 16 * i)) for i in range(2)]
                    if b >= amin:
                        f = [T.ptx.selp.b32(one, w, diag[b]) for w in f]
                    bf = [T.ptx.mul.rn.bf16x2(bf[i], f[i & 1]) for i in range(4)]
                mma(acc[b][0], af, bf[0:2])
                mma(acc[b][1], af, bf[2:4])
    for b in bs:
        with T.if_(a >= b, uniform=True) if b > amin else contextlib.nullcontext():
            P.block_out_slim(sm, ln, acc[b], a, arow, b, xq, diag[b], beta)


# --- the kernel --------------------------------------------------------------------------------

class _SmemAhead(F._SmemWS):
    """kda_fwd's warp-specialized shared memory with a second sBeta (`beta1`): with AHEAD the
    norms of chunk c + 1 write its beta while chunk c's inverse reads chunk c's."""

    SLOTS = F._SmemWS.SLOTS + ("beta",)

    def __init__(self, BV: int):
        super().__init__(BV)
        self.beta1 = T.shared(T.f32, (P.C,), name="sBeta1", align=16, dynamic=True)


@T.kernel(grid=F._grid, block=lambda BV=64, PREP=8: F._block(BV, 0, PREP), min_blocks=1)
def kda_fwd_ahead(q_map: T.tensormap, k_map: T.tensormap, g_map: T.tensormap,
                  v_map: T.tensormap, q: T.gptr[T.bf16], k: T.gptr[T.bf16],
                  g_raw: T.gptr[T.bf16], v: T.gptr[T.bf16], beta: T.gptr[T.bf16],
                  A_log: T.gptr[T.f32], dt_bias: T.gptr[T.f32], h0: T.gptr[T.f32],
                  cu_seqlens: T.gptr[T.s32], order: T.gptr[T.s32], o: T.gptr[T.bf16],
                  ht: T.gptr[T.f32], Trow: T.u32, BV: T.const = 64, PREP: T.const = 8,
                  AHEAD: T.const = 1, BLOCKS: T.const = 2):
    """`kda_fwd_slim` (BV 64, 8 prep + 4 state warps, the gate loop) with AHEAD = 1 the next
    chunk's norms beside the inverse and with BLOCKS = 2 the A/M blocks in two warp-uniform
    paths (the module docstring says why). A kernel of its own: kda_fwd_slim's PTX is
    unchanged."""
    F._forward_ws((q_map, k_map, g_map, v_map), beta, A_log, dt_bias, h0, cu_seqlens, order, o,
                  ht, Trow, BV, PREP, BATCH=8, slim=True,
                  blocks=blocks_wide if BLOCKS == 2 else None, ahead=bool(AHEAD),
                  smem=_SmemAhead)


# --- cases -------------------------------------------------------------------------------------

VARIANTS = {"v64ws8n": dict(BV=64, PREP=8, AHEAD=0, BLOCKS=2),
            "v64ws8p": dict(BV=64, PREP=8, AHEAD=1, BLOCKS=0),
            "v64ws8q": dict(BV=64, PREP=8, AHEAD=1, BLOCKS=2)}
CONTROL = "v64ws8l"     # kda_fwd_slim's variant these are timed beside (kda_bench.sh wsd)


def constraints(B, T_, H, lens=None, BV=64, PREP=8, AHEAD=1, BLOCKS=2):
    if (BV, PREP) != (64, 8):
        return [f"BV={BV}, PREP={PREP}: kda_fwd_ahead is the 8 prep + 4 state warp form "
                f"(BV = 64, PREP = 8): the look-ahead uses prep warps 4 .. 7, blocks_wide one "
                f"A/M unit per warp"]
    out = []
    if AHEAD not in (0, 1):
        out.append(f"AHEAD={AHEAD} must be 0 or 1 (chunk c + 1's norms beside chunk c's inverse)")
    if BLOCKS not in (0, 2):
        out.append(f"BLOCKS={BLOCKS} must be 0 (kda_chunk.blocks, unrolled) or 2 (blocks_wide)")
    return out + F.constraints(B, T_, H, lens, BV=BV, PREP=PREP, BATCH=8)


def _large(name, lens=None, variants=None) -> list:
    """T8192 H64 (or a pack at H64) with each variant (of `variants`, default VARIANTS); tagged
    "alt" (kda_bench.sh's main group times kda_fwd's MAIN only)."""
    return [T.case(f"{name}_h64_{v}", small=False, tags=("alt",), B=1, T_=8192, H=64,
                   lens=lens, **params) for v, params in (variants or VARIANTS).items()]


_COMMON = dict(F._COMMON, constraints=constraints)

SUITE = T.suite(
    kda_fwd_ahead, baselines=F._baselines(False), **_COMMON,
    cases=[
        # one chunk: the prologue's norms only (the look-ahead's c + 1 < nchunks never holds)
        T.case("t40_h1_v64ws8q", B=1, T_=40, H=1, AHEAD=1, BLOCKS=2),
        # three chunks (64, 64, 22) with saturated gates: chunk 1's norms into stage 1 and
        # chunk 2's into stage 0 (after the state warps released chunk 0) beside the inverse
        T.case("t150_h1_v64ws8q_deep", B=1, T_=150, H=1, AHEAD=1, BLOCKS=2, gate="deep"),
        # the look-ahead with the unrolled blocks: two rows of a chunk and a 1-token tail over
        # two value slices (the tail's norms made ahead, its 63 masked rows)
        T.case("b2_t65_h1_v64ws8p_slow", B=2, T_=65, H=1, AHEAD=1, BLOCKS=0, gate="slow"),
        # the two block paths alone: two chunks (64 + 36)
        T.case("t100_h1_v64ws8n", B=1, T_=100, H=1, AHEAD=0, BLOCKS=2),
        *_large("t8192"),
    ])

SUITE_VARLEN = T.suite(
    kda_fwd_ahead, baselines=F._baselines(True), **_COMMON,
    cases=[
        # a pack of 3 (2, 1 and 1 chunks in one row): the look-ahead within the first
        # sequence only, neighbours' rows masked in the norms made ahead
        T.case("pack_100_8_30_v64ws8q", B=1, T_=138, H=1, lens=(100, 8, 30), AHEAD=1,
               BLOCKS=2, gate="deep"),
        *_large("pack6", lens=F.PACK6),
        *_large("pack8x1024", lens=F.PACK8),
    ])


# --- kda_fwd_pair: the two value slices of a head share the prep (session 10) ------------------

COPY_BYTES = 3 * 2 * P.TILE + 2 * (64 * 64 * 2) + K * 4   # KE, QG, KLL tiles, M, Tb, 2^G_63
COPY_BYTES_TRI = COPY_BYTES - 2 * 6 * (16 * 16 * 2)        # TRI: not M's, Tb's 6 upper blocks


class _SmemPair(F._SmemWS):
    """kda_fwd's warp-specialized shared memory (two stages) and `pfree`: pfree[s] completes
    when the peer CTA's stage s is free for this CTA's copy of its next chunk (the peer's
    issuer arrives from the other CTA once its state warps left the stage and its ready[s]
    expects the bytes)."""

    def __init__(self, BV: int):
        super().__init__(BV)
        self.pfree = T.mbarrier(2, name="pfree", dynamic=True)


class _SmemPairW(_SmemPair):
    """`_SmemPair` and the working buffer of WORK = 1: the raw q, k, g tiles of this CTA's next
    chunk land in sWq, sWk, sWg (48 KB, on `fullw`) while the state warps still read the stage,
    and the prep works there in place (230,704 B in all: under the 232,448 B a CTA may have)."""

    def __init__(self, BV: int):
        super().__init__(BV)
        sw = dict(align=1024, swizzle=128, dynamic=True)
        self.wq = T.shared(T.bf16, (2, 64, 64), name="sWq", **sw)
        self.wk = T.shared(T.bf16, (2, 64, 64), name="sWk", **sw)
        self.wg = T.shared(T.bf16, (2, 64, 64), name="sWg", **sw)
        self.fullw = T.mbarrier(1, name="fullw", dynamic=True)


class _WorkChunk:
    """kda_chunk.Chunk for the prep of WORK = 1: its q, k, g tiles are the working buffer's."""

    def __init__(self, sm: _SmemPairW, stage, nv):
        self.stage, self.nv = stage, nv
        self.q, self.k, self.g = sm.wq.ptr(), sm.wk.ptr(), sm.wg.ptr()
        self.v = sm.v.ptr() + stage * P.TILE


def _issue_w(sm, maps, row, h, bidx):
    """One thread: the q, k, g tiles of the chunk at token `row` into the working buffer, on
    `fullw` (kda_fwd._issue's loads of q, k and g; the value tile goes to the stage)."""
    q_map, k_map, g_map, _ = maps
    tma = T.ptx["cp.async.bulk.tensor.4d.shared::cluster.global.tile"
                ".mbarrier::complete_tx::bytes"]
    sm.fullw[0].arrive_expect_tx(3 * 2 * P.TILE)
    for buf, tmap in ((sm.wq, q_map), (sm.wk, k_map), (sm.wg, g_map)):
        for hf in range(2):
            tma(buf.ptr() + hf * P.TILE, tmap[64 * hf, h, row, bidx], sm.fullw[0])


def _copy_work(sm, stage, NT):
    """Every prep thread: its 16-byte pieces of the working buffer's KE, QG, KLL tiles into the
    same offsets of `stage`'s (both 1024-aligned: the 128-byte swizzle is the same)."""
    tid = T.tid.x
    for src_buf, dst_buf in ((sm.wq, sm.q), (sm.wk, sm.k), (sm.wg, sm.g)):
        src = src_buf.ptr() + (tid << 4)
        dst = dst_buf.ptr() + stage * (2 * P.TILE) + (tid << 4)
        for i in range(2 * P.TILE // (16 * NT)):
            words = T.ptx.ld.shared.v4.b32(Addr(src, i * 16 * NT))
            T.ptx.st.shared.v4.b32(Addr(dst, i * 16 * NT), words)


def _wait_cluster(bar, parity):
    """``mbarrier.try_wait.parity.acquire.cluster`` in a loop: the arrival came from the peer
    CTA (release at cluster scope), so the acquire is at cluster scope too."""
    with T.loop():
        done = T.ptx.mbarrier.try_wait.parity.acquire.cluster.shared__cta.b64(bar, parity)
        T.break_(done)


def _copy_out(sm, stage, rank, NT, TRI=0):
    """Every prep thread: its 16-byte pieces of the prepared chunk in `stage` (KE, QG, KLL
    tiles, M, Tb, 2^G_63: COPY_BYTES) read from this CTA's shared memory and stored into the
    same addresses of the peer CTA's (``st.shared::cluster.v4``: plain remote stores, published
    by the prep's barrier and one release-at-cluster-scope arrive on the peer's ready[stage];
    ``st.async`` would complete each piece on the barrier itself, 4,096 async operations per
    chunk, which sync_check models one by one).

    TRI = 1 (session 11): of M and Tb only the pieces of the blocks (a, b <= a) the prep
    writes (`_lower_piece`): the blocks above the diagonal are the zeros both CTAs stored at
    the start, so 6 KB of the 66 KB stay home (COPY_BYTES_TRI)."""
    tid = T.tid.x
    vw = sm.view(stage)
    regions = [(buf.ptr() + stage * (2 * P.TILE), 2 * P.TILE, False)
               for buf in (sm.q, sm.k, sm.g)]
    regions += [(vw.m.ptr(), P.TILE, bool(TRI)), (vw.tb.ptr(), P.TILE, bool(TRI)),
                (vw.egl.ptr(), K * 4, False)]
    put = T.ptx.st.shared__cluster.v4.b32
    for base, nbytes, tri in regions:
        src = base + (tid << 4)
        dst = T.ptx.mapa.shared__cluster.u32(src, rank ^ 1)
        for i in range(-(-nbytes // (16 * NT))):
            if tri:
                guard = T.if_(_lower_piece((tid << 4) + i * 16 * NT))
            elif nbytes < 16 * NT * (i + 1):
                guard = T.if_((tid << 4) + i * 16 * NT < nbytes)
            else:
                guard = contextlib.nullcontext()
            with guard:
                words = T.ptx.ld.shared.v4.b32(Addr(src, i * 16 * NT))
                put(Addr(dst, i * 16 * NT), words)


def _lower_piece(off):
    """Whether the 16-byte piece at byte `off` of a 128-byte-swizzled 64 x 64 bf16 tile lies in
    a block (a, b) with b <= a: row r = off / 128, its logical chunk (off / 16 % 8) ^ (r % 8)
    (kda_chunk.Lanes: chunk ch of row r sits at ch ^ (r % 8)), block column b = chunk / 2, row
    block a = r / 16."""
    row = off >> 7
    chunk = ((off >> 4) & 7) ^ (row & 7)
    return (chunk >> 1) <= (row >> 4)


def _issue_v(sm, v_map, c, stage, row, h, bidx):
    """One thread: chunk c's value tile (this CTA's slice) into `stage` on ready[stage] (one of
    its two arrivals; the other is the peer's, once its copy of the prepared chunk is in)."""
    tma = T.ptx["cp.async.bulk.tensor.4d.shared::cluster.global.tile"
                ".mbarrier::complete_tx::bytes"]
    sm.ready[stage].arrive_expect_tx(P.TILE)
    tma(sm.v.ptr() + stage * P.TILE, v_map[T.ctaid.x * 64, h, row, bidx], sm.ready[stage])


def _forward_pair(maps, beta, A_log, dt_bias, h0, cu_seqlens, order, o, ht, Trow, BLOCKS,
                  OVERLAP=0, TRI=0, WORK=0):
    """The cluster of a head's two value slices (CTA rank r = ctaid.x, stage r its own):

        prep (8 warps), chunks c = r, r + 2, ..:  wait full[r]  norms .. inverse  fence, bar 1
            wait pfree[r] (the peer's stage r free)  remote stores of the prepared chunk into the
            peer's stage r (on its ready[r])  arrive ready[r]
        state (4 warps), every chunk c (stage c % 2):  wait ready[s]  _state_step  arrive
            empty[s]; the issuer then waits empty[s] and loads chunk c + 2: into stage r all
            four tiles (on full[r]), into the other stage the value tile only (on ready[s],
            armed for the peer's copy too) and arrives on the peer's pfree[s]

    Each CTA prepares every other chunk, so a chunk costs (prep + state + load) / 2 where the
    kda_fwd_slim body pays the whole prep (docs/TUNING.md, "H64: one prep per head"). The prep
    is v64ws8l's (BLOCKS = 0: kda_chunk.blocks, 4 blocks side by side) or v64ws8n's (BLOCKS =
    2: blocks_wide).

    OVERLAP = 1 (session 11): the prep arrives on its own ready[r] before the copy, so this
    CTA's state warps take chunk c while the copy reads the stage; the copy's end becomes one
    more arrival (prep thread 0, after the prep barrier) on empty[r], whose count is then
    32 NS + 1, so the issuer's TMA of chunk c + 2 into stage r waits for the copy's reads as
    well as the state's. The own chain loses the copy: (P + max(S, X) + L) / 2 a chunk
    (docs/PERFORMANCE.md, "Session 11, branch kdapair2").

    WORK = 1 (with OVERLAP): the raw q, k, g of the own chunks land in a working buffer
    (`_SmemPairW`, on `fullw`; prep thread 0 loads chunk c + 2 there as soon as the prep of c
    has copied its KE, QG, KLL out of it into stage r), so the TMA and the prep's norms and
    gate of c + 2 run while the state warps still read chunk c; prep thread 0 waits on
    empty[r] only before the barrier ahead of the first write into stage r (factors' 2^G_63),
    then loads the stage's value tile on ready[r] (count NT + 1: its expect_tx), as the
    issuer does for the peer's stage, which is all the issuer loads then. One waiter on
    empty[r], not 256 and not the issuer too: the barrier passes the order on, and every wait
    happens before the next phase completes, which lets sync_check take the waits in order
    (with a second waiter its explorer ran past its bound)."""
    q_map, k_map, g_map, v_map = maps
    BV, PREP, NS = 64, 8, 4
    NT = 32 * PREP
    regs = F.WS_REGS[BV, PREP]
    sm = _SmemPairW(BV) if WORK else _SmemPair(BV)
    tid = T.tid.x
    rank = T.ctaid.x                                   # cluster (2, 1, 1) over grid x = 2
    copy_frees = OVERLAP    # with OVERLAP the copy's end is one more arrival on empty[rank]
    with T.if_(tid == 0):
        for s in range(2):
            sm.full[s].init(1)
            sm.ready[s].init(T.ptx.selp.u32(NT + WORK, 2, rank == s))  # own: the prep's threads
            sm.empty[s].init(T.ptx.selp.u32(32 * NS + 1, 32 * NS, rank == s) if copy_frees
                             else 32 * NS)
            sm.pfree[s].init(1)
        if WORK:
            sm.fullw[0].init(1)
        T.ptx.fence.mbarrier_init.release.cluster()
    # M and Tb are block lower triangular: the blocks above the diagonal are never written but
    # _copy_out sends whole tiles, so every slot starts as zeros (32 KB, once), before the
    # cluster barrier (the peer's copies into the other stage come after it)
    with T.if_(tid < NT):
        zero = [T.ptx.mov.b32(0)] * 4
        for buf in (sm.m, sm.m1, sm.tb, sm.tb1):
            for i in range(P.TILE // (16 * NT)):
                T.ptx.st.shared.v4.b32(Addr(buf.ptr() + (tid << 4), i * 16 * NT), zero)
    T.ptx.barrier.cluster.arrive.release()
    T.ptx.barrier.cluster.wait.acquire()
    with T.role((tid >> 5) < PREP, dec=regs[0]):
        H, h = T.nctaid.y, T.ctaid.y
        n, start, length, bidx, t0, nchunks = F._sequence(order, cu_seqlens, Trow)
        ln = P.Lanes()
        gl = P.GateLanes(NT, A_log, dt_bias, h)
        rank = T.ctaid.x
        peer_ready = T.ptx.mapa.shared__cluster.u32(sm.ready.buf.ptr(), rank ^ 1) + (rank << 3)
        if WORK:
            with T.if_((tid == 0) & (rank < nchunks)):
                _issue_w(sm, maps, t0 + (rank << 6), h, bidx)
        with T.range((nchunks + 1 - rank) >> 1) as i:
            c = rank + (i << 1)
            par = i & 1
            (sm.fullw[0] if WORK else sm.full[rank]).wait(par)
            nv = T.ptx.min.u32(length - (c << 6), C)
            ck = _WorkChunk(sm, rank, nv) if WORK else P.Chunk(sm, rank, nv)
            vw = sm.view(rank)
            P.norms(vw, ck, beta, start + (c << 6), H, h, PREP, True)
            T.ptx.bar.sync(1, NT)
            P.gate_slim(vw, ck, gl)
            if WORK:            # stage r's first write: the state warps and the copy left c - 2
                with T.if_(tid == 0):                # one waiter; the barrier tells the rest
                    with T.if_(i > 0):
                        sm.empty[rank].wait(par ^ 1)
                    _issue_v(sm, v_map, c, rank, t0 + (c << 6), h, bidx)
            T.ptx.bar.sync(1, NT)
            P.factors(vw, NT)
            T.ptx.bar.sync(1, NT)
            if BLOCKS == 2:
                blocks_wide(vw, ck, ln, PREP)
            else:
                P.blocks(vw, ck, ln, PREP, 4)
            T.ptx.bar.sync(1, NT)
            P.materialize(vw, ck, NT, True)
            P.diag_inverse_slim(vw)
            T.ptx.bar.sync(1, NT)
            P.inverse_blocks(vw, ln)
            T.ptx.fence.proxy.async_.shared__cta()   # in-place writes before the stage's next TMA
            T.ptx.bar.sync(1, NT)
            if WORK:            # KE, QG, KLL into stage r; the working buffer takes chunk c + 2
                _copy_work(sm, rank, NT)
                T.ptx.fence.proxy.async_.shared__cta()   # its reads before the buffer's TMA
                T.ptx.bar.sync(1, NT)
                with T.if_((tid == 0) & (c + 2 < nchunks)):
                    _issue_w(sm, maps, t0 + ((c + 2) << 6), h, bidx)
            if OVERLAP:
                sm.ready[rank].arrive()   # this CTA's state warps take chunk c beside the copy
            _wait_cluster(sm.pfree[rank], par)
            _copy_out(sm, rank, rank, NT, TRI)
            if not OVERLAP:
                sm.ready[rank].arrive()
            T.ptx.bar.sync(1, NT)      # every thread's remote stores, before the one arrive
            with T.if_(tid == 0):
                T.ptx.mbarrier.arrive.release.cluster.shared__cluster.b64(T.sink, peer_ready)
                if copy_frees:         # every thread's reads of stage r done: its TMA may land
                    sm.empty[rank].arrive()
    with T.role((tid >> 5) >= PREP, inc=regs[1]):
        H, h = T.nctaid.y, T.ctaid.y
        n, start, length, bidx, t0, nchunks = F._sequence(order, cu_seqlens, Trow)
        ln = P.Lanes()
        tid = T.tid.x
        rank = T.ctaid.x
        sw = (tid >> 5) - PREP
        vcol0 = T.ctaid.x * BV + (sw << 4)
        hbase = (n * H + h) * (K * V) + vcol0 + ln.g
        issuer = tid == 32 * PREP
        peer_pfree = T.ptx.mapa.shared__cluster.u32(sm.pfree.buf.ptr(), rank ^ 1)

        def load_peer(c, stage, row):   # the value tile into the peer's stage (and its copy)
            _issue_v(sm, v_map, c, stage, row, h, bidx)
            T.ptx.mbarrier.arrive.release.cluster.shared__cluster.b64(
                T.sink, peer_pfree + (stage << 3))

        def load(c, stage):     # chunk c into `stage`: own (all tiles) or the peer's (v only)
            row = t0 + (c << 6)
            with T.if_(stage == rank):
                F._issue(sm, maps, c, stage, row, h, bidx)
            with T.else_():
                load_peer(c, stage, row)

        # WORK: the own stage is loaded by the prep's thread 0 (q, k, g into the working
        # buffer; the value tile after its wait on empty[r]): the issuer serves the peer's stage
        def reload(c, stage):
            if WORK:
                with T.if_(stage != rank):
                    load_peer(c, stage, t0 + (c << 6))
            else:
                load(c, stage)
        with T.if_(issuer):
            for c in range(2):
                with T.if_(c < nchunks):
                    reload(c, c)
        st = [T.fragment(T.f32, 4) for _ in range(16)]
        F._state_io(st, ln, h0, hbase, load=True)
        ring = T.pipeline(2)
        with T.range(nchunks) as c:
            _wait_cluster(sm.ready[ring.stage], ring.phase)   # the peer's stores: cluster scope
            nv = T.ptx.min.u32(length - (c << 6), C)
            ck = P.Chunk(sm, ring.stage, nv)
            F._state_step(sm.view(ring.stage), ck, ln, st, o, start + (c << 6), H, h, vcol0,
                          warp=sw)
            T.ptx.fence.proxy.async_.shared__cta()   # O staged over V before the stage's next TMA
            sm.empty[ring.stage].arrive()
            with T.if_(issuer):     # chunk c + 2 into the stage once every state warp left it
                with T.if_(c + 2 < nchunks) if not WORK else \
                        T.if_((c + 2 < nchunks) & (ring.stage != rank)):
                    sm.empty[ring.stage].wait(ring.phase)
                    reload(c + 2, ring.stage)
            ring.advance()
        F._state_io(st, ln, ht, hbase, load=False)
    # no CTA exits while its peer may still arrive on its barriers or store into it
    T.ptx.barrier.cluster.arrive.release()
    T.ptx.barrier.cluster.wait.acquire()


@T.kernel(grid=F._grid, block=lambda BV=64: F._block(BV, 0, 8), min_blocks=1,
          cluster=(2, 1, 1))
def kda_fwd_pair(q_map: T.tensormap, k_map: T.tensormap, g_map: T.tensormap,
                 v_map: T.tensormap, q: T.gptr[T.bf16], k: T.gptr[T.bf16],
                 g_raw: T.gptr[T.bf16], v: T.gptr[T.bf16], beta: T.gptr[T.bf16],
                 A_log: T.gptr[T.f32], dt_bias: T.gptr[T.f32], h0: T.gptr[T.f32],
                 cu_seqlens: T.gptr[T.s32], order: T.gptr[T.s32], o: T.gptr[T.bf16],
                 ht: T.gptr[T.f32], Trow: T.u32, BV: T.const = 64, BLOCKS: T.const = 0,
                 OVERLAP: T.const = 0, TRI: T.const = 0, WORK: T.const = 0):
    """kda_fwd_slim's v64ws8l prep and state warps (8 + 4, BV = 64; BLOCKS = 2: v64ws8n's A/M
    blocks) with the two value slices of a head in a 2-CTA cluster that prepares each chunk
    once: each CTA prepares every other chunk and stores it into its peer's shared memory
    (`_forward_pair`; OVERLAP = 1: the own state warps start beside the copy; TRI = 1: M and
    Tb copied without their zero blocks; WORK = 1: a working buffer for the raw q, k, g)."""
    _forward_pair((q_map, k_map, g_map, v_map), beta, A_log, dt_bias, h0, cu_seqlens, order,
                  o, ht, Trow, BLOCKS, OVERLAP, TRI, WORK)


# the cluster of a head's two value slices: c with v64ws8l's prep, d with v64ws8n's
PAIR_VARIANTS = {"v64ws8c": dict(BV=64, BLOCKS=0), "v64ws8d": dict(BV=64, BLOCKS=2),
                 # session 11: e the own state beside the copy, f also M and Tb without zeros
                 "v64ws8e": dict(BV=64, BLOCKS=0, OVERLAP=1),
                 "v64ws8f": dict(BV=64, BLOCKS=0, OVERLAP=1, TRI=1),
                 # g: e with the raw q, k, g through a working buffer
                 "v64ws8g": dict(BV=64, BLOCKS=0, OVERLAP=1, WORK=1)}
# what kda_bench.sh wsf times: the new variants beside session 10's measured v64ws8c
WSF_VARIANTS = {v: PAIR_VARIANTS[v] for v in ("v64ws8c", "v64ws8e", "v64ws8f", "v64ws8g")}


def constraints_pair(B, T_, H, lens=None, BV=64, BLOCKS=0, OVERLAP=0, TRI=0, WORK=0):
    if BV != 64:
        return [f"BV={BV}: kda_fwd_pair pairs the two 64-column value slices of a head in a "
                f"cluster; it takes BV = 64"]
    out = []
    if BLOCKS not in (0, 2):
        out.append(f"BLOCKS={BLOCKS} must be 0 (kda_chunk.blocks, v64ws8l's) or 2 (blocks_wide)")
    for name, val in (("OVERLAP", OVERLAP), ("TRI", TRI), ("WORK", WORK)):
        if val not in (0, 1):
            out.append(f"{name}={val} must be 0 or 1")
    if WORK == 1 and OVERLAP != 1:
        out.append("WORK=1 needs OVERLAP=1 (the copy's end is an arrival on empty[r], which the "
                   "prep waits for before it writes stage r)")
    return out or F.constraints(B, T_, H, lens, BV=64, PREP=8, BATCH=8)


_COMMON_PAIR = dict(F._COMMON, constraints=constraints_pair)

SUITE_PAIR = T.suite(
    kda_fwd_pair, baselines=F._baselines(False), **_COMMON_PAIR,
    cases=[
        # one chunk: CTA 0 prepares it for both, CTA 1 prepares nothing (its loop runs 0 trips)
        T.case("t40_h1_v64ws8c", B=1, T_=40, H=1),
        # five chunks (4 x 64 + 3) with saturated gates: CTA 0 prepares 0, 2, 4 into stage 0,
        # CTA 1 prepares 1, 3 into stage 1; each stage refilled twice with the peer's copy
        T.case("t259_h1_v64ws8c_deep", B=1, T_=259, H=1, gate="deep"),
        # two rows (two clusters) of a chunk and a 1-token tail, two heads
        T.case("b2_t65_h2_v64ws8c_slow", B=2, T_=65, H=2, gate="slow"),
        # v64ws8n's A/M blocks: three chunks (64, 64, 22): stage 0 refilled once
        T.case("t150_h1_v64ws8d", B=1, T_=150, H=1, BLOCKS=2),
        # OVERLAP: five chunks (4 x 64 + 3), saturated gates: stage 0 refilled twice after the
        # own state and the copy both left it (empty[0] counts 129 in CTA 0, 128 in CTA 1)
        T.case("t259_h1_v64ws8e_deep", B=1, T_=259, H=1, OVERLAP=1, gate="deep"),
        # OVERLAP and TRI: two rows of a chunk and a 1-token tail (the tail's M and Tb are zero
        # but for row 0: the upper blocks still zero in the peer), and 3 chunks of 1 row
        T.case("b2_t65_h1_v64ws8f_slow", B=2, T_=65, H=1, OVERLAP=1, TRI=1, gate="slow"),
        T.case("t191_h1_v64ws8f_deep", B=1, T_=191, H=1, OVERLAP=1, TRI=1, gate="deep"),
        # WORK: one chunk of 40 (no chunk c + 2 for the working buffer), then five (4 x 64 + 3)
        # with saturated gates: CTA 0's buffer refilled twice, its prep waiting on empty[0]
        T.case("t40_h1_v64ws8g", B=1, T_=40, H=1, OVERLAP=1, WORK=1),
        T.case("t259_h1_v64ws8g_deep", B=1, T_=259, H=1, OVERLAP=1, WORK=1, gate="deep"),
        *_large("t8192", variants=PAIR_VARIANTS),
    ])

SUITE_PAIR_VARLEN = T.suite(
    kda_fwd_pair, baselines=F._baselines(True), **_COMMON_PAIR,
    cases=[
        # a pack of 3 (3, 1 and 1 chunks in one row): one cluster per sequence
        T.case("pack_150_8_30_v64ws8c", B=1, T_=188, H=1, lens=(150, 8, 30), gate="deep"),
        T.case("pack_100_8_30_v64ws8d", B=1, T_=138, H=1, lens=(100, 8, 30), BLOCKS=2),
        # OVERLAP and TRI over a pack: 3 + 2 + 1 chunks (tails of 7, 1 and 5 tokens)
        T.case("pack_135_65_5_v64ws8f", B=1, T_=205, H=1, lens=(135, 65, 5), OVERLAP=1, TRI=1,
               gate="deep"),
        T.case("pack_135_65_5_v64ws8g", B=1, T_=205, H=1, lens=(135, 65, 5), OVERLAP=1, WORK=1,
               gate="deep"),
        *_large("pack6", lens=F.PACK6, variants=PAIR_VARIANTS),
        *_large("pack8x1024", lens=F.PACK8, variants=PAIR_VARIANTS),
    ])
