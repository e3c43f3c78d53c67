"""mbarrier.tx-mismatch: warp 0 expects 128 transaction bytes on the phase but only 64 are
completed (``mbarrier.complete_tx`` by warp 1), so the phase never completes.

Fixed twin: 128 bytes completed.
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
    with T.if_(w == 0, uniform=True):
        with T.if_(lane == 0):
            bar.arrive_expect_tx(128)  # EXPECT: mbarrier.tx-mismatch
        bar.wait(0)
    with T.if_(w == 1, uniform=True):
        with T.if_(lane == 0):
            T.ptx.mbarrier.complete_tx.relaxed.cta.shared__cta.b64(bar, 64)
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
        with T.if_(lane == 0):
            bar.arrive_expect_tx(128)
        bar.wait(0)
    with T.if_(w == 1, uniform=True):
        with T.if_(lane == 0):
            T.ptx.mbarrier.complete_tx.relaxed.cta.shared__cta.b64(bar, 128)
    T.ptx.st.global_.u32(out.at(T.tid.x), w)


def inputs():
    return dict(out=np.zeros(64, np.uint32))
