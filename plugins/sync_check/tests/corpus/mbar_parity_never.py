"""mbarrier.parity-never: warp 0 waits for phase 0 (parity 0) and then for phase 1 (parity 1),
but the barrier only ever completes one phase: no phase with parity 1 will complete.

Fixed twin: the second wait is for the phase that does complete (parity 0 again returns at once).
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
        bar.init(1)
    T.ptx.bar.sync(0)
    with T.if_(w == 1, uniform=True):
        with T.if_(lane == 0):
            bar.arrive()
    with T.if_(w == 0, uniform=True):
        bar.wait(0)
        bar.wait(1)  # EXPECT: mbarrier.parity-never
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
        bar.wait(0)
    T.ptx.st.global_.u32(out.at(T.tid.x), w)


def inputs():
    return dict(out=np.zeros(64, np.uint32))
