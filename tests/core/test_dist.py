"""``tirxh check -n N``: items in worker processes, reported as a serial run reports them."""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tirxh.core import dist
from tirxh.core.dist import exit_reason, numprocesses, usable_cpus
from tirxh.core.errors import UsageError

from .pytester import BAD, CLEAN_ANALYZER, REPO, SCALE, VADD

# two suites with several small cases (so two workers share them) and a compile-only kernel
MANY = VADD.replace('cases=[T.case("small", n=1000), T.case("big", n=1 << 20)]',
                    'cases=[T.case(f"c{i}", n=100 * (i + 1)) for i in range(5)]')

# an analyzer that says which worker checked the item, and crashes or fails on request
WORKER_ANALYZER = '''
import os
import signal
import time

from tirxh.api import AnalyzerResult, Finding


def tirxh_check_item(item, config):
    who = (config.worker or {}).get("id", "main")
    if "[c2]" in item.nodeid and os.environ.get("CRASH") == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if "[c2]" in item.nodeid and os.environ.get("CRASH") == "exit":
        os._exit(3)
    if "[c0]" in item.nodeid and os.environ.get("SLOW"):
        time.sleep(float(os.environ["SLOW"]))
    if "[c1]" in item.nodeid and os.environ.get("CRASH") == "memory":
        raise MemoryError("the simulation ran out of memory")
    if "[c1]" in item.nodeid and os.environ.get("FAIL"):
        return AnalyzerResult("w", "error", [Finding("w.bad", "c1 is wrong")], "wrong")
    return AnalyzerResult("w", "clean", stats={"worker": who})
'''


def _strip(doc):
    """A report with what may differ between a serial and a parallel run removed: timings, and
    which of two items with the same PTX found the other's cubin in the cache."""
    if isinstance(doc, dict):
        return {k: _strip(v) for k, v in doc.items()
                if k not in ("duration", "timings", "cache_hit", "time")}
    if isinstance(doc, list):
        return [_strip(v) for v in doc]
    return doc


def _workers(doc) -> set:
    return {r["stats"].get("worker") for it in doc["items"] for p in it["phases"]
            for r in p["results"]}


def _body(stdout: str) -> list:
    """The terminal output without the timed last line."""
    return stdout.rstrip("\n").splitlines()[:-1]


@pytest.fixture
def many(tirxh):
    tirxh.project(a_bad=BAD, b_many=MANY, c_scale=SCALE)
    tirxh.write("tirxconf.py", WORKER_ANALYZER)
    return tirxh


# -------------------------------------------------------------------------------------------------
# -n's value
# -------------------------------------------------------------------------------------------------

def test_numprocesses_values():
    assert numprocesses(None) == 0
    assert numprocesses("0") == 0
    assert numprocesses("3") == 3
    assert numprocesses("auto") == (usable_cpus() if usable_cpus() > 1 else 0)


def test_auto_on_one_cpu_is_serial(monkeypatch):
    monkeypatch.setattr(dist, "usable_cpus", lambda: 1)
    assert numprocesses("auto") == 0
    monkeypatch.setattr(dist, "usable_cpus", lambda: 6)
    assert numprocesses("auto") == 6


@pytest.mark.parametrize("value", ["-1", "two", "1.5", ""])
def test_numprocesses_rejects_bad_values(value):
    with pytest.raises(UsageError, match="expected a number of worker processes"):
        numprocesses(value)


def test_a_bad_n_is_a_usage_error_before_any_work(many):
    r = many.run("check", "-n", "lots")
    assert r.ret == 4, r
    assert "-n 'lots': expected a number of worker processes" in r.stderr
    assert "collected" not in r.stdout


def test_bench_refuses_n_and_says_why(many):
    r = many.run("bench", "-n", "2")
    assert r.ret == 4, r
    assert "bench runs its items one at a time" in r.stderr
    assert "tirxh check -n auto" in r.stderr
    assert many.run("bench", "-n", "0", "--collect-only").ret == 0  # 0 is serial: accepted


