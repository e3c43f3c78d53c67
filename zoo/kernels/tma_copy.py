"""A 2-D tiled copy with TMA through shared memory, sm_90a: out[r, c] = x[r, c].

x, out: [R, C] bf16 (C a multiple of 8: TMA needs 16-byte row strides).

Algorithm: a persistent grid of G CTAs (G = min(tiles, CTAS)) walks the BR x BC tiles of the
matrix, CTA i taking tiles i, i + G, i + 2G, ... One thread per CTA drives the copy engine:
- prologue: for each of the first STAGES tiles, ``mbarrier.arrive.expect_tx`` on the stage's
  `full` barrier with the tile's byte count, then ``cp.async.bulk.tensor.2d.shared::cluster.
  global.tile.mbarrier::complete_tx::bytes`` (TMA load of the box at (col, row) into the stage);
- loop over the CTA's tiles: wait for the stage's `full` phase (``mbarrier.try_wait.parity``),
  store the stage with ``cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group`` and
  ``cp.async.bulk.commit_group``; then ``cp.async.bulk.wait_group.read 1`` (every store but the
  newest has finished *reading* shared memory) frees the previous tile's stage, which is refilled
  with the tile STAGES - 1 ahead. So STAGES - 1 loads and one store are in flight at all times,
  and no register ever holds the data. LAG=2 (session 10) waits with ``wait_group.read 2`` and
  refills the stage of the tile two back instead: the one issuing thread no longer blocks on the
  store it issued one tile ago (ncu, session 10: 17.5% of its stall samples sit on that wait),
  at the price of one stage that is neither loading nor stored;
- ``cp.async.bulk.wait_group 0`` before the CTA exits.
Tiles at the edges are handled by TMA itself: a load fills the box's out-of-bounds elements with
zeros, a store writes only the in-bounds ones, so any R and C (multiple of 8) is exact.

BULK=1 copies the matrix as one flat array in 1-D chunks of BR * BC elements instead
(``cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes`` and
``cp.async.bulk.global.shared::cta.bulk_group``, no tensor map): each chunk is contiguous in
memory (a 64 x 128 box touches 64 rows, 256 bytes each) and the last chunk is short (its byte
count, ``min.u32``, arms the mbarrier and sizes both copies). Smaller chunks also even out the
CTAs' shares: 16384 tiles over 396 CTAs leave some CTAs one tile (2.4%) more than others.

POL=1 adds ``.L2::cache_hint`` with a ``createpolicy.fractional.L2::evict_first.b64`` policy to
the loads (each input line is read once: torch.compile's kernels mark such loads evict-first),
POL=2 to the stores as well (the output is never read back by the kernel). Both ran slower
(session 6: -3% and -6%), as evict-first rows did in rmsnorm (-3.9%), where evict-*last* rows
ran 3.3% faster (`_tri_pol2`). POL=3 (session 11) gives the loads an
``L2::evict_last`` policy and the stores none: the L2 then picks the written (dirty) lines as
its victims first, so the write-back stream leaves in the order it was written instead of being
forced out set by set when the cache fills (docs/TUNING.md "tma_copy: which path costs").

Bytes in flight (session 10): a CTA keeps STAGES - LAG boxes loading (`loads_in_flight`), so
the default 3 CTAs x 3 x 16 KB hold ~144 KB of loads per SM, ~9x what Little's law asks. The
register copy below ran 3-4% faster at ~32 KB per SM and as slow as this one at 64-128 KB (its
UNROLL cases), so the cases named ``_s2``/``_s3``/``_s5`` with ``_b32`` (8 KB boxes) and
``_p128``/``_p256``/``_p512`` grids hold 16-48 KB per SM with the same ring and code.

`reg_copy` (session 6) is the control that tells a TMA limit from an HBM one: the copy as
torch.compile's pointwise kernel does it, through registers, no shared memory and no hints:
thread t of a CTA of BLOCK owns the 16-byte vectors (CTA * UNROLL + u) * BLOCK + t, u < UNROLL,
each ``@p ld.global.v4.b32`` (p: the vector is below R * C / 8) issued before the first
``@p st.global.v4.b32``. BLOCK = 128, UNROLL = 1 is inductor's XBLOCK = 1024 with 4 warps.

`path_copy` (session 11) is reg_copy's geometry with the load, the store or both taken by one
1-D bulk copy a CTA (LD, ST): with reg_copy and tma_copy in the same job, the 2 x 2 says which
half of the TMA copy costs it its ~4% against the register copy (docs/TUNING.md "tma_copy:
which path costs").

PERSIST=0 (session 13) is tma_copy with path_copy's geometry, the 2-D tensor copies kept: no
ring and no persistent walk, CTA t copies box t (row-major over the R x C tiles, so the CTAs an
SM holds at once cover a band of adjacent boxes, as path_copy's chunks do) with one
``cp.async.bulk.tensor.2d`` load on one mbarrier and one tensor store, then leaves after
``wait_group.read 0`` (its slot goes to the next box while the writes drain). BLOCK threads
per CTA (thread 0 copies) set how many CTAs an SM holds: BLOCK 128 gives path_copy's 16, so
2 KB boxes (8 x 128 or 4 x 256) hold its 32 KB of loads per SM. Session 13's factorial said
why this geometry: path_copy with both halves by 1-D bulk copies of 2 KB ran as fast as the
register copy, and with 16 KB a CTA as slow as this ring (docs/TUNING.md "tma_copy: one box per
CTA"). Measured (session 14, 200 rounds): `r16384_c8192_one_b8x128_pol3` 127.78 us, 98.9% of
the copy bandwidth, 1.004x torch.compile's copy: the kernel's best case, and the first TMA copy
here at least as fast as both baselines; 32 CTAs per SM and 4 KB boxes ran the same.

Techniques: TMA (tensor maps, bulk tensor copies, 1-D bulk copies), mbarrier transaction-count completion, a
STAGES-deep shared-memory ring, bulk async-groups (wait_group.read to recycle a stage early),
persistent CTAs, single-thread issue.

Tags: tma, mbarrier-pipeline, persistent, bulk-async-group, data-movement, bf16, vectorized
"""

