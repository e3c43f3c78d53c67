"""Inclusive prefix sum over long rows (f32), single pass, on a persistent grid whose tiles
stream through a STAGES-deep shared-memory ring: the next tile's bulk load is in flight while
this tile waits in its decoupled look-back.

Why (issue 14; docs/TUNING.md "cumsum (session 12, branch cumsum9)"): `cumsum_tma` holds 83.4%
of the copy bandwidth (151.47 us at 1 x 64M f32, `_k8`). Its iket profile (session 10) says a
tile's CTA spends ~5.6 us in the look-back (warp 0) while its other 7 warps sit idle ~8.2 us
holding the tile's 76-84 KB: the SM's share of the tile bytes does not move while the tile
waits for its neighbours' aggregates. Here the wait no longer holds the loads back:

1. persistent CTAs, all resident (one wave: `constraints`), CTA c scanning tiles c, c + G,
   c + 2G, ... of one global order (G CTAs; every row's tiles in order), so the tile a
   look-back waits on is always held by a running CTA that has already issued its load
   (`cumsum_pipe`'s argument): the lowest unfinished tile's look-back never waits;
2. a tile is BLOCK runs of RUN = RUN4 * 4 contiguous floats, all in shared memory (thread t:
   elements t RUN ... t RUN + RUN - 1, `cumsum_tma`'s run layout, RUN4 odd: conflict-free
   16-byte reads), one 1-D ``cp.async.bulk`` per tile on the stage's mbarrier (``complete_tx``);
3. per tile k: thread 0 first refills a stage with tile k + AHEAD (AHEAD = STAGES - 1 - SLACK
   tiles load while one is scanned): the stage tile k - 1 - SLACK used, once its bulk store has
   read it (``cp.async.bulk.wait_group.read SLACK``: the SLACK latest stores may still be
   reading). With SLACK = 0 thread 0 waits for tile k - 1's store, issued an instant before;
   under full HBM load a bulk store drains at the SM's write share (~68 KB in ~4 us), so the
   default (STAGES 3, SLACK 1) refills the stage of tile k - 2, whose store has had a whole
   tile's time, and tile k + 1's load is still issued before tile k's look-back. Then every
   thread waits for tile k, sums its run (pass 1), one warp ladder scans the 32 run sums (lane
   31: the warp's total to shared memory), one barrier, warp 0 scans the nw warp totals,
   publishes the tile's aggregate A (a row's first tile: P), looks back, publishes P and writes
   each warp's offset (`cumsum._tile_prefix`), one barrier, every thread rewrites its run as its
   inclusive scan from its offset (pass 2: its warp's offset, its lane's exclusive sum, kept in
   one register across the look-back), ``fence.proxy.async.shared::cta``, one barrier, and
   thread 0 stores the tile with one ``cp.async.bulk.global.shared::cta`` (one bulk group per
   tile). Two passes over shared memory per tile (`cumsum_tma`'s runs take three: the look-back sits
   between the run's sum and its rewrite, so the rewrite adds the final offset at once);
4. ``LAG=1`` software-pipelines one tile: in iteration k every thread runs pass 1 of tile k + 1
   (its load issued AHEAD - 1 iterations earlier), warp 0 publishes tile k + 1's aggregate and
   only then looks back for tile k, whose aggregate it kept in a register; then pass 2 and the
   store of tile k (the warp totals in two slots, one per tile in flight; each thread keeps two
   lane offsets). Why: with ``LAG=0`` a tile's A is published after its CTA's previous
   look-back, and that look-back waited for the A's of the lower CTAs' tiles of the same wave,
   so the waves are chained through the slowest CTA of each (`cumsum_pipe`'s measured 7-8 us a
   tile; docs/TUNING.md "cumsum (session 12, branch cumsum9)"); with ``LAG=1`` the A's a
   look-back counts were published an iteration earlier. It needs STAGES >= 3 + SLACK (one
   tile more in shared memory);
5. the CTA's last act: ``wait_group.read 0`` (no bulk store may still read shared memory when
   the CTA exits).

Each phase is an iket range (``wait``, ``sum``, ``look_back``, ``scan``, ``store``; ``LAG=1``
adds ``publish``; nothing in a normal build), so ``tirxh profile --iket`` splits a tile's time
as it did `cumsum_tma`'s.

Flags and epochs are `cumsum`'s (64-bit words: value, status, epoch; self-resetting across
launches); a launch takes one ticket per CTA and its epoch is ticket / G, as `cumsum_pipe`'s.
Numerics: a thread's run adds its RUN elements one after the other (RUN - 1 adds on the path of
its last element); on the suite's dyadic inputs every order is exact (the check is bitwise);
tests/zoo/test_cumsum_persist.py checks the error bound on normal data.

Predictions (docs/PERFORMANCE.md "Session 12, branch cumsum9", written before any run): the
default 136-145 us at 1 x 64M (87-93% of the copy bandwidth, central 139 us: 90.9%), against
`cumsum_tma`'s 151.47; the ceiling is the TMA path's (`tma_copy` moves the same 537 MB in
135.3-135.8 us).

Tags: decoupled-look-back, single-pass, scan, persistent, bulk-copy, mbarrier-pipeline,
bulk-async-group, warp-shuffle, iket
Work: 1 FLOP and 8 bytes per element.
"""

