"""The decoder on real traces: ``benchmarks/profile_gpu.py --quick`` on an H200, 2026-11-30, second
run (fixtures/h200_*, see fixtures/README.md).

* ``h200_gemm_wgmma``: the whole trace buffer of zoo ``gemm_wgmma``, case m1024n1024k512 (grid
  8 x 8, 12 warps per CTA, capacity 48), gzip-compressed; ``h200_gemm_wgmma.summary.txt`` is the
  summary the board printed from it, which the client must reproduce byte for byte.
* ``h200_vadd_head``: the first 264 of the 4096 CTAs of zoo ``vadd``, case n4194304 (8 warps per
  CTA, capacity 6). A prefix of whole CTAs is a valid buffer (one region per warp, in CTA order);
  its figures describe those CTAs only, not the run.
"""

import collections
import pathlib

import numpy as np
import pytest

from tirxh_iket.decode import load, read_buffer, read_trace_file
from tirxh_iket.layout import TraceLayout
from tirxh_iket.summary import format_summary, summarize

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
GEMM = "/work/main/zoo/kernels/gemm_wgmma.py"
VADD = "/work/main/zoo/kernels/vadd.py"


@pytest.fixture(scope="module")
def gemm():
    return load(FIXTURES / "h200_gemm_wgmma.bin.gz", FIXTURES / "h200_gemm_wgmma.layout.json")


@pytest.fixture(scope="module")
def vadd():
    return load(FIXTURES / "h200_vadd_head.bin.gz", FIXTURES / "h200_vadd_head.layout.json")


def test_gemm_layout_sites():
    lay = TraceLayout.load(FIXTURES / "h200_gemm_wgmma.layout.json")
    assert (lay.kernel, lay.capacity, lay.warps_per_cta, lay.block) == \
        ("gemm_wgmma", 48, 12, (384, 1, 1))
    begins = {s.name: s.line for s in lay.sites if s.kind == "begin"}
    assert begins == {"wait_empty": 73, "issue_tma": 75, "wait_full": 91, "mma": 96,
                      "epilogue": 109}
    assert {s.file for s in lay.sites} == {GEMM}
    assert lay.cost == {"prologue_instructions": 16, "instructions_per_event": 11,
                        "bytes_per_event": 32}


def test_gemm_buffer_is_the_whole_grid():
    lay = TraceLayout.load(FIXTURES / "h200_gemm_wgmma.layout.json")
    data = read_trace_file(FIXTURES / "h200_gemm_wgmma.bin.gz")
    assert data.size == lay.buffer_bytes((8, 8, 1)) == 1179648  # 64 CTAs x 12 warps x 48 x 32 B
    recs = read_buffer(data, lay)
    written = (recs["event"] != 0).sum(axis=1).reshape(64, 12)
    # per CTA: warp 0 (producer) 32 events, warps 1-3 none, warps 4-11 (consumers) 34 each
    assert (written == [32, 0, 0, 0] + [34] * 8).all()
    # the globaltimer readings differ by multiples of 32 ns on this board
    gt = np.unique(recs["globaltimer"][recs["event"] != 0])
    assert not (np.diff(gt) % 32).any()


def test_gemm_warps_roles_and_sms(gemm):
    """576 warps on 64 SMs, one CTA per SM; the roles separate by the ranges each warp recorded:
    warp 0 of each CTA issues TMA, warps 4-11 (two consumer warpgroups) wait, mma, store."""
    assert not gemm.issues and gemm.dropped == 0
    assert len(gemm.warps) == 576 and len(gemm.sms) == 64
    assert gemm.timebase == "globaltimer"  # every SM's events span < 20 us: no clock64 fit
    assert gemm.roles == ["epilogue+mma+wait_full", "issue_tma+wait_empty"]
    by_role = collections.Counter((w.role, w.warp) for w in gemm.warps)
    assert by_role == {("issue_tma+wait_empty", 0): 64,
                       **{("epilogue+mma+wait_full", w): 64 for w in range(4, 12)}}
    sm_of_cta = {w.cta: w.sm for w in gemm.warps}
    assert len(sm_of_cta) == 64 and len(set(sm_of_cta.values())) == 64
    assert all(w.sm == sm_of_cta[w.cta] for w in gemm.warps)
    assert gemm.duration == pytest.approx(5824)


