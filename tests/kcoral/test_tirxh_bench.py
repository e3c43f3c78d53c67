"""``tirxh bench`` end to end through the CLI: the embedded daemon, and ``--kcoral``."""

import json

import pytest

from tests.core.pytester import DEFAULT_TOML, VADD, Tirxh

from .conftest import start_daemon


@pytest.fixture
def tirxh(tmp_path, monkeypatch) -> Tirxh:
    return Tirxh(tmp_path, monkeypatch)


def test_embedded_daemon_is_announced(tirxh):
    from kcoral.boards.cuda import gpu_count
    tirxh.project(vadd=VADD)
    r = tirxh.run("bench", "--json")
    assert "started an embedded KCoral daemon" in r.stderr, r
    item = json.loads(r.stdout)["items"][0]  # its first case, "small"
    bench = next(p for p in item["phases"] if p["phase"] == "bench")
    if gpu_count()[0]:
        assert bench["outcome"] == "passed" and bench["data"]["state"] == "done", r
        assert bench["data"]["result"]["verified"]
    else:  # no GPU here: the sim board checks correctness through numsim but never times,
        # so the item is incomplete (never passed) and says why
        res = bench["data"]["result"]
        assert bench["outcome"] == "incomplete", r
        assert bench["data"]["state"] == "done" and res["board_type"] == "sim", r
        assert res["verified"] and res["timing"] == {"skipped": "the sim board never times"}
        assert "never times" in bench["longrepr"]
    # where the item's time went: the client's job building and submit, the worker's run
    res = bench["data"]["result"]
    assert set(res["client_s"]) == {"build_job", "submit"}
    assert all(v >= 0 for v in res["client_s"].values()) and res["run_s"] > 0
    assert [e[1] for e in res["timeline"]][0] == "loaded"
    assert (tirxh.path / ".kcoral" / "kcoral.sqlite").exists()  # the embedded daemon's history


def test_configured_daemon_and_summary(tirxh, tmp_path):
    d = start_daemon(tmp_path / "state", fake_boards=1)  # fake boards cannot load cubins
    try:
        tirxh.project(vadd=VADD)
        r = tirxh.run("bench", "--kcoral", d.address)
        assert "embedded" not in r.stderr
        # the job reached the daemon and came back typed, with the summary section
        r.fnmatch_lines([f"*KCoral ({d.address})*", "vadd*failed compile.format*"])
        jobs = d.store.list()
        assert len(jobs) >= 1 and jobs[0]["state"] == "failed"
        assert jobs[0]["name"].startswith("vadd[")
    finally:
        d.stop(1)


@pytest.mark.parametrize("how", ["option", "ini"])
def test_exec_budget_reaches_the_job(tirxh, tmp_path, how):
    d = start_daemon(tmp_path / "state", fake_boards=1)
    try:
        if how == "ini":
            tirxh.project(vadd=VADD, toml=DEFAULT_TOML + "[bench]\nexec_s = 7.5\n")
            tirxh.run("bench", "--kcoral", d.address)
        else:
            tirxh.project(vadd=VADD)
            tirxh.run("bench", "--kcoral", d.address, "--exec-budget", "7.5")
        jobs = d.store.list()
        assert jobs and all(json.loads(j["job_json"])["budgets"]["exec_s"] == 7.5 for j in jobs)
    finally:
        d.stop(1)


def test_a_bad_exec_budget_is_a_usage_error(tirxh):
    tirxh.project(vadd=VADD)
    r = tirxh.run("bench", "--exec-budget", "-1")
    assert r.ret != 0 and "--exec-budget -1.0: expected a positive number of seconds" in r.stderr
    tirxh.project(vadd=VADD, toml=DEFAULT_TOML + "[bench]\nexec_s = 0\n")
    r = tirxh.run("bench")
    assert r.ret != 0 and "expected a positive number of seconds, got 0" in r.stderr, r


def test_the_projects_l2_flush_reaches_the_job_and_the_option_overrides_it(tirxh, tmp_path):
    d = start_daemon(tmp_path / "state", fake_boards=1)
    try:
        tirxh.project(vadd=VADD, toml=DEFAULT_TOML + '[bench]\nl2_flush = "read"\n')
        tirxh.run("bench", "--kcoral", d.address)
        tirxh.run("bench", "--kcoral", d.address, "--l2-flush", "none")
        timings = [json.loads(j["job_json"])["timing"] for j in d.store.list()]
        assert {(t.get("l2_flush", True), t.get("l2_flush_by", "write"))
                for t in timings} == {(False, "write"), (True, "read")}
    finally:
        d.stop(1)
    tirxh.project(vadd=VADD, toml=DEFAULT_TOML + '[bench]\nl2_flush = "evict"\n')
    r = tirxh.run("bench")
    assert r.ret != 0 and "l2_flush" in r.stderr and "got 'evict'" in r.stderr, r


