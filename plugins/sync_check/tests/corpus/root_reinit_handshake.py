"""mbarrier.reinit-in-use, at the re-init (issue 13 class 6): warps 0 and 1 use ``round`` (count
2) for one round, then warp 0 re-initializes it (count 1) for a round of its own as soon as its
own wait returns. Warp 1 first answers warp 2 (a named-barrier handshake) and only then waits on
``round``: nothing orders its arrival and wait before warp 0's re-init, which can wipe its
arrival or hand it the next round's phase. The hang it causes shows up later (a wait that never
returns, an arrival count that does not add up); the line to fix is the re-init.

Fixed twin: warps 0 and 1 meet at barrier 2 after the round, before the re-init.
"""
# ISSUE13: class 6
import numpy as np

import tirxh.lang as T

GRID = (1,)


def _kernel(bug: bool):
    @T.kernel(block=96, name="buggy" if bug else "fixed")
    def k(out: T.gptr[T.u32]):
        rnd = T.mbarrier(1, name="round")
        w = T.warp_index()
        lane = T.laneid()
        with T.if_(T.tid.x == 0):
            rnd.init(2)
        T.ptx.bar.sync(0)
        with T.if_(w == 0, uniform=True):
            with T.if_(lane == 0):
                rnd.arrive()
            rnd.wait(0)
            if not bug:
                T.ptx.barrier.sync(2, 64)
            with T.if_(lane == 0):
                rnd.init(1)  # EXPECT: mbarrier.reinit-in-use
                rnd.arrive()
        with T.if_(w == 1, uniform=True):
            with T.if_(lane == 0):
                rnd.arrive()
            T.ptx.barrier.sync(1, 64)
            rnd.wait(0)
            if not bug:
                T.ptx.barrier.sync(2, 64)
        with T.if_(w == 2, uniform=True):
            T.ptx.barrier.sync(1, 64)
        T.ptx.st.global_.u32(out.at(T.tid.x), w)
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(out=np.zeros(96, np.uint32))
