"""Issue 17's GPU scripts on a machine without a GPU: what they print from a real (fake-board)
result, when they call a run a failure (the wrapper's smoke gate), and that with no GPU they say so
and exit 0 (benchmarks/kcoral_clock_check.py, kcoral_multi_gpu.py, kcoral_issue17_gpu.sh)."""

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

from kcoral.boards.cuda import gpu_count
from tests.kcoral.test_measure import _run

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name):
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


clock_check = _load("kcoral_clock_check")
multi_gpu = _load("kcoral_multi_gpu")
gate_check = _load("kcoral_gate_check")


def test_describe_prints_clocks_and_both_regime_ratios(tmp_path, capsys):
    """A throttled fake job (the H200's 1980 -> 1680 MHz at 8192^3, kcoral/measure.py)."""
    t = _run(tmp_path, {}, fake={"throttle_after": 15, "throttled_mhz": 1680},
             baseline={"clock_sensitivity": 1.0})
    ev = {"state": "done", "result": {"verified": True, "board": "fake0", "timing": t}}
    rec = clock_check.describe("gemm, sustained", ev, every=10, baseline="fake.add")
    out = capsys.readouterr().out
    rows = [ln.split() for ln in out.splitlines() if ln.strip()[:1].isdigit()]
    assert [r[0] for r in rows] == ["1", "11", "21", "31"]
    assert rows[0][1] == "1980" and rows[-1][1] == "1680"
    assert "throttled True" in out and "drop 15.15%" in out
    assert "full" in out and "sustained" in out
    assert "tirxh bench: " in out and "full clock 0.86x, sustained 1.02x" in out
    assert rec["state"] == "done" and rec["summary"].startswith("gemm_wgmma: ")


def test_the_gate_check_prints_each_series_and_the_gate(tmp_path, capsys):
    t = _run(tmp_path, {})
    ev = {"state": "done", "result": {"verified": True, "board": "fake0", "timing": t}}
    rec = gate_check.describe("vadd gated", ev)
    out = capsys.readouterr().out
    assert "== vadd gated: gate {'requested': True" in out
    assert set(rec["series"]) == {"candidate", "fake.add"}
    assert rec["series"]["fake.add"]["median_us"] == pytest.approx(1380, rel=0.01)
    assert rec["speedup"]["fake.add"] == pytest.approx(1.38 / 1.6, rel=0.01)
    assert "paired 0.86" in out and "unavailable: the fake board" in out


def test_the_gate_check_cases_exist():
    for module, suite, case in gate_check.CASES + gate_check.SMOKE_CASES:
        m = gate_check.kcoral_gpu.load_module(gate_check.kcoral_gpu.ROOT / "zoo" / "kernels"
                                              / f"{module}.py")
        s = getattr(m, suite)
        assert case in [c.name for c in s.cases] and s.baselines


def test_zoo_case_takes_a_modules_other_suite_and_names_a_missing_case():
    """`--suite MODULE:ATTR` (the clock check on gemm_sm90's cluster GEMM); a sibling import
    (`hopper`) resolves; a case name that is not there is refused with the suite's cases."""
    kg = clock_check.kcoral_gpu
    s, c, ck = kg.zoo_case("gemm_sm90:SUITE_C2", "m200n136k72")
    assert (s.name, c.name) == ("gemm_bf16_c2", "m200n136k72") and ck.ptx
    with pytest.raises(SystemExit, match=r"'nope' is not in gemm_sm90:SUITE_C2 .*m200n136k72"):
        kg.zoo_case("gemm_sm90:SUITE_C2", "nope")


def test_describe_names_the_kernel_and_baseline(tmp_path, capsys):
    t = _run(tmp_path, {}, fake={})
    ev = {"state": "done", "result": {"verified": True, "board": "fake0", "timing": t}}
    rec = clock_check.describe("lazy8", ev, every=10, baseline="fake.add", kernel="attention_fwd")
    out = capsys.readouterr().out
    assert "median of per-round fake.add/attention_fwd" in out
    assert rec["summary"].startswith("attention_fwd")


