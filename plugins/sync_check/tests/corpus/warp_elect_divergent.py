"""warp.membermask (issue 13 class 3): the first eight lanes of a warp each own a slot; inside
their branch they elect a leader with a full-warp ``elect.sync`` to publish the slots' count. The
other 24 lanes are in the mask but never reach the election.

Fixed twin: the election's member mask is the eight lanes that take the branch (0xFF).
"""
# ISSUE13: class 3
import numpy as np

import tirxh.lang as T

GRID = (1,)


def _kernel(bug: bool):
    @T.kernel(block=32, name="buggy" if bug else "fixed")
    def k(out: T.gptr[T.u32]):
        lane = T.laneid()
        with T.if_(lane < 8):
            _, leader = T.ptx.elect.sync(0xFFFFFFFF if bug else 0xFF)  # EXPECT: warp.membermask
            with T.if_(leader):
                T.ptx.st.global_.u32(out.at(0), 8)
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(out=np.zeros(1, np.uint32))
