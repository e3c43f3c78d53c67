"""exit.bulk-store-pending: lane 0 writes two tiles out with bulk stores
(``cp.async.bulk.global.shared::cta.bulk_group``), one bulk async-group each, and before exiting
waits with ``cp.async.bulk.wait_group.read 1``: that retires the first group only. The second
store may still be reading ``buf1`` when the CTA exits; its shared memory may then belong to the
next CTA on the SM, and the store copies that CTA's data to ``out`` (numsim lands stores at
issue, so its output is right).

Fixed twin: ``cp.async.bulk.wait_group.read 0`` before the exit (CUTLASS's
``tma_store_wait<0>``).
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


def _kernel(bug: bool):
    @T.kernel(block=32, name="buggy" if bug else "fixed")
    def k(out: T.gptr[T.u32]):
        buf0 = T.shared(T.u32, 32, align=128, name="buf0")
        buf1 = T.shared(T.u32, 32, align=128, name="buf1")
        lane = T.laneid()
        T.ptx.st.shared.u32(buf0.at(lane), lane * 3)
        T.ptx.st.shared.u32(buf1.at(lane), lane * 7)
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.bar.warp.sync(0xFFFFFFFF)  # every lane's stores, before lane 0's copy reads them
        with T.if_(lane == 0):
            T.ptx.cp.async_.bulk.global_.shared__cta.bulk_group(out.at(0), buf0.at(0), 128)
            T.ptx.cp.async_.bulk.commit_group()
            T.ptx.cp.async_.bulk.global_.shared__cta.bulk_group(out.at(32), buf1.at(0), 128)
            T.ptx.cp.async_.bulk.commit_group()  # EXPECT: exit.bulk-store-pending
            T.ptx.cp.async_.bulk.wait_group.read(1 if bug else 0)
    return k


buggy, fixed = _kernel(True), _kernel(False)


def inputs():
    return dict(out=np.zeros(64, np.uint32))
