"""wgmma.missing-fence: the accumulators are initialized by ordinary ``mov`` instructions and
then used by wgmma.mma_async with no ``wgmma.fence`` in between.

Fixed twin: ``wgmma.fence.sync.aligned`` before the wgmma.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)
DESC_HI = (128 >> 4 << 16) | (256 >> 4 << 32)
MMA = "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16"


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


@T.kernel(block=128)
def buggy(out: T.gptr[T.f32]):
    a = T.shared(T.bf16, (64, 16), align=256, name="a")
    b = T.shared(T.bf16, (8, 16), align=256, name="b")
    _zero_operands(a, b)
    da, db = _desc(a), _desc(b)
    acc = T.fragment(T.f32, 4, init=1.0)
    T.ptx[MMA](acc, da, db, T.ptx.mov.pred(1), 1, 1, 0, 0)  # EXPECT: wgmma.missing-fence
    T.ptx.wgmma.commit_group.sync.aligned()
    T.ptx.wgmma.wait_group.sync.aligned(0)
    T.ptx.st.global_.f32(out.at(T.tid.x), acc[0])


@T.kernel(block=128)
def fixed(out: T.gptr[T.f32]):
    a = T.shared(T.bf16, (64, 16), align=256, name="a")
    b = T.shared(T.bf16, (8, 16), align=256, name="b")
    _zero_operands(a, b)
    da, db = _desc(a), _desc(b)
    acc = T.fragment(T.f32, 4, init=1.0)
    T.ptx.wgmma.fence.sync.aligned()
    T.ptx[MMA](acc, da, db, T.ptx.mov.pred(1), 1, 1, 0, 0)
    T.ptx.wgmma.commit_group.sync.aligned()
    T.ptx.wgmma.wait_group.sync.aligned(0)
    T.ptx.st.global_.f32(out.at(T.tid.x), acc[0])


def inputs():
    return dict(out=np.zeros(128, np.float32))
