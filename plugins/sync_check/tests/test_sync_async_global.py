"""racecheck on the global reads of TMA and bulk loads (numsim records them as async-proxy
accesses): unordered generic writes race with them, writes while a load may still read are stage
reuse, and only a fence covering global memory orders a generic write before them."""

from __future__ import annotations

import numpy as np

import tirxh.lang as T
from tirxh_sync_check import check_kernel


def _kinds(res):
    return sorted({f.kind for f in res.findings if f.severity != "incomplete"})


def _load(buf, x_map, bar):
    T.ptx.cp.async_.bulk.tensor._1d.shared__cluster.global_.tile \
        .mbarrier__complete_tx__bytes(buf, x_map[0], bar)


@T.kernel(block=64)
def _unordered_writer(x_map: T.tensormap, x: T.gptr[T.u32], out: T.gptr[T.u32]):
    """Warp 1 stores to x with no synchronization with warp 0's TMA load of x."""
    buf = T.shared(T.u32, 32, align=128, name="buf")
    bar = T.mbarrier(1)
    w = T.warp_index()
    lane = T.laneid()
    with T.if_(T.tid.x == 0):
        bar.init(1)
    T.ptx.bar.sync(0)
    with T.if_(w == 1, uniform=True):
        T.ptx.st.global_.u32(x.at(lane), lane)
        T.ptx.fence.proxy.async_.global_()
    with T.if_(w == 0, uniform=True):
        with T.if_(lane == 0):
            bar.arrive_expect_tx(128)
            _load(buf, x_map, bar)
        bar.wait(0)
        T.ptx.st.global_.u32(out.at(lane), T.ptx.ld.shared.u32(buf.at(lane)))


@T.kernel(block=32)
def _overwrite_in_flight(x_map: T.tensormap, x: T.gptr[T.u32], out: T.gptr[T.u32]):
    """The warp overwrites x before waiting for the TMA load that reads it."""
    buf = T.shared(T.u32, 32, align=128, name="buf")
    bar = T.mbarrier(1)
    lane = T.laneid()
    with T.if_(lane == 0):
        bar.init(1)
    T.ptx.bar.sync(0)
    with T.if_(lane == 0):
        bar.arrive_expect_tx(128)
        _load(buf, x_map, bar)
    T.ptx.st.global_.u32(x.at(lane), lane)
    bar.wait(0)
    T.ptx.st.global_.u32(out.at(lane), T.ptx.ld.shared.u32(buf.at(lane)))


def _inputs():
    return dict(x=np.arange(32, dtype=np.uint32), out=np.zeros(32, np.uint32),
                x_map=T.TensorMap("x", box=(32,)))


def test_unordered_generic_write_races_with_a_tma_load():
    _, race = check_kernel(_unordered_writer, _inputs(), grid=(1,))
    assert "race.read-write" in _kinds(race), race.summary
    f = [f for f in race.findings if f.kind == "race.read-write"][0]
    assert "global 'x'" in f.message and "async read global" in f.message


def test_write_to_bytes_a_tma_load_may_still_read_is_stage_reuse():
    _, race = check_kernel(_overwrite_in_flight, _inputs(), grid=(1,))
    assert _kinds(race) == ["race.stage-reuse"], race.summary


def test_tma_load_of_an_input_never_written_is_clean():
    @T.kernel(block=32)
    def k(x_map: T.tensormap, x: T.gptr[T.u32], out: T.gptr[T.u32]):
        buf = T.shared(T.u32, 32, align=128, name="buf")
        bar = T.mbarrier(1)
        lane = T.laneid()
        with T.if_(lane == 0):
            bar.init(1)
        T.ptx.bar.sync(0)
        with T.if_(lane == 0):
            bar.arrive_expect_tx(128)
            _load(buf, x_map, bar)
        bar.wait(0)
        T.ptx.st.global_.u32(out.at(lane), T.ptx.ld.shared.u32(buf.at(lane)))

    sync, race = check_kernel(k, _inputs(), grid=(1,))
    assert (sync.verdict, race.verdict) == ("clean", "clean"), (sync.summary, race.summary)


def _store_then_read(read_only_wait: bool):
    wait = T.ptx.cp.async_.bulk.wait_group.read if read_only_wait else \
        T.ptx.cp.async_.bulk.wait_group

    @T.kernel(block=32)
    def k(y: T.gptr[T.u32], out: T.gptr[T.u32]):
        buf = T.shared(T.u32, 32, align=128, name="buf")
        lane = T.laneid()
        T.ptx.st.shared.u32(buf.at(lane), lane)
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.bar.warp.sync(0xFFFFFFFF)  # every lane's stores, before lane 0's copy reads them
        with T.if_(lane == 0):
            T.ptx.cp.async_.bulk.global_.shared__cta.bulk_group(y.at(0), buf.at(0), 128)
            T.ptx.cp.async_.bulk.commit_group()
            wait(0)
        T.ptx.bar.warp.sync(0xFFFFFFFF)
        T.ptx.st.global_.u32(out.at(lane), T.ptx.ld.global_.u32(y.at(lane)))
    return k


def test_reading_what_a_bulk_store_writes_after_a_read_only_wait_races():
    """``wait_group.read`` retires the store's shared reads, not its global writes."""
    inp = dict(y=np.zeros(32, np.uint32), out=np.zeros(32, np.uint32))
    _, race = check_kernel(_store_then_read(True), inp, grid=(1,))
    assert _kinds(race) == ["race.read-write"], race.summary
    f = race.findings[0]
    assert "global 'y'" in f.message and "async write global" in f.message
    _, race = check_kernel(_store_then_read(False), inp, grid=(1,))
    assert race.verdict == "clean", race.summary
