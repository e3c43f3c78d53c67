"""proxy.missing-fence (bulk store): the warp fills a shared buffer with ordinary stores (generic
proxy), then a bulk copy ``cp.async.bulk.global.shared::cta`` (async proxy) reads it out to global
memory with no ``fence.proxy.async.shared::cta`` between: the copy may read stale shared data.
(numsim records the bulk store's shared reads, so this is checked rather than `incomplete`.)

Fixed twin: ``fence.proxy.async.shared::cta`` after the stores.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


@T.kernel(block=32)
def buggy(out: T.gptr[T.u32]):
    buf = T.shared(T.u32, 32, align=128, name="buf")
    lane = T.laneid()
    T.ptx.st.shared.u32(buf.at(lane), lane * 5)  # EXPECT: proxy.missing-fence
    T.ptx.bar.warp.sync(0xFFFFFFFF)  # every lane's stores, before lane 0's copy reads them
    with T.if_(lane == 0):
        T.ptx.cp.async_.bulk.global_.shared__cta.bulk_group(out.at(0), buf.at(0), 128)
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


@T.kernel(block=32)
def fixed(out: T.gptr[T.u32]):
    buf = T.shared(T.u32, 32, align=128, name="buf")
    lane = T.laneid()
    T.ptx.st.shared.u32(buf.at(lane), lane * 5)
    T.ptx.fence.proxy.async_.shared__cta()
    T.ptx.bar.warp.sync(0xFFFFFFFF)  # every lane's stores, before lane 0's copy reads them
    with T.if_(lane == 0):
        T.ptx.cp.async_.bulk.global_.shared__cta.bulk_group(out.at(0), buf.at(0), 128)
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


def inputs():
    return dict(out=np.zeros(32, np.uint32))


def reference(out, **_):
    return {"out": np.arange(32, dtype=np.uint32) * 5}
