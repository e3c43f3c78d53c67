"""zoo/kernels/decode_attention.py: small cases in numsim against float64 attention (with every
cache slot outside a sequence NaN, so a leak shows), a second launch on the same scratch (the
split counters reset themselves), refused shapes."""

import numpy as np
import pytest

from tests.zoo.zoo_modules import assert_matches, load, simulate, small_cases

MOD = load("decode_attention")


@pytest.mark.parametrize("case", small_cases("decode_attention"), ids=lambda c: c.name)
def test_small_case_matches_reference(case):
    res, inputs = simulate(MOD.SUITE, case)
    assert np.isnan(inputs["k_cache"].astype(np.float32)).any()  # stale slots are poisoned
    assert_matches(MOD.SUITE, case, res, inputs)


def test_split_counters_reset_for_the_next_launch():
    case = MOD.make_case("twice", B=1, KVH=1, G=2, PAGE=16, L=100, SPLITS=2, STAGES=2)
    res, inputs = simulate(MOD.SUITE, case)
    assert_matches(MOD.SUITE, case, res, inputs)
    assert res.outputs["counters"].tolist() == [[0]]
    again = dict(inputs, q=-inputs["q"], counters=res.outputs["counters"],
                 part_o=res.outputs["part_o"], part_ml=res.outputs["part_ml"])
    res2, _ = simulate(MOD.SUITE, case, inputs=again)
    assert_matches(MOD.SUITE, case, res2, again)


@pytest.mark.parametrize("params,match", [
    (dict(G=17), r"decode_attention case 'bad': G=17 query heads per KV head must be in "
                 r"\[1, 16\]"),
    (dict(PAGE=24), r"PAGE=24 must be 16, 32, 64, 128 or 256 tokens"),
    (dict(SPLITS=0), r"SPLITS=0 must be in \[1, 64\]"),
    (dict(lens=(5, 200)), r"lens=\(5, 200\) must hold B=2 lengths in \[1, L=100\]"),
    (dict(lens=(0, 10)), r"lens=\(0, 10\) must hold B=2 lengths"),
])
def test_refused_shapes_name_the_case_and_the_constraint(params, match):
    base = dict(B=2, KVH=1, G=4, PAGE=16, L=100)
    with pytest.raises(ValueError, match=match):
        MOD.make_case("bad", **dict(base, **params))
