"""race.read-write with a producer/consumer named barrier: the producer warp arrives on barrier 1
(``bar.arrive 1, 64``) *before* it writes the buffer, so the consumer's ``bar.sync 1, 64`` does
not order the write before its read.

Fixed twin: write first, then arrive.
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
        T.ptx.bar.arrive(1, 64)
        T.ptx.st.shared.u32(buf.at(lane), lane + 1)
    with T.if_(w == 1, uniform=True):
        T.ptx.bar.sync(1, 64)
        v = T.ptx.ld.shared.u32(buf.at(lane))  # EXPECT: race.read-write
        T.ptx.st.global_.u32(out.at(lane), v)


@T.kernel(block=64)
def fixed(out: T.gptr[T.u32]):
    buf = T.shared(T.u32, 32)
    w = T.warp_index()
    lane = T.laneid()
    with T.if_(w == 0, uniform=True):
        T.ptx.st.shared.u32(buf.at(lane), lane + 1)
        T.ptx.bar.arrive(1, 64)
    with T.if_(w == 1, uniform=True):
        T.ptx.bar.sync(1, 64)
        v = T.ptx.ld.shared.u32(buf.at(lane))
        T.ptx.st.global_.u32(out.at(lane), v)


def inputs():
    return dict(out=np.zeros(32, np.uint32))
