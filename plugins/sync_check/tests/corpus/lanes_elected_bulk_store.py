"""race.divergent-lanes (issue 13 class 4): lane i of the warp accumulates i + 1 terms in a loop
(so lanes leave it at different iterations: the warp diverges) and stores its sum to ``row``;
then the elected lane 0 fences and issues a bulk copy of ``row`` to global memory. The copy
starts from lane 0's view: the stores of the lanes that left the loop at other iterations are
not ordered before it (they were never joined), so the copy may read stale bytes.

Fixed twin: ``bar.warp.sync`` joins the lanes after the loop, before the fence and the copy.
"""
# ISSUE13: class 4
import numpy as np

import tirxh.lang as T

GRID = (1,)
BULK_STORE = T.ptx["cp.async.bulk.global.shared::cta.bulk_group"]


def _kernel(bug: bool):
    @T.kernel(block=32, name="buggy" if bug else "fixed")
    def k(out: T.gptr[T.u32]):
        row = T.shared(T.u32, 32, align=128, name="row")
        lane = T.laneid()
        acc = T.reg(T.u32, init=0)
        i = T.reg(T.u32, init=0)
        with T.loop():
            T.break_(i > lane)
            acc.set(acc + i * i)
            i.set(i + 1)
        T.ptx.st.shared.u32(row.at(lane), acc)
        if not bug:
            T.ptx.bar.warp.sync(0xFFFFFFFF)
        T.ptx.fence.proxy.async_.shared__cta()
        with T.if_(lane == 0):
            BULK_STORE(out.at(0), row.at(0), 128)  # EXPECT: race.divergent-lanes
            T.ptx.cp.async_.bulk.commit_group()
            T.ptx.cp.async_.bulk.wait_group(0)
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(out=np.zeros(32, np.uint32))
