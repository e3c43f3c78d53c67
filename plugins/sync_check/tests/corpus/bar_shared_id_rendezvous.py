"""barrier.shared-id (issue 13 class 1): warp 0 produces ``table`` for warp 1 through barrier 1
(``bar.arrive`` / ``bar.sync`` of 64 threads), while warps 2 and 3, which share no data with
them, use the same barrier id 1 to start a phase of their own together. Warp 1's ``bar.sync``
can complete with warp 2's or 3's arrival: it then reads ``table`` before warp 0 filled it.

Fixed twin: the rendezvous of warps 2 and 3 uses barrier 3.
"""
# ISSUE13: class 1
import numpy as np

import tirxh.lang as T

GRID = (1,)


def _kernel(bug: bool):
    @T.kernel(block=128, name="buggy" if bug else "fixed")
    def k(out: T.gptr[T.u32]):
        table = T.shared(T.u32, 32, name="table")
        w = T.warp_index()
        lane = T.laneid()
        with T.if_(w == 0, uniform=True):
            T.ptx.st.shared.u32(table.at(lane), lane * 3)
            T.ptx.bar.arrive(1, 64)
        with T.if_(w == 1, uniform=True):
            T.ptx.barrier.sync(1, 64)  # EXPECT: barrier.shared-id
            T.ptx.st.global_.u32(out.at(lane), T.ptx.ld.shared.u32(table.at(lane)))
        with T.if_(w >= 2, uniform=True):
            T.ptx.barrier.sync(1 if bug else 3, 64)
            T.ptx.st.global_.u32(out.at(w * 32 + lane), w)
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(out=np.zeros(128, np.uint32))
