"""zoo/kernels/reduce_rows.py: row sums, one warp per row or (RW > 1) a row over RW warps."""

import re

import pytest

import tirxh.lang as T

from ._zoo import check, load, resident_ctas_per_sm, small_cases, spills, sync_race

rr = load("reduce_rows")


@pytest.mark.parametrize("suite,case", small_cases(rr.SUITE))
def test_small_cases_match_the_reference_in_numsim(suite, case):
    res = check(suite, case)
    assert res.verdict == "clean", [f.message for f in res.findings]


@pytest.mark.parametrize("name", ["r7_c1100_w2_u2", "r3_c1100_w16_u1_pol"])
def test_the_cross_warp_combine_is_race_free(name):
    """RW warps per row meet at one bar.sync: 7 rows over CTAs of 2 rows leave the last CTA a
    row past the end, whose warps still arrive (the barrier is outside every row branch)."""
    case = next(c for c in rr.SUITE.cases if c.name == name)
    sync, race = sync_race(rr.SUITE, case)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings


def test_rows_over_warps_take_inductors_geometry():
    """RW=16: a CTA of 512 threads per row, 8192 CTAs for 8192 rows (inductor's XBLOCK=1,
    RBLOCK=2048, 16 warps), 4 CTAs per SM at 32 registers; RW=1 keeps 4 rows per CTA."""
    suite = rr.SUITE
    plain = next(c for c in suite.cases if c.name == "r8192_c8192")
    tri = next(c for c in suite.cases if c.name == "r8192_c8192_w16_u1_pol_r32")
    assert suite.grid(plain) == (2048, 1, 1) and suite.grid(tri) == (8192, 1, 1)
    assert suite.kernel.specialize(**suite.consts(tri)).block == (512, 1, 1)
    assert resident_ctas_per_sm(suite, tri) == 4
    ptx = suite.kernel.compile("sm_90a", **suite.consts(tri)).ptx
    assert re.search(r"ld\.global\.L1::evict_first\.L2::cache_hint\.v4\.f32 .*%rd\d+;", ptx)
    assert ptx.count("bar.sync") == 1
    assert spills(suite) == {}


def test_session6_knobs_are_checked_when_declared():
    with pytest.raises(ValueError, match=r"case 'rw': RW=3 \(warps per row\) must be 1, 2, 4, 8, "
                                         r"16 or 32, POL=2 0 or 1 and MAXREG=8 0"):
        T.suite(rr.reduce_rows, inputs=rr.inputs, constraints=rr.constraints,
                cases=[T.case("rw", rows=4, cols=64, RW=3, POL=2, MAXREG=8)])
