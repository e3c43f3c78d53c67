"""Named-barrier generations formed by other warps than in numsim's run (`groupings`, issue 13
class 1), on hand-built traces."""

from __future__ import annotations

from tirxh_numsim import events as ev
from tirxh_sync_check import check_trace, hbquery, model, racecheck, synccheck
from tirxh_sync_check.groupings import MAX_ALTERNATIVES, reference_groups


def _pairs(tb, nwarps: int, bid_of=lambda w: 1, data: bool = True):
    """Warps 2k write slot k and bar.arrive; warps 2k+1 bar.sync and read slot k (count 64)."""
    b = tb(block=(32 * nwarps, 1, 1))
    for w in range(0, nwarps, 2):
        if data:
            b.add(ev.MemAccess, w, 10, space="shared", access="write",
                  ranges=[(0, 4 * w, 4 * w + 4)])
        b.add(ev.BarrierEvent, w, 11, op="arrive", barrier=bid_of(w), count=64)
        b.add(ev.BarrierEvent, w + 1, 20, op="sync", barrier=bid_of(w), count=64)
        b.add(ev.BarrierEvent, w + 1, 20, op="sync", barrier=bid_of(w), count=64, released=True)
        if data:
            b.add(ev.MemAccess, w + 1, 21, space="shared", access="read",
                  ranges=[(0, 4 * w, 4 * w + 4)])
    return b.trace


def test_reference_groups_follow_numsim_arrival_order(tb):
    trace = _pairs(tb, 4)
    arrivals = [id(e) for e in trace.events if isinstance(e, ev.BarrierEvent) and not e.released]
    assert reference_groups(trace) == {frozenset(arrivals[:2]), frozenset(arrivals[2:])}


def test_which_barriers_are_explored_for_groupings(tb):
    """More users than a generation holds, or a non-blocking arrive: explored; a barrier two
    warps meet at with bar.sync: not."""
    (cm,) = model.build(_pairs(tb, 4))
    assert synccheck._grouping_sensitive([w.ops for w in cm.warps]) == {("bar", 0, 1)}
    b = tb(block=(64, 1, 1))
    for w in (0, 1):
        b.add(ev.BarrierEvent, w, 3, op="sync", barrier=2, count=64)
        b.add(ev.BarrierEvent, w, 3, op="sync", barrier=2, count=64, released=True)
    (cm,) = model.build(b.trace)
    assert synccheck._grouping_sensitive([w.ops for w in cm.warps]) == set()


def test_a_race_under_another_grouping_is_a_shared_id_finding(tb):
    sync, race = check_trace(_pairs(tb, 4))
    assert race.verdict == "clean"  # numsim's grouping pairs them as intended
    f = [f for f in sync.findings if f.kind == "barrier.shared-id"]
    assert f and {x.where.line for x in f} == {20}
    assert "instead of its partner's" in f[0].message and f[0].data["race"] == "race.read-write"


def test_separate_ids_leave_nothing_to_regroup(tb):
    sync, _ = check_trace(_pairs(tb, 4, bid_of=lambda w: 1 + w // 2))
    assert sync.verdict == "clean", sync.findings


def test_other_groupings_without_a_race_are_clean(tb):
    sync, _ = check_trace(_pairs(tb, 4, data=False))
    assert sync.verdict == "clean", sync.findings


def test_too_many_other_groupings_make_the_result_incomplete(tb):
    sync, _ = check_trace(_pairs(tb, 8, data=False))
    notes = [f for f in sync.findings if f.kind == "sync_check.not-modelled"]
    assert notes and f"checked the first {MAX_ALTERNATIVES}" in notes[0].message
    assert sync.verdict == "incomplete"


def _pingpong(tb, rounds: int, wait_turn: bool = True):
    """FlashAttention-3's hand-over on two warps (count 64): warp 0 writes slot r and
    ``bar.arrive``s barrier 1 (the turn passes), warp 1 ``bar.sync``s barrier 1, reads the slot
    and ``bar.arrive``s barrier 2; warp 0 ``bar.sync``s barrier 2 before its next round (without
    `wait_turn` it does not: its arrivals on barrier 1 can then form a generation alone)."""
    b = tb(block=(64, 1, 1))
    for r in range(rounds):
        if wait_turn and r:
            b.add(ev.BarrierEvent, 0, 30, op="sync", barrier=2, count=64)
            b.add(ev.BarrierEvent, 0, 30, op="sync", barrier=2, count=64, released=True)
        b.add(ev.MemAccess, 0, 10, space="shared", access="write", ranges=[(0, 4 * r, 4 * r + 4)])
        b.add(ev.BarrierEvent, 0, 11, op="arrive", barrier=1, count=64)
        b.add(ev.BarrierEvent, 1, 20, op="sync", barrier=1, count=64)
        b.add(ev.BarrierEvent, 1, 20, op="sync", barrier=1, count=64, released=True)
        b.add(ev.MemAccess, 1, 21, space="shared", access="read", ranges=[(0, 4 * r, 4 * r + 4)])
        if wait_turn:
            b.add(ev.BarrierEvent, 1, 22, op="arrive", barrier=2, count=64)
    if wait_turn:
        b.add(ev.BarrierEvent, 0, 30, op="sync", barrier=2, count=64)
        b.add(ev.BarrierEvent, 0, 30, op="sync", barrier=2, count=64, released=True)
    return b.trace


def test_a_ping_pong_hand_over_is_proven_ordered_and_explored_eagerly(tb):
    """The arrivals of every generation happen-after the previous generation's (through the
    other barrier of the pair): no interleaving regroups them, so they are not interleaved
    (sync_check on the zoo's FlashAttention-3 kernel: 38846 states -> 536 for one tile, and two
    tiles finish in 6899 instead of passing the 200000 bound)."""
    trace = _pingpong(tb, 3)
    _, rc = racecheck.check(trace)
    assert hbquery.bars_ordered(rc) == {("bar", 0, 1), ("bar", 0, 2)}
    sync, race = check_trace(trace)
    assert sync.verdict == race.verdict == "clean", sync.findings + race.findings
    assert sync.stats["ordered_bars"] == 2


def test_a_warp_that_arrives_again_before_its_turn_keeps_the_barrier_interleaved(tb):
    """The buggy twin: warp 0 arrives on barrier 1 in every round without waiting for its turn,
    so its two arrivals can form a generation alone, leaving warp 1 waiting for a partner that
    never comes: the barrier is not proven ordered, and the explorer finds that grouping."""
    trace = _pingpong(tb, 2, wait_turn=False)
    _, rc = racecheck.check(trace)
    assert ("bar", 0, 1) not in hbquery.bars_ordered(rc)
    sync, race = check_trace(trace)
    assert sync.stats["ordered_bars"] == 0
    assert [f.kind for f in sync.findings] == ["barrier.count-mismatch"], sync.findings
    assert "no warp can make progress: warp 1" in sync.findings[0].message