import numpy as np

import tirxh.lang as T
from cumsum import (EPOCH_MASK, H200_SMS, SMEM_PER_SM, ST_A, ST_P, THREADS_PER_SM, _look_back,
                    _scan_totals, _tile_prefix, _warp_scan, reference, strided_tiles)
from cumsum_smem import shape_why
from cumsum_tma import rewrite_run

TAGS = ("decoupled-look-back", "single-pass", "scan", "persistent", "bulk-copy",
        "mbarrier-pipeline", "bulk-async-group", "warp-shuffle", "iket")

CTA_RESERVED = 1024  # shared memory the driver keeps per CTA (H200)


def tile_elems(BLOCK, RUN4) -> int:
    """A tile's elements: BLOCK runs of RUN4 float4s."""
    return BLOCK * RUN4 * 4


def ring_bytes(BLOCK, RUN4, STAGES) -> int:
    """The tile ring's shared memory (the mbarriers, warp totals and epoch add < 200 bytes)."""
    return STAGES * tile_elems(BLOCK, RUN4) * 4


def _grid(rows, cols, BLOCK=256, RUN4=17, CTAS=132):
    return min(rows * T.cdiv(cols, tile_elems(BLOCK, RUN4)), CTAS)


def ring_io(x, buf, full, span, cols, tile_n, hint=False):
    """A tile ring's byte count and loader, `cumsum_persist`'s and `cumsum_ws`'s: (tile_bytes(col0),
    the tile's bytes in its row, the row's last tile short; load(k, stage), thread 0: the CTA's
    k-th tile into `stage`, one 1-D bulk copy completing on ``full[stage]``; `hint`: with an
    ``L2::evict_last`` policy, ``createpolicy.fractional`` + ``.L2::cache_hint``)."""
    bulk_load = T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                      + (".L2::cache_hint" if hint else "")]

    def tile_bytes(col0):
        return T.ptx.min.u32(cols - col0, tile_n) << 2

    def load(k, stage):
        _, row, _, col0 = span(k)
        nbytes = tile_bytes(col0)
        full[stage].arrive_expect_tx(nbytes)
        policy = (T.ptx.createpolicy.fractional.L2__evict_last.b64(),) if hint else ()
        bulk_load(buf.at(stage, 0), x.at(row * cols + col0), nbytes, full[stage], *policy)
    return tile_bytes, load


