"""GEMM with warp-level tensor cores: C[M, N] (f32) = A[M, K] (bf16) @ B[N, K]^T (bf16).

Algorithm: each warp owns a 16 x 32 tile of C (four m16n8 accumulators) and walks K in steps of
16. Operand fragments are loaded straight from global memory in the register layout that
``mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`` prescribes (PTX ISA, "Matrix Fragments for
mma.m16n8k16"): with g = lane / 4 and t = lane % 4, A's four 32-bit registers hold
A[g, 2t:2t+2], A[g+8, 2t:2t+2], A[g, 2t+8:2t+10], A[g+8, 2t+8:2t+10]; B's two hold
B[n=g, k=2t:2t+2] and B[g, 2t+8:2t+10] (B is stored N x K, K contiguous: the ".col" operand);
C's four f32 hold C[g, 2t:2t+2] and C[g+8, 2t:2t+2].

Techniques: mma.sync fragments, 32-bit paired bf16 loads, f32 accumulation. It deliberately skips
shared memory and ldmatrix: it is the smallest correct mma.sync GEMM, a starting point, not a fast
one (see gemm_wgmma.py for the Hopper path).
"""

import numpy as np

import tirxh.lang as T

WARP_M, WARP_N = 16, 32
WARPS = 4  # per block, along N


@T.kernel(grid=lambda M, N: (N // (WARP_N * WARPS), M // WARP_M), block=32 * WARPS,
          targets=("sm_80", "sm_90a"))
def gemm_mma(a: T.gptr[T.bf16], b: T.gptr[T.bf16], c: T.gptr[T.f32],
             M: T.u32, N: T.u32, K: T.u32):
    lane = T.laneid()
    g = lane >> 2
    t = lane & 3
    warp = T.tid.x >> 5
    row0 = T.ctaid.y * WARP_M + g                         # this lane's first A/C row
    n_base = (T.ctaid.x * WARPS + warp) * WARP_N + g      # this lane's B row (an N index)
    acc = [T.fragment(T.f32, 4, init=0.0) for _ in range(WARP_N // 8)]
    a_row0 = row0 * K + t * 2
    a_row8 = a_row0 + K * 8
    with T.range(0, K, 16) as k0:
        a0 = T.ptx.ld.global_.b32(a.at(a_row0 + k0))
        a1 = T.ptx.ld.global_.b32(a.at(a_row8 + k0))
        a2 = T.ptx.ld.global_.b32(a.at(a_row0 + k0, 16))  # +8 elements = 16 bytes
        a3 = T.ptx.ld.global_.b32(a.at(a_row8 + k0, 16))
        for j in range(WARP_N // 8):
            b_idx = (n_base + j * 8) * K + t * 2 + k0
            b0 = T.ptx.ld.global_.b32(b.at(b_idx))
            b1 = T.ptx.ld.global_.b32(b.at(b_idx, 16))
            T.ptx.mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32(
                acc[j], [a0, a1, a2, a3], [b0, b1], acc[j])
    c_row0 = row0 * N + (T.ctaid.x * WARPS + warp) * WARP_N + t * 2
    c_row8 = c_row0 + N * 8
    for j in range(WARP_N // 8):
        T.ptx.st.global_.v2.f32(c.at(c_row0, j * 32), [acc[j][0], acc[j][1]])
        T.ptx.st.global_.v2.f32(c.at(c_row8, j * 32), [acc[j][2], acc[j][3]])


def inputs(rng, M, N, K):
    from tirxh.core.types import numpy_dtype
    bf16 = numpy_dtype("bf16")
    return dict(a=rng.standard_normal((M, K), dtype=np.float32).astype(bf16),
                b=rng.standard_normal((N, K), dtype=np.float32).astype(bf16),
                c=np.empty((M, N), np.float32), M=M, N=N, K=K)


def reference(a, b):
    return {"c": (a.astype(np.float32) @ b.astype(np.float32).T)}


SUITE = T.suite(
    gemm_mma, inputs=inputs, reference=reference, outputs=["c"],
    cases=[T.case("m16n128k32", M=16, N=128, K=32), T.case("m64n256k64", M=64, N=256, K=64),
           T.case("m4096n4096k4096", M=4096, N=4096, K=4096, small=False)],
    # bf16 products are exact in f32; only the f32 summation order differs from numpy
    tolerance=T.tolerance(rtol=1e-3, atol=1e-3, rms=1e-5),
    flops=lambda M, N, K: 2 * M * N * K, bytes=lambda M, N, K: 2 * (M * K + N * K) + 4 * M * N,
)
