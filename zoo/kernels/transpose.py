"""Matrix transpose through shared memory, bank-conflict free, sm_90a: out[c, r] = x[r, c].

x: [R, C] bf16, out: [C, R] bf16 (R, C multiples of 8).

Algorithm: a CTA of 256 threads moves a TR x 64 tile (TR = 64 or 128 input rows, 64 columns).
Load: 8 consecutive threads read one 128-byte tile row as 8 16-byte vectors
(``ld.global.v4.b32``: whole lines, every thread TR/32 loads in flight) and store them into
shared memory (``st.shared.v4.b32``). ``bar.sync``. Store: a thread builds 16-byte vectors of two
output rows (input columns 2p and 2p+1) from 8 input rows 8g..8g+7: it reads the 32-bit word
(columns 2p, 2p+1) of each of the 8 rows (``ld.shared.b32``) and pairs the low halves (column 2p)
and the high halves (column 2p+1) of consecutive rows with ``prmt.b32`` (selectors 0x5410 /
0x7632), giving 8 bf16 of each output row; 8 consecutive threads (g = 0..7) write one 128-byte
line of each output row (``st.global.v4.b32``). Tiles at the matrix edges predicate whole
vectors; out-of-range loads leave zeros, so shared memory is always written before it is read.

Bank conflicts: the tile is stored without padding but with an XOR swizzle of its 16-byte chunks,
chunk' = chunk ^ ((row / 8) mod 8). Why not padding: a pad that keeps 16-byte stores aligned is a
multiple of 4 words, and with a row stride of 36 words the 32 words a warp reads in one step (4
column pairs x 8 row groups, rows 8g + k) fall on banks 4k + p for every g: 8-way conflicts. With
the swizzle those words sit at banks 4 ((p/4) ^ g) + p mod 4: 32 distinct banks; and each
8-thread phase of a 16-byte store writes the 8 chunks of one row, a permutation of all 32
banks. Both directions are conflict-free and the tile keeps its 16-byte alignment.

Techniques: shared-memory tiling, XOR swizzle, byte permutes (prmt) to transpose 16-bit
elements in 32-bit words, vectorized 16-byte coalesced loads and stores, predicated edge tiles.

CTAS > 0: a persistent grid, the next tile's loads in flight while a tile is stored.

Tags: vectorized, smem-tiling, swizzle, bank-conflict-free, prmt, bf16, persistent
"""

import numpy as np

import tirxh.lang as T
from tirxh.core.types import numpy_dtype

TAGS = ("vectorized", "smem-tiling", "swizzle", "bank-conflict-free", "prmt", "bf16",
        "persistent")

BF16 = numpy_dtype("bf16")
BENCH = dict(small=False, tags=("h200",))  # large cases: timed on the H200, never simulated
TC = 64  # tile columns (input)
THREADS = 256


def _grid(R, C, TR, CTAS=0):
    if CTAS:
        return (min(CTAS, T.cdiv(C, TC) * T.cdiv(R, TR)),)
    return (T.cdiv(C, TC), T.cdiv(R, TR))


