"""memory.out-of-bounds (shared): ``a.at(t + 1)`` makes lane 31 write one element past ``a``;
the address is still inside the CTA's shared window (it lands in ``b``), so nothing faults.

Fixed twin: the index wraps inside ``a``.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


@T.kernel(block=32)
def buggy(out: T.gptr[T.u32]):
    a = T.shared(T.u32, 32, name="a")
    b = T.shared(T.u32, 32, name="b")
    t = T.tid.x
    T.ptx.st.shared.u32(b.at(t), 0)
    T.ptx.st.shared.u32(a.at(t + 1), t)  # EXPECT: memory.out-of-bounds
    T.ptx.st.global_.u32(out.at(t), T.ptx.ld.shared.u32(b.at(t)))


@T.kernel(block=32)
def fixed(out: T.gptr[T.u32]):
    a = T.shared(T.u32, 32, name="a")
    b = T.shared(T.u32, 32, name="b")
    t = T.tid.x
    T.ptx.st.shared.u32(b.at(t), 0)
    T.ptx.st.shared.u32(a.at((t + 1) & 31), t)
    T.ptx.st.global_.u32(out.at(t), T.ptx.ld.shared.u32(b.at(t)))


def inputs():
    return dict(out=np.zeros(32, np.uint32))