import numpy as np

import tirxh.lang as T
from tirxh.core.types import numpy_dtype

TAGS = ("tma", "mbarrier-pipeline", "persistent", "bulk-async-group", "data-movement", "bf16",
        "vectorized")

BF16 = numpy_dtype("bf16")
BENCH = dict(small=False, tags=("h200",))  # large cases: timed on the H200, never simulated


def tiles(R, C, BR, BC):
    return T.cdiv(R, BR) * T.cdiv(C, BC)


def chunks(R, C, BR, BC):
    return T.cdiv(R * C, BR * BC)


def loads_in_flight(BR, BC, STAGES, LAG=1):
    """Bytes of TMA loads one CTA keeps in flight in steady state: the ring refills a stage only
    after the next tile has landed and the store LAG tiles back has read its stage, so
    STAGES - LAG boxes of BR x BC bf16 are loading while LAG are being stored. Times the CTAs
    per SM, this is the figure Little's law compares with bandwidth x latency (16 B/ns of reads
    per SM at 4.25 TB/s of copy traffic: ~16 KB at ~1 us of loaded latency)."""
    return (STAGES - LAG) * BR * BC * 2


def _grid(R, C, BR, BC, CTAS, BULK, PERSIST):
    if not PERSIST:  # one box per CTA: the grid is the tiles
        return tiles(R, C, BR, BC)
    return min(chunks(R, C, BR, BC) if BULK else tiles(R, C, BR, BC), CTAS)


