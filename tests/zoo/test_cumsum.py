"""zoo/kernels/cumsum.py (decoupled look-back): small cases bit-exact in numsim, the scratch state
reusable across launches (epochs), the error bound on real-valued data, refused shapes."""

import numpy as np
import pytest

import tirxh.lang as T
from tests.zoo.zoo_modules import (assert_matches, declare, load, load_mutant, mismatches,
                                  simulate, small_cases)

MOD = load("cumsum")
EPS = np.finfo(np.float32).eps


@pytest.mark.parametrize("case", small_cases("cumsum"), ids=lambda c: c.name)
def test_small_case_is_exact(case):
    res, inputs = simulate(MOD.SUITE, case)
    assert_matches(MOD.SUITE, case, res, inputs)


def test_second_launch_on_the_same_scratch_is_right():
    """Flags and counter are not cleared between launches (as in a timing loop): the epoch in
    each flag keeps the first launch's prefixes from being read by the second."""
    case = MOD.make_case("twice", rows=2, cols=3000, BLOCK=32, CHUNKS=4)
    res, inputs = simulate(MOD.SUITE, case)
    ntiles = MOD.SUITE.grid(case)[0]
    assert int(res.outputs["counter"][0]) == ntiles
    again = dict(inputs, x=np.flip(inputs["x"], axis=1).copy(),
                 flags=res.outputs["flags"], counter=res.outputs["counter"])
    res2, _ = simulate(MOD.SUITE, case, inputs=again)
    assert_matches(MOD.SUITE, case, res2, again)
    assert int(res2.outputs["counter"][0]) == 2 * ntiles
    tags = res2.outputs["flags"] >> np.uint64(32)
    assert set((tags >> np.uint64(2)).tolist()) == {1}  # every flag carries epoch 1
    assert set((tags & np.uint64(3)).tolist()) == {MOD.ST_P}


def test_error_on_real_valued_data_is_within_the_stated_bound():
    case = MOD.make_case("normal", rows=2, cols=20000, BLOCK=64, CHUNKS=2)
    inputs = MOD.SUITE.make_inputs(case, 3)
    rng = np.random.default_rng(5)
    inputs["x"] = (rng.standard_normal(inputs["x"].shape) * 10).astype(np.float32)
    res, _ = simulate(MOD.SUITE, case, inputs=inputs)
    x = inputs["x"].astype(np.float64)
    err = np.abs(res.outputs["out"] - np.cumsum(x, axis=1))
    tile = MOD.tile_elems(64, 2, 4)
    tiles_before = np.arange(x.shape[1]) // tile + 1
    bound = (np.log2(tile) + tiles_before) * EPS * np.cumsum(np.abs(x), axis=1)
    assert (err <= bound).all()
    assert err.max() > 0  # real-valued data does round (the bound is not vacuous)


@pytest.mark.parametrize("params,match", [
    (dict(rows=1, cols=1000, BLOCK=512, CHUNKS=4),
     r"case 'bad': BLOCK/32 \* CHUNKS = 64 warp totals must fit one warp's scan"),
    (dict(rows=1, cols=1000, BLOCK=48), r"case 'bad': BLOCK=48 must be a multiple of 32"),
    (dict(rows=1, cols=0), r"case 'bad': rows=1 and cols=0 must be positive"),
    (dict(rows=64, cols=1 << 26), r"case 'bad': rows\*cols=4294967296 must be below"),
])
def test_refused_shapes_name_the_case_and_the_constraint(params, match):
    with pytest.raises(ValueError, match=match):
        declare(MOD.SUITE, MOD.make_case("bad", **params), MOD.constraints)


def test_a_vector_width_that_does_not_divide_the_row_is_refused():
    case = T.case("bad", rows=2, cols=1002, VEC=4)
    with pytest.raises(ValueError, match=r"case 'bad': cols=1002 must be a multiple of VEC=4"):
        declare(MOD.SUITE, case, MOD.constraints)


def test_the_check_catches_a_missing_look_back(tmp_path):
    mut = load_mutant("cumsum", "prefix.set(_look_back(flags, tile, tile - t_in_row, agg, epoch, "
                      "lane))", "pass", tmp_path)
    case = next(c for c in mut.SUITE.cases if c.name == "r1_c5000")
    res, inputs = simulate(mut.SUITE, case)
    assert mismatches(mut.SUITE, case, res, inputs)
