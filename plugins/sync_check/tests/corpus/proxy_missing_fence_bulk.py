"""proxy.missing-fence (global, bulk copy): warp 0 writes ``x`` with ordinary stores, the warps
meet at bar.sync, and warp 1 bulk-copies (``cp.async.bulk``, async proxy) the same bytes into
shared memory. The barrier orders the stores before the copy, but a fence.proxy.async.shared::cta
does not cover global memory: the copy may read stale data.

Fixed twin: ``fence.proxy.async.global`` by the writing warp before the barrier.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


@T.kernel(block=64)
def buggy(x: T.gptr[T.u32], out: T.gptr[T.u32]):
    buf = T.shared(T.u32, 32, align=128, name="buf")
    bar = T.mbarrier(1)
    w = T.warp_index()
    lane = T.laneid()
    with T.if_(w == 0, uniform=True):
        T.ptx.st.global_.u32(x.at(lane), lane + 100)  # EXPECT: proxy.missing-fence
        T.ptx.fence.proxy.async_.shared__cta()
    with T.if_(T.tid.x == 0):
        bar.init(1)
    T.ptx.bar.sync(0)
    with T.if_(w == 1, uniform=True):
        with T.if_(lane == 0):
            bar.arrive_expect_tx(128)
            T.ptx.cp.async_.bulk.shared__cluster.global_.mbarrier__complete_tx__bytes(
                buf, x.at(0), 128, bar)
        bar.wait(0)
        T.ptx.st.global_.u32(out.at(lane), T.ptx.ld.shared.u32(buf.at(lane)))


@T.kernel(block=64)
def fixed(x: T.gptr[T.u32], out: T.gptr[T.u32]):
    buf = T.shared(T.u32, 32, align=128, name="buf")
    bar = T.mbarrier(1)
    w = T.warp_index()
    lane = T.laneid()
    with T.if_(w == 0, uniform=True):
        T.ptx.st.global_.u32(x.at(lane), lane + 100)
        T.ptx.fence.proxy.async_.global_()
    with T.if_(T.tid.x == 0):
        bar.init(1)
    T.ptx.bar.sync(0)
    with T.if_(w == 1, uniform=True):
        with T.if_(lane == 0):
            bar.arrive_expect_tx(128)
            T.ptx.cp.async_.bulk.shared__cluster.global_.mbarrier__complete_tx__bytes(
                buf, x.at(0), 128, bar)
        bar.wait(0)
        T.ptx.st.global_.u32(out.at(lane), T.ptx.ld.shared.u32(buf.at(lane)))


def inputs():
    return dict(x=np.zeros(32, np.uint32), out=np.zeros(32, np.uint32))


def reference(x, out, **_):
    return {"out": np.arange(32, dtype=np.uint32) + 100}
