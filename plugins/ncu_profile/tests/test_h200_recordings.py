"""The parsers on real recordings: ``benchmarks/profile_gpu.py --quick`` on an H200, 2026-11-30,
two runs (fixtures/h200/, see fixtures/README.md): the first (gemm m1024n1024k512, --set full;
memcheck) and the second (vadd n4194304 and gemm m4096n4096k4096_bn256, --set basic). Values
below are read off those files; the second run's summary tables, as the board printed them, are
``*_summary.txt`` and must be reproduced byte for byte from the (column-trimmed) exports."""

import csv
import gzip
import io
import json

import pytest

from ncu_fakes import fake_ncu
from tirxh_ncu_profile import tools
from tirxh_ncu_profile.ncu_csv import parse_details, parse_source, source_sampled
from tirxh_ncu_profile.report import format_ncu
from tirxh_ncu_profile.sanitizer import parse
from tirxh_ncu_profile.source_map import line_table, map_hotspots
from tirxh_ncu_profile.tools import summarize_exports


@pytest.fixture
def h200(read):
    return lambda name: read(f"h200/{name}")


def test_gemm_details_full_set(h200):
    """gemm_wgmma m1024n1024k512 (grid 8x8, BN 128), --set full + the tool's raw metrics."""
    [s] = parse_details(h200("ncu_gemm_details.csv"))
    assert (s.kernel, s.grid, s.block, s.device) == ("gemm_wgmma", "(8, 8, 1)", "(384, 1, 1)",
                                                     "0")
    assert s.duration_ns == 6528 and s.elapsed_cycles == 11810
    assert s.sm_throughput_pct == pytest.approx(16.43)
    assert s.memory_throughput_pct == pytest.approx(30.47)
    assert s.dram_read_bytes == 2103040 and s.dram_write_bytes == 256  # A and B: 2 x 1 MiB
    assert s.l2_hit_pct == pytest.approx(82.7) and s.l1_hit_pct == 75
    assert s.registers_per_thread == 168 and s.dynamic_smem_bytes == 131136
    assert s.theoretical_occupancy_pct == pytest.approx(18.75)
    assert s.sm_frequency_ghz == pytest.approx(1.79986, abs=1e-4)  # printed in "hz"
    assert s.waves_per_sm == pytest.approx(0.48)
    assert s.stalls[0] == ("long_scoreboard", pytest.approx(4.06)) and len(s.stalls) == 18
    assert s.missing == []


def test_gemm_source_page_and_line_table(h200):
    rows = parse_source(h200("ncu_gemm_source.csv"), kernel="gemm_wgmma")
    assert source_sampled(rows) and len(rows) == 240 and rows[0]["address"] == 0
    assert sum(r["samples"] for r in rows) == 268
    # the "stall_<reason> (Not Issued)" columns are not taken for stall reasons
    assert all(" " not in k for r in rows for k in r["stalls"])
    table = line_table(h200("gemm_sm90a.sass"))
    assert table[0] == ("/work/main/zoo/kernels/gemm_wgmma.py", 44)
    spots, cov = map_hotspots(rows, table)
    assert cov == {"samples": 268, "mapped": 268, "unmapped_addresses": 0}
    top = spots[0]
    assert (top.line, top.samples, top.sass) == (92, 66, "@!P1  BRA 0x7f00857a0e10")
    assert next(iter(top.stalls)) == "long_sb"  # consumers waiting on the `full` mbarrier


def test_gemm_summary_table(h200):
    s = summarize_exports(h200("ncu_gemm_details.csv"), h200("ncu_gemm_source.csv"),
                          entry="gemm_wgmma", sass=h200("gemm_sm90a.sass"))
    text = format_ncu(s)
    assert "ncu profile of gemm_wgmma (launch 0, grid (8, 8, 1), block (384, 1, 1)" in text
    assert "6.53 us" in text and "131.14 KB" in text and "1.800 GHz" in text
    assert "24.6%  gemm_wgmma.py:92" in text and "[long_sb]" in text
    assert "not sampled" not in text and "not in this report" not in text
    json.dumps(s)  # the summary travels as JSON


