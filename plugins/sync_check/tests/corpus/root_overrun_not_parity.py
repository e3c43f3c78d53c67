"""mbarrier.phase-overrun, not parity-never (issue 13 class 6): the producer publishes two
batches by arriving twice on ``ready`` (count 1) with nothing making it wait for the consumer.
When both arrivals happen before the consumer's first wait, the barrier has already completed
two phases: the consumer's wait on parity 0 now looks at a phase that will not complete again and
waits for ever (numsim's own schedule does exactly that). The barrier did not fail to complete
the phase: it ran past it.

Fixed twin: the producer waits on ``taken`` (the consumer's acknowledgement) before its second
arrival.
"""
# ISSUE13: class 6
import numpy as np

import tirxh.lang as T

GRID = (1,)


def _kernel(bug: bool):
    @T.kernel(block=64, name="buggy" if bug else "fixed")
    def k(out: T.gptr[T.u32]):
        batch = T.shared(T.u32, (2, 32), name="batch")
        ready = T.mbarrier(1, name="ready")
        taken = T.mbarrier(1, name="taken")
        w = T.warp_index()
        lane = T.laneid()
        with T.if_(T.tid.x == 0):
            ready.init(1)
            taken.init(1)
        T.ptx.bar.sync(0)
        with T.if_(w == 0, uniform=True):
            for b in range(2):
                T.ptx.st.shared.u32(batch.at(b, lane), lane + 10 * b)
                T.ptx.bar.warp.sync(0xFFFFFFFF)
                if b == 1 and not bug:
                    taken.wait(0)
                with T.if_(lane == 0):
                    ready.arrive()
        with T.if_(w == 1, uniform=True):
            ready.wait(0)  # EXPECT: mbarrier.phase-overrun
            first = T.ptx.ld.shared.u32(batch.at(0, lane))
            T.ptx.bar.warp.sync(0xFFFFFFFF)
            with T.if_(lane == 0):
                taken.arrive()
            ready.wait(1)
            second = T.ptx.ld.shared.u32(batch.at(1, lane))
            T.ptx.st.global_.u32(out.at(lane), first + second)
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(out=np.zeros(32, np.uint32))
