"""Hopper GEMM at full speed (issue 15): C[M, N] = A[M, K] @ B, bf16 or fp8 e4m3 inputs, f32
accumulation, bf16 C; any M, N, K (tails by TMA); sm_90a.

Formula: ``C = bf16(A @ B)`` (bf16, B either K-major ``[N, K]`` or N-major ``[K, N]``) and
``C = bf16(scale_a * scale_b * (A @ B))`` (fp8 e4m3, per-tensor scales in device memory, B
K-major as wgmma's fp8 forms require).

Algorithm (docs/TUNING.md has the reasoning and the measured gain of each step):
- **Persistent, warp-specialized CTAs**: the grid is the number of SMs (132 on the H200), each CTA
  walks work units ``p = cluster, cluster + clusters, ...`` in a grouped raster (GROUP units
  along M, or N, share one sweep of the other dimension) so that the A and B panels the running
  CTAs need stay in L2. Warpgroup 0 is the producer (``setmaxnreg.dec`` to 40); one thread
  streams BK-wide K slices (128 bytes of each row) of A and B through a STAGES-deep ring with TMA
  (128B swizzle, OOB zero fill, ``mbarrier::complete_tx``), already loading the next tile while
  the consumers finish the current one. Warpgroups 1 and 2 are consumers (``setmaxnreg.inc`` to
  232): each owns 64 rows of the 128 x BN tile and issues ``wgmma.m64n{BN}k16`` (``k32`` for fp8)
  on 128B-swizzled descriptors, keeps one group in flight (``wgmma.wait_group 1``) and releases a
  stage as soon as the group reading it retired.
- **A in its own ring** (ASTAGES > 0, the ``*pb`` variants, docs/TUNING.md "Small M, round
  3"): at M = 128 every CTA reads the same 128 rows of A (an L2 hit) and its own rows of B
  (from HBM), but one ring spends 2/3 of each 128 x 64 stage on A. A then gets ASTAGES
  stages with their own ``a_full``/``a_empty`` mbarriers, B the STAGES stages of
  ``full``/``empty``, and the producer loads B STAGES - ASTAGES slices ahead of A: more of
  B's bytes in flight in the same shared memory. One-CTA kernels only.
- **Epilogue through shared memory and TMA stores** (EPI="tma"): each consumer converts its
  64 x BN accumulators to bf16 (``cvt.rn.bf16x2.f32``), writes them with ``stmatrix.x4`` into
  128B-swizzled 64 x 64 chunks (conflict-free), ``fence.proxy.async.shared::cta``, a named
  barrier of its warpgroup, and one thread issues ``cp.async.bulk.tensor`` stores (clipped at
  the matrix edge, so any M and N). EPI_BUFS chunks are staged at once; before reusing them the
  storing thread waits ``cp.async.bulk.wait_group.read 0``. EPI="direct" stores bf16 straight
  from registers with predicated ``st.global.b16`` (for N % 8 != 0, where no 16-byte row stride
  exists for a tensor map over C).
- **The epilogue under the next tile's MMAs** (EPI_DEFER, the ``t256d`` variant): a unit's
  accumulators are packed to bf16 registers (``cvt.rn.bf16x2.f32``, the fp8 scales applied)
  once its last wgmma group retired, and stored (the staged chunks and TMA stores above) right
  after the next unit's first K slice is issued, so the tensor cores work while C is written;
  the last unit's tile after the loop. EPI_DEFER="spread" (``t256sktds``): round r of the
  staged chunks after the next unit's slice r is issued, one queued slice of MMAs per round
  instead of one for all (a unit of fewer slices flushes the rest after its loop). Not with
  split-K or full stream-K (their epilogue needs the tile's sum first) or EPI="direct"; with
  STREAMK="tail" a cut tile is packed once summed.
- **2-CTA clusters with TMA multicast** (the ``*_c2`` kernels): the two CTAs of a cluster take
  vertically adjacent tiles (same B panel); each loads its own A and half of B with
  ``.multicast::cluster`` into both CTAs, halving B's L2-to-SM traffic. A stage is refilled only
  when the consumers of both CTAs released it (each consumer arrives on its own and on the peer's
  `empty` mbarrier through ``mapa``), and a cluster barrier brackets the kernel. PAIR_N (the
  ``t256x128n`` variant) turns the pair: horizontally adjacent tiles (same A panel), each CTA
  loading half of A's rows multicast and its own B.
- **256-row tiles** (BM = 256, the ``t256x128*`` variants, session 41: cuBLAS's tile at 8192 x
  1024 x 7168): each consumer owns 128 rows as two 64-row blocks, two ``wgmma.m64n128k16`` a
  K step into two accumulator sets, C stored per block; the plain path only (`_check_tall`).
- **Split-K** (SPLITK = S > 1, for shapes with few tiles): a unit is one of S K-ranges of a
  tile; every split stores its f32 partial in its own workspace slot and counts itself in with
  an acq_rel atomic; the split that arrives last sums the S slots in split order (bitwise the
  same whichever arrives last), resets the counter and runs the epilogue. No CTA waits.
  REDUCE="red" (the small-M variants, docs/TUNING.md "Small M"): every split adds its partial
  into ONE f32 tile with ``red.global.add.f32`` instead, so the last split reads one tile, not
  S (the sum's order follows the arrivals: not bitwise reproducible, within one bf16 ulp), and
  stores zeros back for the next launch. REDUCE="peers" (``*p`` variants, docs/TUNING.md
  "Small M, round 2"): the slots' plain stores, but the last split keeps its own partial in
  registers and reads only the other S - 1 slots (at S = 2 one round trip, no atomics, no
  zeroing, bitwise the slots sum). REDUCE="pair" (``gemm_bf16_k2``, the ``*x`` variants,
  docs/TUNING.md "Small M, round 3"): a tile's two splits are the two CTAs of a cluster;
  split 1 stores its partial into split 0's shared memory (``st.shared::cluster``, one
  ``mbarrier.arrive.release.cluster``), split 0 adds it and runs the epilogue: no workspace,
  no count, the same bits.
- **Stream-K** (STREAMK, REDUCE="red"): the K slices of all tiles, tile after tile, are dealt
  in equal contiguous runs to the persistent CTAs (or 2-CTA clusters, both CTAs taking the same
  pieces of their paired tiles), so every SM streams the same number of slices whatever the
  tile count; a tile cut between CTAs is summed as above, counting slices (the piece that
  completes k_tiles runs the epilogue), a whole one never touches the workspace.
  STREAMK="tail" (the ``*skt`` variants, docs/TUNING.md "Wave quantization at M >= 2048"):
  whole tiles for every full wave, stream-K over the last partial wave's tiles only: 256 tiles
  on 132 SMs take 1.94 tile times instead of 2, and a whole tile skips the count.
- Tails: TMA fills out-of-bounds box elements with zeros (K not a multiple of BK adds nothing;
  rows/columns past M/N compute zeros) and clips stores. TMA needs 16-byte row strides:
  K % 8 == 0 (bf16) or K % 16 == 0 (fp8), and N % 8 == 0 for an N-major B or EPI="tma".

Descriptors (PTX ISA 9.7.15.5.1): start >> 4 (bits 0-13), leading byte offset >> 4 (16-29),
stride byte offset >> 4 (32-45), 128B swizzle (bits 62-63). K-major operands: rows of 128 bytes,
SBO = 1024 (8 rows), a K step of 16 bf16 (32 fp8) adds 32 bytes. N-major B (``imm-trans-b = 1``):
64-column boxes of BK rows, LBO = box bytes (the next 64 columns), SBO = 1024 (the next 8 k), a
K step of 16 adds 16 rows = 2048 bytes.

Accumulator layout (wgmma D, per warp w of a warpgroup): rows 16w + g (+8) with g = lane / 4,
register 4j + {0, 1} at columns 8j + 2t + {0, 1} (t = lane % 4), 4j + {2, 3} the same columns 8
rows down: exactly ``stmatrix``'s fragment of the 8 x 8 matrices (rows 16w..+7 | +8..+15) x
(columns 8j..8j+7).

Tolerance (bf16 C; inputs, references and tolerances live in gemm_host.py): inputs are N(0, 1) / K^(1/4), so C ~ N(0, 1) at every K, and the reference
is numpy's f32 product rounded to bf16. The kernel's f32 sums differ from numpy's in the last bits
(tensor-core alignment and truncation, another order), so the bf16 roundings of the two can
differ by one bf16 ulp (<= 2^-7 of |c|): rtol = 2^-7. Near zero (cancellation) the f32
difference itself shows: numsim's H200 tensor-core model against numpy gives at most 5.8e-5 of
the output RMS at K = 14336, so atol = 1e-3 (15x margin for the tails of 117M elements); the
normalized RMS error of the whole matrix must stay below 2e-3 (one-ulp flips; a wrong tile is
~1). fp8: see FP8_TOLERANCE.
"""

from __future__ import annotations

import tirxh.lang as T
from gemm_host import (BF16_TOLERANCE, FP8_TOLERANCE, bf16_inputs, bf16_reference, fp8_inputs,
                       fp8_reference)
from hopper import CHUNK, CHUNK_BYTES, WG, bf16x2, desc, log2, stmatrix_chunk, stmatrix_lanes

BM = 128                 # rows of C per CTA tile: two consumer warpgroups x 64 rows (the default;
                         # BM = 256, the bf16 kernels' `t256x128`: each warpgroup 128 rows)
CONSUMERS = 2
H200_SMS = 132           # the persistent grid: one CTA per SM of the H200
# setmaxnreg moves registers within the CTA's own pool (PTX ISA: setmaxnreg), which holds what the
# CTA got at launch: 168 per thread (ptxas's cap for 384 threads at 1 CTA/SM) x 384 = 64512, not
# the SM's 64K. 128 * 40 + 256 * 232 = 64512 fits exactly; with 48 the consumers' .inc waits
# forever for 1024 registers nobody releases (every gemm_sm90 launch hung on the H200,
# 2026-12-01). tests/zoo/test_gemm_sm90.py checks the budget against the compiled count.
PRODUCER_REGS, CONSUMER_REGS = 40, 232
# STREAMK="lock": a cut piece's reduction (red.add of a 128 x 256 f32 tile, count, and for the
# last the read back) in K slices of the mainloop: ~2 us (the s15/d7 fit of the "tail" pieces)
# over a 0.65 us slice (2 x 128 x 256 x 64 FLOP at 6.465 TFLOP/s per SM)
LOCK_RED_SLICES = 3


# --- the tile schedule (descriptors and the epilogue's stmatrix chunks: hopper.py) ----------

class _Unit:
    """One work unit: the tile's first row `m0` and column `n0`, its workspace and counter index
    `tile` (row-major over the tile grid; STREAMK="tail": over the tail's tiles), the split
    `split` and its K slices [kb, ke). A reducing unit adds `count` to
    the tile's counter; the unit whose count brings it to `need` is the tile's last. `partial`:
    None where every unit of a reducing schedule is a part of its tile (split-K), else the
    predicate "not the whole K range" (stream-K: a whole tile needs no reduction)."""

    def __init__(self, m0, n0, tile, split, kb, ke, count=1, need=1, partial=None):
        self.m0, self.n0, self.tile, self.split, self.kb, self.ke = m0, n0, tile, split, kb, ke
        self.count, self.need, self.partial = count, need, partial


