"""wgmma.accumulator-early: the accumulators of an in-flight wgmma.mma_async are read before
``wgmma.wait_group`` retired its group (the hardware writes them asynchronously).

Fixed twin: ``wgmma.wait_group 0`` before the accumulators are read.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)
# no-swizzle K-major descriptors: LBO = 128 B (next 8x16B core matrix along K), SBO = 256 B
DESC_HI = (128 >> 4 << 16) | (256 >> 4 << 32)


def _desc(buf):
    enc = T.ptx.shr.u32(T.ptx.and_.b32(buf.ptr(), 0x3FFFF), 4)
    return T.ptx.or_.b64(T.ptx.cvt.u64.u32(enc), DESC_HI)


def _zero_operands(a, b):
    t = T.tid.x
    T.ptx.st.shared.v4.u32(a.at(t >> 1, (t & 1) * 8), [0, 0, 0, 0])  # 16 bytes per thread
    with T.if_(t < 16):
        T.ptx.st.shared.v4.u32(b.at(t >> 1, (t & 1) * 8), [0, 0, 0, 0])
    T.ptx.fence.proxy.async_.shared__cta()
    T.ptx.bar.sync(0)


MMA = "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16"


@T.kernel(block=128)
def buggy(out: T.gptr[T.f32]):
    a = T.shared(T.bf16, (64, 16), align=256, name="a")
    b = T.shared(T.bf16, (8, 16), align=256, name="b")
    _zero_operands(a, b)
    acc = T.fragment(T.f32, 4, init=1.0)
    T.ptx.wgmma.fence.sync.aligned()
    T.ptx[MMA](acc, _desc(a), _desc(b), T.ptx.mov.pred(1), 1, 1, 0, 0)
    T.ptx.wgmma.commit_group.sync.aligned()
    s = acc[0] + acc[1]  # EXPECT: wgmma.accumulator-early
    T.ptx.wgmma.wait_group.sync.aligned(0)
    T.ptx.st.global_.f32(out.at(T.tid.x), s + acc[2])


@T.kernel(block=128)
def fixed(out: T.gptr[T.f32]):
    a = T.shared(T.bf16, (64, 16), align=256, name="a")
    b = T.shared(T.bf16, (8, 16), align=256, name="b")
    _zero_operands(a, b)
    acc = T.fragment(T.f32, 4, init=1.0)
    T.ptx.wgmma.fence.sync.aligned()
    T.ptx[MMA](acc, _desc(a), _desc(b), T.ptx.mov.pred(1), 1, 1, 0, 0)
    T.ptx.wgmma.commit_group.sync.aligned()
    T.ptx.wgmma.wait_group.sync.aligned(0)
    s = acc[0] + acc[1]
    T.ptx.st.global_.f32(out.at(T.tid.x), s + acc[2])


def inputs():
    return dict(out=np.zeros(128, np.float32))
