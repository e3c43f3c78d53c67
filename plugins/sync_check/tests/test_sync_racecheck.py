"""racecheck on hand-built traces: happens-before sources, aliases, atomics, async ops."""

from __future__ import annotations

from types import SimpleNamespace

from tirxh_numsim import events as ev
from tirxh_numsim.memory import GLOBAL_STRIDE
from tirxh_sync_check import check_trace


def _race_kinds(race):
    return sorted({f.kind for f in race.findings})


def _w(b, warp, line, a, n, **kw):
    return b.add(ev.MemAccess, warp, line, space="shared", access="write",
                 ranges=[(0, a, a + n)], **kw)


def _r(b, warp, line, a, n, **kw):
    return b.add(ev.MemAccess, warp, line, space="shared", access="read",
                 ranges=[(0, a, a + n)], **kw)


def test_overlapping_bytes_of_different_widths_race(tb):
    b = tb()
    _w(b, 0, 1, 16, 8)  # an 8-byte store
    _r(b, 1, 2, 20, 2)  # a 2-byte load inside it
    _, race = check_trace(b.trace)
    assert _race_kinds(race) == ["race.read-write"]
    f = race.findings[0]
    assert (f.where.line, f.related[0].line) == (2, 1)
    assert {w["warp"] for w in f.warps} == {0, 1}
    assert len(f.witness) == 3


def test_disjoint_bytes_do_not_race(tb):
    b = tb()
    _w(b, 0, 1, 16, 4)
    _r(b, 1, 2, 20, 4)
    _, race = check_trace(b.trace)
    assert race.verdict == "clean"


def test_bar_sync_orders_the_accesses(tb):
    b = tb()
    _w(b, 0, 1, 0, 4)
    b.bar_sync((0, 1), 2)
    _r(b, 1, 3, 0, 4)
    _, race = check_trace(b.trace)
    assert race.verdict == "clean", race.findings


def test_mbarrier_arrive_release_wait_acquire(tb):
    b = tb()
    _w(b, 0, 1, 0, 4)
    b.add(ev.MBarrierEvent, 0, 2, op="arrive", addr=64, count=1, phase=1, completed_phase=True)
    b.add(ev.MBarrierEvent, 1, 3, op="try_wait", addr=64, parity=0, success=True, phase=1)
    _r(b, 1, 4, 0, 4)
    _, race = check_trace(b.trace)
    assert race.verdict == "clean", race.findings


def test_write_after_the_arrive_is_not_released(tb):
    b = tb()
    b.add(ev.MBarrierEvent, 0, 2, op="arrive", addr=64, count=1, phase=1, completed_phase=True)
    _w(b, 0, 1, 0, 4)
    b.add(ev.MBarrierEvent, 1, 3, op="try_wait", addr=64, parity=0, success=True, phase=1)
    _r(b, 1, 4, 0, 4)
    _, race = check_trace(b.trace)
    assert _race_kinds(race) == ["race.read-write"]


def test_atomics_do_not_race_with_each_other_but_do_with_plain_stores(tb):
    b = tb()
    for w in (0, 1):
        b.add(ev.MemAccess, w, 1, space="shared", access="rmw", atomic=True, ranges=[(0, 0, 4)])
    _, race = check_trace(b.trace)
    assert race.verdict == "clean"
    _w(b, 0, 2, 0, 4)
    _, race = check_trace(b.trace)
    assert _race_kinds(race) == ["race.write-write"]


def test_release_store_acquire_load_synchronize(tb):
    b = tb()
    rel = SimpleNamespace(modifiers={"sem": "release"}, spelling="st.release.gpu.shared.u32")
    acq = SimpleNamespace(modifiers={"sem": "acquire"}, spelling="ld.acquire.gpu.shared.u32")
    _w(b, 0, 1, 0, 4)
    _w(b, 0, 2, 64, 4, instr=rel)
    _r(b, 1, 3, 64, 4, instr=acq)
    _r(b, 1, 4, 0, 4)
    _, race = check_trace(b.trace)
    assert race.verdict == "clean", race.findings


