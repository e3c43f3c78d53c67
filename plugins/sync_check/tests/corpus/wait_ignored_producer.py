"""race.read-write from a try_wait whose result is ignored (issue 13 class 2): warp 0 fills
``table`` and arrives on ``ready``; warp 1 calls ``mbarrier.try_wait`` once and goes on to read
``table`` without looking at the predicate. In numsim's schedule warp 0 ran first and the probe
succeeded, but nothing makes warp 1 wait for warp 0.

Fixed twin: warp 1 spins on the try_wait until it holds.
"""
# ISSUE13: class 2
import numpy as np

import tirxh.lang as T

GRID = (1,)


def _kernel(bug: bool):
    @T.kernel(block=64, name="buggy" if bug else "fixed")
    def k(out: T.gptr[T.u32]):
        table = T.shared(T.u32, 32, name="table")
        ready = T.mbarrier(1, name="ready")
        w = T.warp_index()
        lane = T.laneid()
        with T.if_(T.tid.x == 0):
            ready.init(32)
        T.ptx.bar.sync(0)
        with T.if_(w == 0, uniform=True):
            T.ptx.st.shared.u32(table.at(lane), lane * lane)
            ready.arrive()
        with T.if_(w == 1, uniform=True):
            if bug:
                ready.try_wait(0)
            else:
                ready.wait(0)
            v = T.ptx.ld.shared.u32(table.at(31 - lane))  # EXPECT: race.read-write
            T.ptx.st.global_.u32(out.at(lane), v)
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(out=np.zeros(32, np.uint32))
