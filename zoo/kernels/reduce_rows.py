"""Row sums with warp shuffles: out[r] = sum_c x[r, c] (f32).

Algorithm: one warp per row; each lane accumulates a strided slice of the row, then a butterfly
reduction with ``shfl.sync.bfly.b32`` over offsets 16, 8, 4, 2, 1 leaves the total in every lane;
lane 0 stores it. With VEC = 4 each access is a 16-byte ``ld.global.v4.f32`` (a warp reads 512
contiguous bytes) and UNROLL accesses are issued before any is added, into UNROLL x VEC
independent sums (no add waits on the previous one): with UNROLL = 8 (the default) a warp keeps
4 KB of loads in flight, 64 warps per SM 256 KB, far above the ~26 KB an SM needs at 4.25 TB/s.
Measured on the H200 (r8192_c8192, 2026-12-01, full clock): UNROLL = 8 90.7% of the copy
bandwidth, 4 88.9%, the scalar loop (VEC = UNROLL = 1) 85.9%. The row's last ``cols % (128
UNROLL)`` elements are summed by a scalar loop.

RW > 1 (session 6: torch.compile's geometry, docs/TUNING.md "Session 6") spreads each row over RW
warps: a CTA of max(4, RW) warps takes max(4, RW) / RW rows, the RW warps of a row interleave
their 512-byte accesses (lane l of the row's warp p reads vector p * 32 + l of every 32 RW), each
warp's butterfly total goes to one shared word, and after one ``bar.sync`` (outside every
row-bound branch: a CTA past the last row still arrives) the row's first lane sums its RW words
in order. RW = 16 is inductor's reduction config at 8192 columns (XBLOCK = 1, RBLOCK = 2048,
16 warps): 8192 CTAs instead of 2048, no short last wave. POL = 1 loads with Triton's
evict-first spelling (``ld.global.L1::evict_first.L2::cache_hint.v4.f32`` and a
``createpolicy.fractional.L2::evict_first.b64`` policy).

Techniques: warp-level reduction without shared memory, grid of warps (4 warps per block),
vectorized loads, independent accumulators (memory-level parallelism), rows split over warps
(a shared-memory combine), L2 eviction policies.
Summation order differs from numpy's pairwise sum, so the tolerance is relative (f32 rounding).

Tags: warp-shuffle, vectorized, memory-level-parallelism
"""

import numpy as np

import tirxh.lang as T

TAGS = ("warp-shuffle", "vectorized", "memory-level-parallelism")

WARPS = 4


def _tree(vals: list):
    """A balanced sum (log2(n) dependent adds)."""
    while len(vals) > 1:
        vals = [vals[i] + vals[i + 1] if i + 1 < len(vals) else vals[i]
                for i in range(0, len(vals), 2)]
    return vals[0]


def _warps(RW):
    """Warps per CTA: 4, or RW when a row takes more."""
    return max(WARPS, RW)


