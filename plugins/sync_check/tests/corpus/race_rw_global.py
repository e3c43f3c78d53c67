"""race.read-write (global memory): warp 1 reads the scratch word warp 0 writes, unordered.

Fixed twin: ``bar.sync 0`` orders the store before the load (bar.sync also orders global
memory among the CTA's threads).
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


@T.kernel(block=64)
def buggy(scratch: T.gptr[T.u32], out: T.gptr[T.u32]):
    w = T.warp_index()
    lane = T.laneid()
    with T.if_(w == 0, uniform=True):
        T.ptx.st.global_.u32(scratch.at(lane), lane + 7)
    with T.if_(w == 1, uniform=True):
        v = T.ptx.ld.global_.u32(scratch.at(lane))  # EXPECT: race.read-write
        T.ptx.st.global_.u32(out.at(lane), v)


@T.kernel(block=64)
def fixed(scratch: T.gptr[T.u32], out: T.gptr[T.u32]):
    w = T.warp_index()
    lane = T.laneid()
    with T.if_(w == 0, uniform=True):
        T.ptx.st.global_.u32(scratch.at(lane), lane + 7)
    T.ptx.bar.sync(0)
    with T.if_(w == 1, uniform=True):
        v = T.ptx.ld.global_.u32(scratch.at(lane))
        T.ptx.st.global_.u32(out.at(lane), v)


def inputs():
    return dict(scratch=np.zeros(32, np.uint32), out=np.zeros(32, np.uint32))