def test_exit_reason_words():
    assert exit_reason(-signal.SIGSEGV) == "killed by signal SIGSEGV"
    assert "out-of-memory killer" in exit_reason(-signal.SIGKILL)
    assert exit_reason(3) == "exited with status 3"


# -------------------------------------------------------------------------------------------------
# the same report as a serial run
# -------------------------------------------------------------------------------------------------

def test_json_and_terminal_output_are_a_serial_runs(many):
    serial = many.run("check", "--json", "--report-log", "serial.jsonl")
    par = many.run("check", "--json", "-n", "2", "--report-log", "par.jsonl")
    assert serial.ret == par.ret == 1, (serial, par)
    s, p = json.loads(serial.stdout), json.loads(par.stdout)
    # every item was checked in a worker (which of the two is the scheduler's business)
    assert _workers(p) and _workers(p) <= {"gw0", "gw1"}, _workers(p)
    for it in p["items"]:  # who checked it is the one thing allowed to differ
        for ph in it["phases"]:
            for r in ph["results"]:
                r["stats"] = {"worker": "main"}
    assert _strip(p) == _strip(s)
    assert [i["nodeid"] for i in p["items"]] == p["collected"]  # collection order
    assert p["summary"] == {**s["summary"]}
    assert p["summary"]["failed"] == 1 and p["summary"]["passed"] == 6
    log = [_strip(json.loads(ln)) for ln in (many.path / "par.jsonl").read_text().splitlines()]
    ref = [_strip(json.loads(ln)) for ln in (many.path / "serial.jsonl").read_text().splitlines()]
    for ev in log:
        for ph in ev.get("phases", []):
            for r in ph["results"]:
                r["stats"] = {"worker": "main"}
    assert [e["event"] for e in log] == [e["event"] for e in ref]
    assert log[1:] == ref[1:]  # session_start lists the same plugins either way
    serial_t, par_t = many.run("check"), many.run("check", "-n", "2")
    assert _body(par_t.stdout) == _body(serial_t.stdout)


def test_keyword_selection_in_workers(many):
    serial = many.run("check", "-k", "c3 or scale", "--json")
    par = many.run("check", "-k", "c3 or scale", "--json", "-n", "2")
    s, p = json.loads(serial.stdout), json.loads(par.stdout)
    assert par.ret == serial.ret == 0, par
    assert [i["nodeid"] for i in p["items"]] == [i["nodeid"] for i in s["items"]] == [
        "kernels/b_many.py::vadd[c3]@sm_90a", "kernels/c_scale.py::scale@sm_90a"]
    assert p["summary"]["deselected"] == s["summary"]["deselected"] == 5


def test_n_auto_and_more_workers_than_items(many, monkeypatch):
    monkeypatch.setattr(dist, "usable_cpus", lambda: 4)  # auto: 4 workers asked for
    r = many.run("check", "-k", "c0", "-n", "auto", "--json")
    assert r.ret == 0, r
    assert _workers(json.loads(r.stdout)) == {"gw0"}  # one item: one worker started


def test_a_plugin_loaded_with_p_runs_in_the_workers(tirxh):
    tirxh.project(b_many=MANY)
    tirxh.write("myanalyzer.py", WORKER_ANALYZER)  # not tirxconf.py: only -p loads it
    r = tirxh.run_subprocess("check", "-p", "myanalyzer", "-n", "2", "--json",
                             env={"PYTHONPATH": os.pathsep.join([str(REPO), str(tirxh.path)])})
    assert r.ret == 0, r
    doc = json.loads(r.stdout)
    assert doc["summary"]["passed"] == 5
    assert _workers(doc) and _workers(doc) <= {"gw0", "gw1"}, _workers(doc)


# -------------------------------------------------------------------------------------------------
# -x, crashes, start-up failures
# -------------------------------------------------------------------------------------------------