@T.kernel(grid=_grid, block=THREADS)
def transpose(x: T.gptr[T.bf16], out: T.gptr[T.bf16], R: T.u32, C: T.u32, TR: T.const = 128,
              CTAS: T.const = 0):
    """CTAS = 0: one tile per CTA (a 2-D grid). CTAS > 0: a persistent grid of CTAS CTAs, CTA c
    moving tiles c, c + G, ... with the next tile's loads issued right after this tile is in
    shared memory, so they are in flight while this tile is stored (a one-tile CTA has nothing
    in flight from its last load to its exit)."""
    tile = T.shared(T.b32, (TR, TC // 2), align=16, name="tile")
    tid = T.tid.x
    # load: thread -> (row tid/8 + 32m, chunk tid%8)
    lr = tid >> 3
    ch = tid & 7
    # store: thread -> (column pair p = tid/8, row group g = tid%8 (+8 for TR = 128))
    p = tid >> 3
    g = tid & 7

    def load(r0, c0, vecs):
        col_ok = c0 + ch * 8 < C
        for m, words in enumerate(vecs):
            row = r0 + lr + 32 * m
            for w in words:    # zeros where the tile leaves x
                w.set(0)
            T.ptx.ld.global_.v4.b32(words, x.at(row * C + c0 + ch * 8), pred=col_ok & (row < R))

    def stash(vecs):
        for m, words in enumerate(vecs):  # row lr + 32m: chunk ^ ((row / 8) mod 8)
            swz = ch ^ (((lr >> 3) + 4 * m) & 7)
            T.ptx.st.shared.v4.b32(tile.at(lr + 32 * m, swz * 4), words)

    def emit(r0, c0):
        oc = c0 + p * 2
        c_ok = oc < C
        for m in range(TR // 64):
            gg = g + 8 * m
            word = (((p >> 2) ^ g) << 2) + (p & 3)  # the swizzled word of column pair p
            w = [T.ptx.ld.shared.b32(tile.at(gg * 8 + k, word)) for k in range(8)]
            even = [T.ptx.prmt.b32(w[2 * i], w[2 * i + 1], 0x5410) for i in range(4)]
            odd = [T.ptx.prmt.b32(w[2 * i], w[2 * i + 1], 0x7632) for i in range(4)]
            ok = c_ok & (r0 + gg * 8 < R)
            T.ptx.st.global_.v4.b32(out.at(oc * R + r0 + gg * 8), even, pred=ok)
            T.ptx.st.global_.v4.b32(out.at((oc + 1) * R + r0 + gg * 8), odd, pred=ok)

    vecs = [[T.reg(T.b32) for _ in range(4)] for _ in range(TR // 32)]
    if not CTAS:
        r0 = T.ctaid.y * TR
        c0 = T.ctaid.x * TC
        load(r0, c0, vecs)
        stash(vecs)
        T.ptx.bar.sync(0)
        emit(r0, c0)
        return
    ncol = (C + (TC - 1)) / TC
    ntiles = ncol * ((R + (TR - 1)) / TR)
    grid = T.nctaid.x
    cta = T.ctaid.x
    mine = (ntiles - 1 - cta) / grid + 1       # tiles cta, cta + grid, ... below ntiles

    def origin(t):
        ty = t / ncol
        return ty * TR, (t - ty * ncol) * TC

    r0, c0 = origin(cta)
    load(r0, c0, vecs)
    with T.range(mine) as i:
        t = cta + i * grid
        r0, c0 = origin(t)
        stash(vecs)
        T.ptx.bar.sync(0)
        with T.if_(i + 1 < mine):             # the next tile's loads, in flight during emit
            nr0, nc0 = origin(t + grid)
            load(nr0, nc0, vecs)
        emit(r0, c0)
        T.ptx.bar.sync(0)                     # the tile read before the next stash


def constraints(R, C, TR, CTAS=0):
    out = []
    if CTAS < 0:
        out.append(f"CTAS={CTAS} must be 0 (a CTA per tile) or the persistent grid's size")
    if R < 8 or C < 8 or R % 8 or C % 8:
        out.append(f"R={R} and C={C} must be positive multiples of 8 (rows of x and of out are "
                   "moved as 16-byte vectors)")
    if TR not in (64, 128):
        out.append(f"TR={TR} must be 64 or 128")
    elif not CTAS and T.cdiv(R, TR) > 65535:
        out.append(f"R={R}: more than 65535 row tiles of TR={TR} (grid.y limit)")
    if R * C >= 1 << 32:
        out.append(f"R*C = {R * C} must be below 2^32 (u32 element offsets)")
    return out


def inputs(rng, R, C):
    return dict(x=rng.standard_normal((R, C), dtype=np.float32).astype(BF16),
                out=np.empty((C, R), BF16), R=R, C=C)


SUITE = T.suite(
    transpose, inputs=inputs, reference=lambda x: {"out": np.ascontiguousarray(x.T)},
    outputs=["out"],
    # TR = 128 is the default (H200, 2026-12-01, full clock: 139.76 us, 90.4% of the copy
    # bandwidth, against 143.30 us at TR = 64); the persistent grids measured slower
    cases=[T.case("r8_c8", R=8, C=8), T.case("r72_c136", R=72, C=136),
           T.case("r200_c96_tr64", R=200, C=96, TR=64),
           # persistent: every tile, edge tiles included, on 3 and 2 CTAs
           T.case("r200_c136_tr64_p3", R=200, C=136, TR=64, CTAS=3),
           T.case("r200_c96_p2", R=200, C=96, CTAS=2),
           T.case("r16384_c8192", R=16384, C=8192, **BENCH),
           T.case("r16384_c8192_tr64", R=16384, C=8192, TR=64, **BENCH),
           T.case("r16384_c8192_tr64_p1056", R=16384, C=8192, TR=64, CTAS=1056, **BENCH),
           T.case("r16384_c8192_tr64_p528", R=16384, C=8192, TR=64, CTAS=528, **BENCH),
           T.case("r16384_c8192_p528", R=16384, C=8192, CTAS=528, **BENCH)],
    tolerance=T.tolerance(rtol=0, atol=0),  # data movement: bitwise
    constraints=constraints, flops=lambda R, C: 0, bytes=lambda R, C: 4 * R * C,
    baselines=[{"name": f"torch{c}.transpose", "args": {"x": "x", "out": "out"}}
               for c in ("", ".compile")])
