"""Inclusive prefix sum over long rows: out[r, c] = sum_{c' <= c} x[r, c'] (f32), single pass.

Algorithm: decoupled look-back (Merrill and Garland, "Single-pass Parallel Prefix Scan with
Decoupled Look-back", 2016), chosen over reduce-then-scan because it reads and writes the data
once (8 bytes per element, the minimum; reduce-then-scan reads it twice, 12 bytes) in a single
launch. Each CTA scans one tile of TILE = BLOCK * CHUNKS * VEC elements of a row:

1. tile order: thread 0 takes a ticket with ``atom.global.add.u64`` on a counter, so tiles are
   handed out in the order CTAs start; every tile's predecessors are then running or done, which
   is what makes waiting on them safe (block indices carry no such guarantee, and nothing here
   assumes that any number of CTAs is resident);
2. the tile is loaded with 16-byte coalesced loads (``ld.global.v4.f32``, a warp reads 512
   contiguous bytes; CHUNKS loads per thread from one address and immediate offsets, all issued
   before use; ``EF=1``: ``ld.global.cs``, evict-first, since every element is read once) and
   scanned in registers: each thread scans its VEC elements, a ``shfl.sync.up`` ladder scans the
   thread totals of each chunk within the warp, and warp 0 scans the BLOCK/32 * CHUNKS warp
   totals (K = ceil(totals / 32) consecutive ones per lane, summed in the lane, then one ladder);
3. look-back: warp 0 publishes the tile's aggregate (status A) in its flag word, then reads the
   flags of the 32 LOOK preceding tiles at once, LOOK per lane: if one holds an inclusive prefix
   (status P), the sum of the aggregates up to the nearest P plus that prefix is this tile's
   exclusive prefix; a flag not yet published is waited for (``vote.ballot`` makes every
   decision warp-uniform); without a P the window moves 32 LOOK tiles back. It then publishes
   its own inclusive prefix (P). A row's first tile publishes P at once;
4. every thread adds its offsets and stores with ``st.global.v4.f32``.

Why the tile size matters (issue 14; docs/TUNING.md): at 4.25 TB/s a tile of T elements (8T
bytes of traffic) must be finished every 8T / 4.25e12 s, i.e. 130 tiles per microsecond at T =
4096. A tile that looks back while its predecessors are still in flight finds the nearest P about
rate x (look-back round trip, ~0.5 us) tiles back: 65 tiles at T = 4096, more than one 32-flag
round, and every extra round delays the P the next tiles wait for (measured: 56% of the floor).
At T = 16384 (32 tiles per us) the nearest P is ~16 tiles back, within one round of 64 flags.
So tiles are as large as the registers allow (up to 64 elements per thread) and each round reads
LOOK flags per lane. The ticket's epoch is a 32-bit division while tickets fit in 32 bits (a
64-bit one is a ~70-instruction subroutine between the ticket and the first load).

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

`cumsum_pipe` (below) is the same scan on a persistent grid whose tiles stream through a
shared-memory ring (1-D bulk copies on mbarriers) while the look-back runs.

Tags: decoupled-look-back, vectorized, warp-shuffle, single-pass, scan, persistent, bulk-copy,
mbarrier-pipeline
Work: 1 FLOP and 8 bytes per element.
"""

import numpy as np

import tirxh.lang as T

TAGS = ("decoupled-look-back", "vectorized", "warp-shuffle", "single-pass", "scan",
        "persistent", "bulk-copy", "mbarrier-pipeline")

MAX_TOTALS = 256  # warp-chunk totals per tile: 8 per lane of the scanning warp
MAX_PER_THREAD = 64  # elements a thread holds in registers
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