def test_describe_of_a_failed_job_names_the_error(capsys):
    ev = {"state": "failed", "result": {"error": {"type": "timeout.launch", "message": "hung"}}}
    rec = clock_check.describe("smoke", ev, every=5)
    assert "== smoke: failed" in capsys.readouterr().out
    assert clock_check.failures({"runs": [rec], "errors": []}) == ["smoke: failed timeout.launch"]


@pytest.mark.parametrize("out,bad", [
    ({"runs": [{"label": "s", "state": "done"}], "errors": []}, []),
    ({"runs": [{"label": "s", "state": "done"}],
      "errors": ["cool-down job not started: 200 s of the 240 s budget used"]}, []),
    ({"runs": [], "errors": []}, ["no job finished"]),
    ({"runs": [{"label": "s", "state": "done"}],
      "errors": ["Traceback (most recent call last):\n  ...\nKCoralError: refused"]},
     ["KCoralError: refused"]),
])
def test_clock_check_failures(out, bad):
    assert clock_check.failures(out) == bad


def _row(state="done", board="cuda0", kind="local"):
    return {"kernel": "vadd[n4096]", "board": board, "state": state, "error": None,
            "provenance": {"kind": kind}}


@pytest.mark.parametrize("out,bad", [
    ({"solo": {"rows": [_row(), _row(board="cuda1")]}, "errors": {}}, []),
    ({"solo": {"rows": [_row(state="failed")]}, "errors": {}},
     ["vadd[n4096] on cuda0: failed None"]),
    ({"together": {"rows": [_row()], "errors": ["Traceback\nRuntimeError: boom"]},
      "errors": {"remote": "Traceback\nRuntimeError: the agent did not join within 90 s"}},
     ["remote: RuntimeError: the agent did not join within 90 s", "together: RuntimeError: boom"]),
    ({"remote": {"rows": [_row(board="gpu1-agent")], "all_remote": False}, "errors": {}},
     ["a job through the agent came back without provenance.kind == 'remote'"]),
    ({"errors": {}}, ["no job ran"]),
])
def test_multi_gpu_failures(out, bad):
    assert multi_gpu.failures(out) == bad


needs_no_gpu = pytest.mark.skipif(gpu_count()[0] > 0, reason="this host has a GPU")


@needs_no_gpu
@pytest.mark.parametrize("script,says", [("kcoral_clock_check.py", "no GPU"),
                                         ("kcoral_gate_check.py", "no GPU"),
                                         ("kcoral_multi_gpu.py", "needs 2 GPUs, found 0")])
def test_without_a_gpu_the_scripts_say_so_and_exit_0(tmp_path, script, says):
    env = dict(os.environ, OUT=str(tmp_path))
    r = subprocess.run([sys.executable, str(BENCH / script), "--smoke"], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 0 and says in r.stdout, r


def test_the_wrapper_names_its_two_runs(tmp_path):
    r = subprocess.run(["bash", str(BENCH / "kcoral_issue17_gpu.sh"), "bogus"],
                       capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert r.returncode == 2 and "usage: bash benchmarks/kcoral_issue17_gpu.sh clock|gate|multi" \
        in r.stderr


def test_resolve_checks_suite_and_case_on_the_cpu(capsys):
    """`--resolve` (run by kcoral_issue17_gpu.sh before its smoke): session 9's device call
    named gemm_sm90:SUITE_C2 for the 8192^3 case, which lives in SUITE_C2_PEERS, and learnt
    it after 115 s of the H200. Now the CPU says so, naming the suite's cases or the module's
    suites."""
    assert clock_check.main(["--resolve", "--suite", "gemm_sm90:SUITE_C2_PEERS",
                             "--case", "m8192n8192k8192_t256"]) == 0
    assert clock_check.main(["--resolve", "--suite", "gemm_sm90:SUITE_C2",
                             "--case", "m8192n8192k8192_t256"]) == 2
    err = capsys.readouterr().err
    assert "'m8192n8192k8192_t256' is not in gemm_sm90:SUITE_C2 " in err
    assert clock_check.main(["--resolve", "--suite", "gemm_sm90:SUITE_NOPE",
                             "--case", "x"]) == 2
    assert "no suite 'SUITE_NOPE'; its suites: " in capsys.readouterr().err