def _only_columns(text: str, columns: tuple) -> str:
    """`text` (an ncu source-page CSV) with its SASS table cut down to `columns`, the preamble
    rows kept: what ncu exports when the report lacks the other columns' sections."""
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    keep = None
    for row in csv.reader(io.StringIO(text)):
        if row and row[0] == "Address":
            keep = [row.index(c) for c in columns]
        writer.writerow([row[i] for i in keep] if keep else row)
    return out.getvalue()


def test_unsampled_source_page_degrades(h200):
    """The first run's vadd (--set basic, no SourceCounters) exported a source page with the
    columns Address, Source, launch__registers_per_thread only (the export was not kept): the
    second run's real vadd page cut to those columns. The summary keeps every other field and
    says the hot spots were not sampled."""
    unsampled = _only_columns(h200("ncu_vadd_source.csv"),
                              ("Address", "Source", "launch__registers_per_thread"))
    assert unsampled.splitlines()[1] == \
        '"Address","Source","launch__registers_per_thread"'  # as the first run printed it
    rows = parse_source(unsampled, kernel="vadd")
    assert len(rows) == 64 and not source_sampled(rows)
    s = summarize_exports(h200("ncu_vadd_details.csv"), unsampled, entry="vadd",
                          sass=h200("vadd_sm90a.sass"))
    assert s["duration_ns"] == 12736 and s["registers_per_thread"] == 18
    assert s["hotspots"] == [] and s["missing"] == ["hotspots"] and "sass_samples" not in s
    assert "launch__registers_per_thread" in s["hotspots_note"]
    text = format_ncu(s)
    assert "hot spots: not sampled: the source page of vadd has no sampling column" in text
    # the same page with its sampling columns is sampled: only the columns made the difference
    assert source_sampled(parse_source(h200("ncu_vadd_source.csv"), kernel="vadd"))


def test_memcheck_planted_oob_is_out_of_bounds(h200):
    """compute-sanitizer on the H200 (2026-11-30) says "Access to 0x.. is out of bounds": the
    finding is memory.out-of-bounds (it was misfiled as memory.invalid) at the planted line."""
    rep = parse(h200("memcheck_oob.log"), "memcheck", block_dim=[256, 1, 1])
    assert rep.error_summary == 67 and rep.verdict == "error"  # the log is trimmed to 3 of 64
    assert [f.kind for f in rep.findings] == ["memory.out-of-bounds"] * 3
    f = rep.findings[0]
    assert (f.where.file, f.where.line, f.where.label) == ("profile_gpu.py", 230, "write")
    assert f.addresses == ["0x7fd48f807e80"]
    assert f.data["thread"] == [160, 0, 0] and f.data["block"] == [15, 0, 0]
    assert (f.warps, f.lanes) == ([5], [0])
    assert (f.data["function"], f.data["pc"], f.data["size"]) == ("vadd_oob", "0x110", 4)
    assert any("CUDA_ERROR_LAUNCH_FAILED" in n for n in rep.notes)


def test_memcheck_second_run_whole_log(fixtures):
    """The second run's whole memcheck log (gzip, 106 KB as printed): exactly the 64 planted
    writes, i = 4000..4063 (threads 160-223 of block 15), all at profile_gpu.py:251."""
    text = gzip.decompress((fixtures / "h200/memcheck_oob_run2.log.gz").read_bytes()).decode()
    rep = parse(text, "memcheck", block_dim=[256, 1, 1])
    assert rep.verdict == "error" and rep.error_summary == 67 and len(rep.findings) == 64
    assert {f.kind for f in rep.findings} == {"memory.out-of-bounds"}
    assert {(f.where.file, f.where.line, f.where.label) for f in rep.findings} == \
        {("profile_gpu.py", 251, "write")}
    threads = sorted(f.data["thread"][0] for f in rep.findings)
    assert threads == list(range(160, 224))
    assert {tuple(f.data["block"]) for f in rep.findings} == {(15, 0, 0)}
    assert sorted({w for f in rep.findings for w in f.warps}) == [5, 6]
    assert {(f.data["pc"], f.data["size"], f.data["space"]) for f in rep.findings} == \
        {("0x110", 4, "global")}
    assert sum("CUDA_ERROR_LAUNCH_FAILED" in n for n in rep.notes) == 3


