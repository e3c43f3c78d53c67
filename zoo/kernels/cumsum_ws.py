"""Inclusive prefix sum over long rows (f32), single pass, on a persistent grid with a tile ring
(`cumsum_persist`'s) and one extra warp per CTA that does nothing but the decoupled look-back:
it sums each tile the moment its bulk load lands, publishes the aggregate, looks back, publishes
the inclusive prefix and hands the tile's prefix to the scanning warps through an mbarrier. The
look-back is off the scanning warps' path.

Why (issue 14; docs/TUNING.md "cumsum: the look-back is a chain"): `cumsum_persist` measured
222.10 us at 1 x 64M f32 (session 13, predicted 136-145). Its iket timeline (session 13, d4)
has warp 0 in ``look_back`` 5.60 us a tile (3856 tiles, 29 per CTA: 163 of the 217 us) while
the 7 other warps idle 174 us each; the wave period is 7.0 us, of which the passes take 1.5. A
look-back's own round trip is short (the fastest ones end in 0.5-1 us: one round of flag reads,
the granularity of the timer is 256 ns); the rest is waiting. The cause is the order of the work
inside a CTA: a tile's aggregate A is published only after the CTA's previous tile's look-back,
and that look-back waited for the A's of the lower CTAs' tiles of the same wave. So the A's of
wave k are published after the slowest CTA of wave k - 1, every wave is a barrier over 132 CTAs,
and the period is the passes plus the look-back round trips plus the *largest* of 132 CTAs'
delays (a late bulk load: ``wait`` reaches 1.6 us at the 95th percentile and 5.6 us at the
worst), not the mean. `cumsum_persist`'s ``LAG=1`` publishes A one tile earlier (164.86 us): the
barrier is then over two waves, still on the scanning warps' path (pass 1, publish, look-back,
pass 2 one after the other, ~4.3 us a 13312-element tile against 3.3 us of memory time).

Here a tile's A depends only on its own bytes having landed, and the loads are issued AHEAD =
STAGES - 1 - SLACK tiles early on every CTA: the A's a look-back needs are (nearly always)
published before it starts, the look-back is one round trip, and the scanning warps only wait
for it when it is later than their pass 1. Per CTA, warps 0 .. BLOCK/32 - 1 scan, warp BLOCK/32
looks back:

1. persistent CTAs (one wave: `constraints`), CTA c owning tiles c, c + G, ... (`strided_tiles`);
   thread 0 fills a STAGES-deep ring of BLOCK runs of RUN = 4 RUN4 floats with one 1-D
   ``cp.async.bulk`` per tile on the stage's ``full`` mbarrier, and refills the stage of tile
   k - 1 - SLACK at the start of tile k once that tile's bulk store has read it (as
   `cumsum_persist`);
2. the look-back warp, per tile: waits on ``full``, sums the tile (lane l: float4s l, l + 32,
   ...: ``ld.shared.v4``, 4 partial sums, one butterfly), publishes A (a row's first tile: P),
   looks back (`cumsum._look_back`: 32 LOOK flags a round, publishes P), writes the tile's
   exclusive prefix to the stage's slot and arrives on the stage's ``ready`` mbarrier;
3. the scanning warps, per tile: wait on ``full``, pass 1 (each thread's run sum, one warp
   ladder, the warp totals), a named barrier (``bar.sync 1, BLOCK``: the look-back warp never
   joins), warp 0 scans the warp totals, waits on ``ready`` and writes each warp's offset, a
   named barrier, pass 2 (the run rewritten as its inclusive scan from its final offset),
   ``fence.proxy.async.shared::cta``, a named barrier, thread 0's bulk store (one bulk group);
4. thread 0's last act: ``wait_group.read 0``.

``AGG=1`` (session 14, branch cumsum11) moves step 2's sum and A into a warp of its own (warp
BLOCK/32 + 1): it waits on ``full``, sums the tile, publishes A, writes the sum to the stage's
slot and arrives on the stage's ``summed`` mbarrier (32 arrivals); the look-back warp waits on
``summed``, reads the slot and looks back. Why: measured (session 14, d6), AGG 0 took ~6.2 us a
wave whatever the tile's size (240.62 us at 1 x 64M, `_s5` 313.09: time tracked the waves, not
the bytes), and its iket trace shows the look-back warp finding each tile landed (``full`` wait
0 at the median) yet publishing its A 1.5 us after the previous look-back ended: a warp's loop
is program order, so A(k + 1) waited for look_back(k), which waited for the lower CTAs' A(k), a
wave barrier (docs/TUNING.md "cumsum: the look-back warp's program order is the chain"). With
AGG 1 no A waits for any look-back. Ordering: the aggregate warp's reads of a stage precede its
``summed`` arrive (release), the look-back warp's wait (acquire) and its ``ready`` arrive, which
the refill follows; the slot for tile k + STAGES is written after that tile's load landed.

``POL=1`` gives the bulk loads an ``L2::evict_last`` policy (``createpolicy.fractional``,
``.L2::cache_hint``), the stores none: tma_copy's ``POL=3`` (its docstring says why).

``COAL=1`` (session 15, branch cumsum12) reads each look-back round as LOOK loads of 32
consecutive flags (lane l: distances 32 j + l; `cumsum._read_flags` ``coal``) instead of lane
l's LOOK consecutive ones: the same window in a quarter of the L2 sector requests at LOOK 4.
Why: AGG 1's iket trace (session 15, d3) has the look-back warp as the bound (4.66 us a tile,
178 of 187 us), a look-back 1.53 us waiting for its last flag and 2.75 us in ~2-3 rounds of
1.5-2.5 us against ~0.5-0.8 unloaded; the times order by requests a round (LOOK 2 < 4 < 8),
not by window (docs/PERFORMANCE.md "Session 15, branch cumsum12").

Ordering: the look-back warp writes a stage's slot for tile k + STAGES only after that tile's
load landed, which follows the refill, which follows warp 0's read of tile k's slot; its reads
of tile k's bytes precede its ``ready`` arrive (release), which warp 0's wait (acquire) and the
refill after it follow.

Flags, epochs and tickets are `cumsum_persist`'s. Numerics: the look-back warp sums a tile in a
different order than the scanning warps (4 lane partials over BLOCK RUN4 / 32 float4s, then a
butterfly); on the suite's dyadic inputs every order is exact (the check is bitwise);
tests/zoo/test_cumsum_ws.py checks the error bound on normal data.

Predictions: docs/PERFORMANCE.md "Session 13, branch cumsum10" (AGG 0, refuted 1.6-1.7x) and
"Session 14, branch cumsum11" (AGG 1, refuted 1.28x) and "Session 15, branch cumsum12" (COAL
1), each written before any run.

Tags: decoupled-look-back, single-pass, scan, persistent, bulk-copy, mbarrier-pipeline,
warp-specialization, bulk-async-group, warp-shuffle, iket
Work: 1 FLOP and 8 bytes per element.
"""

