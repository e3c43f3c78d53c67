"""benchmarks/kb_mcp_gpu.py: what it reads of a bench item (a timed one, one the sim board did not
time, one that failed correctness), so the GPU call's verdict rests on the right fields."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "kb_mcp_gpu.py"
_spec = importlib.util.spec_from_file_location("kb_mcp_gpu_test", _PATH)
K = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(K)


def _item(result, outcome="passed"):
    return {"nodeid": "kernels/vadd.py::vadd[n16M]@sm_90a", "outcome": outcome,
            "phases": [{"phase": "compile", "outcome": "passed"},
                       {"phase": "bench", "outcome": outcome, "data": {"result": result}}]}


def test_a_timed_item():
    got = K.timing_of(_item({"timing": {"candidate": {"median_ms": 0.031},
                                        "baselines": {"torch": {"median_ms": 0.04,
                                                                "speedup": 1.29}}}}))
    assert got == {"outcome": "passed", "median_ms": 0.031, "baselines": {"torch": 1.29},
                   "error": None, "not_timed": None}


def test_an_item_the_sim_board_did_not_time():
    got = K.timing_of(_item({"timing": {"skipped": "the sim board never times"}}, "incomplete"))
    assert got["median_ms"] is None and got["not_timed"] == "the sim board never times"
    assert got["outcome"] == "incomplete"


def test_a_failed_item_and_one_without_a_bench_phase():
    err = {"type": "correctness.mismatch", "message": "3 of 16777216 differ"}
    got = K.timing_of(_item({"error": err}, "failed"))
    assert got["outcome"] == "failed" and got["error"] == err and got["median_ms"] is None
    assert K.timing_of({"outcome": "error", "phases": [{"phase": "compile"}]}) == {
        "outcome": "error", "median_ms": None}
