"""The event records sync_check reads for warp collectives (`events.WarpSync`): the lanes that
executed the instruction, its member mask and the lanes that had exited."""

import numpy as np

import tirxh.lang as T
import tirxh_numsim as ns
from tirxh_numsim import events as ev


@T.kernel(block=32)
def collectives(out: T.gptr[T.u32]):
    lane = T.laneid()
    with T.if_(lane >= 28):
        T.ptx.ret()  # lanes 28-31 exit
    v = T.ptx.shfl.sync.bfly.b32(lane, 1, 31, 0x0FFFFFFF)
    with T.if_(lane < 16):
        bal = T.ptx.vote.ballot.sync.b32(lane < 4, 0xFFFF)
        T.ptx.bar.warp.sync(0xFFFF)
        T.ptx.st.global_.u32(out.at(lane), bal + v)


def test_collectives_record_lanes_member_mask_and_exited_lanes():
    res = ns.run(collectives, dict(out=np.zeros(32, np.uint32)), grid=(1,), trace=True)
    assert res.verdict == "clean", res.summary()
    got = [(e.op, e.lanes, e.membermask, e.exited) for e in res.trace.of_kind(ev.WarpSync)]
    assert got == [("shfl.sync", 0x0FFFFFFF, 0x0FFFFFFF, 0xF0000000),
                   ("vote.ballot", 0xFFFF, 0xFFFF, 0xF0000000),
                   ("bar.warp.sync", 0xFFFF, 0xFFFF, 0xF0000000)]


@T.kernel(block=32)
def aligned(src: T.gptr[T.u32], out: T.gptr[T.u32]):
    tile = T.shared(T.u32, (8, 4), align=16, name="tile")
    lane = T.laneid()
    T.ptx.st.shared.u32(tile.at(lane >> 2, lane & 3), T.ptx.ld.global_.u32(src.at(lane)))
    T.ptx.bar.sync(0)
    frag = T.reg(T.u32, init=0)
    with T.if_(lane < 8):
        T.ptx["ldmatrix.sync.aligned.m8n8.x1.shared.b16"]([frag], tile.at(lane, 0))
    T.ptx.st.global_.u32(out.at(lane), frag)


def test_aligned_collectives_record_the_lanes_that_executed_them():
    """ldmatrix's memory event names the lanes whose row addresses it used; the WarpSync event
    names the lanes that executed it."""
    res = ns.run(aligned, dict(src=np.arange(32, dtype=np.uint32), out=np.zeros(32, np.uint32)),
                 grid=(1,), trace=True)
    (e,) = [e for e in res.trace.of_kind(ev.WarpSync)]
    assert (e.op, e.lanes, e.exited) == ("ldmatrix", 0xFF, 0)


@T.kernel(block=32)
def diverging(out: T.gptr[T.u32]):
    lane = T.laneid()
    with T.if_(lane < 4):                       # if: lanes 0-3 / 4-31
        T.ptx.st.global_.u32(out.at(lane), 1)
    with T.if_(T.ctaid.x == 0):                 # uniform: no divergence recorded
        T.ptx.st.global_.u32(out.at(lane), 2)
    i = T.reg(T.u32, init=0)
    with T.loop():                              # break: lane 0 leaves after one iteration, ...
        T.break_(i > lane)
        i.set(i + 1)
    with T.range(lane & 1) as _:                # for: even lanes run no iteration
        T.ptx.st.global_.u32(out.at(lane), 3)


def test_divergence_is_recorded_where_the_lanes_split():
    res = ns.run(diverging, dict(out=np.zeros(32, np.uint32)), grid=(1,), trace=True)
    d = [(e.construct, e.lanes, e.other) for e in res.trace.of_kind(ev.Divergence)]
    assert d[0] == ("if", 0xF, 0xFFFFFFF0)
    breaks = [x for x in d if x[0] == "break"]
    assert len(breaks) == 31 and breaks[0] == ("break", 0x1, 0xFFFFFFFE)
    assert ("for", 0x55555555, 0xAAAAAAAA) in d
    assert len(d) == 1 + 31 + 1  # the odd lanes later leave the for together: no split