def _read_flags(flags, look, first, epoch, lane, LOOK, into=None, coal=False):
    """One look-back round: lane l reads the flags of the tiles ``look - 1 - d`` for its LOOK
    distances d = l LOOK + j (``ld.relaxed.gpu.global.b64`` each, all in flight together).
    Returns per distance (value, status); a flag of another epoch reads as status 0 (not yet
    published), a tile before the row's first as (0, P). ``into``: the (value, status)
    registers of an earlier call, rewritten (a round read ahead of its use: `cumsum_tma`).

    ``coal``: d = 32 j + l instead, so each of the LOOK loads is 32 consecutive flags (256
    bytes, 8 sectors) rather than 32 flags LOOK apart (32 sectors at LOOK 4): the same window
    in a quarter of the L2 sector requests (docs/PERFORMANCE.md "Session 15, branch
    cumsum12"); `_look_back_round` must then take the distances j-major (its ``coal``)."""
    d0 = lane if coal else lane * LOOK
    out = []
    for j in range(LOOK):
        d = (T.ptx.add.u32(d0, 32 * j) if coal else d0 + j) if j else d0
        inrow = T.ptx.add.u32(d, first) < look
        word = T.reg(T.b64, init=0)
        T.ptx.ld.relaxed.gpu.global_.b64(word, flags.at(T.ptx.sub.u32(T.ptx.sub.u32(look, 1), d)),
                                         pred=inrow)
        val, tag = T.reg(T.b32), T.reg(T.b32)
        T.ptx.mov.b64([val, tag], word)
        fresh = T.ptx.shr.u32(tag, 2) == epoch
        status = T.ptx.selp.u32(T.ptx.and_.b32(tag, 3), 0, fresh)
        T.ptx.mov.u32(status, ST_P, pred=~inrow)
        T.ptx.mov.b32(val, 0, pred=~inrow)
        out.append((val, status))
    if into is not None:
        for (val, status), (v_to, s_to) in zip(out, into):
            T.ptx.mov.b32(v_to, val)
            T.ptx.mov.u32(s_to, status)
        return into
    return out


def _look_back(flags, tile, first, agg, epoch, lane, LOOK, got=None, coal=False):
    """Warp 0, after publishing A: the exclusive prefix from the predecessors' flags (every
    lane), then publish P.

    Each round reads a window of 32 LOOK flags (`_read_flags`); the flags that count are those
    up to and including the nearest P (distance order: lane-major, then j), or all of them when
    none holds P. If one of those is not yet published the round is read again; else their values
    are summed (``vote.ballot`` + a butterfly sum: every decision is warp-uniform) and the look-back
    ends at the P or moves 32 LOOK tiles further back. ``got``: the first round, read earlier
    (`_read_flags` of the window just before `tile`); each next round is then read at the end
    of the loop's body into the same registers. ``coal``: the window read 32 consecutive
    flags a load (`_read_flags`), the distance order j-major, then lane."""
    tag_p = T.ptx.or_.b32(T.ptx.shl.b32(epoch, 2), ST_P)
    prefix = T.reg(T.f32, init=0.0)
    look = T.reg(T.u32, init=tile)  # the window is the tiles look - 1 - d, d < 32 LOOK
    with T.loop():
        _look_back_round(_read_flags(flags, look, first, epoch, lane, LOOK, coal=coal)
                         if got is None else got, lane, LOOK, prefix, look, coal=coal)
        if got is not None:
            _read_flags(flags, look, first, epoch, lane, LOOK, into=got, coal=coal)
    with T.if_(lane == 0):
        T.ptx.st.relaxed.gpu.global_.b64(flags.at(tile),
                                         T.ptx.mov.b64([T.ptx.add.f32(prefix, agg), tag_p]))
    return prefix


def _look_back_round(got, lane, LOOK, prefix, look, coal=False):
    """One round of `_look_back` on its flags ``got``: wait (fall through, the loop reads the
    round again), or add the counted values to ``prefix`` and leave the loop at a P, else move
    ``look`` one window back. ``coal``: got[j] is distance 32 j + lane (`_read_flags`)."""
    is_p = [status == ST_P for _, status in got]
    if coal:
        pmask, counted = _counted_j_major(is_p, lane)
    else:
        has_p = is_p[0]
        for p in is_p[1:]:
            has_p = has_p | p
        pmask = T.ptx.vote.ballot.sync.b32(has_p, FULL)
        low = T.ptx.and_.b32(pmask, T.ptx.neg.s32(pmask))  # the nearest lane holding a P
        # lanes before it count all their flags (every lane when no P: low - 1 = all ones),
        # that lane counts its flags up to its first P, the lanes after it none
        before = T.ptx.and_.b32(T.ptx.shr.u32(T.ptx.sub.u32(low, 1), lane), 1) != 0
        at_p = T.ptx.and_.b32(T.ptx.shr.u32(low, lane), 1) != 0
        counted, seen = [], None
        for p in is_p:
            counted.append(before | (at_p if seen is None else at_p & ~seen))
            seen = p if seen is None else seen | p
    unready = None
    for (_, status), c in zip(got, counted):
        u = c & (status == 0)
        unready = u if unready is None else unready | u
    waiting = T.ptx.vote.ballot.sync.b32(unready, FULL)
    with T.if_(waiting == 0, uniform=True):
        part = None
        for (val, _), c in zip(got, counted):
            v = T.ptx.selp.f32(T.ptx.mov.f32(val), 0.0, c)
            part = v if part is None else part + v
        T.ptx.add.f32(prefix, prefix, _warp_sum(part))
        T.break_(pmask != 0)
        T.ptx.sub.u32(look, look, 32 * LOOK)


