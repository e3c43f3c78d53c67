"""mbarrier.arrival-count: the barrier is initialized for 2 arrivals per phase but only one
warp arrives, so the phase never completes and warp 0 waits for ever.

Fixed twin: ``init(1)``.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


@T.kernel(block=64)
def buggy(out: T.gptr[T.u32]):
    bar = T.mbarrier(1)
    w = T.warp_index()
    lane = T.laneid()
    with T.if_(T.tid.x == 0):
        bar.init(2)  # EXPECT: mbarrier.arrival-count
    T.ptx.bar.sync(0)
    with T.if_(w == 1, uniform=True):
        with T.if_(lane == 0):
            bar.arrive()
    with T.if_(w == 0, uniform=True):
        bar.wait(0)
    T.ptx.st.global_.u32(out.at(T.tid.x), w)


@T.kernel(block=64)
def fixed(out: T.gptr[T.u32]):
    bar = T.mbarrier(1)
    w = T.warp_index()
    lane = T.laneid()
    with T.if_(T.tid.x == 0):
        bar.init(1)
    T.ptx.bar.sync(0)
    with T.if_(w == 1, uniform=True):
        with T.if_(lane == 0):
            bar.arrive()
    with T.if_(w == 0, uniform=True):
        bar.wait(0)
    T.ptx.st.global_.u32(out.at(T.tid.x), w)


def inputs():
    return dict(out=np.zeros(64, np.uint32))