@T.kernel(grid=_grid, block=lambda BLOCK: BLOCK)
def tma_copy(x_map: T.tensormap, out_map: T.tensormap, x: T.gptr[T.bf16],
             out: T.gptr[T.bf16], R: T.u32, C: T.u32, BR: T.const = 64, BC: T.const = 128,
             STAGES: T.const = 4, CTAS: T.const = 396, BULK: T.const = 0, POL: T.const = 0,
             LAG: T.const = 1, PERSIST: T.const = 1, BLOCK: T.const = 32):
    lh = ".L2::cache_hint" if POL else ""  # POL: L2 policies (module docstring)
    sh = ".L2::cache_hint" if POL == 2 else ""
    tma_load = T.ptx["cp.async.bulk.tensor.2d.shared::cluster.global.tile"
                     ".mbarrier::complete_tx::bytes" + lh]
    tma_store = T.ptx["cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group" + sh]
    bulk_load = T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes" + lh]
    bulk_store = T.ptx["cp.async.bulk.global.shared::cta.bulk_group" + sh]
    depth = STAGES if PERSIST else 1  # PERSIST=0: one box, one stage, no ring
    buf = T.shared(T.bf16, (depth, BR, BC), align=1024, dynamic=True, name="buf")
    full = T.mbarrier(depth, name="full", dynamic=True)
    box_bytes = BR * BC * 2
    chunk = BR * BC  # BULK: elements per 1-D chunk
    with T.if_(T.tid.x == 0):
        policy = None
        if POL:
            policy = (T.ptx.createpolicy.fractional.L2__evict_last.b64() if POL == 3 else
                      T.ptx.createpolicy.fractional.L2__evict_first.b64())
        lp = (policy,) if POL else ()  # the policy operand of the hinted copies
        sp = (policy,) if POL == 2 else ()
        grid = T.nctaid.x if PERSIST else None  # PERSIST=0: the CTA's one tile is tile `cta`
        cta = T.ctaid.x
        if BULK:
            total = R * C
            ntiles = (total + (chunk - 1)) / chunk
        else:
            col_tiles = (C + (BC - 1)) / BC
            ntiles = ((R + (BR - 1)) / BR) * col_tiles if PERSIST else None
        mine = (ntiles - 1 - cta) / grid + 1 if PERSIST else None  # tiles cta, cta + grid, ...

        def coords(k):
            """(col, row) of the CTA's k-th tile: ``mad``, ``div``, ``mul``, ``sub``."""
            t = cta + k * grid if PERSIST else cta
            tr = t / col_tiles
            return T.ptx.mov.s32((t - tr * col_tiles) * BC), T.ptx.mov.s32(tr * BR)

        def span(k):
            """BULK: (first element, bytes) of the CTA's k-th chunk; the last chunk is short
            (``mad``, ``mul``, ``sub``, ``min.u32``, ``shl``)."""
            off = (cta + k * grid) * chunk
            return off, T.ptx.min.u32(total - off, chunk) << 1

        def load(k, stage):
            if BULK:
                off, nbytes = span(k)
                full[stage].arrive_expect_tx(nbytes)
                bulk_load(buf.at(stage), x.at(off), nbytes, full[stage], *lp)
            else:
                full[stage].arrive_expect_tx(box_bytes)
                tma_load(buf.at(stage), x_map[coords(k)], full[stage], *lp)

        def store(k, stage):
            if BULK:
                off, nbytes = span(k)
                bulk_store(out.at(off), buf.at(stage), nbytes, *sp)
            else:
                tma_store(out_map[coords(k)], buf.at(stage), *sp)

        if not PERSIST:  # path_copy's `_lbsb` with a 2-D box (module docstring): no ring
            full[0].init(1)
            T.ptx.fence.mbarrier_init.release.cluster()
            load(0, 0)
            full[0].wait(0)
            store(0, 0)
            T.ptx.cp.async_.bulk.commit_group()
            # .read: the CTA may leave (its slot taken by the next box) once the store has read
            # shared memory; the global writes complete on their own, as path_copy's
            T.ptx.cp.async_.bulk.wait_group.read(0)  # the box is read before the CTA frees it
            return
        for s in range(STAGES):
            full[s].init(1)
        T.ptx.fence.mbarrier_init.release.cluster()
        for s in range(STAGES):
            with T.if_(mine > s):
                load(s, s)
        ring = T.pipeline(STAGES)
        prev = [T.reg(T.u32, init=0) for _ in range(LAG)]  # stages of tiles k-1, ..., k-LAG
        with T.range(mine) as k:
            full[ring.stage].wait(ring.phase)
            store(k, ring.stage)
            T.ptx.cp.async_.bulk.commit_group()
            with T.if_((k > LAG - 1) & (k + (STAGES - LAG) < mine)):
                T.ptx.cp.async_.bulk.wait_group.read(LAG)  # tile k-LAG's store has read
                load(k + (STAGES - LAG), prev[LAG - 1])
            for j in range(LAG - 1, 0, -1):
                prev[j].set(prev[j - 1])
            prev[0].set(ring.stage)
            ring.advance()
        T.ptx.cp.async_.bulk.wait_group(0)


