"""Inclusive prefix sum over long rows: out[r, c] = sum_{c' <= c} x[r, c'] (f32), single pass.

Algorithm: decoupled look-back (Merrill and Garland, "Single-pass Parallel Prefix Scan with
Decoupled Look-back", 2016), chosen over reduce-then-scan because it reads and writes the data
once (8 bytes per element, the minimum; reduce-then-scan reads it twice, 12 bytes) in a single
launch. Each CTA scans one tile of TILE = BLOCK * CHUNKS * VEC elements of a row:

1. tile order: thread 0 takes a ticket with ``atom.global.add.u64`` on a counter, so tiles are
   handed out in the order CTAs start; every tile's predecessors are then running or done, which
   is what makes waiting on them safe (block indices carry no such guarantee);
2. the tile is loaded with 16-byte coalesced loads (``ld.global.v4.f32``, a warp reads 512
   contiguous bytes; CHUNKS loads per thread, all issued before use) and scanned in registers:
   each thread scans its VEC elements, a ``shfl.sync.up`` ladder scans the thread totals of each
   chunk within the warp, and warp 0 scans the BLOCK/32 * CHUNKS warp totals;
3. look-back: warp 0 publishes the tile's aggregate (status A) in its flag word, then reads the
   flags of the 32 preceding tiles at once, one per lane: if one holds an inclusive prefix
   (status P), the sum of the aggregates up to it plus that prefix is this tile's exclusive prefix;
   a flag not yet published is waited for (``vote.ballot`` makes every decision warp-uniform);
   it then publishes its own inclusive prefix (P). A row's first tile publishes P at once;
4. every thread adds its offsets and stores with ``st.global.v4.f32``.

A flag is one 64-bit word -- the f32 value in the low half, the status and an epoch in the high
half -- written and read with ``st/ld.relaxed.gpu.b64``, so a value and its status are never seen
apart. The epoch (ticket / number of tiles) makes the scratch self-resetting: a flag left by the
previous launch carries the previous epoch and reads as "not yet published", so launches (a timing
loop) need no clearing between them. The counter grows by the number of tiles per launch.

Numerics: summation order differs from a sequential sum (and between runs: the look-back depth
depends on timing). The suite's inputs are multiples of 1/16 in [-8, 8], so every partial sum is
exact in f32 as long as it stays below 2^20 in magnitude (random-walk sums of 64M such terms stay
under ~2e5): the check is bitwise, and it tests the algorithm, not rounding. On general f32 data
the error of an element is bounded by about (log2(TILE) + tiles before it) * eps * sum |x| up to
it; tests/zoo/test_cumsum.py checks that bound on normal data.

Tags: decoupled-look-back, vectorized, warp-shuffle, single-pass
Work: 1 FLOP and 8 bytes per element.
"""

import numpy as np

import tirxh.lang as T

TAGS = ("decoupled-look-back", "vectorized", "warp-shuffle", "single-pass", "scan")

ST_A, ST_P = 1, 2  # flag status: aggregate only / inclusive prefix (0: not yet published)
EPOCH_MASK = 0x3FFFFFFF  # the epoch's bits kept in the flag (above the 2 status bits)
FULL = 0xFFFFFFFF


def tile_elems(BLOCK, CHUNKS, VEC) -> int:
    return BLOCK * CHUNKS * VEC


def _ticket_grid(rows, cols, BLOCK=256, CHUNKS=4, VEC=4):
    return rows * T.cdiv(cols, tile_elems(BLOCK, CHUNKS, VEC))


def _warp_scan(v, lane):
    """Inclusive scan over the warp: 5 x (shfl.sync.up, setp, @p add)."""
    for off in (1, 2, 4, 8, 16):
        o = T.ptx.mov.f32(T.ptx.shfl.sync.up.b32(v, off, 0, FULL))
        T.ptx.add.f32(v, v, o, pred=lane >= off)
    return v


