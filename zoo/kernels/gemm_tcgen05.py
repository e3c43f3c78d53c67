"""Blackwell (sm_100a) GEMM tile with tcgen05: C[128, 128] (f32) = A[128, K] @ B[128, K]^T (bf16).

Compile-only in this project (no Blackwell board yet): ptxas checks it for sm_100a and sm_110a.

Algorithm: one CTA of 128 threads. Warp 0 allocates 128 tensor-memory (TMEM) columns
(``tcgen05.alloc``; the TMEM address lands in shared memory). Per 64-wide K slice, thread 0 loads
the A and B tiles with TMA (128B swizzle, completing on an mbarrier), then issues four
``tcgen05.mma.cta_group::1.kind::f16`` (K = 16 each) on shared-memory descriptors with an
instruction descriptor for bf16 x bf16 -> f32, M = 128, N = 128, and ``tcgen05.commit`` arrives on
a second mbarrier when they complete. Finally each warp reads its 32 TMEM lanes
(``tcgen05.ld.sync.aligned.32x32b.x64``: lane = row, 64 columns per call), waits
(``tcgen05.wait::ld``) and stores its rows; warp 0 frees the columns.

Techniques: TMEM allocation, UMMA with descriptors, tcgen05.commit to an mbarrier, TMEM loads.
"""

import tirxh.lang as T

BM, BN, BK = 128, 128, 64
# instruction descriptor (kind::f16): D f32 (bits 4-5 = 1), A bf16 (bits 7-9 = 1), B bf16
# (bits 10-12 = 1), K-major A and B (bits 15, 16 = 0), N >> 3 (bits 17-22), M >> 4 (bits 24-28)
IDESC = (1 << 4) | (1 << 7) | (1 << 10) | ((BN >> 3) << 17) | ((BM >> 4) << 24)
# shared-memory descriptor constant part: LBO 1, SBO 1024 >> 4, version 1 (bit 46), 128B swizzle
DESC_HI = (1 << 16) | (64 << 32) | (1 << 46) | (2 << 61)


def _desc(smem_addr):
    """and.b32, shr.u32, cvt.u64.u32, or.b64: a shared-memory matrix descriptor."""
    enc = T.ptx.shr.u32(T.ptx.and_.b32(smem_addr, 0x3FFFF), 4)
    return T.ptx.or_.b64(T.ptx.cvt.u64.u32(enc), DESC_HI)


@T.kernel(grid=(1, 1), block=128, targets=("sm_100a", "sm_110a"))
def gemm_tcgen05(a_map: T.tensormap, b_map: T.tensormap, c: T.gptr[T.f32], K: T.u32):
    sA = T.shared(T.bf16, (BM, BK), align=1024, swizzle=128, dynamic=True, name="sA")
    sB = T.shared(T.bf16, (BN, BK), align=1024, swizzle=128, dynamic=True, name="sB")
    taddr_slot = T.shared(T.u32, (1,), align=16, name="taddr")
    loaded = T.mbarrier(1, name="loaded")
    done = T.mbarrier(1, name="done")
    tid = T.tid.x
    warp = tid >> 5
    with T.if_(warp == 0, uniform=True):
        T.ptx.tcgen05.alloc.cta_group__1.sync.aligned.shared__cta.b32(taddr_slot.at(0), BN)
    with T.if_(tid == 0):
        loaded.init(1)
        done.init(1)
        T.ptx.fence.mbarrier_init.release.cluster()
    T.ptx.tcgen05.fence__before_thread_sync()
    T.ptx.bar.sync(0)
    T.ptx.tcgen05.fence__after_thread_sync()
    # tcgen05 operands must be .b32/.b64 registers (ptxas rejects .u32/.u64 ones here)
    taddr = T.ptx.ld.shared.b32(taddr_slot.at(0))
    phase = T.reg(T.u32, init=0)
    with T.range(0, K, BK) as k0:
        with T.if_(tid == 0):
            loaded.arrive_expect_tx((BM + BN) * BK * 2)
            T.ptx.cp.async_.bulk.tensor._2d.shared__cluster.global_.tile.mbarrier__complete_tx__bytes(
                sA.at(0), a_map[k0, 0], loaded)
            T.ptx.cp.async_.bulk.tensor._2d.shared__cluster.global_.tile.mbarrier__complete_tx__bytes(
                sB.at(0), b_map[k0, 0], loaded)
            loaded.wait(phase)
            T.ptx.tcgen05.fence__after_thread_sync()
            da, db = _desc(sA.ptr()), _desc(sB.ptr())
            idesc = T.ptx.mov.b32(IDESC)  # ptxas takes the instruction descriptor in a register
            for kk in range(BK // 16):
                accumulate = (k0 != 0) if kk == 0 else T.ptx.mov.pred(1)
                T.ptx.tcgen05.mma.cta_group__1.kind__f16(
                    taddr, T.ptx.mov.b64(da + 2 * kk), T.ptx.mov.b64(db + 2 * kk), idesc,
                    accumulate)
            T.ptx.tcgen05.commit.cta_group__1.mbarrier__arrive__one.b64(done)
        done.wait(phase)  # every thread: the MMAs of this slice finished, smem may be reused
        phase.set(phase ^ 1)
    T.ptx.tcgen05.fence__after_thread_sync()
    row = warp * 32 + T.laneid()
    lane_base = T.ptx.add.s32(taddr, (warp * 32) << 16)  # TMEM: lane bits 16-31, column 0-15
    out = c.at(row * BN)
    for half in range(BN // 64):
        col = T.ptx.add.s32(lane_base, half * 64) if half else lane_base
        vals = T.ptx.tcgen05.ld.sync.aligned._32x32b.x64.b32(T.ptx.mov.b32(col))
        T.ptx.tcgen05.wait__ld.sync.aligned()
        for j in range(0, 64, 4):
            T.ptx.st.global_.v4.b32(out + (half * 64 + j) * 4, list(vals[j:j + 4]))
    T.ptx.tcgen05.fence__before_thread_sync()
    T.ptx.bar.sync(0)
    with T.if_(warp == 0, uniform=True):
        T.ptx.tcgen05.dealloc.cta_group__1.sync.aligned.b32(taddr, BN)
