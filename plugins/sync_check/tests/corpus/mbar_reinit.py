"""mbarrier.reinit-in-use: warp 0 re-initializes the barrier (to reuse it) right after its own
arrival, while warp 1's arrival for the same phase may still be outstanding.

Fixed twin: both warps wait for the phase to complete and meet at ``bar.sync`` before the re-init.
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
    with T.if_(w == 0, uniform=True):
        with T.if_(lane == 0):
            bar.arrive()
            bar.init(2)  # EXPECT: mbarrier.reinit-in-use
    with T.if_(w == 1, uniform=True):
        with T.if_(lane == 0):
            bar.arrive()
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
    T.ptx.bar.sync(0)
    with T.if_(T.tid.x == 0):
        bar.init(2)
    T.ptx.st.global_.u32(out.at(T.tid.x), w)


def inputs():
    return dict(out=np.zeros(64, np.uint32))