def test_seed_counts_reach_the_job(tirxh, tmp_path):
    d = start_daemon(tmp_path / "state", fake_boards=1)
    try:
        tirxh.project(vadd=VADD, toml=DEFAULT_TOML + "[bench]\nseeds_before = 1\n"
                                                      "seeds_after = 3\n")
        tirxh.run("bench", "--kcoral", d.address)
        jobs = d.store.list()
        assert jobs
        for j in jobs:
            doc = json.loads(j["job_json"])
            assert [r["when"] for r in doc["runs"]] == ["before", "after", "after", "after"]
            assert doc["guards"]["seeds_before"] == 1 and doc["guards"]["seeds_after"] == 3
    finally:
        d.stop(1)
    tirxh.project(vadd=VADD, toml=DEFAULT_TOML + "[bench]\nseeds_before = 0\n")
    r = tirxh.run("bench")
    assert r.ret != 0 and "expected 1 to 8 runs, got 0" in r.stderr, r


def test_no_timing_is_a_correctness_pass_that_exits_on_what_it_verified(tirxh):
    """`tirxh bench --no-timing`: the smoke pass run before timing a kernel only the simulator
    has run. A verified item passes and the run exits 0 (a smoke pass used to exit 1 for "timed
    none of the items", so scripts had to grep the summary); a wrong kernel fails it."""
    tirxh.project(vadd=VADD)
    r = tirxh.run("bench", "--no-timing", "-k", "small", "--json")
    assert r.ret == 0, r
    item = json.loads(r.stdout)["items"][0]
    bench = next(p for p in item["phases"] if p["phase"] == "bench")
    assert item["outcome"] == "passed" and bench["data"]["timed"] is None, r
    assert bench["data"]["result"]["verified"]
    timing = bench["data"]["result"].get("timing")
    assert not timing or "skipped" in timing  # nothing was timed
    tirxh.write("kernels/vadd.py", VADD.replace("x + y", "x - y"))
    r = tirxh.run("bench", "--no-timing", "-k", "small")
    assert r.ret == 1, r
    r.fnmatch_lines(["*vadd*failed correctness.mismatch*"])


def test_min_rounds_and_timing_budget_reach_the_job(tirxh, tmp_path):
    """The sustained clock regime needs long jobs: ``--min-rounds`` asks KCoral for that many
    paired rounds and gives them a budget that lets them run (60 s unless told),
    ``--back-to-back`` busy ones (launches per sample), and ``--l2-flush`` says how the L2 is
    emptied before each sample (`kcoral.boards.l2_flush`)."""
    d = start_daemon(tmp_path / "state", fake_boards=1)
    try:
        tirxh.project(vadd=VADD)
        tirxh.run("bench", "--kcoral", d.address, "--min-rounds", "300")
        tirxh.run("bench", "--kcoral", d.address, "--min-rounds", "5000", "--timing-budget", "30")
        tirxh.run("bench", "--kcoral", d.address, "--back-to-back", "7")
        tirxh.run("bench", "--kcoral", d.address, "--l2-flush", "read")
        tirxh.run("bench", "--kcoral", d.address, "--l2-flush", "none")
        timings = [json.loads(j["job_json"])["timing"] for j in d.store.list()]
        assert {(t["min_iters"], t["max_iters"], t["budget_s"], t.get("repeat", 1),
                 t.get("l2_flush", True), t.get("l2_flush_by", "write"))
                for t in timings} == {(300, 2000, 60.0, 1, True, "write"),
                                      (5000, 5000, 30.0, 1, True, "write"),
                                      (10, 2000, 2.0, 7, True, "write"),
                                      (10, 2000, 2.0, 1, True, "read"),
                                      (10, 2000, 2.0, 1, False, "write")}
        # (the fake board refuses cubins: what a board does with `repeat` is
        # tests/kcoral/test_measure.py's)
    finally:
        d.stop(1)


@pytest.mark.parametrize("args,message", [
    (["--min-rounds", "0"], "--min-rounds 0: expected 1 to 1000000 rounds"),
    (["--back-to-back", "0"], "--back-to-back 0: expected 1 to 1000 launches per sample"),
    (["--back-to-back", "1001"], "--back-to-back 1001: expected 1 to 1000 launches per sample"),
    (["--l2-flush", "evict"], "--l2-flush: invalid choice: 'evict'"),
    (["--timing-budget", "601"], "--timing-budget 601.0: expected 0 < seconds <= 600"),
    (["--min-rounds", "100", "--exec-budget", "50"],
     "--timing-budget 60 s is not below the execution budget of 50 s"),
    (["--timing-budget", "120"], "--timing-budget 120 s is not below the execution budget of "
                                 "120 s"),
])
def test_a_bad_round_count_or_timing_budget_is_a_usage_error(tirxh, args, message):
    tirxh.project(vadd=VADD)
    r = tirxh.run("bench", *args)
    assert r.ret != 0 and message in r.stderr, r
