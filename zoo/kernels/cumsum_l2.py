"""Inclusive prefix sum over long rows (f32) as reduce-then-scan through the L2, a segment at a
time: every element read from HBM once, no look-back chain.

Why another cumsum (issue 14; docs/TUNING.md "cumsum (session 22): the L2 between two
passes"): every chained scan here (`cumsum`, `cumsum_tma`, `cumsum_persist`, `cumsum_ws`) has a
tile wait for the aggregates of the tiles loading beside it, so a tile holds its share of the SM
through a dead time that does not shrink with the look-back's speed; the best, `cumsum_tma`
`_k8`, stays at 83% of copy bandwidth after eight sessions of variants. Reduce-then-scan has no
chain, but reads the data twice (12 bytes an element: 67% at most) -- unless the second read is
served by the L2. The H200's L2 holds 50 MB; a segment of G tiles (G the resident grid, one tile
a CTA) is 8.7 MB at the default shape. So per CTA c of a one-wave grid of G CTAs, segment s being
tiles s G .. s G + G - 1 (this CTA's: s G + c):

A(s): load the tile (``POL=1``: an ``L2::evict_last`` policy: it is read again), sum it (each
   thread its CHUNKS x VEC elements, a warp butterfly, thread 0 the warps' sums in order) and
   publish the sum in the tile's flag word (the f32 in the low half; above it `cumsum`'s status
   A and the launch's epoch: the scratch resets itself between launches);
B(s): warp 0 reads the segment's G flags (ceil(G / 32) a lane) until each carries this launch's
   epoch. That is the grid-wide wait, and the sums ride in it. The tile's exclusive prefix is the
   sum of the sums of its row's tiles before it in the segment, plus, when the row began in an
   earlier segment, the row's running prefix P, which every CTA carries in a register and
   advances per segment in the same lanes and order (so every CTA holds the same P). The tile is
   loaded again (``POL=1``: ``L2::evict_first``, its last use), scanned in registers
   (`cumsum`'s chunks and warp-totals scan) from that prefix, and stored.

Order: A(0), then A(s + 1) before B(s), so the wait for the slowest CTA's A(s) overlaps this
CTA's loads of the next segment; the L2 then holds two segments (17.3 MB) and the outputs
passing through. ``PIPE=1`` issues A(s + 1)'s loads before B(s) and sums them after it, so a
CTA has HBM reads in flight through its scan too (32 more registers a thread). Waiting on other CTAs is safe because the grid is one wave (`constraints`:
CTAS CTAs must fit the H200 at once; numsim's residency check agrees).

iket: each CTA's ``reduce`` (A) and ``scan`` (B) phases are ranges, and warp 0's wait for a
segment's sums a ``wait`` inside its ``scan``: ``tirxh profile --iket`` shows whether the
segments' waits or the phases' own latencies hold the SMs (nothing in a normal build).

Costs (predicted, docs/PERFORMANCE.md "Session 22"): HBM moves the minimum 8 bytes an element
when the second reads hit; the L2 serves 12. Each segment costs every CTA one flag round of the
G sums (~1 us of L2 latency, overlapped by the next segment's loads) and two warp sums.

Numerics: the in-tile order is `cumsum`'s; across tiles the prefix is a sum of sums (reduce
order): exact on the suite's dyadic inputs (`cumsum`'s docstring), and on general f32 data
within (log2(TILE) + tiles before it) x eps x sum |x|, as `cumsum`.

Tags: reduce-then-scan, l2-resident, persistent, grid-sync, vectorized, warp-shuffle, scan,
iket
Work: 1 FLOP and 8 bytes per element (HBM); 12 bytes per element through the L2.
"""


import tirxh.lang as T
from cumsum import (FULL, ST_A, _scan_chunks, _scan_totals, _warp_sum, reference, scan_inputs,
                    split_ticket)
from cumsum import constraints as tile_constraints

TAGS = ("reduce-then-scan", "l2-resident", "persistent", "grid-sync", "vectorized",
        "warp-shuffle", "scan", "iket")

H200_SMS, THREADS_PER_SM = 132, 2048
EVICT_LAST = ".L1::evict_last.L2::cache_hint"   # A's loads: read again in B
EVICT_FIRST = ".L1::evict_first.L2::cache_hint"  # B's loads: the last use


def tile_elems(BLOCK, CHUNKS, VEC) -> int:  # noqa: N803 (the kernel's parameter names)
    return BLOCK * CHUNKS * VEC


