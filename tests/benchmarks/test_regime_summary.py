"""benchmarks/regime_summary.py: every timed item of a report log by clock regime (issue 17's
proof that the zoo was measured under /3 in both regimes)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.benchmarks._reports import bench_item

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def S(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))   # it imports report_tables, as a script would
    spec = importlib.util.spec_from_file_location("regime_summary_test",
                                                  BENCH / "regime_summary.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _item(kernel, case, median_ms=None, ratios=None, regimes=None, clock=(1980, 1980),
          throttled=False, error=None):
    if median_ms is None:
        result = {"error": {"type": "timeout.exec", "message": error or "no median"}}
    else:
        timing = {"candidate": {"median_ms": median_ms}, "throttled": throttled,
                  "sm_clock_mhz": {"min": clock[0], "max": clock[1]},
                  "baselines": {n: {"speedup": r} for n, r in (ratios or {}).items()},
                  "regimes": {n: {"rounds": k, "clock_mhz": mhz,
                                  "baselines": {b: {"speedup": x} for b, x in rs.items()}}
                              for n, (k, mhz, rs) in (regimes or {}).items()}}
        result = {"timing": timing}
    return bench_item(kernel, case, result, error=error or "")


def test_both_regimes_of_a_throttled_item_and_one_of_a_steady_one(S, tmp_path, capsys):
    log = tmp_path / "bench.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in [
        _item("attention_fwd", "b4h32s8192_lazy8", 6.66, {"torch.sdpa": 1.055},
              {"full": (6, 1980.0, {"torch.sdpa": 1.050}),
               "sustained": (19, 1695.0, {"torch.sdpa": 1.0552})},
              clock=(1665, 1980), throttled=True),
        _item("rmsnorm", "r16384_c8192", 0.132,
              {"torch.rms_norm": 1.578, "torch.compile.rms_norm": 0.968},
              {"full": (10, 1980.0, {"torch.rms_norm": 1.578, "torch.compile.rms_norm": 0.968})}),
        _item("vadd", "n64M", 0.188, {}, {"full": (10, 1980.0, {})}),
        _item("gemm_wgmma", "m8192", error="execution budget of 60 s spent"),
    ]) + "\n")
    assert S.main([str(log)]) == 0
    out = capsys.readouterr().out
    assert ("| attention_fwd[b4h32s8192_lazy8] | 6660.00 us | 1.055x torch.sdpa | "
            "6 at 1980 MHz: 1.050x torch.sdpa | 19 at 1695 MHz: 1.055x torch.sdpa | "
            "1665-1980 (throttled) |") in out
    assert ("| rmsnorm[r16384_c8192] | 132.00 us | 1.578x torch.rms_norm, 0.968x "
            "torch.compile.rms_norm | 10 at 1980 MHz: 1.578x torch.rms_norm, 0.968x "
            "torch.compile.rms_norm | - | 1980-1980 |") in out
    assert "| vadd[n64M] | 188.00 us | - | 10 at 1980 MHz | - | 1980-1980 |" in out
    assert "3 items timed; 1 throttled (both regimes shown), 2 held their clock" in out
    assert "- gemm_wgmma[m8192]: failed: execution budget of 60 s spent" in out


def test_no_item_and_a_bad_line(S, tmp_path, capsys):
    log = tmp_path / "bench.jsonl"
    log.write_text(json.dumps({"event": "session_start"}) + "\n")
    assert S.main([str(log)]) == 1
    log.write_text("{oops\n")
    assert S.main([str(log)]) == 2
    assert f"{log}:1: not a JSON line" in capsys.readouterr().err


def test_a_regime_ratio_carries_its_interval_when_the_daemon_gave_one(S, tmp_path, capsys):
    """Session 19's daemons add `speedup_ci95` to each regime's baseline: the table prints it
    beside the ratio, so 0.999x [0.997-1.003] reads as a tie and 0.993x [0.987-0.999] as a
    loss; an older log (no interval) prints the ratio alone."""
    rec = _item("gemm_bf16", "m2048n1024k7168_t128", 0.0418, {"torch.matmul": 0.999},
                {"full": (200, 1980, {"torch.matmul": 0.9992})})
    rec["phases"][-1]["data"]["result"]["timing"]["regimes"]["full"]["baselines"][
        "torch.matmul"]["speedup_ci95"] = [0.9970, 1.0030]
    old = _item("gemm_bf16", "m8192n1024k7168_t256", 0.1524, {"torch.matmul": 0.993},
                {"full": (200, 1980, {"torch.matmul": 0.9932})})
    log = tmp_path / "bench.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in (rec, old)) + "\n")
    assert S.main([str(log)]) == 0
    out = capsys.readouterr().out
    assert "200 at 1980 MHz: 0.999x torch.matmul [0.997-1.003]" in out
    assert "200 at 1980 MHz: 0.993x torch.matmul |" in out


def test_a_plan_jobs_lines_are_items_too(S, tmp_path, capsys):
    """A plan job's client (benchmarks/kda_fwd_bwd_bench.py) writes "item" + KCoral's "result"
    lines, no item_report: session 21's fb call timed H96 and its regime table was empty. They
    are read (a later line wins), timed or not, and the item reports beside them still are."""
    timing = {"candidate": {"median_ms": 34.748}, "throttled": False,
              "sm_clock_mhz": {"min": 1980, "max": 1980},
              "baselines": {"fla.chunk_kda.fwd_bwd": {"speedup": 0.348}},
              "regimes": {"full": {"rounds": 10, "clock_mhz": 1980.0, "baselines": {
                  "fla.chunk_kda.fwd_bwd": {"speedup": 0.348, "speedup_ci95": [0.348, 0.349]}}}}}
    log = tmp_path / "fb.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in [
        {"item": "kda_fwd_bwd_tc2[t8192_h96]", "verdict": "incomplete", "result": {}},
        {"item": "kda_fwd_bwd_tc2[t8192_h96]", "verdict": "incomplete",
         "result": {"timing": timing}},
        {"item": "kda_fwd_bwd_tc2[t8192_h64]", "verdict": "incomplete", "result": {},
         "not_timed": "timeout.exec: the job ran past its execution budget of 155 s"},
        _item("vadd", "n64M", 0.188, {}, {"full": (10, 1980.0, {})}),
    ]) + "\n")
    assert S.main([str(log)]) == 0
    out = capsys.readouterr().out
    assert ("| kda_fwd_bwd_tc2[t8192_h96] | 34748.00 us | 0.348x fla.chunk_kda.fwd_bwd | "
            "10 at 1980 MHz: 0.348x fla.chunk_kda.fwd_bwd [0.348-0.349] | - | 1980-1980 |") in out
    assert "| vadd[n64M] | 188.00 us |" in out
    assert ("- kda_fwd_bwd_tc2[t8192_h64]: incomplete: timeout.exec: the job ran past its "
            "execution budget of 155 s") in out
    assert "2 items timed" in out
