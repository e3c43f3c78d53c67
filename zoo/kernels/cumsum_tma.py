"""Inclusive prefix sum over long rows (f32), single pass: `cumsum_smem`'s tile (registers plus a
bulk-copied shared part, block order, decoupled look-back) with the shared part scanned as one
contiguous run per thread and written back with one bulk copy (shared -> global, through the TMA
engine, whence the name), and the tile's aggregate published before the scan.

Why (issue 14; docs/TUNING.md "cumsum (session 9, branch cum6)"): `cumsum_smem` reached 80% of
the copy bandwidth (158 us at 64M f32). Its three H200 cases fit NS / (NS + Z) with a dead time
per tile of Z ~ 3.7 + 0.09 x (shared chunks) us (`_s0`: 3.7, `_s8`: 4.4, default: 4.9 us):
every shared chunk costs one more warp ladder on the tile's path, and its SASS shows why: under
`.maxnreg 64` ptxas runs the 13 shared chunks' ladders one after the other (5 dependent
``SHFL.UP`` + ``FADD`` each, ~180 cycles), ~1.1 us per tile in which the tile holds 76 KB of the
SM and moves none. Here:

1. the tile is `cumsum_smem`'s: BLOCK * CHUNKS * 4 elements in registers (coalesced 16-byte
   loads, chunk layout: a warp's 512 contiguous bytes per chunk) and then BLOCK * SCH * 4 in
   shared memory (one ``cp.async.bulk`` on an mbarrier), tiles in block order, the ticket taken
   for the epoch only;
2. the shared part is split into one run of RUN = SCH * 4 contiguous elements per thread (thread
   t: elements t RUN ... t RUN + RUN - 1 of the part; with SCH odd a quarter-warp's 16-byte
   reads fall in 8 distinct bank groups: conflict-free). A thread sums its run (SCH
   ``ld.shared.v4``), ONE warp ladder scans the 32 run sums, and the thread rewrites its run as
   its inclusive scan from the lane's offset within the warp. The shared part is then nw
   segments (one per warp, in warp order) after the register chunks: nw * (CHUNKS + 1) warp
   totals in tile order, scanned by warp 0 as in `cumsum`. 19 ladders a tile become 7 (6
   register chunks interleaved, 1 run);
3. ``EARLY=1``: before any ladder, every thread sums its elements, a butterfly per warp, one
   barrier, and warp 0 adds the nw warp sums, publishes the tile's aggregate A (a row's first
   tile: its prefix P) and issues the first look-back round's flag loads (`_read_flags`); the
   ladders run while those loads travel, and after the totals' barrier warp 0 scans the totals,
   finishes the look-back from that round (`_look_back(got=...)`) and publishes P. The
   successors see A ~0.4 us earlier and one round trip overlaps the scan. ``EARLY=0``:
   `cumsum`'s order (`_tile_prefix`: the totals' scan, publish A, look back, publish P);
4. the store: the register chunks as before (``st.global.v4`` from registers); the shared
   part, ``BST=1``, gets its segment's offset added in place (``ld/st.shared.v4``), every thread
   fences its writes for the async proxy (``fence.proxy.async.shared::cta``), one barrier, and
   thread 0 writes it with one ``cp.async.bulk.global.shared::cta`` (the row's last tile: the
   bytes it loaded), then waits for the copy to have READ shared memory
   (``cp.async.bulk.wait_group.read 0``) before the CTA exits: 13 ``ld.shared`` + 13
   ``st.global`` per thread become one instruction and leave the LSU to the other CTAs.
   ``BST=0`` keeps `cumsum_smem`'s store (every thread reads the part in the coalesced chunk
   layout, adds the offset of the warp segment the float4 lies in, ``st.global.v4``): the
   control that separates the bulk store from the run scan.

Each phase is an iket range (``sum``, ``bar_sum``, ``publish``, ``scan``, ``bar_totals``,
``look_back``, ``bar_prefix``, ``store``; nothing in a normal build): ``tirxh profile --iket``
splits the tile's lifetime (docs/TUNING.md says what each outcome would mean).

Predictions (docs/TUNING.md, written before any run): default 83-85% of the copy bandwidth
(149-153 us at 64M floats); 90% is not predicted (the fit's intercept, 3.7 us, is not touched).

Flags, epochs, the block-order assumption and numerics are `cumsum_smem`'s and `cumsum`'s
(their module docstrings). A thread's run adds its elements one after the other (RUN - 1 adds
on the path of its last element, against 3 for a 4-element chunk): on general f32 data the
error bound grows by that (tests/zoo/test_cumsum_tma.py checks it); on the suite's dyadic
inputs every order is exact.

Tags: decoupled-look-back, vectorized, warp-shuffle, single-pass, scan, bulk-copy, mbarrier,
bulk-async-group, iket
Work: 1 FLOP and 8 bytes per element.
"""

