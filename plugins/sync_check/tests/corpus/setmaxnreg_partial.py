"""setmaxnreg.partial-warpgroup: the register budget of warpgroup 1 is raised under a condition
that leaves out warp 7 (``w < 7``), but setmaxnreg must be executed by all four warps.

Fixed twin: the condition selects the whole warpgroup.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


@T.kernel(block=256, min_blocks=1)
def buggy(out: T.gptr[T.u32]):
    wg = T.warpgroup_index()
    w = T.warp_index()
    with T.if_(wg == 0, uniform=True):
        T.ptx.setmaxnreg.dec.sync.aligned.u32(40)
    with T.if_(w >= 4, uniform=True):
        with T.if_(w < 7, uniform=True):
            T.ptx.setmaxnreg.inc.sync.aligned.u32(232)  # EXPECT: setmaxnreg.partial-warpgroup
    T.ptx.st.global_.u32(out.at(T.tid.x), w)


@T.kernel(block=256, min_blocks=1)
def fixed(out: T.gptr[T.u32]):
    wg = T.warpgroup_index()
    w = T.warp_index()
    with T.if_(wg == 0, uniform=True):
        T.ptx.setmaxnreg.dec.sync.aligned.u32(40)
    with T.if_(wg == 1, uniform=True):
        T.ptx.setmaxnreg.inc.sync.aligned.u32(232)
    T.ptx.st.global_.u32(out.at(T.tid.x), w)


def inputs():
    return dict(out=np.zeros(256, np.uint32))