import tirxh.lang as T
from cumsum import ST_A, ST_P, _look_back, _scan_totals, _warp_sum, reference, strided_tiles
from cumsum_persist import (RING_SMALL, inputs, ring_io, ring_prologue, ring_why, run_sums,
                            tile_elems)
from cumsum_smem import shape_why
from cumsum_tma import rewrite_run

TAGS = ("decoupled-look-back", "single-pass", "scan", "persistent", "bulk-copy",
        "mbarrier-pipeline", "warp-specialization", "bulk-async-group", "warp-shuffle", "iket")


def _grid(rows, cols, BLOCK=256, RUN4=13, CTAS=132):
    return min(rows * T.cdiv(cols, tile_elems(BLOCK, RUN4)), CTAS)


@T.kernel(grid=_grid, block=lambda BLOCK, AGG: BLOCK + 32 + 32 * AGG)
def cumsum_ws(x: T.gptr[T.f32], out: T.gptr[T.f32], flags: T.gptr[T.u64],
              counter: T.gptr[T.u64], rows: T.u32, cols: T.u32, BLOCK: T.const = 256,
              RUN4: T.const = 13, STAGES: T.const = 4, SLACK: T.const = 1, LOOK: T.const = 4,
              CTAS: T.const = 132, POL: T.const = 0, AGG: T.const = 0, COAL: T.const = 0):
    run = RUN4 * 4
    AHEAD = STAGES - 1 - SLACK          # tiles loading while one is scanned
    tile_n = tile_elems(BLOCK, RUN4)
    nw = BLOCK // 32                    # scanning warps; warp nw looks back
    per_lane = tile_n // 128            # float4s each look-back lane sums
    buf = T.shared(T.f32, (STAGES, tile_n), name="ring", align=128, dynamic=True)
    full = T.mbarrier(STAGES, name="full", dynamic=True)
    ready = T.mbarrier(STAGES, name="ready", dynamic=True)
    pre = T.shared(T.f32, (STAGES,), name="prefix")   # a stage's tile: its exclusive prefix
    if AGG:
        # AGG 1: the aggregate warp hands a stage's tile sum to the look-back warp
        summed = T.mbarrier(STAGES, name="summed", dynamic=True)
        aggs = T.shared(T.f32, (STAGES,), name="aggs")
    wt = T.shared(T.f32, (nw,), name="wtot")
    bcast = T.shared(T.u32, (1,), name="epoch")
    bulk_store = T.ptx["cp.async.bulk.global.shared::cta.bulk_group"]
    tid = T.tid.x
    lane = T.laneid()
    warp = tid >> 5
    grid, _, _, _, mine, span = strided_tiles(rows, cols, tile_n)
    r0 = tid * run
    tile_bytes, load = ring_io(x, buf, full, span, cols, tile_n, hint=POL)
    with T.if_(tid == 0):
        # all 32 look-back lanes arrive on `ready` (each lane's reads of the stage released)
        bars = [(full, 1), (ready, 32)] + ([(summed, 32)] if AGG else [])
        ring_prologue(counter, grid, bcast, bars, AHEAD, mine, load)
    T.ptx.bar.sync(0)
    epoch = T.ptx.ld.shared.u32(bcast.at(0))
    ring = T.pipeline(STAGES)

    def tile_sum(k):
        """The CTA's k-th tile summed from its stage (lane l: float4s l, l + 32, ...: 4
        partial sums, one butterfly; every lane holds it), after its load landed; A (a row's
        first tile: P) published. Returns (agg, the row's first tile, tile, the first tile of
        its row)."""
        tile, _, t_in_row, col0 = span(k)
        with T.iket.range("wait"):
            full[ring.stage].wait(ring.phase)
        with T.iket.range("agg"):
            part = [T.reg(T.f32, init=0.0) for _ in range(4)]
            base = buf.at(ring.stage, lane * 4)
            for i in range(per_lane):
                v = [T.reg(T.f32, init=0.0) for _ in range(4)]
                e = lane * 4 + 128 * i if i else lane * 4
                T.ptx.ld.shared.v4.f32(v, base + 512 * i, pred=T.ptx.add.u32(col0, e) < cols)
                for c in range(4):
                    T.ptx.add.f32(part[c], part[c], v[c])
            agg = _warp_sum(T.ptx.add.f32(T.ptx.add.f32(part[0], part[1]),
                                          T.ptx.add.f32(part[2], part[3])))
            first = t_in_row == 0
            status = T.ptx.selp.u32(ST_P, ST_A, first)
            with T.if_(lane == 0):
                T.ptx.st.relaxed.gpu.global_.b64(flags.at(tile), T.ptx.mov.b64(
                    [agg, T.ptx.or_.b32(T.ptx.shl.b32(epoch, 2), status)]))
        return agg, first, tile, tile - t_in_row

    def look_back(agg, first, tile, row_first):
        """Tile `tile`'s look-back (a row's first tile: none, its P is out), its exclusive
        prefix to the stage's slot, every lane's arrival on the stage's ``ready``."""
        with T.iket.range("look_back"):
            prefix = T.reg(T.f32, init=0.0)
            with T.if_(~first, uniform=True):
                prefix.set(_look_back(flags, tile, row_first, agg, epoch, lane, LOOK,
                                      coal=COAL == 1))
            with T.if_(lane == 0):
                T.ptx.st.shared.f32(pre.at(ring.stage), prefix)
            ready[ring.stage].arrive()  # 32 arrivals: every lane's reads are released

    def look_back_warp():
        """The look-back warp: every tile of this CTA in order."""
        with T.range(mine) as k:
            if AGG:
                # the sum from the aggregate warp (its A is out); the slot read after the wait
                tile, _, t_in_row, _ = span(k)
                with T.iket.range("wait"):
                    summed[ring.stage].wait(ring.phase)
                look_back(T.ptx.ld.shared.f32(aggs.at(ring.stage)), t_in_row == 0, tile,
                          tile - t_in_row)
            else:
                # AGG 0: the tile summed here, as soon as it lands, then its look-back
                look_back(*tile_sum(k))
            ring.advance()

    def aggregate_warp():
        """AGG 1, warp nw + 1: every tile's A out the moment it lands, never waiting for a
        look-back (the look-back warp takes the sums through `summed`)."""
        with T.range(mine) as k:
            agg, _, _, _ = tile_sum(k)
            with T.if_(lane == 0):
                T.ptx.st.shared.f32(aggs.at(ring.stage), agg)
            summed[ring.stage].arrive()  # 32 arrivals: every lane's reads are released
            ring.advance()

    with T.if_(warp >= nw if AGG else warp == nw, uniform=True):
        if AGG:
            with T.if_(warp == nw, uniform=True):
                look_back_warp()
            with T.else_():
                aggregate_warp()
        else:
            look_back_warp()
    with T.else_():
        # the scanning warps (BLOCK threads): pass 1, the offsets, pass 2, the bulk store
        def in_row(col0, j):
            """The j-th float4 of this thread's run lies in the row."""
            return T.ptx.add.u32(col0, r0 + 4 * j if j else r0) < cols

        with T.range(mine) as k:
            _, row, _, col0 = span(k)
            # 1. thread 0: tile k + AHEAD into the stage of tile k - 1 - SLACK, once that
            # tile's bulk store has read it
            with T.if_((tid == 0) & (k + AHEAD < mine)):
                T.ptx.cp.async_.bulk.wait_group.read(SLACK)
                back = 1 + SLACK
                target = T.ptx.selp.u32(ring.stage - back, ring.stage + (STAGES - back),
                                        ring.stage >= back)
                load(k + AHEAD, target)
            # 2. pass 1: the run's sum, one ladder, lane 31 the warp's total
            with T.iket.range("wait"):
                full[ring.stage].wait(ring.phase)
            raddr = buf.at(ring.stage, r0)
            excl = run_sums(raddr, RUN4, lambda j: in_row(col0, j), lane, warp, wt)
            T.ptx.bar.sync(1, BLOCK)
            # 3. warp 0: the warp totals' scan; the tile's prefix from the look-back warp
            with T.if_(warp == 0, uniform=True):
                _, write_back = _scan_totals(wt, nw, lane)
                with T.iket.range("ready"):
                    ready[ring.stage].wait(ring.phase)
                write_back(T.ptx.ld.shared.f32(pre.at(ring.stage)))
            T.ptx.bar.sync(1, BLOCK)
            # 4. pass 2 from the final offset, then the bulk store
            with T.iket.range("scan"):
                rewrite_run(raddr, RUN4, T.reg(T.f32, init=T.ptx.add.f32(
                    T.ptx.ld.shared.f32(wt.at(warp)), excl)), lambda j: in_row(col0, j))
                T.ptx.fence.proxy.async_.shared__cta()  # generic writes -> the bulk store's reads
            T.ptx.bar.sync(1, BLOCK)
            with T.iket.range("store"):
                with T.if_(tid == 0):
                    bulk_store(out.at(row * cols + col0), buf.at(ring.stage, 0),
                               tile_bytes(col0))
                    T.ptx.cp.async_.bulk.commit_group()
            ring.advance()
        with T.if_(tid == 0):
            T.ptx.cp.async_.bulk.wait_group.read(0)  # no bulk store reads shared memory at exit