def ring_prologue(counter, grid, bcast, barriers, AHEAD, mine, load):
    """Thread 0, before the CTA's first barrier: one ticket, the launch's epoch (ticket / G, its
    low bits) to ``bcast[0]``, every mbarrier of `barriers` ((array, arrival count) pairs)
    initialised and fenced, and the first AHEAD tiles' loads (the loop's refills fill the
    other stages)."""
    ticket = T.ptx.atom.relaxed.gpu.global_.add.u64(counter.at(0), 1)
    epoch = T.ptx.cvt.u32.u64(T.ptx.div.u64(ticket, T.ptx.cvt.u64.u32(grid)))
    T.ptx.st.shared.u32(bcast.at(0), T.ptx.and_.b32(epoch, EPOCH_MASK))
    for s in range(len(barriers[0][0])):
        for bars, count in barriers:
            bars[s].init(count)
    T.ptx.fence.mbarrier_init.release.cluster()
    for s in range(AHEAD):
        with T.if_(mine > s):
            load(s, s)


def run_sums(raddr, RUN4, in_row, lane, warp, totals):
    """Pass 1 on a tile in shared memory (iket range ``sum``): the thread's run of RUN4 float4s
    from ``raddr`` summed (``in_row(j)``: the j-th float4 lies in the row), one ladder over the
    warp's 32 run sums, lane 31 the warp's total to ``totals.at(warp)``. Returns the lane's
    exclusive offset in its warp (one register, kept until pass 2)."""
    with T.iket.range("sum"):
        total = T.reg(T.f32, init=0.0)
        for j in range(RUN4):
            v = [T.reg(T.f32, init=0.0) for _ in range(4)]
            T.ptx.ld.shared.v4.f32(v, raddr + 16 * j, pred=in_row(j))
            T.ptx.add.f32(total, total, T.ptx.add.f32(T.ptx.add.f32(v[0], v[1]),
                                                      T.ptx.add.f32(v[2], v[3])))
        incl = _warp_scan(T.reg(T.f32, init=total), lane)
        with T.if_(lane == 31):
            T.ptx.st.shared.f32(totals.at(warp), incl)
        return T.ptx.sub.f32(incl, total)


class _Slot:
    """``wt`` seen from element ``base`` on (a register): one tile's nw warp totals of a
    two-tile array, for `cumsum._scan_totals`, which addresses its totals with ``.at(i)``."""

    def __init__(self, arr, base):
        self.arr, self.base = arr, base

    def at(self, i):
        return self.arr.at(self.base + i)


