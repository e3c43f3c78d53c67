"""warp.aligned-divergent (issue 13 class 3): ``ldmatrix.sync.aligned.m8n8.x1`` takes its eight
row addresses from lanes 0-7, so the kernel executes it only in those lanes. The instruction is
``.aligned``: every lane of the warp must execute it (each lane receives a piece of the matrix),
in warp-uniform control flow.

Fixed twin: all 32 lanes execute it (lanes 8-31 pass a row address too, which the x1 form
ignores).
"""
# ISSUE13: class 3
import numpy as np

import tirxh.lang as T

GRID = (1,)
LDMATRIX = T.ptx["ldmatrix.sync.aligned.m8n8.x1.shared.b16"]


def _kernel(bug: bool):
    @T.kernel(block=32, name="buggy" if bug else "fixed")
    def k(src: T.gptr[T.u32], out: T.gptr[T.u32]):
        tile = T.shared(T.u32, (8, 4), align=16, name="tile")
        lane = T.laneid()
        T.ptx.st.shared.u32(tile.at(lane >> 2, lane & 3), T.ptx.ld.global_.u32(src.at(lane)))
        T.ptx.bar.sync(0)
        frag = T.reg(T.u32, init=0)
        row = tile.at(lane & 7, 0)
        if bug:
            with T.if_(lane < 8):
                LDMATRIX([frag], row)  # EXPECT: warp.aligned-divergent
        else:
            LDMATRIX([frag], row)
        T.ptx.st.global_.u32(out.at(lane), frag)
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(src=np.arange(32, dtype=np.uint32), out=np.zeros(32, np.uint32))
