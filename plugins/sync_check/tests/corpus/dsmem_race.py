"""race.read-write on distributed shared memory: CTA 0 stores into CTA 1's buffer through
``mapa`` + ``st.shared::cluster``; CTA 1 reads its buffer with nothing ordering the remote store
before the read.

Fixed twin: a cluster barrier (arrive.release / wait.acquire) between the store and the read.
"""
import numpy as np

import tirxh.lang as T

GRID = (2,)


@T.kernel(block=32, cluster=(2, 1, 1))
def buggy(out: T.gptr[T.u32]):
    buf = T.shared(T.u32, 32, name="buf")
    lane = T.laneid()
    rank = T.cluster_ctarank()
    T.ptx.st.shared.u32(buf.at(lane), 0)
    T.ptx.barrier.cluster.arrive()
    T.ptx.barrier.cluster.wait()
    with T.if_(rank == 0, uniform=True):
        remote = T.ptx.mapa.shared__cluster.u32(buf.ptr(), 1)
        T.ptx.st.shared__cluster.u32(remote + lane * 4, lane + 40)
    with T.if_(rank == 1, uniform=True):
        v = T.ptx.ld.shared.u32(buf.at(lane))  # EXPECT: race.read-write
        T.ptx.st.global_.u32(out.at(lane), v)
    T.ptx.barrier.cluster.arrive()
    T.ptx.barrier.cluster.wait()


@T.kernel(block=32, cluster=(2, 1, 1))
def fixed(out: T.gptr[T.u32]):
    buf = T.shared(T.u32, 32, name="buf")
    lane = T.laneid()
    rank = T.cluster_ctarank()
    T.ptx.st.shared.u32(buf.at(lane), 0)
    T.ptx.barrier.cluster.arrive()
    T.ptx.barrier.cluster.wait()
    with T.if_(rank == 0, uniform=True):
        remote = T.ptx.mapa.shared__cluster.u32(buf.ptr(), 1)
        T.ptx.st.shared__cluster.u32(remote + lane * 4, lane + 40)
    T.ptx.barrier.cluster.arrive()
    T.ptx.barrier.cluster.wait()
    with T.if_(rank == 1, uniform=True):
        v = T.ptx.ld.shared.u32(buf.at(lane))
        T.ptx.st.global_.u32(out.at(lane), v)


def inputs():
    return dict(out=np.zeros(32, np.uint32))
