"""race.stage-reuse after an mbarrier release that comes too early: the consumer warpgroup's
wgmma reads the stage ``a``; its elected lane arrives on ``empty`` *before*
``wgmma.wait_group`` retired the read, and warp 4 (the other arrival; the producer's role) waits
on ``empty`` and refills ``a`` while the wgmma may still be reading it.

Fixed twin: the arrival after ``wgmma.wait_group 0``, as zoo gemm_sm90's consumers release a
stage. It is also the smallest reproducer of a false race racecheck once reported on the 2-CTA
cluster GEMM (2026-12-02): numsim lets warp 0 pass its ``wait_group`` (and arrive) before warps
1-3 issued their wgmma; the replay holds that wait back, so warp 4's arrival, the one that
completed the phase in numsim's run, was replayed first and the phase's clock left warp 0's
release out: the refill then looked unordered after the wgmma read.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)
# no-swizzle K-major descriptors: LBO = 128 B (next 8x16B core matrix along K), SBO = 256 B
DESC_HI = (128 >> 4 << 16) | (256 >> 4 << 32)
MMA = "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16"


def _desc(buf):
    enc = T.ptx.shr.u32(T.ptx.and_.b32(buf.ptr(), 0x3FFFF), 4)
    return T.ptx.or_.b64(T.ptx.cvt.u64.u32(enc), DESC_HI)


def _kernel(bug: bool):
    @T.kernel(block=160, name="buggy" if bug else "fixed")
    def k(out: T.gptr[T.f32]):
        a = T.shared(T.bf16, (64, 16), align=256, name="a")
        b = T.shared(T.bf16, (8, 16), align=256, name="b")
        empty = T.mbarrier(1, name="empty")
        t = T.tid.x
        with T.if_(t == 0):
            empty.init(2)        # the consumer warpgroup's elected lane + warp 4's lane 0
        with T.if_(t < 128):
            T.ptx.st.shared.v4.u32(a.at(t >> 1, (t & 1) * 8), [0, 0, 0, 0])
        with T.if_(t < 16):
            T.ptx.st.shared.v4.u32(b.at(t >> 1, (t & 1) * 8), [0, 0, 0, 0])
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.bar.sync(0)
        with T.if_(t < 128):     # the consumer warpgroup
            acc = T.fragment(T.f32, 4, init=1.0)
            T.ptx.wgmma.fence.sync.aligned()
            T.ptx[MMA](acc, _desc(a), _desc(b), T.ptx.mov.pred(1), 1, 1, 0, 0)
            T.ptx.wgmma.commit_group.sync.aligned()
            if bug:
                with T.if_(t == 0):
                    empty.arrive()
            T.ptx.wgmma.wait_group.sync.aligned(0)
            if not bug:
                with T.if_(t == 0):
                    empty.arrive()
            T.ptx.st.global_.f32(out.at(t), acc[0] + acc[3])
        with T.else_():          # warp 4: waits until the stage is free, then refills it
            with T.if_(t == 128):
                empty.arrive()
            empty.wait(0)
            T.ptx.st.shared.v4.u32(a.at(t - 128, 0), [1, 1, 1, 1])  # EXPECT: race.stage-reuse
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(out=np.zeros(128, np.float32))
