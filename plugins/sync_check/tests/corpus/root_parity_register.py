"""mbarrier.parity-never, at its cause (issue 13 class 6): the consumer reads a header and then
a body that both arrive in the one phase its producer completes, and waits before each read. It
keeps the parity in a register and flips it between the two waits, as if the body came in a
second phase: the second wait asks for a phase with parity 1 that never completes. The hang shows
at the second wait; the line to fix is where the parity is computed.

Fixed twin: the second wait uses the same parity (the phase already completed, it returns).
"""
# ISSUE13: class 6
import numpy as np

import tirxh.lang as T

GRID = (1,)


def _kernel(bug: bool):
    @T.kernel(block=64, name="buggy" if bug else "fixed")
    def k(out: T.gptr[T.u32]):
        msg = T.shared(T.u32, 64, name="msg")
        full = T.mbarrier(1, name="full")
        w = T.warp_index()
        lane = T.laneid()
        with T.if_(T.tid.x == 0):
            full.init(32)
        T.ptx.bar.sync(0)
        with T.if_(w == 0, uniform=True):
            T.ptx.st.shared.u32(msg.at(lane), lane)
            T.ptx.st.shared.u32(msg.at(32 + lane), lane * 2)
            full.arrive()
        with T.if_(w == 1, uniform=True):
            parity = T.reg(T.u32, init=0)
            full.wait(parity)
            head = T.ptx.ld.shared.u32(msg.at(lane))
            parity.set(parity ^ 1 if bug else parity)  # EXPECT: mbarrier.parity-never
            full.wait(parity)
            body = T.ptx.ld.shared.u32(msg.at(32 + lane))
            T.ptx.st.global_.u32(out.at(lane), head + body)
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(out=np.zeros(32, np.uint32))
