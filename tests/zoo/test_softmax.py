"""zoo/kernels/softmax.py: every small case in numsim against the float64 reference; shapes the
kernel cannot run are refused when the case is declared."""

import re

import numpy as np
import pytest

from tests.zoo._zoo import SMS, resident_ctas_per_sm, spills, sync_race
from tests.zoo.zoo_modules import assert_matches, declare, load, simulate

MOD = load("softmax")


CASES = [(s, c) for s in (MOD.SUITE, MOD.SUITE_TMA, MOD.SUITE_CE) for c in s.cases if c.small]


@pytest.mark.parametrize("suite,case", CASES, ids=[f"{s.name}-{c.name}" for s, c in CASES])
def test_small_case_matches_reference(suite, case):
    res, inputs = simulate(suite, case)
    assert_matches(suite, case, res, inputs)


def test_rows_sum_to_one_and_order_is_kept():
    case = MOD.make_case("probe", rows=2, cols=1000, BLOCK=128)
    res, inputs = simulate(MOD.SUITE, case)
    out = res.outputs["out"].astype(np.float64)
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=2e-2)
    x = inputs["x"].astype(np.float64)
    assert (np.argmax(out, axis=1) == np.argmax(x, axis=1)).all()


def test_a_wrong_kernel_is_caught():
    """The tolerance is tight enough to fail a softmax that forgets one element of the sum."""
    case = MOD.make_case("probe", rows=1, cols=64, BLOCK=32)
    res, inputs = simulate(MOD.SUITE, case)
    x = inputs["x"].astype(np.float64)[:, 1:]
    e = np.exp(x - x.max(axis=1, keepdims=True))
    wrong = np.concatenate([[[0.0]], e / e.sum(axis=1, keepdims=True)], axis=1)
    rep = MOD.SUITE.tolerance_for("out").compare(res.outputs["out"], wrong)
    assert not rep["ok"]


@pytest.mark.parametrize("params,match", [
    (dict(rows=4, cols=256 * 64 + 8), r"case 'bad': cols=16392 .* fit in one CTA's registers"),
    (dict(rows=4, cols=1000, BLOCK=100), r"case 'bad': BLOCK=100 must be a multiple of 32"),
    (dict(rows=0, cols=1000), r"case 'bad': rows=0 and cols=1000 must be positive"),
    (dict(rows=1 << 20, cols=1 << 12), r"case 'bad': rows\*cols=4294967296 must be below 2\^32"),
])
def test_refused_shapes_name_the_case_and_the_constraint(params, match):
    with pytest.raises(ValueError, match=r"T.suite\(softmax\): shapes the kernel does not "
                                         r"accept:\n  " + match):
        declare(MOD.SUITE, MOD.make_case("bad", **params), MOD.constraints)


@pytest.mark.parametrize("params,match", [
    (dict(rows=4, cols=1004), r"case 'bad': cols=1004 must be a multiple of 8"),
    (dict(rows=4, cols=32768, STAGES=4), r"STAGES=4 rows of 32768 bf16 need 262144 bytes of "
                                         r"shared memory"),
    (dict(rows=4, cols=1024, BLOCK=100), r"case 'bad': BLOCK=100 must be a multiple"),
    (dict(rows=4, cols=1024, POL=2), r"case 'bad': POL=2 must be 0 \(no policy\) or 1"),
    (dict(rows=4, cols=1032, SPLIT=2), r"case 'bad': SPLIT=2 must be >= 1 and divide cols=1032"),
])
def test_tma_variant_refuses_what_it_cannot_run(params, match):
    with pytest.raises(ValueError, match=match):
        declare(MOD.SUITE_TMA, MOD.make_tma_case("bad", **params), MOD.tma_constraints)


def test_cross_entropy_target_outside_the_row_is_nan_not_a_stray_read():
    case = MOD.make_ce_case("targets", rows=3, cols=500, BLOCK=64, UNROLL=1)
    inputs = MOD.SUITE_CE.make_inputs(case, 0)
    inputs["target"] = np.array([499, 500, -100], np.int64)
    res, _ = simulate(MOD.SUITE_CE, case, inputs=inputs)
    assert res.verdict == "clean"
    loss = res.outputs["loss"]
    assert np.isfinite(loss[0]) and np.isnan(loss[1]) and np.isnan(loss[2])
    np.testing.assert_allclose(res.outputs["lse"], MOD.ce_reference(inputs["x"], [0, 0, 0])["lse"],
                               rtol=1e-5)


@pytest.mark.parametrize("params,match", [
    (dict(rows=4, cols=1000, UNROLL=0), r"case 'bad': UNROLL=0 must be in \[1, 16\]"),
    (dict(rows=1 << 16, cols=1 << 16), r"case 'bad': rows\*cols=4294967296 must be"),
])
def test_cross_entropy_refusals(params, match):
    with pytest.raises(ValueError, match=match):
        declare(MOD.SUITE_CE, MOD.make_ce_case("bad", **params), MOD.ce_constraints)


def test_an_unknown_cache_hint_is_refused():
    with pytest.raises(ValueError, match=r"case 'bad': EF=2 must be 0 or 1 \(1: evict-first"):
        declare(MOD.SUITE, MOD.make_case("bad", rows=4, cols=1024, EF=2), MOD.constraints)
    with pytest.raises(ValueError, match=r"case 'bad': EF=3 must be 0 or 1"):
        declare(MOD.SUITE_CE, MOD.make_ce_case("bad", rows=4, cols=1024, EF=3),
                MOD.ce_constraints)