def test_ncu_tool_asks_for_samples_under_basic(monkeypatch, tmp_path, h200):
    """The tool adds SourceCounters/WarpStateStats to --set basic (not to full) and summarizes
    the recorded exports end to end through a stand-in ncu."""
    kjob = pytest.importorskip("kcoral.job")
    det, src = tmp_path / "d.csv", tmp_path / "s.csv"
    det.write_text(h200("ncu_gemm_details.csv"))
    src.write_text(h200("ncu_gemm_source.csv"))
    work, log = fake_ncu(monkeypatch, tmp_path, det, src)
    job = kjob.Job.from_json({
        "name": "gemm", "target": "sm_90a", "module": {"format": "cubin", "blob": "0" * 64},
        "buffers": [{"name": "c", "dtype": "f32", "shape": [16], "output": True}],
        "launches": [{"entry": "gemm_wgmma", "grid": [8, 8, 1], "block": [384, 1, 1],
                      "args": [{"buffer": "c"}]}],
        "runs": [{"seed": 1, "when": "before"}],
        "tools": [{"name": "ncu", "options": {"set": "basic"}}]})
    from kcoral.boards import BoardSpec
    res = tools.NcuTool().run(job, work, BoardSpec("cuda0", "cuda", "sm_90a"))
    first = log.read_text().splitlines()[0].split()
    assert first[first.index("--set") + 1] == "basic"
    assert [first[i + 1] for i, a in enumerate(first) if a == "--section"] == \
        ["SourceCounters", "WarpStateStats"]
    assert res.summary["hotspot_coverage"]["samples"] == 268
    full = tools.ncu_profile_command("ncu", tmp_path / "r", "k", [], "full")
    assert "--section" not in full


# -- second run: vadd n4194304 and gemm_wgmma m4096n4096k4096_bn256, --set basic ----------------

def test_vadd_details_basic_set(h200):
    """vadd, 4,194,304 f32 elements (grid 4096 x 256 threads), --set basic + the raw metrics."""
    [s] = parse_details(h200("ncu_vadd_details.csv"))
    assert (s.kernel, s.grid, s.block) == ("vadd", "(4096, 1, 1)", "(256, 1, 1)")
    assert s.duration_ns == 12736 and s.elapsed_cycles == 25157
    assert s.memory_throughput_pct == pytest.approx(60.63)
    assert s.dram_throughput_pct == pytest.approx(60.63)
    assert s.sm_throughput_pct == pytest.approx(8.08)
    # a and b read: 2 x 16 MiB = 33,554,432 bytes; the DRAM counters saw 33,560,320
    assert s.dram_read_bytes == 33560320 and s.dram_write_bytes == 3525376
    assert s.l1_hit_pct == 0 and s.l2_hit_pct == pytest.approx(34.98)
    assert s.registers_per_thread == 18 and s.dynamic_smem_bytes == 0
    assert s.theoretical_occupancy_pct == 100 and s.achieved_occupancy_pct == pytest.approx(76.3)
    assert s.sm_frequency_ghz == pytest.approx(1.96987, abs=1e-4)
    assert s.waves_per_sm == pytest.approx(3.88)
    assert s.stalls[0] == ("long_scoreboard", pytest.approx(118.81)) and len(s.stalls) == 18
    assert s.missing == []