@T.kernel(grid=_grid, block=lambda BLOCK: BLOCK)
def cumsum_persist(x: T.gptr[T.f32], out: T.gptr[T.f32], flags: T.gptr[T.u64],
                   counter: T.gptr[T.u64], rows: T.u32, cols: T.u32, BLOCK: T.const = 256,
                   RUN4: T.const = 17, STAGES: T.const = 3, SLACK: T.const = 1,
                   LAG: T.const = 0, LOOK: T.const = 4, CTAS: T.const = 132):
    run = RUN4 * 4
    AHEAD = STAGES - 1 - SLACK          # tiles loading while one is scanned
    tile_n = tile_elems(BLOCK, RUN4)
    nw = BLOCK // 32
    buf = T.shared(T.f32, (STAGES, tile_n), name="ring", align=128, dynamic=True)
    full = T.mbarrier(STAGES, name="full", dynamic=True)
    # warp totals, then each warp's offset: one tile's (LAG 0), two tiles' (LAG 1: tile k's
    # offsets are read while tile k + 1's totals are written), and LAG 1's tile prefix
    wt = T.shared(T.f32, ((1 + LAG) * nw + LAG,), name="wtot")
    bcast = T.shared(T.u32, (1,), name="epoch")
    bulk_store = T.ptx["cp.async.bulk.global.shared::cta.bulk_group"]
    tid = T.tid.x
    lane = T.laneid()
    warp = tid >> 5
    grid, cta, per_row, ntiles, mine, span = strided_tiles(rows, cols, tile_n)
    r0 = tid * run
    tile_bytes, load = ring_io(x, buf, full, span, cols, tile_n)

    def in_row(col0, j):
        """The j-th float4 of this thread's run lies in the row."""
        return T.ptx.add.u32(col0, r0 + 4 * j if j else r0) < cols

    def pass1(cur, col0, totals):
        """Wait for the tile in `cur`'s stage; the run's sum; one ladder over the warp's 32 run
        sums (lane 31: the warp's total to ``totals.at(warp)``). Returns the lane's exclusive
        offset in its warp (one register, kept until pass 2)."""
        with T.iket.range("wait"):
            full[cur.stage].wait(cur.phase)
        return run_sums(buf.at(cur.stage, r0), RUN4, lambda j: in_row(col0, j), lane, warp,
                        totals)

    def pass2(cur, col0, offset):
        """The run rewritten as its inclusive scan from `offset` (its final exclusive prefix),
        fenced for the bulk store's reads."""
        raddr = buf.at(cur.stage, r0)
        with T.iket.range("scan"):
            rewrite_run(raddr, RUN4, T.reg(T.f32, init=offset), lambda j: in_row(col0, j))
            T.ptx.fence.proxy.async_.shared__cta()  # generic writes -> the bulk store's reads

    def store(cur, row, col0):
        """Thread 0: the tile to global memory, one bulk copy (its own bulk group)."""
        with T.iket.range("store"):
            with T.if_(tid == 0):
                bulk_store(out.at(row * cols + col0), buf.at(cur.stage, 0), tile_bytes(col0))
                T.ptx.cp.async_.bulk.commit_group()

    with T.if_(tid == 0):
        ring_prologue(counter, grid, bcast, [(full, 1)], AHEAD, mine, load)
    T.ptx.bar.sync(0)
    epoch = T.ptx.ld.shared.u32(bcast.at(0))
    ring = T.pipeline(STAGES)                  # tile k's stage: pass 2, store

    def refill(k):
        """Thread 0: tile k + AHEAD into the stage of tile k - 1 - SLACK, once that tile's bulk
        store has read it (the SLACK latest stores may still be reading theirs)."""
        with T.if_((tid == 0) & (k + AHEAD < mine)):
            T.ptx.cp.async_.bulk.wait_group.read(SLACK)
            back = 1 + SLACK
            target = T.ptx.selp.u32(ring.stage - back, ring.stage + (STAGES - back),
                                    ring.stage >= back)
            load(k + AHEAD, target)

    if not LAG:
        with T.range(mine) as k:
            tile, row, t_in_row, col0 = span(k)
            # 1. thread 0: the refill, in flight during this tile's look-back
            refill(k)
            # 2. pass 1 (the run sums, the warps' totals)
            excl = pass1(ring, col0, wt)
            T.ptx.bar.sync(0)
            # 3. warp 0: the warp totals' scan, publish A (a row's first tile: P), look back,
            # publish P, each warp's offset to `wt`
            with T.if_(warp == 0, uniform=True):
                with T.iket.range("look_back"):
                    _tile_prefix(flags, wt, nw, lane, tile, t_in_row, epoch, LOOK)
            T.ptx.bar.sync(0)
            # 4. pass 2 from the final offset, then the bulk store
            pass2(ring, col0, T.ptx.add.f32(T.ptx.ld.shared.f32(wt.at(warp)), excl))
            T.ptx.bar.sync(0)
            store(ring, row, col0)
            ring.advance()
    else:
        # LAG 1: tile k + 1's aggregate is published before tile k's look-back, so a tile's A
        # never waits for its CTA's previous look-back; warp 0 keeps tile k's aggregate and
        # every thread its lane offset from one iteration to the next
        nxt = T.pipeline(STAGES)               # tile k + 1's stage: its wait and pass 1
        pre = wt.at((1 + LAG) * nw)            # tile k's exclusive prefix, from warp 0
        agg = T.reg(T.f32, init=0.0)
        excl = T.reg(T.f32, init=0.0)

        def publish(k):
            """Warp 0, once tile k's warp totals are in its slot: their scan (each warp's
            offset in the tile back to the slot), publish A (a row's first tile: P)."""
            tile, _, t_in_row, _ = span(k)
            with T.iket.range("publish"):
                a, write_back = _scan_totals(_Slot(wt, (k & 1) * nw), nw, lane)
                agg.set(a)
                status = T.ptx.selp.u32(ST_P, ST_A, t_in_row == 0)
                with T.if_(lane == 0):
                    T.ptx.st.relaxed.gpu.global_.b64(flags.at(tile), T.ptx.mov.b64(
                        [a, T.ptx.or_.b32(T.ptx.shl.b32(epoch, 2), status)]))
                write_back(0.0)

        # tile 0: pass 1, A (refill k = 0 is the loop's: its target is a stage not yet used)
        excl.set(pass1(nxt, span(0)[3], wt))
        nxt.advance()
        T.ptx.bar.sync(0)
        with T.if_(warp == 0, uniform=True):
            publish(0)
        with T.range(mine) as k:
            tile, row, t_in_row, col0 = span(k)
            refill(k)
            # 1. tile k + 1: pass 1 (its load issued AHEAD - 1 tiles ago)
            excl_next = T.reg(T.f32, init=0.0)
            with T.if_(k + 1 < mine, uniform=True):
                excl_next.set(pass1(nxt, span(k + 1)[3], _Slot(wt, ((k + 1) & 1) * nw)))
            T.ptx.bar.sync(0)
            # 2. warp 0: publish tile k + 1's A, then tile k's look-back (P) and prefix
            with T.if_(warp == 0, uniform=True):
                agg_k = T.ptx.mov.f32(agg)
                with T.if_(k + 1 < mine, uniform=True):
                    publish(k + 1)
                with T.iket.range("look_back"):
                    prefix = T.reg(T.f32, init=0.0)
                    with T.if_(t_in_row != 0, uniform=True):
                        prefix.set(_look_back(flags, tile, tile - t_in_row, agg_k, epoch,
                                              lane, LOOK))
                    with T.if_(lane == 0):
                        T.ptx.st.shared.f32(pre, prefix)
            T.ptx.bar.sync(0)
            # 3. tile k: pass 2 from its prefix + its warp's offset + the lane's, bulk store
            off = T.ptx.add.f32(T.ptx.ld.shared.f32(pre), T.ptx.ld.shared.f32(
                wt.at((k & 1) * nw + warp)))
            pass2(ring, col0, T.ptx.add.f32(off, excl))
            excl.set(excl_next)
            T.ptx.bar.sync(0)
            store(ring, row, col0)
            ring.advance()
            nxt.advance()
    with T.if_(tid == 0):
        T.ptx.cp.async_.bulk.wait_group.read(0)  # no bulk store reads shared memory at exit