class _Schedule:
    """The static persistent schedule: unit p covers split p % SPLITK of the tile pair
    q = p / SPLITK, tiles (um * CM + rank, tn); clusters take units cluster, cluster + clusters,
    ... in a grouped raster.

    RASTER "m": GROUP consecutive unit rows are swept along N together (q -> row
    first + r % rows, column r / rows); "n": the same with the roles of M and N swapped. A split
    s of S takes K slices [s * k_tiles / S, (s + 1) * k_tiles / S). Emits the counts once
    (shr/add/mul) and per unit a few div.u32/rem.u32/min.u32.

    Stream-K (STREAMK=True): the units' K slices, unit after unit in raster order, form one
    sequence of units x k_tiles; worker c (a CTA, or a cluster whose CTAs take the same pieces
    of their paired tiles) takes the slices [c * total / workers, (c + 1) * total / workers),
    i.e. the pieces of the (at most a few) units they fall in: every SM gets the same number of
    slices whatever the tile count (112 tiles no longer leave 20 of 132 SMs idle), and a tile
    cut into pieces is summed like split-K (REDUCE "red", counting slices).

    Stream-K on the tail only (STREAMK="tail", the "data-parallel + stream-K" hybrid): the
    first dp = units / workers units of each worker are whole tiles (worker + i * workers,
    as without stream-K: no workspace), and only the last partial wave's units (units mod
    workers of them) are dealt as slices over all workers. 256 tiles on 132 SMs then take
    1.94 tile times instead of 2; only the tail's tiles are cut (into ~2 pieces each).

    The tail in K-lockstep (STREAMK="lock", session 15): the same whole tiles, but of the tail's
    T units (T < workers) worker c < T takes tail unit c's first `cut` K slices, and the W - T
    other workers ("helpers") take the rest [cut, k_tiles) of the tail's units, helper h the
    units [h * T / (W - T), (h + 1) * T / (W - T)), at most P = ceil(T / (W - T)) of them:
    cut = ceil((P * k_tiles + (P - 1) * R) / (P + 1)) (R = LOCK_RED_SLICES, a reduction's cost
    in slices), at most k_tiles, evens a main piece with P helper pieces. Every worker
    then starts its tail at one of two K offsets (0 or `cut`), as in a data-parallel wave,
    where "tail" starts each at its own offset and reads A and B without L2 reuse (s15/d7:
    the tail ran at ~0.72-0.81 of the mainloop rate; docs/PERFORMANCE.md "Session 15").
    """

    def __init__(self, M, N, k_tiles, BN: int, CM: int, GROUP: int, RASTER: str, S: int,
                 streamk: bool = False, BM: int = BM, pair_n: bool = False):
        self.tiles_n = (N + (BN - 1)) >> log2(BN)
        tiles_m = (M + (BM - 1)) >> log2(BM)
        self.BM = BM
        # a cluster's CTAs take adjacent tiles along M (same B panel, B multicast) or, with
        # `pair_n` (PAIR_N), along N (same A panel, A multicast): one unit per cluster
        self.pair_n = CM > 1 and pair_n
        self.units_m = (tiles_m + (CM - 1)) >> log2(CM) if CM > 1 and not pair_n else tiles_m
        self.units_n = (self.tiles_n + (CM - 1)) >> log2(CM) if self.pair_n else self.tiles_n
        self.units = self.units_m * self.units_n * S if S > 1 else self.units_m * self.units_n
        self.major = self.units_m if RASTER == "m" else self.units_n
        self.span = (self.units_n if RASTER == "m" else self.units_m) * GROUP
        self.GROUP, self.RASTER, self.CM, self.BN, self.S = GROUP, RASTER, CM, BN, S
        self.k_tiles = k_tiles
        self.rank = T.cluster_ctarank() if CM > 1 else 0
        self.first_unit = T.ctaid.x >> log2(CM) if CM > 1 else T.ctaid.x
        self.unit_step = T.nctaid.x >> log2(CM) if CM > 1 else T.nctaid.x
        self.streamk = streamk
        if streamk not in (False, True, "tail", "lock"):
            raise ValueError(f"STREAMK = {streamk!r}: expected False, True (every tile's K "
                             f"slices dealt evenly) or 'tail' (whole tiles for the full waves, "
                             f"the last partial wave's slices dealt evenly) or 'lock' (the "
                             f"tail's units cut at one K offset, the rest on the idle workers)")
        if streamk:
            if S > 1:
                raise ValueError(f"STREAMK takes SPLITK = 1 (got SPLITK = {S})")
            # workers are clusters (CM = 2: both CTAs take the same units, the same K ranges,
            # so the B multicast stays paired); the units before `dp` are whole tiles
            workers, c = self.unit_step, self.first_unit
            self.worker, self.workers = c, workers
            if streamk == "lock":
                self.dp = self.units / workers          # full waves: whole tiles, no workspace
                tail = self.units - self.dp * workers   # T < workers units in the tail
                helpers = workers - tail
                # a helper has at most P = ceil(T / helpers) pieces: the cut evens a main piece
                # and its reduction (cut + R slices) with P helper pieces and their reductions
                # (P * (k - cut + R)): cut = ceil((P * k + (P - 1) * R) / (P + 1)), at most k
                most = (tail + helpers - 1) / helpers
                cut = (most * k_tiles + (most - 1) * LOCK_RED_SLICES + most) / (most + 1)
                self.cut = T.ptx.min.u32(cut, k_tiles)         # a main piece: [0, cut)
                self.main = c < tail
                h = c - tail                            # (wraps where main: not selected)
                self.h0 = (h * tail) / helpers
                n_help = ((h + 1) * tail) / helpers - self.h0
                # the cut at k_tiles (few slices): the tail's units whole on their main workers,
                # no helper piece (an empty one would add an unset accumulator)
                n_help = T.ptx.selp.u32(n_help, 0, self.cut < k_tiles)
                self.units = self.dp + T.ptx.selp.u32(1, n_help, self.main)
                self.first_unit, self.unit_step = 0, 1
                return
            if streamk == "tail":
                self.dp = self.units / workers          # full waves: whole tiles, no workspace
                dp_slices = self.dp * workers * k_tiles
                total = self.units * k_tiles - dp_slices
                self.g0 = dp_slices + (c * total) / workers
                self.g1 = dp_slices + ((c + 1) * total) / workers
            else:
                total = self.units * k_tiles
                self.g0 = (c * total) / workers
                self.g1 = ((c + 1) * total) / workers
            self.q0 = self.g0 / k_tiles        # the first unit this worker has slices of
            pieces = (self.g1 + (k_tiles - 1)) / k_tiles - self.q0
            if streamk == "tail":  # fewer tail slices than workers: no unit, not an empty one
                self.units = self.dp + T.ptx.min.u32(pieces, self.g1 - self.g0)
            else:                  # the grid gives every worker >= 1 slice
                self.units = pieces
            self.first_unit, self.unit_step = 0, 1

    def unit(self, p) -> _Unit:
        S = self.S
        q, split = (p / S, p % S) if S > 1 else (p, 0)
        lo, hi = None, None   # stream-K: the worker's slices [lo, hi) that unit p draws from
        if self.streamk == "lock":  # p < dp: whole tiles as "tail"; then the main piece [0, cut)
            whole = p < self.dp     # of tail unit `worker`, or helper pieces [cut, k_tiles)
            tail_q = T.ptx.selp.u32(self.worker, self.h0 + (p - self.dp), self.main)
            q = T.ptx.selp.u32(self.worker + p * self.workers, self.dp * self.workers + tail_q,
                               whole)
            kb = T.ptx.selp.u32(0, T.ptx.selp.u32(0, self.cut, self.main), whole)
            ke = T.ptx.selp.u32(self.k_tiles, T.ptx.selp.u32(self.cut, self.k_tiles, self.main),
                                whole)
            lo, hi = q * self.k_tiles + kb, q * self.k_tiles + ke
        elif self.streamk == "tail":  # p < dp: the whole tile worker + p * workers; then pieces
            whole = p < self.dp
            q = T.ptx.selp.u32(self.worker + p * self.workers, self.q0 + (p - self.dp), whole)
            lo = T.ptx.selp.u32(q * self.k_tiles, self.g0, whole)
            hi = T.ptx.selp.u32((q + 1) * self.k_tiles, self.g1, whole)
        elif self.streamk:
            q, lo, hi = self.q0 + p, self.g0, self.g1
        g = q / self.span
        first = g * self.GROUP
        r = q - g * self.span
        width = T.ptx.min.u32(self.major - first, self.GROUP)
        a, b = first + r % width, r / width
        um, un = (a, b) if self.RASTER == "m" else (b, a)
        if self.pair_n:
            tm, tn = um, un * self.CM + self.rank
        else:
            tm, tn = (um * self.CM + self.rank if self.CM > 1 else um), un
        if self.streamk:  # this worker's slices of tile q: [max(lo, base), min(hi, end))
            base = q * self.k_tiles
            kb = T.ptx.max.u32(lo, base) - base
            ke = T.ptx.min.u32(hi, base + self.k_tiles) - base
            count = ke - kb
            # the workspace slot: the tile's index, or on the tail only its index there (the
            # whole tiles before it never touch the workspace: 132 slots, not every tile's)
            slot = tm * self.tiles_n + tn
            if self.streamk in ("tail", "lock"):
                tail_q = q - self.dp * self.workers
                slot = tail_q * self.CM + self.rank if self.CM > 1 else tail_q
            return _Unit(tm * self.BM, tn * self.BN, slot, 0, kb, ke, count=count,
                         need=self.k_tiles, partial=count != self.k_tiles)
        if S == 1:
            return _Unit(tm * self.BM, tn * self.BN, None, 0, 0, self.k_tiles)
        kb = (split * self.k_tiles) / S
        ke = ((split + 1) * self.k_tiles) / S
        return _Unit(tm * self.BM, tn * self.BN, tm * self.tiles_n + tn, split, kb, ke, need=S)


# --- the kernel body ---------------------------------------------------------------------------

