"""The remaining synchronization and asynchronous-copy bindings, each against a hand-checked
result: named barriers, cp.async (with zero-fill) and its groups, bulk copies, mbarrier
expect/complete_tx, arrive_drop, inval, test_wait polling, elect.sync, ordering-only fences."""

import numpy as np

import tirxh.lang as T
import tirxh_numsim as ns
from tirxh_numsim import events as ev
from tirxh_numsim.testing import one


def test_named_barrier_arrive_and_sync():
    @T.kernel(grid=1, block=96)
    def k(out: T.gptr[T.u32]):
        buf = T.shared(T.u32, (32,))
        tid = T.tid.x
        warp = tid >> 5
        lane = T.laneid()
        with T.if_(warp == 0):
            T.ptx.st.shared.u32(buf.at(lane), lane * 3)
            T.ptx.bar.arrive(1, 64)             # producer: arrive, do not wait
        with T.if_(warp == 1):
            T.ptx.barrier.sync(1, 64)           # consumer: wait for the producer's arrival
            T.ptx.st.global_.u32(out.at(lane), T.ptx.ld.shared.u32(buf.at(lane)))
        with T.if_(warp == 2):
            T.ptx.barrier.arrive(2, 32)         # a barrier nobody waits on
            T.ptx.ret()
        T.ptx.st.global_.u32(out.at(32 + tid), 1)
    res = ns.run(k, dict(out=np.zeros(128, np.uint32)), grid=(1,), trace=True)
    assert res.verdict == "clean", res.summary()
    assert list(res.outputs["out"][:32]) == [3 * i for i in range(32)]
    assert list(res.outputs["out"][32:96]) == [1] * 64 and list(res.outputs["out"][96:]) == [0] * 32
    ops = {(e.op, e.barrier, e.released) for e in res.trace.of_kind(ev.BarrierEvent)}
    assert ("arrive", 1, False) in ops and ("sync", 1, True) in ops


@T.kernel(grid=1, block=32)
def cp_async_fill(src: T.gptr[T.u32], out: T.gptr[T.u32]):
    buf = T.shared(T.u32, (32, 4), align=16)
    bar = T.mbarrier(1)
    lane = T.laneid()
    with T.if_(lane == 0):
        bar.init(32)
    T.ptx.bar.sync(0)
    nbytes = (lane & 3) * 4                 # lanes copy 0, 4, 8 or 12 real bytes of 16
    T.ptx.cp.async_.cg.shared.global_(buf.at(lane, 0), src.at(lane * 4), 16, nbytes)
    T.ptx.cp.async_.commit_group()
    T.ptx.cp.async_.wait_group(0)
    T.ptx.cp.async_.ca.shared.global_(buf.at(lane, 3), src.at(lane * 4 + 3), 4)
    T.ptx.cp.async_.mbarrier.arrive.noinc.shared.b64(bar[0])
    T.ptx.cp.async_.wait_all()
    bar.wait(0)
    for j in range(4):
        T.ptx.st.global_.u32(out.at(lane * 4 + j), T.ptx.ld.shared.u32(buf.at(lane, j)))


def test_cp_async_zero_fill_groups_and_mbarrier_arrive():
    src = np.arange(1, 129, dtype=np.uint32)
    res = ns.run(cp_async_fill, dict(src=src, out=np.zeros(128, np.uint32)), grid=(1,),
                 trace=True)
    assert res.verdict == "clean", res.summary()
    o = res.outputs["out"].reshape(32, 4)
    for lane in range(32):
        n = lane & 3
        want = [src[lane * 4 + j] if j < n else 0 for j in range(3)] + [src[lane * 4 + 3]]
        assert list(o[lane]) == want
    stages = [e.stage for e in res.trace.of_kind(ev.AsyncOp) if e.engine == "cp.async"]
    assert stages.count("issue") == 2 and "commit" in stages and "wait" in stages


