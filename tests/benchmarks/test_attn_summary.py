"""benchmarks/attn_summary.py: report-log items of attention_fwd to tables, the fastest variant
per shape and mask with the issue 16 goal verdict, the techniques against the main variant."""

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
    spec = importlib.util.spec_from_file_location("attn_summary_test", BENCH / "attn_summary.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _item(case, median_ms=None, ratio=None, tflops=None, error=None, kernel="attention_fwd",
          regimes=None):
    result = {"timing": {"skipped": "the sim board never times"}}
    if median_ms is not None:
        result = {"timing": {"candidate": {"median_ms": median_ms}, "tflops": tflops,
                             "converged": True, "sm_clock_mhz": {"before": 1980, "after": 1830},
                             "baselines": {"torch.sdpa": {"median_ms": median_ms * ratio,
                                                          "speedup": ratio}}}}
        if regimes:  # {name: (rounds, MHz, ratio)}: KCoral /3's split by clock regime
            result["timing"]["regimes"] = {
                n: {"rounds": k, "clock_mhz": mhz,
                    "baselines": {"torch.sdpa": {"median_ms": 1.0, "speedup": x}}}
                for n, (k, mhz, x) in regimes.items()}
    if error:
        result = {"error": {"type": "correctness.mismatch", "message": error}}
    item = bench_item(kernel, case, result, "kernels/attention.py", error or "")
    item["outcome"] = "passed" if median_ms else "failed"
    return item


def test_fastest_variant_goal_and_techniques(S, tmp_path, capsys):
    log = tmp_path / "bench.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in [
        _item("b4h32s8192_p", 7.0, 1.05, 628),
        _item("b4h32s8192_np", 7.7, 0.95, 571),
        _item("b4h32s8192_nopp", 8.4, 0.87, 523),
        _item("b4h32s8192_lazy8", 7.5, 0.98, 586),
        _item("b4h32s8192_causal_sync", 4.0, 0.97, 550),
        _item("b4h32kv8s8192_causal_p", error="'o' differs: 3 of 134217728"),
        _item("s200", 0.01, 1.0),                      # a small case: not a benchmark shape
        _item("b4h32s8192_p", 1.0, 1.0, kernel="decode_attention"),
    ]) + "\n")
    items = S.read_items([log])
    assert sorted(i["case"] for i in items) == ["b4h32kv8s8192_causal_p", "b4h32s8192_causal_sync",
                                                "b4h32s8192_lazy8", "b4h32s8192_nopp",
                                                "b4h32s8192_np",
                                                "b4h32s8192_p"]
    best = {(r["shape"], r["causal"]): r for r in S.best_per_shape(items)}
    assert best[(4, 32, 32, 8192), False]["variant"] == "p"
    assert best[(4, 32, 32, 8192), False]["goal_met"] and best[(4, 32, 32, 8192), False][
        "anchor"] == 596
    assert best[(4, 32, 32, 8192), True]["goal_met"] is False
    (key, rel), = [t for t in S.techniques(items) if t[0] == ((4, 32, 32, 8192), False)]
    assert rel == pytest.approx({"np": 7.0 / 7.7, "nopp": 7.0 / 8.4, "lazy8": 7.0 / 7.5})
    assert S.main([str(log), "--json", str(tmp_path / "s.json")]) == 0
    out = capsys.readouterr().out
    assert "| B4 H32 S8192 | p | 628 | 1.050x | yes | 596 TFLOP/s |" in out
    assert "| B4 H32 S8192 causal | sync | 550 | 0.970x | NO | 565 TFLOP/s |" in out
    assert "| B4 H32 S8192 | 0.909x | - | 0.833x | - | 0.933x |" in out
    assert "- attention_fwd[b4h32kv8s8192_causal_p]: failed: 'o' differs: 3 of 134217728" in out
    assert json.loads((tmp_path / "s.json").read_text())["best"][0]["variant"] == "p"


def test_no_items_and_bad_lines_are_named(S, tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text(json.dumps({"event": "session_start"}) + "\n")
    assert S.main([str(empty)]) == 1
    assert "no attention_fwd items" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{oops\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:1: not a JSON line"):
        S.read_items([bad])
    assert S.main([str(bad)]) == 2


def test_both_clock_regimes_are_shown_and_the_goal_needs_both(S, tmp_path, capsys):
    """Issue 16's goal holds 'both clock regimes': a variant ahead overall but behind in the
    sustained rounds does not meet it."""
    log = tmp_path / "bench.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in [
        _item("b4h32s8192_lazy8", 6.66, 1.05, 661,
              regimes={"full": (5, 1980.0, 1.033), "sustained": (15, 1665.0, 1.055)}),
        _item("b2h16s16384_lazy8", 6.6, 1.01, 665,
              regimes={"full": (8, 1980.0, 1.02), "sustained": (12, 1680.0, 0.985),
                       "empty": (0, None, 1.0)}),
    ]) + "\n")
    items = S.read_items([log])
    best = {r["shape"]: r["goal_met"] for r in S.best_per_shape(items)}
    assert best == {(4, 32, 32, 8192): True, (2, 16, 16, 16384): False}
    assert S.main([str(log)]) == 0
    out = capsys.readouterr().out
    assert "| 1.050x | 1.033x (5 at 1980 MHz) | 1.055x (15 at 1665 MHz) |" in out
    assert "| 1.010x | 1.020x (8 at 1980 MHz) | 0.985x (12 at 1680 MHz) |" in out
    assert "| B2 H16 S16384 | lazy8 | 665 | 1.010x | NO |" in out