import tirxh.lang as T
from cumsum import (MAX_TOTALS, ST_A, ST_P, _look_back, _read_flags, _scan_chunks, _scan_totals,
                    _tile_prefix, _warp_scan, _warp_sum, reference, split_ticket)
# the tile's size and grid, and the inputs (flags per tile), are `cumsum_smem`'s: the same
# CHUNKS register chunks and SCH float4s per thread in shared memory
from cumsum_smem import (SMEM_PER_CTA, _grid, _maxnreg, inputs, shape_why, stash_bytes,
                         tile_elems)

TAGS = ("decoupled-look-back", "vectorized", "warp-shuffle", "single-pass", "scan", "bulk-copy",
        "mbarrier", "bulk-async-group", "iket")

MAX_CHUNKS = 16  # register chunks of 4 floats per thread


def rewrite_run(raddr, n4, acc, in_row):
    """A thread's run of n4 float4s in shared memory from ``raddr`` rewritten in place as its
    inclusive scan from the register ``acc`` (the run's exclusive offset; it ends as the run's
    inclusive total): per float4 one ``ld.shared.v4``, 4 dependent adds, one ``st.shared.v4``,
    each predicated on ``in_row(j)`` (the row's end). Also `cumsum_persist`'s pass 2."""
    for j in range(n4):
        v = [T.reg(T.f32, init=0.0) for _ in range(4)]
        p = in_row(j)
        T.ptx.ld.shared.v4.f32(v, raddr + 16 * j, pred=p)
        T.ptx.add.f32(v[0], v[0], acc)
        for k in range(1, 4):
            T.ptx.add.f32(v[k], v[k], v[k - 1])
        T.ptx.st.shared.v4.f32(raddr + 16 * j, v, pred=p)
        acc.set(v[3])


