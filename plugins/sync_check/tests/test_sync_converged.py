"""race.converged-lanes (`convergedlanes`): lanes of a converged warp that exchange data through
memory with nothing but lockstep between them; what orders them (bar.warp.sync, barriers,
mbarrier waits) and what does not (shfl.sync and the other warp collectives)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tirxh_numsim import events as ev
from tirxh_sync_check import check_trace

ALL = 0xFFFFFFFF


def _acc(b, line, access, lanes=ALL, shift=0, a=0, warp=0, instr=None, **kw):
    """Every lane in `lanes` accesses the word of lane ``lane ^ shift``."""
    return b.add(ev.MemAccess, warp, line, lanes=lanes, space="shared", access=access,
                 ranges=[(ln, a + 4 * (ln ^ shift), a + 4 * (ln ^ shift) + 4)
                         for ln in ev.lanes_of(lanes)], instr=instr, **kw)


def _kinds(trace) -> set:
    _, race = check_trace(trace)
    return {(f.kind, f.where.line) for f in race.findings}


def test_a_lane_reading_its_neighbours_store_is_a_race(tb):
    b = tb(block=(32, 1, 1))
    _acc(b, 1, "write")
    _acc(b, 2, "read", shift=1)
    _, race = check_trace(b.trace)
    (f,) = race.findings
    assert (f.kind, f.where.line, f.severity) == ("race.converged-lanes", 2, "error")
    assert [r.line for r in f.related] == [1]
    assert "bar.warp.sync" in f.message and f.lanes == [0]


def test_reading_its_own_store_is_not(tb):
    b = tb(block=(32, 1, 1))
    _acc(b, 1, "write")
    _acc(b, 2, "read")
    assert _kinds(b.trace) == set()


@pytest.mark.parametrize("op,ordered", [("bar.warp.sync", True), ("shfl.sync", False),
                                        ("vote.sync", False), ("redux.sync", False)])
def test_only_bar_warp_sync_among_the_warp_collectives_orders_memory(tb, op, ordered):
    b = tb(block=(32, 1, 1))
    _acc(b, 1, "write")
    b.add(ev.WarpSync, 0, 2, op=op, membermask=ALL)
    _acc(b, 3, "read", shift=16)
    assert _kinds(b.trace) == (set() if ordered else {("race.converged-lanes", 3)})


def test_bar_warp_sync_orders_only_the_lanes_it_names(tb):
    """Lanes 0-15 join; lane 16 reading lane 17's word is still unordered."""
    b = tb(block=(32, 1, 1))
    _acc(b, 1, "write")
    b.add(ev.WarpSync, 0, 2, op="bar.warp.sync", membermask=0x0000FFFF, lanes=0x0000FFFF)
    _acc(b, 3, "read", lanes=0x0000FFFF, shift=1)
    assert _kinds(b.trace) == set()
    _acc(b, 4, "read", lanes=0x00010000, shift=1)
    assert ("race.converged-lanes", 4) in _kinds(b.trace)


def test_a_cta_barrier_orders_the_lanes(tb):
    b = tb(block=(32, 1, 1))
    _acc(b, 1, "write")
    b.bar_sync((0,), 2)
    _acc(b, 3, "read", shift=1)
    assert _kinds(b.trace) == set()


def test_a_load_then_a_neighbours_store_is_a_race(tb):
    """Shift left in place: lane i loads word i+1, then stores word i (write after read)."""
    b = tb(block=(32, 1, 1))
    _acc(b, 1, "read", shift=1)
    _acc(b, 2, "write")
    assert _kinds(b.trace) == {("race.converged-lanes", 2)}


def test_a_store_over_a_word_all_lanes_read_is_a_race(tb):
    """Every lane reads word 0 (a broadcast), then lane 0 overwrites it."""
    b = tb(block=(32, 1, 1))
    b.add(ev.MemAccess, 0, 1, space="shared", access="read",
          ranges=[(ln, 0, 4) for ln in range(32)])
    b.add(ev.Divergence, 0, 2, lanes=0x1, other=ALL ^ 0x1)
    _acc(b, 3, "write", lanes=0x1)
    assert _kinds(b.trace) == {("race.converged-lanes", 3)}


def test_an_elected_lane_reading_the_warps_stores_is_a_race(tb):
    """All lanes store, then lane 0 alone (a class split off the warp, whose clock includes the
    stores) reads lane 5's word."""
    b = tb(block=(32, 1, 1))
    _acc(b, 1, "write")
    b.add(ev.Divergence, 0, 2, lanes=0x1, other=ALL ^ 0x1)
    b.add(ev.MemAccess, 0, 3, lanes=0x1, space="shared", access="read", ranges=[(0, 20, 24)])
    assert _kinds(b.trace) == {("race.converged-lanes", 3)}


