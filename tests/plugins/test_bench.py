"""The built-in bench plugin (`tirxh.plugins.bench`): what ``tirxh bench`` makes of a KCoral
result. A result without a timing is "not timed (why)", never incomplete; a bench that timed
nothing it was asked to exits 1 with the reason (daemon unreachable here, end to end)."""

import json

from tirxh.plugins.bench import BenchResult

SIM_RESULT = {"board": "sim0", "verified": True, "timing": {"skipped": "the sim board never times"},
              "correctness": [{"when": "before", "ok": True}]}


def test_a_sim_board_result_is_not_timed_and_says_why():
    r = BenchResult("vadd[n1000]", "done", SIM_RESULT)
    assert not r.timed and r.not_timed == "sim0: the sim board never times"
    assert r.to_json()["timed"] is False and "not timed (the sim board never times)" in r.summary


def test_a_refusal_is_not_timed_with_its_typed_reason():
    r = BenchResult("big", "failed", {"error": {"type": "unavailable.board",
                                                "message": "over the sim board's size limit"}})
    assert not r.timed
    assert r.not_timed == "unavailable.board: over the sim board's size limit"


def test_a_timing_is_timed():
    t = {"candidate": {"median_ms": 0.05, "iqr_ms": 0.001, "n": 10}, "converged": True}
    r = BenchResult("vadd", "done", {"board": "h200-0", "verified": True, "timing": t})
    assert r.timed and r.not_timed == "" and r.verdict == "clean"


def test_an_unconverged_line_names_the_noisy_series():
    """On the H200 torch.compile's host overhead made its samples noisy while the candidate's
    were tight: the line must say whose noise kept the job from converging."""
    t = {"candidate": {"median_ms": 0.107, "iqr_ms": 0.001, "n": 2000}, "converged": False,
         "rel_noise": 0.0104, "rel_noise_target": 0.01,
         "rel_noise_by": {"candidate": 0.0002, "torch.compile.silu_mul": 0.0104}}
    line = BenchResult("swiglu", "done", {"board": "cuda0", "verified": True, "timing": t}).summary
    assert "noise 1.04% (torch.compile.silu_mul) > 1%" in line
    t["rel_noise_by"] = {"candidate": 0.0104, "torch.compile.silu_mul": 0.0002}
    line = BenchResult("swiglu", "done", {"board": "cuda0", "verified": True, "timing": t}).summary
    assert "noise 1.04% > 1%" in line
    t["rel_noise_target"] = 1e-6  # a fixed-rounds job (benchmarks/kcoral_clock_check.py)
    line = BenchResult("swiglu", "done", {"board": "cuda0", "verified": True, "timing": t}).summary
    assert "noise 1.04% > 0.0001%" in line
    t["rel_noise_target"] = 0.01
    del t["rel_noise_by"]  # a result from a protocol before /3
    line = BenchResult("swiglu", "done", {"board": "cuda0", "verified": True, "timing": t}).summary
    assert "noise 1.04% > 1%" in line


def test_bench_against_an_unreachable_daemon_exits_1_with_the_reason(tirxh):
    tirxh.write("tirx.toml", "[project]\n")
    tirxh.run("init", ".", "--force")
    r = tirxh.run("bench", "--kcoral", "127.0.0.1:1", "-k", "n1000", "--json")
    assert r.ret == 1, r
    assert "ERROR: tirxh bench timed none of the 1 item(s) it was asked to time: " \
           "unavailable.daemon: UNAVAILABLE" in r.stderr
    item = json.loads(r.stdout)["items"][0]
    assert item["outcome"] == "incomplete"
    assert item["phases"][1]["longrepr"].startswith("not timed (unavailable.daemon: ")


def test_no_timing_results_are_verified_or_not_never_untimed():
    ok = BenchResult("vadd[n1000]", "done", SIM_RESULT, timing_asked=False)
    assert ok.verdict == "clean" and ok.timed is None and ok.to_json()["timed"] is None
    assert ok.summary == "vadd[n1000]: correct, not timed (--no-timing) [sim0]"
    unverified = BenchResult("vadd", "done", dict(SIM_RESULT, verified=False), timing_asked=False)
    assert unverified.verdict == "incomplete" and "unverified (no reference)" in unverified.summary
    refused = BenchResult("big", "failed", {"error": {"type": "unavailable.board", "message": "x"}},
                          timing_asked=False)
    assert refused.verdict == "incomplete" and refused.timed is None


def test_no_timing_against_an_unreachable_daemon_exits_1_with_the_reason(tirxh):
    tirxh.write("tirx.toml", "[project]\n")
    tirxh.run("init", ".", "--force")
    r = tirxh.run("bench", "--no-timing", "--kcoral", "127.0.0.1:1", "-k", "n1000")
    assert r.ret == 1, r
    assert "ERROR: tirxh bench --no-timing verified none of the 1 item(s): " in r.stderr
    assert "unavailable.daemon" in r.stderr


def test_a_missing_optional_baseline_makes_the_item_incomplete_and_says_which():
    t = {"candidate": {"median_ms": 0.58, "iqr_ms": 0.001, "n": 10}, "converged": True,
         "baselines": {}, "baselines_missing": {
             "fla.chunk_kda": "unknown baseline 'fla.chunk_kda'; installed: ['fake.add']"}}
    r = BenchResult("kda_fwd", "done", {"board": "cuda0", "verified": True, "timing": t})
    assert r.timed and r.verdict == "incomplete"  # timed, but the comparison is missing
    assert "fla.chunk_kda not timed (unknown baseline 'fla.chunk_kda')" in r.summary