def test_async_read_in_flight_then_overwritten(tb):
    """A wgmma operand read (recorded before its issue, no op id) overwritten before
    wait_group: stage reuse; after wait_group the same write is ordered."""
    def trace(wait_first: bool):
        b = tb(block=(32, 1, 1))
        mma = SimpleNamespace(modifiers={}, spelling="wgmma.mma_async", operands=())
        wait = SimpleNamespace(modifiers={}, spelling="wgmma.wait_group",
                               operands=(SimpleNamespace(value=0),))
        b.add(ev.MemAccess, 0, 1, space="shared", access="read", proxy=ev.ASYNC,
              ranges=[(-1, 0, 128)], instr=mma)
        b.add(ev.AsyncOp, 0, 1, engine="wgmma", stage="issue", op_id=7, instr=mma)
        b.add(ev.AsyncOp, 0, 2, engine="wgmma", stage="commit")
        if wait_first:
            b.add(ev.AsyncOp, 0, 3, engine="wgmma", stage="wait", instr=wait)
        _w(b, 0, 4, 64, 4)
        return b.trace
    _, race = check_trace(trace(False))
    assert _race_kinds(race) == ["race.stage-reuse"]
    assert race.findings[0].where.line == 4
    _, race = check_trace(trace(True))
    assert race.verdict == "clean", race.findings


def test_generic_write_read_by_async_proxy_needs_a_proxy_fence(tb):
    def trace(fence: bool):
        b = tb(block=(32, 1, 1))
        _w(b, 0, 1, 0, 128)
        if fence:
            b.add(ev.FenceEvent, 0, 2, fence="fence.proxy.async")
        b.add(ev.AsyncOp, 0, 3, engine="tma", stage="issue", op_id=3, direction="store")
        b.add(ev.MemAccess, 0, 3, space="shared", access="read", proxy=ev.ASYNC,
              ranges=[(-1, 0, 128)], async_id=3)
        return b.trace
    _, race = check_trace(trace(False))
    assert _race_kinds(race) == ["proxy.missing-fence"]
    assert race.findings[0].where.line == 1  # the write that needs the fence after it
    _, race = check_trace(trace(True))
    assert race.verdict == "clean", race.findings


def test_tma_write_is_visible_after_the_mbarrier_wait(tb):
    b = tb()
    b.add(ev.AsyncOp, 0, 1, engine="bulk", stage="issue", op_id=1, mbarrier=64, nbytes=128)
    b.add(ev.MemAccess, 0, 1, space="shared", access="write", proxy=ev.ASYNC,
          ranges=[(-1, 0, 128)], async_id=1)
    b.add(ev.MBarrierEvent, 0, 1, op="complete_tx", addr=64, tx_bytes=128, by_async=1,
          phase=1, completed_phase=True)
    b.add(ev.MBarrierEvent, 1, 2, op="try_wait", addr=64, parity=0, success=True, phase=1)
    _r(b, 1, 3, 0, 4)
    _, race = check_trace(b.trace)
    assert race.verdict == "clean", race.findings


def test_fence_and_relaxed_atomic_flag_synchronize(tb):
    """Message passing: data store; fence; relaxed flag update || relaxed flag read; fence;
    data load. Without the fences the data accesses race."""
    def trace(fences: bool):
        b = tb()
        relaxed = SimpleNamespace(modifiers={"sem": "relaxed"}, spelling="atom.relaxed.gpu")
        b.add(ev.MemAccess, 0, 1, space="global", access="write", ranges=[(0, 0, 4)])
        if fences:
            b.add(ev.FenceEvent, 0, 2, fence="fence")
        b.add(ev.MemAccess, 0, 3, space="global", access="rmw", atomic=True,
              ranges=[(0, 64, 68)], instr=relaxed)
        b.add(ev.MemAccess, 1, 4, space="global", access="rmw", atomic=True,
              ranges=[(0, 64, 68)], instr=relaxed)
        if fences:
            b.add(ev.FenceEvent, 1, 5, fence="fence")
        b.add(ev.MemAccess, 1, 6, space="global", access="read", ranges=[(0, 0, 4)])
        return b.trace
    _, race = check_trace(trace(True))
    assert race.verdict == "clean", race.findings
    _, race = check_trace(trace(False))
    assert _race_kinds(race) == ["race.read-write"]
    assert race.findings[0].where.line == 6


def test_async_store_without_recorded_reads_is_incomplete(tb):
    b = tb(block=(32, 1, 1))
    b.add(ev.AsyncOp, 0, 9, engine="bulk", stage="issue", op_id=4, direction="store", group=0)
    _, race = check_trace(b.trace)
    assert race.verdict == "incomplete"
    assert any(f.kind == "sync_check.not-modelled" and f.where.line == 9 for f in race.findings)


def test_an_acquire_replays_after_the_release_it_read_in_numsims_run(tb):
    """CTA 1's acq_rel count update read CTA 0's (numsim ran CTA 0's first), then reads what
    CTA 0 wrote before its update. CTA 0 waits at a bar.sync for its other warp first, so a
    warp-by-warp replay used to run CTA 1's acquire before CTA 0's release and report the data
    as racing (zoo gemm_sm90, 3-way split-K on 4 persistent CTAs). Without acq_rel it races."""
    def trace(sem):
        b = tb(block=(64, 1, 1), grid=(2, 1, 1))
        atom = SimpleNamespace(modifiers={"sem": sem}, spelling=f"atom.{sem}.gpu.global.add.u32")
        b.add(ev.BarrierEvent, 1, 1, op="sync")
        b.add(ev.BarrierEvent, 0, 1, op="sync")
        b.add(ev.BarrierEvent, 0, 1, op="sync", released=True)
        b.add(ev.BarrierEvent, 1, 1, op="sync", released=True)
        b.add(ev.MemAccess, 0, 2, space="global", access="write", buffer="part",
              ranges=[(0, 0, 4)])
        cnt = [(0, GLOBAL_STRIDE, GLOBAL_STRIDE + 4)]  # the counter: another allocation
        b.add(ev.MemAccess, 0, 3, space="global", access="rmw", atomic=True, buffer="cnt",
              ranges=cnt, instr=atom)
        b.add(ev.MemAccess, 0, 3, cta=1, space="global", access="rmw", atomic=True,
              buffer="cnt", ranges=cnt, instr=atom)
        b.add(ev.MemAccess, 0, 4, cta=1, space="global", access="read", buffer="part",
              ranges=[(0, 0, 4)])
        return b.trace
    _, race = check_trace(trace("acq_rel"))
    assert race.verdict == "clean", race.findings
    _, race = check_trace(trace("relaxed"))
    assert _race_kinds(race) == ["race.read-write"] and race.findings[0].where.line == 4


def test_a_phase_holds_the_arrivals_it_held_in_numsims_run(tb):
    """Warp 1's arrival (after its write) and warp 0's, which completed the phase in numsim's
    run; warp 2 waits on the phase and reads. A warp-by-warp replay ran warp 0's completing
    arrival first, so the phase's clock left warp 1's release out and the read raced (the 2-CTA
    cluster GEMM's `empty` barrier, 2026-12-02). Without warp 1's arrival before the phase's
    completion in numsim's order, its write is unordered and races."""
    def trace(arrive_first):
        b = tb(block=(96, 1, 1))
        _w(b, 1, 1, 0, 4)
        if arrive_first:
            b.add(ev.MBarrierEvent, 1, 2, op="arrive", addr=64, count=1, phase=0)
        b.add(ev.MBarrierEvent, 0, 3, op="arrive", addr=64, count=1, phase=1,
              completed_phase=True)
        if not arrive_first:  # counted in the next phase
            b.add(ev.MBarrierEvent, 1, 2, op="arrive", addr=64, count=1, phase=1)
        b.add(ev.MBarrierEvent, 2, 4, op="try_wait", addr=64, parity=0, success=True, phase=1)
        _r(b, 2, 5, 0, 4)
        return b.trace
    _, race = check_trace(trace(True))
    assert race.verdict == "clean", race.findings
    _, race = check_trace(trace(False))
    assert _race_kinds(race) == ["race.read-write"] and race.findings[0].where.line == 5


def test_a_phase_the_replay_cannot_form_is_incomplete(tb):
    """An arrival held for its phase while what it waits for is held behind it (a trace no
    legal schedule gives): racecheck keeps numsim's order for the rest and says `incomplete`."""
    b = tb(block=(64, 1, 1))
    b.add(ev.MBarrierEvent, 1, 1, op="try_wait", addr=128, parity=0, success=True, phase=1)
    b.add(ev.MBarrierEvent, 1, 2, op="arrive", addr=64, count=1, phase=0)
    b.add(ev.MBarrierEvent, 0, 3, op="arrive", addr=64, count=1, phase=1, completed_phase=True)
    b.add(ev.MBarrierEvent, 0, 4, op="arrive", addr=128, count=1, phase=1, completed_phase=True)
    _, race = check_trace(b.trace)
    assert race.verdict == "incomplete"
    assert [(f.kind, f.where.line) for f in race.findings] == [("sync_check.not-modelled", 3)]