def test_persistent_tma_grids_fit_one_wave_and_the_balanced_one_divides_the_rows():
    """softmax_tma's CTAs must all be resident (a second wave would idle most SMs); the p256
    case exists to compare 256 CTAs of 64 rows with 264 of 62 or 63."""
    for case in (c for c in MOD.SUITE_TMA.cases if not c.small):
        grid = MOD.SUITE_TMA.grid(case)[0]
        assert grid <= SMS * resident_ctas_per_sm(MOD.SUITE_TMA, case), case.name
    p256 = next(c for c in MOD.SUITE_TMA.cases if c.name == "r16384_c8192_p256")
    assert p256.params["rows"] % MOD.SUITE_TMA.grid(p256)[0] == 0


def test_no_benchmarked_variant_spills():
    for suite in (MOD.SUITE, MOD.SUITE_TMA, MOD.SUITE_CE):
        assert spills(suite) == {}, suite.name


def test_two_stage_ring_refills_after_the_merge_barrier_race_free():
    """STAGES=2: a row's stage is refilled (thread 0's bulk copy) right after the barrier that
    every thread passes only after reading it; 9 rows over 2 CTAs reuse each stage twice."""
    case = next(c for c in MOD.SUITE_TMA.cases if c.name == "r9_c1032_s2_cta2")
    sync, race = sync_race(MOD.SUITE_TMA, case)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings


@pytest.mark.parametrize("name,kb", [("r16384_c8192_s4_b256", 144), ("r16384_c8192_p256", 62),
                                     ("r16384_c8192_p256_s2", 31),
                                     ("r16384_c8192_p128_s3_b1024", 32),
                                     ("r16384_c8192_s2_b256", 48), ("r65536_c2048", 80),
                                     ("r65536_c2048_s3_p512", 31),
                                     ("r16384_c8192_p512_s2_b256", 62),
                                     ("r65536_c2048_s3_p1024", 62)])
def test_rows_in_flight_per_sm_are_the_designed_points(name, kb):
    """KB of row loads per busy SM (`rows_in_flight` x CTAs / min(CTAs, 132)): docs/TUNING.md's
    predictions for softmax_tma are made at these points."""
    case = next(c for c in MOD.SUITE_TMA.cases if c.name == name)
    p = case.params
    grid = MOD.SUITE_TMA.grid(case)[0]
    per_cta = MOD.rows_in_flight(p["cols"], p["STAGES"])
    assert round(per_cta * grid / min(grid, SMS) / 1024) == kb


@pytest.mark.parametrize("name,hinted", [("r16384_c8192_s4_b256_pol", True),
                                         ("r16384_c8192_s4_b256_pol_k8", True),
                                         ("r65536_c2048_s3_p512_pol", True),
                                         ("r16384_c8192_s4_b256", False)])
def test_pol_gives_every_row_copy_the_evict_last_policy(name, hinted):
    """Session 11's POL=1 cases time the L2 policy alone: same ring, grid and math as their
    controls, every row copy (prologue and refill) hinted, and nothing else."""
    case = next(c for c in MOD.SUITE_TMA.cases if c.name == name)
    ptx = MOD.softmax_tma.compile("sm_90a", **MOD.SUITE_TMA.consts(case)).ptx
    copies = re.findall(r"cp\.async\.bulk\.shared::cluster\.global\S*", ptx)
    # the prologue's, then the refill, each in SPLIT pieces
    assert len(copies) == (case.params["STAGES"] + 1) * case.params["SPLIT"]
    assert {c.endswith(".L2::cache_hint") for c in copies} == {hinted}
    assert ("createpolicy.fractional.L2::evict_last.b64" in ptx) == hinted
    assert "evict_first" not in ptx and "st.global.v4.b32" in ptx


def test_the_evict_last_ring_refills_race_free():
    case = next(c for c in MOD.SUITE_TMA.cases if c.name == "r9_c1032_s2_cta2_pol")
    sync, race = sync_race(MOD.SUITE_TMA, case)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings


def test_split_rows_arm_once_and_copy_pieces_that_tile_the_row():
    """SPLIT=8: one ``expect_tx`` of the row's 16384 bytes, then 8 copies of 2048 bytes at
    element offsets 0, 1024, ..., 7168 of the stage and of the row; the small SPLIT=3 case
    (43-vector pieces, a 2-stage ring refilled twice) is race-free and in numsim exact."""
    case = next(c for c in MOD.SUITE_TMA.cases if c.name == "r16384_c8192_s4_b256_k8")
    ptx = MOD.softmax_tma.compile("sm_90a", **MOD.SUITE_TMA.consts(case)).ptx
    sizes = re.findall(r"cp\.async\.bulk\.shared::cluster\.global\S*\s+\[[^]]+\], "
                       r"\[[^]]+\], (\w+),", ptx)
    assert len(sizes) == 5 * 8 and set(sizes) == {"2048"}
    assert re.findall(r"expect_tx\S*\s+_, \[[^]]+\], (\w+);", ptx) == ["16384"] * 5
    small = next(c for c in MOD.SUITE_TMA.cases if c.name == "r9_c1032_s2_cta2_k3")
    sync, race = sync_race(MOD.SUITE_TMA, small)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings
