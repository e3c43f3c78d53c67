"""Inclusive prefix sum over long rows (f32), single pass, with each tile split between registers
and shared memory: `cumsum`'s decoupled look-back with more bytes in flight per SM and nothing
on the path between a CTA's start and its loads.

Why (issue 14; docs/TUNING.md "cumsum_smem (session 5)"): `cumsum` measured 68.9% of the copy
bandwidth with 16K-element tiles, and the tile sizes tried (4K to 16K elements) fit one model: a
CTA holds its tile from its loads to its stores, and for Z ~ 3.5-4.0 us of that lifetime (start,
ticket, scan, look-back, barriers) it moves no bytes. With B bytes of tiles resident per SM, an
SM moves 2B bytes per lifetime, so the bandwidth reached is about NS / (NS + Z), NS = 2B /
(32.2 KB/us, an SM's share of 4.25 TB/s): the register-only kernels hold B = 96 KB (4K tiles, 6
CTAs: 56-61% measured) or 128 KB (8K tiles x 4 CTAs, 16K x 2: 67-70%); 90% needs NS >= 9Z.
Registers cap B at 128 KB (the data takes half the register file). This kernel raises B and
lowers Z:

1. the tile is TILE = BLOCK * (CHUNKS + SCH) * 4 elements: the first BLOCK * CHUNKS * 4 are
   loaded into registers (16-byte ``ld.global.v4``, as `cumsum`), the rest by thread 0 with one
   1-D bulk copy (``cp.async.bulk``, completing on an mbarrier) into shared memory. Defaults
   (BLOCK 256, CHUNKS 6, SCH 13): 19456-element tiles, 24 KB in registers and 52 KB in shared
   memory per CTA, 4 CTAs per SM (64 registers under ``.maxnreg 64``, no spills; 4 x (52.7 +
   1 reserved) KB of the SM's 228 KB): B = 304 KB, NS = 19.3 us;
2. the tile index is the block index (``%ctaid.x``), so both loads are issued at the CTA's first
   instructions; the ticket (``atom.global.add.u64``) is still taken, for the launch's epoch
   only, and read after the scan, so its latency overlaps the loads (`cumsum` waits for it
   before loading). Waiting on a lower block index assumes CTAs are dispatched in increasing
   index order, as NVIDIA's GPUs do and as CUB's single-pass scan (torch.cumsum's) assumes;
   `ORDER=1` keeps `cumsum`'s ticket order (safe under any dispatch order) for comparison;
3. per CTA: bulk copy and register loads issued; one barrier (the mbarrier's initialisation);
   the register chunks scanned (`cumsum`'s in-thread adds and warp ladders), then the shared
   chunks once the mbarrier completes, SG at a time and in place (`_scan_stashed`: one live
   register per chunk across the ladders, so the register chunks and SG ladders fit 64
   registers); warp 0 scans the warp totals, publishes the tile's aggregate, looks back and
   publishes the inclusive prefix (`cumsum._tile_prefix`); every thread adds its offsets to its
   register chunks and to its shared chunks (read back) and stores them with ``st.global.v4``.

Predicted (written before any measurement, docs/TUNING.md): with Z down to 1.5-2.5 us (no
ticket before the loads; the shared chunks' scan adds ~0.3 us), NS / (NS + Z) = 88-93%, less
~2% for the grid's drain: 86-91%, 139-147 us at 64M floats; with Z unchanged, 81-84%.

Flags, epochs and numerics are `cumsum`'s (its module docstring): 64-bit flag words (value, status,
epoch), self-resetting across launches; the check is bit-exact on dyadic inputs.

Tags: decoupled-look-back, vectorized, warp-shuffle, single-pass, scan, bulk-copy, mbarrier
Work: 1 FLOP and 8 bytes per element.
"""


import tirxh.lang as T
from cumsum import (MAX_PER_THREAD, MAX_TOTALS, _scan_chunks, _tile_prefix, _warp_scan,
                    reference, scan_inputs, split_ticket)

TAGS = ("decoupled-look-back", "vectorized", "warp-shuffle", "single-pass", "scan", "bulk-copy",
        "mbarrier")

SMEM_PER_CTA = 227 * 1024  # the H200's shared memory per CTA (opt-in maximum)


def tile_elems(BLOCK, CHUNKS, SCH) -> int:
    return BLOCK * (CHUNKS + SCH) * 4


def stash_bytes(BLOCK, SCH) -> int:
    """Shared memory for the tile's bulk-copied part (the totals and the mbarrier add < 1.1 KB)."""
    return BLOCK * SCH * 16


def _grid(rows, cols, BLOCK=256, CHUNKS=6, SCH=13):
    return rows * T.cdiv(cols, tile_elems(BLOCK, CHUNKS, SCH))