def ntiles(rows, cols, BLOCK, CHUNKS, VEC) -> int:  # noqa: N803
    return rows * T.cdiv(cols, tile_elems(BLOCK, CHUNKS, VEC))


def _grid(rows, cols, BLOCK=256, CHUNKS=8, VEC=4, CTAS=264):  # noqa: N803
    return min(CTAS, ntiles(rows, cols, BLOCK, CHUNKS, VEC))


@T.kernel(grid=_grid, block=lambda BLOCK: BLOCK)
def cumsum_l2(x: T.gptr[T.f32], out: T.gptr[T.f32], flags: T.gptr[T.u64],
              counter: T.gptr[T.u64], rows: T.u32, cols: T.u32, BLOCK: T.const = 256,
              CHUNKS: T.const = 8, VEC: T.const = 4, CTAS: T.const = 264, POL: T.const = 1,
              PIPE: T.const = 0):
    tile_n = tile_elems(BLOCK, CHUNKS, VEC)
    nw = BLOCK // 32
    nt = nw * CHUNKS
    wt = T.shared(T.f32, (nt,), name="wtot")      # the tile's warp-chunk totals (B)
    # the warps' sums of the tile (A), by the segment's parity: A(s + 1) follows A(s) with no
    # barrier between thread 0's reads and the next writes (racecheck found it); A(s + 2)'s
    # writes come after B(s)'s barriers
    wsum = T.shared(T.f32, (2, nw), name="wsum")
    bcast = T.shared(T.u32, (2,), name="epoch")
    tid = T.tid.x
    lane = T.laneid()
    warp = tid >> 5
    cta, grid = T.ctaid.x, T.nctaid.x
    per_row = T.ptx.div.u32(T.ptx.add.u32(cols, tile_n - 1), tile_n)
    total = rows * per_row
    nseg = T.ptx.div.u32(T.ptx.add.u32(total, grid - 1), grid)
    J = T.cdiv(CTAS, 32)   # noqa: N806  (flags a lane of warp 0 in a segment's round)

    # the launch's epoch: every launch takes exactly `grid` tickets, one a CTA
    with T.if_(tid == 0):
        split_ticket(T.ptx.atom.relaxed.gpu.global_.add.u64(counter.at(0), 1), grid, bcast)
    T.ptx.bar.sync(0)
    epoch = T.ptx.ld.shared.u32(bcast.at(1))
    tag = T.ptx.or_.b32(T.ptx.shl.b32(epoch, 2), ST_A)

    hints = {}
    if POL:   # one createpolicy per policy and thread
        hints = {"a": (EVICT_LAST, (T.ptx.createpolicy.fractional.L2__evict_last.b64(),)),
                 "b": (EVICT_FIRST, (T.ptx.createpolicy.fractional.L2__evict_first.b64(),))}
    e0 = tid * VEC
    step = BLOCK * VEC

    def where(t):
        """Tile t's row, its first column and its first element."""
        row = t / per_row
        col0 = (t - row * per_row) * tile_n
        return row, col0, row * cols + col0

    def load(t, phase):
        """This thread's CHUNKS x VEC elements of tile t (zeros past the row or the tiles)."""
        hint, extra = hints.get(phase, ("", ()))
        vld = T.ptx["ld.global" + hint + {4: ".v4.f32", 2: ".v2.f32", 1: ".f32"}[VEC]]
        _, col0, base = where(t)
        mine = t < total
        addr = x.at(base + e0)
        chunks = []
        for c in range(CHUNKS):
            ok = mine & (T.ptx.add.u32(col0, e0 + c * step if c else e0) < cols)
            v = [T.reg(T.f32, init=0.0) for _ in range(VEC)]
            vld(v if VEC > 1 else v[0], addr + 4 * c * step, *extra, pred=ok)
            chunks.append(v)
        return chunks, col0, base

    def reduce_phase(s, chunks=None):
        """A(s): the tile's sum into its flag (thread 0 adds the warps' sums in order);
        `chunks`: its loads, issued earlier (PIPE=1)."""
        t = s * grid + cta
        if chunks is None:
            chunks, _, _ = load(t, "a")
        part = None
        for v in chunks:
            for e in v:
                part = e if part is None else T.ptx.add.f32(part, e)
        warp_total = _warp_sum(part)
        par = s & 1
        with T.if_(lane == 0):
            T.ptx.st.shared.f32(wsum.at(par, warp), warp_total)
        T.ptx.bar.sync(0)
        with T.if_((tid == 0) & (t < total)):
            acc = T.ptx.ld.shared.f32(wsum.at(par, 0))
            for w in range(1, nw):
                acc = T.ptx.add.f32(acc, T.ptx.ld.shared.f32(wsum.at(par, w)))
            T.ptx.st.relaxed.gpu.global_.b64(flags.at(t), T.ptx.mov.b64([acc, tag]))

    P = T.reg(T.f32, init=0.0)   # noqa: N806  (the row's running prefix; warp 0's lanes)

    def segment_prefix(s, t):
        """Warp 0: wait for the segment's sums, return tile t's exclusive prefix (every lane)
        and advance P past the segment."""
        first = s * grid
        last = T.ptx.min.u32(first + grid, total) - 1
        sums = []
        for j in range(J):
            u = first + (lane + 32 * j if j else lane)
            ok = ((lane + 32 * j) < grid) & (u < total) if j else (lane < grid) & (u < total)
            sums.append((u, ok, T.reg(T.f32, init=0.0)))
        with T.iket.range("wait"), T.loop():   # every sum of the segment, this launch's
            ready = None
            for u, ok, val in sums:
                word = T.reg(T.b64, init=0)
                T.ptx.ld.relaxed.gpu.global_.b64(word, flags.at(u), pred=ok)
                lo, hi = T.reg(T.b32), T.reg(T.b32)
                T.ptx.mov.b64([lo, hi], word)
                val.set(T.ptx.mov.f32(lo))
                fresh = (hi == tag) | ~ok
                ready = fresh if ready is None else ready & fresh
            T.break_(T.ptx.vote.all.sync.pred(ready, FULL))

        def row_sum(lo, hi_excl):
            part = None
            for u, ok, val in sums:
                v = T.ptx.selp.f32(val, 0.0, ok & (u >= lo) & (u < hi_excl))
                part = v if part is None else T.ptx.add.f32(part, v)
            return _warp_sum(part)
        row_t, _, _ = where(t)
        lo_t = T.ptx.max.u32(first, row_t * per_row)
        prefix = T.ptx.add.f32(T.ptx.selp.f32(P, 0.0, row_t * per_row < first),
                               row_sum(lo_t, t))
        row_l = last / per_row
        lo_l = T.ptx.max.u32(first, row_l * per_row)
        P.set(T.ptx.add.f32(T.ptx.selp.f32(P, 0.0, row_l * per_row < first),
                            row_sum(lo_l, last + 1)))
        return prefix

    def scan_phase(s):
        """B(s): the tile again (from the L2), scanned from its prefix, stored."""
        t = s * grid + cta
        chunks, col0, base = load(t, "b")
        # lane 31's stores of the warp's totals below overwrite the words every lane read at the
        # end of B(s - 1): A(s + 1)'s barrier orders them, except in the last segment (no A);
        # the warp's shuffles order no memory (race.converged-lanes)
        T.ptx.bar.warp.sync(FULL)
        _scan_chunks(chunks, lane, lambda c: wt.at(c * nw + warp))
        T.ptx.bar.sync(0)
        with T.if_(warp == 0, uniform=True):
            _, write_back = _scan_totals(wt, nt, lane)
            write_back(segment_prefix(s, t))
        T.ptx.bar.sync(0)
        vst = {4: T.ptx.st.global_.v4.f32, 2: T.ptx.st.global_.v2.f32, 1: T.ptx.st.global_.f32}
        oaddr = out.at(base + e0)
        for c, v in enumerate(chunks):
            ok = (t < total) & (T.ptx.add.u32(col0, e0 + c * step if c else e0) < cols)
            off = T.ptx.ld.shared.f32(wt.at(c * nw + warp))
            vst[VEC](oaddr + 4 * c * step, [T.ptx.add.f32(vi, off) for vi in v] if VEC > 1
                     else T.ptx.add.f32(v[0], off), pred=ok)

    with T.iket.range("reduce"):
        reduce_phase(0)
    with T.range(nseg) as s:
        if PIPE:   # A(s + 1)'s loads in flight under B(s); its sum after
            ahead = []
            with T.if_(s + 1 < nseg, uniform=True):
                ahead.append(load(s * grid + grid + cta, "a")[0])
            with T.iket.range("scan"):
                scan_phase(s)
            with T.if_(s + 1 < nseg, uniform=True), T.iket.range("reduce"):
                reduce_phase(s + 1, ahead[0])
        else:
            with T.if_(s + 1 < nseg, uniform=True), T.iket.range("reduce"):
                reduce_phase(s + 1)
            with T.iket.range("scan"):
                scan_phase(s)