# -- cases -----------------------------------------------------------------------------------------

def constraints(rows, cols, BLOCK, RUN4, STAGES, SLACK, LOOK, CTAS, POL, AGG, COAL):
    """The shapes and constants `cumsum_ws` accepts (checked when the suite is declared):
    `cumsum_persist`'s ring with one or two more warps (`ring_why`), POL, AGG, COAL, the row
    shapes."""
    why = ring_why(BLOCK, RUN4, STAGES, SLACK, LOOK, CTAS, extra=32 + 32 * (AGG == 1))
    if POL not in (0, 1):
        why.append(f"POL={POL} must be 0 (no policy) or 1 (evict-last loads)")
    if AGG not in (0, 1):
        why.append(f"AGG={AGG} must be 0 (the look-back warp sums each tile) or 1 (a warp of "
                   f"its own sums each tile and publishes its aggregate)")
    if COAL not in (0, 1):
        why.append(f"COAL={COAL} must be 0 (lane l reads flags l LOOK .. l LOOK + LOOK - 1) or "
                   f"1 (each load reads 32 consecutive flags)")
    return why + shape_why(rows, cols, 0)   # `cumsum_smem`'s row shapes (0: no register cap)


def make_case(name, rows, cols, BLOCK=256, RUN4=13, STAGES=4, SLACK=1, LOOK=4, CTAS=132, POL=0,
              AGG=0, COAL=0, small=True):
    """A case; large ones are the H200's (tag h200), never simulated."""
    return T.case(name, small=small, tags=() if small else ("h200",), rows=rows, cols=cols,
                  BLOCK=BLOCK, RUN4=RUN4, STAGES=STAGES, SLACK=SLACK, LOOK=LOOK, CTAS=CTAS,
                  POL=POL, AGG=AGG, COAL=COAL)


