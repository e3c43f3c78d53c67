"""mbarrier.tx-mismatch with red.async (issue 13 class 5): CTA rank 1 reduces into CTA rank 0's
histogram with ``red.async``, but only its lanes 0-15 have a bin to add (the others are guarded
off). Rank 0 arms ``done`` for 32 lanes' worth of bytes (128) and waits for ever: 64 arrive.

Fixed twin: rank 0 expects the 64 bytes that are sent.
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
        hist = T.shared(T.u32, 16, name="hist")
        done = T.mbarrier(1, name="done")
        lane = T.laneid()
        rank = T.cluster_ctarank()
        with T.if_(lane < 16):
            T.ptx.st.shared.u32(hist.at(lane), 0)
        with T.if_(lane == 0):
            done.init(1)
            T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.barrier.cluster.arrive()
        T.ptx.barrier.cluster.wait()
        with T.if_(rank == 0, uniform=True):
            with T.if_(lane == 0):
                done.arrive_expect_tx(128 if bug else 64)  # EXPECT: mbarrier.tx-mismatch
            done.wait(0)
            with T.if_(lane < 16):
                T.ptx.st.global_.u32(out.at(lane), T.ptx.ld.shared.u32(hist.at(lane)))
        with T.if_(rank == 1, uniform=True):
            dst = T.ptx.mapa.shared__cluster.u32(hist.ptr(), 0)
            bar = T.ptx.mapa.shared__cluster.u32(done.buf.ptr(), 0)
            RED_ADD(dst + (lane & 15) * 4, lane + 1, bar, pred=lane < 16)
        T.ptx.barrier.cluster.arrive()
        T.ptx.barrier.cluster.wait()
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(out=np.zeros(16, np.uint32))
