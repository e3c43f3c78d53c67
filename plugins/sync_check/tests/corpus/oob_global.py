"""memory.out-of-bounds (global): thread 63 stores to ``out[64]`` of a 64-element buffer.

Fixed twin: the store is guarded by ``t + 1 < n``.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


@T.kernel(block=64)
def buggy(x: T.gptr[T.u32], out: T.gptr[T.u32], n: T.u32):
    t = T.tid.x
    v = T.ptx.ld.global_.u32(x.at(t))
    T.ptx.st.global_.u32(out.at(t + 1), v)  # EXPECT: memory.out-of-bounds


@T.kernel(block=64)
def fixed(x: T.gptr[T.u32], out: T.gptr[T.u32], n: T.u32):
    t = T.tid.x
    v = T.ptx.ld.global_.u32(x.at(t))
    with T.if_(t + 1 < n):
        T.ptx.st.global_.u32(out.at(t + 1), v)


def inputs():
    return dict(x=np.arange(64, dtype=np.uint32), out=np.zeros(64, np.uint32), n=64)
