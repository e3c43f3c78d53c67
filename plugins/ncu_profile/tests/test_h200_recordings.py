"""The parsers on real recordings: ``benchmarks/profile_gpu.py --quick`` on an H200, 2026-11-30
(fixtures/h200/, see fixtures/README.md). Values below are read off those files."""

import json
import stat
import sys
import textwrap

import pytest

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


def test_unsampled_source_page_degrades(read, h200):
    """The H200 run's vadd (--set basic, no SourceCounters) exported a source page with the
    columns Address, Source, launch__registers_per_thread only: the summary keeps every other
    field and says the hot spots were not sampled (the export is reconstructed, see README)."""
    s = summarize_exports(read("ncu_vadd_basic_details.csv"),
                          read("ncu_vadd_source_unsampled.csv"), entry="vadd",
                          sass=read("vadd_sm90a.sass"))
    assert s["duration_ns"] == pytest.approx(56576) and s["hotspots"] == []
    assert "hotspots" in s["missing"] and "sass_samples" not in s
    assert "launch__registers_per_thread" in s["hotspots_note"]
    text = format_ncu(s)
    assert "hot spots: not sampled: the source page of vadd has no sampling column" in text


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


def test_ncu_tool_asks_for_samples_under_basic(monkeypatch, tmp_path, h200):
    """The tool adds SourceCounters/WarpStateStats to --set basic (not to full) and summarizes
    the recorded exports end to end through a stand-in ncu."""
    kjob = pytest.importorskip("kcoral.job")
    log = tmp_path / "calls.txt"
    ncu = tmp_path / "ncu"
    det, src = tmp_path / "d.csv", tmp_path / "s.csv"
    det.write_text(h200("ncu_gemm_details.csv"))
    src.write_text(h200("ncu_gemm_source.csv"))
    ncu.write_text(f"#!{sys.executable}\n" + textwrap.dedent(f"""
        import sys, pathlib
        args = sys.argv[1:]
        open({str(log)!r}, "a").write(" ".join(args) + "\\n")
        if "-o" in args:
            pathlib.Path(args[args.index("-o") + 1] + ".ncu-rep").write_bytes(b"NVRP fake")
        elif "details" in args:
            sys.stdout.write(open({str(det)!r}).read())
        elif "source" in args:
            sys.stdout.write(open({str(src)!r}).read())
    """))
    ncu.chmod(ncu.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("KCORAL_NCU", str(ncu))
    job = kjob.Job.from_json({
        "name": "gemm", "target": "sm_90a", "module": {"format": "cubin", "blob": "0" * 64},
        "buffers": [{"name": "c", "dtype": "f32", "shape": [16], "output": True}],
        "launches": [{"entry": "gemm_wgmma", "grid": [8, 8, 1], "block": [384, 1, 1],
                      "args": [{"buffer": "c"}]}],
        "runs": [{"seed": 1, "when": "before"}],
        "tools": [{"name": "ncu", "options": {"set": "basic"}}]})
    res = tools.NcuTool().run(job, tmp_path)
    first = log.read_text().splitlines()[0].split()
    assert first[first.index("--set") + 1] == "basic"
    assert [first[i + 1] for i, a in enumerate(first) if a == "--section"] == \
        ["SourceCounters", "WarpStateStats"]
    assert res.summary["hotspot_coverage"]["samples"] == 268
    full = tools.ncu_profile_command("ncu", tmp_path / "r", "k", [], "full")
    assert "--section" not in full