def constraints(R, C, BR, BC, STAGES, CTAS, BULK=0, POL=0, LAG=1, PERSIST=1, BLOCK=32):
    out = []
    if PERSIST not in (0, 1):
        out.append(f"PERSIST={PERSIST} must be 1 (a persistent ring) or 0 (one box per CTA)")
    elif not PERSIST and (BULK or (STAGES, CTAS, LAG) != (4, 396, 1)):
        out.append(f"PERSIST=0 copies one 2-D box per CTA with no ring: BULK={BULK}, "
                   f"STAGES={STAGES}, CTAS={CTAS}, LAG={LAG} must stay 0, 4, 396, 1 (1-D "
                   "chunks one per CTA are path_copy's `_lbsb`)")
    if BLOCK % 32 or not 32 <= BLOCK <= 1024:
        out.append(f"BLOCK={BLOCK} must be a multiple of 32 in 32..1024 (thread 0 copies; the "
                   "others only set how many CTAs an SM holds)")
    if not 1 <= LAG < STAGES:
        out.append(f"LAG={LAG} must be in [1, STAGES={STAGES}): the stores left reading before "
                   "a stage is refilled, at least one stage loading")
    if POL not in (0, 1, 2, 3):
        out.append(f"POL={POL} must be 0 (no policy), 1 (evict-first loads), 2 (loads and "
                   "stores) or 3 (evict-last loads)")
    if BULK not in (0, 1):
        out.append(f"BULK={BULK} must be 0 (2-D tensor tiles) or 1 (1-D chunks of BR*BC "
                   "elements)")
    if R < 1 or C < 8 or C % 8:
        out.append(f"R={R} must be >= 1 and C={C} a positive multiple of 8 (TMA needs 16-byte "
                   "row strides)")
    if not (1 <= BR <= 256 and 8 <= BC <= 256 and BC % 8 == 0):
        out.append(f"box BR x BC = {BR} x {BC}: each side at most 256 elements, BC a multiple "
                   "of 8 (16-byte box rows)")
    if PERSIST and (STAGES < 2 or STAGES * BR * BC * 2 + 8 * STAGES > 227 * 1024):
        out.append(f"STAGES={STAGES}: need at least 2 stages and STAGES * BR * BC * 2 bytes "
                   "within 227 KiB of shared memory")
    if CTAS < 1 or R * C >= 1 << 32:
        out.append(f"CTAS={CTAS} must be >= 1 and R*C below 2^32")
    return out


def inputs(rng, R, C, BR=64, BC=128):
    return dict(x=rng.standard_normal((R, C), dtype=np.float32).astype(BF16),
                out=np.empty((R, C), BF16), R=R, C=C,
                x_map=T.TensorMap("x", box=(BR, BC)), out_map=T.TensorMap("out", box=(BR, BC)))


