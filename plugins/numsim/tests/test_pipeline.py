"""Warp-specialized producer/consumer kernels with mbarriers, clusters with distributed shared
memory, and the event trace they produce (the sync_check contract)."""

import numpy as np

import tirxh.lang as T
import tirxh_numsim as ns
from tirxh_numsim import events as ev

STAGES, CHUNK, NCHUNK = 2, 32, 6


@T.kernel(grid=1, block=96)
def prodcons(x: T.gptr[T.f32], out: T.gptr[T.f32]):
    """Warp 0 produces CHUNK floats per step into a 2-stage ring; warps 1-2 each sum half."""
    ring = T.shared(T.f32, (STAGES, CHUNK), name="ring")
    full = T.mbarrier(STAGES, name="full")
    empty = T.mbarrier(STAGES, name="empty")
    tid = T.tid.x
    warp = tid >> 5
    lane = T.laneid()
    with T.if_(tid == 0):
        for s in range(STAGES):
            full[s].init(32)       # the 32 producer lanes arrive
            empty[s].init(2)       # one arrival per consumer warp
    T.ptx.bar.sync(0)
    with T.if_(warp == 0, uniform=True):
        cur = T.pipeline(STAGES)
        with T.range(NCHUNK) as c:
            empty[cur.stage].wait(cur.phase ^ 1)
            v = T.ptx.ld.global_.f32(x.at(c * CHUNK + lane))
            T.ptx.st.shared.f32(ring.at(cur.stage, lane), v)
            full[cur.stage].arrive()
            cur.advance()
    with T.else_():
        cur = T.pipeline(STAGES)
        acc = T.reg(T.f32, 0.0)
        half = (warp - 1) * 16
        with T.range(NCHUNK) as c:
            full[cur.stage].wait(cur.phase)
            with T.if_(lane < 16):
                acc.set(acc + T.ptx.ld.shared.f32(ring.at(cur.stage, half + lane)))
            T.ptx.bar.warp.sync(0xFFFFFFFF)
            with T.if_(lane == 0):
                empty[cur.stage].arrive()
            cur.advance()
        with T.if_(lane < 16):
            T.ptx.st.global_.f32(out.at(half + lane), acc)


def test_producer_consumer_pipeline_runs_and_blocks_on_mbarriers():
    x = np.arange(NCHUNK * CHUNK, dtype=np.float32)
    res = ns.run(prodcons, dict(x=x, out=np.zeros(32, np.float32)), grid=(1,), trace=True,
                 outputs=["out"])
    assert res.verdict == "clean", res.summary()
    assert np.array_equal(res.outputs["out"], x.reshape(NCHUNK, CHUNK).sum(axis=0))
    waits = [e for e in res.trace.of_kind(ev.MBarrierEvent) if e.op == "try_wait"]
    assert any(e.success is False for e in waits)  # someone had to wait, and yielded
    assert all(e.parity in (0, 1) for e in waits)
    # per-warp program order: sequence numbers strictly increase within each warp
    for key, evs in res.trace.by_warp().items():
        assert [e.seq for e in evs] == sorted(e.seq for e in evs)
    arrivals = [e for e in res.trace.of_kind(ev.MBarrierEvent) if e.op == "arrive"]
    assert sum(e.completed_phase for e in arrivals) == 2 * NCHUNK  # full and empty phases
    reads = [e for e in res.trace.of_kind(ev.MemAccess) if e.space == "shared" and
             e.access == "read"]
    assert reads and all(e.loc.line > 0 for e in reads)


@T.kernel(grid=4, block=64, cluster=2)
def dsmem_swap(out: T.gptr[T.u32]):
    """Each CTA of a 2-CTA cluster writes its rank, then reads its peer's value through
    distributed shared memory (mapa + ld.shared::cluster) between cluster barriers."""
    box = T.shared(T.u32, (64,), name="box")
    tid = T.tid.x
    rank = T.cluster_ctarank()
    T.ptx.st.shared.u32(box.at(tid), rank * 1000 + tid)
    T.ptx.barrier.cluster.arrive.release.aligned()
    T.ptx.barrier.cluster.wait.acquire.aligned()
    peer = T.ptx.mapa.shared__cluster.u32(box.ptr(), rank ^ 1)
    v = T.ptx.ld.shared__cluster.u32(T.ptx.add.u32(peer, tid * 4))
    T.ptx.barrier.cluster.arrive.release.aligned()
    T.ptx.barrier.cluster.wait.acquire.aligned()
    T.ptx.st.global_.u32(out.at(T.ctaid.x * 64 + tid), v)


def test_cluster_distributed_shared_memory():
    res = ns.run(dsmem_swap, dict(out=np.zeros(256, np.uint32)), grid=(4,), trace=True)
    assert res.verdict == "clean", res.summary()
    o = res.outputs["out"].reshape(4, 64)
    for cta in range(4):
        peer_rank = (cta % 2) ^ 1
        assert list(o[cta]) == [peer_rank * 1000 + t for t in range(64)]
    cl = list(res.trace.of_kind(ev.ClusterBarrierEvent))
    assert {e.op for e in cl} == {"arrive", "wait"}
    remote = [e for e in res.trace.of_kind(ev.MemAccess) if e.space == "shared" and
              e.access == "read"]
    assert all(e.space_cta != e.cta for e in remote)


def test_events_module_contract_is_documented():
    for cls in (ev.MemAccess, ev.BarrierEvent, ev.MBarrierEvent, ev.AsyncOp, ev.FenceEvent,
                ev.ClusterBarrierEvent, ev.WarpSync, ev.SetMaxNReg):
        assert cls.__doc__ and issubclass(cls, ev.Event)
    e = ev.MemAccess(cta=0, warp=1, lanes=3, seq=0, step=0)
    assert e.kind == "MemAccess" and ev.lanes_of(e.lanes) == [0, 1]