@T.kernel(grid=_grid, block=lambda BLOCK: BLOCK, maxnreg=_maxnreg)
def cumsum_tma(x: T.gptr[T.f32], out: T.gptr[T.f32], flags: T.gptr[T.u64],
                counter: T.gptr[T.u64], rows: T.u32, cols: T.u32, BLOCK: T.const = 256,
                CHUNKS: T.const = 6, SCH: T.const = 13, LOOK: T.const = 2, BST: T.const = 1,
                EARLY: T.const = 1, MAXREG: T.const = 64):
    reg_n = BLOCK * CHUNKS * 4          # the tile's first elements: registers, chunk layout
    run = SCH * 4                       # a thread's contiguous run of the shared part
    sm_n = BLOCK * run                  # the rest: shared memory, one bulk copy in and out
    tile_n = tile_elems(BLOCK, CHUNKS, SCH)  # reg_n + sm_n
    nw = BLOCK // 32
    seg = 32 * run                      # a warp's segment of the shared part
    nt = nw * (CHUNKS + 1)              # warp totals, tile order: chunk-major, then segments
    wt = T.shared(T.f32, (nt,), name="wtot")
    bcast = T.shared(T.u32, (2,), name="ticket")  # (unused), epoch
    stash = T.shared(T.f32, (sm_n,), name="stash", align=128, dynamic=True)
    full = T.mbarrier(1, name="full", dynamic=True)
    bulk_load = T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"]
    bulk_store = T.ptx["cp.async.bulk.global.shared::cta.bulk_group"]
    tid = T.tid.x
    lane = T.laneid()
    warp = tid >> 5
    per_row = T.ptx.div.u32(T.ptx.add.u32(cols, tile_n - 1), tile_n)
    ntiles = rows * per_row

    # 1. the tile is the block index (`cumsum_smem`'s ORDER=0)
    tile = T.ctaid.x
    row = tile / per_row
    t_in_row = tile - row * per_row
    col0 = t_in_row * tile_n
    base = row * cols + col0
    s0 = T.ptx.add.u32(col0, reg_n)     # the shared part's first column

    def part_bytes():
        """The shared part's bytes in the row (the row's last tile: fewer, possibly 0)."""
        return T.ptx.selp.u32(T.ptx.min.u32(T.ptx.sub.u32(cols, s0), sm_n) << 2, 0, s0 < cols)

    # 2. the shared part (thread 0, one bulk copy), then the register chunks, then the ticket
    with T.if_(tid == 0):
        full.init(1)
        T.ptx.fence.mbarrier_init.release.cluster()
        nbytes = part_bytes()
        full.arrive_expect_tx(nbytes)
        with T.if_(nbytes != 0):
            bulk_load(stash.at(0), x.at(base + reg_n), nbytes, full)
    e0 = tid * 4
    step = BLOCK * 4

    def in_row(c):
        """Register chunk c of this thread lies in the row."""
        return T.ptx.add.u32(col0, e0 + c * step if c else e0) < cols

    chunks = []
    xaddr = x.at(base + e0)
    for c in range(CHUNKS):
        v = [T.reg(T.f32, init=0.0) for _ in range(4)]
        T.ptx.ld.global_.v4.f32(v, xaddr + 4 * c * step, pred=in_row(c))
        chunks.append(v)
    tk = T.reg(T.u64, init=0)  # the epoch only: taken now, read after the scan
    with T.if_(tid == 0):
        T.ptx.mov.u64(tk, T.ptx.atom.relaxed.gpu.global_.add.u64(counter.at(0), 1))
    T.ptx.bar.sync(0)  # the mbarrier's initialisation, before anyone waits on it

    r0 = tid * run
    raddr = stash.at(r0)

    def run_in_row(j):
        """The j-th float4 of this thread's run lies in the row."""
        return T.ptx.add.u32(s0, r0 + 4 * j if j else r0) < cols

    def run_total():
        """Pass 1 over this thread's run (once the copy has landed): the sum of its elements."""
        full.wait(0)
        total = T.reg(T.f32, init=0.0)
        for j in range(SCH):
            v = [T.reg(T.f32, init=0.0) for _ in range(4)]
            T.ptx.ld.shared.v4.f32(v, raddr + 16 * j, pred=run_in_row(j))
            T.ptx.add.f32(total, total, T.ptx.add.f32(T.ptx.add.f32(v[0], v[1]),
                                                      T.ptx.add.f32(v[2], v[3])))
        return total

    def scan_run(total):
        """One warp ladder over the run sums (lane 31: the segment's total to `wt`), then pass
        2: the run rewritten as its inclusive scan from the lane's offset in the segment."""
        incl = _warp_scan(T.reg(T.f32, init=total), lane)
        with T.if_(lane == 31):
            T.ptx.st.shared.f32(wt.at(CHUNKS * nw + warp), incl)
        rewrite_run(raddr, SCH, T.ptx.sub.f32(incl, total), run_in_row)

    first = t_in_row == 0
    if EARLY:
        # 3. the tile's aggregate first: thread sums, a butterfly per warp, warp 0 adds the nw
        # warp sums, publishes A (a row's first tile: P) and reads the first look-back round;
        # the ladders below run while those flags travel
        asum = T.shared(T.f32, (nw,), name="asum")
        with T.iket.range("sum"):
            rsum = run_total()
            tsum = rsum
            for v in chunks:
                tsum = tsum + T.ptx.add.f32(T.ptx.add.f32(v[0], v[1]),
                                            T.ptx.add.f32(v[2], v[3]))
            wsum = _warp_sum(tsum)
            with T.if_(lane == 0):
                T.ptx.st.shared.f32(asum.at(warp), wsum)
            with T.if_(tid == 0):
                split_ticket(tk, ntiles, bcast)
        with T.iket.range("bar_sum"):
            T.ptx.bar.sync(0)
        with T.if_(warp == 0, uniform=True):
            with T.iket.range("publish"):
                mine = T.reg(T.f32, init=0.0)
                T.ptx.ld.shared.f32(mine, asum.at(lane), pred=lane < nw)
                agg = _warp_sum(mine)
                epoch = T.ptx.ld.shared.u32(bcast.at(1))
                status = T.ptx.selp.u32(ST_P, ST_A, first)
                with T.if_(lane == 0):
                    T.ptx.st.relaxed.gpu.global_.b64(flags.at(tile), T.ptx.mov.b64(
                        [agg, T.ptx.or_.b32(T.ptx.shl.b32(epoch, 2), status)]))
                ahead = _read_flags(flags, tile, tile - t_in_row, epoch, lane, LOOK)
        with T.iket.range("scan"):
            _scan_chunks(chunks, lane, lambda c: wt.at(c * nw + warp))
            scan_run(rsum)
    else:
        # 3. scan: the register chunks (their ladders interleave), then this thread's run
        with T.iket.range("scan"):
            _scan_chunks(chunks, lane, lambda c: wt.at(c * nw + warp))
            scan_run(run_total())
            with T.if_(tid == 0):
                split_ticket(tk, ntiles, bcast)
    with T.iket.range("bar_totals"):
        T.ptx.bar.sync(0)

    # 4. warp 0: the totals' scan, (publish,) look back, each total's offset to `wt`
    with T.if_(warp == 0, uniform=True):
        with T.iket.range("look_back"):
            if EARLY:
                _, write_back = _scan_totals(wt, nt, lane)
                prefix = T.reg(T.f32, init=0.0)
                with T.if_(~first, uniform=True):
                    prefix.set(_look_back(flags, tile, tile - t_in_row, agg, epoch, lane, LOOK,
                                          got=ahead))
                write_back(prefix)
            else:
                epoch = T.ptx.ld.shared.u32(bcast.at(1))
                _tile_prefix(flags, wt, nt, lane, tile, t_in_row, epoch, LOOK)
    with T.iket.range("bar_prefix"):
        T.ptx.bar.sync(0)

    # 5. the register chunks: add the offsets, store from the registers
    with T.iket.range("store"):
        oaddr = out.at(base + e0)
        for c, v in enumerate(chunks):
            off = T.ptx.ld.shared.f32(wt.at(c * nw + warp))
            T.ptx.st.global_.v4.f32(oaddr + 4 * c * step, [T.ptx.add.f32(vi, off) for vi in v],
                                    pred=in_row(c))
        if BST:
            # the run's segment offset added in place, then one bulk copy of the whole part
            off = T.ptx.ld.shared.f32(wt.at(CHUNKS * nw + warp))
            for j in range(SCH):
                v = [T.reg(T.f32, init=0.0) for _ in range(4)]
                p = run_in_row(j)
                T.ptx.ld.shared.v4.f32(v, raddr + 16 * j, pred=p)
                T.ptx.st.shared.v4.f32(raddr + 16 * j, [T.ptx.add.f32(vi, off) for vi in v],
                                       pred=p)
            T.ptx.fence.proxy.async_.shared__cta()  # generic writes -> the bulk copy's reads
            T.ptx.bar.sync(0)
            with T.if_(tid == 0):
                nbytes = part_bytes()
                with T.if_(nbytes != 0):
                    bulk_store(out.at(base + reg_n), stash.at(0), nbytes)
                    T.ptx.cp.async_.bulk.commit_group()
                    T.ptx.cp.async_.bulk.wait_group.read(0)  # shared memory read before exit
        else:
            # `cumsum_smem`'s store: coalesced float4s, each with its warp segment's offset
            for s in range(SCH):
                e = e0 + s * step
                off = T.ptx.ld.shared.f32(wt.at(CHUNKS * nw + e / seg))
                v = [T.reg(T.f32, init=0.0) for _ in range(4)]
                p = T.ptx.add.u32(s0, e) < cols
                T.ptx.ld.shared.v4.f32(v, stash.at(e), pred=p)
                T.ptx.st.global_.v4.f32(oaddr + 4 * (reg_n + s * step),
                                        [T.ptx.add.f32(vi, off) for vi in v], pred=p)


