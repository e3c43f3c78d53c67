"""barrier.shared-id (issue 13 class 1): two producer/consumer pairs of warps (0 -> 1, 2 -> 3)
hand a buffer over with a named barrier of 64 threads, and both pairs use barrier 1. A
generation of barrier 1 completes with whichever 64 threads arrive first: consumer 1 can be
released by producer 2's ``bar.arrive`` (or by consumer 3) before producer 0 wrote its buffer.
numsim's schedule happens to pair them as intended.

Fixed twin: each pair has its own barrier id (1 and 2).
"""
# ISSUE13: class 1
import numpy as np

import tirxh.lang as T

GRID = (1,)


def _kernel(bug: bool):
    @T.kernel(block=128, name="buggy" if bug else "fixed")
    def k(out: T.gptr[T.u32]):
        buf = T.shared(T.u32, (2, 32), name="buf")
        w = T.warp_index()
        lane = T.laneid()
        pair = w >> 1
        bid = 1 if bug else pair + 1
        with T.if_((w & 1) == 0, uniform=True):  # producers
            T.ptx.st.shared.u32(buf.at(pair, lane), lane + 100 * pair)
            T.ptx.bar.arrive(bid, 64)
        with T.else_():  # consumers
            T.ptx.barrier.sync(bid, 64)  # EXPECT: barrier.shared-id
            T.ptx.st.global_.u32(out.at(pair * 32 + lane), T.ptx.ld.shared.u32(buf.at(pair, lane)))
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(out=np.zeros(64, np.uint32))