def _gemm(cfg: dict, a_map, b_map, c_map, c, ws, cnt, M, N, K, scales=None):
    """The body shared by every GEMM kernel here; `cfg` holds the constants (see the kernel
    factories below); `ws`/`cnt` the split-K workspace and counters; `scales` the fp8 kernels'
    (scale_a, scale_b) pointers."""
    BN, STAGES, CM = cfg["BN"], cfg["STAGES"], cfg["CM"]
    esize, epi, bm = cfg["ESIZE"], cfg["EPI"], cfg["BM"]
    _check_tall(cfg)
    _check_pair_n(cfg)
    BK = 128 // esize                       # K elements in one 128-byte row
    a_bytes, b_bytes = bm * 128, BN * 128    # per stage
    elem = T.bf16 if esize == 2 else T.e4m3
    astages = _a_stages(cfg)
    sA = T.shared(elem, (astages or STAGES, bm, BK), align=1024, swizzle=128, dynamic=True,
                  name="sA")
    sB = T.shared(elem, (STAGES, BN, BK), align=1024, swizzle=128, dynamic=True, name="sB")
    nbufs = cfg["EPI_BUFS"] if epi == "tma" else 0
    sC = T.shared(T.bf16, (CONSUMERS, max(nbufs, 1), CHUNK, CHUNK), align=1024, swizzle=128,
                  dynamic=True, name="sC") if nbufs else None
    full = T.mbarrier(STAGES, name="full", dynamic=True)
    empty = T.mbarrier(STAGES, name="empty", dynamic=True)
    # ASTAGES: A's own ring (`a_full`/`a_empty`), `full`/`empty` then count B's bytes alone
    a_bars = (T.mbarrier(astages, name="a_full", dynamic=True),
              T.mbarrier(astages, name="a_empty", dynamic=True)) if astages else None
    pair = _pair(cfg)
    if pair:  # REDUCE "pair": split 1's partial lands in split 0's shared memory (DSMEM)
        pair = (T.shared(T.f32, (CONSUMERS, BN // 2 * WG), align=16, dynamic=True, name="sR"),
                T.mbarrier(CONSUMERS, name="r_full", dynamic=True),
                T.mbarrier(CONSUMERS, name="r_free", dynamic=True))
    tid = T.tid.x
    wg = tid >> 7

    def sched():  # built inside each role: no value lives across setmaxnreg (ptxas would spill)
        k_tiles = (K + (BK - 1)) >> (6 if esize == 2 else 7)
        return _Schedule(M, N, k_tiles, BN, CM, cfg["GROUP"], cfg["RASTER"], cfg["SPLITK"],
                         cfg["STREAMK"], bm, cfg["PAIR_N"])

    with T.if_(tid == 0):
        for s in range(STAGES):
            full[s].init(1)
            empty[s].init(CONSUMERS * CM)   # both consumers of every CTA that reads the stage
        for s in range(astages):
            a_bars[0][s].init(1)
            a_bars[1][s].init(CONSUMERS)
        for w in range(CONSUMERS if pair else 0):
            pair[1][w].init(1)
            pair[2][w].init(1)
        T.ptx.fence.mbarrier_init.release.cluster()
    _cta_or_cluster_sync(2 if pair else CM)   # the pair's barriers initialized before use
    if cfg.get("PDL"):
        # programmatic dependent launch (session 19): the next kernel in the stream may launch
        # now (its CTAs take SMs as this grid frees them and run their prologue), and nothing
        # here touches global memory before the previous kernel's writes are visible. The
        # launch carries the attribute because the kernel executes griddepcontrol.wait
        # (`CompiledKernel.programmatic_dependent`).
        T.ptx.griddepcontrol.launch_dependents()
        T.ptx.griddepcontrol.wait()

    with T.role(wg == 0, dec=PRODUCER_REGS):
        with T.if_(tid == 0):
            _producer(cfg, sched(), a_map, b_map, sA, sB, full, empty, a_bars, a_bytes,
                      b_bytes)
    with T.else_():
        T.ptx.setmaxnreg.inc.sync.aligned.u32(CONSUMER_REGS)
        _consumer(cfg, sched(), sA, sB, sC, full, empty, a_bars, c_map, c, ws, cnt, M, N,
                  scales, T.tid.x, pair)
    if CM > 1 or pair:  # no CTA may exit while its peer can still arrive on its barriers
        _cta_or_cluster_sync(2)


# the plain persistent path: whole tiles, C staged and stored by TMA as each finishes, A and B
# in one ring (what BM = 256 and PAIR_N were built for)
PLAIN_PATH = {"SPLITK": 1, "STREAMK": False, "EPI_DEFER": False, "EPI": "tma", "ASTAGES": 0,
              "PAIR": False}


def _off_plain_path(cfg, keys) -> dict:
    """The constants among `keys` whose value in `cfg` leaves `PLAIN_PATH`."""
    return {k: cfg[k] for k in keys if cfg.get(k, PLAIN_PATH[k]) != PLAIN_PATH[k]}


def _check_pair_n(cfg) -> None:
    """PAIR_N (`t256x128n`, session 41: cuBLAS's 8192 x 1024 x 7168 kernel pairs its CTAs
    along N, `1x2`): the two CTAs of a cluster take horizontally adjacent tiles and share A
    (each loads half of A's rows, multicast to both, and its own B). A 2-CTA cluster on the
    plain path only; the rest is refused."""
    if not cfg["PAIR_N"]:
        return
    odd = _off_plain_path(cfg, ("SPLITK", "STREAMK", "EPI_DEFER", "ASTAGES", "PAIR"))
    if cfg["CM"] != 2 or odd:
        raise ValueError(f"PAIR_N takes a 2-CTA cluster (gemm_bf16_c2) and the plain path (no "
                         f"split-K, stream-K, deferred epilogue, A ring or pair); got "
                         f"CM = {cfg['CM']}, {odd}")


def _check_tall(cfg) -> None:
    """BM = 256 (`t256x128`, session 41: cuBLAS's tile at 8192 x 1024 x 7168 is 256 x 128):
    each consumer warpgroup owns 128 rows, two ``m64nBNk16`` a K step into two accumulator
    sets. Built for the plain persistent path only: whole tiles, C staged and stored by TMA
    as it finishes, A and B in one ring; the rest is refused, not silently run at BM = 128."""
    bm = cfg["BM"]
    if bm == BM:
        return
    if bm != 256:
        raise ValueError(f"BM = {bm}: expected 128 (one 64-row block a consumer) or 256 (two)")
    odd = _off_plain_path(cfg, ("SPLITK", "STREAMK", "EPI_DEFER", "EPI", "ASTAGES", "PAIR"))
    if odd or cfg["BN"] > 128:
        raise ValueError(f"BM = 256 takes BN <= 128 (two accumulator sets of BN / 2 registers) "
                         f"and the plain path (no split-K, stream-K, deferred or direct "
                         f"epilogue, A ring or pair); got BN = {cfg['BN']}, {odd}")


def _cta_or_cluster_sync(CM: int):
    """``bar.sync 0`` for a lone CTA; ``barrier.cluster.arrive.release`` +
    ``barrier.cluster.wait.acquire`` for a cluster (mbarrier inits visible to the peer)."""
    if CM == 1:
        T.ptx.bar.sync(0)
    else:
        T.ptx.barrier.cluster.arrive.release()
        T.ptx.barrier.cluster.wait.acquire()


def _pair(cfg) -> bool:
    """REDUCE "pair" (the ``gemm_bf16_k2`` kernel, docs/TUNING.md "Small M, round 3"): a 2-CTA
    cluster holds the two K-splits of a tile, so split 1 hands its partial to split 0 through
    distributed shared memory; refused anywhere else."""
    if (cfg["REDUCE"] == "pair") != cfg["PAIR"]:
        raise ValueError("REDUCE = 'pair' is the gemm_bf16_k2 kernel's, and gemm_bf16_k2 "
                         f"sums through it alone (got REDUCE = {cfg['REDUCE']!r})")
    if cfg["PAIR"] and (cfg["SPLITK"] != 2 or cfg["STREAMK"] or cfg["EPI_DEFER"]):
        raise ValueError(f"REDUCE = 'pair' takes SPLITK = 2, no STREAMK or EPI_DEFER (got "
                         f"SPLITK = {cfg['SPLITK']})")
    return cfg["PAIR"]


def _a_stages(cfg) -> int:
    """ASTAGES: 0 (A and B share one ring of STAGES), or the depth of A's own ring, shallower
    than B's (docs/TUNING.md "Small M, round 3"). Only where a CTA's A tile is the one its
    cluster shares nothing of (CM = 1)."""
    a, stages = cfg["ASTAGES"], cfg["STAGES"]
    if a and not 0 < a < stages:
        raise ValueError(f"ASTAGES = {a!r}: expected 0 (one ring) or 1..STAGES - 1 (A's own "
                         f"ring, shallower than B's {stages} stages)")
    if a and cfg["CM"] > 1:
        raise ValueError("ASTAGES takes one-CTA kernels (CM = 1): a cluster releases B's "
                         "stages across both CTAs")
    return a


def _producer(cfg, sched, a_map, b_map, sA, sB, full, empty, a_bars, a_bytes, b_bytes):
    """One thread: for every unit and K slice, wait until the stage is free in every CTA that
    reads it, arm `full` with the stage's bytes and issue the TMA loads (B multicast with CM=2).

    With ASTAGES (A's own ring, `a_bars` = (a_full, a_empty)): B runs STAGES - ASTAGES slices
    ahead of A. Step j of a unit loads B's slice j (j < ke) and A's slice j - lead (j >= kb +
    lead), so both waits are for the release of slice j - STAGES: the deep ring holds B (the
    bytes from HBM) in flight, the shallow one A (an L2 hit, the same rows for every CTA)."""
    BN, CM, STAGES, kmajor = cfg["BN"], cfg["CM"], cfg["STAGES"], cfg["B_KMAJOR"]
    BK = 128 // cfg["ESIZE"]
    pair_n = cfg["PAIR_N"]                # A's halves multicast, B this CTA's own
    b_cm = 1 if pair_n else CM            # the CTAs that share (and split) a B slice
    load = T.ptx["cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"]
    mcast = T.ptx["cp.async.bulk.tensor.2d.shared::cluster.global.tile"
                  ".mbarrier::complete_tx::bytes.multicast::cluster"]
    T.ptx.prefetch.tensormap(a_map)
    T.ptx.prefetch.tensormap(b_map)
    ring = T.pipeline(STAGES)
    a_base, b_base = sA.ptr(), sB.ptr()

    def load_b(st, k0, n0, bars):  # into stage st, arriving on bars[st]
        dst = b_base + st * b_bytes
        if kmajor:   # one box of BN (or BN / 2 per CTA) rows of 128 bytes
            if b_cm == 1:
                load(dst, b_map[k0, n0], bars[st])
            else:
                half = sched.rank * (b_bytes // 2)
                mcast(dst + half, b_map[k0, n0 + sched.rank * (BN // 2)], bars[st], 3)
        else:        # BN / 64 boxes of BK rows x 64 columns
            boxes = BN // CHUNK
            for j in range(boxes // b_cm):
                if b_cm == 1:
                    load(dst + j * (BK * 128), b_map[n0 + j * CHUNK, k0], bars[st])
                else:
                    jj = sched.rank * (boxes // 2) + j
                    mcast(dst + jj * (BK * 128), b_map[n0 + jj * CHUNK, k0], bars[st], 3)

    def slot(bars, cursor, nbytes):  # wait for the stage's release, arm it with its bytes
        with T.iket.range("wait_empty"):  # first pass: a fresh barrier counts as released
            bars[1][cursor.stage].wait(cursor.phase ^ 1)
        st = cursor.stage
        bars[0][st].arrive_expect_tx(nbytes)
        return st

    if a_bars:
        a_ring, lead = T.pipeline(cfg["ASTAGES"]), STAGES - cfg["ASTAGES"]
    with T.range(sched.first_unit, sched.units, sched.unit_step) as p:
        u = sched.unit(p)
        m0, n0 = u.m0, u.n0
        if not a_bars:
            with T.range(u.kb, u.ke) as kt:
                st = slot((full, empty), ring, a_bytes + b_bytes)
                k0 = kt * BK
                if pair_n:   # this CTA's half of A's rows, into both CTAs
                    half = sched.rank * (a_bytes // 2)
                    mcast(a_base + st * a_bytes + half,
                          a_map[k0, m0 + sched.rank * (cfg["BM"] // 2)], full[st], 3)
                else:
                    load(a_base + st * a_bytes, a_map[k0, m0], full[st])
                load_b(st, k0, n0, full)
                ring.advance()
        else:
            with T.range(u.kb, u.ke + lead) as j:
                with T.if_(j < u.ke):
                    st = slot((full, empty), ring, b_bytes)
                    load_b(st, j * BK, n0, full)
                    ring.advance()
                with T.if_(j >= u.kb + lead):
                    st = slot(a_bars, a_ring, a_bytes)
                    load(a_base + st * a_bytes, a_map[(j - lead) * BK, m0], a_bars[0][st])
                    a_ring.advance()


def _consumer(cfg, sched, sA, sB, sC, full, empty, a_bars, c_map, c, ws, cnt, M, N, scales,
              tid, pair=None):
    """One warpgroup: 64 rows of every unit; wgmma with one group in flight, stage release, then
    (split-K: the reduction, by the split that finishes a tile last) the epilogue (fp8: scaled
    by scale_a * scale_b, loaded once). With A's own ring (`a_bars`) a slice waits for both
    stages and releases both."""
    BN, STAGES, CM, esize = cfg["BN"], cfg["STAGES"], cfg["CM"], cfg["ESIZE"]
    kmajor = cfg["B_KMAJOR"]
    BK = 128 // esize
    kstep = 32 // esize                       # wgmma K: 16 bf16 or 32 fp8 (32 bytes)
    ab = "bf16.bf16" if esize == 2 else "e4m3.e4m3"
    mma = T.ptx[f"wgmma.mma_async.sync.aligned.m64n{BN}k{kstep}.f32.{ab}"]
    bm = cfg["BM"]
    blocks = bm // (64 * CONSUMERS)           # 64-row blocks a warpgroup owns: 1, or 2 (BM 256)
    a_bytes, b_bytes = bm * 128, BN * 128
    scale = None
    if scales is not None:
        scale = T.ptx.mul.rn.f32(T.ptx.ld.global_.f32(scales[0].at(0)),
                                 T.ptx.ld.global_.f32(scales[1].at(0)))
    cw = (tid >> 7) - 1
    accs = [T.fragment(T.f32, BN // 2) for _ in range(blocks)]
    acc = accs[0]                             # the one set every path but BM 256's uses
    ring = T.pipeline(STAGES)
    prev = T.reg(T.u32, init=0)               # the stage of the previous K slice
    if a_bars:                                # A's ring: its own cursor and previous stage
        a_ring, a_prev = T.pipeline(cfg["ASTAGES"]), T.reg(T.u32, init=0)
    leader = (tid & (WG - 1)) == 0
    flag = T.shared(T.u32, (CONSUMERS,), name="flag") if _reduces(cfg) and not pair else None
    if pair:    # (sR, r_full, r_free, the parity of this unit's hand-over)
        pair = (*pair, T.reg(T.u32, init=0))
    da0s = [desc(sA.ptr() + (cw * blocks + j) * (64 * 128), 16, 1024) for j in range(blocks)]
    db0 = desc(sB.ptr(), 16, 1024) if kmajor else desc(sB.ptr(), BK * 128, 1024)
    b_step = 2 if kmajor else 128             # one K step in the descriptor's 16-byte units
    peer_empty = T.ptx.mapa.shared__cluster.u32(_ptr(empty), sched.rank ^ 1) if CM > 1 else None
    defer = cfg["EPI_DEFER"]
    if defer not in (False, True, "spread"):
        raise ValueError(f"EPI_DEFER = {defer!r}: expected False, True (the previous tile "
                         f"stored after the first K slice is issued) or 'spread' (one round "
                         f"of EPI_BUFS chunks after each of the first K slices)")
    if defer and ((_reduces(cfg) and cfg["STREAMK"] not in ("tail", "lock"))
                  or cfg["EPI"] != "tma"):
        raise ValueError("EPI_DEFER takes EPI = 'tma' without SPLITK or STREAMK (a reducing "
                         "unit's epilogue needs the tile's sum first), STREAMK = 'tail' "
                         "or 'lock' excepted (mostly whole tiles; a cut one is packed once "
                         "summed)")
    if defer:   # the previous unit's C tile, packed to bf16, stored under this unit's MMAs
        nrounds = -(-(BN // CHUNK) // cfg["EPI_BUFS"])
        packed = [T.reg(T.bf16x2) for _ in range(BN // 4)]
        pending = T.reg(T.pred)
        pending.set(False)
        pm0, pn0 = T.reg(T.u32, init=0), T.reg(T.u32, init=0)

    def release(stage):
        empty[stage].arrive()
        if a_bars:
            a_bars[1][a_prev].arrive()
        if CM > 1:  # the default (.release.cta) arrive: what must be ordered are this CTA's wgmma
            # reads (retired by wait_group) before the peer's TMA writes into this CTA; nothing
            # generic is published to the peer. `.release.cluster` costs a MEMBAR.ALL.GPU per slice
            T.ptx.mbarrier.arrive.shared__cluster.b64(T.sink, peer_empty + (stage << 3))

    with T.range(sched.first_unit, sched.units, sched.unit_step) as p:
        u = sched.unit(p)
        with T.range(u.kb, u.ke) as kt:
            st = ring.stage
            ast = a_ring.stage if a_bars else st
            with T.iket.range("wait_full"):
                full[st].wait(ring.phase)
                if a_bars:
                    a_bars[0][ast].wait(a_ring.phase)
            a_off = T.ptx.cvt.u64.u32(ast * (a_bytes >> 4))
            das = [d0 + a_off for d0 in da0s]
            db = db0 + T.ptx.cvt.u64.u32(st * (b_bytes >> 4))
            accumulate = kt != u.kb  # scale-d: a unit's first K slice overwrites the accumulators
            with T.iket.range("mma"):
                T.ptx.wgmma.fence.sync.aligned()
                for kk in range(BK // kstep):
                    d = accumulate if kk == 0 else T.ptx.mov.pred(1)
                    for a_j, da in zip(accs, das):   # BM 256: two row blocks, one B
                        if esize == 2:
                            mma(a_j, da + 2 * kk, db + b_step * kk, d, 1, 1, 0,
                                0 if kmajor else 1)
                        else:
                            mma(a_j, da + 2 * kk, db + b_step * kk, d, 1, 1)
                T.ptx.wgmma.commit_group.sync.aligned()
                T.ptx.wgmma.wait_group.sync.aligned(1)  # the previous slice's group retired
            with T.if_(leader & accumulate):
                release(prev)
            if defer == "spread":  # round r of the previous C tile under slice kb + r
                for r in range(nrounds):
                    with T.if_(pending & (kt == u.kb + r), uniform=True):
                        _epilogue_tma(cfg, None, sC, c_map, pm0, pn0, cw, tid, leader, None,
                                      packed=packed, rounds=[r])
                        if r == nrounds - 1:
                            pending.set(False)
            elif defer:  # the first slice's MMAs are in flight: store the previous C tile now
                with T.if_(pending & ~accumulate, uniform=True):
                    _epilogue_tma(cfg, None, sC, c_map, pm0, pn0, cw, tid, leader, None,
                                  packed=packed)
                    pending.set(False)
            prev.set(st)
            ring.advance()
            if a_bars:
                a_prev.set(ast)
                a_ring.advance()
        T.ptx.wgmma.wait_group.sync.aligned(0)
        with T.if_(leader):
            release(prev)
        if defer == "spread":  # a unit of fewer slices than rounds: the rest before repacking
            with T.if_(pending, uniform=True):
                for r in range(1, nrounds):
                    with T.if_(u.ke - u.kb <= r, uniform=True):
                        _epilogue_tma(cfg, None, sC, c_map, pm0, pn0, cw, tid, leader, None,
                                      packed=packed, rounds=[r])
                pending.set(False)
        def finish():   # the tile's sum is in `acc`: store it now, or pack it for later
            if defer:
                for i in range(0, BN // 2, 2):
                    bf16x2(_scaled(acc, i, scale), _scaled(acc, i + 1, scale), packed[i // 2])
                pm0.set(u.m0)
                pn0.set(u.n0)
                pending.set(True)
            else:
                for j, a_j in enumerate(accs):   # row block j: rows (cw * blocks + j) * 64
                    _epilogue(cfg, a_j, sC, c_map, c, M, N, u, cw, tid, leader, scale,
                              row0=u.m0 + (cw * blocks + j) * 64)

        if not _reduces(cfg):
            finish()
        elif cfg["STREAMK"] in ("tail", "lock"):   # a whole tile (most) skips the count too
            last = T.reg(T.pred)
            last.set(True)
            with T.if_(u.partial, uniform=True):
                last.set(_splitk_reduce(cfg, acc, ws, cnt, flag, u, cw, tid, leader))
            with T.if_(last, uniform=True):   # one copy of the epilogue, not one per branch
                finish()
        elif pair:
            with T.if_(_reduce_pair(cfg, acc, pair, cw, tid, leader), uniform=True):
                finish()
        else:
            with T.if_(_splitk_reduce(cfg, acc, ws, cnt, flag, u, cw, tid, leader),
                       uniform=True):
                finish()
    if defer:       # the last unit's C tile
        with T.if_(pending, uniform=True):
            _epilogue_tma(cfg, None, sC, c_map, pm0, pn0, cw, tid, leader, None, packed=packed)
    if cfg["EPI"] == "tma":
        with T.if_(leader):
            T.ptx.cp.async_.bulk.wait_group(0)  # the last stores completed before the CTA exits


def _epilogue(cfg, acc, sC, c_map, c, M, N, u, cw, tid, leader, scale, row0=None):
    """`row0`: the first row of C that `acc` holds (default: the warpgroup's 64 rows of a
    128-row tile, u.m0 + 64 cw)."""
    with T.iket.range("epilogue"):
        if cfg["EPI"] == "tma":
            _epilogue_tma(cfg, acc, sC, c_map, u.m0, u.n0, cw, tid, leader, scale, row0=row0)
        else:
            _epilogue_direct(cfg, acc, c, M, N, u.m0, u.n0, cw, tid, scale)


def _reduces(cfg) -> bool:
    """Whether units are parts of tiles summed through the workspace (split-K, stream-K)."""
    return cfg["SPLITK"] > 1 or cfg["STREAMK"]


def _splitk_reduce(cfg, acc, ws, cnt, flag, u, cw, tid, leader):
    """Split-K through global memory: publish this split's partial (REDUCE "slots": its own
    slot; "red": added into the tile's one f32 sum), count it in, and, in the split that
    arrives last, bring the tile's whole sum into the accumulators. Returns that predicate:
    only the last split runs the epilogue. No CTA ever waits for another."""
    reducers = {"slots": _reduce_slots, "peers": _reduce_peers, "red": _reduce_red}
    if cfg["REDUCE"] not in reducers:
        raise ValueError(f"REDUCE = {cfg['REDUCE']!r}: expected 'slots', 'peers' or 'red'")
    if cfg["STREAMK"] and cfg["REDUCE"] != "red":
        raise ValueError("STREAMK sums through REDUCE = 'red' (a tile has a varying number "
                         "of pieces, so no fixed slots)")
    return reducers[cfg["REDUCE"]](cfg, acc, ws, cnt, flag, u, cw, tid, leader)


def _count_in(cnt, flag, u, cw, leader):
    """After the warpgroup published its partial: a named barrier (every thread's stores or
    reductions issued), then one thread counts the unit in (``fence.acq_rel.gpu`` +
    ``atom.acq_rel.gpu.global.add.u32`` of `u.count` on the tile's counter: the release
    publishes the warpgroup's writes, the acquire makes every earlier unit's visible), shares
    the old count through shared memory, a second barrier. Returns (the tile's last unit, i.e.
    old + count == need?, the counter's address)."""
    bar_id = 1 + cw
    T.ptx.bar.sync(bar_id, WG)
    counter = cnt.at(u.tile * 2 + cw)
    with T.if_(leader):
        T.ptx.fence.acq_rel.gpu()         # the warpgroup's stores (ordered by the barrier) ...
        old = T.ptx.atom.acq_rel.gpu.global_.add.u32(counter, u.count)   # ... before the count
        T.ptx.st.shared.u32(flag.at(cw), old)
    T.ptx.bar.sync(bar_id, WG)
    return T.ptx.ld.shared.u32(flag.at(cw)) == u.need - u.count, counter


def _reduce_slots(cfg, acc, ws, cnt, flag, u, cw, tid, leader, keep_own=False):
    """Deterministic: every split stores its f32 partial in its own slot (``st.global.v4.f32``,
    lane-contiguous: coalesced) and counts in; the last sums all slots in split order
    (``ld.global.cg.v4.f32``: L2, never a stale L1 line), bitwise the same whichever split
    arrives last, and resets the counter for the next launch. It reads S partials alone, one
    split's loads in flight at a time (unrolled, 16 splits spilled).
    `keep_own` (REDUCE "peers", `_reduce_peers`): the last split keeps its own partial in the
    accumulators and adds only the other S - 1 slots.
    Slot layout: [tile][split][warpgroup][BN / 8 float4][128 threads]."""
    BN, S = cfg["BN"], cfg["SPLITK"]
    nvec = BN // 8                        # float4s per thread
    slot = nvec * WG * 4                  # one warpgroup's partial, in f32 elements
    t = tid & (WG - 1)
    base = (u.tile * (2 * S) + cw) * slot + (t << 2)
    own = ws.at(base + u.split * (2 * slot))
    for j in range(nvec):
        T.ptx.st.global_.v4.f32(own + j * WG * 16, [acc[4 * j + i] for i in range(4)])
    last, counter = _count_in(cnt, flag, u, cw, leader)
    with T.if_(last, uniform=True):
        if not keep_own:
            first = ws.at(base)
            for j in range(nvec):
                T.ptx.ld.global_.cg.v4.f32([acc[4 * j + i] for i in range(4)],
                                           first + j * WG * 16)
        with T.range(1, S) as s2:  # a device loop: one split's loads in flight at a time
            other = (u.split + s2) % S if keep_own else s2    # the splits after this one
            addr = ws.at(base + other * (2 * slot))
            for j in range(nvec):
                v = T.ptx.ld.global_.cg.v4.f32(addr + j * WG * 16)
                for i in range(4):
                    acc[4 * j + i].set(T.ptx.add.rn.f32(acc[4 * j + i], v[i]))
        with T.if_(leader):
            T.ptx.st.relaxed.gpu.global_.u32(counter, 0)   # ready for the next launch
    return last


def _reduce_peers(cfg, acc, ws, cnt, flag, u, cw, tid, leader):
    """The slots of REDUCE "slots", but the split that arrives last keeps its own partial in
    the accumulators and loads only the other S - 1 slots (docs/TUNING.md "Small M, round 2"):
    at S = 2 the tile's reduction is one coalesced ``st.global.v4.f32`` pass per split and one
    ``ld.global.cg.v4.f32`` pass (all loads in flight) by the last, where "red" issues 4x the
    instructions as L2 atomics in every split, reads the sum back and writes zeros over it.
    At S = 2 the sum is still bitwise the same whichever split arrives last (IEEE addition
    commutes); at S > 2 the last adds the others starting after its own split, so the order,
    and the last bits, follow the arrivals (within one bf16 ulp, as "red")."""
    return _reduce_slots(cfg, acc, ws, cnt, flag, u, cw, tid, leader, keep_own=True)


def _reduce_pair(cfg, acc, pair, cw, tid, leader):
    """REDUCE "pair": the tile's two splits are the two CTAs of a cluster (rank = split, the
    persistent schedule's unit p = ctaid + i * nctaid with an even grid). Split 1 waits until
    split 0 freed its receive buffer (`r_free`, in split 1's CTA; the first unit passes on the
    fresh barrier), stores its partial there (``mapa`` + ``st.shared::cluster.v4.f32``,
    lane-contiguous), a named barrier of the warpgroup, and one thread arrives on split 0's
    `r_full` (``mbarrier.arrive.release.cluster``: publishes every thread's stores). Split 0
    waits for it (``try_wait.acquire.cluster``), adds the buffer to its own accumulators
    (``ld.shared.v4.f32``), a named barrier, and one thread frees the buffer on split 1's
    `r_free`. No workspace, no gpu-scope fence, no atomic, no L2 round trip: one DSMEM hop
    where "peers" takes a store, the count and a load through the L2. Split 0 keeps its own
    partial and adds split 1's: bitwise the "slots" sum. Returns "this CTA is split 0"."""
    sR, r_full, r_free, par = pair
    nvec = cfg["BN"] // 8
    rank = T.cluster_ctarank()
    t = tid & (WG - 1)
    mine = sR.ptr() + cw * (nvec * WG * 16) + (t << 4)
    bar_id = 1 + cw
    first = rank == 0
    with T.if_(~first, uniform=True):
        _wait_cluster(r_free[cw], par ^ 1)
        dst = T.ptx.mapa.shared__cluster.u32(mine, 0)
        for j in range(nvec):
            T.ptx.st.shared__cluster.v4.f32(dst + j * (WG * 16), [acc[4 * j + i] for i in range(4)])
        T.ptx.bar.sync(bar_id, WG)
        with T.if_(leader):
            peer = T.ptx.mapa.shared__cluster.u32(_ptr(r_full) + cw * 8, 0)
            T.ptx.mbarrier.arrive.release.cluster.shared__cluster.b64(T.sink, peer)
    with T.else_():
        _wait_cluster(r_full[cw], par)
        for j in range(nvec):
            v = T.ptx.ld.shared.v4.f32(mine + j * (WG * 16))
            for i in range(4):
                acc[4 * j + i].set(T.ptx.add.rn.f32(acc[4 * j + i], v[i]))
        T.ptx.bar.sync(bar_id, WG)
        with T.if_(leader):
            peer = T.ptx.mapa.shared__cluster.u32(_ptr(r_free) + cw * 8, 1)
            T.ptx.mbarrier.arrive.release.cluster.shared__cluster.b64(T.sink, peer)
    par.set(par ^ 1)
    return first


def _wait_cluster(bar, parity):
    """``mbarrier.try_wait.parity.acquire.cluster`` in a loop: the arrival came from the peer
    CTA (a release at cluster scope), so the acquire is at cluster scope too."""
    with T.loop():
        done = T.ptx.mbarrier.try_wait.parity.acquire.cluster.shared__cta.b64(bar, parity)
        T.break_(done)


def _reduce_red(cfg, acc, ws, cnt, flag, u, cw, tid, leader):
    """One f32 sum per tile, zero at launch: every split adds its partial with
    ``red.global.add.f32`` (register i of thread t at element i * 128 + t: one 128-byte line per
    warp and instruction) and counts in; the last loads the sum once (``ld.global.cg.f32``, all
    BN / 2 loads in flight: they land in the accumulators, no extra registers), stores zeros
    back (``st.global.f32``, the same thread and address: program order) and resets the
    counter. The last split reads one tile instead of S (1/S of the slots path's reads, in one
    round trip instead of S), the reductions run in L2 concurrently with the other splits'
    mainloops. Layout: [tile][warpgroup][BN / 2 registers][128 threads]."""
    n = cfg["BN"] // 2                    # accumulators per thread
    t = tid & (WG - 1)
    sum_ = ws.at((u.tile * 2 + cw) * (n * WG) + t)

    def add():
        for i in range(n):
            T.ptx.red.global_.add.f32(sum_ + i * (WG * 4), acc[i])

    def take():  # strong (relaxed.gpu) accesses, as the memory model wants beside atomics;
        # they compile to the L2 loads and stores .cg would (LDG/STG.E.STRONG.GPU)
        for i in range(n):
            acc[i].set(T.ptx.ld.relaxed.gpu.global_.f32(sum_ + i * (WG * 4)))
        zero = T.reg(T.f32, init=0.0)
        for i in range(n):
            T.ptx.st.relaxed.gpu.global_.f32(sum_ + i * (WG * 4), zero)

    _if_partial(u, add)     # stream-K: a unit with the whole K range keeps its sum in registers
    last, counter = _count_in(cnt, flag, u, cw, leader)
    with T.if_(last, uniform=True):
        _if_partial(u, take)
        with T.if_(leader):
            T.ptx.st.relaxed.gpu.global_.u32(counter, 0)   # ready for the next launch
    return last


def _if_partial(u, body):
    """`body()` where the unit is a part of its tile: always (split-K), or under the uniform
    predicate `u.partial` (stream-K)."""
    if u.partial is None:
        body()
    else:
        with T.if_(u.partial, uniform=True):
            body()


def _ptr(bars):
    """The shared address of the first mbarrier of an array: ``mov.u32``."""
    return bars.buf.ptr()


def _scaled(acc, i, scale):
    return acc[i] if scale is None else T.ptx.mul.rn.f32(acc[i], scale)


def _epilogue_tma(cfg, acc, sC, c_map, m0, n0, cw, tid, leader, scale, packed=None,
                  rounds=None, row0=None):
    """Accumulators -> bf16 -> 128B-swizzled 64 x 64 chunks (``stmatrix.x4``) -> TMA stores,
    in rounds of EPI_BUFS chunks (`rounds`: only those, by index; the spread deferred epilogue
    stores one round per K slice).

    Lane l of warp w addresses row 16w + 8 * (l / 8 % 2) + l % 8 of the chunk and its 16-byte
    column group 2s + l / 16 (s = the stmatrix of the chunk), swizzled by XOR with the row % 8.
    """
    BN, nbufs = cfg["BN"], cfg["EPI_BUFS"]
    row0 = m0 + cw * 64 if row0 is None else row0   # the warpgroup's first row of C here
    store = T.ptx["cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"]
    base = sC.ptr() + cw * (max(nbufs, 1) * CHUNK_BYTES)
    col_off = stmatrix_lanes(base, tid)
    chunks = BN // CHUNK
    bar_id = 1 + cw
    for r0 in range(0, chunks, nbufs):
        if rounds is not None and r0 // nbufs not in rounds:
            continue
        with T.if_(leader):  # earlier stores of this warpgroup finished reading the chunks
            T.ptx.cp.async_.bulk.wait_group.read(0)
        T.ptx.bar.sync(bar_id, WG)
        group = range(r0, min(r0 + nbufs, chunks))
        for ci in group:
            stmatrix_chunk(acc, ci, col_off, (ci - r0) * CHUNK_BYTES,
                           value=lambda i: _scaled(acc, i, scale), packed=packed)
        T.ptx.fence.proxy.async_.shared__cta()   # generic writes -> the TMA engine's reads
        T.ptx.bar.sync(bar_id, WG)
        with T.if_(leader):
            for ci in group:
                store(c_map[n0 + ci * CHUNK, row0], base + (ci - r0) * CHUNK_BYTES)
            T.ptx.cp.async_.bulk.commit_group()


def _epilogue_direct(cfg, acc, c, M, N, m0, n0, cw, tid, scale):
    """bf16 straight from the accumulators: one predicated ``st.global.b16`` per element (no
    alignment beyond 2 bytes needed, so any N)."""
    BN = cfg["BN"]
    lane = T.laneid()
    w = (tid >> 5) & 3
    row = m0 + cw * 64 + (w << 4) + (lane >> 2)
    col = n0 + ((lane & 3) << 1)
    for h in range(2):
        r = row + 8 * h
        ok_r = r < M
        ptr = c.at(r * N + col)
        for j in range(BN // 8):
            for e in range(2):
                ok = ok_r & ((col + (8 * j + e)) < N)
                v = T.ptx.cvt.rn.bf16.f32(_scaled(acc, 4 * j + 2 * h + e, scale))
                T.ptx.st.global_.b16(ptr + 2 * (8 * j + e), v, pred=ok)


# --- kernels: one body, four launch shapes -----------------------------------------------------

def _grid(CM: int, pair: bool = False):
    """The persistent grid: one CTA per SM (SMS), never more CTAs than work units; `pair`
    (2-CTA clusters over the K-splits): an even count, so that CTAs 2c and 2c + 1 always take
    the two splits of one tile."""
    def grid(M, N, K, BN, SPLITK, SMS, STREAMK, BM=BM, PAIR_N=False):
        units = T.cdiv(T.cdiv(M, BM), CM) * T.cdiv(N, BN) * SPLITK
        if PAIR_N:   # clusters along N
            units = T.cdiv(M, BM) * T.cdiv(T.cdiv(N, BN), CM)
        if STREAMK:  # every worker gets >= 1 slice: at least cdiv(K, 128) slices per unit
            units = T.cdiv(T.cdiv(M, BM), CM) * T.cdiv(N, BN) * T.cdiv(K, 128)
        if pair:
            return (2 * min(SMS // 2, units // 2),)
        return (CM * min(SMS // CM, units),)
    return grid


def _launch(name: str, CM: int, pair: bool = False):
    """``@T.kernel`` for a body: 384 threads, register cap at entry (setmaxnreg needs it), a
    cluster of CM CTAs along M when CM > 1, or of a tile's two K-splits (`pair`)."""
    return T.kernel(grid=_grid(CM, pair), block=WG * (1 + CONSUMERS), min_blocks=1,
                    cluster=(2, 1, 1) if CM > 1 or pair else None, name=name)


def _bf16_kernel(name: str, CM: int, pair: bool = False):
    def kernel(a_map: T.tensormap, b_map: T.tensormap, c_map: T.tensormap, c: T.gptr[T.bf16],
               a: T.gptr[T.bf16], b: T.gptr[T.bf16], ws: T.gptr[T.f32], cnt: T.gptr[T.u32],
               M: T.u32, N: T.u32, K: T.u32, BN: T.const = 256, STAGES: T.const = 4,
               B_KMAJOR: T.const = True, EPI: T.const = "tma", EPI_BUFS: T.const = 2,
               GROUP: T.const = 16 // CM, RASTER: T.const = "m",
               SPLITK: T.const = 2 if pair else 1, REDUCE: T.const = "pair" if pair else "slots",
               STREAMK: T.const = False, SMS: T.const = H200_SMS, EPI_DEFER: T.const = False,
               ASTAGES: T.const = 0, PDL: T.const = False, BM: T.const = BM,
               PAIR_N: T.const = False):
        cfg = dict(BN=BN, STAGES=STAGES, CM=CM, B_KMAJOR=B_KMAJOR, ESIZE=2, EPI=EPI,
                   EPI_BUFS=EPI_BUFS, GROUP=GROUP, RASTER=RASTER, SPLITK=SPLITK,
                   REDUCE=REDUCE, STREAMK=STREAMK, EPI_DEFER=EPI_DEFER, ASTAGES=ASTAGES,
                   PAIR=pair, PDL=PDL, BM=BM, PAIR_N=PAIR_N)
        _gemm(cfg, a_map, b_map, c_map, c, ws, cnt, M, N, K)
    return _launch(name, CM, pair)(kernel)


def _fp8_kernel(name: str, CM: int):
    def kernel(a_map: T.tensormap, b_map: T.tensormap, c_map: T.tensormap, c: T.gptr[T.bf16],
               a: T.gptr[T.e4m3], b: T.gptr[T.e4m3], scale_a: T.gptr[T.f32],
               scale_b: T.gptr[T.f32], ws: T.gptr[T.f32], cnt: T.gptr[T.u32], M: T.u32,
               N: T.u32, K: T.u32, BN: T.const = 256, STAGES: T.const = 4,
               EPI: T.const = "tma", EPI_BUFS: T.const = 2, GROUP: T.const = 16 // CM,
               RASTER: T.const = "m", SPLITK: T.const = 1, REDUCE: T.const = "slots",
               STREAMK: T.const = False, SMS: T.const = H200_SMS,
               EPI_DEFER: T.const = False):
        cfg = dict(BN=BN, STAGES=STAGES, CM=CM, B_KMAJOR=True, ESIZE=1, EPI=EPI,
                   EPI_BUFS=EPI_BUFS, GROUP=GROUP, RASTER=RASTER, SPLITK=SPLITK,
                   REDUCE=REDUCE, STREAMK=STREAMK, EPI_DEFER=EPI_DEFER, ASTAGES=0,
                   PAIR=False, BM=BM, PAIR_N=False)
        _gemm(cfg, a_map, b_map, c_map, c, ws, cnt, M, N, K, scales=(scale_a, scale_b))
    return _launch(name, CM)(kernel)


gemm_bf16 = _bf16_kernel("gemm_bf16", 1)
gemm_bf16_c2 = _bf16_kernel("gemm_bf16_c2", 2)
gemm_bf16_k2 = _bf16_kernel("gemm_bf16_k2", 1, pair=True)   # a tile's two K-splits per cluster
gemm_fp8 = _fp8_kernel("gemm_fp8", 1)
gemm_fp8_c2 = _fp8_kernel("gemm_fp8_c2", 2)


# --- cases and suites ---------------------------------------------------------------------------

SHAPES = ([(4096, 4096, 4096), (6144, 6144, 6144), (8192, 8192, 8192)]
          + [(M, N, K) for M in (128, 512, 2048, 8192)
             for N, K in ((4096, 4096), (14336, 4096), (4096, 14336), (1024, 7168))]
          + [(4095, 4097, 4104)])
# tile variants (docs/TUNING.md): shared memory is 227 KB, a 128 x 256 stage 48 KB, a staged
# 64 x 64 bf16 chunk 8 KB per consumer
VARIANTS = {
    "t256": dict(BN=256, STAGES=4, EPI_BUFS=2),     # 4 stages; C staged in two rounds
    # the tile turned over, 256 x 128 (cuBLAS's at 8192 x 1024 x 7168, session 41's ncu of it):
    # each consumer 128 rows, two m64n128k16 a K step; 4 stages of 48 KB as t256's, 224 KB
    "t256x128": dict(BM=256, BN=128, STAGES=4, EPI_BUFS=2),
    # the same with the cluster's CTAs side by side along N, sharing A (cuBLAS's "1x2")
    "t256x128n": dict(BM=256, BN=128, STAGES=4, EPI_BUFS=2, PAIR_N=True),
    # the epilogue deferred: a tile's C (packed to bf16) is stored under the next tile's MMAs
    "t256d": dict(BN=256, STAGES=4, EPI_BUFS=2, EPI_DEFER=True),
    "t256s3": dict(BN=256, STAGES=3, EPI_BUFS=4),   # 3 stages; the whole C tile at once
    "t128": dict(BN=128, STAGES=6, EPI_BUFS=2),     # 128 x 128 tiles: twice as many (small M)
    # the same, launched as a programmatic dependent (PDL: the prologue under the previous
    # kernel's tail; what back-to-back launches of one-wave shapes pay for, session 19)
    "t128pdl": dict(BN=128, STAGES=6, EPI_BUFS=2, PDL=True),
    # split-K: S units per tile, so that a few tiles still occupy every SM
    "t128k4": dict(BN=128, STAGES=6, EPI_BUFS=2, SPLITK=4),
    "t128k8": dict(BN=128, STAGES=6, EPI_BUFS=2, SPLITK=8),
    "t128k16": dict(BN=128, STAGES=6, EPI_BUFS=2, SPLITK=16),
    "t256k2": dict(BN=256, STAGES=4, EPI_BUFS=2, SPLITK=2),
    # the sweep's questions: are 66 clusters of 2 co-resident on 132 SMs (pyptx launches 64)?
    # does a raster along N (B panels reused, A streamed) beat the one along M?
    "t256g128": dict(BN=256, STAGES=4, EPI_BUFS=2, SMS=128),
    "t256rn": dict(BN=256, STAGES=4, EPI_BUFS=2, RASTER="n"),
    # small M (docs/TUNING.md "Small M"): split-K summed by red.global.add into one f32 tile
    # ("r"), split factors that bring each shape to ~128 units, and 128 x 64 tiles (wgmma
    # m64n64: twice the tiles of BN = 128 at the same M, 8 stages of 24 KB)
    "t128k4r": dict(BN=128, STAGES=6, EPI_BUFS=2, SPLITK=4, REDUCE="red"),
    "t128k8r": dict(BN=128, STAGES=6, EPI_BUFS=2, SPLITK=8, REDUCE="red"),
    "t128k16r": dict(BN=128, STAGES=6, EPI_BUFS=2, SPLITK=16, REDUCE="red"),
    "t256k2r": dict(BN=256, STAGES=4, EPI_BUFS=2, SPLITK=2, REDUCE="red"),
    "t256k8r": dict(BN=256, STAGES=4, EPI_BUFS=2, SPLITK=8, REDUCE="red"),
    "t64k2r": dict(BN=64, STAGES=8, EPI_BUFS=1, SPLITK=2, REDUCE="red"),
    "t64k8r": dict(BN=64, STAGES=8, EPI_BUFS=1, SPLITK=8, REDUCE="red"),
    # small M, round 2 (docs/TUNING.md "Small M, round 2"): 128 x 64 tiles in 2 splits summed
    # through slots ("t64k2": the last reads both; "p": the last keeps its own partial and
    # reads only the peer's, REDUCE "peers"); "p9d": 9 stages (216 KB in flight instead of
    # 192), room made by the direct epilogue (no 16 KB of staged C)
    "t64k2": dict(BN=64, STAGES=8, EPI_BUFS=1, SPLITK=2),
    "t64k2p": dict(BN=64, STAGES=8, EPI_BUFS=1, SPLITK=2, REDUCE="peers"),
    "t64k2p9d": dict(BN=64, STAGES=9, EPI="direct", SPLITK=2, REDUCE="peers"),
    # small M, round 3 (docs/TUNING.md "Small M, round 3"): A in its own ring of 4 stages,
    # B's ring deeper ("b12": 96 KB of B in flight per SM, "b18": 144 KB, against t64k2p's
    # 64 KB), and the direct epilogue at 8 stages ("d": what t64k2p9d's loss came from)
    "t64k2pb12": dict(BN=64, STAGES=12, ASTAGES=4, EPI_BUFS=1, SPLITK=2, REDUCE="peers"),
    "t64k2pb18": dict(BN=64, STAGES=18, ASTAGES=4, EPI_BUFS=1, SPLITK=2, REDUCE="peers"),
    "t64k2pd": dict(BN=64, STAGES=8, EPI="direct", SPLITK=2, REDUCE="peers"),
    # the two splits of a tile in a 2-CTA cluster (gemm_bf16_k2), summed through distributed
    # shared memory (REDUCE "pair": 32 KB of receive buffer): one ring of 7 stages, or A's 4
    # and B's 12 as t64k2pb12
    "t64k2x7": dict(BN=64, STAGES=7, EPI_BUFS=1, SPLITK=2, REDUCE="pair"),
    "t64k2xb12": dict(BN=64, STAGES=12, ASTAGES=4, EPI_BUFS=1, SPLITK=2, REDUCE="pair"),
    # stream-K: every SM the same number of K slices, pieces of a tile summed as by "r"
    "t128sk": dict(BN=128, STAGES=6, EPI_BUFS=2, STREAMK=True, REDUCE="red"),
    "t256sk": dict(BN=256, STAGES=4, EPI_BUFS=2, STREAMK=True, REDUCE="red"),
    # wave quantization at M >= 2048 (docs/TUNING.md "Wave quantization"): whole tiles for
    # the full waves, stream-K over the last partial wave only ("skt"); with it the deferred
    # tile's two store rounds under the next tile's first two K slices ("ds": a slice queued on
    # the tensor cores per round, not one for both as in "d"), or four rounds of one chunk
    # under the first four ("ds4": 16 KB less staging, a round shorter than a slice)
    "t256skt": dict(BN=256, STAGES=4, EPI_BUFS=2, STREAMK="tail", REDUCE="red"),
    "t256sktds": dict(BN=256, STAGES=4, EPI_BUFS=2, STREAMK="tail", REDUCE="red",
                      EPI_DEFER="spread"),
    "t256sktds4": dict(BN=256, STAGES=4, EPI_BUFS=1, STREAMK="tail", REDUCE="red",
                       EPI_DEFER="spread"),
    "t128skt": dict(BN=128, STAGES=6, EPI_BUFS=2, STREAMK="tail", REDUCE="red"),
    # session 15 (docs/PERFORMANCE.md "Session 15, branch gemmwave2"): the spread deferred
    # epilogue without the stream-K tail, for the shapes whose last wave is nearly full (the
    # tail's K-desynchronized pieces cost more HBM than the 4 idle SMs' 3%): two rounds of two
    # chunks ("ds") or four of one ("ds4") under the next tile's first K slices
    "t256ds": dict(BN=256, STAGES=4, EPI_BUFS=2, EPI_DEFER="spread"),
    "t256ds4": dict(BN=256, STAGES=4, EPI_BUFS=1, EPI_DEFER="spread"),
    # the same launched as a programmatic dependent: the next launch's set-up under this one's
    # last wave (session 20: what the sustained regime's back-to-back samples pay for)
    "t256ds4pdl": dict(BN=256, STAGES=4, EPI_BUFS=1, EPI_DEFER="spread", PDL=True),
    # the tail in K-lockstep (STREAMK="lock"): each tail unit's first k * T / 66 slices on its
    # own cluster from K = 0, the rest on the 66 - T idle clusters; alone and with "ds4"
    "t256skl": dict(BN=256, STAGES=4, EPI_BUFS=2, STREAMK="lock", REDUCE="red"),
    "t256sklds4": dict(BN=256, STAGES=4, EPI_BUFS=1, STREAMK="lock", REDUCE="red",
                       EPI_DEFER="spread"),
}
# the split that brings each of these shapes to ~128 units (128 x 128 tiles: 32, 8, 32 tiles).
# At 128 x 1024 x 7168 the last split of a tile reads S x 64 KB of partials alone: 16 splits
# fill the SMs but 1 MB per reducing CTA may cost more than it saves, so 8 is timed first.
SPLITS = {(128, 4096, 4096): "t128k4", (128, 14336, 4096): "t256k2",
          (128, 4096, 14336): "t128k4", (128, 1024, 7168): "t128k8", (512, 1024, 7168): "t128k4"}
# the small-M candidates timed beside each shape's main and alt (role "small", one-CTA kernels:
# a 2-CTA cluster pairs tiles along M, and M = 128 has one row of them). Units per shape:
# 128 x 4096 x K: 32 x 4, 64 x 2, 16 x 8 = 128; 128 x 14336 x 4096: 56 x 2 = 112;
# 128 x 1024 x 7168: 8 x 8 = 64, 8 x 16 = 128, 16 x 8 = 128; 512 x 1024 x 7168: 32 x 4,
# 16 x 8, 64 x 2 = 128; 512 x 4096 x K: 64 x 2 = 128; stream-K ("sk") always 132 CTAs
# (docs/TUNING.md: the predictions)
SMALL = {(128, 4096, 4096): ["t128k4r", "t64k2r", "t256k8r", "t128sk"],
         (128, 4096, 14336): ["t128k4r", "t256k8r", "t128sk"],
         (128, 14336, 4096): ["t256k2r", "t256sk", "t128sk"],
         (128, 1024, 7168): ["t128k8r", "t128k16r", "t64k8r", "t128sk"],
         (512, 1024, 7168): ["t128k4r", "t256k8r", "t64k2r", "t128sk"],
         (512, 4096, 4096): ["t256k2r", "t256sk"],
         (512, 4096, 14336): ["t256k2r", "t256sk"],
         (512, 14336, 4096): ["t256sk"]}
# small M, round 2 (role "lowm", docs/TUNING.md "Small M, round 2"): the two shapes still below
# 0.95x cuBLAS after session 10's run, each beside its fastest variant then (t64k2r, the
# control): 128 x 64 tiles in 2 splits (64 x 2 = 128 units) with the reduction through slots
# (t64k2: the control for the atomics, the last reads both slots), the last keeping its own
# partial (t64k2p), and 9 stages with the direct epilogue (t64k2p9d); at 512 x 1024 x 7168 also
# in 2-CTA clusters (tile pairs along M share B by multicast: 20 of 24 KB per CTA and slice)
LOWM = {(128, 4096, 4096): [("c1", "t64k2r"), ("c1", "t64k2"), ("c1", "t64k2p"),
                            ("c1", "t64k2p9d")],
        (512, 1024, 7168): [("c1", "t64k2r"), ("c1", "t64k2p"), ("c1", "t64k2p9d"),
                            ("c2", "t64k2p")]}
# small M, round 3 (role "small3", docs/TUNING.md "Small M, round 3"): the one shape still
# below 0.95x after session 11's small2 call, t64k2p beside B's deeper rings and the direct
# epilogue at 8 stages; 512 x 4096 x 4096 as the check that the shared body did not regress
# (its main then, c2 t128; the single-CTA t128 since session 17) and what the deep ring does
# where B is read by 4 tile rows
LOWM3 = {(128, 4096, 4096): [("c1", "t64k2p"), ("c1", "t64k2pb12"), ("c1", "t64k2pb18"),
                             ("c1", "t64k2pd"), ("k2", "t64k2x7"), ("k2", "t64k2xb12")],
         (512, 4096, 4096): [("c2", "t128"), ("c1", "t64k2p"), ("c1", "t64k2pb18")]}
# where the technique sweep also times the 3-stage whole-tile epilogue and the N-major B
SWEEP_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 14336, 4096), (2048, 4096, 4096)]


# wave quantization at M >= 2048 (docs/TUNING.md "Wave quantization at M >= 2048"): every
# such shape's tile count is a multiple of 128 below 33 x 128, so 4 of 132 SMs idle through the
# last tile time (3.0%); the stream-K tail ("skt") alone and with the spread deferred epilogue
# in 2 or 4 rounds ("sktds", "sktds4") are timed beside each shape's main (role "wave"). The weakest shapes against
# cuBLAS first (2026-12-01 medians): benchmarks/gemm_bench.sh wave starts them first.
WAVE_SHAPES = [(8192, 1024, 7168), (2048, 4096, 4096), (2048, 1024, 7168), (8192, 14336, 4096),
               (4096, 4096, 4096), (8192, 4096, 4096), (2048, 4096, 14336), (8192, 4096, 14336),
               (6144, 6144, 6144), (2048, 14336, 4096), (8192, 8192, 8192)]
# 2048 x 1024 x 7168: 64 pairs of 128 x 128 tiles (main) or 32 of 128 x 256, fewer than the 66
# clusters: no full wave, the whole shape stream-K (every cluster ~109 or ~54 slices)
WAVE = {s: ["t256skt", "t256sktds", "t256sktds4"] for s in WAVE_SHAPES}
WAVE[2048, 1024, 7168] = ["t128skt", "t256skt"]

# Session 15 (docs/PERFORMANCE.md "Session 15, branch gemmwave2"; measured in s15/d7): the
# stream-K tail wins only where the last partial wave is small. Its pieces start at different
# K offsets on every cluster, so the tail reads its A and B panels without the L2 reuse the
# data-parallel waves (all clusters at one K offset) get: 64 KB per cluster and K slice, 6.7
# TB/s at the tensor cores' rate on 66 clusters, against ~4.8 TB/s of HBM, i.e. the tail runs at
# ~0.72 of the mainloop rate. A tail of f = (tile pairs mod 66) / 66 of a wave then costs
# f / 0.72 tile times instead of 1: it wins below f ~ 0.72 (8192^3 f = 0.52: 1.035x against
# t256's 1.017x; 8192 x 14336 x 4096 f = 0.15: 1.017x against 0.991x; 6144^3 f = 0.73: 1.006x
# against 0.996x) and loses above (f = 0.76-0.94: 0.85-0.99x). SKT_MAIN_MAX_TAIL is the cut.
CLUSTERS = H200_SMS // 2
SKT_MAIN_MAX_TAIL = 0.74


def tail_fraction(M, N, K) -> float:
    """The last partial wave of 128 x 256 tile pairs (2-CTA clusters) on the H200's 66
    clusters, as a fraction of a wave (0: the waves are full)."""
    pairs = -(-M // (2 * BM)) * -(-N // 256)
    return (pairs % CLUSTERS) / CLUSTERS


def skt_main(M, N, K) -> bool:
    """Whether bf16's main variant at an M >= 2048 shape is the stream-K tail with the spread
    deferred epilogue (c2 `t256sktds4`) rather than c2 `t256`: a tail below SKT_MAIN_MAX_TAIL
    of a wave (above 0 and with at least one full wave: otherwise nothing is cut)."""
    f = tail_fraction(M, N, K)
    pairs = -(-M // (2 * BM)) * -(-N // 256)
    return M >= 2048 and N % 256 == 0 and pairs >= CLUSTERS and 0 < f < SKT_MAIN_MAX_TAIL


# Session 15's second wave round (role "wave2", benchmarks/gemm_bench.sh wave2): the shapes
# still short of 1.00x cuBLAS in s15/d7 or d5, each beside its main (the control): the deferred
# epilogue without stream-K (one round "t256d", two "t256ds", four "t256ds4": every whole tile
# but a CTA's last stored under the next tile's first K slices), and at 2048 x 1024 x 7168
# (one tile per CTA: nothing to defer under) 128 x 256 tiles in 2 K-splits summed by red
# ("t256k2r": the 128 x 256 tile's L2 feed per FLOP is 2/3 of 128 x 128's, on 128 CTAs as now)
# Where the tail has at most ~7 units per idle cluster (T / (66 - T): 50 / 16 at M = 8192 x N
# = 4096, 58 / 8 at 4096^3, 48 / 18 at 6144^3), also the tail in K-lockstep ("skl", "sklds4");
# 6144^3 (main: t256sktds4) for that alone.
WAVE2_SHAPES = [(2048, 1024, 7168), (8192, 4096, 14336), (2048, 4096, 4096),
                (8192, 4096, 4096), (8192, 1024, 7168), (4096, 4096, 4096),
                (2048, 4096, 14336), (6144, 6144, 6144)]
WAVE2 = {s: ["t256d", "t256ds", "t256ds4"] for s in WAVE2_SHAPES}
WAVE2[2048, 1024, 7168] = ["t256k2r"]
for _s in [(8192, 4096, 14336), (8192, 4096, 4096), (4096, 4096, 4096)]:
    WAVE2[_s] = WAVE2[_s] + ["t256skl", "t256sklds4"]
WAVE2[6144, 6144, 6144] = ["t256skl", "t256sklds4"]


# Session 17 (docs/PERFORMANCE.md "Session 17"; s17/d3 and d9 sustained, s16/d1 full clock):
# the four-round spread deferred epilogue without stream-K (c2 `t256ds4`) timed at or above c2
# `t256` in both regimes at these shapes (sustained 0.998-1.016x cuBLAS against t256's
# 0.992-1.000x; full clock 1.001-1.013x but 8192 x 1024 x 7168's 0.993x): bf16's main there.
# 2048 x 14336 x 4096 is left out: `t256ds4` was never timed at it.
DS4_MAIN = {(2048, 4096, 4096), (8192, 4096, 4096), (4096, 4096, 4096), (2048, 4096, 14336),
            (8192, 4096, 14336), (8192, 1024, 7168)}


# bf16's measured best at the small-M shapes whose first main was never the fastest (a
# session-17 audit: `tirxh bench -k main` timed t128k4 at 0.86-0.90x, t256k2 0.877x, t128k8
# 0.766x where these ran 0.965-1.007x): 128 x 4096 x 4096 t64k2p 1.001x (session 13, d5, 100
# rounds), 128 x 4096 x 14336 t128k4r 1.007x, 128 x 14336 x 4096 t128 1.003x, 128 x 1024 x 7168
# t64k8r 0.965x (session 10), 512 x 1024 x 7168 t64k2p 0.980x (session 11). The old main stays,
# as an alt. fp8 keeps its mains (no small-M goal; its own table in "Session 14").
SMALL_MAIN = {(128, 4096, 4096): "t64k2p", (128, 4096, 14336): "t128k4r",
              (128, 14336, 4096): "t128", (128, 1024, 7168): "t64k8r",
              (512, 1024, 7168): "t64k2p"}
# Session 21 (docs/PERFORMANCE.md "Session 21", s21/d1 and d5): `_t256ds4pdl` at or above its
# PDL-less twin in both protocols at these shapes -- 20-launch samples (mostly sustained) 1.018x /
# 1.006x / 1.010x cuBLAS against 0.995x / 1.000x / 0.999x, launched singly at full clock 1.000x /
# 1.001x / 0.993x against 1.004x / 1.002x / 0.991x (2048 x 4096 x 4096 / 2048 x 4096 x 14336 /
# 8192 x 1024 x 7168; the first's single-launch tie inside both intervals): the main there.
PDL_DS4_MAIN = {(2048, 4096, 4096), (2048, 4096, 14336), (8192, 1024, 7168)}
# bf16's measured mains that override `plan`'s shape rules, applied after them in one place
BF16_MAIN = {**{s: ("c2", "t256ds4") for s in DS4_MAIN},
             **{s: ("c1", v) for s, v in SMALL_MAIN.items()},
             (2048, 1024, 7168): ("c1", "t128pdl"),   # session 20: PDL (below)
             **{s: ("c2", "t256ds4pdl") for s in PDL_DS4_MAIN}}


# the one-wave single-CTA mains whose back-to-back ratio trails their single-launch one
# (2048 x 1024 x 7168: 0.999x launched alone, 0.975x with 20-launch samples, s17/d9), each as a
# programmatic dependent launch (role "pdl", `gemm_bench.sh pdl`). Session 20 (s20/d2, full
# clock): 2048 x 1024 x 7168 `_t128pdl` 1.002x [1.001, 1.003] against `t128`'s 0.974x with
# 20-launch samples, 1.000x [0.994, 1.003] against 1.002x launched singly: the main there
# (BF16_MAIN). At 512 x 4096 x K no gain (0.984x / 0.974x against 0.990x / 0.979x
# back to back): `t128` stays. Then the M >= 2048 shapes still short (2048 x 4096 x 4096
# sustained 0.996x, 8192 x 1024 x 7168 0.993x, 2048 x 4096 x 14336 0.998x), where the
# sustained regime is measured with back-to-back samples: their `_t256ds4` mains' twins, the
# mains since session 21 (PDL_DS4_MAIN).
PDL = {(2048, 1024, 7168): [("c1", "t128pdl")], (512, 4096, 4096): [("c1", "t128pdl")],
       (512, 4096, 14336): [("c1", "t128pdl")], (2048, 4096, 4096): [("c2", "t256ds4pdl")],
       (8192, 1024, 7168): [("c2", "t256ds4pdl")], (2048, 4096, 14336): [("c2", "t256ds4pdl")]}


# the 256 x 128 tile (role "tall", `gemm_bench.sh tall`, session 41): cuBLAS's nvjet kernel at
# 8192 x 1024 x 7168 is our structure (persistent, 2-CTA clusters, 4 stages of 64-wide K
# slices, 168 registers) with a 256 x 128 tile, 2.8% ahead of `_t256ds4pdl` under ncu and 0.7%
# in KCoral's single launches: the last M >= 2048 shape below 1.00x. Timed beside the mains at
# the two 1.94-wave shapes, in a cluster and alone.
TALL = {(8192, 1024, 7168): [("c2", "t256x128"), ("c2", "t256x128n"), ("c1", "t256x128")],
        (2048, 4096, 4096): [("c2", "t256x128"), ("c2", "t256x128n"), ("c1", "t256x128")]}


def plan(M, N, K, fp8: bool = False) -> list:
    """What is timed at one shape: [(kernel, variant, role)], kernel "c1" (one CTA) or "c2" (a
    2-CTA cluster) or "k2" (a tile's two K-splits in a cluster: LOWM3's only), role "main" (the predicted fastest), "alt" (the runner-up) or "sweep" (the
    other techniques, for docs/TUNING.md) or "small" (the small-M candidates, SMALL) or "wave"
    (the stream-K tail at M >= 2048, WAVE) or "lowm" (small M, round 2: LOWM) or "small3"
    (round 3: LOWM3) or "wave2" (session 15: WAVE2). The prediction counts tiles against 132
    SMs; `fp8`: the fp8 kernels' plan (no stream-K main: its tail is bf16's only). A (kernel,
    variant) may come with several roles."""
    if M >= 2048 and N == 1024 and M == 2048:   # 16 x 8 tiles of 128 x 128, one per CTA
        # the single CTA beat the pair in s17/d7: bf16 0.999x vs 0.980x, fp8 1.035x vs 0.995x
        out = [("c1", "t128", "main"), ("c2", "t128", "alt"), ("c2", "t256", "sweep")]
    elif M >= 2048 and N == 1024:               # 64 x 4 tiles of 128 x 256: two waves
        out = [("c2", "t256", "main"), ("c2", "t128", "alt")]
    elif M >= 2048 and skt_main(M, N, K) and not fp8:   # a small tail: stream-K it (above)
        out = [("c2", "t256sktds4", "main"), ("c2", "t256", "alt"), ("c1", "t256", "alt"),
               ("c2", "t256d", "alt")]
    elif M >= 2048:
        out = [("c2", "t256", "main"), ("c1", "t256", "alt"), ("c2", "t256d", "alt")]
        if not fp8:                             # DS4_MAIN's candidate, not yet timed here
            out.append(("c2", "t256ds4", "alt"))
    elif M == 512 and N == 14336:               # 224 tiles of 128 x 256 or 448 of 128 x 128
        out = [("c1", "t256", "main"), ("c2", "t128", "alt"), ("c1", "t128", "sweep")]
    elif M == 512 and N == 1024:
        out = [("c1", SPLITS[M, N, K], "main"), ("c1", "t128", "alt"), ("c2", "t128", "sweep")]
    elif M == 512:                              # 4 x 32 tiles of 128 x 128
        # one CTA a tile beat the 2-CTA pair (s16/d2, s17/d2: bf16 0.985x / 0.996x cuBLAS
        # against 0.920x / 0.974x at K = 4096 / 14336; fp8 1.044x / 1.032x against 0.981x /
        # 0.996x): the pair's multicast costs more than it saves at 128 tiles on 132 SMs
        out = [("c1", "t128", "main"), ("c2", "t128", "alt"), ("c1", "t256", "sweep")]
    elif N == 1024:                             # M = 128: 8 tiles of 128 x 128
        out = [("c1", SPLITS[M, N, K], "main"), ("c1", "t128k16", "alt"), ("c1", "t128", "sweep")]
    else:                                       # M = 128: one tile row; split K
        out = [("c1", SPLITS[M, N, K], "main"), ("c1", "t128", "alt"), ("c1", "t256", "sweep")]
    best = BF16_MAIN.get((M, N, K)) if not fp8 else None
    if best:                                    # measured faster: main, the old main an alt
        out = [(*best, "main")] + [(kern, v, "alt" if role == "main" else role)
                                   for kern, v, role in out if (kern, v) != best]
        twin = (best[0], best[1].removesuffix("pdl"))   # a PDL main's PDL-less form: its alt
        if twin != best and twin not in [(kern, v) for kern, v, _ in out]:
            out.append((*twin, "alt"))
    if (M, N, K) in SWEEP_SHAPES:
        out.append(("c2", "t256s3", "sweep"))
    if (M, N, K) in SWEEP_SHAPES[1:3]:
        out += [("c2", "t256g128", "sweep"), ("c2", "t256rn", "sweep")]
    out += [("c1", v, "small") for v in SMALL.get((M, N, K), [])]
    out += [("c2", v, "wave") for v in WAVE.get((M, N, K), [])]
    out += [("c2", v, "wave2") for v in WAVE2.get((M, N, K), [])]
    out += [(kern, v, "lowm") for kern, v in LOWM.get((M, N, K), [])]
    out += [(kern, v, "small3") for kern, v in LOWM3.get((M, N, K), [])]
    out += [(kern, v, "pdl") for kern, v in PDL.get((M, N, K), []) if not fp8]
    out += [(kern, v, "tall") for kern, v in TALL.get((M, N, K), []) if not fp8]
    return out


def _large(kernel: str, fp8: bool) -> list:
    """The benchmark cases of one kernel ("c1" or "c2"), shape-major, tagged with their roles
    (``tirxh bench -k "main"``; one case per variant, with every role `plan` gives it); N % 8
    != 0 takes the direct epilogue; the bf16 kernels add an N-major B at SWEEP_SHAPES (role
    "kn")."""
    out = []
    for M, N, K in SHAPES:
        if fp8 and K % 16:       # TMA and _scaled_mm need 16-byte fp8 rows
            continue
        roles = {}               # variant -> its roles, in plan order
        for kern, v, role in plan(M, N, K, fp8):
            if kern == kernel and not (fp8 and role in ("sweep", "wave", "lowm", "small3", "tall",
                                                        "wave2")):
                roles.setdefault(v, []).append(role)
        for v, tags in roles.items():
            p = dict(VARIANTS[v], M=M, N=N, K=K)
            if N % 8 and p.get("EPI_DEFER"):
                continue                # no staged epilogue to defer (direct stores)
            if N % 8:
                p["EPI"] = "direct"
            out.append(T.case(f"m{M}n{N}k{K}_{v}", small=False, tags=tuple(tags), **p))
    if kernel == "c2" and not fp8:
        out += [T.case(f"m{M}n{N}k{K}_t256_kn", small=False, tags=("kn",),
                       **dict(VARIANTS["t256"], M=M, N=N, K=K, B_KMAJOR=False))
                for M, N, K in SWEEP_SHAPES]
    return out


def _peer_ok(case) -> bool:
    """Shapes the pyptx Hopper GEMM takes (M % 256, N % 256, K % 64; B K-major)."""
    p = case.params
    return (p.get("B_KMAJOR", True) and p["M"] % 256 == 0 and p["N"] % 256 == 0
            and p["K"] % 64 == 0)


def _bf16_baselines(peers: bool) -> list:
    out = [{"name": "torch.matmul", "args": {"M": "M", "N": "N", "K": "K", "dtype": "bf16",
                                              "transpose_b": "B_KMAJOR"}}]
    if peers:
        out.append({"name": "pyptx.gemm_hopper", "args": {"M": "M", "N": "N", "K": "K"}})
    return out


def _bf16_suites(kernel, small: list):
    """Two suites of one kernel: the shapes pyptx takes get it as a second baseline. Each has
    small cases (the smallest is what sync_check runs). gemm_bf16_k2 (LOWM3's, at M = 128
    only, which pyptx does not take) has the first alone: (suite, None)."""
    CM = 2 if kernel.name.endswith("_c2") else 1
    large = _large("k2" if kernel.name.endswith("_k2") else f"c{CM}", fp8=False)
    common = dict(inputs=bf16_inputs(BM, CM, H200_SMS), reference=bf16_reference, outputs=["c"],
                  tolerance=BF16_TOLERANCE, flops=lambda M, N, K: 2 * M * N * K,
                  bytes=lambda M, N, K: 2 * (M * K + N * K + M * N))
    for c in small + large:
        c.params.setdefault("B_KMAJOR", True)   # the torch baseline's transpose_b names it
    peers = [c for c in large if _peer_ok(c)]
    rest = [c for c in large if not _peer_ok(c)]
    peer_small = [T.case("m256n256k64", M=256, N=256, K=64, B_KMAJOR=True)]
    first = T.suite(kernel, cases=small + rest, baselines=_bf16_baselines(False), **common)
    if not peers and kernel.name.endswith("_k2"):
        return first, None
    return (first,
            T.suite(kernel, cases=peer_small + peers, baselines=_bf16_baselines(True), **common))


SUITE, SUITE_PEERS = _bf16_suites(gemm_bf16, [
    T.case("m200n136k72", M=200, N=136, K=72),                       # tails in M, N and K
    # the 256 x 128 tile (`t256x128`): three row tiles (the last 88 rows), two column tiles
    # (the last 72), three K slices (the last 8 wide), on 2 CTAs: both row blocks of each
    # consumer, tails, a CTA's second tile; then one CTA through 4 tiles, the ring wrapping
    T.case("m600n200k136_tall", M=600, N=200, K=136, BM=256, BN=128, STAGES=4, SMS=2),
    T.case("m512n256k64_tall_persistent", M=512, N=256, K=64, BM=256, BN=128, STAGES=2,
           EPI_BUFS=1, SMS=1),
    T.case("m200n136k72_kn", M=200, N=136, K=72, B_KMAJOR=False),    # N-major B
    # a programmatic dependent launch (griddepcontrol before any global access), tails
    T.case("m200n136k72_pdl", M=200, N=136, K=72, BN=128, STAGES=6, PDL=True),
    T.case("m256n256k64_persistent", M=256, N=256, K=64, BN=128, STAGES=2, EPI_BUFS=1,
           SMS=1),                        # one CTA: four tiles, the ring wraps, two C rounds
    T.case("m130n135k40_direct", M=130, N=135, K=40, BN=128, EPI="direct"),
    T.case("m192n320k128_rn", M=192, N=320, K=128, BN=128, STAGES=3, RASTER="n", GROUP=2,
           SMS=3),                        # raster along N: six units on three CTAs
    T.case("m128n128k256_splitk", M=128, N=128, K=256, BN=128, STAGES=2, SPLITK=2,
           SMS=2),                        # two CTAs, one tile: the later one reduces
    T.case("m128n128k256_splitk_red", M=128, N=128, K=256, BN=128, STAGES=2, SPLITK=2,
           REDUCE="red", SMS=2),          # the same through one red.global.add sum
    T.case("m200n136k296_bn64_red", M=200, N=136, K=296, BN=64, STAGES=3, EPI_BUFS=1,
           SPLITK=2, REDUCE="red", SMS=4),  # 64-wide tiles, tails, 12 units on 4 CTAs:
                                            # the sums are zeroed and counters reset per tile
    # REDUCE "peers" (the last split keeps its own partial): 2 splits with tails; 3 splits
    # on 4 CTAs (the last adds the splits after its own, wrapping); 9 stages with the direct
    # epilogue, 10 slices per tile: each CTA's 3 units wrap the ring
    T.case("m200n136k296_bn64_peers", M=200, N=136, K=296, BN=64, STAGES=3, EPI_BUFS=1,
           SPLITK=2, REDUCE="peers", SMS=4),
    T.case("m256n128k384_peers3", M=256, N=128, K=384, BN=128, STAGES=2, SPLITK=3,
           REDUCE="peers", SMS=4),
    T.case("m200n136k600_bn64_peers_s9_direct", M=200, N=136, K=600, BN=64, STAGES=9,
           EPI="direct", SPLITK=2, REDUCE="peers", SMS=4),
    # t64k2p's constants (BN 64, 8 stages, one staged chunk, "peers") with more units than
    # CTAs, as at 512 x 4096 x 4096 (512 units on 132 CTAs): 6 tiles x 2 splits on 3 CTAs, 4
    # units each of 4 or 5 slices (K tail), the ring wrapping under the reduction and the
    # epilogue (the session-13 "hang" of that shape was the pyptx baseline's first call:
    # docs/TUNING.md "A timeout in the warm-up"). sync_check: ~290000 states, 30 s on 2
    # cores, so in tests/zoo/test_gemm_sm90.py (with two launches on one workspace)
    T.case("m256n136k520_bn64_peers_s8", M=256, N=136, K=520, BN=64, STAGES=8, EPI_BUFS=1,
           SPLITK=2, REDUCE="peers", SMS=3, tags=("sync-slow",)),
    # A in its own ring (ASTAGES): B 4 slices ahead of A, 12 units of 2-3 slices on 4 CTAs
    # (every unit shorter than the lead); unsplit 10-slice tiles, 3 per CTA, both rings
    # wrapping; N-major B
    T.case("m200n136k296_bn64_peers_a2", M=200, N=136, K=296, BN=64, STAGES=6, ASTAGES=2,
           EPI_BUFS=1, SPLITK=2, REDUCE="peers", SMS=4),
    T.case("m200n136k600_bn64_a2", M=200, N=136, K=600, BN=64, STAGES=5, ASTAGES=2,
           EPI_BUFS=1, SMS=2),
    T.case("m200n136k200_kn_a3", M=200, N=136, K=200, B_KMAJOR=False, BN=128, STAGES=4,
           ASTAGES=3, EPI_BUFS=1, SMS=1),
    T.case("m200n136k296_streamk", M=200, N=136, K=296, BN=64, STAGES=3, EPI_BUFS=1,
           STREAMK=True, REDUCE="red", SMS=4),  # 30 slices of 6 tiles on 4 CTAs: 7, 8, 7, 8;
                                                # tiles 0, 2, 3, 5 whole, 1 and 4 in two pieces
    # the deferred epilogue: one CTA, four tiles (each stored under the next one's first K
    # slice, the last after the loop); and 6 tiles with tails on 2 CTAs, 5 K slices each
    T.case("m256n256k64_persistent_defer", M=256, N=256, K=64, BN=128, STAGES=2, EPI_BUFS=1,
           SMS=1, EPI_DEFER=True),
    T.case("m200n136k296_bn64_defer", M=200, N=136, K=296, BN=64, STAGES=3, EPI_BUFS=1,
           SMS=2, EPI_DEFER=True),
    # stream-K on the tail: 6 tiles of 5 slices on 4 CTAs: tiles 0-3 whole (one each), the
    # tail's 2 tiles x 5 slices dealt 2, 3, 2, 3: each cut in two; the same with the deferred
    # epilogue (a whole tile's C under the next piece's MMAs, a cut one's once summed)
    T.case("m200n136k296_streamk_tail", M=200, N=136, K=296, BN=64, STAGES=3, EPI_BUFS=1,
           STREAMK="tail", REDUCE="red", SMS=4),
    T.case("m200n136k296_streamk_tail_defer", M=200, N=136, K=296, BN=64, STAGES=3,
           EPI_BUFS=1, STREAMK="tail", REDUCE="red", SMS=4, EPI_DEFER=True),
    # the spread deferred epilogue (2 rounds of one 64 x 64 chunk per 128-wide tile): units
    # of one K slice (round 1 flushed after the unit's loop), and of 5 (round r under slice r)
    # the tail in K-lockstep (STREAMK "lock"): 6 tiles of 5 slices on 4 CTAs: tiles 0-3 whole,
    # the tail's 2 cut at 3 slices (P = 1: CTAs 0, 1 take [0, 3)), helpers 2, 3 one [3, 5)
    # each; 7 tiles of 12 slices: the tail's 3 cut at 11 (P = 3), one helper takes all three
    # [11, 12); 5 tiles of 2 slices: the one tail tile cut at 1, its last slice on helper 2
    # (helpers 0, 1 idle); 7 tiles of 2 slices: the cut at min(3, 2) = k, the tail whole on
    # CTAs 0-2, no helper piece; and the first with the spread deferred epilogue
    T.case("m200n136k296_streamk_lock", M=200, N=136, K=296, BN=64, STAGES=3, EPI_BUFS=1,
           STREAMK="lock", REDUCE="red", SMS=4),
    T.case("m128n448k712_streamk_lock_t3", M=128, N=448, K=712, BN=64, STAGES=3, EPI_BUFS=1,
           STREAMK="lock", REDUCE="red", SMS=4),
    T.case("m128n320k128_streamk_lock_1tail", M=128, N=320, K=128, BN=64, STAGES=2,
           EPI_BUFS=1, STREAMK="lock", REDUCE="red", SMS=4),
    T.case("m128n448k128_streamk_lock_whole", M=128, N=448, K=128, BN=64, STAGES=2,
           EPI_BUFS=1, STREAMK="lock", REDUCE="red", SMS=4),
    T.case("m200n136k296_streamk_lock_spread", M=200, N=136, K=296, BN=64, STAGES=3,
           EPI_BUFS=1, STREAMK="lock", REDUCE="red", SMS=4, EPI_DEFER="spread"),
    T.case("m256n256k64_persistent_defer_spread", M=256, N=256, K=64, BN=128, STAGES=2,
           EPI_BUFS=1, SMS=1, EPI_DEFER="spread"),
    T.case("m200n264k296_defer_spread", M=200, N=264, K=296, BN=128, STAGES=3, EPI_BUFS=1,
           SMS=2, EPI_DEFER="spread"),
])

SUITE_C2, SUITE_C2_PEERS = _bf16_suites(gemm_bf16_c2, [
    T.case("m200n136k72", M=200, N=136, K=72),
    # the 256 x 128 tile in a cluster: two row tiles of one pair sharing B, tails in N and K
    T.case("m600n200k136_tall", M=600, N=200, K=136, BM=256, BN=128, STAGES=4, SMS=2),
    # ... and side by side along N sharing A (PAIR_N): one cluster through three row tiles;
    # then N = 120, where the second CTA's tile lies wholly past N (zero-filled B, no store)
    T.case("m600n200k136_tall_n", M=600, N=200, K=136, BM=256, BN=128, STAGES=4, SMS=2,
           PAIR_N=True),
    T.case("m300n120k72_tall_n", M=300, N=120, K=72, BM=256, BN=128, STAGES=4, PAIR_N=True),
    T.case("m256n256k64_tall_n", M=256, N=256, K=64, BM=256, BN=128, STAGES=2, EPI_BUFS=1,
           PAIR_N=True),                  # one cluster, one unit: what sync_check runs
    T.case("m100n256k128_kn", M=100, N=256, K=128, B_KMAJOR=False),  # the peer's tile is empty
    T.case("m256n256k64_persistent", M=256, N=256, K=64, BN=128, STAGES=2, SMS=2),
    T.case("m256n256k64_persistent_defer", M=256, N=256, K=64, BN=128, STAGES=2, SMS=2,
           EPI_DEFER=True),
    # 2 splits summed through "peers" in clusters (the c2 t64k2p benchmark variant): 6 units
    # of tile pairs, the second row's tiles ending at M = 200
    T.case("m200n136k200_bn64_peers", M=200, N=136, K=200, BN=64, STAGES=3, EPI_BUFS=1,
           SPLITK=2, REDUCE="peers"),
    # stream-K on the tail in clusters: 3 tile pairs (the second row's tiles end at M = 200) on
    # 2 clusters: pairs 0, 1 whole, pair 2's 5 slices dealt 2 and 3, both CTAs of a cluster the
    # same pieces (the B multicast stays paired); each tile summed in its own slot; then
    # 128-wide tiles with the spread epilogue. (Out of the suite 2026-12-01/02 while racecheck
    # reported race.stage-reuse on them: a false race of its replay, docs/TUNING.md.)
    T.case("m200n136k296_streamk_tail", M=200, N=136, K=296, BN=64, STAGES=3, EPI_BUFS=1,
           STREAMK="tail", REDUCE="red", SMS=4),
    T.case("m200n136k296_streamk_tail_defer", M=200, N=136, K=296, BN=64, STAGES=3,
           EPI_BUFS=1, STREAMK="tail", REDUCE="red", SMS=4, EPI_DEFER=True),
    T.case("m200n264k232_streamk_tail_defer_spread", M=200, N=264, K=232, BN=128, STAGES=3,
           EPI_BUFS=1, STREAMK="tail", REDUCE="red", SMS=4, EPI_DEFER="spread"),
    # session 15's wave2 variants at their own constants, small: `t256ds4` (BN 256, one chunk a
    # round: 4 rounds) without stream-K on one cluster, 2 tile pairs of 5 slices (the K tail
    # zero-filled), rounds under slices 0-3; then 3 tile pairs of 2 slices (rounds 2 and 3
    # flushed after the loop, before the repack); `t256k2r` in clusters: 2 tile pairs x 2
    # splits on 2 clusters, summed by red.global.add, the second row's tiles ending at M = 200
    # the tail in K-lockstep in clusters with the spread epilogue: 3 tile pairs of 4 slices on
    # 2 clusters: pair 0, 1 whole, pair 2 cut at 2 (P = 1: [0, 2) on cluster 0, [2, 4) on 1)
    T.case("m200n264k232_streamk_lock_defer_spread", M=200, N=264, K=232, BN=128, STAGES=3,
           EPI_BUFS=1, STREAMK="lock", REDUCE="red", SMS=4, EPI_DEFER="spread"),
    T.case("m200n512k264_bn256_defer_spread4", M=200, N=512, K=264, BN=256, STAGES=3,
           EPI_BUFS=1, SMS=2, EPI_DEFER="spread"),
    T.case("m256n768k128_bn256_defer_spread4_flush", M=256, N=768, K=128, BN=256, STAGES=2,
           EPI_BUFS=1, SMS=2, EPI_DEFER="spread"),
    # `t256ds4pdl`'s form: the cluster pair launched as a programmatic dependent (both
    # attributes on one launch; griddepcontrol after the cluster's barrier set-up)
    T.case("m200n512k264_bn256_defer_spread4_pdl", M=200, N=512, K=264, BN=256, STAGES=3,
           EPI_BUFS=1, SMS=2, EPI_DEFER="spread", PDL=True),
    T.case("m200n512k200_bn256_splitk_red", M=200, N=512, K=200, BN=256, STAGES=2,
           EPI_BUFS=2, SPLITK=2, REDUCE="red", SMS=4),
])


# the two K-splits of a tile in a 2-CTA cluster, summed through distributed shared memory:
# 4 tiles with tails on 2 clusters, units of one and two slices, the receive buffer handed
# back and reused, with the direct epilogue, and the same with A's own ring (numsim and
# sync_check clean; larger cases, where sync_check stops at its state bound, are numsim-
# checked in tests/zoo/test_gemm_sm90.py)
SUITE_K2, _ = _bf16_suites(gemm_bf16_k2, [
    T.case("m130n135k136_pair_direct", M=130, N=135, K=136, BN=128, STAGES=2, EPI="direct",
           SPLITK=2, REDUCE="pair", SMS=4),
    T.case("m130n135k72_pair_a1_direct", M=130, N=135, K=72, BN=128, STAGES=3, ASTAGES=1,
           EPI="direct", SPLITK=2, REDUCE="pair", SMS=4),
])


def _fp8_suite(kernel, small: list):
    CM = 2 if kernel.name.endswith("_c2") else 1
    args = {"M": "M", "N": "N", "K": "K"}
    return T.suite(kernel, inputs=fp8_inputs(BM, CM, H200_SMS), reference=fp8_reference,
                   outputs=["c"],
                   cases=small + _large(f"c{CM}", fp8=True), tolerance=FP8_TOLERANCE,
                   flops=lambda M, N, K: 2 * M * N * K, flops_dtype="fp8",
                   bytes=lambda M, N, K: M * K + N * K + 2 * M * N,
                   baselines=[{"name": "torch._scaled_mm", "args": args},
                              {"name": "torch._scaled_mm.fast_accum", "args": args}])


SUITE_FP8 = _fp8_suite(gemm_fp8, [
    T.case("m200n136k160", M=200, N=136, K=160),
    T.case("m256n384k128_persistent", M=256, N=384, K=128, BN=128, STAGES=3, SMS=2),
    T.case("m256n384k128_persistent_defer", M=256, N=384, K=128, BN=128, STAGES=3, SMS=2,
           EPI_DEFER=True),     # the scales applied when the tile is packed
    T.case("m128n128k512_splitk", M=128, N=128, K=512, BN=128, STAGES=2, SPLITK=2, SMS=2),
    T.case("m128n128k512_splitk_red", M=128, N=128, K=512, BN=128, STAGES=2, SPLITK=2,
           REDUCE="red", SMS=2),
    T.case("m128n256k640_streamk", M=128, N=256, K=640, BN=128, STAGES=2, STREAMK=True,
           REDUCE="red", SMS=3),            # 10 slices on 3 CTAs: both tiles in two pieces
])
SUITE_FP8_C2 = _fp8_suite(gemm_fp8_c2, [T.case("m200n136k160", M=200, N=136, K=160)])
