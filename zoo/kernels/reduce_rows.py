"""Row sums with warp shuffles: out[r] = sum_c x[r, c] (f32).

Algorithm: one warp per row; each lane accumulates a strided slice of the row (coalesced 128-byte
loads per warp step), then a butterfly reduction with ``shfl.sync.bfly.b32`` over offsets
16, 8, 4, 2, 1 leaves the total in every lane; lane 0 stores it.

Techniques: warp-level reduction without shared memory, grid of warps (4 warps per block).
Summation order differs from numpy's pairwise sum, so the tolerance is relative (f32 rounding).
"""

import numpy as np

import tirxh.lang as T

WARPS = 4


@T.kernel(grid=lambda rows: T.cdiv(rows, WARPS), block=32 * WARPS)
def reduce_rows(x: T.gptr[T.f32], out: T.gptr[T.f32], rows: T.u32, cols: T.u32):
    lane = T.laneid()
    row = T.ctaid.x * WARPS + (T.tid.x >> 5)
    with T.if_(row < rows):
        acc = T.reg(T.f32, init=0.0)
        base = row * cols
        with T.range(lane, cols, 32) as c:
            acc.set(acc + T.ptx.ld.global_.f32(x.at(base + c)))
        for offset in (16, 8, 4, 2, 1):  # trace-time unrolled butterfly
            other = T.ptx.shfl.sync.bfly.b32(acc, offset, 0x1F, 0xFFFFFFFF)
            acc.set(acc + T.ptx.mov.f32(other))
        with T.if_(lane == 0):
            T.ptx.st.global_.f32(out.at(row), acc)


def inputs(rng, rows, cols):
    return dict(x=rng.standard_normal((rows, cols), dtype=np.float32),
                out=np.empty(rows, np.float32), rows=rows, cols=cols)


def reference(x):
    return {"out": x.astype(np.float64).sum(axis=1).astype(np.float32)}


SUITE = T.suite(
    reduce_rows, inputs=inputs, reference=reference, outputs=["out"],
    cases=[T.case("r8_c100", rows=8, cols=100), T.case("r33_c1024", rows=33, cols=1024),
           T.case("r8192_c8192", rows=8192, cols=8192, small=False)],
    tolerance=T.tolerance(rtol=1e-4, atol=1e-4),
    flops=lambda rows, cols: rows * cols, bytes=lambda rows, cols: 4 * rows * (cols + 1),
)
