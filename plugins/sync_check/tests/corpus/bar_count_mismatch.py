"""barrier.count-mismatch: three warps use named barrier 1 declared for 64 threads; two warps
release it and the third waits for ever.

Fixed twin: the barrier is declared for all 96 threads.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


@T.kernel(block=96)
def buggy(out: T.gptr[T.u32]):
    t = T.tid.x
    T.ptx.barrier.sync(1, 64)  # EXPECT: barrier.count-mismatch
    T.ptx.st.global_.u32(out.at(t), t)


@T.kernel(block=96)
def fixed(out: T.gptr[T.u32]):
    t = T.tid.x
    T.ptx.barrier.sync(1, 96)
    T.ptx.st.global_.u32(out.at(t), t)


def inputs():
    return dict(out=np.zeros(96, np.uint32))
