"""race.converged-lanes: a converged warp exchanges values through shared memory: each lane stores
its value to ``tmp[lane]``, the warp runs a ``shfl.sync`` (which waits for the lanes but orders no
memory), and each lane loads its neighbour's slot ``tmp[lane ^ 1]``. The lanes are separate
threads in the PTX memory model; ptxas, compiling one thread, may even move the load above the
store (the addresses differ). numsim runs the warp in lockstep and gets the right answer.

Fixed twin: ``bar.warp.sync`` between the stores and the loads.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


def _kernel(bug: bool):
    @T.kernel(block=32, name="buggy" if bug else "fixed")
    def k(src: T.gptr[T.u32], out: T.gptr[T.u32]):
        tmp = T.shared(T.u32, 32, name="tmp")
        lane = T.laneid()
        v = T.ptx.ld.global_.u32(src.at(lane))
        T.ptx.st.shared.u32(tmp.at(lane), v + 1)
        top = T.ptx.shfl.sync.idx.b32(v, 0, 31, 0xFFFFFFFF)
        if not bug:
            T.ptx.bar.warp.sync(0xFFFFFFFF)
        partner = T.ptx.ld.shared.u32(tmp.at(lane ^ 1))  # EXPECT: race.converged-lanes
        T.ptx.st.global_.u32(out.at(lane), partner + top)
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(src=np.arange(32, dtype=np.uint32), out=np.zeros(32, np.uint32))
