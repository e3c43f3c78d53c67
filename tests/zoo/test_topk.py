"""zoo/kernels/topk.py: small cases exact in numsim (values and indices, ties by lowest index),
refused shapes."""

import numpy as np
import pytest

from tests.zoo.zoo_modules import (assert_matches, declare, load, load_mutant, mismatches,
                                  simulate)

MOD = load("topk")
CASES = [(s, c) for s in (MOD.SUITE_F32, MOD.SUITE_BF16) for c in s.cases if c.small]


@pytest.mark.parametrize("suite,case", CASES, ids=[f"{s.name}-{c.name}" for s, c in CASES])
def test_small_case_is_exact(suite, case):
    res, inputs = simulate(suite, case)
    assert_matches(suite, case, res, inputs)


def test_ties_take_the_lowest_indices():
    """A row of equal values: the first k columns, in order."""
    case = MOD.make_case("ties", rows=1, cols=512, k=10, BLOCK=64)
    inputs = MOD.SUITE_F32.make_inputs(case, 0)
    inputs["x"][:] = 1.5
    inputs["x"][0, 300] = 2.0
    res, _ = simulate(MOD.SUITE_F32, case, inputs=inputs)
    assert res.outputs["indices"][0].tolist() == [300] + list(range(9))
    assert res.outputs["values"][0].tolist() == [2.0] + [1.5] * 9


def test_negative_values_and_infinities_order_as_floats():
    case = MOD.make_case("signs", rows=1, cols=256, k=5, BLOCK=64)
    inputs = MOD.SUITE_F32.make_inputs(case, 0)
    x = -np.abs(inputs["x"]) - 1.0
    x[0, 17], x[0, 99], x[0, 5] = -np.inf, np.inf, -0.5
    inputs["x"] = x
    res, _ = simulate(MOD.SUITE_F32, case, inputs=inputs)
    assert res.outputs["indices"][0, :2].tolist() == [99, 5]
    assert res.outputs["values"][0, 0] == np.inf


@pytest.mark.parametrize("dt,params,match", [
    ("f32", dict(rows=1, cols=1000, k=65), r"case 'bad': k=65 must be in \[1, min\(64"),
    ("bf16", dict(rows=1, cols=1001, k=4), r"case 'bad': cols=1001 must be a multiple of 8 "
                                           r"\(bf16"),
    ("f32", dict(rows=1, cols=1 << 17, k=4, BLOCK=1024), r"cols=131072 exceeds 65536"),
    ("f32", dict(rows=1, cols=65536, k=4, BLOCK=256),
     r"case 'bad': cols=65536 needs 256 elements per thread at BLOCK=256; a row must fit"),
    ("f32", dict(rows=1, cols=1024, k=4, BLOCK=32), r"BLOCK=32 must be a multiple of 32 in "
                                                    r"\[64, 1024\]"),
])
def test_refused_shapes_name_the_case_and_the_constraint(dt, params, match):
    suite = MOD.SUITE_F32 if dt == "f32" else MOD.SUITE_BF16
    rules = MOD.constraints_f32 if dt == "f32" else MOD.constraints_bf16
    with pytest.raises(ValueError, match=match):
        declare(suite, MOD.make_case("bad", **params), rules)


def test_the_check_catches_ties_taken_past_k(tmp_path):
    """Without the index threshold every element equal to the k-th value is taken (row 0 of the
    case is mostly ties): more than k winners, a wrong selection or a slot past the end."""
    mut = load_mutant("topk", "(inv_index(e) >= ithr)", "(inv_index(e) >= 0)", tmp_path)
    case = next(c for c in mut.SUITE_F32.cases if c.name == "r3_c2052_k64")
    res, inputs = simulate(mut.SUITE_F32, case)
    assert res.verdict != "clean" or mismatches(mut.SUITE_F32, case, res, inputs)
