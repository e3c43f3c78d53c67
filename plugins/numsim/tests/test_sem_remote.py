"""st.async and red.async (`tirxh_numsim.sem_remote`): data lands in the peer CTA, each lane's
bytes complete on the peer's mbarrier, the trace carries the async op, and the PTX ISA's
conditions (a peer CTA, destination and mbarrier in one CTA, a cluster) are diagnosed."""

import numpy as np
import pytest

import tirxh.lang as T
import tirxh_numsim as ns
from tirxh_numsim import events as ev

RED = "red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes"


def _exchange(op: str, vec: bool = False):
    """Each CTA of a 2-CTA cluster sends to its peer: st.async of (lane + 100 * rank), or the
    red.async `op` of (lane + 1) into the peer's `acc` (preset to 1000 + rank)."""
    nbytes = 32 * (8 if vec else 4)

    @T.kernel(block=32, cluster=(2, 1, 1))
    def k(out: T.gptr[T.u32]):
        inbox = T.shared(T.u32, 64, name="inbox", align=8)
        acc = T.shared(T.u32, 1, name="acc")
        ready = T.mbarrier(1, name="ready")
        lane = T.laneid()
        rank = T.cluster_ctarank()
        with T.if_(lane == 0):
            T.ptx.st.shared.u32(acc.at(0), rank + 1000)
            ready.init(1)
            T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.barrier.cluster.arrive()
        T.ptx.barrier.cluster.wait()
        peer = rank ^ 1
        bar = T.ptx.mapa.shared__cluster.u32(ready.buf.ptr(), peer)
        with T.if_(lane == 0):
            ready.arrive_expect_tx(nbytes if op == "st" else 128)
        if op == "st":
            dst = T.ptx.mapa.shared__cluster.u32(inbox.ptr(), peer)
            v = lane + rank * 100
            if vec:
                T.ptx.st.async_.shared__cluster.mbarrier__complete_tx__bytes.v2.u32(
                    dst + lane * 8, [v, v + 1], bar)
            else:
                T.ptx.st.async_.shared__cluster.mbarrier__complete_tx__bytes.u32(
                    dst + lane * 4, v, bar)
        else:
            dst = T.ptx.mapa.shared__cluster.u32(acc.ptr(), peer)
            T.ptx[f"{RED}.{op}"](dst, lane + 1, bar)
        ready.wait(0)
        base = T.ctaid.x * 65
        if op == "st":
            for j in range(2 if vec else 1):
                T.ptx.st.global_.u32(out.at(base + j * 32 + lane),
                                     T.ptx.ld.shared.u32(inbox.at(j * 32 + lane)))
        with T.if_(lane == 0):
            T.ptx.st.global_.u32(out.at(base + 64), T.ptx.ld.shared.u32(acc.at(0)))
        T.ptx.barrier.cluster.arrive()
        T.ptx.barrier.cluster.wait()
    return k


def _run(kernel):
    res = ns.run(kernel, dict(out=np.zeros(130, np.uint32)), grid=(2,), trace=True)
    return res, res.outputs["out"].reshape(2, 65)


def test_st_async_lands_in_the_peer_and_completes_its_mbarrier():
    res, out = _run(_exchange("st"))
    assert res.verdict == "clean", res.summary()
    for cta in (0, 1):
        assert list(out[cta, :32]) == [lane + 100 * (cta ^ 1) for lane in range(32)]
    issues = sorted((e for e in res.trace.of_kind(ev.AsyncOp) if e.engine == "st.async"
                     and e.stage == "issue"), key=lambda e: e.cta)
    assert [(e.cta, e.space_cta, e.nbytes) for e in issues] == [(0, 1, 128), (1, 0, 128)]
    writes = [e for e in res.trace.of_kind(ev.MemAccess) if e.async_id == issues[0].op_id]
    assert len(writes) == 1 and writes[0].proxy == ev.GENERIC and writes[0].space_cta == 1
    lane, start, end = writes[0].ranges[5]
    assert len(writes[0].ranges) == 32 and lane == 5 and end - start == 4
    done = [e for e in res.trace.of_kind(ev.MBarrierEvent) if e.op == "complete_tx"
            and e.by_async == issues[0].op_id]
    assert len(done) == 32 and {e.tx_bytes for e in done} == {4}
    assert done[-1].completed_phase and not any(e.completed_phase for e in done[:-1])


def test_st_async_vector_stores_two_words_per_lane():
    res, out = _run(_exchange("st", vec=True))
    assert res.verdict == "clean", res.summary()
    got = out[0, :64].reshape(32, 2)
    assert [tuple(r) for r in got] == [(lane + 100, lane + 101) for lane in range(32)]


@pytest.mark.parametrize("op,want", [("add.u32", lambda a: a + sum(range(1, 33))),
                                     ("max.u32", lambda a: max(a, 32)),
                                     ("min.u32", lambda a: min(a, 1)),
                                     # 1000 >= 1 wraps to 0, then +1 a lane
                                     ("inc.u32", lambda a: 31),
                                     ("xor.b32", lambda a: a ^ np.bitwise_xor.reduce(
                                         np.arange(1, 33)))])
def test_red_async_reduces_lane_by_lane_into_the_peer(op, want):
    res, out = _run(_exchange(op))
    assert res.verdict == "clean", res.summary()
    for cta in (0, 1):
        assert out[cta, 64] == want(1000 + cta)
    rmw = [e for e in res.trace.of_kind(ev.MemAccess) if e.access == "rmw"]
    assert rmw and all(e.atomic and e.async_id is not None for e in rmw)


def _misuse(red: bool, dst_peer: bool, bar_peer: bool, cluster):
    """One st.async / red.async whose destination and mbarrier are in this CTA or its peer."""
    @T.kernel(block=32, cluster=cluster)
    def k(out: T.gptr[T.u32]):
        buf = T.shared(T.u32, 32, name="buf")
        ready = T.mbarrier(1, name="ready")
        with T.if_(T.laneid() == 0):
            ready.init(1)
        if cluster:
            T.ptx.barrier.cluster.arrive()
            T.ptx.barrier.cluster.wait()
            rank = T.cluster_ctarank()
            dst = T.ptx.mapa.shared__cluster.u32(buf.ptr(), rank ^ 1 if dst_peer else rank)
            bar = T.ptx.mapa.shared__cluster.u32(ready.buf.ptr(), rank ^ 1 if bar_peer else rank)
        else:
            T.ptx.bar.sync(0)
            dst, bar = buf.ptr(), ready.buf.ptr()
        if red:
            T.ptx[f"{RED}.add.u32"](dst, 1, bar)
        else:
            T.ptx.st.async_.shared__cluster.mbarrier__complete_tx__bytes.u32(dst, 1, bar)
        T.ptx.st.global_.u32(out.at(T.ctaid.x), 0)
    return k


@pytest.mark.parametrize("red,dst_peer,bar_peer,cluster,why", [
    (True, False, False, (2, 1, 1), "executing CTA's own shared memory"),
    (False, True, False, (2, 1, 1), "different CTAs"),
    (False, False, False, None, "the cluster has one CTA"),
])
def test_misuse_the_ptx_isa_leaves_undefined_is_diagnosed(red, dst_peer, bar_peer, cluster, why):
    n = 2 if cluster else 1
    res = ns.run(_misuse(red, dst_peer, bar_peer, cluster), dict(out=np.zeros(n, np.uint32)),
                 grid=(n,))
    f = [d for d in res.diagnostics if d.kind == "numsim.async-remote"]
    assert f and why in f[0].message and res.verdict == "error", res.summary()
