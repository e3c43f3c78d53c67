"""race.read-write from a try_wait whose result is ignored (issue 13 class 2): lane 0 starts a
bulk copy of 128 bytes from global memory into ``stage``, completing on ``full``; the warp then
probes ``full`` once with ``mbarrier.try_wait`` and reads ``stage`` whatever the probe said. A
probe is not a wait: numsim's copy has landed when the probe runs, a GPU's may not have.

Fixed twin: the warp waits (a loop that ends when the try_wait holds).
"""
# ISSUE13: class 2
import numpy as np

import tirxh.lang as T

GRID = (1,)
BULK = T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"]


def _kernel(bug: bool):
    @T.kernel(block=32, name="buggy" if bug else "fixed")
    def k(src: T.gptr[T.u32], out: T.gptr[T.u32]):
        stage = T.shared(T.u32, 32, align=128, name="stage")
        full = T.mbarrier(1, name="full")
        lane = T.laneid()
        with T.if_(lane == 0):
            full.init(1)
            full.arrive_expect_tx(128)
            BULK(stage.at(0), src.at(0), 128, full[0])
        if bug:
            full.try_wait(0)
        else:
            full.wait(0)
        v = T.ptx.ld.shared.u32(stage.at(lane))  # EXPECT: race.read-write
        T.ptx.st.global_.u32(out.at(lane), v + 1)
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(src=np.arange(32, dtype=np.uint32), out=np.zeros(32, np.uint32))