def test_atomics_between_lanes_do_not_race(tb):
    b = tb(block=(32, 1, 1))
    b.add(ev.MemAccess, 0, 1, space="shared", access="rmw", atomic=True,
          ranges=[(ln, 0, 4) for ln in range(32)])
    b.add(ev.MemAccess, 0, 2, space="shared", access="rmw", atomic=True,
          ranges=[(ln, 0, 4) for ln in range(32)])
    assert _kinds(b.trace) == set()


def test_aligned_instructions_are_not_judged_by_lane(tb):
    """ldmatrix names the lanes whose row addresses were used, not the lanes that read."""
    ldm = SimpleNamespace(guard=None, spelling="ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                          loc=None, modifiers={})
    b = tb(block=(32, 1, 1))
    _acc(b, 1, "write")
    b.add(ev.WarpSync, 0, 2, op="ldmatrix", membermask=ALL)
    _acc(b, 2, "read", shift=3, instr=ldm)
    assert _kinds(b.trace) == set()


def test_another_warp_is_the_vector_clocks_business(tb):
    """Lanes of different warps: racecheck's own race, not a converged-lanes one."""
    b = tb(block=(64, 1, 1))
    _acc(b, 1, "write")
    _acc(b, 2, "read", warp=1, shift=1)
    assert _kinds(b.trace) == {("race.read-write", 2)}


@pytest.mark.parametrize("arrive", [False, True])
def test_a_wait_links_the_lanes_only_after_their_own_release(tb, arrive):
    """The lanes read their words, then wait on an mbarrier, then store their neighbours'.
    The wait is an acquire of every lane, but a chain from lane a to lane b also needs a
    release of lane a after its read: the warp's own arrive on the barrier (then the wait
    orders the two), not another warp's."""
    b = tb(block=(64, 1, 1))
    b.add(ev.MBarrierEvent, 1, 1, op="init", addr=128, count=1)
    b.bar_sync((0, 1), 2)
    _acc(b, 3, "read")
    if arrive:
        b.add(ev.MBarrierEvent, 0, 4, op="arrive", addr=128, count=32)
    else:
        b.add(ev.MBarrierEvent, 1, 4, op="arrive", addr=128, count=1, phase=1,
              completed_phase=True)
    b.add(ev.MBarrierEvent, 0, 5, op="try_wait", addr=128, parity=0, success=True, phase=1)
    _acc(b, 6, "write", shift=1)
    assert _kinds(b.trace) == (set() if arrive else {("race.converged-lanes", 6)})


@pytest.mark.parametrize("how", ["elected", "joined", "every lane"])
def test_an_elected_lane_publishes_only_what_its_lanes_acquired(tb, how):
    """Warp 0's lanes store their words (one lockstep class), then publish to warp 1 through an
    mbarrier: lane 0 alone arriving publishes lane 0's store only (the finding is on the
    arrive); after bar.warp.sync, or with every lane arriving, warp 1's read is ordered."""
    b = tb(block=(64, 1, 1))
    b.add(ev.MBarrierEvent, 1, 1, op="init", addr=128, count=1 if how != "every lane" else 32)
    b.bar_sync((0, 1), 2)
    _acc(b, 3, "write")
    if how == "joined":
        b.add(ev.WarpSync, 0, 4, op="bar.warp.sync", membermask=ALL)
    if how == "every lane":
        b.add(ev.MBarrierEvent, 0, 6, op="arrive", addr=128, count=32, phase=1,
              completed_phase=True)
    else:
        b.add(ev.Divergence, 0, 5, lanes=0x1, other=ALL ^ 0x1)
        b.add(ev.MBarrierEvent, 0, 6, lanes=0x1, op="arrive", addr=128, count=1, phase=1,
              completed_phase=True)
    b.add(ev.MBarrierEvent, 1, 7, op="try_wait", addr=128, parity=0, success=True, phase=1)
    b.add(ev.MemAccess, 1, 8, space="shared", access="read", ranges=[(3, 20, 24)])
    _, race = check_trace(b.trace)
    if how != "elected":
        assert race.findings == []
        return
    (f,) = race.findings
    assert (f.kind, f.where.line, f.lanes) == ("race.converged-lanes", 6, [5])
    assert [r.line for r in f.related] == [3, 8]
