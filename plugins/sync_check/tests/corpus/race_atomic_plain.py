"""race.write-write between an atomic and a plain store: warp 0 adds to a counter with
``red.global.add``; warp 1 overwrites it with a plain ``st`` (atomics are only atomic with respect
to other atomics).

Fixed twin: warp 1 also updates the counter atomically.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


@T.kernel(block=64)
def buggy(counter: T.gptr[T.u32]):
    w = T.warp_index()
    lane = T.laneid()
    with T.if_(lane == 0):
        with T.if_(w == 0):
            T.ptx.red.global_.add.u32(counter.at(0), 1)
        with T.if_(w == 1):
            T.ptx.st.global_.u32(counter.at(0), 5)  # EXPECT: race.write-write


@T.kernel(block=64)
def fixed(counter: T.gptr[T.u32]):
    w = T.warp_index()
    lane = T.laneid()
    with T.if_(lane == 0):
        with T.if_(w == 0):
            T.ptx.red.global_.add.u32(counter.at(0), 1)
        with T.if_(w == 1):
            T.ptx.red.global_.add.u32(counter.at(0), 5)


def inputs():
    return dict(counter=np.zeros(1, np.uint32))