def _counted_j_major(is_p, lane):
    """`_look_back_round`'s counted flags when got[j] is distance 32 j + lane: one ballot per
    j; in the first j whose ballot has a P, the lanes up to and including its lowest one count
    (``low ^ (low - 1)``: every lane when the ballot is empty), every lane of an earlier j
    counts, none of a later one. Returns (a ballot nonzero iff the window holds a P, the
    counted predicate per j).

    The first ballot takes every load's P at once, and each later ballot waits for it (a P
    in load j only counts when the window holds one, which it then does): without that
    dependence ptxas (12.x) issued the last load after the first loads' ballots, two L2 round
    trips a round (SASS of r1_c64M_a_c)."""
    has_p = is_p[0]
    for p in is_p[1:]:
        has_p = has_p | p
    pmask = T.ptx.vote.ballot.sync.b32(has_p, FULL)
    counted, seen = [], None
    for p in is_p:
        ball = T.ptx.vote.ballot.sync.b32(p & (pmask != 0), FULL)
        low = T.ptx.and_.b32(ball, T.ptx.neg.s32(ball))
        upto = T.ptx.and_.b32(T.ptx.shr.u32(T.ptx.xor.b32(low, T.ptx.sub.u32(low, 1)), lane),
                              1) != 0
        counted.append(upto if seen is None else upto & (seen == 0))
        seen = ball if seen is None else T.ptx.or_.b32(seen, ball)
    return pmask, counted


def _scan_totals(wt, nt, lane):
    """Warp 0: the inclusive scan of the `nt` warp-chunk totals in ``wt`` (tile order), K =
    ceil(nt / 32) consecutive ones per lane: K ``ld.shared.f32`` and adds in the lane, a warp scan
    of the lane sums. Returns (the tile's aggregate, this lane's exclusive prefix, a function that
    writes every total's exclusive prefix plus an offset back to ``wt``)."""
    K = T.cdiv(nt, 32)
    first = wt.at(lane * K) if K > 1 else wt.at(lane)
    runs = []  # inclusive sums within the lane, and the predicate of each slot
    for j in range(K):
        have = None if 32 * K == nt else (lane * K + j < nt if K > 1 else lane < nt)
        own = T.reg(T.f32, init=0.0)
        T.ptx.ld.shared.f32(own, first + 4 * j, pred=have)
        runs.append((own if not runs else runs[-1][0] + own, have))
    total = runs[-1][0]
    incl = _warp_scan(T.reg(T.f32, init=total), lane)
    agg = T.ptx.mov.f32(T.ptx.shfl.sync.idx.b32(incl, 31, 0x1F, FULL))
    excl = T.ptx.sub.f32(incl, total)

    def write_back(offset):
        base = T.ptx.add.f32(excl, offset)
        for j, (_, have) in enumerate(runs):
            val = base if j == 0 else T.ptx.add.f32(base, runs[j - 1][0])
            T.ptx.st.shared.f32(first + 4 * j, val, pred=have)
    return agg, write_back


def _scan_chunks(chunks, lane, total_at):
    """Every chunk's elements (VEC per thread, a warp's 32 VEC in a row) become their inclusive
    scan within the warp's chunk (in-thread adds, one warp ladder); lane 31 stores the chunk's
    warp total at ``total_at(c)``. The warp's exclusive offset is added now, so no register per
    chunk stays live across the look-back."""
    for c, v in enumerate(chunks):
        for i in range(1, len(v)):
            T.ptx.add.f32(v[i], v[i], v[i - 1])
        incl = _warp_scan(T.reg(T.f32, init=v[-1]), lane)
        excl = T.ptx.sub.f32(incl, v[-1])
        for i in range(len(v)):
            T.ptx.add.f32(v[i], v[i], excl)
        with T.if_(lane == 31):
            T.ptx.st.shared.f32(total_at(c), incl)


