"""race.divergent-lanes (issue 13 class 4): the lanes of a warp compute their values in a
divergent branch (the lower half one way, the upper half another), store them to ``tmp``, and
then read the value of the lane in the other half (``lane ^ 16``). Nothing joins the halves
between the stores and the loads: they are separate threads after the branch, so a lane may
read its partner's slot before the partner wrote it.

Fixed twin: ``bar.warp.sync`` between the stores and the loads.
"""
# ISSUE13: class 4
import numpy as np

import tirxh.lang as T

GRID = (1,)


def _kernel(bug: bool):
    @T.kernel(block=32, name="buggy" if bug else "fixed")
    def k(src: T.gptr[T.u32], out: T.gptr[T.u32]):
        tmp = T.shared(T.u32, 32, name="tmp")
        lane = T.laneid()
        v = T.ptx.ld.global_.u32(src.at(lane))
        with T.if_(lane < 16):
            T.ptx.st.shared.u32(tmp.at(lane), v + 1)
        with T.else_():
            T.ptx.st.shared.u32(tmp.at(lane), v * 3)
        if not bug:
            T.ptx.bar.warp.sync(0xFFFFFFFF)
        partner = T.ptx.ld.shared.u32(tmp.at(lane ^ 16))  # EXPECT: race.divergent-lanes
        T.ptx.st.global_.u32(out.at(lane), partner)
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(src=np.arange(32, dtype=np.uint32), out=np.zeros(32, np.uint32))