@T.kernel(grid=lambda rows, RW: T.cdiv(rows, _warps(RW) // RW), block=lambda RW: 32 * _warps(RW),
          maxnreg=lambda MAXREG: MAXREG or None)
def reduce_rows(x: T.gptr[T.f32], out: T.gptr[T.f32], rows: T.u32, cols: T.u32,
                VEC: T.const = 4, UNROLL: T.const = 8, RW: T.const = 1, POL: T.const = 0,
                MAXREG: T.const = 0):
    if VEC not in (1, 4) or UNROLL not in (1, 2, 4, 8):
        raise ValueError(f"reduce_rows: VEC = {VEC!r} must be 1 or 4 and UNROLL = {UNROLL!r} "
                         "1, 2, 4 or 8")
    nw = _warps(RW)
    lane = T.laneid()
    warp = T.tid.x >> 5
    row = T.ctaid.x * (nw // RW) + (warp if RW == 1 else warp / RW)
    part = lane if RW == 1 else (warp % RW) * 32 + lane  # the thread's place in its row's warps
    acc = T.reg(T.f32, init=0.0)
    with T.if_(row < rows):
        accs = [T.reg(T.f32, init=0.0) for _ in range(VEC * UNROLL)]
        base = row * cols
        step = 32 * VEC * RW       # elements of one access of the row's warps
        span = step * UNROLL       # elements of one loop iteration
        body = (cols / span) * span
        hint = ".L1::evict_first.L2::cache_hint" if POL else ""
        ld = T.ptx["ld.global" + hint + (".v4.f32" if VEC == 4 else ".f32")]
        pol = (T.ptx.createpolicy.fractional.L2__evict_first.b64(),) if POL else ()
        with T.range(part * VEC, body, span) as c:
            addr = x.at(base + c)
            vals = []
            for u in range(UNROLL):   # every load issued before the first add
                v = [T.reg(T.f32) for _ in range(VEC)]
                ld(v if VEC == 4 else v[0], addr + 4 * u * step, *pol)
                vals += v
            for a, v in zip(accs, vals):
                T.ptx.add.f32(a, a, v)
        with T.range(body + part, cols, 32 * RW) as c:   # the tail, one element per lane
            T.ptx.add.f32(accs[0], accs[0], T.ptx.ld.global_.f32(x.at(base + c)))
        acc.set(_tree(accs))
        for offset in (16, 8, 4, 2, 1):  # trace-time unrolled butterfly
            other = T.ptx.shfl.sync.bfly.b32(acc, offset, 0x1F, 0xFFFFFFFF)
            acc.set(acc + T.ptx.mov.f32(other))
    if RW > 1:  # the row's RW warp totals, combined in warp order
        red = T.shared(T.f32, (nw,), name="red")
        with T.if_(lane == 0):
            T.ptx.st.shared.f32(red.at(warp), acc)
        T.ptx.bar.sync(0)
        first = warp - warp % RW
        total = T.ptx.ld.shared.f32(red.at(first))
        for i in range(1, RW):
            total = total + T.ptx.ld.shared.f32(red.at(first + i))
        acc.set(total)
    with T.if_((row < rows) & (part == 0)):
        T.ptx.st.global_.f32(out.at(row), acc)


def constraints(rows, cols, VEC=4, RW=1, POL=0, MAXREG=0):
    """16-byte loads need rows that start 16-byte aligned."""
    why = []
    if RW not in (1, 2, 4, 8, 16, 32) or POL not in (0, 1) or (MAXREG and
                                                                 not 32 <= MAXREG <= 255):
        why.append(f"RW={RW} (warps per row) must be 1, 2, 4, 8, 16 or 32, POL={POL} 0 or 1 "
                   f"and MAXREG={MAXREG} 0 (no cap) or in 32..255 (.maxnreg)")
    if rows < 1 or cols < 1:
        why.append(f"rows={rows} and cols={cols} must be positive")
    elif VEC == 4 and cols % 4:
        why.append(f"cols={cols} must be a multiple of 4 for VEC=4 (16-byte loads; VEC=1 "
                   "takes any width)")
    return why


def inputs(rng, rows, cols):
    return dict(x=rng.standard_normal((rows, cols), dtype=np.float32),
                out=np.empty(rows, np.float32), rows=rows, cols=cols)


def reference(x):
    return {"out": x.astype(np.float64).sum(axis=1).astype(np.float32)}


SUITE = T.suite(
    reduce_rows, inputs=inputs, reference=reference, outputs=["out"],
    cases=[T.case("r8_c100", rows=8, cols=100),          # shorter than one iteration: tail only
           T.case("r33_c2048", rows=33, cols=2048),       # two iterations, no tail
           T.case("r5_c1100_u2", rows=5, cols=1100, UNROLL=2),  # 4 iterations and a 76 tail
           T.case("r6_c1001_scalar", rows=6, cols=1001, VEC=1, UNROLL=1),  # any width
           T.case("r8192_c8192", rows=8192, cols=8192, small=False),   # UNROLL = 8
           T.case("r8192_c8192_u4", rows=8192, cols=8192, UNROLL=4, small=False),
           T.case("r8192_c8192_scalar", rows=8192, cols=8192, VEC=1, UNROLL=1, small=False),
           # session 6: rows over several warps (tails in the row and past the last row)
           T.case("r7_c1100_w2_u2", rows=7, cols=1100, UNROLL=2, RW=2),
           T.case("r3_c1100_w16_u1_pol", rows=3, cols=1100, UNROLL=1, RW=16, POL=1),
           T.case("r5_c600_w4_scalar", rows=5, cols=600, VEC=1, UNROLL=1, RW=4)] + [
        T.case(f"r8192_c8192_{name}", rows=8192, cols=8192, **params, small=False)
        for name, params in (
            ("w16_u1", dict(RW=16, UNROLL=1)),  # inductor's geometry: 32 registers, 4 CTAs/SM
            ("w16_u1_pol_r32", dict(RW=16, UNROLL=1, POL=1, MAXREG=32)),  # and its policy
            ("w16_u2_r40", dict(RW=16, UNROLL=2, MAXREG=40)),  # twice the bytes, 3 CTAs/SM
            ("w4_u4", dict(RW=4, UNROLL=4)))],  # a row per CTA of 4 warps
    tolerance=T.tolerance(rtol=1e-4, atol=1e-4), constraints=constraints,
    flops=lambda rows, cols: rows * cols, bytes=lambda rows, cols: 4 * rows * (cols + 1),
    baselines=[{"name": "torch.sum", "args": {"x": "x"}},
               {"name": "torch.compile.sum", "args": {"x": "x"}}],
)
