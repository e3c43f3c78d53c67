"""cluster-barrier.mismatch: only cluster rank 0 arrives on the cluster barrier, but every CTA
waits on it, so rank 1 waits without having arrived.

Fixed twin: every CTA arrives, then waits.
"""
import numpy as np

import tirxh.lang as T

GRID = (2,)


@T.kernel(block=32, cluster=(2, 1, 1))
def buggy(out: T.gptr[T.u32]):
    rank = T.cluster_ctarank()
    with T.if_(rank == 0, uniform=True):
        T.ptx.barrier.cluster.arrive()
    T.ptx.barrier.cluster.wait()  # EXPECT: cluster-barrier.mismatch
    T.ptx.st.global_.u32(out.at(T.ctaid.x * 32 + T.tid.x), rank)


@T.kernel(block=32, cluster=(2, 1, 1))
def fixed(out: T.gptr[T.u32]):
    rank = T.cluster_ctarank()
    T.ptx.barrier.cluster.arrive()
    T.ptx.barrier.cluster.wait()
    T.ptx.st.global_.u32(out.at(T.ctaid.x * 32 + T.tid.x), rank)


def inputs():
    return dict(out=np.zeros(64, np.uint32))