@T.kernel(grid=1, block=32)
def bulk_roundtrip(src: T.gptr[T.f32], dst: T.gptr[T.f32]):
    buf = T.shared(T.f32, (64,), align=128)
    bar = T.mbarrier(1)
    lane = T.laneid()
    with T.if_(lane == 0):
        bar.init(1)
        T.ptx.mbarrier.expect_tx.relaxed.cta.shared__cta.b64(bar[0], 256)
        T.ptx.mbarrier.arrive.shared__cta.b64(T.sink, bar[0])
        T.ptx.cp.async_.bulk.shared__cluster.global_.mbarrier__complete_tx__bytes(
            buf.at(0), src.at(0), 256, bar[0])
    bar.wait(0)
    v = T.ptx.ld.shared.f32(buf.at(lane))
    T.ptx.st.shared.f32(buf.at(lane), v * 2.0)
    T.ptx.fence.proxy.async_.shared__cta()
    T.ptx.bar.sync(0)
    with T.if_(lane == 0):
        T.ptx.cp.async_.bulk.global_.shared__cta.bulk_group(dst.at(0), buf.at(0), 256)
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


def test_bulk_copy_in_and_out_with_tx_bytes():
    src = np.arange(64, dtype=np.float32)
    res = ns.run(bulk_roundtrip, dict(src=src, dst=np.zeros(64, np.float32)), grid=(1,),
                 trace=True)
    assert res.verdict == "clean", res.summary()
    want = src.copy()
    want[:32] *= 2
    assert np.array_equal(res.outputs["dst"], want)
    tx = [e for e in res.trace.of_kind(ev.MBarrierEvent) if e.op in ("expect_tx", "complete_tx")]
    assert [(e.op, e.tx_bytes) for e in tx] == [("expect_tx", 256), ("complete_tx", 256)]
    assert tx[-1].completed_phase


def test_arrive_drop_complete_tx_inval_and_test_wait_polling():
    @T.kernel(grid=1, block=64)
    def k(out: T.gptr[T.u32]):
        bar = T.mbarrier(1)
        tid = T.tid.x
        warp = tid >> 5
        lane = T.laneid()
        with T.if_(tid == 0):
            bar.init(2)
        T.ptx.bar.sync(0)
        with T.if_(warp == 1):
            T.ptx.barrier.sync(1, 64)             # wait until warp 0 is about to poll
            with T.if_(lane == 0):
                T.ptx.mbarrier.expect_tx.relaxed.cta.shared__cta.b64(bar[0], 64)
                T.ptx.mbarrier.complete_tx.relaxed.cta.shared__cta.b64(bar[0], 64)
                T.ptx.mbarrier.arrive_drop.shared__cta.b64(T.sink, bar[0])  # expected 2 -> 1
                T.ptx.mbarrier.arrive.shared__cta.b64(T.sink, bar[0])       # phase 0 done
        with T.if_(warp == 0):
            T.ptx.bar.arrive(1, 64)
            n = T.reg(T.u32, 0)
            with T.loop():                        # poll with test_wait, counting attempts
                done = T.ptx.mbarrier.test_wait.parity.shared__cta.b64(bar[0], 0)
                T.break_(done)
                n.set(n + 1)
            T.ptx.st.global_.u32(out.at(lane), n)
            with T.if_(lane == 0):
                T.ptx.mbarrier.arrive.shared__cta.b64(T.sink, bar[0])       # phase 1: 1 arrival
        T.ptx.bar.sync(0)
        with T.if_(tid == 0):
            ok = T.ptx.mbarrier.test_wait.parity.shared__cta.b64(bar[0], 1)
            T.ptx.st.global_.u32(out.at(32), T.ptx.selp.u32(1, 0, ok))
            bar.inval()
    res = ns.run(k, dict(out=np.zeros(33, np.uint32)), grid=(1,), trace=True)
    assert res.verdict == "clean", res.summary()
    assert res.outputs["out"][32] == 1          # phase 1 completed with one arrival (drop)
    assert res.outputs["out"][0] >= 1           # warp 0 polled at least once before phase 0
    ops = [e.op for e in res.trace.of_kind(ev.MBarrierEvent)]
    assert "inval" in ops and "test_wait" in ops and "complete_tx" in ops


def test_pending_count_is_incomplete_not_guessed():
    @T.kernel(grid=1, block=32)
    def k(out: T.gptr[T.u32]):
        bar = T.mbarrier(1)
        with T.if_(T.tid.x == 0):
            bar.init(32)
        T.ptx.bar.sync(0)
        st = T.ptx.mbarrier.arrive.shared__cta.b64(bar[0])
        T.ptx.st.global_.u32(out.at(T.tid.x), T.ptx.mbarrier.pending_count.b64(st))
    res = ns.run(k, dict(out=np.zeros(32, np.uint32)), grid=(1,))
    assert res.verdict == "incomplete" and "pending_count" in res.incomplete[0]


