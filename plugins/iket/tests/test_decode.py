"""Trace buffer decoding: spans, roles, time base, lost events, malformed input."""

import numpy as np
import pytest

import tracegen
from tirxh_iket.decode import decode
from tirxh_iket.layout import LayoutError, TraceLayout


def test_decodes_a_warp_specialized_gemm(gemm_layout):
    sched = tracegen.gemm_schedule(nsms=4, tiles_per_sm=3, k_iters=4)
    tl = decode(tracegen.write(gemm_layout, 4, sched), gemm_layout)
    assert tl.issues == []
    assert len(tl.warps) == 12 and tl.sms == [0, 1, 2, 3]
    assert tl.roles == ["epilogue+mma", "load"]
    prod = next(w for w in tl.warps if w.cta == 2 and w.warp == 0)
    assert prod.role == "load" and prod.sm == 2 and len(prod.spans) == 12
    # the long schedule lets the decoder estimate the SM clock: durations are exact
    assert tl.timebase == "globaltimer+clock64 (per-SM fit)"
    assert tl.clock_ghz == pytest.approx(1.8, rel=1e-3)
    assert prod.spans[0].dur == pytest.approx(900.0, abs=1.0)
    cons = next(w for w in tl.warps if w.cta == 1 and w.warp == 8)
    assert [m.name for m in cons.marks] == ["tile_done"] * 3
    assert cons.spans[-1].name == "epilogue" and cons.spans[-1].dur == pytest.approx(1500, abs=1)


def test_coarse_globaltimer_is_refined_by_clock(gemm_layout):
    # a 1 us global timer: spans of ~900 ns would read as 0 or 1000 ns without clock64.
    # Real schedules jitter; a perfectly periodic one would alias with the timer's steps.
    rng = np.random.default_rng(7)
    sched = {key: (sm, hw, [(k, n, t + rng.uniform(0, 300)) for k, n, t in evs])
             for key, (sm, hw, evs) in tracegen.gemm_schedule(nsms=2, tiles_per_sm=6).items()}
    true = [e[2] - b[2] for (_, w), (_, _, evs) in sorted(sched.items()) if w == 0
            for b, e in zip(evs[::2], evs[1::2])]
    data = tracegen.write(gemm_layout, 2, sched, gt_step=1000)
    tl = decode(data, gemm_layout)
    durs = [s.dur for w in sorted(tl.warps, key=lambda w: w.cta) if w.role == "load"
            for s in w.spans]
    assert np.allclose(durs, true, rtol=0.005, atol=1.0)
    coarse = decode(data, gemm_layout, timebase="globaltimer")
    assert coarse.timebase == "globaltimer"
    assert {round(s.dur) for w in coarse.warps if w.role == "load" for s in w.spans} <= \
        {0, 1000, 2000}


def test_warps_of_one_sm_share_one_clock(gemm_layout):
    # a 1 us global timer: per-warp anchoring would misplace warps by up to 1 us; the per-SM fit
    # keeps the true distance between events of different warps on the same SM
    rng = np.random.default_rng(3)
    sched = {key: (sm, hw, [(k, n, t + rng.uniform(0, 300)) for k, n, t in evs])
             for key, (sm, hw, evs) in tracegen.gemm_schedule(nsms=1, tiles_per_sm=6).items()}
    tl = decode(tracegen.write(gemm_layout, 1, sched, gt_step=1000), gemm_layout)
    prod = next(w for w in tl.warps if w.warp == 0)
    cons = next(w for w in tl.warps if w.warp == 4)
    true = sched[(0, 4)][2][0][2] - sched[(0, 0)][2][0][2]
    assert cons.events[0].t - prod.events[0].t == pytest.approx(true, abs=3.0)
    assert min(w.start for w in tl.warps) == 0.0


def test_short_trace_uses_board_clock_or_globaltimer(gemm_layout):
    sched = {(0, 0): (5, 3, [("begin", "load", 0.0), ("end", "load", 500.0)])}
    data = tracegen.write(gemm_layout, 1, sched, ghz=1.5)
    tl = decode(data, gemm_layout, clock_ghz=1.5)
    assert tl.timebase == "globaltimer+clock64 (board clock)"
    assert tl.warps[0].spans[0].dur == pytest.approx(500.0)
    assert decode(data, gemm_layout).timebase == "globaltimer"
    with pytest.raises(ValueError, match="timebase 'clock' needs clock_ghz"):
        decode(data, gemm_layout, timebase="clock")


def test_role_names_override(gemm_layout):
    sched = tracegen.gemm_schedule(nsms=1)
    tl = decode(tracegen.write(gemm_layout, 1, sched), gemm_layout,
                role_names={0: "producer", 4: "consumer0", 8: "consumer1"})
    assert tl.roles == ["consumer0", "consumer1", "producer"]


def test_overflow_reports_lost_events(gemm_layout):
    small = TraceLayout(**{**gemm_layout.__dict__, "capacity": 8})
    sched = tracegen.gemm_schedule(nsms=1, tiles_per_sm=2, k_iters=4)  # producer: 16 events
    tl = decode(tracegen.write(small, 1, sched), small)
    prod = next(w for w in tl.warps if w.warp == 0)
    assert prod.dropped == 16 - 8 and prod.needed == 16
    cons = next(w for w in tl.warps if w.warp == 4)  # 2 x (4 x 2 + 3) = 22 events
    assert cons.needed == 22 and cons.dropped == 22 - 8
    assert tl.dropped == 8 + 2 * 14


