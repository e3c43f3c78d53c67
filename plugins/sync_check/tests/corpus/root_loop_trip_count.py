"""barrier.count-mismatch, at its cause (issue 13 class 6): warps 0 and 1 hand tiles over with
``barrier.sync 1, 64`` once per tile, but each computes its tile count from its own row (warp 0
gets one tile more). Warp 0's last ``barrier.sync`` waits for ever; the line to fix is the loop
whose trip count differs between the warps.

Fixed twin: both warps loop over the same number of tiles.
"""
# ISSUE13: class 6
import numpy as np

import tirxh.lang as T

GRID = (1,)


def _kernel(bug: bool):
    @T.kernel(block=64, name="buggy" if bug else "fixed")
    def k(out: T.gptr[T.u32]):
        w = T.warp_index()
        lane = T.laneid()
        tiles = (3 - w) if bug else T.ptx.mov.u32(2)
        acc = T.reg(T.u32, init=0)
        with T.range(tiles) as i:  # EXPECT: barrier.count-mismatch
            acc.set(acc + i)
            T.ptx.barrier.sync(1, 64)
        T.ptx.st.global_.u32(out.at(w * 32 + lane), acc)
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(out=np.zeros(64, np.uint32))
