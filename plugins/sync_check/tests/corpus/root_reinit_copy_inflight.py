"""mbarrier.reinit-in-use, at the re-init (issue 13 class 6): lane 0 starts a bulk copy that
completes on ``loaded`` and, to reuse the barrier for the next stage, re-initializes it right
away instead of after waiting: the copy's ``complete_tx`` can land after the re-init (in the
barrier's next life) or before it (and be wiped). The finding is the re-init, not the wait that
hangs.

Fixed twin: the warp waits for the copy before the re-init.
"""
# ISSUE13: class 6
import numpy as np

import tirxh.lang as T

GRID = (1,)
BULK = T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"]


def _kernel(bug: bool):
    @T.kernel(block=32, name="buggy" if bug else "fixed")
    def k(src: T.gptr[T.u32], out: T.gptr[T.u32]):
        stage = T.shared(T.u32, 32, align=128, name="stage")
        loaded = T.mbarrier(1, name="loaded")
        lane = T.laneid()
        with T.if_(lane == 0):
            loaded.init(1)
            loaded.arrive_expect_tx(128)
            BULK(stage.at(0), src.at(0), 128, loaded[0])
        if not bug:
            loaded.wait(0)
        with T.if_(lane == 0):
            loaded.init(1)  # EXPECT: mbarrier.reinit-in-use
            loaded.arrive()
        loaded.wait(0)
        T.ptx.st.global_.u32(out.at(lane), T.ptx.ld.shared.u32(stage.at(lane)))
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(src=np.arange(32, dtype=np.uint32), out=np.zeros(32, np.uint32))
