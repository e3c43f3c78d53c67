"""race.read-write with st.async (issue 13 class 5): CTA rank 0 pushes 32 words into CTA rank 1's
``inbox`` with ``st.async`` and both CTAs then meet at a cluster barrier. The cluster barrier
orders rank 0's own instructions, not the completion of its asynchronous stores: those are
observed only through the ``complete_tx`` on rank 1's ``ready`` mbarrier, which rank 1 never waits
on, so its read of ``inbox`` races with the stores.

Fixed twin: rank 1 arms ``ready`` for the 128 bytes and waits on it (not on the cluster barrier)
before reading.
"""
# ISSUE13: class 5
import numpy as np

import tirxh.lang as T

GRID = (2,)


def _kernel(bug: bool):
    @T.kernel(block=32, cluster=(2, 1, 1), name="buggy" if bug else "fixed")
    def k(out: T.gptr[T.u32]):
        inbox = T.shared(T.u32, 32, name="inbox")
        ready = T.mbarrier(1, name="ready")
        lane = T.laneid()
        rank = T.cluster_ctarank()
        with T.if_(lane == 0):
            ready.init(1)
            T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.barrier.cluster.arrive()
        T.ptx.barrier.cluster.wait()
        with T.if_(rank == 0, uniform=True):
            dst = T.ptx.mapa.shared__cluster.u32(inbox.ptr(), 1)
            bar = T.ptx.mapa.shared__cluster.u32(ready.buf.ptr(), 1)
            T.ptx.st.async_.shared__cluster.mbarrier__complete_tx__bytes.u32(dst + lane * 4,
                                                                              lane * 7, bar)
        if bug:
            T.ptx.barrier.cluster.arrive()
            T.ptx.barrier.cluster.wait()
        with T.if_(rank == 1, uniform=True):
            if not bug:
                with T.if_(lane == 0):
                    ready.arrive_expect_tx(128)
                ready.wait(0)
            v = T.ptx.ld.shared.u32(inbox.at(lane))  # EXPECT: race.read-write
            T.ptx.st.global_.u32(out.at(lane), v)
        T.ptx.barrier.cluster.arrive()
        T.ptx.barrier.cluster.wait()
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(out=np.zeros(32, np.uint32))
