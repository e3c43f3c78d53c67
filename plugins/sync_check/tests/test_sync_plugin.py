"""The tirxh plugin end to end: `tirxh check` on a project runs both analyses on each kernel's
small cases (or only the smallest), fails on a finding and prints it with its source lines and
witness."""

from __future__ import annotations

import json
import textwrap

import pytest

from tirxh import main
from tirxh.api import Finding
from tirxh_sync_check.plugin import smallest_case

import tirxh.lang as T

from sync_check_testutil import CORPUS as CORPUS_DIR

KERNELS = '''
import sys
sys.path.insert(0, {corpus!r})
import mbar_phase_overrun as m
import tirxh.lang as T


def inputs(rng, k):
    return m.inputs()


BUGGY = T.suite(m.buggy, inputs=inputs, reference=m.reference, outputs=["out"],
                cases=[T.case("k4", k=4), T.case("k8", k=8)])
FIXED = T.suite(m.fixed, inputs=inputs, reference=m.reference, outputs=["out"],
                cases=[T.case("k4", k=4)])
'''


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "tirx.toml").write_text(textwrap.dedent("""
        [project]
        name = "p"
        targets = ["sm_90a"]
        kernels = ["kernels/*.py"]
    """))
    (tmp_path / "kernels" / "pipe.py").write_text(KERNELS.format(corpus=str(CORPUS_DIR)))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TIRXH_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("TIRXH_CACHE_DIR", str(tmp_path / ".cache"))
    return tmp_path


def _check(capsys, *extra):
    rc = main(["check", "-p", "tirxh_sync_check.plugin", *extra])
    return rc, capsys.readouterr().out


def test_check_fails_on_the_buggy_kernel_and_shows_the_source(project, capsys):
    rc, out = _check(capsys, "-k", "buggy")
    assert rc == 1, out
    assert "[synccheck] error" in out and "mbarrier.phase-overrun" in out
    assert "sync_check findings" in out
    assert "full.wait(ring.phase)" in out  # the source context of the finding
    assert "<-- here" in out  # the witness interleaving
    # every small case is analyzed by default: k4 and k8 both fail
    assert "2 failed" in out


def test_cases_smallest_checks_only_each_kernels_smallest_case(project, capsys):
    with open(project / "tirx.toml", "a") as f:
        f.write('\n[sync_check]\ncases = "smallest"\n')
    rc, out = _check(capsys, "-k", "buggy")
    assert rc == 1, out
    # k8 is not the smallest: nothing checks it, so it is compiled only
    assert "1 failed, 1 compiled" in out


def test_exclude_tags_leave_tagged_cases_unanalyzed(project, capsys):
    src = (project / "kernels" / "pipe.py").read_text()
    (project / "kernels" / "pipe.py").write_text(src.replace(
        'T.case("k8", k=8)', 'T.case("k8", k=8, tags=("sync-slow",))'))
    with open(project / "tirx.toml", "a") as f:
        f.write('\n[sync_check]\nexclude_tags = ["sync-slow"]\n')
    rc, out = _check(capsys, "-k", "buggy")
    assert rc == 1, out
    assert "1 failed, 1 compiled" in out  # k8 carries the tag: compiled, not analyzed


def test_check_passes_the_fixed_kernel(project, capsys):
    rc, out = _check(capsys, "-k", "fixed")
    assert rc == 0, out
    assert "1 passed" in out


def test_sarif_and_report_log_carry_the_same_findings(project, capsys, tmp_path):
    sarif, log = tmp_path / "r.sarif", tmp_path / "r.jsonl"
    rc, out = _check(capsys, "-k", "buggy", "--sarif", str(sarif), "--report-log", str(log))
    assert rc == 1
    s = json.loads(sarif.read_text())
    rules = {r["ruleId"] for run in s["runs"] for r in run["results"]}
    assert "mbarrier.phase-overrun" in rules
    text = log.read_text()
    assert "mbarrier.phase-overrun" in text and "witness" in text


def test_smallest_case_is_the_one_with_least_work():
    from sync_check_testutil import load_module
    kern = load_module(CORPUS_DIR / "mbar_phase_overrun.py").buggy
    s = T.suite(kern, inputs=lambda: {},
                cases=[T.case("big", n=4096), T.case("small", n=64),
                       T.case("huge", n=1 << 30, small=False)])
    assert smallest_case(s).name == "small"


def test_finding_json_round_trip():
    from tirxh_sync_check import check_kernel
    from sync_check_testutil import load_module
    mod = load_module(CORPUS_DIR / "race_rw_shared.py")
    _, race = check_kernel(mod.buggy, mod.inputs(), grid=mod.GRID)
    f = race.findings[0]
    back = Finding.from_json(json.loads(json.dumps(f.to_json())))
    assert back.kind == f.kind and back.where.line == f.where.line
    assert back.related[0].line == f.related[0].line and back.witness == f.witness


def test_findings_checked_in_worker_processes_are_summarized(project, capsys):
    """`tirxh check -n 2`: the analysis runs in workers; the summary comes from the reports."""
    rc, serial = _check(capsys, "-k", "buggy")
    rc_n, par = _check(capsys, "-k", "buggy", "-n", "2")
    assert rc == rc_n == 1, par
    assert "sync_check findings" in par and "full.wait(ring.phase)" in par
    assert par.splitlines()[:-1] == serial.splitlines()[:-1]  # the last line has the time