def test_lost_events_are_one_line_with_the_capacity_to_rerun_with(gemm_layout):
    """One line for every lossy warp, with the exact largest need (the device counts past the
    capacity) and a capacity to rerun with; the range mismatches the gap would cause are counted
    in one line, not reported per warp (session 15: ~2,180 such lines for one GEMM profile)."""
    small = TraceLayout(**{**gemm_layout.__dict__, "capacity": 8})
    sched = tracegen.gemm_schedule(nsms=3, tiles_per_sm=2, k_iters=4)
    tl = decode(tracegen.write(small, 3, sched), small)
    assert tl.issues[0] == ("108 events lost in 9 warps (capacity 8 per warp); the largest need "
                            "was 22 events a warp: rerun with --iket-capacity 32 (a trace buffer "
                            "of 0.0 MiB)")
    # producers: 'load' open at the gap + the last 'end load'; consumers: the last record is
    # the tile_done mark, and 'mma' is open at the gap (events 0-6: mma x3, begin mma)
    loss = tl.loss()
    assert loss["cut_ranges"] == 3 * 2 + 6 * 1
    assert tl.issues[1].startswith("12 ranges cut by the gap of lost events")
    assert len(tl.issues) == 2  # no per-warp 'end of range' or 'events lost' lines
    assert loss["suggested_bytes"] == 3 * 12 * 32 * 32
    # no span pairs across the gap: every span lies before it, with its true duration
    prod = next(w for w in tl.warps if w.cta == 1 and w.warp == 0)
    assert [s.name for s in prod.spans] == ["load"] * 3
    assert all(s.dur == pytest.approx(900.0, abs=1) for s in prod.spans)
    assert prod.end > prod.covered_end == prod.events[-2].t  # the true last event is kept
    cons = next(w for w in tl.warps if w.cta == 0 and w.warp == 8)
    assert [m.name for m in cons.marks] == ["tile_done"]  # the last record, past the gap


def test_range_errors_in_warps_that_lost_nothing_are_still_reported(gemm_layout):
    small = TraceLayout(**{**gemm_layout.__dict__, "capacity": 8})
    sched = {(0, 0): (0, 0, [(k, "load", 10.0 * i) for i, k in enumerate(["begin", "end"] * 6)]),
             (0, 4): (0, 4, [("begin", "mma", 0.0), ("end", "epilogue", 10.0)])}
    tl = decode(tracegen.write(small, 1, sched), small)
    assert tl.issues[0].startswith("4 events lost in 1 warps (capacity 8 per warp); the largest "
                                   "need was 12 events a warp: rerun with --iket-capacity 32")
    assert any(i.startswith("cta 0 warp 4: end of range 'epilogue'") for i in tl.issues)
    assert any(i.startswith("cta 0 warp 4: range 'mma'") and "never ended" in i
               for i in tl.issues)
    assert not any(i.startswith("cta 0 warp 0") for i in tl.issues)


@pytest.mark.parametrize("need,cap", [(1, 32), (29, 32), (30, 64), (258, 320), (960, 1088)])
def test_suggested_capacity_has_headroom(need, cap):
    from tirxh_iket.decode import suggest_capacity
    assert suggest_capacity(need) == cap and cap >= need + need // 8


def test_capacity_one_keeps_only_the_last_event(gemm_layout):
    one = TraceLayout(**{**gemm_layout.__dict__, "capacity": 1})
    sched = {(0, 0): (0, 0, [("begin", "load", 0.0), ("end", "load", 50.0)])}
    tl = decode(tracegen.write(one, 1, sched), one)
    w = tl.warps[0]
    assert (w.needed, w.dropped, w.spans, w.cut) == (2, 1, [], 1)
    assert tl.issues[0].startswith("1 events lost in 1 warps") and len(tl.issues) == 2


def test_unbalanced_ranges_are_reported(gemm_layout):
    sched = {(0, 0): (0, 0, [("begin", "load", 0.0), ("end", "mma", 10.0)]),
             (0, 4): (0, 4, [("begin", "mma", 0.0)])}
    tl = decode(tracegen.write(gemm_layout, 1, sched), gemm_layout)
    assert any("end of range 'mma'" in i and "while range 'load' is open" in i for i in tl.issues)
    assert any("range 'mma'" in i and "never ended" in i for i in tl.issues)


def test_empty_buffer_says_so(gemm_layout):
    tl = decode(bytes(gemm_layout.buffer_bytes((2, 1, 1))), gemm_layout)
    assert tl.warps == [] and "holds no events" in tl.issues[0]


def test_wrong_size_buffer_names_the_kernel(gemm_layout):
    with pytest.raises(LayoutError, match="not a whole number of warp regions.*'gemm_ws'"):
        decode(b"\0" * 100, gemm_layout)


def test_site_index_out_of_layout(gemm_layout):
    data = bytearray(tracegen.write(gemm_layout, 1, {(0, 0): (0, 0, [("mark", "tile_done", 1)])}))
    data[16:20] = (0x8000_0000 | 99).to_bytes(4, "little")
    tl = decode(bytes(data), gemm_layout)
    assert "buffer and layout do not match" in tl.issues[0]


def test_bad_layout_lists_every_problem():
    with pytest.raises(LayoutError) as ei:
        TraceLayout.from_json({"kernel": 3, "capacity": "x", "warps_per_cta": 4, "block": [32],
                               "sites": [{"kind": "start", "name": "a", "file": "f",
                                          "line": 1}]})
    msg = str(ei.value)
    assert "layout.kernel" in msg and "layout.capacity" in msg and "sites[0].kind" in msg