# -- cases -----------------------------------------------------------------------------------------

def constraints(rows, cols, BLOCK, CHUNKS, SCH, LOOK, BST, EARLY, MAXREG):
    """The shapes and constants `cumsum_tma` accepts (checked when the suite is declared)."""
    why = []
    if BLOCK % 32 or not 32 <= BLOCK <= 1024:
        why.append(f"BLOCK={BLOCK} must be a multiple of 32 in [32, 1024]")
    elif (BLOCK // 32) * (CHUNKS + 1) > MAX_TOTALS:
        why.append(f"BLOCK/32 * (CHUNKS + 1) = {(BLOCK // 32) * (CHUNKS + 1)} warp totals "
                   f"must fit one warp's scan (at most {MAX_TOTALS})")
    if not 1 <= CHUNKS <= MAX_CHUNKS or SCH < 1:
        why.append(f"CHUNKS={CHUNKS} must be in [1, {MAX_CHUNKS}] (4 floats each in "
                   f"registers) and SCH={SCH} at least 1 (the shared part is this kernel's)")
    elif stash_bytes(BLOCK, SCH) + 1024 > SMEM_PER_CTA:
        why.append(f"SCH={SCH}: BLOCK * SCH * 16 = {stash_bytes(BLOCK, SCH)} bytes of shared "
                   f"memory (+1 KB) exceed a CTA's {SMEM_PER_CTA}")
    if LOOK not in (1, 2, 4, 8) or BST not in (0, 1):
        why.append(f"LOOK={LOOK} must be 1, 2, 4 or 8 (flags per lane and look-back round) "
                   f"and BST={BST} 0 (st.global) or 1 (bulk store)")
    if EARLY not in (0, 1):
        why.append(f"EARLY={EARLY} must be 0 (publish after the scan) or 1 (the aggregate "
                   f"first, the scan during the look-back)")
    return why + shape_why(rows, cols, MAXREG)


def make_case(name, rows, cols, BLOCK=256, CHUNKS=6, SCH=13, LOOK=2, BST=1, EARLY=1,
              MAXREG=64, small=True, main=False):
    """A case; large ones are the H200's (tag h200), never simulated; `main`: the size's
    measured fastest, the one a whole-zoo run times (``-k main``)."""
    tags = (() if small else ("h200",)) + (("main",) if main else ())
    return T.case(name, small=small, tags=tags, rows=rows, cols=cols,
                  BLOCK=BLOCK, CHUNKS=CHUNKS, SCH=SCH, LOOK=LOOK, BST=BST, EARLY=EARLY,
                  MAXREG=MAXREG)


SUITE = T.suite(
    cumsum_tma, inputs=inputs, reference=reference, outputs=["out"],
    cases=[
        # 5 tiles of 32 x (2 + 3) x 4 = 640 on one row; the last (524 elements) ends inside
        # its shared part, in the middle of thread 22's 12-element run
        make_case("r1_c3084", rows=1, cols=3084, BLOCK=32, CHUNKS=2, SCH=3, LOOK=1),
        make_case("r1_c3084_st0", rows=1, cols=3084, BLOCK=32, CHUNKS=2, SCH=3, LOOK=1, BST=0),
        # 3 rows of 3 tiles of 1024 (512 in registers, runs of 8: SCH even); the rows' last
        # tiles (556 elements) have 44 in the shared part: thread 5's run is cut after 4
        make_case("r3_c2604", rows=3, cols=2604, BLOCK=64, CHUNKS=2, SCH=2, LOOK=1),
        # 47 tiles of 256 (128 in shared memory, runs of 4): look-backs cross 32-flag windows;
        # the last tile (224) has no shared element past thread 23
        make_case("r1_c12000_t256", rows=1, cols=12000, BLOCK=32, CHUNKS=1, SCH=1, LOOK=1),
        make_case("r1_c12000_t256_e0", rows=1, cols=12000, BLOCK=32, CHUNKS=1, SCH=1, LOOK=1,
                  EARLY=0),
        # 160 threads (5 warps: 20 totals), runs of 20; the rows' last tiles (3884 elements)
        # cut thread 98's run after 4; 128 flags per round; both stores
        make_case("r2_c9004_b160", rows=2, cols=9004, BLOCK=160, CHUNKS=3, SCH=5, LOOK=4),
        make_case("r2_c9004_b160_st0", rows=2, cols=9004, BLOCK=160, CHUNKS=3, SCH=5, LOOK=4,
                  BST=0),
        make_case("r2_c9004_b160_e0", rows=2, cols=9004, BLOCK=160, CHUNKS=3, SCH=5, LOOK=4,
                  EARLY=0),
        # the H200's (docs/TUNING.md "cumsum (session 9, branch cum6)"): `cumsum_smem`'s tile
        # (19K elements, 24 KB registers + 52 KB shared, 4 CTAs per SM), the shared part as
        # runs and one bulk store; `_st0` the same runs with `cumsum_smem`'s st.global store
        make_case("r1_c64M", rows=1, cols=1 << 26, small=False),
        make_case("r1_c64M_st0", rows=1, cols=1 << 26, BST=0, small=False),
        make_case("r1_c64M_e0", rows=1, cols=1 << 26, EARLY=0, small=False),
        # 8 register chunks (the early aggregate's order leaves ptxas the registers; EARLY=0
        # spills 8 bytes): 21K-element tiles, 4 x 84 KB = 336 KB per SM
        make_case("r1_c64M_k8", rows=1, cols=1 << 26, CHUNKS=8, small=False, main=True),
        make_case("r8_c4M", rows=8, cols=1 << 22, small=False, main=True),
        # scan7 (docs/TUNING.md "topk and cumsum (session 10, branch scan7)"): `_k8` at 8 rows
        # (never timed there), and 128 flags a look-back round instead of 64 (LOOK 8 spills:
        # 8-16 bytes at 64 registers)
        make_case("r8_c4M_k8", rows=8, cols=1 << 22, CHUNKS=8, small=False),
        make_case("r1_c64M_k8_l4", rows=1, cols=1 << 26, CHUNKS=8, LOOK=4, small=False),
        make_case("r8_c4M_k8_l4", rows=8, cols=1 << 22, CHUNKS=8, LOOK=4, small=False),
    ],
    tolerance=T.tolerance(rtol=0, atol=0),  # dyadic inputs: exact in any order
    constraints=constraints,
    flops=lambda rows, cols: rows * cols, bytes=lambda rows, cols: 8 * rows * cols,
    baselines=[{"name": "torch.cumsum", "args": {"x": "x"}},
               {"name": "torch.compile.cumsum", "args": {"x": "x"}}],
)