def _scan_stashed(addrs, preds, lane, totals):
    """Chunks of 4 floats per thread in shared memory (``addrs``: this thread's, one per chunk)
    become their inclusive scan within the warp's chunk, in place; lane 31 stores each chunk's
    warp total at ``totals``. Two reads per chunk, so that only one register per chunk stays
    live across the warp ladders (a chunk's 4 values would need 4, over the register cap
    beside the CHUNKS register chunks): the thread sums, the ladders of every chunk together
    (independent: ptxas interleaves them), then each chunk read again, scanned in the thread
    from its exclusive offset and written back."""
    sums = []
    for a, p in zip(addrs, preds):
        v = [T.reg(T.f32, init=0.0) for _ in range(4)]
        T.ptx.ld.shared.v4.f32(v, a, pred=p)
        sums.append(T.ptx.add.f32(T.ptx.add.f32(v[0], v[1]), T.ptx.add.f32(v[2], v[3])))
    incl = [_warp_scan(T.reg(T.f32, init=t), lane) for t in sums]
    for a, p, t, i, at in zip(addrs, preds, sums, incl, totals):
        with T.if_(lane == 31):
            T.ptx.st.shared.f32(at, i)
        v = [T.reg(T.f32, init=0.0) for _ in range(4)]
        T.ptx.ld.shared.v4.f32(v, a, pred=p)
        T.ptx.add.f32(v[0], v[0], T.ptx.sub.f32(i, t))
        for k in range(1, 4):
            T.ptx.add.f32(v[k], v[k], v[k - 1])
        T.ptx.st.shared.v4.f32(a, v, pred=p)


def _maxnreg(MAXREG):
    return MAXREG or None  # 0: no cap (ptxas chooses)


@T.kernel(grid=_grid, block=lambda BLOCK: BLOCK, maxnreg=_maxnreg)
def cumsum_smem(x: T.gptr[T.f32], out: T.gptr[T.f32], flags: T.gptr[T.u64],
                counter: T.gptr[T.u64], rows: T.u32, cols: T.u32, BLOCK: T.const = 256,
                CHUNKS: T.const = 6, SCH: T.const = 13, LOOK: T.const = 2,
                ORDER: T.const = 0, SG: T.const = 4, MAXREG: T.const = 64):
    reg_n = BLOCK * CHUNKS * 4          # the tile's first elements: registers
    sm_n = BLOCK * SCH * 4              # the rest: shared memory, one bulk copy
    tile_n = reg_n + sm_n
    nw = BLOCK // 32
    nt = nw * (CHUNKS + SCH)            # warp-chunk totals, tile order (chunk-major)
    wt = T.shared(T.f32, (nt,), name="wtot")
    bcast = T.shared(T.u32, (2,), name="ticket")  # tile (ORDER=1), epoch
    if SCH:
        stash = T.shared(T.f32, (sm_n,), name="stash", align=128, dynamic=True)
        full = T.mbarrier(1, name="full", dynamic=True)
    bulk_load = T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"]
    tid = T.tid.x
    lane = T.laneid()
    warp = tid >> 5
    per_row = T.ptx.div.u32(T.ptx.add.u32(cols, tile_n - 1), tile_n)
    ntiles = rows * per_row

    def ticket():
        """Thread 0: the launch's next ticket (= epoch * tiles + tile)."""
        return T.ptx.atom.relaxed.gpu.global_.add.u64(counter.at(0), 1)

    # 1. the tile: the block index (ORDER=0), or the ticket as in `cumsum` (ORDER=1)
    if ORDER:
        with T.if_(tid == 0):
            split_ticket(ticket(), ntiles, bcast)
        T.ptx.bar.sync(0)
        tile = T.ptx.ld.shared.u32(bcast.at(0))
    else:
        tile = T.ctaid.x
    row = tile / per_row
    t_in_row = tile - row * per_row
    col0 = t_in_row * tile_n
    base = row * cols + col0

    # 2. the shared part first (one thread, one bulk copy: the row's last tile copies what it
    # has, possibly nothing), then the register part
    if SCH:
        with T.if_(tid == 0):
            full.init(1)
            T.ptx.fence.mbarrier_init.release.cluster()
            s0 = T.ptx.add.u32(col0, reg_n)
            have = s0 < cols
            nbytes = T.ptx.selp.u32(T.ptx.min.u32(T.ptx.sub.u32(cols, s0), sm_n) << 2, 0, have)
            full.arrive_expect_tx(nbytes)
            with T.if_(have):
                bulk_load(stash.at(0), x.at(base + reg_n), nbytes, full)
    e0 = tid * 4
    step = BLOCK * 4

    def in_row(c):
        """Chunk c (registers: c < CHUNKS, shared: the others) of this thread lies in the row."""
        return T.ptx.add.u32(col0, e0 + c * step if c else e0) < cols

    chunks = []
    xaddr = x.at(base + e0)
    for c in range(CHUNKS):
        v = [T.reg(T.f32, init=0.0) for _ in range(4)]
        T.ptx.ld.global_.v4.f32(v, xaddr + 4 * c * step, pred=in_row(c))
        chunks.append(v)
    if not ORDER:  # the epoch only: taken now, read after the scan (its latency overlaps
        tk = T.reg(T.u64, init=0)  # the loads and the scan)
        with T.if_(tid == 0):
            T.ptx.mov.u64(tk, ticket())
    if SCH:
        T.ptx.bar.sync(0)  # the mbarrier's initialisation, before anyone waits on it

    # 3. scan: the register chunks, then the shared ones in place, SG at a time
    _scan_chunks(chunks, lane, lambda c: wt.at(c * nw + warp))
    if SCH:
        full.wait(0)
        for g in range(0, SCH, SG):
            group = range(CHUNKS + g, CHUNKS + min(g + SG, SCH))
            _scan_stashed([stash.at(e0 + (c - CHUNKS) * step) for c in group],
                          [in_row(c) for c in group], lane,
                          [wt.at(c * nw + warp) for c in group])
    if not ORDER:
        with T.if_(tid == 0):
            split_ticket(tk, ntiles, bcast)
    T.ptx.bar.sync(0)

    # 4. warp 0: the totals' scan, publish, look back, each (chunk, warp) offset to `wt`
    with T.if_(warp == 0, uniform=True):
        epoch = T.ptx.ld.shared.u32(bcast.at(1))
        _tile_prefix(flags, wt, nt, lane, tile, t_in_row, epoch, LOOK)
    T.ptx.bar.sync(0)

    # 5. add the offsets, store (the shared chunks read back into registers first)
    oaddr = out.at(base + e0)
    for c, v in enumerate(chunks):
        off = T.ptx.ld.shared.f32(wt.at(c * nw + warp))
        T.ptx.st.global_.v4.f32(oaddr + 4 * c * step, [T.ptx.add.f32(vi, off) for vi in v],
                                pred=in_row(c))
    for s in range(SCH):
        c = CHUNKS + s
        off = T.ptx.ld.shared.f32(wt.at(c * nw + warp))
        v = [T.reg(T.f32, init=0.0) for _ in range(4)]
        T.ptx.ld.shared.v4.f32(v, stash.at(e0 + s * step), pred=in_row(c))
        T.ptx.st.global_.v4.f32(oaddr + 4 * c * step, [T.ptx.add.f32(vi, off) for vi in v],
                                pred=in_row(c))


