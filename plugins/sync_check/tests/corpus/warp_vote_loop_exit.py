"""warp.membermask (issue 13 class 3): lane i of a warp runs i + 1 iterations of a loop and
takes a full-warp ``vote.sync.ballot`` on every iteration; lanes that already left the loop never
execute the later ballots, which still name them in the member mask.

Fixed twin: each iteration's ballot names the lanes still in the loop (``activemask``).
"""
# ISSUE13: class 3
import numpy as np

import tirxh.lang as T

GRID = (1,)


def _kernel(bug: bool):
    @T.kernel(block=32, name="buggy" if bug else "fixed")
    def k(out: T.gptr[T.u32]):
        lane = T.laneid()
        i = T.reg(T.u32, init=0)
        acc = T.reg(T.u32, init=0)
        with T.loop():
            T.break_(i > lane)
            members = 0xFFFFFFFF if bug else T.ptx.activemask.b32()
            bal = T.ptx.vote.ballot.sync.b32((lane & 1) == 0, members)  # EXPECT: warp.membermask
            acc.set(acc ^ bal)
            i.set(i + 1)
        T.ptx.st.global_.u32(out.at(lane), acc)
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(out=np.zeros(32, np.uint32))
