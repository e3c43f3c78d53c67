"""The labelled corpus: every buggy kernel is found with the right kind and line; its fixed twin
gets no finding.

Each ``corpus/*.py`` holds ``buggy`` and ``fixed`` kernels, ``inputs()``, ``GRID`` and one
``# EXPECT: kind`` marker on the line the finding must point at (`Finding.where`). Both kernels run
through numsim with a trace, then through both analyses (`tirxh_sync_check.check_kernel`).
"""

from __future__ import annotations

import numpy as np
import pytest

from sync_check_testutil import corpus_files, expectation, issue13_class, load_module
from tirxh_sync_check import KINDS, check_kernel, format_finding

FILES = corpus_files()


def _run(mod, name):
    sync, race = check_kernel(getattr(mod, name), mod.inputs(), grid=mod.GRID)
    return sync, race, sync.findings + race.findings


def _show(findings) -> str:
    return "\n".join(format_finding(f) for f in findings)


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_buggy_kernel_is_found(path):
    mod = load_module(path)
    exp = expectation(path)
    assert exp["kind"] in KINDS, f"{path.name}: unknown finding kind {exp['kind']!r}"
    sync, race, findings = _run(mod, "buggy")
    hits = [f for f in findings if f.kind == exp["kind"] and f.where is not None
            and f.where.line == exp["line"] and f.where.file == str(path)]
    assert hits, (f"{path.name}: expected {exp['kind']} at line {exp['line']}; got:\n"
                  + _show(findings))
    f = hits[0]
    assert f.severity == "error"
    assert f.witness, "a finding carries its witness"
    assert f.warps, "a finding names the warps involved"
    assert "error" in (sync.verdict, race.verdict)


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_fixed_twin_is_clean(path):
    mod = load_module(path)
    sync, race, findings = _run(mod, "fixed")
    not_run = [f for f in findings if f.severity == "incomplete"]
    bugs = [f for f in findings if f.severity != "incomplete"]
    assert not bugs, f"{path.name}: findings on the fixed twin:\n" + _show(bugs)
    assert not not_run, f"{path.name}: the fixed twin was not fully analyzed:\n" + _show(not_run)
    assert sync.verdict == "clean" and race.verdict == "clean"


def _identity(findings) -> list:
    return sorted((f.kind, f.severity, f.where.line if f.where else None) for f in findings)


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_grouped_and_per_warp_traces_give_the_same_findings(path):
    """numsim's traced run groups a CTA's warps (one event per warp); running every warp alone
    (`per_warp`, the schedule before) gives the same verdicts and the same findings (kind,
    severity, line) on both kernels: the analyses depend on no more than `events.py`'s contract."""
    mod = load_module(path)
    for name in ("buggy", "fixed"):
        got = [check_kernel(getattr(mod, name), mod.inputs(), grid=mod.GRID, per_warp=pw)
               for pw in (False, True)]
        (gs, gr), (ps, pr) = got
        assert (gs.verdict, gr.verdict) == (ps.verdict, pr.verdict), (name, got)
        assert _identity(gs.findings + gr.findings) == _identity(ps.findings + pr.findings), \
            f"{path.name} {name}:\n" + _show(gs.findings + gr.findings) + "\n--- per_warp:\n" + \
            _show(ps.findings + pr.findings)


def test_corpus_covers_every_finding_kind():
    kinds = {expectation(p)["kind"] for p in FILES}
    assert len(FILES) >= 24
    assert kinds == set(KINDS), f"kinds without a corpus kernel: {sorted(set(KINDS) - kinds)}"


def test_every_issue13_class_has_three_labelled_pairs():
    """Issue 13's six bug classes: at least three buggy/twin pairs each (`# ISSUE13: class N`)."""
    per: dict = {}
    for p in FILES:
        c = issue13_class(p)
        if c is not None:
            per.setdefault(c, []).append(p.stem)
    short = {c: per.get(c, []) for c in range(1, 7) if len(per.get(c, [])) < 3}
    assert not short, f"classes with fewer than three pairs: {short}"


def test_phase_overrun_pipeline_is_correct_in_numsim():
    """The issue's case: the buggy pipeline computes the right output in numsim, yet is flagged."""
    import tirxh_numsim
    path = [p for p in FILES if p.stem == "mbar_phase_overrun"][0]
    mod = load_module(path)
    for name in ("buggy", "fixed"):
        inp = mod.inputs()
        res = tirxh_numsim.run(getattr(mod, name), inp, grid=mod.GRID, outputs=["out"])
        assert res.verdict == "clean", res.summary()
        np.testing.assert_array_equal(res.outputs["out"], mod.reference(**inp)["out"])
    _, _, findings = _run(mod, "buggy")
    assert any(f.kind == "mbarrier.phase-overrun" for f in findings)
