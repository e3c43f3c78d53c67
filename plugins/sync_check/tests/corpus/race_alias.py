"""race.read-write through an alias: warp 1 loads the high half of a u32 that warp 0 stores,
as a u16 at byte offset +2 (different width, same bytes).

Fixed twin: ``bar.sync 0`` between the store and the narrow load.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


@T.kernel(block=64)
def buggy(out: T.gptr[T.u32]):
    buf = T.shared(T.u32, 32)
    w = T.warp_index()
    lane = T.laneid()
    with T.if_(w == 0, uniform=True):
        T.ptx.st.shared.u32(buf.at(lane), lane * 65536 + 3)
    with T.if_(w == 1, uniform=True):
        hi = T.ptx.ld.shared.u16(buf.at(lane) + 2)  # EXPECT: race.read-write
        T.ptx.st.global_.u32(out.at(lane), T.ptx.cvt.u32.u16(hi))


@T.kernel(block=64)
def fixed(out: T.gptr[T.u32]):
    buf = T.shared(T.u32, 32)
    w = T.warp_index()
    lane = T.laneid()
    with T.if_(w == 0, uniform=True):
        T.ptx.st.shared.u32(buf.at(lane), lane * 65536 + 3)
    T.ptx.bar.sync(0)
    with T.if_(w == 1, uniform=True):
        hi = T.ptx.ld.shared.u16(buf.at(lane) + 2)
        T.ptx.st.global_.u32(out.at(lane), T.ptx.cvt.u32.u16(hi))


def inputs():
    return dict(out=np.zeros(32, np.uint32))
