"""cluster-barrier.mismatch: a warp arrives on the cluster barrier twice before it waits, so its
second arrival counts toward the next phase (arrive and wait must alternate per thread).

Fixed twin: one arrive, then the wait.
"""
import numpy as np

import tirxh.lang as T

GRID = (2,)


@T.kernel(block=32, cluster=(2, 1, 1))
def buggy(out: T.gptr[T.u32]):
    T.ptx.barrier.cluster.arrive()
    T.ptx.barrier.cluster.arrive()  # EXPECT: cluster-barrier.mismatch
    T.ptx.barrier.cluster.wait()
    T.ptx.st.global_.u32(out.at(T.ctaid.x * 32 + T.tid.x), T.tid.x)


@T.kernel(block=32, cluster=(2, 1, 1))
def fixed(out: T.gptr[T.u32]):
    T.ptx.barrier.cluster.arrive()
    T.ptx.barrier.cluster.wait()
    T.ptx.st.global_.u32(out.at(T.ctaid.x * 32 + T.tid.x), T.tid.x)


def inputs():
    return dict(out=np.zeros(64, np.uint32))