def split_ticket(ticket, ntiles, bcast):
    """Thread 0: a ticket (epoch * ntiles + tile, u64) to (tile, epoch's low bits) in the two
    words of ``bcast``. The first 2^32 tickets take a 32-bit division (a 64-bit one is a
    ~70-instruction subroutine, on `cumsum`'s path to the first load), the others a 64-bit one."""
    lo, hi = T.reg(T.u32), T.reg(T.u32)
    T.ptx.mov.b64([lo, hi], ticket)
    with T.if_(hi == 0):
        epoch = lo / ntiles
        T.ptx.st.shared.v2.u32(bcast.at(0), [lo - epoch * ntiles,
                                             T.ptx.and_.b32(epoch, EPOCH_MASK)])
    with T.else_():
        n64 = T.ptx.cvt.u64.u32(ntiles)
        epoch64 = T.ptx.div.u64(ticket, n64)
        T.ptx.st.shared.v2.u32(bcast.at(0), [
            T.ptx.cvt.u32.u64(T.ptx.sub.u64(ticket, T.ptx.mul.lo.u64(epoch64, n64))),
            T.ptx.and_.b32(T.ptx.cvt.u32.u64(epoch64), EPOCH_MASK)])


def _tile_prefix(flags, totals, nt, lane, tile, t_in_row, epoch, LOOK):
    """Warp 0, once the tile's warp totals are in `totals`: scan them, publish the tile's flag
    (a row's first tile: P, the others: A), look back, and leave each total's offset in
    `totals`. Publishing comes first: nothing a tile waits for is behind another tile's wait
    (numsim runs CTAs in lockstep batches)."""
    agg, write_back = _scan_totals(totals, nt, lane)
    first = t_in_row == 0
    status = T.ptx.selp.u32(ST_P, ST_A, first)
    with T.if_(lane == 0):
        T.ptx.st.relaxed.gpu.global_.b64(
            flags.at(tile), T.ptx.mov.b64([agg, T.ptx.or_.b32(T.ptx.shl.b32(epoch, 2), status)]))
    prefix = T.reg(T.f32, init=0.0)
    with T.if_(~first, uniform=True):
        prefix.set(_look_back(flags, tile, tile - t_in_row, agg, epoch, lane, LOOK))
    write_back(prefix)


@T.kernel(grid=_ticket_grid, block=lambda BLOCK: BLOCK)
def cumsum(x: T.gptr[T.f32], out: T.gptr[T.f32], flags: T.gptr[T.u64], counter: T.gptr[T.u64],
           rows: T.u32, cols: T.u32, BLOCK: T.const = 256, CHUNKS: T.const = 4,
           VEC: T.const = 4, LOOK: T.const = 1, EF: T.const = 0):
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
        split_ticket(T.ptx.atom.relaxed.gpu.global_.add.u64(counter.at(0), 1), rows * per_row,
                     bcast)
    T.ptx.bar.sync(0)
    tile, epoch = T.ptx.ld.shared.v2.u32(bcast.at(0))
    row = tile / per_row
    t_in_row = tile - row * per_row
    col0 = t_in_row * tile_n
    base = row * cols + col0

    # 2. load CHUNKS x VEC elements per thread (coalesced), scan them in registers; EF=1 loads
    # with .cs (evict-first in L1 and L2: each element is read once)
    cop = T.ptx.ld.global_.cs if EF else T.ptx.ld.global_
    vld = {4: cop.v4.f32, 2: cop.v2.f32, 1: cop.f32}[VEC]
    vst = {4: T.ptx.st.global_.v4.f32, 2: T.ptx.st.global_.v2.f32, 1: T.ptx.st.global_.f32}[VEC]
    # one address per pointer and immediate offsets per chunk; the tail predicates are
    # recomputed at the store (nothing per chunk but the data stays live across the look-back)
    e0 = tid * VEC
    step = BLOCK * VEC  # elements from one chunk to the next

    def in_row(c):
        return T.ptx.add.u32(col0, e0 + c * step if c else e0) < cols

    chunks = []
    xaddr = x.at(base + e0)
    for c in range(CHUNKS):
        v = [T.reg(T.f32, init=0.0) for _ in range(VEC)]
        vld(v if VEC > 1 else v[0], xaddr + 4 * c * step, pred=in_row(c))
        chunks.append(v)
    _scan_chunks(chunks, lane, lambda c: wt.at(c * nw + warp))
    T.ptx.bar.sync(0)

    # 3. warp 0: scan the warp totals (chunk-major), look back, leave each (chunk, warp) offset
    with T.if_(warp == 0, uniform=True):
        _tile_prefix(flags, wt, nt, lane, tile, t_in_row, epoch, LOOK)
    T.ptx.bar.sync(0)

    # 4. add the offsets, store
    oaddr = out.at(base + e0)
    for c, v in enumerate(chunks):
        off = T.ptx.ld.shared.f32(wt.at(c * nw + warp))
        vst(oaddr + 4 * c * step, [T.ptx.add.f32(vi, off) for vi in v] if VEC > 1
            else T.ptx.add.f32(v[0], off), pred=in_row(c))