def test_exitfirst_reports_what_a_serial_run_reports(many, monkeypatch):
    monkeypatch.setenv("FAIL", "1")
    serial = many.run("check", "-x", "-k", "not broken")
    par = many.run("check", "-x", "-k", "not broken", "-n", "2")
    assert serial.ret == par.ret == 1, par
    assert _body(par.stdout) == _body(serial.stdout)
    last = par.stdout.splitlines()[-1]
    assert "1 failed, 1 passed" in last, last
    assert "stopping after 1 failure (-x): 4 items not run" in last, last


@pytest.mark.parametrize("how, reason", [("segv", "killed by signal SIGSEGV"),
                                         ("exit", "exited with status 3")])
def test_a_crashing_worker_makes_its_item_an_error_and_the_rest_run(many, monkeypatch, how,
                                                                     reason):
    monkeypatch.setenv("CRASH", how)
    r = many.run("check", "-n", "2", "--json", "-k", "not broken")
    assert r.ret == 1, r
    doc = json.loads(r.stdout)
    by = {i["nodeid"]: i for i in doc["items"]}
    crashed = by["kernels/b_many.py::vadd[c2]@sm_90a"]
    assert crashed["outcome"] == "error"
    assert crashed["phases"][0]["phase"] == "check"
    assert f"crashed while running this item: {reason}" in crashed["phases"][0]["longrepr"]
    assert doc["summary"]["error"] == 1 and doc["summary"]["passed"] == 5
    assert len(doc["items"]) == 6  # none lost: a new worker took the dead one's place


def test_progress_goes_to_stderr_while_the_report_waits(many, monkeypatch):
    """c0 (first in collection order) sleeps, so every other report waits on it: stderr says
    how far the run is and what it waits on; stdout is still a serial run's."""
    serial = many.run("check", "-k", "not broken")
    monkeypatch.setenv("SLOW", "3")
    par = many.run("check", "-n", "2", "-k", "not broken", "--progress-every", "0.5")
    assert par.ret == serial.ret == 0, par
    assert _body(par.stdout) == _body(serial.stdout)
    lines = [ln for ln in par.stderr.splitlines() if ln.startswith("tirxh: ")]
    assert lines, par.stderr
    assert all(" of 6 items finished; the report waits on kernels/b_many.py::vadd[c0]@sm_90a"
               in ln for ln in lines), lines
    # c0 was handed out first or second, so some line shows it running on a worker
    assert any(re.search(r"vadd\[c0\]@sm_90a \(gw\d+, \d+s\)", ln) for ln in lines), lines
    quiet = many.run("check", "-n", "2", "-k", "not broken", "--progress-every", "0")
    assert quiet.ret == 0 and "items finished" not in quiet.stderr, quiet


@pytest.mark.parametrize("value", ["-1", "soon", "inf", "nan"])
def test_a_bad_progress_interval_is_a_usage_error(many, value):
    r = many.run("check", "-n", "2", "--progress-every", value)
    assert r.ret == 4, r
    assert "--progress-every" in r.stderr, r.stderr


def test_memory_error_in_an_analyzer_is_an_error_naming_it(many, monkeypatch):
    monkeypatch.setenv("CRASH", "memory")
    r = many.run("check", "-n", "2", "-k", "c1")
    assert r.ret == 1, r
    assert "MemoryError: the simulation ran out of memory" in r.stdout
    assert "1 error, 6 deselected in" in r.stdout.splitlines()[-1]


def test_a_worker_that_cannot_start_is_an_internal_error(many):
    many.write("tirxconf.py", '''
        def tirxh_configure(config):
            if config.worker:
                raise RuntimeError("no workers here")
    ''')
    r = many.run("check", "-n", "1")
    assert r.ret == 3, r
    assert "worker gw0 could not start" in r.stderr
    assert "RuntimeError: no workers here" in r.stderr