def test_elect_fences_hints_and_trap():
    @T.kernel(grid=1, block=64)
    def k(out: T.gptr[T.u32], tm: T.tensormap, src: T.gptr[T.u32]):
        tid = T.tid.x
        T.ptx.prefetch.global_.L2(src.at(tid))
        T.ptx.prefetch.tensormap(tm)
        T.ptx.membar.cta()
        T.ptx.fence.acq_rel.gpu()
        T.ptx["fence.proxy.tensormap::generic.release.gpu"]()
        T.ptx.griddepcontrol.wait()
        T.ptx.nanosleep.u32(100)
        with T.if_(tid >= 3):                     # lanes 0-2 sit out: the leader is lane 3
            leader, is_leader = T.ptx.elect.sync(0xFFFFFFFF)
            T.ptx.st.global_.u32(out.at(tid), leader + T.ptx.selp.u32(100, 0, is_leader))
    res = ns.run(k, dict(out=np.zeros(64, np.uint32), tm=T.TensorMap("src", box=(4,)),
                         src=np.zeros(64, np.uint32)), grid=(1,), trace=True)
    assert res.verdict == "clean", res.summary()
    o = res.outputs["out"]
    assert o[3] == 103 and all(o[4:32] == 3) and o[32] == 100 and all(o[33:] == 0)
    fences = {e.fence for e in res.trace.of_kind(ev.FenceEvent)}
    assert {"fence", "fence.proxy.tensormap", "griddepcontrol"} <= fences

    @T.kernel(grid=1, block=32)
    def boom(out: T.gptr[T.u32]):
        with T.if_(T.tid.x == 5):
            T.ptx.trap()
        T.ptx.st.global_.u32(out.at(T.tid.x), 1)
    res = ns.run(boom, dict(out=np.zeros(32, np.uint32)), grid=(1,))
    assert res.verdict == "error" and any(f.kind == "numsim.trap" for f in res.diagnostics)


def test_mad_f_and_mov_pack4():
    a = np.full(32, 1.5, np.float32)
    assert one("mad.rn.f32", "f32", [("f32", a), ("f32", a), ("f32", a)])[0] == 3.75

    @T.kernel(grid=1, block=32)
    def k(out: T.gptr[T.u64], q: T.gptr[T.u16]):
        i = T.tid.x
        parts = [T.ptx.ld.global_.b16(q.at(j)) for j in range(4)]
        T.ptx.st.global_.b64(out.at(i), T.ptx.mov.b64(parts))
    res = ns.run(k, dict(out=np.zeros(32, np.uint64),
                         q=np.array([0x1111, 0x2222, 0x3333, 0x4444], np.uint16)), grid=(1,))
    assert res.verdict == "clean", res.summary()
    assert res.outputs["out"][0] == 0x4444333322221111


def test_a_prefetch_outside_every_buffer_is_for_review():
    """``prefetch.global.L2`` has no data effect, but an address in no buffer (here one element
    past `src`'s end, from the lane that would read a row past the data) is a review finding,
    once for the instruction, naming the lane and the address; in bounds it is clean."""
    @T.kernel(grid=1, block=32)
    def k(src: T.gptr[T.u32], out: T.gptr[T.u32], N: T.const = 32):
        tid = T.tid.x
        T.ptx.prefetch.global_.L2(src.at(tid + (32 - N)))
        T.ptx.st.global_.u32(out.at(tid), tid)
    args = dict(src=np.zeros(32, np.uint32), out=np.zeros(32, np.uint32))
    assert ns.run(k, args, grid=(1,)).verdict == "clean"
    res = ns.run(k, args, grid=(1,), consts={"N": 31})
    assert res.verdict == "review", res.summary()
    (f,) = res.diagnostics
    assert f.kind == "numsim.prefetch-out-of-bounds" and f.lanes == [31], f
    assert np.array_equal(res.outputs["out"], np.arange(32, dtype=np.uint32))
