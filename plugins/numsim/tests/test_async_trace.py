"""The event trace of asynchronous copies: TMA and bulk loads record the global bytes they read
(async proxy, clipped to the in-bounds part of the box), stores the shared bytes they read and
the global bytes they write.
sync_check's racecheck relies on these events to check ``fence.proxy.async.global``."""

import numpy as np

import tirxh.lang as T
import tirxh_numsim as ns
from tirxh_numsim import events as ev
from tirxh_numsim.memory import GLOBAL_BASE, GLOBAL_STRIDE

SMEM = 4096


@T.kernel(grid=1, block=32)
def _tma2d(tmap: T.tensormap, src: T.gptr[T.f32], out: T.gptr[T.u32], c0: T.s32, c1: T.s32,
           nbytes: T.u32):
    buf = T.shared(T.u32, (SMEM // 4,), align=1024, name="tile")
    bar = T.mbarrier(1)
    with T.if_(T.tid.x == 0):
        bar.init(1)
        T.ptx.fence.mbarrier_init.release.cluster()
        bar.arrive_expect_tx(nbytes)
        T.ptx.cp.async_.bulk.tensor._2d.shared__cluster.global_.tile \
            .mbarrier__complete_tx__bytes(buf.at(0), tmap[c0, c1], bar[0])
    bar.wait(0)


def _async_mem(trace, space):
    return [e for e in trace.events if isinstance(e, ev.MemAccess) and e.space == space
            and e.proxy == ev.ASYNC]


def test_tma_load_records_its_global_reads_clipped_to_the_tensor():
    src = np.arange(40 * 52, dtype=np.float32).reshape(40, 52)
    # box 8 rows x 32 columns at column 36, row -4: rows -4..3 and columns 36..67 of a 40x52 array
    # -> in bounds: rows 0..3, columns 36..51 (16 floats = 64 bytes per row)
    inp = dict(tmap=T.TensorMap("src", box=(8, 32)), src=src, out=np.zeros(4, np.uint32),
               c0=36, c1=-4, nbytes=8 * 32 * 4)
    res = ns.run(_tma2d, inp, trace=True)
    assert res.verdict in ("clean", "review"), res.summary()
    reads = _async_mem(res.trace, "global")
    assert len(reads) == 1
    e = reads[0]
    assert e.access == "read" and e.buffer == "src" and e.async_id is not None
    base = GLOBAL_BASE + 1 * GLOBAL_STRIDE  # src is parameter 1
    want = [(-1, base + (r * 52 + 36) * 4, base + (r * 52 + 52) * 4) for r in range(4)]
    assert e.ranges == want
    issue = [a for a in res.trace.events if isinstance(a, ev.AsyncOp) and a.stage == "issue"]
    assert issue[0].op_id == e.async_id
    assert res.trace.events.index(issue[0]) < res.trace.events.index(e)


def test_tma_load_rows_of_a_wider_tensor_are_separate_ranges():
    src = np.arange(40 * 52, dtype=np.float32).reshape(40, 52)
    inp = dict(tmap=T.TensorMap("src", box=(4, 16)), src=src, out=np.zeros(4, np.uint32),
               c0=0, c1=2, nbytes=4 * 16 * 4)
    res = ns.run(_tma2d, inp, trace=True)
    (e,) = _async_mem(res.trace, "global")
    base = GLOBAL_BASE + GLOBAL_STRIDE
    assert e.ranges == [(-1, base + r * 52 * 4, base + (r * 52 + 16) * 4) for r in range(2, 6)]


def test_tma_load_of_whole_rows_is_one_range():
    src = np.arange(6 * 16, dtype=np.float32).reshape(6, 16)
    inp = dict(tmap=T.TensorMap("src", box=(4, 16)), src=src, out=np.zeros(4, np.uint32),
               c0=0, c1=1, nbytes=4 * 16 * 4)
    res = ns.run(_tma2d, inp, trace=True)
    (e,) = _async_mem(res.trace, "global")
    base = GLOBAL_BASE + GLOBAL_STRIDE
    assert e.ranges == [(-1, base + 16 * 4, base + 5 * 16 * 4)]


@T.kernel(grid=1, block=32)
def _bulk_roundtrip(x: T.gptr[T.u32], y: T.gptr[T.u32]):
    buf = T.shared(T.u32, 32, align=128, name="buf")
    bar = T.mbarrier(1)
    lane = T.laneid()
    with T.if_(lane == 0):
        bar.init(1)
        T.ptx.fence.mbarrier_init.release.cluster()
        bar.arrive_expect_tx(64)
        T.ptx.cp.async_.bulk.shared__cluster.global_.mbarrier__complete_tx__bytes(
            buf.at(0), x.at(8), 64, bar)
    bar.wait(0)
    with T.if_(lane == 0):
        T.ptx.cp.async_.bulk.global_.shared__cta.bulk_group(y.at(0), buf.at(0), 64)
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


def test_bulk_load_and_store_record_what_they_read_and_write():
    x = np.arange(64, dtype=np.uint32)
    res = ns.run(_bulk_roundtrip, dict(x=x, y=np.zeros(16, np.uint32)), trace=True,
                 outputs=["y"])
    assert res.verdict == "clean", res.summary()
    np.testing.assert_array_equal(res.outputs["y"], x[8:24])
    g, gw = _async_mem(res.trace, "global")
    assert g.access == "read" and g.buffer == "x"
    assert g.ranges == [(-1, GLOBAL_BASE + 32, GLOBAL_BASE + 96)]
    reads = [e for e in _async_mem(res.trace, "shared") if e.access == "read"]
    assert len(reads) == 1 and reads[0].ranges == [(-1, 0, 64)]
    assert gw.access == "write" and gw.buffer == "y"  # y is parameter 1
    assert gw.ranges == [(-1, GLOBAL_BASE + GLOBAL_STRIDE, GLOBAL_BASE + GLOBAL_STRIDE + 64)]
    stores = [a for a in res.trace.events if isinstance(a, ev.AsyncOp) and a.stage == "issue"
              and a.direction == "store"]
    assert [s.op_id for s in stores] == [reads[0].async_id] == [gw.async_id]


def test_proxy_fence_records_its_state_space():
    @T.kernel(grid=1, block=32)
    def k(x: T.gptr[T.u32]):
        T.ptx.fence.proxy.async_.global_()
        T.ptx.fence.proxy.async_()
        T.ptx.fence.proxy.async_.shared__cta()

    res = ns.run(k, dict(x=np.zeros(1, np.uint32)), trace=True)
    spaces = [e.space for e in res.trace.events if isinstance(e, ev.FenceEvent)]
    assert spaces == ["global", None, "shared::cta"]


@T.kernel(grid=1, block=32)
def _tma_store2d(tmap: T.tensormap, dst: T.gptr[T.f32]):
    buf = T.shared(T.f32, (8 * 16,), align=1024, name="tile")
    lane = T.laneid()
    with T.range(lane, 8 * 16, 32) as i:
        T.ptx.st.shared.f32(buf.at(i), 1.0)
    T.ptx.fence.proxy.async_.shared__cta()
    with T.if_(lane == 0):
        T.ptx.cp.async_.bulk.tensor._2d.global_.shared__cta.tile.bulk_group(
            tmap[12, 3], buf.at(0))
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


def test_tma_store_records_only_the_in_bounds_global_writes():
    dst = np.zeros((6, 20), np.float32)
    res = ns.run(_tma_store2d, dict(tmap=T.TensorMap("dst", box=(8, 16)), dst=dst), trace=True)
    (e,) = _async_mem(res.trace, "global")
    assert e.access == "write" and e.buffer == "dst"
    base = GLOBAL_BASE + GLOBAL_STRIDE
    # rows 3..5 (of 3..10), columns 12..19 (of 12..27)
    assert e.ranges == [(-1, base + (r * 20 + 12) * 4, base + (r * 20 + 20) * 4)
                        for r in range(3, 6)]
    want = np.zeros((6, 20), np.float32)
    want[3:, 12:] = 1.0
    np.testing.assert_array_equal(res.outputs["dst"], want)
