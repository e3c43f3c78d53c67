"""benchmarks/gemm_summary.py: report-log items to tables, the fastest variant per shape and
the issue 15 goal verdicts; unreadable logs named with the line."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "gemm_summary.py"
_spec = importlib.util.spec_from_file_location("gemm_summary_test", _PATH)
S = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(S)


def _item(kernel, case, median_ms=None, baselines=None, tflops=None, error=None):
    result = {"timing": {"skipped": "the sim board never times"}}
    if median_ms is not None:
        result = {"timing": {"candidate": {"median_ms": median_ms}, "tflops": tflops,
                             "converged": True, "sm_clock_mhz": {"before": 1980, "after": 1755},
                             "baselines": {n: {"median_ms": median_ms * r, "speedup": r}
                                           for n, r in (baselines or {}).items()}}}
    if error:
        result = {"error": {"type": "correctness.mismatch", "message": error}}
    return {"schema": "tirxh.report/1", "event": "item_report", "kernel": kernel, "case": case,
            "nodeid": f"kernels/gemm_sm90.py::{kernel}[{case}]@sm_90a",
            "outcome": "passed" if median_ms else "failed",
            "phases": [{"phase": "compile", "outcome": "passed"},
                       {"phase": "bench", "outcome": "passed", "longrepr": error or "",
                        "data": {"result": result}}]}


def _log(tmp_path, records):
    p = tmp_path / "bench.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return p


def test_fastest_variant_per_shape_and_goals(tmp_path, capsys):
    log = _log(tmp_path, [
        {"event": "session_start"},
        _item("gemm_bf16", "m8192n8192k8192_t256", 1.60, {"torch.matmul": 0.98,
                                                          "pyptx.gemm_hopper": 1.02}, 687),
        _item("gemm_bf16_c2", "m8192n8192k8192_t256", 1.50, {"torch.matmul": 1.04,
                                                             "pyptx.gemm_hopper": 1.09}, 733),
        _item("gemm_bf16", "m128n4096k4096_t128k4", 0.012, {"torch.matmul": 0.93}, 358),
        _item("gemm_fp8_c2", "m2048n4096k4096_t256", 0.09, {"torch._scaled_mm": 1.1,
                                                            "torch._scaled_mm.fast_accum": 0.97}),
        _item("gemm_bf16", "m4095n4097k4104_t256", error="'c' differs: 3 of 16777215"),
        _item("vadd", "n4096", 0.01),
    ])
    items = S.read_items([log])
    assert len(items) == 5   # vadd is not a GEMM case
    best = {(r["dtype"], r["shape"]): r for r in S.best_per_shape(items)}
    big = best["bf16", (8192, 8192, 8192)]
    assert big["kernel"] == "gemm_bf16_c2" and big["goal_met"] and big["beats_pyptx"]
    small = best["bf16", (128, 4096, 4096)]
    assert small["goal"] == 0.95 and small["goal_met"] is False and small["beats_pyptx"] is None
    assert best["fp8", (2048, 4096, 4096)]["goal_met"] is True
    assert S.main([str(log), "--json", str(tmp_path / "s.json")]) == 0
    out = capsys.readouterr().out
    assert "| bf16 | 8192x8192x8192 | gemm_bf16_c2[m8192n8192k8192_t256] | 733 | 1.040x cuBLAS" \
           " | 1.00x | yes | 1.090x |" in out
    assert "| bf16 | 128x4096x4096 | gemm_bf16[m128n4096k4096_t128k4] | 358 | 0.930x cuBLAS " \
           "| 0.95x | NO | - |" in out
    assert "- gemm_bf16[m4095n4097k4104_t256]: failed: 'c' differs: 3 of 16777215" in out
    assert json.loads((tmp_path / "s.json").read_text())["best"][0]["dtype"] == "bf16"


def test_variants_of_a_shape_are_ranked_fastest_first(tmp_path, capsys):
    log = _log(tmp_path, [
        _item("gemm_bf16", "m128n1024k7168_t128k8", 0.0175, {"torch.matmul": 0.766}),
        _item("gemm_bf16", "m128n1024k7168_t128k8r", 0.0125, {"torch.matmul": 1.07}),
        _item("gemm_bf16", "m128n1024k7168_t128sk", 0.0131, {"torch.matmul": 1.02}),
        _item("gemm_bf16_c2", "m512n4096k4096_t128", 0.0306, {"torch.matmul": 0.939}),
        _item("gemm_bf16", "m512n4096k4096_t256k2r", error="'c' differs"),
    ])
    ranks = S.ranking(S.read_items([log]))
    assert ranks == [("bf16", (128, 1024, 7168),
                      [("t128k8r", 1.07), ("t128sk", 1.02), ("t128k8", 0.766)])]
    assert S.main([str(log)]) == 0
    out = capsys.readouterr().out
    assert "| bf16 | 128x1024x7168 | t128k8r 1.070x, t128sk 1.020x, t128k8 0.766x |" in out
    assert "| bf16 | 128x1024x7168 | gemm_bf16[m128n1024k7168_t128k8r] | - | 1.070x cuBLAS " \
           "| 0.95x | yes | - |" in out


def test_a_line_that_is_not_json_is_named(tmp_path, capsys):
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps(_item("gemm_bf16", "m128n128k128_t256", 0.01)) + "\n{oops\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not a JSON line"):
        S.read_items([p])
    assert S.main([str(p)]) == 2
    assert "bad.jsonl:2" in capsys.readouterr().err


def test_no_gemm_items_is_an_error(tmp_path, capsys):
    assert S.main([str(_log(tmp_path, [_item("vadd", "n4096", 0.01)]))]) == 1
    assert "no gemm_sm90 items" in capsys.readouterr().err
