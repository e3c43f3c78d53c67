"""deadlock: warp 0 waits on named barrier 1 then 2, warp 1 on 2 then 1; each waits for the
other's arrival.

Fixed twin: both warps use the barriers in the same order.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


@T.kernel(block=64)
def buggy(out: T.gptr[T.u32]):
    t = T.tid.x
    w = T.warp_index()
    with T.if_(w == 0, uniform=True):
        T.ptx.barrier.sync(1, 64)  # EXPECT: deadlock
        T.ptx.barrier.sync(2, 64)
    with T.if_(w == 1, uniform=True):
        T.ptx.barrier.sync(2, 64)
        T.ptx.barrier.sync(1, 64)
    T.ptx.st.global_.u32(out.at(t), t)


@T.kernel(block=64)
def fixed(out: T.gptr[T.u32]):
    t = T.tid.x
    w = T.warp_index()
    with T.if_(w == 0, uniform=True):
        T.ptx.barrier.sync(1, 64)
        T.ptx.barrier.sync(2, 64)
    with T.if_(w == 1, uniform=True):
        T.ptx.barrier.sync(1, 64)
        T.ptx.barrier.sync(2, 64)
    T.ptx.st.global_.u32(out.at(t), t)


def inputs():
    return dict(out=np.zeros(64, np.uint32))
