"""proxy.missing-fence (global): the warp writes ``x`` with ordinary stores (generic proxy), then a
TMA load (async proxy) reads the same bytes back into shared memory. The mbarrier and bar.sync
order the two correctly, but with no ``fence.proxy.async.global`` between them the TMA engine may
read stale global data. numsim lands the load at issue, so its output is right all the same.

Fixed twin: ``fence.proxy.async.global`` after the stores.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


@T.kernel(block=32)
def buggy(x_map: T.tensormap, x: T.gptr[T.u32], out: T.gptr[T.u32]):
    buf = T.shared(T.u32, 32, align=128, name="buf")
    bar = T.mbarrier(1)
    lane = T.laneid()
    T.ptx.st.global_.u32(x.at(lane), lane * 7)  # EXPECT: proxy.missing-fence
    with T.if_(lane == 0):
        bar.init(1)
    T.ptx.bar.sync(0)
    with T.if_(lane == 0):
        bar.arrive_expect_tx(128)
        T.ptx.cp.async_.bulk.tensor._1d.shared__cluster.global_.tile \
            .mbarrier__complete_tx__bytes(buf, x_map[0], bar)
    bar.wait(0)
    T.ptx.st.global_.u32(out.at(lane), T.ptx.ld.shared.u32(buf.at(lane)))


@T.kernel(block=32)
def fixed(x_map: T.tensormap, x: T.gptr[T.u32], out: T.gptr[T.u32]):
    buf = T.shared(T.u32, 32, align=128, name="buf")
    bar = T.mbarrier(1)
    lane = T.laneid()
    T.ptx.st.global_.u32(x.at(lane), lane * 7)
    T.ptx.fence.proxy.async_.global_()
    with T.if_(lane == 0):
        bar.init(1)
    T.ptx.bar.sync(0)
    with T.if_(lane == 0):
        bar.arrive_expect_tx(128)
        T.ptx.cp.async_.bulk.tensor._1d.shared__cluster.global_.tile \
            .mbarrier__complete_tx__bytes(buf, x_map[0], bar)
    bar.wait(0)
    T.ptx.st.global_.u32(out.at(lane), T.ptx.ld.shared.u32(buf.at(lane)))


def inputs():
    return dict(x=np.zeros(32, np.uint32), out=np.zeros(32, np.uint32),
                x_map=T.TensorMap("x", box=(32,)))


def reference(x, out, **_):
    return {"out": np.arange(32, dtype=np.uint32) * 7}
