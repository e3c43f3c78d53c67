"""Named-barrier generations formed by other warps than in numsim's run (`groupings`, issue 13
class 1), on hand-built traces."""

from __future__ import annotations

from tirxh_numsim import events as ev
from tirxh_sync_check import check_trace, model, synccheck
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
