"""zoo/kernels/topk.py: small cases exact in numsim (values and indices, ties by lowest index),
refused shapes."""

import numpy as np
import pytest

from tests.zoo.zoo_modules import (assert_matches, declare, load, load_mutant, mismatches,
                                  simulate)

MOD = load("topk")
CASES = [(s, c) for s in (MOD.SUITE_F32, MOD.SUITE_BF16, MOD.SUITE_F32_PIPE, MOD.SUITE_BF16_PIPE)
         for c in s.cases if c.small]


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
    mut = load_mutant("topk", "(e.inv() >= ithr)", "(e.inv() >= 0)", tmp_path)
    case = next(c for c in mut.SUITE_F32.cases if c.name == "r3_c2052_k64")
    res, inputs = simulate(mut.SUITE_F32, case)
    assert res.verdict != "clean" or mismatches(mut.SUITE_F32, case, res, inputs)


# --- topk_*_pipe: persistent CTAs, the next row streamed in, a threshold filter -------------------

def _pipe_case(name):
    return next(c for c in MOD.SUITE_F32_PIPE.cases if c.name == name)


def _wrong_rows(suite, case, res, inputs) -> list:
    want = suite.expected(case, inputs)
    return [r for r in range(case.params["rows"])
            if not (np.array_equal(res.outputs["indices"][r], want["indices"][r]) and
                    np.array_equal(res.outputs["values"][r], want["values"][r]))]


@pytest.mark.parametrize("old,new,wrong", [
    # the whole-row path dropped: only row 0 (heavy ties: more candidates than slots) needs it
    ("            _select_exact(select, winners, elems, k, keybits, AGG)\n"
     "        winners.store(", "            pass\n        winners.store(", [0]),
    # the candidate path selecting among nothing: every other row needs it
    ("            _select_exact(select, winners, [_Elem(ck, lambda: ci)], k, keybits, AGG,\n"
     "                          match=lambda e: valid)",
     "            pass", [1, 2, 3, 4]),
])
def test_pipe_rows_take_the_path_their_candidates_ask_for(old, new, wrong, tmp_path):
    """Both paths of the selection run and each is needed where expected (the unmutated kernel
    is exact on every row: test_small_case_is_exact)."""
    mut = load_mutant("topk", old, new, tmp_path)
    case = _pipe_case("r5_c2052_k64")
    res, inputs = simulate(mut.SUITE_F32_PIPE, case)
    assert _wrong_rows(mut.SUITE_F32_PIPE, case, res, inputs) == wrong


def test_pipe_threshold_filter_keeps_rows_whose_maxima_sit_in_few_threads():
    """Adversarial for the filter: the k largest all in one thread's elements. T0 (the k-th
    largest thread maximum) is then far below them, still reached by at least k elements (the
    top-k threads' maxima), so the selection stays exact."""
    case = _pipe_case("r5_c2052_k64")
    inputs = MOD.SUITE_F32_PIPE.make_inputs(case, 1)
    x = inputs["x"]
    x[1] = -np.abs(x[1])
    x[1, [4 * 128 * c + j for c in range(4) for j in range(4)]] = 100.0 + np.arange(16)
    res, _ = simulate(MOD.SUITE_F32_PIPE, case, inputs=inputs)
    assert_matches(MOD.SUITE_F32_PIPE, case, res, inputs)


def test_pipe_sync_clean_and_a_refill_before_the_barrier_is_caught(tmp_path):
    sc = pytest.importorskip("tirxh_sync_check")
    case = _pipe_case("r5_c2052_k64")

    def kinds(suite):
        sync, race = sc.check_kernel(suite.kernel, suite.make_inputs(case, 0),
                                     consts=suite.consts(case), grid=suite.grid(case))
        return [f.kind for f in sync.findings + race.findings], sync.verdict, race.verdict
    assert kinds(MOD.SUITE_F32_PIPE) == ([], "clean", "clean")
    mut = load_mutant("topk", "        T.ptx.bar.sync(0)     # every thread holds its keys: the "
                      "copy may take the next row\n", "", tmp_path)
    found, _, _ = kinds(mut.SUITE_F32_PIPE)
    assert any(k.startswith("race") for k in found), found


@pytest.mark.parametrize("dt,params,match", [
    ("f32", dict(rows=1, cols=65536, k=4), r"cols=65536: the row copy and 1024 candidate slots "
                                           r"take 270336 bytes"),
    ("f32", dict(rows=1, cols=1024, k=4, PASSES=3), r"PASSES=3 \(digits of the threshold T0\)"),
    ("bf16", dict(rows=1, cols=1024, k=4, CTAS=0), r"CTAS=0 must be positive"),
    ("bf16", dict(rows=1, cols=1000, k=65), r"k=65 must be in"),
])
def test_pipe_refused_shapes_name_the_case_and_the_constraint(dt, params, match):
    suite = MOD.SUITE_F32_PIPE if dt == "f32" else MOD.SUITE_BF16_PIPE
    rules = MOD.pipe_constraints_f32 if dt == "f32" else MOD.pipe_constraints_bf16
    with pytest.raises(ValueError, match=r"case 'bad': " + match):
        declare(suite, MOD.make_pipe_case("bad", **params), rules)