# -- the persistent, pipelined variant ------------------------------------------------------------

def _pipe_grid(rows, cols, BLOCK=256, CHUNKS=4, CTAS=132):
    return min(rows * T.cdiv(cols, tile_elems(BLOCK, CHUNKS, 4)), CTAS)


def pipe_smem_bytes(BLOCK, CHUNKS, STAGES) -> int:
    """The tile ring's bytes (the mbarriers and the totals are below 2 KB)."""
    return STAGES * tile_elems(BLOCK, CHUNKS, 4) * 4


def strided_tiles(rows, cols, tile_n):
    """A persistent grid's share of `rows` rows cut into `tile_n`-element tiles, tile t on CTA
    t mod grid in increasing t (so a look-back only waits on tiles already resident): (grid,
    cta, tiles a row, tiles in all, this CTA's count, span(k) -> (global tile, row, tile index
    in its row, first column) of its k-th tile). cumsum_pipe and cumsum_persist share it."""
    grid = T.nctaid.x
    cta = T.ctaid.x
    per_row = T.ptx.div.u32(T.ptx.add.u32(cols, tile_n - 1), tile_n)
    ntiles = rows * per_row
    mine = (ntiles - 1 - cta) / grid + 1       # tiles cta, cta + grid, ... below ntiles

    def span(k):
        t = cta + k * grid
        row = t / per_row
        t_in_row = t - row * per_row
        return t, row, t_in_row, t_in_row * tile_n
    return grid, cta, per_row, ntiles, mine, span