def constraints(rows, cols, BLOCK, CHUNKS, VEC, CTAS, POL, PIPE=0):
    """The shapes `cumsum_l2` accepts (checked when the suite is declared): `cumsum`'s tile
    rules, and a grid that is one wave (every CTA waits on every other)."""
    why = tile_constraints(rows, cols, BLOCK, CHUNKS, VEC, 1, 0)
    # threads per SM bound it here; registers are checked by numsim's residency and by the
    # compiled kernel's report (tests/zoo/test_cumsum_l2.py)
    per_sm = min(THREADS_PER_SM // BLOCK, 2) if BLOCK % 32 == 0 and 32 <= BLOCK <= 1024 else 0
    if not 1 <= CTAS <= H200_SMS * per_sm:
        why.append(f"CTAS={CTAS} must be in [1, {H200_SMS * per_sm}]: at most 2 CTAs an SM on "
                   f"{H200_SMS} SMs, one wave (every CTA waits on every other)")
    if POL not in (0, 1):
        why.append(f"POL={POL} must be 0 (no L2 policy) or 1 (evict-last, then evict-first)")
    if PIPE not in (0, 1):
        why.append(f"PIPE={PIPE} must be 0 (A(s + 1), then B(s)) or 1 (A(s + 1)'s loads in "
                   "flight under B(s))")
    return why


def make_case(name, rows, cols, BLOCK=256, CHUNKS=8, CTAS=264, POL=1, PIPE=0, small=True):
    vec = next(v for v in (4, 2, 1) if cols % v == 0)
    return T.case(name, small=small, tags=() if small else ("h200",), rows=rows, cols=cols,
                  BLOCK=BLOCK, CHUNKS=CHUNKS, VEC=vec, CTAS=CTAS, POL=POL,
                  **({"PIPE": PIPE} if PIPE else {}))


def inputs(rng, rows, cols, BLOCK=256, CHUNKS=8, VEC=4, CTAS=264):  # noqa: N803
    return scan_inputs(rng, rows, cols, ntiles(rows, cols, BLOCK, CHUNKS, VEC))


SUITE = T.suite(
    cumsum_l2, inputs=inputs, reference=reference, outputs=["out"],
    cases=[
        # 5 tiles of 1024 (the last of 904) on 2 CTAs: 3 segments, the last half empty
        make_case("r1_c5000", rows=1, cols=5000, BLOCK=64, CHUNKS=4, CTAS=2),
        # 3 rows of 12 tiles of 256 on 5 CTAs: rows begin and end inside segments, a row spans
        # three segments (P carried), odd VEC 4 tail (3004 = 11 x 256 + 188)
        make_case("r3_c3004", rows=3, cols=3004, BLOCK=32, CHUNKS=2, CTAS=5),
        # 40 CTAs (two flag words a lane of warp 0), 3 rows of 18 tiles of 128 in segments of
        # 40 and 14, VEC 1 (odd width), no L2 policy
        make_case("r3_c2301_g40", rows=3, cols=2301, BLOCK=32, CHUNKS=4, CTAS=40, POL=0),
        # PIPE=1: A(s + 1)'s loads issued before B(s), summed after it (2 warps, a row carried)
        make_case("r3_c3004_pp", rows=3, cols=3004, BLOCK=64, CHUNKS=2, CTAS=3, PIPE=1),
        # the H200's: 8K-element tiles, 264 CTAs (2 an SM: a segment of 8.7 MB), and 16K tiles
        # (64 KB: a segment of 17.3 MB, two in the L2 at once: 34.6 MB of 50)
        make_case("r1_c64M", rows=1, cols=1 << 26, small=False),
        make_case("r1_c64M_p0", rows=1, cols=1 << 26, POL=0, small=False),
        make_case("r1_c64M_c16", rows=1, cols=1 << 26, CHUNKS=16, small=False),
        make_case("r8_c4M", rows=8, cols=1 << 22, small=False),
        make_case("r1_c64M_pp", rows=1, cols=1 << 26, PIPE=1, small=False),
    ],
    tolerance=T.tolerance(rtol=0, atol=0),  # dyadic inputs: exact in any order
    constraints=constraints,
    flops=lambda rows, cols: rows * cols, bytes=lambda rows, cols: 8 * rows * cols,
    baselines=[{"name": "torch.cumsum", "args": {"x": "x"}},
               {"name": "torch.compile.cumsum", "args": {"x": "x"}}],
)
