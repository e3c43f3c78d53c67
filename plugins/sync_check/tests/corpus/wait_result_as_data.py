"""race.read-write from a test_wait used only as data (issue 13 class 2): the consumer warp
stores the ``mbarrier.test_wait`` predicate into its output ("was it ready?") next to the value it
reads, but no control flow depends on the predicate, so the read is not ordered after the
producer's write.

Fixed twin: the consumer loops on the test_wait and records that it was ready after the loop.
"""
# ISSUE13: class 2
import numpy as np

import tirxh.lang as T

GRID = (1,)
TEST_WAIT = T.ptx["mbarrier.test_wait.parity.shared::cta.b64"]


def _kernel(bug: bool):
    @T.kernel(block=64, name="buggy" if bug else "fixed")
    def k(out: T.gptr[T.u32]):
        slot = T.shared(T.u32, 32, name="slot")
        filled = T.mbarrier(1, name="filled")
        w = T.warp_index()
        lane = T.laneid()
        with T.if_(T.tid.x == 0):
            filled.init(1)
        T.ptx.bar.sync(0)
        with T.if_(w == 0, uniform=True):
            T.ptx.st.shared.u32(slot.at(lane), lane + 7)
            T.ptx.bar.warp.sync(0xFFFFFFFF)
            with T.if_(lane == 0):
                filled.arrive()
        with T.if_(w == 1, uniform=True):
            if bug:
                ok = TEST_WAIT(filled[0], 0)
            else:
                with T.loop():
                    ok = TEST_WAIT(filled[0], 0)
                    T.break_(ok)
            flag = T.ptx.selp.u32(1, 0, ok)
            v = T.ptx.ld.shared.u32(slot.at(lane))  # EXPECT: race.read-write
            T.ptx.st.global_.u32(out.at(lane), v)
            T.ptx.st.global_.u32(out.at(32 + lane), flag)
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(out=np.zeros(64, np.uint32))