def test_an_item_a_worker_did_not_collect_is_an_error(many):
    many.write("tirxconf.py", CLEAN_ANALYZER + '''

def tirxh_collection_modifyitems(config, items):
    if config.worker:
        items[:] = [i for i in items if "scale" not in i.nodeid]
''')
    r = many.run("check", "-n", "1", "-k", "scale or c0", "--json")
    assert r.ret == 1, r
    by = {i["nodeid"]: i for i in json.loads(r.stdout)["items"]}
    assert by["kernels/b_many.py::vadd[c0]@sm_90a"]["outcome"] == "passed"
    scale = by["kernels/c_scale.py::scale@sm_90a"]
    assert scale["outcome"] == "error"
    assert "worker gw0 did not collect this item" in scale["phases"][0]["longrepr"]


# -------------------------------------------------------------------------------------------------
# Ctrl-C
# -------------------------------------------------------------------------------------------------

SLOW_ANALYZER = '''
import os
import time
from pathlib import Path

from tirxh.api import AnalyzerResult


def tirxh_check_item(item, config):
    Path(os.environ["PIDS"], str(os.getpid())).write_text(item.nodeid)
    time.sleep(60)
    return AnalyzerResult("slow", "clean")
'''


def _sigint_as_a_terminal_leaves_it():
    """In the child before exec: SIGINT at its default action and unblocked, as a shell in a
    terminal starts a command. Both the disposition (ignored, in a background job of a
    non-interactive shell) and the mask are inherited across exec, and Python installs no
    KeyboardInterrupt handler for an ignored SIGINT. The suspected cause (not reproduced in
    isolation) of three full-suite runs of session 8, each started in the background, whose
    main process printed items finishing after the interrupt, as if it never came."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_ctrl_c_stops_the_workers(tirxh, tmp_path):
    tirxh.project(b_many=MANY)
    tirxh.write("tirxconf.py", SLOW_ANALYZER)
    pids = tmp_path / "pids"
    pids.mkdir()
    # PYTHONFAULTHANDLER: if the main process outlives the interrupt (seen twice under CI
    # load, cause not yet found: the run went on, items finished), SIGABRT makes it print every
    # thread's stack on stderr
    env = dict(os.environ, PYTHONPATH=str(REPO), TIRXH_CACHE_DIR=str(tirxh.cache),
               TIRXH_DISABLE_PLUGIN_AUTOLOAD="1", PIDS=str(pids), PYTHONFAULTHANDLER="1")
    p = subprocess.Popen([sys.executable, "-m", "tirxh", "check", "-n", "2"], cwd=tirxh.path,
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=_sigint_as_a_terminal_leaves_it)
    try:
        deadline = time.time() + 120
        while len(list(pids.iterdir())) < 2 and time.time() < deadline:
            time.sleep(0.2)
        workers = [int(f.name) for f in pids.iterdir()]
        assert len(workers) == 2, p.poll()
        sent = time.time()
        p.send_signal(signal.SIGINT)  # the main process only: it must stop its workers
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGABRT)
            time.sleep(5)  # faulthandler writes the stacks; then free the pipes the
            for pid in workers:  # workers inherited, or communicate waits for them too
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            out, err = p.communicate(timeout=30)
            pytest.fail(f"still running {time.time() - sent:.0f} s after SIGINT (pids "
                        f"appeared {sent - deadline + 120:.1f} s after the start); stdout:\n"
                        f"{out}\nstderr (faulthandler's stacks):\n{err}")
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 2, (out, err)
    assert "ERROR: interrupted" in err
    for pid in workers:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_prints_in_workers_go_to_stderr_and_collection_prints_once(tirxh):
    tirxh.project(b_many=MANY.replace("import numpy as np", "import numpy as np\nprint('importing')"))
    tirxh.write("tirxconf.py", CLEAN_ANALYZER.replace(
        "def tirxh_check_item(item):\n", "def tirxh_check_item(item):\n    print('checking')\n"))
    r = tirxh.run_subprocess("check", "-n", "2", "--json")
    assert r.ret == 0, r
    assert json.loads(r.stdout.replace("importing\n", "", 1))["summary"]["passed"] == 5
    assert r.stdout.count("importing") == 1  # the main process's collection; workers are quiet
    assert r.stderr.count("checking") == 5  # each check, from a worker, on stderr
