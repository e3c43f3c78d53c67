"""race.read-write with sm_80 cp.async: each lane copies one word global -> shared with
``cp.async`` and the warp reads its neighbour's word before ``cp.async.wait_group`` says the
copies landed (numsim lands them at once, so its output is right).

Fixed twin: ``cp.async.wait_group 0`` and ``bar.warp.sync`` before the read.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


@T.kernel(block=32)
def buggy(x: T.gptr[T.u32], out: T.gptr[T.u32]):
    buf = T.shared(T.u32, 32, name="buf")
    lane = T.laneid()
    T.ptx.cp.async_.ca.shared.global_(buf.at(lane), x.at(lane), 4)
    T.ptx.cp.async_.commit_group()
    v = T.ptx.ld.shared.u32(buf.at(lane ^ 1))  # EXPECT: race.read-write
    T.ptx.st.global_.u32(out.at(lane), v)
    T.ptx.cp.async_.wait_group(0)


@T.kernel(block=32)
def fixed(x: T.gptr[T.u32], out: T.gptr[T.u32]):
    buf = T.shared(T.u32, 32, name="buf")
    lane = T.laneid()
    T.ptx.cp.async_.ca.shared.global_(buf.at(lane), x.at(lane), 4)
    T.ptx.cp.async_.commit_group()
    T.ptx.cp.async_.wait_group(0)
    T.ptx.bar.warp.sync(0xFFFFFFFF)
    v = T.ptx.ld.shared.u32(buf.at(lane ^ 1))
    T.ptx.st.global_.u32(out.at(lane), v)


def inputs():
    return dict(x=np.arange(32, dtype=np.uint32) + 100, out=np.zeros(32, np.uint32))
