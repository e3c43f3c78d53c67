"""Lane classes (`lanes`): a converged warp is one thread; its lanes become separate threads
where it diverges and one again where bar.warp.sync or a CTA barrier joins them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tirxh_numsim import events as ev
from tirxh_sync_check import check_trace
from tirxh_sync_check.lanes import LaneClasses

LO, HI = 0x0000FFFF, 0xFFFF0000


def _w(b, line, lanes, a, **kw):
    return b.add(ev.MemAccess, 0, line, lanes=lanes, space="shared", access="write",
                 ranges=[(ln, a + 4 * ln, a + 4 * ln + 4) for ln in ev.lanes_of(lanes)], **kw)


def _r(b, line, lanes, a, shift=0):
    return b.add(ev.MemAccess, 0, line, lanes=lanes, space="shared", access="read",
                 ranges=[(ln, a + 4 * (ln ^ shift), a + 4 * (ln ^ shift) + 4)
                         for ln in ev.lanes_of(lanes)])


def _diverge(b, line, lanes, other):
    return b.add(ev.Divergence, 0, line, lanes=lanes, other=other)


def test_a_converged_warp_is_one_thread(tb):
    b = tb(block=(32, 1, 1))
    _w(b, 1, 0xFFFFFFFF, 0)
    _r(b, 2, 0xFFFFFFFF, 0, shift=16)  # lanes read each other's words, in lockstep
    lc = LaneClasses(b.trace, {(0, 0): 0})
    assert lc.n == 1 and not lc.forks
    # one thread of the vector clocks; the lanes' exchange is judged lane by lane
    # (`convergedlanes`: nothing but lockstep orders it)
    _, race = check_trace(b.trace)
    assert [(f.kind, f.where.line) for f in race.findings] == [("race.converged-lanes", 2)]


@pytest.mark.parametrize("joined", [True, False])
def test_divergence_splits_and_bar_warp_sync_joins(tb, joined):
    b = tb(block=(32, 1, 1))
    _diverge(b, 1, LO, HI)
    _w(b, 2, LO, 0)
    _w(b, 3, HI, 0)
    if joined:
        b.add(ev.WarpSync, 0, 4, op="bar.warp.sync", membermask=0xFFFFFFFF)
    _r(b, 5, 0xFFFFFFFF, 0, shift=16)  # each lane reads the word of its partner in the other half
    lc = LaneClasses(b.trace, {(0, 0): 0})
    assert lc.forks == {0: [(0, 1)]} and lc.parts[1] == [(0, LO)]
    _, race = check_trace(b.trace)
    if joined:
        assert lc.joins == {3: [(0, [1])]} and lc.parts[4] == [(0, 0xFFFFFFFF)]
        assert race.verdict == "clean", race.findings
    else:
        assert lc.parts[3] == [(0, LO), (1, HI)]
        assert ("race.divergent-lanes", 5) in {(f.kind, f.where.line) for f in race.findings}


def test_a_guarded_instruction_does_not_split_the_warp(tb):
    instr = SimpleNamespace(guard=("p", False), spelling="st.shared.u32", loc=None)
    b = tb(block=(32, 1, 1))
    _w(b, 1, 0x1, 0, instr=instr)
    lc = LaneClasses(b.trace, {(0, 0): 0})
    assert lc.n == 1 and not lc.forks


def test_a_merged_class_id_is_reused_by_the_class_that_absorbed_it(tb):
    """Split, join, split again: the second split reuses the absorbed id (its final clock is in
    the parent's, so reuse orders nothing wrongly)."""
    b = tb(block=(32, 1, 1))
    for k in range(3):
        _diverge(b, 1, LO, HI)
        b.add(ev.WarpSync, 0, 2, op="bar.warp.sync", membermask=0xFFFFFFFF)
    lc = LaneClasses(b.trace, {(0, 0): 0})
    assert lc.n == 2
    assert [f for i in sorted(lc.forks) for f in lc.forks[i]] == [(0, 1)] * 3


def test_an_elected_lane_publishing_for_lanes_it_never_joined(tb):
    """Warp 0: halves write after diverging, lane 0 arrives; warp 1 waits and reads: the
    finding points at the arrive (where the join is missing)."""
    b = tb(block=(64, 1, 1))
    b.add(ev.MBarrierEvent, 0, 1, op="init", addr=128, count=1)
    b.bar_sync((0, 1), 2)
    _diverge(b, 3, LO, HI)
    _w(b, 4, LO, 0)
    _w(b, 5, HI, 0)
    _diverge(b, 6, 0x1, 0xFFFFFFFE)
    b.add(ev.MBarrierEvent, 0, 7, lanes=0x1, op="arrive", addr=128, count=1, phase=1,
          completed_phase=True)
    b.add(ev.MBarrierEvent, 1, 8, op="try_wait", addr=128, parity=0, success=True, phase=1)
    b.add(ev.MemAccess, 1, 9, space="shared", access="read", ranges=[(5, 80, 84)])
    _, race = check_trace(b.trace)
    (f,) = race.findings
    assert (f.kind, f.where.line) == ("race.divergent-lanes", 7)
    assert [r.line for r in f.related][:2] == [5, 9]