def _warp_sum(v):
    """Sum over the warp, in every lane: 5 x (shfl.sync.bfly, add)."""
    for off in (16, 8, 4, 2, 1):
        v = T.ptx.add.f32(v, T.ptx.mov.f32(T.ptx.shfl.sync.bfly.b32(v, off, 0x1F, FULL)))
    return v


def _look_back(flags, tile, first, agg, epoch, lane):
    """Warp 0, after publishing A: the exclusive prefix from the predecessors' flags (every
    lane), then publish P."""
    tag_p = T.ptx.or_.b32(T.ptx.shl.b32(epoch, 2), ST_P)
    prefix = T.reg(T.f32, init=0.0)
    look = T.reg(T.u32, init=tile)  # the window is tiles look-1-lane
    with T.loop():
        # lanes past the row's first tile read as "P, 0"
        inrow = T.ptx.add.u32(lane, first) < look
        idx = T.ptx.sub.u32(T.ptx.sub.u32(look, 1), lane)
        word = T.reg(T.b64, init=0)
        T.ptx.ld.relaxed.gpu.global_.b64(word, flags.at(idx), pred=inrow)
        val, tag = T.reg(T.b32), T.reg(T.b32)
        T.ptx.mov.b64([val, tag], word)
        fresh = T.ptx.shr.u32(tag, 2) == epoch
        status = T.ptx.selp.u32(T.ptx.and_.b32(tag, 3), 0, fresh)
        T.ptx.mov.u32(status, ST_P, pred=~inrow)
        T.ptx.mov.b32(val, 0, pred=~inrow)
        pmask = T.ptx.vote.ballot.sync.b32(status == ST_P, FULL)
        # the window: lanes up to the nearest P (all 32 lanes when none holds P)
        low = T.ptx.and_.b32(pmask, T.ptx.neg.s32(pmask))
        win = T.ptx.selp.b32(T.ptx.or_.b32(T.ptx.sub.u32(low, 1), low), FULL, pmask != 0)
        waiting = T.ptx.and_.b32(T.ptx.vote.ballot.sync.b32(status == 0, FULL), win)
        with T.if_(waiting == 0, uniform=True):
            inwin = T.ptx.and_.b32(T.ptx.shr.u32(win, lane), 1) != 0
            part = _warp_sum(T.ptx.selp.f32(T.ptx.mov.f32(val), 0.0, inwin))
            T.ptx.add.f32(prefix, prefix, part)
            T.break_(pmask != 0)
            T.ptx.sub.u32(look, look, 32)
    with T.if_(lane == 0):
        T.ptx.st.relaxed.gpu.global_.b64(flags.at(tile),
                                         T.ptx.mov.b64([T.ptx.add.f32(prefix, agg), tag_p]))
    return prefix


