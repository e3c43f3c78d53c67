"""Attention forward on Hopper (issue 16), FlashAttention-3 style: bf16, head dim 128, causal or
not, grouped-query heads, any sequence length; sm_90a.

Formula: ``O[b, i, h] = sum_j softmax_j(s_ij) V[b, j, h / G]`` with
``s_ij = Q[b, i, h] . K[b, j, h / G] / sqrt(128)`` over keys j < S (j <= i when causal), and
``LSE[b, h, i] = log sum_j exp(s_ij)`` (natural log, for a backward pass). G = H / HKV query heads
share a KV head (GQA; G = 1 is plain multi-head attention).

Layout: Q and O are [B, S, H, 128] bf16, K and V [B, S, HKV, 128] bf16 (token-major, heads
interleaved: what a QKV projection writes), LSE [B, H, S] f32. Each is described to TMA as a 4-D
tensor (d, head, token, batch), so a box of 128 tokens of one head never crosses into the next
batch and out-of-range tokens are zero-filled on load and clipped on store.

Algorithm (docs/TUNING.md has the reasoning and the predicted gain of each step):
- **Tiles**: a tile is 128 query rows of one (b, h); the KV sequence is walked in blocks of 128
  keys from the last block down (the only blocks needing a mask -- the tail past S and, when
  causal, the diagonal -- come first, so the running max is finite from the first block on).
- **Persistent, warp-specialized CTAs** (384 threads): the grid is min(SMS, tiles); CTA c takes
  tiles c, 2G - 1 - c, 2G + c, ... (G CTAs; a snake, so that per-CTA work evens out when tile
  costs fall along the order) of an order that walks HG heads at a time (their K and V stay in
  L2 while every query block of them is processed) and, inside, query blocks from the last
  (costliest when causal) to the first. SMS >= tiles is the non-persistent launch. ORDER =
  "pairs" (causal): a CTA runs query blocks nm - 1 - p and p of one head back to back (nm + 1
  KV blocks, the same for every pair), with a split last round: the snake's per-CTA loads
  spread 1040-3023 blocks at B2 H16 S16384 and 104-219 at B4 H32 S2048, the pairs' 1968-2033
  and 119-136 (zoo/kernels/attn_schedule.py: the order and its model).
- Warpgroup 0 is the producer (``setmaxnreg.dec``): one thread loads, per tile, K of the first
  block, then Q (once the consumers released the previous tile's Q), then K of block j+1 and V of
  block j alternately, with TMA into two 2-stage rings (K and V have their own `full`/`empty`
  mbarriers, so QK^T never waits for a V load) -- already loading the next tile while the
  consumers finish this one.
- Warpgroups 1 and 2 are consumers (``setmaxnreg.inc``), 64 query rows each, with the
  FlashAttention-3 intra-warpgroup overlap: for KV block j they issue S_j = Q K_j^T
  (``wgmma.m64n128k16``, Q and K from 128B-swizzled shared memory), rescale O, issue
  O += P_{j-1} V_{j-1} (``wgmma`` with P from registers: the RS form, V MN-major), then run the
  softmax of S_j while that P V product is in the tensor cores; P_j is packed to bf16 when the
  next block begins (after ``wait_group 0``: the P V product read those registers). Online
  softmax in base 2 (log2(e) / sqrt(128) folded into one ``fma`` before ``ex2.approx.ftz``), row
  maxima by a tree and two quad shuffles, row sums per thread (reduced across the quad once, at
  the end).
- **Ping-pong** (PINGPONG): the two consumers take turns issuing their MMAs, on two named
  barriers (consumer i's turn begins with ``bar.sync`` on barrier 1 + i), so one warpgroup's
  softmax runs under the other's MMAs. "arrive" (FlashAttention-3): the turn is handed over by
  ``bar.arrive`` right after the issue; "sync": by ``bar.sync``, a rendezvous with the other
  consumer's turn_begin (which sync_check can explore completely; see docs/TUNING.md); False:
  no turns.
- Epilogue: O / l (``rcp.approx``) -> bf16 -> ``stmatrix`` into 128B-swizzled 64 x 64 chunks ->
  ``fence.proxy.async`` -> TMA store (clipped at S); LSE = (m * scale * log2(e) + lg2 l) * ln 2,
  stored by one lane per row (rows < S).

Techniques: tma, mbarrier-pipeline, warp-specialized, setmaxnreg, wgmma (SS and RS), swizzle-128b,
online-softmax, persistent, ping-pong named barriers, stmatrix + TMA store, lazy rescaling (LAZY).
Work (FLOPs): 4 * B * H * S^2 * 128 (two matrix products); half of it when causal (the
convention of FlashAttention's benchmarks: S^2 / 2, not S (S + 1) / 2).
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from types import SimpleNamespace

import numpy as np

import tirxh.lang as T
from attn_schedule import ORDERS, TileOrder, heads_per_section
from hopper import CHUNK_BYTES, WG, bf16x2, desc, log2, stmatrix_chunk, stmatrix_lanes
from hostcache import Cache, rng_key
from tirxh.api import numpy_dtype

TAGS = ("tma", "mbarrier-pipeline", "warp-specialized", "setmaxnreg", "wgmma", "wgmma-rs",
        "swizzle-128b", "online-softmax", "persistent", "ping-pong", "stmatrix", "tma-store",
        "lazy-rescale")

D = 128                  # head dimension
BM = 128                 # query rows per tile: two consumer warpgroups x 64
BN = 128                 # keys per K/V block (the default of the BN constant)
SMEM_LIMIT = 227 * 1024  # dynamic shared memory a CTA may have on sm_90
CONSUMERS = 2
H200_SMS = 132
FULL = 0xFFFFFFFF
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
SCALE_LOG2 = LOG2E / math.sqrt(D)   # softmax in base 2: exp(s / sqrt(D)) = 2^(s * SCALE_LOG2)
PRODUCER_REGS, CONSUMER_REGS = 24, 240   # 128 * 24 + 256 * 240 = 64512 of 65536 registers
BAR_TURN = 1             # named barriers 1, 2: consumer warpgroup 0's / 1's turn to issue MMAs
BAR_EPI = 3              # named barriers 3, 4: one consumer warpgroup (its epilogue)
STAGES = 2               # K and V ring depth


# --- the tile schedule -------------------------------------------------------------------------

class _Tiles:
    """The static persistent schedule (built inside each role: no value may live across
    ``setmaxnreg``, ptxas would spill it): zoo/kernels/attn_schedule.py's `TileOrder` on device
    registers (``selp.u32`` / ``min.u32``; the model runs the same arithmetic on integers).

    "snake": tiles t in [0, B * H * nm) (nm query blocks per head) are ordered by sections of HG
    consecutive (b, h) pairs; inside a section, query block nm - 1 - t / width first, then the
    head. Round k of CTA c takes t = k * G + (c, or G - 1 - c in odd rounds). "pairs" (causal):
    round 2j + e runs tile e of unit j G + c, a unit being query blocks nm - 1 - p and p of one
    head (the same nm + 1 KV blocks for every unit). Emits the counts once
    (shr/mul/add/div) and per tile a few div.u32/min.u32/selp.
    """

    def __init__(self, B, S, H: int, HG: int, bn: int, order: str = "snake"):
        self.nm = (S + (BM - 1)) >> log2(BM)
        self.nkv = (S + (bn - 1)) >> log2(bn) if bn & (bn - 1) == 0 else (S + (bn - 1)) / bn
        self.order = TileOrder(order, B * H, H, HG, self.nm, _DEVICE_OPS)
        self.rounds = self.order.rounds

    @contextmanager
    def each(self, rnd):
        """``with tiles.each(rnd) as (b, h, mb):`` the body runs for round rnd's tile, if this
        CTA has one (uniform branches: ``idx < count``, and for "pairs" the short half)."""
        idx, half = self.order.tile(rnd)
        with T.if_(self.order.valid(idx), uniform=True):
            b, h, mb, keep = self.order.coords(idx, half)
            if keep is True:
                yield b, h, mb
            else:
                with T.if_(keep, uniform=True):
                    yield b, h, mb

    def blocks(self, m_block, causal: bool):
        """KV blocks of a tile: all of them, or (causal, BM == BN) those up to the diagonal."""
        return m_block + 1 if causal else self.nkv


_DEVICE_OPS = SimpleNamespace(sel=T.ptx.selp.u32, umin=T.ptx.min.u32, grid=lambda: T.nctaid.x,
                              cta=lambda: T.ctaid.x)


# --- the kernel body ---------------------------------------------------------------------------

class _Smem:
    """Shared memory: Q (2 boxes of 128 x 64), K and V rings (STAGES x 2 boxes of BN x 64), the
    O staging chunks (2 consumers x 2 chunks of 64 x 64), all 128B-swizzled: 192 KB at BN = 128
    (a third stage would need 256 KB of the 227 KB), 224 KB at BN = 160; and the mbarriers."""

    def __init__(self, stages: int, bn: int):
        sw = dict(align=1024, swizzle=128, dynamic=True)
        self.q = T.shared(T.bf16, (2, BM, 64), name="sQ", **sw)
        self.k = T.shared(T.bf16, (stages, 2, bn, 64), name="sK", **sw)
        self.v = T.shared(T.bf16, (stages, 2, bn, 64), name="sV", **sw)
        self.o = T.shared(T.bf16, (CONSUMERS, 2, 64, 64), name="sO", **sw)
        self.q_full = T.mbarrier(1, name="q_full", dynamic=True)
        self.q_empty = T.mbarrier(1, name="q_empty", dynamic=True)
        self.k_full = T.mbarrier(stages, name="k_full", dynamic=True)
        self.k_empty = T.mbarrier(stages, name="k_empty", dynamic=True)
        self.v_full = T.mbarrier(stages, name="v_full", dynamic=True)
        self.v_empty = T.mbarrier(stages, name="v_empty", dynamic=True)
        self.stages = stages

    def init(self):
        """Thread 0: every mbarrier (`full` by one arrival plus the TMA bytes, `empty` and
        `q_empty` by one arrival per consumer warpgroup), then the init fence."""
        self.q_full.init(1)
        self.q_empty.init(CONSUMERS)
        for s in range(self.stages):
            self.k_full[s].init(1)
            self.k_empty[s].init(CONSUMERS)
            self.v_full[s].init(1)
            self.v_empty[s].init(CONSUMERS)
        T.ptx.fence.mbarrier_init.release.cluster()


def smem_bytes(bn: int) -> int:
    """The kernel's dynamic shared memory at BN = bn (tiles; the mbarriers' bytes are below the
    1 KB alignment slack)."""
    return 2 * BM * 128 + 2 * STAGES * bn * D * 2 + CONSUMERS * 2 * CHUNK_BYTES


def _attention(cfg: dict, maps: tuple, lse, B, S):
    sm = _Smem(STAGES, cfg["BN"])
    tid = T.tid.x
    with T.if_(tid == 0):
        sm.init()
    T.ptx.bar.sync(0)
    with T.role((tid >> 7) == 0, dec=PRODUCER_REGS):
        with T.if_(tid == 0):
            _producer(cfg, _Tiles(B, S, cfg["H"], cfg["HG"], cfg["BN"], cfg["ORDER"]), maps, sm)
    with T.else_():
        T.ptx.setmaxnreg.inc.sync.aligned.u32(CONSUMER_REGS)
        _consumer(cfg, _Tiles(B, S, cfg["H"], cfg["HG"], cfg["BN"], cfg["ORDER"]), maps[3], sm,
                  lse, S, T.tid.x)


def _producer(cfg, tiles, maps, sm):
    """One thread: per tile K of the first block, Q, then K_{j+1} and V_j alternately."""
    load = T.ptx["cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"]
    q_map, k_map, v_map, _ = maps
    for m in maps[:3]:
        T.ptx.prefetch.tensormap(m)
    G, bn = cfg["H"] // cfg["HKV"], cfg["BN"]
    tile_bytes = bn * D * 2
    k_ring, v_ring = T.pipeline(sm.stages), T.pipeline(sm.stages)
    q_phase = T.reg(T.u32, init=0)
    q_base, k_base, v_base = sm.q.ptr(), sm.k.ptr(), sm.v.ptr()

    def kv(ring, full, empty, base, tmap, nb, kvh, b):
        """Wait for a free stage (a fresh barrier counts as released), arm it with the block's
        bytes, load its two 64-column boxes."""
        st = ring.stage
        with T.iket.range("wait_empty"):
            empty[st].wait(ring.phase ^ 1)
        full[st].arrive_expect_tx(tile_bytes)
        dst = base + st * tile_bytes
        for half in range(2):
            load(dst + half * (bn * 128), tmap[half * 64, kvh, nb * bn, b], full[st])
        ring.advance()

    with T.range(tiles.rounds) as rnd:
        with tiles.each(rnd) as (b, h, mb):
            kvh = h >> log2(G) if G > 1 else h
            n = tiles.blocks(mb, cfg["CAUSAL"])
            kv(k_ring, sm.k_full, sm.k_empty, k_base, k_map, n - 1, kvh, b)
            sm.q_empty.wait(q_phase ^ 1)    # the consumers' last QK^T of the previous tile
            sm.q_full.arrive_expect_tx(BM * D * 2)
            for half in range(2):
                load(q_base + half * (BM * 128), q_map[half * 64, h, mb * BM, b], sm.q_full)
            q_phase.set(q_phase ^ 1)
            with T.range(1, n) as j:
                kv(k_ring, sm.k_full, sm.k_empty, k_base, k_map, n - 1 - j, kvh, b)
                kv(v_ring, sm.v_full, sm.v_empty, v_base, v_map, n - j, kvh, b)
            kv(v_ring, sm.v_full, sm.v_empty, v_base, v_map, 0, kvh, b)


class _Softmax:
    """Online softmax state of one thread: rows g and g + 8 of its warp's 16 (index ri), the
    running max m (raw scores), the per-thread partial row sum l, the last rescale factor sc."""

    def __init__(self, acc_s, bn: int, lazy: float = 0):
        self.s, self.bn = acc_s, bn
        self.lazy = lazy / SCALE_LOG2   # the threshold in raw-score units (0: rescale always)
        self.m = [T.reg(T.f32, init=0.0) for _ in range(2)]
        self.l = [T.reg(T.f32, init=0.0) for _ in range(2)]
        self.sc = [T.reg(T.f32, init=1.0) for _ in range(2)]

    def row(self, ri: int) -> list:
        """The thread's registers of row ri: 4j + 2ri + {0, 1} for the BN / 8 column groups j."""
        return [self.s[4 * j + 2 * ri + e] for j in range(self.bn // 8) for e in range(2)]

    def mask(self, S, key0, row0, causal: bool, t4):
        """-inf for keys past S (and past the row when causal): key = key0 + 2 t4 + 8j + e."""
        for ri in range(2):
            row = row0 + 8 * ri
            lim = T.ptx.min.u32(row + 1, S) if causal else S
            rel = T.ptx.sub.s32(T.ptx.cvt.s32.u32(lim - key0), T.ptx.cvt.s32.u32(t4 << 1))
            for j in range(self.bn // 8):
                for e in range(2):
                    r = self.s[4 * j + 2 * ri + e]
                    T.ptx.selp.f32(r, r, float("-inf"), rel > 8 * j + e)

    def update(self, first: bool):
        """m_new = max(m, rowmax S); sc = 2^((m - m_new) c); P = 2^(S c - m_new c) in place;
        l = l sc + rowsum P (c = log2(e) / sqrt(D)). `first`: no previous m, l.

        Lazy rescaling (LAZY = tau > 0, FlashAttention-4's): the running max moves only when the
        row's new maximum exceeds it by more than tau in log2 units; otherwise m, and sc = 1,
        stay, P = 2^(S c - m c) <= 2^tau (bf16 and f32 hold that with the same relative
        precision) and O is not rescaled (`rescale_o` skips a warp whose sc are all 1). O / l and
        LSE = m c + lg2 l use the same m, so the result is the same."""
        for ri in range(2):
            vals = self.row(ri)
            mx = _quad(_tree(vals, T.ptx.max.f32), T.ptx.max.f32)
            if first:     # (sc = 1: O is zero when the next block rescales it)
                m_new = mx
                self.sc[ri].set(1.0)
            else:
                m_new = T.ptx.max.f32(self.m[ri], mx)
                if self.lazy:
                    keep = T.ptx.sub.f32(m_new, self.m[ri]) <= self.lazy
                    m_new = T.ptx.selp.f32(self.m[ri], m_new, keep)
                T.ptx.ex2.approx.ftz.f32(self.sc[ri], T.ptx.mul.f32(
                    T.ptx.sub.f32(self.m[ri], m_new), SCALE_LOG2))
            neg = T.ptx.mul.f32(m_new, -SCALE_LOG2)
            for r in vals:
                T.ptx.ex2.approx.ftz.f32(r, T.ptx.fma.rn.f32(r, SCALE_LOG2, neg))
            total = _tree(vals, T.ptx.add.f32)
            if first:
                self.l[ri].set(total)
            else:
                T.ptx.fma.rn.f32(self.l[ri], self.l[ri], self.sc[ri], total)
            self.m[ri].set(m_new)


def _tree(vals: list, op):
    """A balanced reduction (log2(n) dependent steps)."""
    while len(vals) > 1:
        vals = [op(vals[i], vals[i + 1]) if i + 1 < len(vals) else vals[i]
                for i in range(0, len(vals), 2)]
    return vals[0]


def _quad(v, op):
    """Reduce over the 4 lanes of a quad (lanes sharing lane / 4): 2 x (shfl.sync.bfly, op)."""
    for off in (1, 2):
        v = op(v, T.ptx.mov.f32(T.ptx.shfl.sync.bfly.b32(v, off, 0x1F, 0xFFFFFFFF)))
    return v


def _consumer(cfg, tiles, o_map, sm, lse, S, tid):
    """One warpgroup (cw = 0, 1): rows 64 cw .. 64 cw + 63 of every tile of the CTA."""
    causal, pingpong, H, bn = cfg["CAUSAL"], cfg["PINGPONG"], cfg["H"], cfg["BN"]
    tile_bytes = bn * D * 2
    cw = (tid >> 7) - 1
    lane = T.laneid()
    t4 = lane & 3
    row_in_tile = (cw << 6) + (((tid >> 5) & 3) << 4) + (lane >> 2)
    leader = (tid & (WG - 1)) == 0
    mma_qk = T.ptx[f"wgmma.mma_async.sync.aligned.m64n{bn}k16.f32.bf16.bf16"]
    mma_pv = T.ptx[f"wgmma.mma_async.sync.aligned.m64n{D}k16.f32.bf16.bf16"]
    acc_o = T.fragment(T.f32, D // 2)
    acc_s = T.fragment(T.f32, bn // 2)
    pb = [T.reg(T.bf16x2) for _ in range(bn // 4)]  # P in bf16: the A fragments of P V
    sm_state = _Softmax(acc_s, bn, cfg["LAZY"])
    pv_running = T.reg(T.pred)                      # a P V issued in this tile is in flight
    k_ring, v_ring = T.pipeline(sm.stages), T.pipeline(sm.stages)
    q_phase = T.reg(T.u32, init=0)
    no, yes = T.ptx.mov.pred(0), T.ptx.mov.pred(1)
    dq = desc(sm.q.ptr() + cw * (64 * 128), 16, 1024)
    dk0 = desc(sm.k.ptr(), 16, 1024)
    dv0 = desc(sm.v.ptr(), bn * 128, 1024)      # MN-major: LBO = one 64-column box
    o_base = sm.o.ptr() + cw * (2 * CHUNK_BYTES)
    st_lanes = stmatrix_lanes(o_base, tid)
    epi_bar = cw + BAR_EPI
    my_turn, their_turn = cw + BAR_TURN, (BAR_TURN + 1) - cw

    def turn_begin():
        if pingpong:
            T.ptx.bar.sync(my_turn, 2 * WG)

    def turn_end():
        """Hand the turn to the other consumer: with "arrive" and go on (FlashAttention-3);
        with "sync" at a rendezvous with its turn_begin (this warpgroup waits until the other
        is ready to issue)."""
        if pingpong == "arrive":
            T.ptx.bar.arrive(their_turn, 2 * WG)
        elif pingpong == "sync":
            T.ptx.bar.sync(their_turn, 2 * WG)

    def qk(stage):
        db = dk0 + T.ptx.cvt.u64.u32(stage * (tile_bytes >> 4))
        T.ptx.wgmma.fence.sync.aligned()
        for kk in range(D // 16):   # 16 dims a step: box kk / 4, 32 bytes into its rows
            off = 2 * (kk % 4)
            mma_qk(acc_s, dq + (off + (kk // 4) * (BM * 128 >> 4)),
                   db + (off + (kk // 4) * (bn * 128 >> 4)), no if kk == 0 else yes, 1, 1, 0, 0)
        T.ptx.wgmma.commit_group.sync.aligned()

    def pv(stage):
        db = dv0 + T.ptx.cvt.u64.u32(stage * (tile_bytes >> 4))
        T.ptx.wgmma.fence.sync.aligned()     # O was rescaled and P written by this thread
        for kk in range(bn // 16):  # 16 keys a step: 16 rows of 128 bytes
            mma_pv(acc_o, pb[4 * kk: 4 * kk + 4], db + kk * (2048 >> 4), yes, 1, 1, 1)
        T.ptx.wgmma.commit_group.sync.aligned()

    def rescale_o():
        def muls():
            for i in range(D // 2):
                T.ptx.mul.f32(acc_o[i], acc_o[i], sm_state.sc[(i >> 1) & 1])
        if not cfg["LAZY"]:
            muls()
            return
        sc = sm_state.sc    # ex2.approx.ftz(0) is exactly 1: a kept max gives sc == 1
        with T.if_(T.ptx.vote.any.sync.pred((sc[0] != 1.0) | (sc[1] != 1.0), FULL),
                   uniform=True):
            muls()

    def pack_p():
        for i in range(bn // 4):
            bf16x2(acc_s[2 * i], acc_s[2 * i + 1], pb[i])

    def wait_full(bars, ring, what: str):
        with T.iket.range(what):
            bars[ring.stage].wait(ring.phase)

    def release(bars, ring):
        with T.if_(leader):
            bars[ring.stage].arrive()
        ring.advance()

    def step():
        """KV block j >= 1: P_{j-2} V_{j-2} retired (its V stage released) and P_{j-1} packed;
        S_j = Q K_j^T issued; O rescaled and O += P_{j-1} V_{j-1} issued; the softmax of S_j
        (P_j left in f32 in S's registers) under that product.

        Where the waits sit matters to ptxas: a ``wait_group 0`` after the softmax is hoisted
        to the first instruction it can precede (the softmax then runs after P V, not under
        it); one after the next QK^T issue makes ptxas serialize every wgmma (C7514: it does
        not follow a group retired across the loop). After the K wait's spin loop (a block
        boundary it does not move code across) it stays put, and P is packed after it."""
        wait_full(sm.k_full, k_ring, "wait_k")
        retire_pv()
        turn_begin()
        qk(k_ring.stage)
        rescale_o()
        wait_full(sm.v_full, v_ring, "wait_v")
        pv(v_ring.stage)
        turn_end()
        T.ptx.wgmma.wait_group.sync.aligned(1)       # S_j landed; P_{j-1} V_{j-1} running
        release(sm.k_empty, k_ring)
        with T.iket.range("softmax"):
            sm_state.update(first=False)

    def retire_pv():
        """The running P V (if any) retired and its V stage released; P packed to bf16 (the
        registers it read are free now)."""
        T.ptx.wgmma.wait_group.sync.aligned(0)
        with T.if_(pv_running, uniform=True):
            release(sm.v_empty, v_ring)
        pack_p()

    if pingpong:   # consumer 0 issues first: consumer 1 opens its turn once
        with T.if_(cw == 1, uniform=True):
            turn_end()
    with T.range(tiles.rounds) as rnd:
        with tiles.each(rnd) as (b, h, mb):
            n = tiles.blocks(mb, causal)
            acc_o.fill(0.0)
            sm.q_full.wait(q_phase)
            q_phase.set(q_phase ^ 1)
            # the first block (the only masked one): S_0 and its softmax
            wait_full(sm.k_full, k_ring, "wait_k")
            turn_begin()
            qk(k_ring.stage)
            turn_end()
            T.ptx.wgmma.wait_group.sync.aligned(0)
            release(sm.k_empty, k_ring)
            sm_state.mask(S, (n - 1) * bn, mb * BM + row_in_tile, causal, t4)
            sm_state.update(first=True)
            pv_running.set(False)
            with T.range(1, n):
                step()
                pv_running.set(True)
            with T.if_(leader):
                sm.q_empty.arrive()          # every QK^T of this tile retired: Q may be reloaded
            retire_pv()                      # (advances the V ring: wait for V after it)
            wait_full(sm.v_full, v_ring, "wait_v")
            turn_begin()
            rescale_o()
            pv(v_ring.stage)
            turn_end()
            T.ptx.wgmma.wait_group.sync.aligned(0)
            release(sm.v_empty, v_ring)
            with T.iket.range("epilogue"):
                _epilogue(sm_state, acc_o, o_map, lse, b, h, mb, S, H, cw, t4, row_in_tile,
                          leader, st_lanes, o_base, epi_bar)
    if pingpong:   # consumer 1's last hand-over to consumer 0 is taken here
        with T.if_(cw == 0, uniform=True):
            turn_begin()
    with T.if_(leader):
        T.ptx.cp.async_.bulk.wait_group(0)   # the last O stores completed before the CTA exits


def _epilogue(sm_state, acc_o, o_map, lse, b, h, mb, S, H, cw, t4, row_in_tile, leader,
              st_lanes, o_base, epi_bar):
    """O / l as bf16 through the staging chunks to a TMA store; LSE by one lane per row."""
    store = T.ptx["cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group"]
    inv = []
    row0 = mb * BM + row_in_tile
    for ri in range(2):
        total = _quad(sm_state.l[ri], T.ptx.add.f32)
        inv.append(T.ptx.rcp.approx.ftz.f32(total))
        val = T.ptx.mul.f32(T.ptx.fma.rn.f32(sm_state.m[ri], SCALE_LOG2,
                                              T.ptx.lg2.approx.ftz.f32(total)), LN2)
        row = row0 + 8 * ri
        with T.if_((t4 == 0) & (row < S)):
            T.ptx.st.global_.f32(lse.at((b * H + h) * S + row), val)
    with T.if_(leader):   # this warpgroup's previous stores finished reading the chunks
        T.ptx.cp.async_.bulk.wait_group.read(0)
    T.ptx.bar.sync(epi_bar, WG)
    for ci in range(2):
        stmatrix_chunk(acc_o, ci, st_lanes, ci * CHUNK_BYTES,
                       value=lambda i: T.ptx.mul.f32(acc_o[i], inv[(i >> 1) & 1]))
    T.ptx.fence.proxy.async_.shared__cta()   # generic writes -> the TMA engine's reads
    T.ptx.bar.sync(epi_bar, WG)
    with T.if_(leader):
        for ci in range(2):
            store(o_map[ci * 64, h, mb * BM + (cw << 6), b], o_base + ci * CHUNK_BYTES)
        T.ptx.cp.async_.bulk.commit_group()


def _grid(B, S, H, SMS):
    """The persistent grid: one CTA per SM (SMS), never more CTAs than tiles."""
    return (min(SMS, B * H * T.cdiv(S, BM)),)


@T.kernel(grid=_grid, block=WG * (1 + CONSUMERS), min_blocks=1)
def attention_fwd(q_map: T.tensormap, k_map: T.tensormap, v_map: T.tensormap,
                  o_map: T.tensormap, q: T.gptr[T.bf16], k: T.gptr[T.bf16], v: T.gptr[T.bf16],
                  o: T.gptr[T.bf16], lse: T.gptr[T.f32], B: T.u32, S: T.u32, H: T.const,
                  HKV: T.const, CAUSAL: T.const = False, HG: T.const = 8,
                  PINGPONG: T.const = "arrive", SMS: T.const = H200_SMS, BN: T.const = BN,
                  LAZY: T.const = 0, ORDER: T.const = "snake"):
    if PINGPONG not in ("arrive", "sync", False):
        raise ValueError(f"attention_fwd: PINGPONG = {PINGPONG!r}: expected 'arrive', 'sync' or "
                         "False")
    problems = _check_block(BN, CAUSAL)
    if problems:
        raise ValueError("attention_fwd: " + "; ".join(problems))
    if not isinstance(LAZY, (int, float)) or isinstance(LAZY, bool) or not 0 <= LAZY <= 16:
        raise ValueError(f"attention_fwd: LAZY = {LAZY!r}: the lazy-rescale threshold in log2 "
                         "units must be in [0, 16] (0: rescale at every block)")
    if ORDER not in ORDERS:
        raise ValueError(f"attention_fwd: ORDER = {ORDER!r}: expected one of {ORDERS} (the tile "
                         "order, zoo/kernels/attn_schedule.py)")
    cfg = dict(H=H, HKV=HKV, CAUSAL=CAUSAL, HG=HG, PINGPONG=PINGPONG, BN=BN, LAZY=LAZY,
               ORDER=ORDER)
    _attention(cfg, (q_map, k_map, v_map, o_map), lse, B, S)


# --- inputs, references, tolerances ------------------------------------------------------------

_LARGE = 1 << 24        # B * S * H * D above which inputs and references are kept for reuse
_CACHE = Cache(2)       # the two correctness seeds of one shape: its variants run back to back


def _check_block(bn, causal) -> list:
    """The rules a KV block size breaks: wgmma's N (a multiple of 16 for the P V steps, at most
    256), the shared memory of two stages, and the causal schedule's square blocks."""
    out = []
    if not isinstance(bn, int) or bn < 16 or bn % 16 or bn > 256:
        out.append(f"BN = {bn!r} keys per block: expected a multiple of 16 in [16, 256]")
    elif smem_bytes(bn) > SMEM_LIMIT:
        out.append(f"BN = {bn}: {smem_bytes(bn)} bytes of shared memory, more than the "
                   f"{SMEM_LIMIT} a CTA may have")
    elif causal and bn != BM:
        out.append(f"BN = {bn} with CAUSAL: the causal schedule needs square blocks (BN = {BM}: "
                   "only the diagonal block is masked)")
    return out


def _check_shape(B, S, H, HKV, HG, BN=BN, CAUSAL=False) -> list:
    """The rules a case breaks (T.suite refuses it at declaration)."""
    out = _check_block(BN, CAUSAL)
    if min(B, S, H, HKV) < 1:
        out.append(f"B, S, H, HKV must be positive (got {B}, {S}, {H}, {HKV})")
    elif H % HKV or (H // HKV) & (H // HKV - 1):
        out.append(f"H = {H} must be HKV = {HKV} times a power of two (query heads per KV head)")
    if HG < 1:
        out.append(f"HG = {HG} (heads per schedule section) must be positive")
    if B * H * S >= 1 << 31:
        out.append(f"B * H * S = {B * H * S}: LSE indices are 32-bit")
    return out


def inputs(rng, B, S, H, HKV, CAUSAL=False, HG=8, BN=BN):
    """q, k, v ~ N(0, 1) in bf16, q scaled by 2 (scores with a standard deviation of 2: peaky
    rows and flat ones both occur); o and lse to be written."""
    problems = _check_shape(B, S, H, HKV, HG, BN, CAUSAL)
    if problems:
        raise ValueError("attention_fwd: " + "; ".join(problems))
    bf16 = numpy_dtype("bf16")

    def make():
        q = rng.standard_normal((B, S, H, D), dtype=np.float32) * np.float32(2.0)
        k = rng.standard_normal((B, S, HKV, D), dtype=np.float32)
        v = rng.standard_normal((B, S, HKV, D), dtype=np.float32)
        return {"q": q.astype(bf16), "k": k.astype(bf16), "v": v.astype(bf16)}
    arrays = _CACHE.arrays(rng_key(rng, B, S, H, HKV), make) if B * S * H * D > _LARGE \
        else make()
    return dict(arrays, o=np.empty((B, S, H, D), bf16), lse=np.empty((B, H, S), np.float32),
                B=B, S=S, **tensor_maps(BN))


def tensor_maps(bn: int = BN) -> dict:
    """The TMA maps: boxes of 128 tokens x 64 dims of one head (Q: a tile's half), of bn tokens
    x 64 dims (K, V: a block's half) and of 64 tokens x 64 dims (O: one consumer's staging
    chunk), 128B-swizzled."""
    box = dict(swizzle=128, l2_promotion=256)
    return dict(q_map=T.TensorMap("q", box=(1, BM, 1, 64), **box),
                k_map=T.TensorMap("k", box=(1, bn, 1, 64), **box),
                v_map=T.TensorMap("v", box=(1, bn, 1, 64), **box),
                o_map=T.TensorMap("o", box=(1, 64, 1, 64), **box))


def _head(q, k, v, causal: bool, dt, rows: int = 2048):
    """(o [S, D], lse [S]) of one head in precision `dt`, `rows` query rows at a time."""
    S = q.shape[0]
    kt = k.astype(dt).T
    vv = v.astype(dt)
    o = np.empty((S, D), np.float64 if dt == np.float64 else np.float32)
    lse = np.empty(S, np.float64)
    for r0 in range(0, S, rows):
        r1 = min(S, r0 + rows)
        s = (q[r0:r1].astype(dt) @ kt) * dt(1.0 / math.sqrt(D))
        if causal:
            s[np.arange(r1 - r0)[:, None] < np.arange(S)[None, :] - r0] = -np.inf
        mx = s.max(axis=1, keepdims=True)
        np.exp(s - mx, out=s)
        lsum = s.sum(axis=1, keepdims=True, dtype=np.float64)
        o[r0:r1] = (s @ vv) / lsum.astype(dt)
        lse[r0:r1] = mx[:, 0] + np.log(lsum[:, 0])
    return o, lse


def reference(q, k, v, CAUSAL=False):
    """Exact attention: float64 for small shapes; float32 products (float64 row sums) for
    large ones, threaded over heads (numpy releases the GIL) and computed once per cached
    input and mask."""
    B, S, H, _ = q.shape
    G = H // k.shape[2]
    large = q.size > _LARGE
    dt = np.float32 if large else np.float64

    def compute():
        o = np.empty((B, S, H, D), np.float32)
        lse = np.empty((B, H, S), np.float32)

        def one(bh):
            b, h = divmod(bh, H)
            o[b, :, h], lse[b, h] = _head(q[b, :, h], k[b, :, h // G], v[b, :, h // G], CAUSAL,
                                          dt)
        if large:
            with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
                list(pool.map(one, range(B * H)))
        else:
            for bh in range(B * H):
                one(bh)
        return {"o": o, "lse": lse}
    return _CACHE.reference({"q": q, "k": k, "v": v}, bool(CAUSAL), compute)


# Tolerance. Against exact attention the kernel's error comes from two bf16 roundings (u = 2^-8,
# the unit roundoff of an 8-bit significand): P before P V (each weight off by at most u of
# itself, so an output element by at most u * sum_j p_j |v_j| / l <= u max |v|) and the output
# (at most u of it). Scores, row sums and O accumulate in f32 and ex2.approx errs by ~2^-22:
# orders of magnitude below. Hence atol = u * 6.4 = 0.025 (v ~ N(0, 1): |v| <= 6.4 over the ~1e9
# values of the largest case), rtol = 2^-7 (one bf16 ulp: twice the output rounding), and a
# normalized RMS error of at most 1e-2: random roundings give u / sqrt(3) ~ 2.3e-3 from each
# source (numsim: 1.8e-3 to 1.9e-3 on every small case), while one KV block of 64 left out is
# ~1e-1. LSE = m c + ln l is f32 throughout: ~1e-6 measured, 128 sequential f32 additions of row
# sums at S = 16384 bound it by ~1e-5; atol 1e-4 (a missing block moves it by ~1e-2).
TOLERANCE = {"o": T.tolerance(rtol=2.0 ** -7, atol=0.025, rms=1e-2),
             "lse": T.tolerance(atol=1e-4)}

# --- cases ---------------------------------------------------------------------------------------

# the benchmark shapes (B, H, HKV, S): issue 16's, and a GQA case of 32 query and 8 KV heads
SHAPES = [(4, 32, 32, 2048), (4, 32, 32, 8192), (2, 16, 16, 16384), (4, 32, 8, 8192)]
# variants, each a role: "main" (the fastest measured: lazy8, 1.03-1.05x torch.sdpa at S = 8192
# on the H200, 2026-12-01, where p was 0.97x; when causal pairs_lazy8, 1.09-1.11x in session 7
# where lazy8 was 0.76-1.01x), "alt", "sweep" (one technique off, for docs/TUNING.md's table,
# relative to p); a pair of roles is (non-causal, causal)
VARIANTS = {
    "p": (dict(), "alt"),                           # persistent (132 CTAs), ping-pong by arrive
    "np": (dict(SMS=1 << 20), "alt"),               # one CTA per tile: the hardware schedules
    "sync": (dict(PINGPONG="sync"), "alt"),         # ping-pong by rendezvous
    "nopp": (dict(PINGPONG=False), "sweep"),        # persistent, no ping-pong
    "bn160": (dict(BN=160), "alt"),                 # KV blocks of 160 keys (non-causal only)
    "lazy8": (dict(LAZY=8), ("main", "alt")),       # p, O rescaled only when the max grows > 2^8
    "bn160_lazy8": (dict(BN=160, LAZY=8), "alt"),   # both (non-causal only): session 5
    # lazy8 with the causal tiles paired (query blocks nm - 1 - p and p of a head on one CTA:
    # every CTA the same work; zoo/kernels/attn_schedule.py), causal only: session 6
    "pairs_lazy8": (dict(LAZY=8, ORDER="pairs"), "main"),
}


def variants(causal: bool) -> dict:
    """The VARIANTS a mask can run (BN != 128 is refused when causal; a tile order other than
    the snake is for the causal triangle only: non-causal tiles all cost the same)."""
    return {v: pr for v, pr in VARIANTS.items()
            if not _check_block(pr[0].get("BN", BN), causal)
            and (causal or pr[0].get("ORDER", "snake") == "snake")}


def _large() -> list:
    out = []
    for B, H, HKV, S in SHAPES:
        for causal in (False, True):
            for v, (params, role) in variants(causal).items():
                role = role[causal] if isinstance(role, tuple) else role
                name = f"b{B}h{H}" + (f"kv{HKV}" if HKV != H else "") + f"s{S}" \
                    + ("_causal" if causal else "") + f"_{v}"
                out.append(T.case(name, small=False, tags=(role,), B=B, S=S, H=H, HKV=HKV,
                                  CAUSAL=causal, HG=heads_per_section(H, HKV, S), **params))
    return out


SMALL = [   # (every case names CAUSAL: the SDPA baseline's `causal` argument takes its value)
    # Each is small enough for sync_check's explorer to finish (200000 states); the arrive
    # hand-over's turn barriers are proven ordered from racecheck's clocks and not interleaved
    # (`hbquery.bars_ordered`), so 4 tiles on 2 CTAs take ~11000 states (docs/TUNING.md)
    # the smallest: one CTA, two tiles of 2 and 1 KV blocks (the rings, the Q barriers and the O
    # staging carry over), the rendezvous ping-pong
    T.case("s200_causal_sync_p1", B=1, S=200, H=1, HKV=1, HG=1, CAUSAL=True, SMS=1,
           PINGPONG="sync"),
    T.case("s200", B=1, S=200, H=1, HKV=1, HG=1, CAUSAL=False),   # two CTAs, a 72-key tail
    T.case("s200_causal", B=1, S=200, H=1, HKV=1, HG=1, CAUSAL=True),
    T.case("s200_nopp", B=1, S=200, H=1, HKV=1, HG=1, CAUSAL=False, PINGPONG=False),
    # persistent: 4 tiles of 4, 3, 2, 1 KV blocks on 2 CTAs (snake: 4 + 1, 3 + 2), rendezvous
    T.case("s400_causal_sync_p2", B=1, S=400, H=1, HKV=1, HG=1, CAUSAL=True, SMS=2,
           PINGPONG="sync"),
    # the same 4 tiles under the main variant's arrive hand-over (FlashAttention-3)
    T.case("s400_causal_p2", B=1, S=400, H=1, HKV=1, HG=1, CAUSAL=True, SMS=2),
    # GQA (2 query heads share a KV head), two batches, sections of 2 heads: 4 single-block
    # tiles on 2 CTAs under the arrive hand-over (the main variant's)
    T.case("gqa_b2h2kv1s80_p2", B=2, S=80, H=2, HKV=1, HG=2, CAUSAL=False, SMS=2),
    # KV blocks of 160 keys: 4 tiles of 3 blocks (the first with an 80-key tail) on 2 CTAs
    T.case("s400_bn160_p2", B=1, S=400, H=1, HKV=1, HG=1, CAUSAL=False, SMS=2, BN=160),
    # lazy rescaling on the persistent causal schedule (tests/zoo/test_attention.py also runs
    # it on inputs whose row maxima jump late, so both branches of the rescale run)
    T.case("s400_causal_lazy8_p2", B=1, S=400, H=1, HKV=1, HG=1, CAUSAL=True, SMS=2, LAZY=8),
    # both: 4 tiles of 3 blocks of 160 keys (an 80-key tail) with the lazy rescale
    T.case("s400_bn160_lazy8_p2", B=1, S=400, H=1, HKV=1, HG=1, CAUSAL=False, SMS=2, BN=160,
           LAZY=8),
    # the causal pair order (zoo/kernels/attn_schedule.py), its split tail round with a short
    # tile left over and an idle CTA (units 2 + 0 and the middle block 1 on 3 CTAs): CTA 0
    # runs query block 2, CTA 1 blocks 1 and 0, CTA 2 nothing (the middle unit's missing half)
    T.case("s384_causal_pairs_lazy8_p3", B=1, S=384, H=1, HKV=1, HG=1, CAUSAL=True, SMS=3,
           LAZY=8, ORDER="pairs"),
    # with GQA (2 query heads on 1 KV head), a 44-key tail, an odd nm (3: the middle block is
    # a unit alone), a full round of units and a split tail (4 units on 3 CTAs): CTA 0 runs
    # head 0's blocks 2, 0 and head 1's middle block 1, CTA 1 head 1's 2, 0, CTA 2 head 0's 1
    T.case("gqa_b1h2kv1s300_causal_pairs_lazy8_p3", B=1, S=300, H=2, HKV=1, HG=2, CAUSAL=True,
           SMS=3, LAZY=8, ORDER="pairs"),
]

# hardware smoke cases (benchmarks/attn_bench.sh runs them, with the small ones, correctness only
# and a 15 s execution budget before timing anything): the full 132-CTA grid with every variant,
# so the hand-overs, ring phases and Q barriers run across ~2 tiles per CTA (GQA, causal) and 4
# (32 CTAs: "np" still one per tile) with real concurrency, which numsim's one legal order does
# not give. Each float64 reference takes ~4 s of one core.
SMOKE = [T.case(f"smoke_{name}_{v}", small=False, tags=("smoke",), CAUSAL=causal,
                **dict(shape, **params))
         for name, causal, shape in (
             ("b1h32kv8s1000_causal", True, dict(B=1, S=1000, H=32, HKV=8, HG=8)),
             ("b1h16s1000_p32", False, dict(B=1, S=1000, H=16, HKV=16, HG=4, SMS=32)))
         for v, (params, _) in variants(causal).items()]

SUITE = T.suite(
    attention_fwd, inputs=inputs, reference=reference, outputs=["o", "lse"],
    cases=SMALL + SMOKE + _large(), tolerance=TOLERANCE,
    constraints=lambda B, S, H, HKV, HG, BN=BN, CAUSAL=False: _check_shape(B, S, H, HKV, HG,
                                                                            BN, CAUSAL),
    flops=lambda B, S, H, CAUSAL=False: 4 * B * H * S * S * D // (2 if CAUSAL else 1),
    bytes=lambda B, S, H, HKV: 4 * B * S * D * (H + HKV) + 4 * B * H * S,
    baselines=[{"name": "torch.sdpa", "args": {"q": "q", "k": "k", "v": "v", "layout": "bshd",
                                               "causal": "CAUSAL"}}])