def test_gemm_ranges_per_warp(gemm):
    """8 K tiles (k512 / BK 64): 8 waits and TMA issues per producer, 8 waits and mmas per
    consumer warp, one epilogue each; ranges do not nest."""
    for w in gemm.warps:
        names = collections.Counter(s.name for s in w.spans)
        if w.warp == 0:
            assert names == {"wait_empty": 8, "issue_tma": 8}
        else:
            assert names == {"wait_full": 8, "mma": 8, "epilogue": 1}
        assert all(s.depth == 0 and s.dur >= 0 for s in w.spans)
    where = {s.name: s.where for w in gemm.warps[:12] for s in w.spans}
    assert where["epilogue"] == f"{GEMM}:109" and where["wait_full"] == f"{GEMM}:91"


def test_gemm_pipeline_per_k_tile(gemm):
    """What docs/PROFILING.md reads off the timeline: the consumers' first wait_full (pipeline
    fill) is long and the later ones short; the producer's first four wait_empty (4 fresh
    stages) are short and the fifth, its first wait for a recycled stage, is the longest; the
    first consumer warpgroup's epilogue is longer than the second's."""
    cons = [w for w in gemm.warps if w.warp >= 4]
    wait_full = np.array([[s.dur for s in w.spans if s.name == "wait_full"] for w in cons])
    mean = wait_full.mean(axis=0)
    assert mean[0] == pytest.approx(778, abs=1) and (mean[1:] < 170).all()
    prod = [w for w in gemm.warps if w.warp == 0]
    wait_empty = np.array([[s.dur for s in w.spans if s.name == "wait_empty"] for w in prod])
    mean = wait_empty.mean(axis=0)
    assert (mean[:4] < 70).all() and mean.argmax() == 4
    assert mean[4] == pytest.approx(853, abs=1)
    epilogue = {g: np.mean([s.dur for w in cons if w.warp // 4 == g for s in w.spans
                            if s.name == "epilogue"]) for g in (1, 2)}
    assert epilogue[1] == pytest.approx(1058, abs=1) and epilogue[2] == pytest.approx(708, abs=1)


def test_gemm_summary_as_the_board_printed_it(gemm):
    s = summarize(gemm)
    assert s["verdict"] == "ok" and s["duration_ns"] == 5824 and s["warps"] == 576
    cons, prod = s["roles"]["epilogue+mma+wait_full"], s["roles"]["issue_tma+wait_empty"]
    assert (cons["warps"], prod["warps"]) == (512, 64)
    assert cons["busy_fraction"] == pytest.approx(0.750, abs=5e-4)
    assert prod["busy_fraction"] == pytest.approx(0.818, abs=5e-4)
    assert cons["ranges"]["mma"]["count"] == 4096 and prod["ranges"]["wait_empty"]["count"] == 512
    bal = s["balance"]
    assert (bal["sms"], bal["finish_median_ns"], bal["finish_max_ns"]) == (64, 5472, 5824)
    assert bal["tail_ns"] == 352 and bal["tail_fraction"] == pytest.approx(0.0604, abs=1e-4)
    assert s["bubbles"][0]["gap_ns"] == 320 and s["bubbles"][0]["where"] == f"{GEMM}:109"
    recorded = (FIXTURES / "h200_gemm_wgmma.summary.txt").read_text()
    assert format_summary(s) + "\n" == recorded


