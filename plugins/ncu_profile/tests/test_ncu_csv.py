"""Parsing Nsight Compute CSV exports (hand-made fixtures in the documented format)."""

import pytest

from tirxh_ncu_profile.ncu_csv import NcuParseError, parse_details, parse_source, to_base


def test_vadd_basic_set_in_base_units(read):
    [s] = parse_details(read("ncu_vadd_basic_details.csv"))
    assert s.kernel == "vadd" and s.launch_id == 0 and s.grid == "(65536, 1, 1)"
    assert s.duration_ns == pytest.approx(56576)
    assert s.memory_throughput_pct == pytest.approx(88.41)
    assert s.sm_throughput_pct == pytest.approx(11.27)
    assert s.dram_bytes == pytest.approx(134_250_112 + 67_108_736)
    assert s.l1_hit_pct == 0.0 and s.l2_hit_pct == pytest.approx(33.36)
    assert s.achieved_occupancy_pct == pytest.approx(84.37)
    assert s.registers_per_thread == 16 and s.static_smem_bytes == 0
    assert s.sm_frequency_ghz == pytest.approx(1.755, abs=1e-3)
    assert s.stalls[0] == ("long_scoreboard", pytest.approx(38.52))
    assert [r for r, _ in s.stalls[:3]] == ["long_scoreboard", "lg_throttle", "wait"]
    assert s.missing == []


def test_gemm_full_set_scaled_units_and_rule_columns(read):
    [s] = parse_details(read("ncu_gemm_full_details.csv"))
    assert s.kernel == "gemm_wgmma"
    assert s.duration_ns == pytest.approx(800_000)
    assert s.dynamic_smem_bytes == pytest.approx(213_250)
    assert s.dram_bytes == pytest.approx(335.65e6)
    # the human-named section metric wins over the raw one when both exist
    assert s.l2_hit_pct == pytest.approx(93.64) and s.l1_hit_pct == pytest.approx(2.17)
    assert s.sm_frequency_ghz == pytest.approx(1.76)
    assert s.stalls[0][0] == "sleeping"
    assert "registers_per_thread" not in s.missing


def test_missing_metrics_are_listed_not_invented(read):
    text = read("ncu_vadd_basic_details.csv")
    kept = [ln for ln in text.splitlines() if "Achieved Occupancy" not in ln
            and "sm__warps_active" not in ln and "dram__bytes" not in ln]
    [s] = parse_details("\n".join(kept))
    assert s.achieved_occupancy_pct is None and s.dram_bytes is None
    assert {"achieved_occupancy_pct", "dram_bytes"} <= set(s.missing)


def test_two_launches(read):
    text = read("ncu_vadd_basic_details.csv")
    lines = text.splitlines()
    rows = [ln for ln in lines if ln.startswith('"0"')]
    again = [ln.replace('"0"', '"1"', 1) for ln in rows]
    got = parse_details("\n".join(lines + again))
    assert [s.launch_id for s in got] == [0, 1]


def test_metrics_only_export_has_no_section_column():
    text = ('"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n'
            '"0","k","gpu__time_duration.sum","nsecond","500,000"\n'
            '"0","k","lts__t_sector_hit_rate.pct","%","73.0"\n')
    [s] = parse_details(text)
    assert s.duration_ns == 500_000 and s.l2_hit_pct == 73.0


@pytest.mark.parametrize("text,want", [("1,234", 1234.0), ("1,234,567.5", 1234567.5),
                                       ("9,00", 9.0), ("12.5", 12.5), ("n/a", None),
                                       ("", None), ("-3", -3.0)])
def test_numbers(text, want):
    from tirxh_ncu_profile.ncu_csv import to_number
    assert to_number(text) == want


@pytest.mark.parametrize("text,match", [
    ("==PROF== nothing profiled\n", "no CSV table found"),
    ('"ID","Kernel Name"\n"0","k"\n', r"missing column\(s\) \['Metric Name'"),
    ('"ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"\n',
     "table is empty"),
])
def test_bad_details(text, match):
    with pytest.raises(NcuParseError, match=match):
        parse_details(text, source="x.csv")


def test_source_rows(read):
    rows = parse_source(read("ncu_vadd_source_sass.csv"))
    assert len(rows) == 25 and rows[0]["address"] == 0  # loaded addresses -> offsets
    fadd = next(r for r in rows if r["sass"].startswith("FADD"))
    assert fadd == {"address": 0x150, "sass": "FADD R9, R2, R5", "samples": 1187,
                    "not_issued": 1164, "executed": 65536.0,
                    "stalls": {"long_sb": 1172, "lg_throttle": 12, "selected": 3}}


def test_source_blocks_per_kernel(read):
    text = read("ncu_vadd_source_sass.csv")
    other = text.replace('"Kernel Name","vadd"', '"Kernel Name","flush_l2"').replace(
        '"1187"', '"5"')
    both = other + text  # the kernel asked for is the second block
    assert next(r for r in parse_source(both, kernel="vadd")
                if r["sass"].startswith("FADD"))["samples"] == 1187
    assert next(r for r in parse_source(both)
                if r["sass"].startswith("FADD"))["samples"] == 5  # first block by default


def test_source_older_column_names(read):
    text = read("ncu_vadd_source_sass.csv").replace('"Address"', '"# Address"').replace(
        "Warp Stall Sampling (All Samples)", "# Samples")
    rows = parse_source(text)
    assert sum(r["samples"] for r in rows) == 1550


def test_source_without_sampling_column_is_not_sampled():
    """A report collected without SourceCounters has SASS rows but no samples: the rows say
    "unknown" (None), not zero, and the reason names the columns found."""
    from tirxh_ncu_profile.ncu_csv import not_sampled_reason, source_sampled
    text = '"Kernel Name","k"\n"Address","Source"\n"0x0000","EXIT"\n'
    rows = parse_source(text, source="s.csv")
    assert rows == [{"address": 0, "sass": "EXIT", "samples": None, "not_issued": 0,
                     "executed": None, "stalls": {}}]
    assert not source_sampled(rows)
    why = not_sampled_reason(text, "k")
    assert why.startswith("not sampled: the source page of k has no sampling column")
    assert "['Address', 'Source']" in why and "SourceCounters" in why
    with pytest.raises(NcuParseError, match="no SASS table"):
        parse_source('"ID","Kernel Name"\n', source="s.csv")


@pytest.mark.parametrize("value,unit,want", [
    (2.0, "usecond", 2000.0), (2.0, "Kbyte/block", 2000.0), (2.0, "KiB", 2048.0),
    (1.5, "cycle/nsecond", 1.5), (1500.0, "cycle/usecond", 1.5), (7.0, "%", 7.0),
    (3.0, "register/thread", 3.0), (None, "byte", None)])
def test_units(value, unit, want):
    assert to_base(value, unit) == want
