"""exit.cp-async-pending: a two-stage cp.async pipeline whose last prefetch is never waited for.
Each lane copies its word of tile 0 and of tile 1 into shared memory (one group each), waits
with ``cp.async.wait_group 1`` (tile 0 landed), and the warp writes tile 0 out. Tile 1's copies
are still pending when the CTA exits: they may write the shared memory of the next CTA on the
SM. numsim lands copies at issue, so its output is right.

Fixed twin: ``cp.async.wait_group 0`` before the exit.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


def _kernel(bug: bool):
    @T.kernel(block=32, name="buggy" if bug else "fixed")
    def k(x: T.gptr[T.u32], out: T.gptr[T.u32]):
        buf0 = T.shared(T.u32, 32, name="buf0")
        buf1 = T.shared(T.u32, 32, name="buf1")
        lane = T.laneid()
        T.ptx.cp.async_.ca.shared.global_(buf0.at(lane), x.at(lane), 4)
        T.ptx.cp.async_.commit_group()
        T.ptx.cp.async_.ca.shared.global_(buf1.at(lane), x.at(lane + 32), 4)
        T.ptx.cp.async_.commit_group()  # EXPECT: exit.cp-async-pending
        T.ptx.cp.async_.wait_group(1)
        T.ptx.bar.warp.sync(0xFFFFFFFF)
        v = T.ptx.ld.shared.u32(buf0.at(lane ^ 1))
        T.ptx.st.global_.u32(out.at(lane), v)
        if not bug:
            T.ptx.cp.async_.wait_group(0)
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(x=np.arange(64, dtype=np.uint32) + 100, out=np.zeros(32, np.uint32))
