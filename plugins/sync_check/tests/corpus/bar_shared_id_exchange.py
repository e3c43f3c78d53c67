"""barrier.shared-id (issue 13 class 1): warps 0/1 and warps 2/3 each swap a value through
shared memory: every warp writes its slot, meets its partner at ``bar.sync 1, 64`` and reads the
partner's slot. The two pairs share barrier id 1, so a generation can be warps 0 and 2: warp 0
then reads warp 1's slot before warp 1 wrote it.

Fixed twin: the pairs use barriers 1 and 2.
"""
# ISSUE13: class 1
import numpy as np

import tirxh.lang as T

GRID = (1,)


def _kernel(bug: bool):
    @T.kernel(block=128, name="buggy" if bug else "fixed")
    def k(src: T.gptr[T.u32], out: T.gptr[T.u32]):
        slot = T.shared(T.u32, (4, 32), name="slot")
        w = T.warp_index()
        lane = T.laneid()
        T.ptx.st.shared.u32(slot.at(w, lane), T.ptx.ld.global_.u32(src.at(w * 32 + lane)))
        T.ptx.barrier.sync(1 if bug else (w >> 1) + 1, 64)  # EXPECT: barrier.shared-id
        mine = T.ptx.ld.shared.u32(slot.at(w ^ 1, lane))
        T.ptx.st.global_.u32(out.at(w * 32 + lane), mine)
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(src=np.arange(128, dtype=np.uint32), out=np.zeros(128, np.uint32))