SUITE = T.suite(
    tma_copy, inputs=inputs, reference=lambda x: {"out": x.copy()}, outputs=["out"],
    cases=[T.case("r8_c8", R=8, C=8, BR=8, BC=8, STAGES=2),
           T.case("r100_c200_s2", R=100, C=200, BR=32, BC=64, STAGES=2, CTAS=3),
           T.case("r130_c264", R=130, C=264, BR=64, BC=128, STAGES=3, CTAS=2),
           T.case("r16384_c8192", R=16384, C=8192, **BENCH),
           T.case("r16384_c8192_b128x128_s3", R=16384, C=8192, BR=128, BC=128, STAGES=3,
                  CTAS=264, **BENCH),
           T.case("r16384_c8192_b32x256_s6", R=16384, C=8192, BR=32, BC=256, STAGES=6,
                  CTAS=264, **BENCH),  # 96 KiB of stages: 2 CTAs per SM
           T.case("r8_c8_bulk", R=8, C=8, BR=8, BC=8, STAGES=2, BULK=1),
           T.case("r100_c200_s2_bulk", R=100, C=200, BR=32, BC=64, STAGES=2, CTAS=3, BULK=1),
           # 1-D chunks of 16 KiB (one row) and of 8 KiB, 64 KiB of stages: 3 CTAs per SM
           T.case("r16384_c8192_bulk", R=16384, C=8192, BULK=1, **BENCH),
           T.case("r16384_c8192_bulk_8k_s8", R=16384, C=8192, BR=16, BC=256, STAGES=8,
                  BULK=1, **BENCH),
           # session 6 (docs/TUNING.md "Session 6"): evict-first policies; grids whose CTAs
           # take equal shares (16384 tiles: 256 CTAs of 64, or 128 of 128 with a deeper ring)
           T.case("r100_c200_s2_pol", R=100, C=200, BR=32, BC=64, STAGES=2, CTAS=3, POL=1),
           T.case("r100_c200_s2_bulk_pol2", R=100, C=200, BR=32, BC=64, STAGES=2, CTAS=3,
                  BULK=1, POL=2),
           T.case("r130_c264_pol2", R=130, C=264, BR=64, BC=128, STAGES=3, CTAS=2, POL=2),
           T.case("r16384_c8192_p256", R=16384, C=8192, CTAS=256, **BENCH),
           T.case("r16384_c8192_pol", R=16384, C=8192, POL=1, **BENCH),
           T.case("r16384_c8192_pol2", R=16384, C=8192, POL=2, **BENCH),
           T.case("r16384_c8192_p256_s6", R=16384, C=8192, STAGES=6, CTAS=256, **BENCH),
           T.case("r16384_c8192_p128_s12", R=16384, C=8192, STAGES=12, CTAS=128, **BENCH),
           # session 10 (docs/TUNING.md "tma_copy and softmax_tma: bytes in flight"): the TMA
           # copy holds ~144 KB of loads per SM where Little's law asks ~16; these keep ~16-48
           # KB (`loads_in_flight`), the same ring, equal shares where the grid allows
           T.case("r100_c200_b16_s5_cta2", R=100, C=200, BR=16, BC=64, STAGES=5, CTAS=2),
           T.case("r16384_c8192_b32_s3_p256", R=16384, C=8192, BR=32, STAGES=3, CTAS=256,
                  **BENCH),
           T.case("r16384_c8192_s2_p256", R=16384, C=8192, STAGES=2, CTAS=256, **BENCH),
           T.case("r16384_c8192_b32_s2_p512", R=16384, C=8192, BR=32, STAGES=2, CTAS=512,
                  **BENCH),
           T.case("r16384_c8192_b32_s5_p128", R=16384, C=8192, BR=32, STAGES=5, CTAS=128,
                  **BENCH),
           T.case("r16384_c8192_s2", R=16384, C=8192, STAGES=2, **BENCH),
           T.case("r16384_c8192_b32_s2_p256", R=16384, C=8192, BR=32, STAGES=2, CTAS=256,
                  **BENCH),
           # LAG=2: refill after the store two tiles back has read (31 KB/SM as _b32_s3_p256)
           T.case("r100_c200_s4_lag2", R=100, C=200, BR=32, BC=64, STAGES=4, CTAS=3, LAG=2),
           T.case("r16384_c8192_b32_s4_lag2_p256", R=16384, C=8192, BR=32, STAGES=4, CTAS=256,
                  LAG=2, **BENCH),
           # session 11: evict-last loads, plain stores (docs/TUNING.md "tma_copy: which path
           # costs"): on the default ring and on the 1-D chunks
           T.case("r100_c200_s2_pol3", R=100, C=200, BR=32, BC=64, STAGES=2, CTAS=3, POL=3),
           T.case("r100_c200_s2_bulk_pol3", R=100, C=200, BR=32, BC=64, STAGES=2, CTAS=3,
                  BULK=1, POL=3),
           T.case("r16384_c8192_pol3", R=16384, C=8192, POL=3, **BENCH)]
    # session 13: path_copy's geometry with 2-D boxes (docs/TUNING.md "tma_copy: one box per
    # CTA"): small, boxes past both edges (TMA's zero fill and clipped stores), idle threads
    + [T.case("r3_c24_one", R=3, C=24, BR=8, BC=16, PERSIST=0),
       T.case("r100_c200_one", R=100, C=200, BR=8, BC=64, PERSIST=0, BLOCK=64),
       # POL=3 (named `_el`: MODE=tma8's smoke selects `pol3` by substring)
       T.case("r100_c200_one_b4x128_el", R=100, C=200, BR=4, BC=128, PERSIST=0, POL=3,
              BLOCK=128)]
    # large: 2 KB boxes (8 x 128: eight 256-byte rows; 4 x 256: four 512-byte rows), 131072
    # CTAs; BLOCK sets CTAs per SM (the thread limit): 128 -> 16, path_copy's 32 KB per SM
    + [T.case(f"r16384_c8192_one_b{br}x{bc}{t}{p}", R=16384, C=8192, BR=br, BC=bc, PERSIST=0,
              BLOCK=block, **(dict(POL=3) if p else {}), **BENCH)
       for br, bc, block, t, p in ((8, 128, 128, "", "_pol3"), (8, 128, 128, "", ""),
                                   (4, 256, 128, "", "_pol3"),
                                   # 32 CTAs per SM (64 KB): depth at the same 2 KB box
                                   (8, 128, 64, "_t64", "_pol3"),
                                   # 4 KB boxes, 8 CTAs per SM (32 KB): box size at one depth
                                   (16, 128, 256, "_t256", "_pol3"))],
    tolerance=T.tolerance(rtol=0, atol=0),  # a copy: bitwise
    constraints=constraints, flops=lambda R, C: 0, bytes=lambda R, C: 4 * R * C,
    baselines=[{"name": f"torch{c}.copy", "args": {"x": "x", "out": "out"}}
               for c in ("", ".compile")])


