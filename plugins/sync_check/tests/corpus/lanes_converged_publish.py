"""race.converged-lanes, published: the warp stores a row to shared memory with every lane (no
divergence: one lockstep class), fences the async proxy, and the elected lane 0 issues the bulk
copy of the row to global memory. In the PTX memory model the copy starts from lane 0's view: the
other lanes' stores are not ordered before lane 0's issue (the fence orders each lane's own
proxies; nothing orders one lane before another), so the copy may read stale bytes.

Fixed twin: ``bar.warp.sync`` between the fence and the copy (CUTLASS uses a named barrier).
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)
BULK_STORE = T.ptx["cp.async.bulk.global.shared::cta.bulk_group"]


def _kernel(bug: bool):
    @T.kernel(block=32, name="buggy" if bug else "fixed")
    def k(src: T.gptr[T.u32], out: T.gptr[T.u32]):
        row = T.shared(T.u32, 32, align=128, name="row")
        lane = T.laneid()
        T.ptx.st.shared.u32(row.at(lane), T.ptx.ld.global_.u32(src.at(lane)) * 3)
        T.ptx.fence.proxy.async_.shared__cta()
        if not bug:
            T.ptx.bar.warp.sync(0xFFFFFFFF)
        with T.if_(lane == 0):
            BULK_STORE(out.at(0), row.at(0), 128)  # EXPECT: race.converged-lanes
            T.ptx.cp.async_.bulk.commit_group()
            T.ptx.cp.async_.bulk.wait_group(0)
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(src=np.arange(32, dtype=np.uint32), out=np.zeros(32, np.uint32))
