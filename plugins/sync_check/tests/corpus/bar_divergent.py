"""barrier.divergent: ``bar.sync 0`` (aligned) inside a branch only half of warp 0 takes.

Fixed twin: the barrier is outside the branch.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


@T.kernel(block=64)
def buggy(out: T.gptr[T.u32]):
    t = T.tid.x
    lane = T.laneid()
    w = T.warp_index()
    with T.if_(w == 0, uniform=True):
        with T.if_(lane < 16):
            T.ptx.bar.sync(0)  # EXPECT: barrier.divergent
    with T.if_(w == 1, uniform=True):
        T.ptx.bar.sync(0)
    T.ptx.st.global_.u32(out.at(t), t)


@T.kernel(block=64)
def fixed(out: T.gptr[T.u32]):
    t = T.tid.x
    T.ptx.bar.sync(0)
    T.ptx.st.global_.u32(out.at(t), t)


def inputs():
    return dict(out=np.zeros(64, np.uint32))
