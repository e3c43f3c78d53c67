"""deadlock (mbarriers): warp 0 waits on ``a`` before arriving on ``b``; warp 1 waits on ``b``
before arriving on ``a``.

Fixed twin: warp 1 arrives on ``a`` before it waits on ``b``.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


@T.kernel(block=64)
def buggy(out: T.gptr[T.u32]):
    bars = T.mbarrier(2)
    w = T.warp_index()
    lane = T.laneid()
    with T.if_(T.tid.x == 0):
        bars[0].init(1)
        bars[1].init(1)
    T.ptx.bar.sync(0)
    with T.if_(w == 0, uniform=True):
        bars[0].wait(0)  # EXPECT: deadlock
        with T.if_(lane == 0):
            bars[1].arrive()
    with T.if_(w == 1, uniform=True):
        bars[1].wait(0)
        with T.if_(lane == 0):
            bars[0].arrive()
    T.ptx.st.global_.u32(out.at(T.tid.x), w)


@T.kernel(block=64)
def fixed(out: T.gptr[T.u32]):
    bars = T.mbarrier(2)
    w = T.warp_index()
    lane = T.laneid()
    with T.if_(T.tid.x == 0):
        bars[0].init(1)
        bars[1].init(1)
    T.ptx.bar.sync(0)
    with T.if_(w == 0, uniform=True):
        bars[0].wait(0)
        with T.if_(lane == 0):
            bars[1].arrive()
    with T.if_(w == 1, uniform=True):
        with T.if_(lane == 0):
            bars[0].arrive()
        bars[1].wait(0)
    T.ptx.st.global_.u32(out.at(T.tid.x), w)


def inputs():
    return dict(out=np.zeros(64, np.uint32))
