"""race.stage-reuse: the warp refills the shared buffer right after issuing the TMA store that
reads it, before ``cp.async.bulk.wait_group.read`` says the store finished reading.

Fixed twin: lane 0 waits for the store's reads, then ``bar.warp.sync`` lets the warp refill.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


@T.kernel(block=32)
def buggy(out_map: T.tensormap, out: T.gptr[T.u32], out2: T.gptr[T.u32]):
    buf = T.shared(T.u32, 32, align=128, name="buf")
    lane = T.laneid()
    T.ptx.st.shared.u32(buf.at(lane), lane * 3)
    T.ptx.fence.proxy.async_.shared__cta()
    T.ptx.bar.warp.sync(0xFFFFFFFF)  # every lane's stores, before lane 0's copy reads them
    with T.if_(lane == 0):
        T.ptx.cp.async_.bulk.tensor._1d.global_.shared__cta.tile.bulk_group(out_map[0], buf)
        T.ptx.cp.async_.bulk.commit_group()
    T.ptx.st.shared.u32(buf.at(lane), lane)  # EXPECT: race.stage-reuse
    T.ptx.st.global_.u32(out2.at(lane), T.ptx.ld.shared.u32(buf.at(lane)))
    with T.if_(lane == 0):
        T.ptx.cp.async_.bulk.wait_group(0)


@T.kernel(block=32)
def fixed(out_map: T.tensormap, out: T.gptr[T.u32], out2: T.gptr[T.u32]):
    buf = T.shared(T.u32, 32, align=128, name="buf")
    lane = T.laneid()
    T.ptx.st.shared.u32(buf.at(lane), lane * 3)
    T.ptx.fence.proxy.async_.shared__cta()
    T.ptx.bar.warp.sync(0xFFFFFFFF)  # every lane's stores, before lane 0's copy reads them
    with T.if_(lane == 0):
        T.ptx.cp.async_.bulk.tensor._1d.global_.shared__cta.tile.bulk_group(out_map[0], buf)
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group.read(0)
    T.ptx.bar.warp.sync(0xFFFFFFFF)
    T.ptx.st.shared.u32(buf.at(lane), lane)
    T.ptx.st.global_.u32(out2.at(lane), T.ptx.ld.shared.u32(buf.at(lane)))
    with T.if_(lane == 0):
        T.ptx.cp.async_.bulk.wait_group(0)


def inputs():
    return dict(out=np.zeros(32, np.uint32), out2=np.zeros(32, np.uint32),
                out_map=T.TensorMap("out", box=(32,)))