@T.kernel(grid=_ticket_grid, block=lambda BLOCK: BLOCK)
def cumsum(x: T.gptr[T.f32], out: T.gptr[T.f32], flags: T.gptr[T.u64], counter: T.gptr[T.u64],
           rows: T.u32, cols: T.u32, BLOCK: T.const = 256, CHUNKS: T.const = 4,
           VEC: T.const = 4):
    tile_n = tile_elems(BLOCK, CHUNKS, VEC)
    nw = BLOCK // 32
    nt = nw * CHUNKS  # warp-chunk totals, scanned by one warp
    wt = T.shared(T.f32, (nt,), name="wtot")
    bcast = T.shared(T.u32, (2,), name="ticket")  # tile, epoch
    tid = T.tid.x
    lane = T.laneid()
    warp = tid >> 5

    # 1. the tile, in the order CTAs start: ticket = epoch * tiles + tile
    per_row = T.ptx.div.u32(T.ptx.add.u32(cols, tile_n - 1), tile_n)
    with T.if_(tid == 0):
        ticket = T.ptx.atom.relaxed.gpu.global_.add.u64(counter.at(0), 1)
        ntiles = T.ptx.cvt.u64.u32(rows * per_row)
        epoch64 = T.ptx.div.u64(ticket, ntiles)
        T.ptx.st.shared.v2.u32(bcast.at(0), [
            T.ptx.cvt.u32.u64(T.ptx.sub.u64(ticket, T.ptx.mul.lo.u64(epoch64, ntiles))),
            T.ptx.and_.b32(T.ptx.cvt.u32.u64(epoch64), EPOCH_MASK)])
    T.ptx.bar.sync(0)
    tile, epoch = T.ptx.ld.shared.v2.u32(bcast.at(0))
    row = tile / per_row
    t_in_row = tile - row * per_row
    col0 = t_in_row * tile_n
    base = row * cols + col0

    # 2. load CHUNKS x VEC elements per thread (coalesced), scan them in registers
    vld = {4: T.ptx.ld.global_.v4.f32, 2: T.ptx.ld.global_.v2.f32, 1: T.ptx.ld.global_.f32}[VEC]
    vst = {4: T.ptx.st.global_.v4.f32, 2: T.ptx.st.global_.v2.f32, 1: T.ptx.st.global_.f32}[VEC]
    chunks = []
    for c in range(CHUNKS):
        e = (c * BLOCK + tid) * VEC
        ok = T.ptx.add.u32(col0, e) < cols
        v = [T.reg(T.f32, init=0.0) for _ in range(VEC)]
        vld(v if VEC > 1 else v[0], x.at(base + e), pred=ok)
        chunks.append((e, ok, v))
    thread_excl = []
    for c, (_, _, v) in enumerate(chunks):
        for i in range(1, VEC):
            T.ptx.add.f32(v[i], v[i], v[i - 1])
        incl = _warp_scan(T.reg(T.f32, init=v[-1]), lane)
        thread_excl.append(T.ptx.sub.f32(incl, v[-1]))
        with T.if_(lane == 31):
            T.ptx.st.shared.f32(wt.at(c * nw + warp), incl)
    T.ptx.bar.sync(0)

    # 3. warp 0: scan the warp totals (chunk-major), look back, leave each (chunk, warp) offset
    with T.if_(warp == 0, uniform=True):
        have = lane < nt
        own = T.reg(T.f32, init=0.0)
        T.ptx.ld.shared.f32(own, wt.at(lane), pred=have)
        incl = _warp_scan(T.reg(T.f32, init=own), lane)
        agg = T.ptx.mov.f32(T.ptx.shfl.sync.idx.b32(incl, nt - 1, 0x1F, FULL))
        # publish first (a row's first tile: P, the others: A), then look back: nothing a tile
        # waits for is behind another tile's wait (numsim runs CTAs in lockstep batches)
        first = t_in_row == 0
        status = T.ptx.selp.u32(ST_P, ST_A, first)
        with T.if_(lane == 0):
            T.ptx.st.relaxed.gpu.global_.b64(
                flags.at(tile), T.ptx.mov.b64([agg, T.ptx.or_.b32(T.ptx.shl.b32(epoch, 2),
                                                                  status)]))
        prefix = T.reg(T.f32, init=0.0)
        with T.if_(~first, uniform=True):
            prefix.set(_look_back(flags, tile, tile - t_in_row, agg, epoch, lane))
        T.ptx.st.shared.f32(wt.at(lane), T.ptx.add.f32(T.ptx.sub.f32(incl, own), prefix),
                            pred=have)
    T.ptx.bar.sync(0)

    # 4. add the offsets, store
    for c, (e, ok, v) in enumerate(chunks):
        off = T.ptx.add.f32(T.ptx.ld.shared.f32(wt.at(c * nw + warp)), thread_excl[c])
        vst(out.at(base + e), [T.ptx.add.f32(vi, off) for vi in v] if VEC > 1
            else T.ptx.add.f32(v[0], off), pred=ok)


