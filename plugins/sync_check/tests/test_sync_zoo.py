"""No finding on any zoo kernel: both analyses on each zoo suite's smallest case must be clean."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import tirxh.lang as T
from sync_check_testutil import load_module
from tirxh_sync_check import check_kernel, format_finding
from tirxh_sync_check.plugin import smallest_case

ZOO = Path(__file__).resolve().parents[3] / "zoo" / "kernels"
# the zoo is a directory of kernel files whose modules import siblings (hopper, gemm_host), as
# tirxh's collection lets them: the same path here, so the file also runs on its own
if str(ZOO) not in sys.path:
    sys.path.insert(0, str(ZOO))


def _suites():
    """Every zoo suite with a small case (what `tirxh check` simulates); a timing-only suite
    (large cases alone, e.g. kda_bwd_local's SUITE_TIMING) has nothing sized for the analyzers:
    its smallest case is a T8192 H64 problem whose racecheck shadow alone is ~100 GB."""
    out = []
    for path in sorted(ZOO.glob("*.py")):
        mod = load_module(path)
        out += [(path.stem, name, s) for name, s in vars(mod).items()
                if isinstance(s, T.Suite) and any(c.small for c in s.cases)]
    return out


SUITES = _suites()


@pytest.mark.parametrize("stem,name,suite", SUITES, ids=[f"{s}::{n}" for s, n, _ in SUITES])
def test_zoo_kernel_is_clean(stem, name, suite):
    case = smallest_case(suite)
    sync, race = check_kernel(suite.kernel, suite.make_inputs(case, 0),
                              consts=suite.consts(case), grid=suite.grid(case))
    findings = sync.findings + race.findings
    bugs = [f for f in findings if f.severity != "incomplete"]
    assert not bugs, "\n".join(format_finding(f) for f in bugs)
    not_run = [f for f in findings if f.severity == "incomplete"]
    assert not not_run, "\n".join(format_finding(f) for f in not_run)


def test_gemm_releasing_a_stage_one_group_early_is_caught(tmp_path):
    """A realistic mutation of the zoo's wgmma GEMM: ``wgmma.wait_group 2`` instead of 1 lets the
    consumer release a stage while the wgmma of the previous K tile may still read it. Found as
    the producer's TMA overwriting a stage the wgmma reads (race.stage-reuse) and as consumers
    falling a phase behind (mbarrier.phase-overrun); numsim's output is still right."""
    import re
    src = (ZOO / "gemm_wgmma.py").read_text()
    mutated, n = re.subn(r"wgmma\.wait_group\.sync\.aligned\(1\)",
                         "wgmma.wait_group.sync.aligned(2)", src)
    assert n == 1, "the zoo GEMM no longer has the single wait_group(1) this test mutates"
    path = tmp_path / "gemm_mut.py"
    path.write_text(mutated)
    mod = load_module(path)
    suite = mod.SUITE
    case = T.case("k512_s2", M=128, N=128, K=512, STAGES=2)
    sync, race = check_kernel(suite.kernel, suite.make_inputs(case, 0),
                              consts=suite.consts(case), grid=suite.grid(case))
    kinds = {f.kind for f in sync.findings + race.findings}
    assert {"race.stage-reuse", "mbarrier.phase-overrun"} <= kinds, kinds
    reuse = [f for f in race.findings if f.kind == "race.stage-reuse"][0]
    assert reuse.where.label == "async write shared"  # the producer's TMA refilling the stage
