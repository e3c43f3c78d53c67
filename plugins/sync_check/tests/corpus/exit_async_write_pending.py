"""exit.async-write-pending: lane 0 of warp 0 starts two bulk copies (TMA engine) from global
memory into ``buf0`` and ``buf1``, completing on ``full0`` and ``full1``; warp 1 waits for
``full0`` only and writes ``buf0`` out. Nothing waits for ``full1``: the CTA may exit while the
second copy is still writing ``buf1``, i.e. into shared memory the SM may have given to the next
CTA. numsim lands copies at issue, so its output is right.

Fixed twin: warp 1 also waits for ``full1`` (and uses the tile).
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)
BULK = T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"]


def _kernel(bug: bool):
    @T.kernel(block=64, name="buggy" if bug else "fixed")
    def k(x: T.gptr[T.u32], out: T.gptr[T.u32]):
        buf0 = T.shared(T.u32, 32, align=128, name="buf0")
        buf1 = T.shared(T.u32, 32, align=128, name="buf1")
        full0 = T.mbarrier(1, name="full0")
        full1 = T.mbarrier(1, name="full1")
        w = T.warp_index()
        lane = T.laneid()
        with T.if_(T.tid.x == 0):
            full0.init(1)
            full1.init(1)
        T.ptx.bar.sync(0)
        with T.if_(w == 0, uniform=True):
            with T.if_(lane == 0):
                full0.arrive_expect_tx(128)
                BULK(buf0.at(0), x.at(0), 128, full0[0])
                full1.arrive_expect_tx(128)
                BULK(buf1.at(0), x.at(32), 128, full1[0])  # EXPECT: exit.async-write-pending
        with T.if_(w == 1, uniform=True):
            full0.wait(0)
            v = T.ptx.ld.shared.u32(buf0.at(lane))
            T.ptx.st.global_.u32(out.at(lane), v)
            if not bug:
                full1.wait(0)
                u = T.ptx.ld.shared.u32(buf1.at(lane))
                T.ptx.st.global_.u32(out.at(lane + 32), u)
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(x=np.arange(64, dtype=np.uint32) * 5, out=np.zeros(64, np.uint32))