# -- cases ------------------------------------------------------------------------------------------

def constraints(rows, cols, BLOCK, CHUNKS, VEC):
    """The shapes `cumsum` accepts (checked when the suite is declared)."""
    why = []
    if BLOCK % 32 or not 32 <= BLOCK <= 1024:
        why.append(f"BLOCK={BLOCK} must be a multiple of 32 in [32, 1024]")
    elif (BLOCK // 32) * CHUNKS > 32:
        why.append(f"BLOCK/32 * CHUNKS = {(BLOCK // 32) * CHUNKS} warp totals must fit one "
                   "warp's scan (at most 32)")
    if CHUNKS < 1:
        why.append(f"CHUNKS={CHUNKS} must be positive")
    if rows < 1 or cols < 1:
        why.append(f"rows={rows} and cols={cols} must be positive")
    elif cols % VEC:
        why.append(f"cols={cols} must be a multiple of VEC={VEC} (rows start at aligned "
                   f"{4 * VEC}-byte accesses)")
    if rows * cols >= 1 << 32:
        why.append(f"rows*cols={rows * cols} must be below 2^32 (32-bit element index)")
    return why


def make_case(name: str, rows: int, cols: int, BLOCK: int = 256, CHUNKS: int = 4,
              small: bool = True) -> T.Case:
    """A cumsum case; the vector width follows cols: 4 floats per access when cols is a
    multiple of 4, else 2 or 1. Large cases are the H200's (tag h200), never simulated."""
    vec = next(v for v in (4, 2, 1) if cols % v == 0) if cols > 0 else 1
    return T.case(name, small=small, tags=() if small else ("h200",), rows=rows, cols=cols,
                  BLOCK=BLOCK, CHUNKS=CHUNKS, VEC=vec)


def inputs(rng, rows, cols, BLOCK=256, CHUNKS=4, VEC=4):
    ntiles = _ticket_grid(rows, cols, BLOCK, CHUNKS, VEC)
    # multiples of 1/16 in [-8, 8]: every partial sum is exact in f32 (module docstring)
    x = rng.integers(-128, 129, (rows, cols)).astype(np.float32) / 16
    return dict(x=x, out=np.empty((rows, cols), np.float32),
                flags=np.zeros(ntiles, np.uint64), counter=np.zeros(1, np.uint64),
                rows=rows, cols=cols)


def reference(x):
    return {"out": np.cumsum(x.astype(np.float64), axis=1).astype(np.float32)}


SUITE = T.suite(
    cumsum, inputs=inputs, reference=reference, outputs=["out"],
    cases=[
        make_case("r1_c5000", rows=1, cols=5000, BLOCK=64, CHUNKS=4),      # 5 tiles, tail
        make_case("r3_c3001", rows=3, cols=3001, BLOCK=32, CHUNKS=8),      # odd width: scalar
        # 128-element tiles: 36 per row, so a look-back crosses more than one 32-tile window
        make_case("r2_c4484_t128", rows=2, cols=4484, BLOCK=32, CHUNKS=1),
        make_case("r8_c4M", rows=8, cols=1 << 22, small=False),
        make_case("r1_c64M", rows=1, cols=1 << 26, small=False),
        make_case("r1_c64M_k8", rows=1, cols=1 << 26, BLOCK=128, CHUNKS=8, small=False),
        make_case("r1_c64M_b512", rows=1, cols=1 << 26, BLOCK=512, CHUNKS=2, small=False),
    ],
    tolerance=T.tolerance(rtol=0, atol=0),  # dyadic inputs: exact in any order (docstring)
    constraints=constraints,
    flops=lambda rows, cols: rows * cols, bytes=lambda rows, cols: 8 * rows * cols,
    baselines=[{"name": "torch.cumsum", "args": {"x": "x"}},
               {"name": "torch.compile.cumsum", "args": {"x": "x"}}],
)
