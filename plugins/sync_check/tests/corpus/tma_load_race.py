"""race.read-write (async proxy write): warp 1 reads the shared buffer a bulk copy (TMA) fills,
without waiting on the copy's mbarrier. numsim lands the copy at once, so its output is right.

Fixed twin: warp 1 waits for the mbarrier phase the copy completes before reading.
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
    with T.if_(T.tid.x == 0):
        bar.init(1)
    T.ptx.bar.sync(0)
    with T.if_(w == 0, uniform=True):
        with T.if_(lane == 0):
            bar.arrive_expect_tx(128)
            T.ptx.cp.async_.bulk.shared__cluster.global_.mbarrier__complete_tx__bytes(
                buf, x.at(0), 128, bar)
    with T.if_(w == 1, uniform=True):
        v = T.ptx.ld.shared.u32(buf.at(lane))  # EXPECT: race.read-write
        T.ptx.st.global_.u32(out.at(lane), v)
        bar.wait(0)


@T.kernel(block=64)
def fixed(x: T.gptr[T.u32], out: T.gptr[T.u32]):
    buf = T.shared(T.u32, 32, align=128, name="buf")
    bar = T.mbarrier(1)
    w = T.warp_index()
    lane = T.laneid()
    with T.if_(T.tid.x == 0):
        bar.init(1)
    T.ptx.bar.sync(0)
    with T.if_(w == 0, uniform=True):
        with T.if_(lane == 0):
            bar.arrive_expect_tx(128)
            T.ptx.cp.async_.bulk.shared__cluster.global_.mbarrier__complete_tx__bytes(
                buf, x.at(0), 128, bar)
    with T.if_(w == 1, uniform=True):
        bar.wait(0)
        v = T.ptx.ld.shared.u32(buf.at(lane))
        T.ptx.st.global_.u32(out.at(lane), v)


def inputs():
    return dict(x=np.arange(32, dtype=np.uint32) * 5, out=np.zeros(32, np.uint32))
