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
    assert prod.dropped == 16 - 8
    assert tl.dropped >= 8
    assert any("events lost" in i and "--iket-capacity" in i for i in tl.issues)


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
