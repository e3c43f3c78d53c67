"""proxy.missing-fence: the warp writes a shared buffer with ordinary stores (generic proxy) and
then a TMA store (async proxy) reads it, with no ``fence.proxy.async`` between: the TMA engine may
read stale data although the stores come first in program order.

Fixed twin: ``fence.proxy.async.shared::cta`` after the stores.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


@T.kernel(block=32)
def buggy(out_map: T.tensormap, out: T.gptr[T.u32]):
    buf = T.shared(T.u32, 32, align=128, name="buf")
    lane = T.laneid()
    T.ptx.st.shared.u32(buf.at(lane), lane * 3)  # EXPECT: proxy.missing-fence
    T.ptx.bar.warp.sync(0xFFFFFFFF)  # every lane's stores, before lane 0's copy reads them
    with T.if_(lane == 0):
        T.ptx.cp.async_.bulk.tensor._1d.global_.shared__cta.tile.bulk_group(out_map[0], buf)
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


@T.kernel(block=32)
def fixed(out_map: T.tensormap, out: T.gptr[T.u32]):
    buf = T.shared(T.u32, 32, align=128, name="buf")
    lane = T.laneid()
    T.ptx.st.shared.u32(buf.at(lane), lane * 3)
    T.ptx.fence.proxy.async_.shared__cta()
    T.ptx.bar.warp.sync(0xFFFFFFFF)  # every lane's stores, before lane 0's copy reads them
    with T.if_(lane == 0):
        T.ptx.cp.async_.bulk.tensor._1d.global_.shared__cta.tile.bulk_group(out_map[0], buf)
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


def inputs():
    return dict(out=np.zeros(32, np.uint32), out_map=T.TensorMap("out", box=(32,)))
