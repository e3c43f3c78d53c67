"""benchmarks/kda_summary.py: report-log items to tables, the fastest forward variant per shape
with the issue 18 goal, FLA's times taken from the same job's ratios, the memory and serial-chain
floors; unreadable logs named with the line."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "kda_summary.py"
_spec = importlib.util.spec_from_file_location("kda_summary_test", _PATH)
S = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(S)


def _item(kernel, case, median_ms=None, ratios=None, error=None):
    result = {"timing": {"skipped": "the sim board never times"}}
    if median_ms is not None:
        result = {"timing": {"candidate": {"median_ms": median_ms}, "gbps": 4000.0,
                             "converged": True, "sm_clock_mhz": {"before": 1980, "after": 1755},
                             "baselines": {n: {"median_ms": median_ms * r, "speedup": r}
                                           for n, r in (ratios or {}).items()}}}
    if error:
        result = {"error": {"type": "correctness.mismatch", "message": error}}
    return {"event": "item_report", "kernel": kernel, "case": case,
            "nodeid": f"kernels/{kernel}.py::{kernel}[{case}]@sm_90a",
            "outcome": "passed" if median_ms else "failed",
            "phases": [{"phase": "bench", "outcome": "passed", "longrepr": error or "",
                        "data": {"result": result}}]}


def _log(tmp_path, records):
    p = tmp_path / "bench.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return p


def test_fastest_variant_goal_fla_times_and_floors(tmp_path, capsys):
    log = _log(tmp_path, [
        {"event": "session_start"},
        _item("kda_fwd", "t8192_h96_v64s1", 1.0, {"fla.chunk_kda": 2.74,
                                                  "fla.chunk_kda.fwd_bwd": 15.0}),
        _item("kda_fwd", "t8192_h96_v128s2", 1.2, {"fla.chunk_kda": 2.3}),
        _item("kda_fwd", "pack6_h64_v64s2", 1.0, {"fla.chunk_kda": 1.5}),
        _item("kda_decode", "n256_h64_t1", 0.3, {"fla.fused_recurrent_kda": 1.8}),
        _item("kda_decode_bulk", "n256_h64_t1", 0.28, {"fla.fused_recurrent_kda": 1.9}),
        _item("kda_fwd", "t8192_h64_v64s2", error="'o' differs from the uploaded reference"),
        _item("kda_bwd", "t8192_h96", 50.0, {"fla.chunk_kda.bwd": 0.25,
                                             "fla.chunk_kda.fwd_bwd": 0.3}),
    ])
    assert S.main([str(log), "--json", str(tmp_path / "s.json")]) == 0
    out = capsys.readouterr().out
    assert "| t8192_h96 | t8192_h96_v64s1 | 1.0000 | 2.740 | 2.74x | yes | 15.000 |" in out
    assert "| pack6_h64 | pack6_h64_v64s2 | 1.0000 | 1.500 | 1.50x | NO |" in out
    assert "kda_decode[n256_h64_t1] | 0.3000 | 4000 | - | - | - | 1.80x" in out
    assert "kda_decode_bulk[n256_h64_t1] | 0.2800 | 4000 | - | - | - | 1.90x" in out
    assert "| t8192_h96 | 50.000 | 12.500 | 0.25x | 15.000 | 0.30x |" in out
    assert "kda_fwd[t8192_h64_v64s2]: failed: 'o' differs" in out
    rows = json.loads((tmp_path / "s.json").read_text())["shapes"]
    t96 = next(r for r in rows if r["shape"] == "t8192_h96")
    # 96 chains of 128 steps; 8192 x 96 tokens x 1282 bytes + h0/ht, at 4.25 TB/s
    assert (t96["chains"], t96["steps"]) == (96, 128)
    assert t96["memory_ms"] == pytest.approx((8192 * 96 * 1282 + 2 * 96 * 65536) / 4.25e9)
    assert t96["chain_ms"] == pytest.approx(128 * S.STEP_S * 1e3)


def test_chain_floor_takes_the_longest_sequence_or_the_shared_sms():
    pack = S.floors(dict(B=1, T_=8192, H=96, lens=(1300, 547, 2048, 963, 271, 3063)))
    assert pack["steps"] == 48                            # 3063 tokens
    total = sum(-(-n // 64) for n in (1300, 547, 2048, 963, 271, 3063)) * 96
    assert pack["chain_ms"] == pytest.approx(max(48, -(-total // 132)) * S.STEP_S * 1e3)


def test_unreadable_log_is_named_with_its_line(tmp_path, capsys):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"event": "session_start"}\nnot json\n')
    assert S.main([str(p)]) == 2
    assert f"{p}:2: not a JSON line" in capsys.readouterr().err
    p.write_text('{"event": "session_start"}\n')
    assert S.main([str(p)]) == 1
    assert "kda_summary: no KDA items in" in capsys.readouterr().err


def _smoke_item(case, verified=True, seeds_ok=(True, True), error=None):
    result = {"verified": verified, "timing": None,
              "correctness": [{"seed": i + 1, "ok": ok} for i, ok in enumerate(seeds_ok)]}
    if error:
        result = {"error": {"type": "exec.timeout", "message": error}}
    return {"event": "item_report", "kernel": "kda_fwd", "case": case, "outcome": "incomplete",
            "nodeid": f"kernels/kda_fwd.py::kda_fwd[{case}]@sm_90a",
            "phases": [{"phase": "bench", "outcome": "incomplete",
                        "longrepr": "not timed (h200: timing disabled)",
                        "data": {"result": result}}]}


def test_smoke_verdict_passes_only_when_every_item_is_verified(tmp_path, capsys):
    log = _log(tmp_path, [_smoke_item("a"), _smoke_item("b")])
    assert S.main(["--smoke", str(log)]) == 0
    assert capsys.readouterr().out.splitlines() == ["ok      kda_fwd[a]", "ok      kda_fwd[b]"]
    log = _log(tmp_path, [_smoke_item("a"), _smoke_item("b", seeds_ok=(True, False)),
                          _smoke_item("c", error="execution budget of 15 s spent")])
    assert S.main(["--smoke", str(log)]) == 1
    out = capsys.readouterr().out
    assert "FAILED  kda_fwd[b]: not timed (h200: timing disabled)" in out
    assert "FAILED  kda_fwd[c]: execution budget of 15 s spent" in out


def test_smoke_verdict_fails_without_items_and_names_a_bad_line(tmp_path, capsys):
    log = _log(tmp_path, [{"event": "session_start"}])
    assert S.main(["--smoke", str(log)]) == 1
    assert "FAILED  no KDA item in" in capsys.readouterr().out
    log.write_text("oops\n")
    assert S.main(["--smoke", str(log)]) == 2
    assert f"{log}:1: not a JSON line" in capsys.readouterr().err


def test_slim_forward_competes_for_its_shape(tmp_path, capsys):
    """kda_fwd_slim's items (session 7) are read, and its variant is the shape's fastest when it
    is: beside kda_fwd's control in the same job, with the floors of its case's parameters."""
    log = _log(tmp_path, [
        _item("kda_fwd", "t8192_h64_v64ws8b", 0.857, {"fla.chunk_kda": 2.06}),
        _item("kda_fwd_slim", "t8192_h64_v64ws8m", 0.6, {"fla.chunk_kda": 2.95}),
    ])
    assert S.main([str(log), "--json", str(tmp_path / "s.json")]) == 0
    out = capsys.readouterr().out
    assert "| t8192_h64 | t8192_h64_v64ws8m | 0.6000 | 1.770 | 2.95x | yes |" in out
    assert "kda_fwd_slim[t8192_h64_v64ws8m] | 0.6000 |" in out
    row = json.loads((tmp_path / "s.json").read_text())["shapes"][0]
    assert (row["chains"], row["steps"]) == (64, 128)


def test_ahead_forward_is_read_and_competes(tmp_path, capsys):
    """kda_fwd_ahead's items (session 8's H64 variants) are KDA forwards too: session 9's wsd
    call timed them, and the summary dropped them (only the control was listed)."""
    log = _log(tmp_path, [
        _item("kda_fwd_slim", "t8192_h64_v64ws8l", 0.7467, {"fla.chunk_kda": 2.36}),
        _item("kda_fwd_ahead", "t8192_h64_v64ws8q", 0.7415, {"fla.chunk_kda": 2.38}),
    ])
    assert S.main([str(log)]) == 0
    out = capsys.readouterr().out
    assert "kda_fwd_ahead[t8192_h64_v64ws8q] | 0.7415 |" in out
    assert "| t8192_h64 | t8192_h64_v64ws8q | 0.7415 |" in out


def test_any_new_forward_is_read_without_a_list(tmp_path, capsys):
    """kda_fwd_pair (session 10) was timed on the H200 in session 11 and the summary dropped it,
    as it had dropped kda_fwd_ahead: every kda_fwd* kernel is a forward now, kda_fwd_s0 (the
    backward's state pass) is read but never a shape's forward."""
    log = _log(tmp_path, [
        _item("kda_fwd_slim", "t8192_h64_v64ws8l", 0.7420, {"fla.chunk_kda": 2.37}),
        _item("kda_fwd_pair", "t8192_h64_v64ws8c", 0.6846, {"fla.chunk_kda": 2.57}),
        _item("kda_fwd_s0", "t8192_h64_v64ws8l", 0.5, {"fla.chunk_kda": 3.5}),
    ])
    assert S.main([str(log)]) == 0
    out = capsys.readouterr().out
    assert "kda_fwd_pair[t8192_h64_v64ws8c] | 0.6846 |" in out
    assert "kda_fwd_s0[t8192_h64_v64ws8l] | 0.5000 |" in out
    assert "| t8192_h64 | t8192_h64_v64ws8c | 0.6846 |" in out
    assert S.is_forward("kda_fwd_pair") and not S.is_forward("kda_fwd_s0")
    assert not S.is_kda(None) and not S.is_forward("kda_decode")


def _plan_line(case, median_ms=None, ratio=None, verified=False, not_timed=None,
               item="kda_fwd_bwd"):
    """One line of benchmarks/kda_fwd_bwd_bench.py (`BenchResult.to_json`): no "event"."""
    result = {"verified": verified}
    if median_ms is not None:
        result["timing"] = {"candidate": {"median_ms": median_ms}, "gbps": 300.0,
                            "sm_clock_mhz": {"before": 1980, "after": 1980},
                            "baselines": {"fla.chunk_kda.fwd_bwd": {"speedup": ratio}}}
    return {"item": f"{item}[{case}]", "state": "done",
            "verdict": "incomplete" if not verified else "clean", "result": result,
            "timed": median_ms is not None, "not_timed": not_timed}


def test_the_forward_backward_plans_lines_are_read_with_the_goal(tmp_path, capsys):
    """Session 19's fb call timed both shapes and its summary.md was empty: the plan's lines
    carry no item_report event. They are read now, with FLA's time, the 3x goal and the floor."""
    log = _log(tmp_path, [
        _plan_line("t20_h1_deep", verified=True, not_timed="cuda0: timing disabled"),
        _plan_line("t8192_h96", 70.0, 0.1),
        _plan_line("t8192_h96", 61.679, 0.196),     # a later line wins
        _plan_line("t8192_h64", 2.5, 3.2, verified=True),
    ])
    assert S.main([str(log)]) == 0
    out = capsys.readouterr().out
    assert "| kda_fwd_bwd[t8192_h96] | 61.6790 | 300 |" in out
    assert "| t8192_h96 | 61.679 | 12.089 | 0.20x | NO | no | 0.083 (96 x 128) |" in out
    assert "| t8192_h64 | 2.500 | 8.000 | 3.20x | yes | yes | 0.083 (64 x 128) |" in out
    assert "kda_fwd_bwd[t20_h1_deep]: clean: cuda0: timing disabled" in out
    # the plan is not a forward: no forward row for its shapes
    assert "| t8192_h96 | t8192_h96 |" not in out


def test_every_plans_lines_are_read_each_row_naming_its_plan(tmp_path, capsys):
    """Session 21's fb call (plan tc2: items kda_fwd_bwd_tc2[...]) timed H96 and its
    summary.md was empty: only the f32 plan's item name was read. Every plan's are now, the
    row naming a plan other than f32; the plans are not forwards."""
    log = _log(tmp_path, [
        _plan_line("t20_h1_deep", verified=True, not_timed="cuda0: timing disabled",
                   item="kda_fwd_bwd_tc2"),
        _plan_line("t8192_h96", 34.748, 0.348, item="kda_fwd_bwd_tc2"),
        _plan_line("t8192_h96", 61.679, 0.196),
    ])
    assert S.main([str(log)]) == 0
    out = capsys.readouterr().out
    assert "| t8192_h96 (tc2) | 34.748 | 12.092 | 0.35x | NO | no | 0.083 (96 x 128) |" in out
    assert "| t8192_h96 | 61.679 | 12.089 | 0.20x | NO | no |" in out
    assert "kda_fwd_bwd_tc2[t20_h1_deep]: clean: cuda0: timing disabled" in out
    assert S.is_plan("kda_fwd_bwd_tc2") and not S.is_forward("kda_fwd_bwd_tc2")
    assert not S.is_plan("kda_fwd_pair") and not S.is_plan(None)


def test_a_plans_launch_split_is_a_table_under_its_row(tmp_path, capsys):
    """KCoral's ``launch_split`` (each launch's median from extra samples with an event between
    launches) becomes a table per timed plan; a board that could not split says so."""
    line = _plan_line("t8192_h96", 32.8, 0.369, item="kda_fwd_bwd_tc3")
    line["result"]["timing"]["launch_split"] = {
        "samples": 10, "sum_ms": 32.9, "candidate_median_ms": 32.8,
        "launches": [{"entry": "kda_fb_fwd", "median_ms": 1.1, "iqr_ms": 0.01, "share": 0.0334},
                     {"entry": "kda_fb_prep", "median_ms": 7.9, "iqr_ms": 0.02,
                      "share": 0.2401}]}
    other = _plan_line("t8192_h96", 34.7, 0.348, item="kda_fwd_bwd_tc2")
    other["result"]["timing"]["launch_split"] = {"skipped": "board kind 'x' cannot"}
    assert S.main([str(_log(tmp_path, [line, other]))]) == 0
    out = capsys.readouterr().out
    assert ("Launches of t8192_h96 (tc3): 10 split samples, sum 32.900 ms against the "
            "rounds' median 32.800 ms") in out
    assert "| kda_fb_prep | 7.900 | 0.020 | 24.0% |" in out
    assert "Launches of t8192_h96 (tc2): not split (board kind 'x' cannot)" in out


def test_decode_is_read_against_both_copy_bandwidths(tmp_path, capsys):
    """The decode goal (>= 90% of copy bandwidth) against the large-copy 4.25 TB/s and against
    `torch.copy_like` in the same job: the state's 2 N H K V x 4 bytes over the copy's time."""
    state_bytes = 2 * 64 * 64 * 128 * 128 * 4
    r = state_bytes / (4200e9 * 0.1476e-3)            # a copy at 4200 GB/s in this job
    log = _log(tmp_path, [
        _item("kda_decode_cols", "n64_h64_t4_pw", 0.1476,
              {"fla.fused_recurrent_kda": 2.7, "torch.copy_like": r}),
        _item("kda_decode", "n256_h64_t1", 0.3, {"fla.fused_recurrent_kda": 1.8}),
    ])
    assert S.main([str(log)]) == 0
    out = capsys.readouterr().out
    assert "## Decode against copy bandwidth (goal >= 90%)" in out
    assert "| kda_decode_cols[n64_h64_t4_pw] | 147.6 | 4000 | 94.1% | 4200 | 95.2% | yes/yes |" in out
    assert "| kda_decode[n256_h64_t1] | 300.0 | 4000 | 94.1% | - | - | yes/- |" in out
    assert "| 2.70x | 0.87x |" in out                  # the copy's ratio in the items' table