SUITE = T.suite(
    cumsum_ws, inputs=inputs, reference=reference, outputs=["out"],
    cases=[
        # `cumsum_persist`'s small rings (wraps, SLACK 0 and 1, 2-4 stages, runs cut by a row's
        # end, 3 rows on 3 CTAs, 5 scanning warps + the look-back warp)
        *[make_case(name, **kw) for name, kw in RING_SMALL.items()],
        # r2_c25004_b160 with evict-last loads (POL 1)
        make_case("r2_c25004_b160_pol", rows=2, cols=25004, BLOCK=160, RUN4=5, STAGES=4,
                  LOOK=4, CTAS=3, POL=1),
        # the H200's (docs/PERFORMANCE.md "Session 13, branch cumsum10"): 4 stages of 52 KB
        # (13312-element tiles, two loading ahead; `cumsum_persist`'s best ring, _s4_lag), also
        # with evict-last loads (tma_copy `_pol3`: -1.6%, softmax_tma `_pol`: -3.4%, session
        # 13); 3 of 68 KB (one ahead); 5 of 40 KB (three ahead); 64 and 256 flags a round
        make_case("r1_c64M", rows=1, cols=1 << 26, small=False),
        make_case("r1_c64M_pol", rows=1, cols=1 << 26, POL=1, small=False),
        make_case("r1_c64M_s3", rows=1, cols=1 << 26, RUN4=17, STAGES=3, small=False),
        make_case("r1_c64M_s5", rows=1, cols=1 << 26, RUN4=10, STAGES=5, small=False),
        make_case("r1_c64M_l2", rows=1, cols=1 << 26, LOOK=2, small=False),
        make_case("r1_c64M_l8", rows=1, cols=1 << 26, LOOK=8, small=False),
        make_case("r8_c4M", rows=8, cols=1 << 22, small=False),
        make_case("r8_c4M_pol", rows=8, cols=1 << 22, POL=1, small=False),
        make_case("r8_c4M_s5", rows=8, cols=1 << 22, RUN4=10, STAGES=5, small=False),
        # AGG 1 (session 14, branch cumsum11): the small rings again with a warp of its own
        # publishing each tile's A the moment it lands (the look-back warp takes the sums
        # through `summed`), and evict-last loads with it
        *[make_case(name + "_a", AGG=1, **kw) for name, kw in RING_SMALL.items()],
        make_case("r2_c25004_b160_pol_a", rows=2, cols=25004, BLOCK=160, RUN4=5, STAGES=4,
                  LOOK=4, CTAS=3, POL=1, AGG=1),
        # the H200's (docs/PERFORMANCE.md "Session 14, branch cumsum11"): the session-13 rings
        # with AGG 1; 4 x 52 KB is the default's, 5 x 40 KB three tiles ahead (more slack on
        # the cross-CTA link), 3 x 68 KB one ahead (the least), LOOK 2 (session 13's fastest)
        make_case("r1_c64M_a", rows=1, cols=1 << 26, AGG=1, small=False),
        make_case("r1_c64M_a_pol", rows=1, cols=1 << 26, POL=1, AGG=1, small=False),
        make_case("r1_c64M_a_s5", rows=1, cols=1 << 26, RUN4=10, STAGES=5, AGG=1, small=False),
        make_case("r1_c64M_a_s3", rows=1, cols=1 << 26, RUN4=17, STAGES=3, AGG=1, small=False),
        make_case("r1_c64M_a_l2", rows=1, cols=1 << 26, LOOK=2, AGG=1, small=False),
        make_case("r8_c4M_a", rows=8, cols=1 << 22, AGG=1, small=False),
        make_case("r8_c4M_a_pol", rows=8, cols=1 << 22, POL=1, AGG=1, small=False),
        make_case("r8_c4M_a_s5", rows=8, cols=1 << 22, RUN4=10, STAGES=5, AGG=1, small=False),
        # COAL 1 (session 15, branch cumsum12): each look-back load reads 32 consecutive flags
        # (a quarter of the L2 sector requests a round at LOOK 4). Small: 130 tiles of 256 on
        # 40 CTAs, 64 flags a round (nearest P up to 40 back: P's in j = 1, windows without
        # one), and the 5-warp ring at 128 a round
        make_case("r1_c33260_g40_a_c", rows=1, cols=33260, BLOCK=32, RUN4=2, STAGES=3, SLACK=0,
                  LOOK=2, CTAS=40, AGG=1, COAL=1),
        make_case("r2_c25004_b160_a_c", rows=2, cols=25004, BLOCK=160, RUN4=5, STAGES=4,
                  LOOK=4, CTAS=3, AGG=1, COAL=1),
        # the H200's (docs/PERFORMANCE.md "Session 15, branch cumsum12"): `_a` and `_a_l2`
        # with coalesced rounds, 256 a round (one round reaches the CTA's own previous P)
        make_case("r1_c64M_a_c", rows=1, cols=1 << 26, AGG=1, COAL=1, small=False),
        make_case("r1_c64M_a_l2_c", rows=1, cols=1 << 26, LOOK=2, AGG=1, COAL=1, small=False),
        make_case("r1_c64M_a_l8_c", rows=1, cols=1 << 26, LOOK=8, AGG=1, COAL=1, small=False),
        make_case("r8_c4M_a_c", rows=8, cols=1 << 22, AGG=1, COAL=1, small=False),
    ],
    tolerance=T.tolerance(rtol=0, atol=0),  # dyadic inputs: exact in any order
    constraints=constraints,
    flops=lambda rows, cols: rows * cols, bytes=lambda rows, cols: 8 * rows * cols,
    baselines=[{"name": "torch.cumsum", "args": {"x": "x"}},
               {"name": "torch.compile.cumsum", "args": {"x": "x"}}],
)
