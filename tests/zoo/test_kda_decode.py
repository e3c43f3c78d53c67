"""zoo/kernels/kda_decode.py: every small case in numsim against the float64 recurrence (mixed,
saturated and slow gates, 1 to 4 tokens), clean under sync_check, two launches of one token equal
one of two tokens (the in-place state carries over), refused shapes."""

import numpy as np
import pytest

import tirxh.lang as T
from tests.zoo._zoo import sync_race
from tests.zoo.zoo_modules import assert_matches, load, simulate, small_cases

MOD = load("kda_decode")


@pytest.mark.parametrize("case", small_cases("kda_decode"), ids=lambda c: c.name)
def test_small_case_matches_reference(case):
    res, inputs = simulate(MOD.SUITE, case)
    assert_matches(MOD.SUITE, case, res, inputs)


def test_sync_check_is_clean():
    case = MOD.SUITE.cases[0]
    for result in sync_race(MOD.SUITE, case):
        assert result.verdict == "clean", [f.message for f in result.findings]


def test_two_single_token_launches_equal_one_two_token_launch():
    two = next(c for c in MOD.SUITE.cases if c.name == "n2_h2_t1")
    two = type(two)("t2", dict(two.params, TT=2))
    x = MOD.SUITE.make_inputs(two, seed=3)
    res2, _ = simulate(MOD.SUITE, two, inputs=x)
    one = type(two)("t1", dict(two.params, TT=1))
    state = x["state"].copy()
    outs = []
    for t in range(2):
        step = dict(x, state=state, o=np.empty_like(x["o"][:, :1]),
                    **{n: np.ascontiguousarray(x[n][:, t:t + 1])
                       for n in ("q", "k", "v", "g_raw", "beta")})
        res, _ = simulate(MOD.SUITE, one, inputs=step)
        state = res.outputs["state"]
        outs.append(res.outputs["o"])
    np.testing.assert_array_equal(np.concatenate(outs, axis=1), res2.outputs["o"])
    np.testing.assert_array_equal(state, res2.outputs["state"])


@pytest.mark.parametrize("params,match", [
    (dict(N=2, H=2, TT=5), r"TT=5 tokens per sequence must be in \[1, 4\] \(decode\)"),
    (dict(N=70000, H=2, TT=1), r"N=70000 and H=2 must be in \[1, 65535\]"),
    (dict(N=4096, H=64, TT=1), r"N=4096, H=64: the state must hold fewer than 2\^32 elements"),
])
def test_refused_shapes_name_the_case_and_the_rule(params, match):
    with pytest.raises(ValueError, match=r"case 'bad': " + match):
        T.suite(MOD.kda_decode, inputs=MOD.inputs, reference=MOD.reference, outputs=["o"],
                constraints=MOD.constraints, cases=[T.case("bad", **params)])
