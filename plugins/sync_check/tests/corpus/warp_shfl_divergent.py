"""warp.membermask (issue 13 class 3): the odd lanes of a warp broadcast lane 1's value among
themselves with ``shfl.sync.idx`` inside the branch only they take, but name the whole warp in the
member mask: the even lanes never execute that shuffle, so it waits on them (or returns undefined
values).

Fixed twin: the member mask names exactly the odd lanes (0xAAAAAAAA).
"""
# ISSUE13: class 3
import numpy as np

import tirxh.lang as T

GRID = (1,)


def _kernel(bug: bool):
    @T.kernel(block=32, name="buggy" if bug else "fixed")
    def k(src: T.gptr[T.u32], out: T.gptr[T.u32]):
        lane = T.laneid()
        v = T.ptx.ld.global_.u32(src.at(lane))
        with T.if_((lane & 1) == 1):
            mask = 0xFFFFFFFF if bug else 0xAAAAAAAA
            r = T.ptx.shfl.sync.idx.b32(v, 1, 31, mask)  # EXPECT: warp.membermask
            T.ptx.st.global_.u32(out.at(lane), r)
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(src=np.arange(100, 132, dtype=np.uint32), out=np.zeros(32, np.uint32))
