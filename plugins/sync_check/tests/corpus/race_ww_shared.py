"""race.write-write: both warps store to the same shared word; which value survives depends on
the order the warps run in.

Fixed twin: warp 1 stores only after ``bar.sync 0`` (the last writer is then always warp 1).
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


@T.kernel(block=64)
def buggy(out: T.gptr[T.u32]):
    slot = T.shared(T.u32, 1)
    t = T.tid.x
    w = T.warp_index()
    lane = T.laneid()
    with T.if_(lane == 0):
        T.ptx.st.shared.u32(slot.at(0), w)  # EXPECT: race.write-write
    T.ptx.bar.sync(0)
    T.ptx.st.global_.u32(out.at(t), T.ptx.ld.shared.u32(slot.at(0)))


@T.kernel(block=64)
def fixed(out: T.gptr[T.u32]):
    slot = T.shared(T.u32, 1)
    t = T.tid.x
    w = T.warp_index()
    lane = T.laneid()
    with T.if_(lane == 0):
        with T.if_(w == 0):
            T.ptx.st.shared.u32(slot.at(0), w)
    T.ptx.bar.sync(0)
    with T.if_(lane == 0):
        with T.if_(w == 1):
            T.ptx.st.shared.u32(slot.at(0), w)
    T.ptx.bar.sync(0)
    T.ptx.st.global_.u32(out.at(t), T.ptx.ld.shared.u32(slot.at(0)))


def inputs():
    return dict(out=np.zeros(64, np.uint32))
