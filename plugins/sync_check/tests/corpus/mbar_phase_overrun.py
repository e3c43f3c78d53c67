"""mbarrier.phase-overrun: a one-stage producer/consumer pipeline with two consumer warps.

The producer (warp 0) copies 32 words per step from global into a shared stage, arrives on
``full`` (all 32 lanes) and waits on ``empty`` before refilling the stage. Both consumers (warps 1
and 2) wait on ``full``, read the stage and accumulate, but ``empty`` is initialized for one
warp's arrivals and only consumer 1 arrives on it. Whenever consumer 2 keeps up with consumer 1
(numsim's schedule, and almost every GPU run) the output is right. If consumer 2 falls behind by
one step, the producer refills the stage and ``full`` completes its next phase before consumer 2
waited for the previous one: consumer 2 then waits on the wrong generation of ``full`` (it either
skips a step or blocks one phase late) and reads overwritten data. The producer sleeps 2 us per
step (standing in for a slow global load), so on a GPU the consumers are practically always
waiting already and the output is right; nothing in the synchronization guarantees it.

Fixed twin: ``empty`` counts both consumer warps and both arrive on it.
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)
K = 4


@T.kernel(block=96)
def buggy(x: T.gptr[T.u32], out: T.gptr[T.u32]):
    stage = T.shared(T.u32, 32, name="stage")
    full = T.mbarrier(1, name="full")
    empty = T.mbarrier(1, name="empty")
    w = T.warp_index()
    lane = T.laneid()
    with T.if_(T.tid.x == 0):
        full.init(32)
        empty.init(32)
    T.ptx.bar.sync(0)
    ring = T.pipeline(1)
    with T.if_(w == 0, uniform=True):
        with T.range(K) as k:
            T.ptx.nanosleep.u32(2000)  # the producer is the slow side (as in a real pipeline)
            empty.wait(ring.phase ^ 1)
            v = T.ptx.ld.global_.u32(x.at(k * 32 + lane))
            T.ptx.st.shared.u32(stage.at(lane), v)
            full.arrive()
            ring.advance()
    with T.else_():
        acc = T.reg(T.u32, init=0)
        with T.range(K) as k:
            full.wait(ring.phase)  # EXPECT: mbarrier.phase-overrun
            acc.set(acc + T.ptx.ld.shared.u32(stage.at(lane)))
            with T.if_(w == 1, uniform=True):
                empty.arrive()
            ring.advance()
        T.ptx.st.global_.u32(out.at((w - 1) * 32 + lane), acc)


@T.kernel(block=96)
def fixed(x: T.gptr[T.u32], out: T.gptr[T.u32]):
    stage = T.shared(T.u32, 32, name="stage")
    full = T.mbarrier(1, name="full")
    empty = T.mbarrier(1, name="empty")
    w = T.warp_index()
    lane = T.laneid()
    with T.if_(T.tid.x == 0):
        full.init(32)
        empty.init(64)
    T.ptx.bar.sync(0)
    ring = T.pipeline(1)
    with T.if_(w == 0, uniform=True):
        with T.range(K) as k:
            T.ptx.nanosleep.u32(2000)  # the producer is the slow side (as in a real pipeline)
            empty.wait(ring.phase ^ 1)
            v = T.ptx.ld.global_.u32(x.at(k * 32 + lane))
            T.ptx.st.shared.u32(stage.at(lane), v)
            full.arrive()
            ring.advance()
    with T.else_():
        acc = T.reg(T.u32, init=0)
        with T.range(K) as k:
            full.wait(ring.phase)
            acc.set(acc + T.ptx.ld.shared.u32(stage.at(lane)))
            empty.arrive()
            ring.advance()
        T.ptx.st.global_.u32(out.at((w - 1) * 32 + lane), acc)


def inputs():
    rng = np.random.default_rng(5)
    return dict(x=rng.integers(0, 1000, K * 32, dtype=np.uint32),
                out=np.zeros(64, np.uint32))


def reference(x, **_):
    s = x.reshape(K, 32).sum(axis=0, dtype=np.uint32)
    return {"out": np.concatenate([s, s])}
