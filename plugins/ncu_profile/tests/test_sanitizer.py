"""compute-sanitizer output -> Findings (hand-made fixtures in the documented formats), with
sync_check's finding kinds."""

import json

import pytest

from tirxh.api import Finding
from tirxh_ncu_profile.sanitizer import SanitizerParseError, parse


def test_memcheck_out_of_bounds(read):
    rep = parse(read("memcheck_oob.txt"), "memcheck", block_dim=[256, 1, 1])
    assert rep.error_summary == 3 and rep.verdict == "error"
    assert len(rep.findings) == 2
    f = rep.findings[0]
    assert f.kind == "memory.out-of-bounds"
    assert f.where.file.endswith("zoo/kernels/vadd_oob.py") and f.where.line == 21
    assert f.addresses == ["0x7f3a5e003c00"]  # from "Access at 0x.. is out of bounds"
    assert rep.findings[1].addresses == ["0x7f3a5e003c04"]  # from "Address 0x.. is out of bounds"
    assert f.warps == [2] and f.lanes == [0]   # thread 64 of a 256-thread block
    assert f.data["function"] == "vadd_oob" and f.data["pc"] == "0x1d0"
    assert f.data["block"] == [15, 0, 0] and f.data["size"] == 4
    assert (f.data["space"], f.data["access"]) == ("global", "write")
    # the API error after the fault is kept as a note, not silently dropped
    assert any("CUDA_ERROR_LAUNCH_FAILED" in n for n in rep.notes)
    # same shape as every analyzer's findings: JSON round trip
    again = Finding.from_json(json.loads(json.dumps(f.to_json())))
    assert again.where == f.where and again.kind == f.kind


def test_memcheck_2022_location_style(read):
    rep = parse(read("memcheck_oob_2022.txt"), "memcheck")
    [f] = rep.findings
    assert (f.where.line, f.data["function"], f.data["pc"]) == (21, "vadd_oob", "0x1d0")
    assert f.warps == []  # no block shape given: no warp/lane guess


def test_clean_run(read):
    rep = parse(read("memcheck_clean.txt"), "memcheck")
    assert rep.findings == [] and rep.error_summary == 0 and rep.verdict == "clean"
    assert rep.to_result().verdict == "clean"


def test_unfinished_run_is_incomplete(read):
    rep = parse(read("memcheck_crashed.txt"), "memcheck")
    assert rep.findings[0].kind == "memory.misaligned"
    assert rep.error_summary is None
    res = rep.to_result()
    assert res.verdict == "incomplete" and "did not finish" in res.summary


def test_racecheck_race_report(read):
    rep = parse(read("racecheck_race.txt"), "racecheck")
    [f] = rep.findings
    assert f.kind == "race.read-write" and f.severity == "error"
    assert f.where.line == 31 and f.where.label == "write"
    assert [(r.line, r.label) for r in f.related] == [(35, "read")]
    assert f.data["hazards"] == 992
    assert rep.error_summary == 1 and rep.verdict == "error"


def test_racecheck_hazard_report(read):
    rep = parse(read("racecheck_hazard.txt"), "racecheck")
    waw, raw = rep.findings
    assert waw.kind == "race.write-write" and waw.severity == "error"
    assert waw.where.line == 27 and waw.addresses == ["0x0"]
    assert waw.data["threads"] == [[31, 0, 0], [0, 0, 0]]
    assert raw.kind == "race.read-write" and raw.severity == "review"
    assert raw.data["hazard"] == "RAW"
    assert (raw.where.line, raw.related[0].line) == (31, 35)


def test_racecheck_hazard_report_one_space_indent(read):
    """The hazard lines of some versions are indented by one space (the manual's sample)."""
    rep = parse(read("racecheck_hazard_flat.txt"), "racecheck")
    waw, war = rep.findings
    assert (waw.kind, waw.severity, waw.where.line) == ("race.write-write", "error", 20)
    assert waw.data["threads"] == [[0, 0, 0], [1, 0, 0]]
    assert waw.data["hazard"] == "WAW"
    assert (war.kind, war.severity, war.data["hazard"]) == ("race.read-write", "review", "WAR")
    assert (war.where.line, war.where.label, war.related[0].line) == (24, "read", 26)
    assert rep.error_summary == 1 and rep.verdict == "error"


def test_synccheck(read):
    rep = parse(read("synccheck_divergent.txt"), "synccheck", block_dim=(64, 1, 1))
    [f] = rep.findings
    assert f.kind == "barrier.divergent" and f.where.line == 14
    assert f.warps == [0] and f.lanes == [16]


def test_initcheck(read):
    rep = parse(read("initcheck_uninit.txt"), "initcheck", block_dim=(32, 4, 1))
    [f] = rep.findings
    assert f.kind == "memory.uninitialized"
    assert (f.data["space"], f.data["access"]) == ("global", "read")
    assert f.where.line == 9 and f.addresses == ["0x7f5c8a000800"]
    assert f.warps == [1] and f.lanes == [0]  # thread (0,1,0) of a 32x4 block


def test_not_sanitizer_output():
    with pytest.raises(SanitizerParseError, match="log.txt: no line starts with '========='"):
        parse("Segmentation fault\n", "memcheck", source="log.txt")


def test_unknown_tool():
    with pytest.raises(ValueError, match="unknown compute-sanitizer tool 'leakcheck'"):
        parse("=========", "leakcheck")


def test_kinds_are_sync_checks(read):
    """Every kind the parser produces for these fixtures is one sync_check also reports (or a
    memory kind sync_check has no analysis for)."""
    try:
        from tirxh_sync_check.report import KINDS
    except ImportError:
        pytest.skip("tirxh_sync_check is not importable here")
    ours = {f.kind for name, tool in (("memcheck_oob.txt", "memcheck"),
                                      ("racecheck_race.txt", "racecheck"),
                                      ("racecheck_hazard.txt", "racecheck"),
                                      ("synccheck_divergent.txt", "synccheck"))
            for f in parse(read(name), tool).findings}
    assert ours <= set(KINDS), ours - set(KINDS)