# -- cases -----------------------------------------------------------------------------------------

def per_sm(BLOCK, RUN4, STAGES, extra=0) -> int:
    """CTAs one H200 SM holds by shared memory (ring + 1 KB reserved + < 1 KB static) and
    threads (BLOCK, and `extra` threads of other roles; registers are far from the limit: no
    data lives in them)."""
    return min(SMEM_PER_SM // (ring_bytes(BLOCK, RUN4, STAGES) + 2 * CTA_RESERVED),
               THREADS_PER_SM // (BLOCK + extra))


def ring_why(BLOCK, RUN4, STAGES, SLACK, LOOK, CTAS, extra=0):
    """What a tile ring of `cumsum_persist`'s shape refuses (BLOCK scanning threads plus
    `extra` of other roles): the block, the ring's depth and bytes, a grid of one wave (a CTA
    waits on other CTAs' flags), the look-back's flags a lane."""
    why = []
    top = 1024 - extra
    if BLOCK % 32 or not 32 <= BLOCK <= top:
        why.append(f"BLOCK={BLOCK} must be a multiple of 32 in [32, {top}]"
                   + (" (one more warp looks back)" if extra else ""))
    if SLACK not in (0, 1) or RUN4 < 1 or STAGES < 2 + SLACK:
        why.append(f"RUN4={RUN4} must be at least 1 (float4s per thread run), SLACK={SLACK} 0 "
                   f"or 1 (bulk stores left reading at a refill) and STAGES={STAGES} at least "
                   f"2 + SLACK (a tile loads while one is scanned and SLACK are stored)")
    elif per_sm(BLOCK, RUN4, STAGES, extra) < 1:
        why.append(f"STAGES * BLOCK * RUN4 * 16 = {ring_bytes(BLOCK, RUN4, STAGES)} bytes of "
                   f"ring (+2 KB) exceed an SM's {SMEM_PER_SM}")
    elif not 1 <= CTAS <= H200_SMS * per_sm(BLOCK, RUN4, STAGES, extra):
        n = per_sm(BLOCK, RUN4, STAGES, extra)
        why.append(f"CTAS={CTAS} must be in [1, {H200_SMS * n}]: one wave of {n} CTA(s) per "
                   f"SM on {H200_SMS} SMs (every CTA must be resident)")
    if LOOK not in (1, 2, 4, 8):
        why.append(f"LOOK={LOOK} must be 1, 2, 4 or 8 (flags per lane and look-back round)")
    return why


def constraints(rows, cols, BLOCK, RUN4, STAGES, SLACK, LAG, LOOK, CTAS):
    """The shapes and constants `cumsum_persist` accepts (checked when the suite is
    declared): the ring's (`ring_why`), LAG's stage, `cumsum_smem`'s row shapes."""
    why = ring_why(BLOCK, RUN4, STAGES, SLACK, LOOK, CTAS)
    if LAG not in (0, 1) or (LAG and STAGES < 3 + SLACK):
        why.append(f"LAG={LAG} must be 0 or 1, and LAG 1 needs STAGES={STAGES} at least 3 + "
                   f"SLACK (a tile in pass 1 while the next loads and one is stored)")
    return why + shape_why(rows, cols, 0)   # `cumsum_smem`'s row shapes (0: no register cap)


def make_case(name, rows, cols, BLOCK=256, RUN4=17, STAGES=3, SLACK=1, LAG=0, LOOK=4, CTAS=132,
              small=True):
    """A case; large ones are the H200's (tag h200), never simulated."""
    return T.case(name, small=small, tags=() if small else ("h200",), rows=rows, cols=cols,
                  BLOCK=BLOCK, RUN4=RUN4, STAGES=STAGES, SLACK=SLACK, LAG=LAG, LOOK=LOOK,
                  CTAS=CTAS)


def inputs(rng, rows, cols, BLOCK=256, RUN4=17):
    # multiples of 1/16 in [-8, 8]: every partial sum is exact in f32 (`cumsum`'s docstring)
    x = rng.integers(-128, 129, (rows, cols)).astype(np.float32) / 16
    ntiles = rows * T.cdiv(cols, tile_elems(BLOCK, RUN4))
    return dict(x=x, out=np.empty((rows, cols), np.float32), flags=np.zeros(ntiles, np.uint64),
                counter=np.zeros(1, np.uint64), rows=rows, cols=cols)


# the small rings, `cumsum_ws`'s too (its block adds the look-back warp to BLOCK):
RING_SMALL = {
    # 5 tiles of 32 x 12 = 384 on 2 CTAs (3 and 2 tiles), 2 stages, SLACK 0: the ring wraps;
    # the last tile (236 elements) ends inside thread 19's run, after its second float4
    "r1_c1772_s2": dict(rows=1, cols=1772, BLOCK=32, RUN4=3, STAGES=2, SLACK=0, LOOK=1, CTAS=2),
    # 3 rows of 4 tiles of 256 (runs of 8) on 3 CTAs, 3 stages, SLACK 1 (the default's ring):
    # rows start mid-CTA; the rows' last tiles (252) cut thread 31's run (1 float4 of 2)
    "r3_c1020_s3": dict(rows=3, cols=1020, BLOCK=32, RUN4=2, STAGES=3, LOOK=1, CTAS=3),
    # 47 tiles of 256 on 3 CTAs, 3 stages, SLACK 0 (two tiles ahead): look-backs of one flag
    # a lane cross 32-flag windows; the last tile (228) cuts thread 28's run after 1 float4
    "r1_c12004_t256": dict(rows=1, cols=12004, BLOCK=32, RUN4=2, STAGES=3, SLACK=0, LOOK=1,
                           CTAS=3),
    # 160 threads (5 warps), runs of 20, 8 tiles of 3200 per row on 3 CTAs, 4 stages, SLACK
    # 1, 128 flags a round; the rows' last tiles (2604) cut thread 130's run after 4
    "r2_c25004_b160": dict(rows=2, cols=25004, BLOCK=160, RUN4=5, STAGES=4, LOOK=4, CTAS=3),
}

SUITE = T.suite(
    cumsum_persist, inputs=inputs, reference=reference, outputs=["out"],
    cases=[
        *[make_case(name, **kw) for name, kw in RING_SMALL.items()],
        # LAG 1 (tile k + 1's A before tile k's look-back): 4 stages, SLACK 1, 3 rows of 4
        # tiles on 2 CTAs (a CTA's tiles k, k + 1 in different rows: a row's first tile
        # publishes P at once, its look-back skipped); 5 warps, two stages' slots of totals
        make_case("r3_c1020_lag", rows=3, cols=1020, BLOCK=32, RUN4=2, STAGES=4, LAG=1, LOOK=1,
                  CTAS=2),
        make_case("r2_c25004_b160_lag", rows=2, cols=25004, BLOCK=160, RUN4=5, STAGES=4, LAG=1,
                  LOOK=4, CTAS=3),
        # the H200's (docs/PERFORMANCE.md "Session 12, branch cumsum9"): one CTA per SM, 3
        # stages of 68 KB (17408-element tiles), a refill waits for the store before last; the
        # brief's double buffer (2 x 100 KB, a refill waits for the last store); 4 stages of 52
        # KB (two tiles ahead) and the same ring with LAG 1; two CTAs per SM (3 x 36 KB each);
        # 512 threads (twice the warps on the passes, 3 x 72 KB); 64 and 256 flags a look-back
        # round
        make_case("r1_c64M", rows=1, cols=1 << 26, small=False),
        make_case("r1_c64M_s2", rows=1, cols=1 << 26, RUN4=25, STAGES=2, SLACK=0, small=False),
        make_case("r1_c64M_s4", rows=1, cols=1 << 26, RUN4=13, STAGES=4, small=False),
        make_case("r1_c64M_s4_lag", rows=1, cols=1 << 26, RUN4=13, STAGES=4, LAG=1,
                  small=False),
        make_case("r1_c64M_c2", rows=1, cols=1 << 26, RUN4=9, CTAS=264, LOOK=8, small=False),
        make_case("r1_c64M_b512", rows=1, cols=1 << 26, BLOCK=512, RUN4=9, small=False),
        make_case("r1_c64M_l2", rows=1, cols=1 << 26, LOOK=2, small=False),
        make_case("r1_c64M_l8", rows=1, cols=1 << 26, LOOK=8, small=False),
        make_case("r8_c4M", rows=8, cols=1 << 22, small=False),
        make_case("r8_c4M_c2", rows=8, cols=1 << 22, RUN4=9, CTAS=264, LOOK=8, small=False),
        make_case("r8_c4M_s4_lag", rows=8, cols=1 << 22, RUN4=13, STAGES=4, LAG=1,
                  small=False),
    ],
    tolerance=T.tolerance(rtol=0, atol=0),  # dyadic inputs: exact in any order
    constraints=constraints,
    flops=lambda rows, cols: rows * cols, bytes=lambda rows, cols: 8 * rows * cols,
    baselines=[{"name": "torch.cumsum", "args": {"x": "x"}},
               {"name": "torch.compile.cumsum", "args": {"x": "x"}}],
)
