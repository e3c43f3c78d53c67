"""Hot spots mapped to Python lines through the cubin's line table (a recorded nvdisasm dump)."""

import pytest

from tirxh_ncu_profile.ncu_csv import parse_source
from tirxh_ncu_profile.report import format_ncu
from tirxh_ncu_profile.source_map import line_table, map_hotspots
from tirxh_ncu_profile.tools import summarize_exports


def test_line_table(read):
    t = line_table(read("vadd_sm90a.sass"))
    assert t[0x0] == ("/tmp/zoo/kernels/vadd.py", 4)
    assert t[0x110][1] == 9 and t[0x120][1] == 8     # the two loads: lines 9 and 8
    assert t[0x150][1] == 10 and t[0x160][1] == 10   # FADD, STG: line 10


def test_hotspots_by_python_line(read):
    rows = parse_source(read("ncu_vadd_source_sass.csv"))
    spots, cov = map_hotspots(rows, line_table(read("vadd_sm90a.sass")))
    assert cov["samples"] == sum(r["samples"] for r in rows) and cov["unmapped_addresses"] == 0
    assert (spots[0].file, spots[0].line) == ("/tmp/zoo/kernels/vadd.py", 10)
    assert spots[0].sass == "FADD R9, R2, R5"
    # line 10 owns 0x0e0 and 0x130..0x170 (its ULDC, address math, FADD, STG and the EXIT)
    assert spots[0].samples == 0 + 2 + 1 + 1187 + 211 + 17
    assert spots[0].share == pytest.approx(spots[0].samples / cov["samples"])
    assert next(iter(spots[0].stalls)) == "long_sb"  # why line 10 is hot: waiting on the loads
    assert {(s.line) for s in spots} >= {8, 9, 10}


def test_without_line_info_hotspots_stay_sass(read):
    rows = parse_source(read("ncu_vadd_source_sass.csv"))
    spots, cov = map_hotspots(rows, {})
    assert cov["mapped"] == 0 and cov["unmapped_addresses"] > 0
    assert spots[0].address == 0x150 and spots[0].file == ""


def test_summary_table(read):
    s = summarize_exports(read("ncu_vadd_basic_details.csv"), read("ncu_vadd_source_sass.csv"),
                          entry="vadd", sass=read("vadd_sm90a.sass"))
    text = format_ncu(s)
    assert "duration" in text and "56.58 us" in text
    assert "DRAM bytes (read + write)" in text and "201.36 MB" in text
    assert "long_scoreboard" in text
    assert "vadd.py:10" in text and "FADD" in text and "[long_sb]" in text
    assert s["hotspot_coverage"]["mapped"] == s["hotspot_coverage"]["samples"]