def test_vadd_head(vadd):
    """The first 264 CTAs of the vadd trace: 2112 warps, one role, one load and one store range
    per warp (4 of the 6 records of each region written), spread over all 132 SMs."""
    assert not vadd.issues and vadd.dropped == 0
    assert len(vadd.warps) == 264 * 8 and len(vadd.sms) == 132
    assert vadd.roles == ["load+store"] and vadd.timebase == "globaltimer"
    for w in vadd.warps:
        assert [(s.name, s.where) for s in w.spans] == [("load", f"{VADD}:23"),
                                                        ("store", f"{VADD}:26")]
    assert sorted({w.cta for w in vadd.warps}) == list(range(264))
    s = summarize(vadd)
    assert s["verdict"] == "ok" and s["roles"]["load+store"]["ranges"]["store"]["count"] == 2112


def test_render_command_reads_gzip(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from tirxh_iket.__main__ import main
    rc = main(["render", str(FIXTURES / "h200_gemm_wgmma.bin.gz"),
               str(FIXTURES / "h200_gemm_wgmma.layout.json"), "--out", str(tmp_path),
               "--max-sms", "2"])
    assert rc == 0
    out = capsys.readouterr().out
    assert out.startswith("iket timeline of gemm_wgmma: 576 warps on 64 SMs, 5.82 us")
    # the raw buffer written back is the uncompressed recording
    assert (tmp_path / "iket_trace.bin").stat().st_size == 1179648
    assert (tmp_path / "iket_timeline.png").stat().st_size > 0


def test_render_command_bad_gzip(tmp_path, capsys):
    from tirxh_iket.__main__ import main
    bad = tmp_path / "t.bin.gz"
    bad.write_bytes(b"not gzip")
    rc = main(["render", str(bad), str(FIXTURES / "h200_gemm_wgmma.layout.json")])
    assert rc == 2 and "tirxh_iket render:" in capsys.readouterr().err


LOSSY = "h200_gemm_sm90_lossy_head"


@pytest.fixture(scope="module")
def lossy():
    return load(FIXTURES / f"{LOSSY}.bin.gz", FIXTURES / f"{LOSSY}.layout.json")


def test_lost_events_of_a_real_gemm_are_one_line(lossy):
    """Session 15's GEMM profile at the default capacity 64 (fixtures/README.md): the board
    printed ~2,180 issue lines (one 'events lost' and one 'end of range' per warp) and no
    capacity to rerun with. Per CTA: producer warp 0 needed 128 events (64 K slices x one
    wait_empty range), the 8 consumer warps 258 each; the device counted them past the capacity,
    so the need is exact."""
    assert lossy.capacity == 64 and lossy.regions == 16 * 12
    need = {(w.cta, w.warp): w.needed for w in lossy.warps}
    assert set(need.values()) == {128, 258}
    assert all(need[(c, 0)] == 128 for c in range(16))
    assert lossy.dropped == 16 * ((128 - 64) + 8 * (258 - 64)) == 25856
    assert lossy.issues[0] == ("25856 events lost in 144 warps (capacity 64 per warp); the "
                               "largest need was 258 events a warp: rerun with --iket-capacity "
                               "320 (a trace buffer of 1.9 MiB)")
    assert lossy.issues[1].startswith("288 ranges cut by the gap of lost events")
    assert len(lossy.issues) == 2
    text = format_summary(summarize(lossy))
    assert "INCOMPLETE: 25856 events lost in 144 warps" in text
    assert "end of range" not in text and text.count("events lost") == 1


def test_no_span_of_a_lossy_warp_crosses_the_gap(lossy):
    """Paired across the gap, each producer warp got one bogus wait_empty span from its 63rd
    event to its last (about 15 us: the board's summary said max 15.1 us, mean 0.72 us); kept
    apart, every wait_empty lies before the gap."""
    prod = [w for w in lossy.warps if w.warp == 0]
    for w in prod:
        assert len(w.spans) == 31 and all(s.end <= w.covered_end for s in w.spans)
    r = summarize(lossy)["roles"]["wait_empty"]["ranges"]["wait_empty"]
    assert r["count"] == 16 * 31 and r["max_ns"] < 3000
