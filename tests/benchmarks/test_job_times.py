"""benchmarks/job_times.py: where each benchmarked item's wall time went."""

import json

import job_times as J


def _rec(case, timeline=None, run_s=None, client=None, elapsed=None, error=None, dur=10.0):
    result = {"timeline": timeline or [], "run_s": run_s, "client_s": client or {},
              "timing": {"elapsed_s": elapsed} if elapsed else {}}
    if error:
        result["error"] = {"type": error, "message": "x"}
    return {"event": "item_report", "kernel": "k", "case": case, "nodeid": f"k.py::k[{case}]",
            "outcome": "failed" if error else "passed",
            "phases": [{"phase": "compile", "duration": 0.1},
                       {"phase": "bench", "duration": dur, "data": {"result": result}}]}


def test_phases_last_until_the_next_event_and_the_run_end():
    tl = [[0.5, "loaded", "module ptx loaded; 9 buffers"], [1.0, "correctness", "before timing"],
          [9.0, "timing", "10 samples, relative noise 1.00%"]]
    assert J.phases(tl, 12.0) == [("loaded: module ptx loaded; 9", 0.5),
                                  ("correctness: before timing", 8.0),
                                  ("timing: 10 samples, relative noise", 3.0)]
    assert J.phases(tl, None)[-1][0] == "correctness: before timing"  # no end: last dropped


def test_table_and_totals_from_a_report_log(tmp_path, capsys):
    log = tmp_path / "b.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in [
        _rec("a", [[0.0, "loaded", ""], [2.0, "correctness", "guards: the first launch"]], 30.0,
             {"build_job": 20.0, "submit": 31.0}, 3.8, dur=51.0),
        _rec("b", error="timeout.exec", dur=117.0),
        {"event": "item_report", "kernel": "k", "case": "c", "nodeid": "k.py::k[c]",
         "outcome": "compiled", "phases": [{"phase": "compile"}]},   # not benchmarked
    ]) + "\n")
    assert J.main([str(log)]) == 0
    out = capsys.readouterr().out
    assert "| k[a] | passed | 51.0 | 20.0 | 31.0 | 30.0 | 3.8 | correctness: guards: the " \
           "first launch 28.0; loaded 2.0 |" in out
    assert "| k[b] | failed (timeout.exec) | 117.0 | - | - | - | - | - |" in out
    assert "total over 2 items: bench phases 168.0 s = build_job 20.0 s + submit 31.0 s " \
           "(worker run 30.0 s)" in out
    assert J.main([str(tmp_path / "missing.jsonl")]) == 2
