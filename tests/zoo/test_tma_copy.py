"""zoo/kernels/tma_copy.py: a persistent TMA load/store copy through a shared-memory ring."""

import pytest

import tirxh.lang as T

from ._zoo import check, load, small_cases, sync_race

tc = load("tma_copy")


@pytest.mark.parametrize("suite,case", small_cases(tc.SUITE))
def test_small_cases_match_the_reference_in_numsim(suite, case):
    res = check(suite, case)
    assert res.verdict == "clean", [f.message for f in res.findings]


def test_stage_recycling_is_race_free():
    """21 tiles over 3 CTAs with 2 stages: every stage is refilled several times; racecheck
    proves each refill is ordered after the store that read the stage (wait_group.read)."""
    case = next(c for c in tc.SUITE.cases if c.name == "r100_c200_s2")
    assert tc.tiles(100, 200, 32, 64) == 16 and tc.SUITE.grid(case) == (3, 1, 1)
    sync, race = sync_race(tc.SUITE, case)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings
    assert "events checked" in race.summary


def test_the_grid_is_persistent():
    big = next(c for c in tc.SUITE.cases if c.name == "r16384_c8192")
    assert tc.SUITE.grid(big) == (396, 1, 1)  # 16384 tiles, 3 CTAs per SM on 132 SMs


def test_shapes_the_kernel_cannot_run_are_refused_when_declared():
    with pytest.raises(ValueError, match=r"case 'c12': R=64 must be >= 1 and C=12 a positive "
                                         r"multiple of 8"):
        T.suite(tc.tma_copy, inputs=tc.inputs, constraints=tc.constraints,
                cases=[T.case("c12", R=64, C=12)])
    with pytest.raises(ValueError, match=r"(?s)box BR x BC = 512 x 128.*STAGES=8: need at "
                                         r"least 2 stages"):
        T.suite(tc.tma_copy, inputs=tc.inputs, constraints=tc.constraints,
                cases=[T.case("box", R=64, C=64, BR=512, STAGES=8)])