@T.kernel(grid=_pipe_grid, block=lambda BLOCK: BLOCK)
def cumsum_pipe(x: T.gptr[T.f32], out: T.gptr[T.f32], flags: T.gptr[T.u64],
                counter: T.gptr[T.u64], rows: T.u32, cols: T.u32, BLOCK: T.const = 512,
                CHUNKS: T.const = 8, STAGES: T.const = 2, LOOK: T.const = 4,
                CTAS: T.const = 132):
    """`cumsum` with the tile loads taken off the look-back's critical path (docs/TUNING.md,
    "cumsum"): a persistent grid of CTAS CTAs, CTA c scanning tiles c, c + G, c + 2G, ... (G
    CTAs, every row's tiles in one global order) from a STAGES-deep shared-memory ring that one
    thread fills with 1-D bulk copies (``cp.async.bulk``, completing on the stage's mbarrier) as
    soon as the CTA has read a stage into registers. While the CTA waits for its predecessors'
    flags, the next STAGES - 1 tiles are already streaming in, so an SM's loads no longer stop
    for the look-back; `cumsum` (one tile per CTA) stops them from the end of its loads to its
    exit. Per tile, as `cumsum`: scan in registers, warp totals to shared memory, warp 0
    publishes A, looks back, publishes P, every thread adds its offset and stores. Two CTA
    barriers per tile and no more: a warp writes the next tile's totals only into its own
    slots, which only it reads after the second barrier, and warp 0 rewrites every slot only
    after the next first barrier, which every warp reaches after its reads.

    Waiting is safe because every CTA of the grid is resident (the grid is at most one wave:
    `pipe_constraints`) and scans its tiles in increasing order: the CTA holding the lowest
    unfinished tile is scanning it, and all of that tile's predecessors are done. The epoch of
    a launch is one ticket per CTA divided by the grid size (a launch takes exactly G tickets),
    so flags stay self-resetting across launches as in `cumsum`."""
    tile_n = tile_elems(BLOCK, CHUNKS, 4)
    nw = BLOCK // 32
    nt = nw * CHUNKS
    buf = T.shared(T.f32, (STAGES, tile_n), name="ring", align=128, dynamic=True)
    full = T.mbarrier(STAGES, name="full", dynamic=True)
    wt = T.shared(T.f32, (nt,), name="wtot")
    bcast = T.shared(T.u32, (1,), name="epoch")
    bulk_load = T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"]
    tid = T.tid.x
    lane = T.laneid()
    warp = tid >> 5
    grid, cta, per_row, ntiles, mine, span = strided_tiles(rows, cols, tile_n)

    def load(k, stage):
        """Thread 0: the k-th tile's elements (the row's last tile is short) into `stage`."""
        _, row, _, col0 = span(k)
        nbytes = T.ptx.min.u32(cols - col0, tile_n) << 2
        full[stage].arrive_expect_tx(nbytes)
        bulk_load(buf.at(stage, 0), x.at(row * cols + col0), nbytes, full[stage])

    with T.if_(tid == 0):
        ticket = T.ptx.atom.relaxed.gpu.global_.add.u64(counter.at(0), 1)
        epoch = T.ptx.cvt.u32.u64(T.ptx.div.u64(ticket, T.ptx.cvt.u64.u32(grid)))
        T.ptx.st.shared.u32(bcast.at(0), T.ptx.and_.b32(epoch, EPOCH_MASK))
        for s in range(STAGES):
            full[s].init(1)
        T.ptx.fence.mbarrier_init.release.cluster()
        for s in range(STAGES):
            with T.if_(mine > s):
                load(s, s)
    T.ptx.bar.sync(0)
    epoch = T.ptx.ld.shared.u32(bcast.at(0))
    ring = T.pipeline(STAGES)
    e0 = tid * 4
    step = BLOCK * 4
    with T.range(mine) as k:
        tile, row, t_in_row, col0 = span(k)
        full[ring.stage].wait(ring.phase)

        def in_row(c):
            return T.ptx.add.u32(col0, e0 + c * step if c else e0) < cols

        # 1. this thread's CHUNKS x 4 elements from the stage (16-byte shared loads), scanned
        chunks = []
        for c in range(CHUNKS):
            v = [T.reg(T.f32, init=0.0) for _ in range(4)]
            T.ptx.ld.shared.v4.f32(v, buf.at(ring.stage, e0 + c * step), pred=in_row(c))
            chunks.append(v)
        _scan_chunks(chunks, lane, lambda c: wt.at(c * nw + warp))
        T.ptx.bar.sync(0)     # every thread read the stage: refill it with tile k + STAGES
        with T.if_((tid == 0) & (k + STAGES < mine)):
            load(k + STAGES, ring.stage)
        ring.advance()

        # 2. warp 0: the totals' scan, publish A (a row's first tile: P), look back, offsets
        with T.if_(warp == 0, uniform=True):
            _tile_prefix(flags, wt, nt, lane, tile, t_in_row, epoch, LOOK)
        T.ptx.bar.sync(0)

        # 3. add the offsets, store (16-byte stores straight from the registers)
        oaddr = out.at(row * cols + col0 + e0)
        for c, v in enumerate(chunks):
            off = T.ptx.ld.shared.f32(wt.at(c * nw + warp))
            T.ptx.st.global_.v4.f32(oaddr + 4 * c * step, [T.ptx.add.f32(vi, off) for vi in v],
                                    pred=in_row(c))


# -- cases ------------------------------------------------------------------------------------------

