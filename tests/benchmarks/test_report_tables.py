"""benchmarks/report_tables.py: what the table scripts share (reading item reports, one report's
timing or why it has none, the not-timed list, the exit codes of the command line)."""

from __future__ import annotations

import json

import pytest

import report_tables as R  # benchmarks/ is on sys.path (tests/benchmarks/conftest.py)


def _rec(nodeid, phases):
    return {"event": "item_report", "nodeid": nodeid, "kernel": "k", "case": "c",
            "outcome": "passed", "phases": phases}


def test_item_reports_keep_the_last_line_of_an_item_and_filter(tmp_path):
    p = tmp_path / "r.jsonl"
    lines = [{"event": "session_start"}, _rec("a", []), _rec("b", []),
             dict(_rec("a", []), outcome="failed")]
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    recs = R.item_reports([p], lambda r: r["nodeid"] == "a")
    assert [(r["nodeid"], r["outcome"]) for r in recs] == [("a", "failed")]


def test_bench_timing_or_why_not():
    timed = {"candidate": {"median_ms": 1.0}}
    assert R.bench_timing(_rec("a", [{"phase": "bench", "data": {"result": {"timing": timed}}}])) \
        == (timed, "")
    assert R.bench_timing(_rec("a", [{"phase": "compile"}])) == ({}, "not benchmarked")
    err = {"phase": "bench", "longrepr": "", "data": {"result": {"error": {"message": "hang"}}}}
    assert R.bench_timing(_rec("a", [err])) == ({}, "hang")
    assert R.not_timed([{"median_us": 1.0}]) == []


def test_cli_exit_codes(tmp_path, capsys):
    p = tmp_path / "r.jsonl"
    p.write_text("{oops\n")
    assert R.cli([str(p)], "doc", "prog", lambda ps: R.item_reports(ps, bool), str, "xs") == 2
    assert "r.jsonl:1: not a JSON line" in capsys.readouterr().err
    p.write_text("")
    assert R.cli([str(p)], "doc", "prog", lambda ps: [], str, "xs") == 1
    assert "prog: no xs in" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        R.cli([], "doc", "prog", lambda ps: [], str, "xs")
