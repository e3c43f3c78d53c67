"""mbarrier.tx-mismatch with st.async (issue 13 class 5): each CTA of a 2-CTA cluster stores 32
words into its peer's ``inbox`` with ``st.async``, completing 4 bytes per lane on the peer's
``ready`` mbarrier. The receiver arms ``ready`` for 64 bytes, but 128 arrive: the phase completes
after half of them and the rest spill into the next phase, which the kernel never completes.

Fixed twin: the receiver expects the 128 bytes its peer sends.
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
        peer = rank ^ 1
        with T.if_(lane == 0):
            ready.arrive_expect_tx(64 if bug else 128)  # EXPECT: mbarrier.tx-mismatch
        dst = T.ptx.mapa.shared__cluster.u32(inbox.ptr(), peer)
        bar = T.ptx.mapa.shared__cluster.u32(ready.buf.ptr(), peer)
        T.ptx.st.async_.shared__cluster.mbarrier__complete_tx__bytes.u32(dst + lane * 4,
                                                                          lane + rank * 100, bar)
        ready.wait(0)
        T.ptx.st.global_.u32(out.at(T.ctaid.x * 32 + lane), T.ptx.ld.shared.u32(inbox.at(lane)))
        T.ptx.barrier.cluster.arrive()
        T.ptx.barrier.cluster.wait()
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(out=np.zeros(64, np.uint32))