def test_vadd_source_sampled_under_basic(h200):
    """With SourceCounters added to --set basic the vadd page is sampled: 1407 samples, 92.5% on
    the FADD at vadd.py:27 waiting on the loads (long_sb)."""
    rows = parse_source(h200("ncu_vadd_source.csv"), kernel="vadd")
    assert source_sampled(rows) and len(rows) == 64 and rows[0]["address"] == 0
    assert sum(r["samples"] for r in rows) == 1407
    table = line_table(h200("vadd_sm90a.sass"))
    spots, cov = map_hotspots(rows, table)
    assert cov == {"samples": 1407, "mapped": 1407, "unmapped_addresses": 0}
    top = spots[0]
    assert (top.file, top.line) == ("/work/main/zoo/kernels/vadd.py", 27)
    assert (top.samples, top.sass) == (1302, "FADD R8, R8, R12")
    assert top.share == pytest.approx(0.925, abs=5e-4)
    assert next(iter(top.stalls)) == "long_sb" and top.stalls["long_sb"] == 1281


def test_gemm_m4096_details_basic_set(h200):
    """gemm_wgmma m4096n4096k4096_bn256 (grid 16 x 32, block 384), --set basic."""
    [s] = parse_details(h200("ncu_gemm_m4096_details.csv"))
    assert (s.kernel, s.grid, s.block) == ("gemm_wgmma", "(16, 32, 1)", "(384, 1, 1)")
    assert s.duration_ns == 195744 and s.elapsed_cycles == 313747
    assert s.sm_throughput_pct == pytest.approx(82.12)
    assert s.memory_throughput_pct == pytest.approx(68.88)
    assert s.dram_read_bytes == 170945024 and s.dram_write_bytes == 54394880
    assert s.registers_per_thread == 168 and s.dynamic_smem_bytes == 196672
    assert s.theoretical_occupancy_pct == pytest.approx(18.75)
    assert s.sm_frequency_ghz == pytest.approx(1.58128, abs=1e-4)
    assert [r for r, _ in s.stalls[:3]] == ["barrier", "long_scoreboard", "mio_throttle"]
    assert s.stalls[0][1] == pytest.approx(6.2) and s.missing == []


def test_gemm_m4096_hot_spots(h200):
    """18,814 samples, all mapped; the top line is the consumers' wgmma.wait_group
    (WARPGROUP.DEPBAR at gemm_wgmma.py:102, barrier stalls), then the two HGMMA lines."""
    rows = parse_source(h200("ncu_gemm_m4096_source.csv"), kernel="gemm_wgmma")
    assert len(rows) == 272 and sum(r["samples"] for r in rows) == 18814
    spots, cov = map_hotspots(rows, line_table(h200("gemm_m4096_sm90a.sass")))
    assert cov == {"samples": 18814, "mapped": 18814, "unmapped_addresses": 0}
    assert [(h.line, h.samples) for h in spots[:3]] == [(102, 7303), (99, 2920), (92, 1954)]
    top = spots[0]
    assert top.sass == "WARPGROUP.DEPBAR.LE gsb0, 0x1" and top.stalls["barrier"] == 7273
    assert top.share == pytest.approx(0.388, abs=5e-4)
    assert spots[1].sass.startswith("HGMMA.64x256x16.F32.BF16")


@pytest.mark.parametrize("name,entry", [("vadd", "vadd"), ("gemm_m4096", "gemm_wgmma")])
def test_summary_tables_as_the_board_printed_them(h200, name, entry):
    """The tables in docs/PROFILING.md: the client's summary of the trimmed exports is the
    board's (profile_gpu.json: sections.ncu_<name>.text) byte for byte."""
    s = summarize_exports(h200(f"ncu_{name}_details.csv"), h200(f"ncu_{name}_source.csv"),
                          entry=entry, sass=h200(f"{name}_sm90a.sass"))
    assert format_ncu(s) + "\n" == h200(f"ncu_{name}_summary.txt")
    json.dumps(s)
