"""mbarrier.arrival-count: a stray second arrival by warp 1 opens a phase that never receives
its other arrival (the kernel ends with the barrier mid-phase; with a later reuse the waits would
be off by one phase).

Fixed twin: no stray arrival.
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
        bar.init(2)
    T.ptx.bar.sync(0)
    with T.if_(lane == 0):
        bar.arrive()
    bar.wait(0)
    with T.if_(w == 1, uniform=True):
        with T.if_(lane == 0):
            bar.arrive()  # EXPECT: mbarrier.arrival-count
    T.ptx.st.global_.u32(out.at(T.tid.x), w)


@T.kernel(block=64)
def fixed(out: T.gptr[T.u32]):
    bar = T.mbarrier(1)
    w = T.warp_index()
    lane = T.laneid()
    with T.if_(T.tid.x == 0):
        bar.init(2)
    T.ptx.bar.sync(0)
    with T.if_(lane == 0):
        bar.arrive()
    bar.wait(0)
    T.ptx.st.global_.u32(out.at(T.tid.x), w)


def inputs():
    return dict(out=np.zeros(64, np.uint32))
