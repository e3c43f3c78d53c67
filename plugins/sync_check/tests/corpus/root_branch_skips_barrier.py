"""barrier.count-mismatch, at its cause (issue 13 class 6): barrier 1 counts all 128 threads of
the block, but its ``barrier.sync`` sits in a branch that only warps 0 and 1 take. They wait
there for ever; the line to fix is the branch that keeps warps 2 and 3 away, so that is the
finding's primary line (the barrier is a related one).

Fixed twin: every warp reaches the barrier.
"""
# ISSUE13: class 6
import numpy as np

import tirxh.lang as T

GRID = (1,)


def _kernel(bug: bool):
    @T.kernel(block=128, name="buggy" if bug else "fixed")
    def k(out: T.gptr[T.u32]):
        w = T.warp_index()
        lane = T.laneid()
        with T.if_(w < 2 if bug else w < 4, uniform=True):  # EXPECT: barrier.count-mismatch
            T.ptx.st.global_.u32(out.at(w * 32 + lane), lane)
            T.ptx.barrier.sync(1, 128)
        T.ptx.st.global_.u32(out.at(128 + w * 32 + lane), w)
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(out=np.zeros(256, np.uint32))