# --- reg_copy: the register copy torch.compile generates (module docstring) -------------------

def _reg_grid(R, C, BLOCK, UNROLL):
    return max(1, T.cdiv(R * C // 8, BLOCK * UNROLL))


EVICT_LAST = ".L1::evict_last.L2::cache_hint"  # POL=1's load qualifiers (rmsnorm `_tri_pol2`)


@T.kernel(grid=_reg_grid, block=lambda BLOCK: BLOCK)
def reg_copy(x: T.gptr[T.bf16], out: T.gptr[T.bf16], R: T.u32, C: T.u32, BLOCK: T.const = 128,
             UNROLL: T.const = 1, POL: T.const = 0):
    """POL=1 (session 11): the loads ``ld.global.L1::evict_last.L2::cache_hint.v4.b32`` with a
    ``createpolicy.fractional.L2::evict_last.b64`` policy, as rmsnorm `_tri_pol2` reads its rows
    (3.3% faster than without, where evict-first rows ran 3.9% slower): the stores stay plain."""
    nvec = (R * C) >> 3
    first = T.ctaid.x * (BLOCK * UNROLL) + T.tid.x
    ld = T.ptx["ld.global" + (EVICT_LAST if POL else "") + ".v4.b32"]
    extra = (T.ptx.createpolicy.fractional.L2__evict_last.b64(),) if POL else ()
    held = []
    for u in range(UNROLL):  # every load before the first store
        v = first + u * BLOCK if u else first
        ok = v < nvec
        words = [T.reg(T.b32) for _ in range(4)]
        ld(words, x.at(v * 8), *extra, pred=ok)
        held.append((v, ok, words))
    for v, ok, words in held:
        T.ptx.st.global_.v4.b32(out.at(v * 8), words, pred=ok)


def reg_constraints(R, C, BLOCK, UNROLL, POL=0):
    out = [] if POL in (0, 1) else [f"POL={POL} must be 0 (no policy) or 1 (evict-last loads)"]
    if R < 1 or C < 8 or C % 8 or R * C >= 1 << 32:
        out.append(f"R={R} must be >= 1, C={C} a positive multiple of 8 (16-byte vectors) and "
                   "R*C below 2^32")
    if BLOCK % 32 or not 32 <= BLOCK <= 1024 or not 1 <= UNROLL <= 8:
        out.append(f"BLOCK={BLOCK} must be a multiple of 32 in 32..1024 and UNROLL={UNROLL} in "
                   "1..8")
    return out


REG_COPY = T.suite(
    reg_copy, inputs=lambda rng, R, C: dict(
        x=rng.standard_normal((R, C), dtype=np.float32).astype(BF16),
        out=np.empty((R, C), BF16), R=R, C=C),
    reference=lambda x: {"out": x.copy()}, outputs=["out"],
    cases=[T.case("r8_c8", R=8, C=8, BLOCK=32),  # 8 vectors: 24 threads predicated off
           T.case("r100_c200_b32_u2", R=100, C=200, BLOCK=32, UNROLL=2),  # a partial last CTA
           T.case("r16384_c8192", R=16384, C=8192, **BENCH),  # inductor's geometry
           T.case("r16384_c8192_b256_u2", R=16384, C=8192, BLOCK=256, UNROLL=2, **BENCH),
           T.case("r16384_c8192_b128_u4", R=16384, C=8192, UNROLL=4, **BENCH),
           # session 11: evict-last loads (docs/TUNING.md "tma_copy: which path costs")
           T.case("r100_c200_b32_u2_pol", R=100, C=200, BLOCK=32, UNROLL=2, POL=1),
           T.case("r16384_c8192_pol", R=16384, C=8192, POL=1, **BENCH)],
    tolerance=T.tolerance(rtol=0, atol=0), constraints=reg_constraints,
    flops=lambda R, C: 0, bytes=lambda R, C: 4 * R * C,
    baselines=[{"name": f"torch{c}.copy", "args": {"x": "x", "out": "out"}}
               for c in ("", ".compile")])


# --- path_copy: which half of the TMA copy costs (session 11) ---------------------------------

def _chunk_bytes(BLOCK, UNROLL):
    return BLOCK * UNROLL * 16


@T.kernel(grid=_reg_grid, block=lambda BLOCK: BLOCK)
def path_copy(x: T.gptr[T.bf16], out: T.gptr[T.bf16], R: T.u32, C: T.u32,
              BLOCK: T.const = 128, UNROLL: T.const = 1, LD: T.const = 1, ST: T.const = 0,
              POL: T.const = 0):
    """`reg_copy`'s geometry (CTA c copies the contiguous chunk c of BLOCK * UNROLL 16-byte
    vectors, one CTA per chunk, no ring) with each half of the copy taken by either path, so
    that a 2 x 2 factorial with `reg_copy` (LD=0, ST=0) tells which half costs the TMA copy its
    ~4% (docs/TUNING.md "tma_copy: which path costs"):

    - LD=1: thread 0 initialises one mbarrier, arms it with the chunk's bytes and issues one
      ``cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes``; LD=0: each thread
      ``ld.global.v4.b32`` its vectors (POL=1: ``.L1::evict_last.L2::cache_hint``, LD=1:
      ``.L2::cache_hint``, with an ``L2::evict_last`` policy);
    - ST=1: the chunk leaves shared memory by one ``cp.async.bulk.global.shared::cta.bulk_group``
      (thread 0; ``commit_group``, ``wait_group.read 0`` before the CTA may exit and free the
      chunk); ST=0: each thread ``st.global.v4.b32`` its vectors.

    LD=0, ST=1 stages the loaded registers in shared memory (``st.shared.v4.b32``,
    ``fence.proxy.async.shared::cta`` so the bulk copy's async proxy sees them, ``bar.sync``);
    LD=1, ST=0 reads the landed chunk back (``mbarrier.try_wait.parity`` by every thread after a
    ``bar.sync`` that orders the init, ``ld.shared.v4.b32``); LD=1, ST=1 is the TMA copy with
    one tile per CTA and one issuing thread per CTA (16 per SM at BLOCK 128), the other threads
    exiting at once. The last chunk is short: ``min.u32`` sizes its copies and predicates its
    vectors."""
    nvec = (R * C) >> 3
    cvec = BLOCK * UNROLL
    first = T.ctaid.x * cvec  # the chunk's first vector
    tid = T.tid.x
    buf = T.shared(T.bf16, (cvec * 8,), align=128, name="chunk")
    policy = None
    if POL:
        policy = T.ptx.createpolicy.fractional.L2__evict_last.b64()
    if LD:
        full = T.mbarrier(1, name="full")
        bulk_load = T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                          + (".L2::cache_hint" if POL else "")]

    def nbytes():
        """The chunk's bytes: ``sub``, ``min.u32``, ``shl``."""
        return T.ptx.min.u32(nvec - first, cvec) << 4

    def bulk_store():
        T.ptx.cp.async_.bulk.global_.shared__cta.bulk_group(out.at(first * 8), buf.at(0),
                                                            nbytes())
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group.read(0)  # the chunk is read before the CTA frees it

    if LD:
        with T.if_(tid == 0):
            full[0].init(1)
            T.ptx.fence.mbarrier_init.release.cluster()
            size = nbytes()
            full[0].arrive_expect_tx(size)
            bulk_load(buf.at(0), x.at(first * 8), size, full[0],
                      *((policy,) if POL else ()))
            if ST:
                full[0].wait(0)
                bulk_store()
        if ST:
            return
        T.ptx.bar.sync(0)  # the mbarrier is initialised before any thread waits on it
        full[0].wait(0)
    held = []
    for u in range(UNROLL):
        k = u * BLOCK + tid  # the vector within the chunk
        ok = first + k < nvec
        words = [T.reg(T.b32) for _ in range(4)]
        if LD:
            T.ptx.ld.shared.v4.b32(words, buf.at(k * 8), pred=ok)
        else:
            ld = T.ptx["ld.global" + (EVICT_LAST if POL else "") + ".v4.b32"]
            ld(words, x.at((first + k) * 8), *((policy,) if POL else ()), pred=ok)
        held.append((k, ok, words))
    if ST:  # LD=0: registers -> shared -> one bulk store
        for k, ok, words in held:
            T.ptx.st.shared.v4.b32(buf.at(k * 8), words, pred=ok)
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.bar.sync(0)
        with T.if_(tid == 0):
            bulk_store()
        return
    for k, ok, words in held:
        T.ptx.st.global_.v4.b32(out.at((first + k) * 8), words, pred=ok)


def path_constraints(R, C, BLOCK, UNROLL, LD, ST, POL=0):
    out = reg_constraints(R, C, BLOCK, UNROLL, POL)
    if LD not in (0, 1) or ST not in (0, 1):
        out.append(f"LD={LD} and ST={ST} must be 0 (registers) or 1 (one bulk copy a chunk)")
    if _chunk_bytes(BLOCK, UNROLL) > 48 * 1024:
        out.append(f"a chunk of BLOCK * UNROLL = {BLOCK * UNROLL} vectors needs "
                   f"{_chunk_bytes(BLOCK, UNROLL)} bytes of static shared memory (at most 49152)")
    return out


PATHS = dict(lb=dict(LD=1, ST=0), sb=dict(LD=0, ST=1), lbsb=dict(LD=1, ST=1),
             lb_pol=dict(LD=1, ST=0, POL=1), sb_pol=dict(LD=0, ST=1, POL=1),
             lbsb_pol=dict(LD=1, ST=1, POL=1))

PATH_COPY = T.suite(
    path_copy, inputs=REG_COPY.inputs, reference=lambda x: {"out": x.copy()}, outputs=["out"],
    cases=[T.case(f"r8_c8_{n}", R=8, C=8, BLOCK=32, **p) for n, p in PATHS.items()]
    # 2500 vectors in chunks of 64: 40 CTAs, the last of 4 vectors (a short bulk copy)
    + [T.case(f"r100_c200_b32_u2_{n}", R=100, C=200, BLOCK=32, UNROLL=2, **p)
       for n, p in PATHS.items()]
    # reg_copy's 131072 CTAs of 128 threads and 2 KB: only the path of each half differs
    + [T.case(f"r16384_c8192_{n}", R=16384, C=8192, **p, **BENCH) for n, p in PATHS.items()]
    # one 16 KB bulk load and store per CTA (tma_copy's box bytes, 13 CTAs per SM): the size of
    # the bulk operation; small: 10 chunks of 256 vectors, the last of 196
    + [T.case("r100_c200_b32_u8_lbsb", R=100, C=200, BLOCK=32, UNROLL=8, LD=1, ST=1),
       T.case("r16384_c8192_u8_lbsb", R=16384, C=8192, UNROLL=8, LD=1, ST=1, **BENCH)],
    tolerance=T.tolerance(rtol=0, atol=0), constraints=path_constraints,
    flops=lambda R, C: 0, bytes=lambda R, C: 4 * R * C,
    baselines=[{"name": f"torch{c}.copy", "args": {"x": "x", "out": "out"}}
               for c in ("", ".compile")])
