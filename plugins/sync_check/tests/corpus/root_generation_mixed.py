"""barrier.count-mismatch, at its cause (issue 13 class 6): a block of four warps meets twice at
barrier 1 (count 128), but the first meeting is inside a branch warp 3 skips. Warp 3's only
arrival (at the second meeting) completes the first generation together with warps 0-2's first
arrivals, and warps 0-2 then wait at the second meeting for ever. The hang shows at the second
barrier; the cause is the branch around the first.

Fixed twin: warp 3 takes part in the first meeting too.
"""
# ISSUE13: class 6
import numpy as np

import tirxh.lang as T

GRID = (1,)


def _kernel(bug: bool):
    @T.kernel(block=128, name="buggy" if bug else "fixed")
    def k(src: T.gptr[T.u32], out: T.gptr[T.u32]):
        stage = T.shared(T.u32, 128, name="stage")
        w = T.warp_index()
        t = T.tid.x
        T.ptx.st.shared.u32(stage.at(t), T.ptx.ld.global_.u32(src.at(t)))
        with T.if_(w != 3 if bug else w < 4, uniform=True):  # EXPECT: barrier.count-mismatch
            T.ptx.barrier.sync(1, 128)
        v = T.ptx.ld.shared.u32(stage.at(127 - t))
        T.ptx.barrier.sync(1, 128)
        T.ptx.st.shared.u32(stage.at(t), v + 1)
        T.ptx.st.global_.u32(out.at(t), v)
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(src=np.arange(128, dtype=np.uint32), out=np.zeros(128, np.uint32))
