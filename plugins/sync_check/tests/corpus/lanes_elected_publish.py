"""race.divergent-lanes (issue 13 class 4): warp 0 fills ``buf`` in two halves (lanes 0-15 and
16-31 in the two sides of a branch), then lane 0 alone arrives on ``ready`` to publish the buffer
to warp 1. Under independent thread scheduling the two halves are separate threads after the
branch: lane 0's arrive releases its own half's stores, not lanes 16-31's, so warp 1's read of
the upper half is unordered with them. numsim (and a GPU, most of the time) runs the halves in
order, and the output is right.

Fixed twin: ``bar.warp.sync`` joins the warp's lanes before the elected lane publishes.
"""
# ISSUE13: class 4
import numpy as np

import tirxh.lang as T

GRID = (1,)


def _kernel(bug: bool):
    @T.kernel(block=64, name="buggy" if bug else "fixed")
    def k(out: T.gptr[T.u32]):
        buf = T.shared(T.u32, 32, name="buf")
        ready = T.mbarrier(1, name="ready")
        w = T.warp_index()
        lane = T.laneid()
        with T.if_(T.tid.x == 0):
            ready.init(1)
        T.ptx.bar.sync(0)
        with T.if_(w == 0, uniform=True):
            with T.if_(lane < 16):
                T.ptx.st.shared.u32(buf.at(lane), lane)
            with T.else_():
                T.ptx.st.shared.u32(buf.at(lane), lane * 10)
            if not bug:
                T.ptx.bar.warp.sync(0xFFFFFFFF)
            with T.if_(lane == 0):
                ready.arrive()  # EXPECT: race.divergent-lanes
        with T.if_(w == 1, uniform=True):
            ready.wait(0)
            T.ptx.st.global_.u32(out.at(lane), T.ptx.ld.shared.u32(buf.at(lane)))
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(out=np.zeros(32, np.uint32))