# -- cases -----------------------------------------------------------------------------------------

def constraints(rows, cols, BLOCK, CHUNKS, SCH, LOOK, ORDER, SG, MAXREG):
    """The shapes and constants `cumsum_smem` accepts (checked when the suite is declared)."""
    why = []
    if BLOCK % 32 or not 32 <= BLOCK <= 1024:
        why.append(f"BLOCK={BLOCK} must be a multiple of 32 in [32, 1024]")
    elif (BLOCK // 32) * (CHUNKS + SCH) > MAX_TOTALS:
        why.append(f"BLOCK/32 * (CHUNKS + SCH) = {(BLOCK // 32) * (CHUNKS + SCH)} warp totals "
                   f"must fit one warp's scan (at most {MAX_TOTALS})")
    if not 1 <= CHUNKS <= MAX_PER_THREAD // 4 or SCH < 0:
        why.append(f"CHUNKS={CHUNKS} must be in [1, {MAX_PER_THREAD // 4}] (4 floats each in "
                   f"registers) and SCH={SCH} at least 0")
    elif stash_bytes(BLOCK, SCH) + 1024 > SMEM_PER_CTA:
        why.append(f"SCH={SCH}: BLOCK * SCH * 16 = {stash_bytes(BLOCK, SCH)} bytes of shared "
                   f"memory (+1 KB) exceed a CTA's {SMEM_PER_CTA}")
    if LOOK not in (1, 2, 4, 8) or ORDER not in (0, 1):
        why.append(f"LOOK={LOOK} must be 1, 2, 4 or 8 (flags per lane and look-back round) "
                   f"and ORDER={ORDER} 0 (block index) or 1 (ticket)")
    if SG < 1:
        why.append(f"SG={SG} (shared chunks scanned together) must be at least 1")
    return why + shape_why(rows, cols, MAXREG)


def shape_why(rows, cols, MAXREG):
    """The register cap and row shapes this kernel and `cumsum_tma` accept (16-byte accesses and
    bulk copies from every row's start, 32-bit element indices)."""
    why = []
    if MAXREG and not 32 <= MAXREG <= 255:
        why.append(f"MAXREG={MAXREG} must be 0 (no cap) or in 32..255 (.maxnreg)")
    if rows < 1 or cols < 1:
        why.append(f"rows={rows} and cols={cols} must be positive")
    elif cols % 4:
        why.append(f"cols={cols} must be a multiple of 4 (16-byte loads and bulk copies from "
                   f"every row's start)")
    if rows * cols >= 1 << 32:
        why.append(f"rows*cols={rows * cols} must be below 2^32 (32-bit element index)")
    return why


def make_case(name, rows, cols, BLOCK=256, CHUNKS=6, SCH=13, LOOK=2, ORDER=0, SG=4,
              MAXREG=64, small=True, main=False):
    """A case; large ones are the H200's (tag h200), never simulated; `main`: the size's
    measured fastest, the one a whole-zoo run times (``-k main``)."""
    tags = (() if small else ("h200",)) + (("main",) if main else ())
    return T.case(name, small=small, tags=tags, rows=rows, cols=cols,
                  BLOCK=BLOCK, CHUNKS=CHUNKS, SCH=SCH, LOOK=LOOK, ORDER=ORDER, SG=SG,
                  MAXREG=MAXREG)


def inputs(rng, rows, cols, BLOCK=256, CHUNKS=6, SCH=13):
    return scan_inputs(rng, rows, cols, _grid(rows, cols, BLOCK, CHUNKS, SCH))


SUITE = T.suite(
    cumsum_smem, inputs=inputs, reference=reference, outputs=["out"],
    cases=[
        # 5 tiles of 32 x (2 + 3) x 4 = 640 on one row; the last (520 elements) ends inside
        # its shared part, whose copy is short
        make_case("r1_c3080", rows=1, cols=3080, BLOCK=32, CHUNKS=2, SCH=3, LOOK=1),
        # 3 rows of 4 tiles of 768 (512 in registers); the rows' last tiles (300 elements) have
        # no shared part in the row (the copy is skipped, the mbarrier completes on 0 bytes)
        make_case("r3_c2604", rows=3, cols=2604, BLOCK=64, CHUNKS=2, SCH=1, LOOK=1),
        # 36 tiles of 128 per row (LOOK 1): look-backs cross 32-flag windows
        make_case("r2_c4484_t128", rows=2, cols=4484, BLOCK=32, CHUNKS=1, SCH=0, LOOK=1),
        # 47 tiles of 256 (128 in shared memory): look-backs cross 32-flag windows
        make_case("r1_c12000_t256", rows=1, cols=12000, BLOCK=32, CHUNKS=1, SCH=1, LOOK=1),
        # the ticket order (ORDER=1), 160 threads: 40 warp totals (2 per lane, some lanes
        # empty), the shared chunks in a group of 4 and one of 1; short shared copies
        make_case("r2_c9000_b160_o1", rows=2, cols=9000, BLOCK=160, CHUNKS=3, SCH=5, LOOK=4,
                  ORDER=1),
        # the H200's (docs/TUNING.md "cumsum_smem"): 19K-element tiles, 24 KB in registers
        # and 52 KB in shared memory, 4 CTAs per SM (304 KB per SM; `cumsum`: 128 KB)
        make_case("r1_c64M", rows=1, cols=1 << 26, small=False, main=True),  # s6-s10: fastest
        # the same in `cumsum`'s ticket order: what the block order alone gains
        make_case("r1_c64M_o1", rows=1, cols=1 << 26, ORDER=1, small=False),
        # 14K-element tiles, 32 KB shared: 224 KB per SM (the bytes-in-flight model's slope)
        make_case("r1_c64M_s8", rows=1, cols=1 << 26, SCH=8, small=False),
        # registers only (8K tiles, 4 CTAs per SM: `cumsum[r1_c64M_t8k]` in block order)
        make_case("r1_c64M_s0", rows=1, cols=1 << 26, CHUNKS=8, SCH=0, small=False),
        make_case("r8_c4M", rows=8, cols=1 << 22, small=False, main=True),
    ],
    tolerance=T.tolerance(rtol=0, atol=0),  # dyadic inputs: exact in any order
    constraints=constraints,
    flops=lambda rows, cols: rows * cols, bytes=lambda rows, cols: 8 * rows * cols,
    baselines=[{"name": "torch.cumsum", "args": {"x": "x"}},
               {"name": "torch.compile.cumsum", "args": {"x": "x"}}],
)