def constraints(rows, cols, BLOCK, CHUNKS, VEC, LOOK, EF):
    """The shapes `cumsum` accepts (checked when the suite is declared)."""
    why = []
    if BLOCK % 32 or not 32 <= BLOCK <= 1024:
        why.append(f"BLOCK={BLOCK} must be a multiple of 32 in [32, 1024]")
    elif (BLOCK // 32) * CHUNKS > MAX_TOTALS:
        why.append(f"BLOCK/32 * CHUNKS = {(BLOCK // 32) * CHUNKS} warp totals must fit one "
                   f"warp's scan (at most {MAX_TOTALS}: {MAX_TOTALS // 32} per lane)")
    if not 1 <= CHUNKS or CHUNKS * VEC > MAX_PER_THREAD:
        why.append(f"CHUNKS={CHUNKS} must be positive and CHUNKS * VEC at most "
                   f"{MAX_PER_THREAD} (the thread's elements stay in registers)")
    if LOOK not in (1, 2, 4, 8) or EF not in (0, 1):
        why.append(f"LOOK={LOOK} must be 1, 2, 4 or 8 (flags per lane and look-back round) "
                   f"and EF={EF} 0 or 1")
    if rows < 1 or cols < 1:
        why.append(f"rows={rows} and cols={cols} must be positive")
    elif cols % VEC:
        why.append(f"cols={cols} must be a multiple of VEC={VEC} (rows start at aligned "
                   f"{4 * VEC}-byte accesses)")
    if rows * cols >= 1 << 32:
        why.append(f"rows*cols={rows * cols} must be below 2^32 (32-bit element index)")
    return why


def make_case(name: str, rows: int, cols: int, BLOCK: int = 256, CHUNKS: int = 4, LOOK: int = 1,
              EF: int = 0, small: bool = True) -> T.Case:
    """A cumsum case; the vector width follows cols: 4 floats per access when cols is a
    multiple of 4, else 2 or 1. Large cases are the H200's (tag h200), never simulated."""
    vec = next(v for v in (4, 2, 1) if cols % v == 0) if cols > 0 else 1
    return T.case(name, small=small, tags=() if small else ("h200",), rows=rows, cols=cols,
                  BLOCK=BLOCK, CHUNKS=CHUNKS, VEC=vec, LOOK=LOOK, EF=EF)


def scan_inputs(rng, rows, cols, ntiles):
    """A scan's inputs: x of multiples of 1/16 in [-8, 8] (every partial sum is exact in f32,
    module docstring), the output, `ntiles` zero flag words and the zero ticket counter."""
    x = rng.integers(-128, 129, (rows, cols)).astype(np.float32) / 16
    return dict(x=x, out=np.empty((rows, cols), np.float32),
                flags=np.zeros(ntiles, np.uint64), counter=np.zeros(1, np.uint64),
                rows=rows, cols=cols)


def inputs(rng, rows, cols, BLOCK=256, CHUNKS=4, VEC=4):
    return scan_inputs(rng, rows, cols, _ticket_grid(rows, cols, BLOCK, CHUNKS, VEC))


def reference(x):
    return {"out": np.cumsum(x.astype(np.float64), axis=1).astype(np.float32)}


SUITE = T.suite(
    cumsum, inputs=inputs, reference=reference, outputs=["out"],
    cases=[
        make_case("r1_c5000", rows=1, cols=5000, BLOCK=64, CHUNKS=4),      # 5 tiles, tail
        make_case("r3_c3001", rows=3, cols=3001, BLOCK=32, CHUNKS=8),      # odd width: scalar
        # 128-element tiles: 36 per row, so a look-back crosses more than one 32-tile window
        make_case("r2_c4484_t128", rows=2, cols=4484, BLOCK=32, CHUNKS=1),
        # 71 tiles per row: look-back rounds of 64 flags (2 per lane) cross windows
        make_case("r2_c9000_t128_l2", rows=2, cols=9000, BLOCK=32, CHUNKS=1, LOOK=2),
        # 35 warp totals (2 per lane, the last lanes partly empty), 128 flags per round, .cs loads
        make_case("r2_c10000_b160_k7_l4", rows=2, cols=10000, BLOCK=160, CHUNKS=7, LOOK=4,
                  EF=1),
        # the H200's: tiles of 4K (before issue 14's tuning), 8K, 16K and 32K elements
        make_case("r1_c64M", rows=1, cols=1 << 26, small=False),
        make_case("r1_c64M_l4", rows=1, cols=1 << 26, LOOK=4, small=False),
        make_case("r1_c64M_t8k", rows=1, cols=1 << 26, BLOCK=256, CHUNKS=8, LOOK=2, small=False),
        make_case("r1_c64M_t16k", rows=1, cols=1 << 26, BLOCK=512, CHUNKS=8, LOOK=2,
                  small=False),
        make_case("r1_c64M_t16k_ef", rows=1, cols=1 << 26, BLOCK=512, CHUNKS=8, LOOK=2, EF=1,
                  small=False),
        make_case("r1_c64M_t16k_b1024", rows=1, cols=1 << 26, BLOCK=1024, CHUNKS=4, LOOK=2,
                  small=False),
        make_case("r1_c64M_t32k", rows=1, cols=1 << 26, BLOCK=1024, CHUNKS=8, LOOK=2,
                  small=False),
        make_case("r8_c4M", rows=8, cols=1 << 22, small=False),
        make_case("r8_c4M_t16k", rows=8, cols=1 << 22, BLOCK=512, CHUNKS=8, LOOK=2,
                  small=False),
    ],
    tolerance=T.tolerance(rtol=0, atol=0),  # dyadic inputs: exact in any order (docstring)
    constraints=constraints,
    flops=lambda rows, cols: rows * cols, bytes=lambda rows, cols: 8 * rows * cols,
    baselines=[{"name": "torch.cumsum", "args": {"x": "x"}},
               {"name": "torch.compile.cumsum", "args": {"x": "x"}}],
)


H200_SMS, SMEM_PER_SM, THREADS_PER_SM = 132, 227 * 1024, 2048


def pipe_constraints(rows, cols, BLOCK, CHUNKS, STAGES, LOOK, CTAS):
    """The shapes and constants `cumsum_pipe` accepts: `cumsum`'s, 16-byte rows (the bulk
    copies), and a grid that is one wave of the H200 (waiting on another CTA is safe only if it
    runs)."""
    why = constraints(rows, cols, BLOCK, CHUNKS, 4, LOOK, 0)
    smem = pipe_smem_bytes(BLOCK, CHUNKS, STAGES)
    if STAGES < 2 or smem > SMEM_PER_SM:
        why.append(f"STAGES={STAGES}: need at least 2 stages and STAGES * tile * 4 = {smem} "
                   f"bytes within {SMEM_PER_SM} of shared memory")
    else:
        per_sm = min(SMEM_PER_SM // (smem + 1024), THREADS_PER_SM // BLOCK)
        if not 1 <= CTAS <= H200_SMS * per_sm:
            why.append(f"CTAS={CTAS} must be in [1, {H200_SMS * per_sm}]: one wave of "
                       f"{per_sm} CTA(s) per SM on {H200_SMS} SMs (every CTA must be resident)")
    return why


def make_pipe_case(name, rows, cols, BLOCK=512, CHUNKS=8, STAGES=2, LOOK=4, CTAS=132,
                   small=True):
    return T.case(name, small=small, tags=() if small else ("h200",), rows=rows, cols=cols,
                  BLOCK=BLOCK, CHUNKS=CHUNKS, STAGES=STAGES, LOOK=LOOK, CTAS=CTAS)


SUITE_PIPE = T.suite(
    cumsum_pipe, inputs=inputs, reference=reference, outputs=["out"],
    cases=[
        # 5 tiles of 1024 (the last of 904) on 2 CTAs: 3 and 2 tiles, the ring wraps
        make_pipe_case("r1_c5000", rows=1, cols=5000, BLOCK=64, CHUNKS=4, CTAS=2, LOOK=1),
        # 3 rows of 12 tiles of 256 on 5 CTAs, 3 stages: rows start mid-CTA
        make_pipe_case("r3_c3004_s3", rows=3, cols=3004, BLOCK=32, CHUNKS=2, STAGES=3, CTAS=5,
                       LOOK=1),
        # 71 tiles of 128 per row on 4 CTAs: look-back windows of 64 flags are crossed
        make_pipe_case("r2_c9000_t128", rows=2, cols=9000, BLOCK=32, CHUNKS=1, CTAS=4, LOOK=2),
        # the H200's: 16K-element tiles in 2 or 3 stages (one CTA per SM), 8K in 3 (two). The
        # CTAs scan a wave of G tiles at about the same time, so a tile's nearest P is about G
        # tiles back: ceil(G / (32 LOOK)) look-back rounds (LOOK = 4: 2 rounds at G = 132)
        make_pipe_case("r1_c64M_t16k_s2", rows=1, cols=1 << 26, small=False),
        make_pipe_case("r1_c64M_t16k_s2_l2", rows=1, cols=1 << 26, LOOK=2, small=False),
        make_pipe_case("r1_c64M_t16k_s2_l8", rows=1, cols=1 << 26, LOOK=8, small=False),
        make_pipe_case("r1_c64M_t16k_s3", rows=1, cols=1 << 26, STAGES=3, small=False),
        make_pipe_case("r1_c64M_t8k_s3", rows=1, cols=1 << 26, BLOCK=256, STAGES=3, CTAS=264,
                       LOOK=8, small=False),
        make_pipe_case("r8_c4M_t16k_s2", rows=8, cols=1 << 22, small=False),
    ],
    tolerance=T.tolerance(rtol=0, atol=0),  # dyadic inputs: exact in any order (module docstring)
    constraints=pipe_constraints,
    flops=lambda rows, cols: rows * cols, bytes=lambda rows, cols: 8 * rows * cols,
    baselines=[{"name": "torch.cumsum", "args": {"x": "x"}},
               {"name": "torch.compile.cumsum", "args": {"x": "x"}}],
)
