"""mbarrier.uninitialized with red.async (issue 13 class 5): CTA rank 1 adds its lane ids into
CTA rank 0's ``total`` with ``red.async``, completing on rank 0's ``done`` mbarrier, but nothing
orders rank 0's ``mbarrier.init`` (and its zeroing of ``total``) before rank 1's reductions: the
bytes can complete on a barrier that is not initialized yet (and be wiped by the init). numsim's
schedule happens to run rank 0 first; synccheck finds the other order.

Fixed twin: ``fence.mbarrier_init`` and a cluster barrier between the init and the reductions.
"""
# ISSUE13: class 5
import numpy as np

import tirxh.lang as T

GRID = (2,)
RED_ADD = T.ptx["red.async.relaxed.cluster.shared::cluster"
                ".mbarrier::complete_tx::bytes.add.u32"]


def _kernel(bug: bool):
    @T.kernel(block=32, cluster=(2, 1, 1), name="buggy" if bug else "fixed")
    def k(out: T.gptr[T.u32]):
        total = T.shared(T.u32, 1, name="total")
        done = T.mbarrier(1, name="done")
        lane = T.laneid()
        rank = T.cluster_ctarank()
        with T.if_(rank == 0, uniform=True):
            with T.if_(lane == 0):
                T.ptx.st.shared.u32(total.at(0), 0)
                done.init(1)
                if not bug:
                    T.ptx.fence.mbarrier_init.release.cluster()
        if not bug:
            T.ptx.barrier.cluster.arrive()
            T.ptx.barrier.cluster.wait()
        with T.if_(rank == 0, uniform=True):
            with T.if_(lane == 0):
                done.arrive_expect_tx(128)
            done.wait(0)
            with T.if_(lane == 0):
                T.ptx.st.global_.u32(out.at(0), T.ptx.ld.shared.u32(total.at(0)))
        with T.if_(rank == 1, uniform=True):
            dst = T.ptx.mapa.shared__cluster.u32(total.ptr(), 0)
            bar = T.ptx.mapa.shared__cluster.u32(done.buf.ptr(), 0)
            RED_ADD(dst, lane, bar)  # EXPECT: mbarrier.uninitialized
        T.ptx.barrier.cluster.arrive()
        T.ptx.barrier.cluster.wait()
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(out=np.zeros(1, np.uint32))
