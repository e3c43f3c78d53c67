"""race.read-write: each warp reads the word the other warp wrote, with no barrier between.

Fixed twin: ``bar.sync 0`` between the stores and the loads.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


@T.kernel(block=64)
def buggy(out: T.gptr[T.u32]):
    buf = T.shared(T.u32, 64)
    t = T.tid.x
    T.ptx.st.shared.u32(buf.at(t), t)
    other = T.ptx.ld.shared.u32(buf.at(t ^ 32))  # EXPECT: race.read-write
    T.ptx.st.global_.u32(out.at(t), other)


@T.kernel(block=64)
def fixed(out: T.gptr[T.u32]):
    buf = T.shared(T.u32, 64)
    t = T.tid.x
    T.ptx.st.shared.u32(buf.at(t), t)
    T.ptx.bar.sync(0)
    other = T.ptx.ld.shared.u32(buf.at(t ^ 32))
    T.ptx.st.global_.u32(out.at(t), other)


def inputs():
    return dict(out=np.zeros(64, np.uint32))
