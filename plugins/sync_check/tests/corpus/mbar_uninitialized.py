"""mbarrier.uninitialized: warp 0 initializes the mbarrier, warp 1 arrives on it with nothing
ordering the init before the arrive (no bar.sync / fence.mbarrier_init + barrier).

Fixed twin: ``bar.sync 0`` after the init, before any warp uses the barrier.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


@T.kernel(block=64)
def buggy(out: T.gptr[T.u32]):
    bar = T.mbarrier(1)
    w = T.warp_index()
    lane = T.laneid()
    with T.if_(w == 0, uniform=True):
        with T.if_(lane == 0):
            bar.init(1)
        bar.wait(0)
    with T.if_(w == 1, uniform=True):
        with T.if_(lane == 0):
            bar.arrive()  # EXPECT: mbarrier.uninitialized
    T.ptx.st.global_.u32(out.at(T.tid.x), w)


@T.kernel(block=64)
def fixed(out: T.gptr[T.u32]):
    bar = T.mbarrier(1)
    w = T.warp_index()
    lane = T.laneid()
    with T.if_(T.tid.x == 0):
        bar.init(1)
    T.ptx.bar.sync(0)
    with T.if_(w == 0, uniform=True):
        bar.wait(0)
    with T.if_(w == 1, uniform=True):
        with T.if_(lane == 0):
            bar.arrive()
    T.ptx.st.global_.u32(out.at(T.tid.x), w)


def inputs():
    return dict(out=np.zeros(64, np.uint32))
