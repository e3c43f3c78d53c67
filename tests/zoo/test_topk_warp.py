"""zoo/kernels/topk_warp.py: small cases exact in numsim (values and indices, ties by lowest
index, k = 1 and 64, tails), the paths each row takes (the previous row's threshold and the
fallback from -inf, the column search among ties), sync_check, refused shapes."""

import math
import re
from pathlib import Path

import numpy as np
import pytest

from tests.zoo._zoo import SMS, resident_ctas_per_sm, ticket_atomics
from tests.zoo.zoo_modules import assert_matches, declare, load, load_mutant, simulate

MOD = load("topk_warp")
ZOO_TOPK = Path(MOD.__file__)
CASES = [(s, c) for s in (MOD.SUITE_F32, MOD.SUITE_BF16) for c in s.cases if c.small]


def _case(suite, name):
    return next(c for c in suite.cases if c.name == name)


def _wrong_rows(suite, case, res, inputs) -> list:
    want = suite.expected(case, inputs)
    return [r for r in range(case.params["rows"])
            if not (np.array_equal(res.outputs["indices"][r], want["indices"][r]) and
                    np.array_equal(res.outputs["values"][r], want["values"][r]))]


@pytest.mark.parametrize("suite,case", CASES, ids=[f"{s.name}-{c.name}" for s, c in CASES])
def test_small_case_is_exact(suite, case):
    res, inputs = simulate(suite, case)
    assert_matches(suite, case, res, inputs)


def _shifted_inputs():
    """Two warps (warp 0: rows 0, 2; warp 1: rows 1, 3) over normal rows, rows 2 and 3 far below
    the rows before them: the threshold carried over from rows 0 and 1 (the rank-16 value: ~40
    elements stay buffered at a row's end, so it is set) is reached by no element."""
    suite = MOD.SUITE_F32
    case = MOD.make_case("shifted", rows=4, cols=2048, k=8, WARPS=2, CTAS=1)
    inputs = suite.make_inputs(case, 2)
    inputs["x"][:] = np.random.default_rng(3).standard_normal((4, 2048)).astype(np.float32)
    inputs["x"][2:4] -= 100.0
    return suite, case, inputs


def test_a_row_below_the_carried_threshold_is_scanned_again_and_exact():
    suite, case, inputs = _shifted_inputs()
    res, _ = simulate(suite, case, inputs=inputs)
    assert_matches(suite, case, res, inputs)


def test_without_the_fallback_exactly_the_shifted_rows_go_wrong(tmp_path):
    mut = load_mutant("topk_warp", "        with T.if_(buf.count() < k, uniform=True), T.iket.range(\"again\"):\n",
                      "        with T.if_(buf.count() > 0xFFFFFFF, uniform=True):\n", tmp_path)
    suite, case, inputs = _shifted_inputs()
    res, _ = simulate(mut.SUITE_F32, case, inputs=inputs)
    assert _wrong_rows(mut.SUITE_F32, case, res, inputs) == [2, 3]


def test_rows_like_the_last_need_no_second_read(tmp_path):
    """Normal rows, three per warp, the second read disabled: every row after a warp's first
    starts from the carried threshold (the rank-2k value, or the smallest entry cut to 12 bits
    where fewer were buffered) and is still exact, so the carried value was reached by k."""
    mut = load_mutant("topk_warp", "        with T.if_(buf.count() < k, uniform=True), T.iket.range(\"again\"):\n",
                      "        with T.if_(buf.count() > 0xFFFFFFF, uniform=True):\n", tmp_path)
    for k, cap in ((64, 320), (5, 512)):
        case = MOD.make_case("normal", rows=6, cols=2048, k=k, WARPS=2, CTAS=1, CAP=cap)
        inputs = mut.SUITE_F32.make_inputs(case, 1)
        inputs["x"][:] = np.random.default_rng(k).standard_normal((6, 2048)).astype(np.float32)
        res, _ = simulate(mut.SUITE_F32, case, inputs=inputs)
        assert _wrong_rows(mut.SUITE_F32, case, res, inputs) == []


def test_without_the_column_search_the_row_of_ties_goes_wrong(tmp_path):
    """Row 0 holds integers -3..3 (hundreds of elements equal to the k-th value): keeping every
    tie overflows k and takes columns above the lowest ones."""
    mut = load_mutant("topk_warp", "        with T.if_(ties > need, uniform=True):",
                      "        with T.if_(ties > 0xFFFFFFF, uniform=True):", tmp_path)
    case = _case(MOD.SUITE_F32, "r5_c2052_k64")
    res, inputs = simulate(mut.SUITE_F32, case)
    assert 0 in _wrong_rows(mut.SUITE_F32, case, res, inputs)


def test_ties_take_the_lowest_indices_and_signed_zeros_order_as_keys():
    """Equal values everywhere but one: the first k columns after it. -0.0 ranks below +0.0 as
    topk.py's contract says (the numpy reference sees them equal, so this is asserted here)."""
    suite = MOD.SUITE_F32
    case = MOD.make_case("ties", rows=2, cols=1024, k=10, WARPS=1, CTAS=1, CAP=320)
    inputs = suite.make_inputs(case, 0)
    inputs["x"][0] = 1.5
    inputs["x"][0, 700] = 2.0
    inputs["x"][1] = -1.0
    inputs["x"][1, 3::7] = -0.0
    inputs["x"][1, 900] = 0.0
    res, _ = simulate(suite, case, inputs=inputs)
    assert res.outputs["indices"][0].tolist() == [700] + list(range(9))
    assert res.outputs["indices"][1].tolist() == [900] + list(range(3, 3 + 7 * 9, 7))
    assert res.outputs["values"][0].tolist() == [2.0] + [1.5] * 9


def test_sync_check_clean():
    sc = pytest.importorskip("tirxh_sync_check")
    for suite, name in ((MOD.SUITE_F32, "r5_c2052_k64"), (MOD.SUITE_BF16, "r4_c1000_k33"),
                        (MOD.SUITE_F32, "r3_c260_k64_st"), (MOD.SUITE_BF16, "r5_c1000_k33_st"),
                        (MOD.SUITE_F32, "r5_c2052_k64_apst"),
                        (MOD.SUITE_BF16, "r3_c2056_k64_v2_apst"),
                        (MOD.SUITE_F32, "r5_c2052_k64_fe3"), (MOD.SUITE_BF16, "r5_c1000_k33_fe2"),
                        (MOD.SUITE_F32, "r5_c2052_k64_fe3_sk"),
                        (MOD.SUITE_F32, "r5_c2052_k64_v8g1"), (MOD.SUITE_BF16, "r5_c1000_k33_g1"),
                        (MOD.SUITE_F32, "r5_c2052_k64_fu"), (MOD.SUITE_BF16, "r5_c1000_k33_fu"),
                        (MOD.SUITE_F32, "r6_c2052_k37_g1s12"),
                        (MOD.SUITE_F32, "r5_c4100_k7_sd"), (MOD.SUITE_F32, "r3_c8196_k50_v8_sd"),
                        (MOD.SUITE_BF16, "r5_c4104_k9_sd"),
                        (MOD.SUITE_F32, "r5_c4100_k7_sd2"),
                        (MOD.SUITE_F32, "r3_c8196_k50_v8_sd2"),
                        (MOD.SUITE_BF16, "r5_c4104_k9_sd2"),
                        (MOD.SUITE_BF16, "r5_c1000_k33_pk"), (MOD.SUITE_BF16, "r5_c4104_k9_pk2"),
                        (MOD.SUITE_BF16, "r3_c3000_k50_v4_pk"),
                        (MOD.SUITE_BF16, "r5_c4104_k50_v4_bk"),
                        (MOD.SUITE_BF16, "r5_c3112_k64_v8_bk"),
                        (MOD.SUITE_BF16, "r5_c4104_k50_v4_so"),
                        (MOD.SUITE_BF16, "r5_c3112_k64_so")):
        case = _case(suite, name)
        sync, race = sc.check_kernel(suite.kernel, suite.make_inputs(case, 0),
                                     consts=suite.consts(case), grid=suite.grid(case))
        assert [f.kind for f in sync.findings + race.findings] == []
        assert (sync.verdict, race.verdict) == ("clean", "clean")


@pytest.mark.parametrize("dt,params,match", [
    ("f32", dict(rows=1, cols=1000, k=65), r"k=65 must be in \[1, min\(64, cols\)\]"),
    ("f32", dict(rows=1, cols=32, k=33), r"k=33 must be in"),
    ("bf16", dict(rows=1, cols=1001, k=4), r"cols=1001 must be a multiple of 8 \(bf16"),
    ("f32", dict(rows=1, cols=1 << 17, k=4), r"cols=131072 exceeds 65536"),
    ("bf16", dict(rows=1, cols=1024, k=4, CAP=256, dt="bf16"), r"CAP=256 must be a multiple "
                                                               r"of 32 with room .* at least 320"),
    ("f32", dict(rows=1, cols=1024, k=4, CAP=512, VECS=4), r"CAP=512 must be .* VECS=4 vectors "
                                                           r"per lane \(512\): at least 576"),
    ("f32", dict(rows=1, cols=1024, k=4, WARPS=32, CAP=1024), r"WARPS=32 buffers of CAP=1024 "
                                                              r"and rings of STAGES=8 take "
                                                              r"393344 bytes"),
    ("f32", dict(rows=1, cols=1024, k=4, STAGES=3), r"STAGES=3 \(the cp.async ring\) must be a "
                                                    r"multiple of VECS=2"),
    ("f32", dict(rows=1 << 16, cols=1 << 16, k=4), r"rows\*cols=4294967296 must be below 2\^32"),
    ("f32", dict(rows=1, cols=1024, k=4, MAXREG=16), r"MAXREG=16 must be 0"),
    ("f32", dict(rows=0, cols=1024, k=4), r"rows=0 and CTAS=264 must be positive"),
    ("bf16", dict(rows=1, cols=1024, k=4, STRICT=2, dt="bf16"), r"STRICT=2 must be 0 or 1"),
    ("f32", dict(rows=1, cols=1024, k=4, APPEND=2), r"APPEND=2 must be 0 \(per-lane shared "
                                                    r"atomics\) or 1"),
    ("bf16", dict(rows=1, cols=1024, k=4, VECS=6, STAGES=12, CAP=512, APPEND=1, dt="bf16"),
     r"VECS=6 vectors of 8 elements: APPEND=1 filters a step in groups of 4 vectors .* at "
     r"most 4 or a multiple of it"),
    ("f32", dict(rows=1, cols=1024, k=4, CAP=64, APPEND=1), r"CAP=64 must be a multiple of 32 "
                                                            r"with room .* one append round "
                                                            r"\(32\): at least 96"),
    ("f32", dict(rows=1, cols=1024, k=33, CAP=256, APPEND=1, FE=1), r"FE=1 \(entries per lane "
                                                                   r".*\[2, 8\]"),
    ("bf16", dict(rows=1, cols=1024, k=4, CAP=96, APPEND=1, FE=4, dt="bf16"),
     r"FE=4 .* must be 0 \(min\(8, CAP/32\)\) or in .* = \[1, 3\]"),
    ("f32", dict(rows=1, cols=1024, k=4, SKEW=300_000), r"SKEW=300000 \(ns of start delay per "
                                                        r"warp phase\) must be in \[0, 250000\]"),
    ("f32", dict(rows=1, cols=1024, k=4, GUESS=3), r"GUESS=3 must be 0 \(the next row from rank "
                                                   r"2k \+ 16\), 1 .* or 2"),
    ("f32", dict(rows=1, cols=1024, k=4, SPLIT=4), r"SPLIT=4 must be 0 \(a row an item\) or 2"),
    ("bf16", dict(rows=1, cols=1032, k=4, dt="bf16", SPLIT=2),
     r"SPLIT=2 needs halves of whole vectors holding k \(cols=1032 a multiple of 16"),
    ("f32", dict(rows=1, cols=96, k=64, SPLIT=2), r"k=64 <= cols / 2"),
    ("bf16", dict(rows=1, cols=1024, k=4, GFETCH=2, dt="bf16"),
     r"GFETCH=2 must be 0 \(a second read appends from its registers\) or 1"),
    ("bf16", dict(rows=1, cols=1024, k=4, FUSE=3, dt="bf16"), r"FUSE=3 must be 0 \(a ranking "
                                                              r"pass per entry of a lane\) or 1"),
    ("f32", dict(rows=1, cols=1024, k=4, SEED=3), r"SEED=3 must be 0 \(a warp's first row from "
                                                  r"-inf\), 1 .* or 2"),
    ("f32", dict(rows=1, cols=1024, k=4, CAP=96, APPEND=1, PK=1), r"PK=1 compares bf16 halves "
                                                                  r"in place: it needs dt=bf16"),
    ("bf16", dict(rows=1, cols=1024, k=4, PK=1, dt="bf16"), r"PK=1 .* APPEND=1 \(got dt=bf16, "
                                                            r"APPEND=0\)"),
    ("f32", dict(rows=1, cols=1024, k=4, DYN=2), r"DYN=2 must be 0 \(the static walk\) or 1"),
    ("bf16", dict(rows=1, cols=4104, k=9, VECS=3, STAGES=12, CAP=96, dt="bf16", BULK=1),
     r"BULK=1 needs VECS a power of two \(got 3\)"),
    ("f32", dict(rows=1, cols=512, k=4, VECS=2, STAGES=8, DYN=1),
     r"DYN=1 needs a row of more steps \(2\) than the ring has in flight \(3\)"),
    ("f32", dict(rows=1, cols=2048, k=4, TAKE=1), r"TAKE=1 needs DYN=1"),
    ("f32", dict(rows=9, cols=2056, k=4, DYN=1, QUEUES=2), r"QUEUES=2 needs TAKE"),
    ("f32", dict(rows=9, cols=2056, k=4, WARPS=2, CTAS=2, VECS=8, STAGES=24, CAP=160, DYN=1,
                 TAKE=1, QUEUES=5), r"QUEUES=5 must be in \[1, 4\] \(at most 16 counters, and "
                                    r"a warp for each queue: 4 warps\)"),
    ("f32", dict(rows=1, cols=2056, k=4, VECS=8, STAGES=24, CAP=160, DYN=1, TAKE=3),
     r"TAKE=3 must be in \[1, 2\]: the ticket is asked TAKE of a row's 3 steps before its end"),
])
def test_refused_shapes_name_the_case_and_the_constraint(dt, params, match):
    suite = MOD.SUITE_F32 if dt == "f32" else MOD.SUITE_BF16
    rules = MOD.constraints_f32 if dt == "f32" else MOD.constraints_bf16
    with pytest.raises(ValueError, match=r"case 'bad': .*" + match):
        declare(suite, MOD.make_case("bad", **params), rules)


DEFAULTS = [(MOD.SUITE_F32, "r4096_c32768_k64"), (MOD.SUITE_F32, "r16384_c8192_k50"),
            (MOD.SUITE_BF16, "r8192_c32768_k64"), (MOD.SUITE_F32, "r4096_c32768_k64_st"),
            (MOD.SUITE_F32, "r16384_c8192_k50_st"), (MOD.SUITE_BF16, "r8192_c32768_k64_st")] + [
    (suite, c.name) for suite in (MOD.SUITE_F32, MOD.SUITE_BF16) for c in suite.cases
    if not c.small and c.params.get("APPEND")]   # session 9's (branch topk5)


@pytest.mark.slow(reason="13 ptxas compiles of the benchmarked cases (~4-7 s each)")
@pytest.mark.parametrize("suite,name", DEFAULTS, ids=[n for _, n in DEFAULTS])
def test_benchmarked_defaults_fill_each_sm_once_without_spills(suite, name):
    """The predictions (docs/TUNING.md "topk_warp") assume 16 warps per SM (2 CTAs of 8; scan7's
    `_w4s20`: 4 of 4; scan8's `_w32`: 4 CTAs of 8), all resident (the persistent grid is one
    wave, or one row a warp where there are fewer rows) and no spill traffic. Resident room
    may exceed the grid (session 25's register fetch took the bf16 defaults from 83 to 80
    registers: room for 3 CTAs an SM, the grid still 2): the grid decides the warps an SM."""
    case = _case(suite, name)
    r = suite.kernel.compile("sm_90a", **suite.consts(case)).resources
    assert (r.spill_stores, r.spill_loads) == (0, 0)
    per_sm = 32 if "_w32" in name else 16
    warps = case.params["WARPS"]
    grid = suite.grid(case)[0]
    assert grid <= SMS * resident_ctas_per_sm(suite, case)     # one wave: all resident
    assert grid == min(SMS * per_sm // warps, -(-case.params["rows"] // warps))


def _tie_row_run(strict, dt="f32", append=0):
    """One warp, one row of integers -3..3 (thousands equal to the k-th value), k = 64."""
    suite = MOD.SUITE_F32 if dt == "f32" else MOD.SUITE_BF16
    case = MOD.make_case("tie", rows=1, cols=4096, k=64, WARPS=1, CTAS=1, CAP=320, dt=dt,
                         STRICT=strict, APPEND=append)
    inputs = suite.make_inputs(case, 0)
    inputs["x"][0] = np.random.default_rng(5).integers(-3, 4, 4096).astype(inputs["x"].dtype)
    res, _ = simulate(suite, case, inputs=inputs)
    assert_matches(suite, case, res, inputs)
    return res.stats["ops"]


@pytest.mark.parametrize("dt", ["f32", "bf16"])
def test_strict_threshold_stops_a_row_of_ties_appending_and_stays_exact(dt):
    """STRICT (session 7, docs/TUNING.md "topk_warp, corrected"): after a refine the filter
    passes only keys above the k-th, so the ~500 elements equal to 3.0 past the first refine
    are no longer appended (warp-level atomics: 74 -> 11 f32) nor refined over (``redux.sync``
    rounds 816 -> 150; the session-6 filter's >= kept appending them: the suite's row 0 made
    warp 0 the kernel's tail); the answer is the same."""
    plain, strict = _tie_row_run(0, dt), _tie_row_run(1, dt)
    assert strict["atom"] * 4 < plain["atom"]
    assert strict["redux.sync"] * 4 < plain["redux.sync"]


def test_strict_threshold_keeps_the_lowest_columns_among_values_equal_across_a_refine():
    """Equal values on both sides of a refine: the ones after it are dropped by the strict
    filter and must rank below every kept one (higher columns): the k lowest columns win."""
    suite = MOD.SUITE_F32
    case = MOD.make_case("eq", rows=1, cols=2048, k=40, WARPS=1, CTAS=1, CAP=320, STRICT=1)
    inputs = suite.make_inputs(case, 0)
    inputs["x"][0] = -1.0
    inputs["x"][0, 5::9] = 2.5            # 227 equal maxima spread over the row, > CAP - 256
    res, _ = simulate(suite, case, inputs=inputs)
    assert res.outputs["indices"][0].tolist() == list(range(5, 5 + 9 * 40, 9))
    assert_matches(suite, case, res, inputs)


def test_strict_row_after_a_row_of_ties_starts_from_minus_inf_not_a_second_read():
    """STRICT: a row of ties (every buffered entry equal to the k-th at its end) carries -inf,
    not its k-th value 3.0 (which fewer than k normal elements reach): the next row streams
    through the ring once (16 filter steps, one ``vote.any`` each), where the session-6 rule
    misses the guess and reads it again from global memory (16 more). Both exact."""
    suite = MOD.SUITE_F32
    votes = {}
    for strict in (0, 1):
        case = MOD.make_case("tie_then_normal", rows=2, cols=4096, k=64, WARPS=1, CTAS=1,
                             CAP=320, STRICT=strict)
        inputs = suite.make_inputs(case, 0)
        rng = np.random.default_rng(9)
        inputs["x"][0] = rng.integers(-3, 4, 4096).astype(np.float32)
        inputs["x"][1] = rng.standard_normal(4096).astype(np.float32)
        res, _ = simulate(suite, case, inputs=inputs)
        assert_matches(suite, case, res, inputs)
        votes[strict] = res.stats["ops"]["vote.sync"]
    assert votes == {0: 48, 1: 32}


@pytest.mark.parametrize("dt", ["f32", "bf16"])
def test_strict_rows_of_minus_inf_keep_the_lowest_columns(dt):
    """-inf is a value like any other: a row of 2048 with 20 finite elements and a row that is
    all -inf but one +inf; k = 64 takes -inf elements, the lowest columns first, across the
    strict refines (the k-th key + 1 of -inf is -FLT_MAX's)."""
    suite = MOD.SUITE_F32 if dt == "f32" else MOD.SUITE_BF16
    case = MOD.make_case("ninf", rows=2, cols=2048, k=64, WARPS=1, CTAS=1, CAP=320, dt=dt,
                         STRICT=1)
    inputs = suite.make_inputs(case, 0)
    x = np.full((2, 2048), -np.inf, np.float32)
    x[0, 1000:1020] = np.arange(20, dtype=np.float32)
    x[1, 1500] = np.inf
    inputs["x"][:] = x.astype(inputs["x"].dtype)
    res, _ = simulate(suite, case, inputs=inputs)
    assert res.outputs["indices"][0].tolist() == list(range(1019, 999, -1)) + list(range(44))
    assert res.outputs["indices"][1].tolist() == [1500] + list(range(63))
    # the values by equality (the suite's tolerance check takes -inf - -inf = NaN as a mismatch)
    want = suite.expected(case, inputs)
    assert np.array_equal(res.outputs["values"], want["values"])
    assert np.array_equal(res.outputs["indices"], want["indices"])


@pytest.mark.parametrize("dt", ["f32", "bf16"])
def test_append_rounds_take_no_shared_atomic(dt):
    """APPEND=1 (session 9, docs/TUNING.md "topk (session 9, branch topk5)"): slots come from
    the counter register and a ``vote.ballot`` per round, not ``atom.shared.add`` per element;
    the tie row's answer is the same (asserted in `_tie_row_run`)."""
    lanes, rounds = _tie_row_run(1, dt), _tie_row_run(1, dt, append=1)
    assert lanes["atom"] > 0 and rounds.get("atom", 0) == 0
    assert rounds["vote.ballot"] > lanes.get("vote.ballot", 0)


def _equal_row_run(mod, dt, pk=0):
    """One row of 1024 equal values, k = 64, CAP = 96, one vector a step: the first step's 128
    elements pass from -inf, its fourth round (32 + 96 > CAP) refines in the middle of it
    (`pk`: PK=1, the bf16 halves compared in place)."""
    suite = mod.SUITE_F32 if dt == "f32" else mod.SUITE_BF16
    case = mod.make_case("eq", rows=1, cols=1024, k=64, WARPS=1, CTAS=1, VECS=1, CAP=96,
                         STRICT=1, APPEND=1, dt=dt, PK=pk)
    inputs = suite.make_inputs(case, 0)
    inputs["x"][:] = 1.0
    res, _ = simulate(suite, case, inputs=inputs)
    return res.outputs["indices"][0].tolist()


@pytest.mark.parametrize("dt,pk", [("f32", 0), ("bf16", 0), ("bf16", 1)])
def test_a_refine_inside_the_rounds_keeps_the_steps_equal_elements(dt, pk, tmp_path):
    """A refine between rounds of one step: the step's elements not yet appended may lie in lower
    columns than kept ones (a lane appends its highest bit first), so they are filtered with
    ``>=`` the k-th (not STRICT's ``>``) and the next refine picks the lowest columns; with the
    strict threshold there, the lowest columns of a row of equal values go missing."""
    assert _equal_row_run(MOD, dt, pk) == list(range(64))
    mut = load_mutant("topk_warp", "_pass_mask(vectors, kth, dt, pk=buf.pk)",
                      "_pass_mask(vectors, buf.thr, dt, pk=buf.pk)", tmp_path)
    assert _equal_row_run(mut, dt, pk) != list(range(64))


def _row_end_run(fe, dt):
    """One warp, 4 normal rows of 2048 (k = 40): the later rows, from the carried guess, end
    with ~2k + 16 = 96 entries (the short refine's case)."""
    suite = MOD.SUITE_F32 if dt == "f32" else MOD.SUITE_BF16
    case = MOD.make_case("fe", rows=4, cols=2048, k=40, WARPS=1, CTAS=1, VECS=4, STAGES=8,
                         CAP=256, STRICT=1, APPEND=1, FE=fe, dt=dt)
    inputs = suite.make_inputs(case, 3)
    inputs["x"][0] = inputs["x"][1][::-1]   # no tie row: every row normal
    res, _ = simulate(suite, case, inputs=inputs)
    assert_matches(suite, case, res, inputs)
    return res.stats["ops"]


@pytest.mark.parametrize("dt", ["f32", "bf16"])
def test_the_row_ends_short_refine_counts_fewer_entries_and_stays_exact(dt):
    """FE (scan7): rows that end with at most 32 FE entries are refined over FE entries a lane
    (4 here, against min(8, CAP/32) = 8): fewer ``setp`` + ``add`` per counting round, the same
    rounds (``redux.sync``) and the same answer."""
    full, short = _row_end_run(0, dt), _row_end_run(4, dt)
    assert short["redux.sync"] == full["redux.sync"]
    assert short["setp"] < full["setp"] * 0.9


def test_skew_adds_one_sleep_before_the_first_loads_and_nothing_else():
    """SKEW (scan7): the only change is one ``nanosleep.u32`` of (phase x SKEW) ns ahead of the
    ring's first ``cp.async``; without it the kernel has none (its PTX otherwise the same)."""
    suite = MOD.SUITE_F32

    def ptx(**kw):
        case = MOD.make_case("sk", rows=5, cols=2052, k=64, WARPS=2, CTAS=1, CAP=128, STRICT=1,
                             APPEND=1, **kw)
        return suite.kernel.compile("sm_90a", **suite.consts(case)).ptx

    plain, skew = ptx(), ptx(SKEW=700)
    assert "nanosleep" not in plain
    assert skew.count("nanosleep.u32") == 1
    assert skew.index("nanosleep.u32") < skew.index("cp.async.cg")
    body = [ln for ln in skew.splitlines() if "mul.lo.u32" in ln and ", 700;" in ln]
    assert len(body) == 1
    strip = lambda t: [ln for ln in t.splitlines()  # noqa: E731
                       if not ln.strip().startswith((".loc", "//")) and "nanosleep" not in ln]
    assert len(strip(skew)) - len(strip(plain)) == 4   # shr, add, and (the phase), mul


# the fallback loop's line, read when the module is imported (its code objects carry the line
# numbers numsim reports, so a later edit of the file must not move it)
_AGAIN_LINE = next(i for i, t in enumerate(ZOO_TOPK.read_text().splitlines(), 1)
                   if "with T.range(0, steps, VECS) as u0" in t)


def _second_reads(res) -> int:
    """Warp-instructions spent in the fallback's loop (a row read again from global memory)."""
    return sum(lp["warp_instructions"] for lp in res.stats["loops"]
               if lp["loop"].endswith(f":{_AGAIN_LINE}"))


@pytest.mark.parametrize("guess,misses", [(0, True), (1, False)])
def test_guess1_keeps_a_short_rows_successor_from_a_second_read(guess, misses):
    """Three normal rows of 8192 on one warp (k 50; the chain seen in session 11's numpy model):
    the first row, from -inf, ends with 66 entries, so its guess is its smallest entry cut to 12
    bits (2.5); 50 elements of row 1 reach it, and the cut of row 1's smallest is 2.5 again, which
    41 of row 2 reach: GUESS=0 reads row 2 twice. GUESS=1 lowers a short row's guess (below 5k/4
    entries) by one 12-bit unit: no second read. Exact either way."""
    suite = MOD.SUITE_F32
    case = MOD.make_case("chain", rows=3, cols=8192, k=50, WARPS=1, CTAS=1, VECS=4, STAGES=16,
                         CAP=256, STRICT=1, APPEND=1, FE=5, GUESS=guess)
    inputs = suite.make_inputs(case, 0)
    inputs["x"][:] = np.random.default_rng(13).standard_normal((3, 8192)).astype(np.float32)
    res, _ = simulate(suite, case, inputs=inputs)
    assert_matches(suite, case, res, inputs)
    assert (_second_reads(res) > 0) == misses


@pytest.mark.parametrize("guess,misses", [(1, True), (2, False)])
def test_guess2_mixes_one_unlike_row_into_the_guess_without_a_second_read(guess, misses):
    """Four normal rows of 8192 on one warp (k 50), row 2 scaled by 1.15 (its rank-91 value
    ~2.6 where a normal row's is ~2.3): GUESS=1 hands row 3 that row's value alone, which ~35
    of row 3's elements reach, and reads row 3 twice; GUESS=2 hands on the mean of the two
    guesses' keys (rows 1 and 2), which more than k reach. The same miss at random, ~1e-4 of
    a row's chances (benchmarks/topk_guess_model.py), put 5-7 second reads of 22-96 us in
    session 23's f32 8192 traces, on the kernel's last warps. Exact either way."""
    suite = MOD.SUITE_F32
    case = MOD.make_case("chain", rows=4, cols=8192, k=50, WARPS=1, CTAS=1, VECS=4, STAGES=16,
                         CAP=256, STRICT=1, APPEND=1, FE=5, GUESS=guess)
    inputs = suite.make_inputs(case, 0)
    x = np.random.default_rng(1).standard_normal((4, 8192)).astype(np.float32)
    x[2] *= 1.15
    inputs["x"][:] = x
    res, _ = simulate(suite, case, inputs=inputs)
    assert_matches(suite, case, res, inputs)
    assert (_second_reads(res) > 0) == misses


def _missed_rows(dt, gfetch):
    """A warp over rows whose guess misses (f32: the GUESS=1 chain with row 2 scaled by 1.15,
    row 3 read twice; bf16: rows 2 and 3 of 4 shifted 100 below, both read twice), GFETCH
    as given: (the run, its inputs, the PTX), every row checked exact."""
    suite = MOD.SUITE_F32 if dt == "f32" else MOD.SUITE_BF16
    if dt == "f32":
        case = MOD.make_case("chain", rows=4, cols=8192, k=50, WARPS=1, CTAS=1, VECS=4,
                             STAGES=16, CAP=256, STRICT=1, APPEND=1, FE=5, GUESS=1,
                             GFETCH=gfetch)
        x = np.random.default_rng(1).standard_normal((4, 8192)).astype(np.float32)
        x[2] *= 1.15
    else:
        case = MOD.make_case("shifted", rows=4, cols=2048, k=40, WARPS=1, CTAS=1, VECS=4,
                             STAGES=16, CAP=128, dt="bf16", STRICT=1, APPEND=1, PK=1,
                             GFETCH=gfetch)
        x = np.random.default_rng(2).standard_normal((4, 2048)).astype(np.float32)
        x[2:] -= 100.0
    inputs = suite.make_inputs(case, 0)
    inputs["x"][:] = x.astype(inputs["x"].dtype)
    res, _ = simulate(suite, case, inputs=inputs)
    assert_matches(suite, case, res, inputs)
    return res, suite.kernel.compile("sm_90a", **suite.consts(case)).ptx


@pytest.mark.parametrize("dt", ["f32", "bf16"])
def test_a_second_read_appends_from_its_registers(dt):
    """A row read again from -inf appends tens of elements (the buffer fills once, then the
    k-th's float filters): GFETCH=1, the control, loads each from global memory by its index,
    one dependent round trip an append (129-136 us a second read of an f32 8192 row in
    session 25's H100 trace); GFETCH=0 picks it from the step's vectors in registers (a tree
    of ``selp``): no scalar global load in the kernel, the same outputs."""
    got = {g: _missed_rows(dt, g) for g in (0, 1)}
    loads = {g: res.stats["ops"]["ld"] for g, (res, _) in got.items()}
    assert _second_reads(got[0][0]) > 0 and _second_reads(got[1][0]) > 0
    # f32: ~50 appends in one second read; bf16 (4 KB of ties near -100): ~8 in each of two
    assert loads[1] - loads[0] >= (40 if dt == "f32" else 12), loads
    for g, (_, ptx) in got.items():
        scalar = [ln for ln in ptx.splitlines()
                  if "ld.global" in ln and ".v4." not in ln and "ld.global.u64" not in ln]
        assert bool(scalar) == bool(g), scalar[:3]
    for name in ("values", "indices"):
        assert np.array_equal(got[0][0].outputs[name], got[1][0].outputs[name])


def _seeded_pair(mod):
    """f32 8192's `_v8_g2fu_sd_so` on one warp over two normal rows (numpy seed 5000): the first
    row starts from SEED=1's threshold and ends with 65 entries, fewer than the guess's rank
    (91), so it hands on its 65th's key cut to 12 bits; 49 of the second row reach that cut:
    (second-read warp-instructions), both rows exact."""
    suite = mod.SUITE_F32
    case = mod.make_case("pair", rows=2, cols=8192, k=50, WARPS=1, CTAS=1, VECS=8, STAGES=24,
                         CAP=160, FE=4, SEED=1, SORT=1, **{**mod._G1FU, "GUESS": 2})
    inputs = suite.make_inputs(case, 0)
    inputs["x"][:] = np.random.default_rng(5000).standard_normal((2, 8192), dtype=np.float32)
    res, _ = simulate(suite, case, inputs=inputs)
    assert_matches(suite, case, res, inputs)
    return _second_reads(res)


@pytest.mark.slow(reason="two numsim runs of two 8192-column rows (~15 s each)")
def test_guess2_lowers_a_seeded_short_rows_hand_on_by_a_unit(tmp_path):
    """Session 25's H100 trace of `_g2fu_sd_so_dyn` held 2 second reads, both a warp's second
    row; benchmarks/topk_guess_model.py with seeded first rows puts 6 of GUESS=2's 8 misses in
    160,000 rows there (5e-5 a row; 6e-6 with this rule). A short row with no guess before it
    now hands on one 12-bit unit below its cut key: the pair is read once; without the rule
    its second row is read twice."""
    assert _seeded_pair(MOD) == 0
    mut = load_mutant("topk_warp",
                      "                lower = lower | ((n < _guess_rank(k, 2)) & (self.hist == 0))\n",
                      "                pass\n", tmp_path)
    assert _seeded_pair(mut) > 0


def _guess2_rows(mod, shift):
    """One warp over rows 0 (ties), 1, 2 (normal), 3 (normal + `shift`), 4, 5 (normal), k 37,
    GUESS=2: (second-read warp-instructions, all warp-instructions), every row exact."""
    suite = mod.SUITE_F32
    case = mod.make_case("fresh", rows=6, cols=2052, k=37, WARPS=1, CTAS=1, VECS=4, STAGES=12,
                         CAP=96, STRICT=1, APPEND=1, FE=3, GUESS=2, FUSE=1)
    inputs = suite.make_inputs(case, 0)
    x = np.random.default_rng(4).standard_normal((6, 2052)).astype(np.float32)
    x[0] = np.random.default_rng(5).integers(-3, 4, 2052)
    x[3] += shift
    inputs["x"][:] = x
    res, _ = simulate(suite, case, inputs=inputs)
    assert_matches(suite, case, res, inputs)
    return _second_reads(res), res.stats["warp_instructions"]


def test_guess2_starts_afresh_after_a_second_read(tmp_path):
    """Row 3 far above the rest: row 4's guess (the mean of row 2's and row 3's keys, ~11) is
    reached by none of row 4, which is read twice; its guess missed, so row 4 hands on its own
    value (cut to 12 bits), not a mean with the guess that missed, and row 5 is read once.
    Without `forget_guess` row 5 is read twice too."""
    once, _ = _guess2_rows(MOD, 50.0)
    mut = load_mutant("topk_warp", "                buf.forget_guess()\n", "\n", tmp_path)
    twice, _ = _guess2_rows(mut, 50.0)
    assert once > 0 and twice > 1.8 * once, (once, twice)


def test_guess2_starts_afresh_after_a_row_of_ties(tmp_path):
    """The row of ties hands on -inf (its successor from -inf through the ring) and forgets the
    history, so the next hand-on is that row's own value; kept, it would be mixed with -inf's
    key (a value near -0: about half of row 2 appended, refine after refine)."""
    _, fresh = _guess2_rows(MOD, -50.0)
    mut = load_mutant("topk_warp", "                T.ptx.mov.u32(self.hist, 0, pred=ties() * 4 > n)\n",
                      "                pass\n", tmp_path)
    _, mixed = _guess2_rows(mut, -50.0)
    assert mixed > 1.04 * fresh, (fresh, mixed)


def test_fused_ranking_halves_the_row_ends_loads_and_frees_the_registers_at_k50():
    """FUSE=1 (scan8): one pass of k/2 broadcast ``ld.shared.v2.u64`` for both of a lane's
    entries at k = 50, one ``setp.gt.u64`` a compare; the same answer (the small `_fu` cases)
    and, at the benchmark's k = 50, no longer 128 registers (ptxas kept 25 loaded vectors live
    across the two passes): <= 80, so 24 warps an SM fit."""
    suite = MOD.SUITE_F32
    kw = dict(rows=16384, cols=8192, k=50, VECS=4, STAGES=16, CAP=128, STRICT=1, APPEND=1,
              GUESS=1, small=False)
    plain = suite.kernel.compile("sm_90a", **suite.consts(MOD.make_case("p", **kw)))
    fused = suite.kernel.compile("sm_90a", **suite.consts(MOD.make_case("f", FUSE=1, **kw)))
    assert plain.ptx.count("ld.shared.v4.u32") == 2 * 25
    assert fused.ptx.count("ld.shared.v2.u64") == 25
    assert fused.ptx.count("setp.gt.u64") == 2 * 50
    assert plain.resources.registers > 100 >= 80 >= fused.resources.registers


def _poisson_tail(lam, j):
    """P(Poisson(lam) >= j), summed term by term from the factorials (not the kernel's recurrence)."""
    return 1.0 - sum(math.exp(-lam) * lam ** i / math.factorial(i) for i in range(j))


@pytest.mark.parametrize("k,cols,sample", [(50, 8192, 512), (50, 8192, 1024), (64, 32768, 1024),
                                           (64, 32768, 2048), (7, 4100, 1024), (1, 1000, 512)])
def test_seed_rank_is_the_least_within_the_miss_bound(k, cols, sample):
    """SEED=1 (scan9): the rank j among the lane maxima is the least whose Poisson miss chance
    (fewer than k of the row reach the sample's j-th largest) is at most SEED_MISS."""
    j = MOD._seed_rank(k, cols, sample)
    lam = k * sample / cols
    assert _poisson_tail(lam, j) <= MOD.SEED_MISS < _poisson_tail(lam, j - 1)


def test_seed_rank_refuses_a_sample_that_says_too_little():
    """A sample as large as the row (2048 of 2052 at k 64: lam ~64) needs j far above the 32
    lanes' maxima: no seed, the row starts from -inf as before."""
    assert MOD._seed_rank(64, 2052, 2048) is None
    assert _poisson_tail(64 * 2048 / 2052, MOD.SEED_MAX_RANK) > MOD.SEED_MISS


def _first_row_run(seed, rows, cols=8192, k=50, x=None):
    """One warp, `rows` rows (normal, or `x`), 2 KB steps with 2 ahead (`_w32`'s ring)."""
    suite = MOD.SUITE_F32
    case = MOD.make_case("sd", rows=rows, cols=cols, k=k, WARPS=1, CTAS=1, VECS=4, STAGES=12,
                         CAP=96, STRICT=1, APPEND=1, GUESS=1, FUSE=1, SEED=seed)
    inputs = suite.make_inputs(case, 0)
    inputs["x"][:] = (np.random.default_rng(21).standard_normal((rows, cols)).astype(np.float32)
                      if x is None else x)
    res, _ = simulate(suite, case, inputs=inputs)
    if x is None:
        assert_matches(suite, case, res, inputs)
    else:   # infinities: assert_matches's tolerance arithmetic makes inf - inf a NaN mismatch
        assert res.verdict == "clean"
        assert _wrong_rows(suite, case, res, inputs) == []
    return res


def test_a_seeded_first_row_costs_about_a_later_row_and_stays_exact():
    """SEED=1: the first row of 8192 (k 50) starts from the 13th largest of the lanes' maxima
    over its first 1024 elements instead of -inf: no refine for ~1000 early appends, so the row
    costs ~4.5-5k warp-instructions instead of ~9k (a later row: ~4.4k); the PTX gains j
    ``redux.sync.max.u32`` rounds, only with SEED."""
    plain, seeded = _first_row_run(0, 1), _first_row_run(1, 1)
    two = _first_row_run(0, 2)
    later = two.stats["warp_instructions"] - plain.stats["warp_instructions"]
    assert seeded.stats["warp_instructions"] < 0.65 * plain.stats["warp_instructions"]
    assert seeded.stats["warp_instructions"] < 1.3 * later
    # the refines it saves are redux.sync.add rounds: fewer of those in all
    assert seeded.stats["ops"]["redux.sync"] < plain.stats["ops"]["redux.sync"]

    def ptx(seed):
        case = MOD.make_case("p", rows=1, cols=8192, k=50, VECS=4, STAGES=12, CAP=96, STRICT=1,
                             APPEND=1, GUESS=1, FUSE=1, SEED=seed)
        return MOD.SUITE_F32.kernel.compile("sm_90a", **MOD.SUITE_F32.consts(case)).ptx
    assert "redux.sync.max.u32" not in ptx(0)
    assert ptx(1).count("redux.sync.max.u32") == MOD._seed_rank(50, 8192, 1024) == 13


def test_a_seed_that_too_few_reach_reads_the_row_again_exactly():
    """k 7, j 6: six +inf in six lanes' first vectors make the seed +inf, which only they reach:
    the row is read again from -inf (the fallback), exact; the next row of -inf and two finite
    values ends exactly too (inf on both sides of the seed's compare)."""
    x = np.random.default_rng(4).standard_normal((2, 4100)).astype(np.float32)
    x[0, [0, 4, 8, 12, 16, 20]] = np.inf
    x[1] = -np.inf
    x[1, [7, 4000]] = (1.0, -2.0)
    assert MOD._seed_rank(7, 4100, 1024) == 6
    res = _first_row_run(1, 2, cols=4100, k=7, x=x)
    assert _second_reads(res) > 0


def test_seed2_rank_is_the_least_within_its_bound_and_deeper_than_seed1():
    """SEED=2 (scan10): the same Poisson rule at 1e-4 a row; at the benchmark shapes it lands on
    j 14 (f32 32768 `_v8`), 10 (`_w32`), 18 (bf16 `_v4`), each deeper than SEED=1's."""
    for k, cols, sample, want, was in ((64, 32768, 2048, 14, 10), (64, 32768, 1024, 10, 6),
                                       (64, 32768, 3072, 18, 13), (50, 8192, 1024, 18, 13)):
        j = MOD._seed_rank(k, cols, sample, MOD.SEED_MISS_BY_MODE[2])
        lam = k * sample / cols
        assert _poisson_tail(lam, j) <= 1e-4 < _poisson_tail(lam, j - 1)
        assert (j, MOD._seed_rank(k, cols, sample)) == (want, was)


def test_seed2_compiles_its_deeper_rank():
    def ptx(seed):
        case = MOD.make_case("p", rows=1, cols=32768, k=64, VECS=8, STAGES=24, CAP=192, FE=5,
                             STRICT=1, APPEND=1, GUESS=1, FUSE=1, SEED=seed)
        return MOD.SUITE_F32.kernel.compile("sm_90a", **MOD.SUITE_F32.consts(case)).ptx
    assert ptx(1).count("redux.sync.max.u32") == 10
    assert ptx(2).count("redux.sync.max.u32") == 14


def _benchmark_first_rows_missing(j, rows=2112, cols=32768, k=64, S=2, V=8):
    """The first rows (1..rows-1) of the f32 4096 x 32768 benchmark input (seed 1, the timed one;
    the generator draws the normal rows first, so the leading rows are the same values) that
    fewer than k elements reach from the j-th largest lane maximum of the first S 4 KB steps:
    benchmarks/topk_seed_model.py's replay, lane maxima ties dropping together."""
    x = np.random.default_rng(1).standard_normal((rows, cols), dtype=np.float32)[1:]
    lanes = x[:, :S * V * 32 * 4].reshape(rows - 1, S * V, 32, 4).max(axis=(1, 3))
    seed = -np.sort(-lanes, axis=1)[:, j - 1]     # distinct floats: no ties among normal lanes
    return np.flatnonzero((x >= seed[:, None]).sum(axis=1) < k) + 1


def test_seed1_misses_first_rows_of_the_timed_input_and_seed2_does_not():
    """Why scan9's `_v8_sd` ran 23% slower at f32 32768 (189.90 against 154.34 us, session 14
    d6): 3 of its 2112 warps' first rows miss SEED=1's seed (j 10) and are read again from
    global memory from -inf; at SEED=2's j 14 none does."""
    assert _benchmark_first_rows_missing(10).tolist() == [458, 561, 1323]
    assert _benchmark_first_rows_missing(14).tolist() == []


def test_seed2_first_row_is_exact_and_cheaper_than_from_minus_inf():
    """A benchmark-like first row (normal, 8192 columns, k 50 on `_w32`'s ring): SEED=2 (j 18)
    runs exact, with fewer warp-instructions than from -inf and more than SEED=1 (j 13: fewer
    elements reach its seed)."""
    plain, one, two = (_first_row_run(s, 1) for s in (0, 1, 2))
    w = [r.stats["warp_instructions"] for r in (plain, one, two)]
    assert w[1] < w[2] < 0.8 * w[0], w


def _pk_run(pk):
    """One warp, 3 bf16 rows of 4104 (a tail): row 0 integers -3..3 with -0.0 among the zeros
    (ties, signed zeros equal to the filter), rows 1-2 normal; `_w32`'s ring, SEED=2."""
    suite = MOD.SUITE_BF16
    case = MOD.make_case("pk", rows=3, cols=4104, k=64, WARPS=1, CTAS=1, VECS=4, STAGES=12,
                         CAP=96, dt="bf16", STRICT=1, APPEND=1, GUESS=1, FUSE=1, SEED=2, PK=pk)
    inputs = suite.make_inputs(case, 0)
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, 4104)).astype(np.float32)
    x[0] = rng.integers(-3, 4, 4104)
    x[0, rng.choice(4104, 300, replace=False)] = -0.0
    inputs["x"][:] = x.astype(inputs["x"].dtype)
    res, _ = simulate(suite, case, inputs=inputs)
    assert _wrong_rows(suite, case, res, inputs) == []
    return res


def test_pk_compares_bf16_halves_in_place_bit_identical_and_cheaper():
    """PK=1 (scan11): the reach test and the pass masks compare each word's two bf16 halves with
    thr's bf16 (``setp.ge.bf16``, one ``HSETP2`` a word) instead of expanding them to f32: the
    same elements pass (thr is always a bf16 value), so the same outputs bit for bit over ties
    and signed zeros, with fewer warp-instructions (a hit vector's mask: 23 PTX, not 39)."""
    plain, pk = _pk_run(0), _pk_run(1)
    for name in ("values", "indices"):
        assert np.asarray(pk.outputs[name]).tobytes() == np.asarray(plain.outputs[name]).tobytes()
    w0, w1 = plain.stats["warp_instructions"], pk.stats["warp_instructions"]
    assert w1 < 0.95 * w0, (w0, w1)   # -7.5%: row 0 (ties, from -inf) is mostly refines
    # no element expanded (shl / and) and no selp in its pass mask, no f32 max in the reach
    ops0, ops1 = plain.stats["ops"], pk.stats["ops"]
    assert ops1["shl"] < ops0["shl"] and ops1["selp"] < ops0["selp"] / 4
    assert "max.f" not in ops1 and ops1["mov.unpack"] > 0



def test_the_iket_build_records_each_step_wait_and_row_end_and_computes_the_same(tmp_path,
                                                                                   capsys):
    """`tirxh profile --iket` on topk_warp (session 22: does a warp wait for its data, or spend
    its time at the row end? QUEUE 95): the profiling build, run by numsim on two warps whose
    rows 2 and 3 lie far below the rows before them (each read a second time from -inf, nested
    in its row end), computes what the plain build computes and records, per warp, a `wait` a
    step and a `row_end` a row (the `again` inside it where the row was read again); with SEED,
    one `seed` first. benchmarks/item_timeline.py counts the rows from it."""
    iket = pytest.importorskip("tirxh_iket.transform")
    decode = pytest.importorskip("tirxh_iket.decode").decode
    ns = pytest.importorskip("tirxh_numsim")
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "item_timeline", Path(__file__).resolve().parents[2] / "benchmarks" / "item_timeline.py")
    it = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(it)
    suite, case, inputs = _shifted_inputs()
    seeded = MOD.make_case("shifted_sd", rows=4, cols=2048, k=8, WARPS=2, CTAS=1, VECS=4,
                           STAGES=12, CAP=96, STRICT=1, APPEND=1, GUESS=1, FUSE=1, SEED=2)
    for c, first in ((case, []), (seeded, ["seed"])):
        steps = 2048 // 4 // 32 // suite.consts(c)["VECS"]   # 16 vectors a lane a row
        grid = suite.grid(c)
        ck, layout = iket.compile_profiling_build(suite.kernel, "sm_90a", suite.consts(c),
                                                  capacity=64)
        plain, _ = simulate(suite, c, inputs=inputs)
        trace = np.zeros(layout.buffer_bytes(grid) // 8, np.uint64)
        prof = ns.run(ck, dict(inputs, iket_trace=trace), grid=grid)
        assert prof.verdict == "clean"
        for out in suite.outputs:
            np.testing.assert_array_equal(prof.outputs[out], plain.outputs[out])
        tl = decode(prof.outputs["iket_trace"].view(np.uint8), layout)
        assert tl.issues == [] and len(tl.warps) == 2
        for w in tl.warps:   # warp w: rows w (near the others) and w + 2 (read again)
            want = first + (["wait"] * steps + ["row_end"]) * 2 + ["again"]
            assert [s.name for s in w.spans] == want, (c.name, w.warp)
            again = w.spans[-1]
            assert again.depth == 1 and w.spans[-2].start <= again.start <= again.end
        a = it.analyze(tl, "row_end")
        assert (a["warps"], a["items"], a["items_per_warp"]) == (2, 4, [2, 2])
    # the command line on the files a profile returns (MODE=scan12 runs it on the GPU host)
    node = tmp_path / "profile_0" / "node"
    node.mkdir(parents=True)
    (node / "iket_trace.bin").write_bytes(prof.outputs["iket_trace"].tobytes())
    (node / "iket_trace.layout.json").write_text(layout.dumps())
    assert it.main([str(tmp_path / "profile_0"), "--item", "row_end", "--wait", "wait"]) == 0
    assert "2 warps on 1 SMs, 4 items (2-2 a warp)" in capsys.readouterr().out


@pytest.mark.parametrize("old,new,sync_kinds,race_kinds", [
    # lane 0 refills the slot while other lanes may still read it (no order among the lanes)
    ("        T.ptx.bar.warp.sync(FULL)     # every lane's reads of the slot (the last step's) "
     "done\n", "\n", set(), {"race.divergent-lanes", "race.converged-lanes"}),
    # the slot read before its bytes landed, copies still pending at exit
    ("        self._bar(self.cslot).wait(self.cpar)\n", "\n",
     {"exit.async-write-pending", "mbarrier.arrival-count"},
     {"race.read-write", "race.write-write"}),
    # the previous phase's parity: the wait passes at once on a refilled slot
    ("        self._bar(self.cslot).wait(self.cpar)\n",
     "        self._bar(self.cslot).wait(self.cpar ^ 1)\n", {"mbarrier.phase-overrun"}, set()),
])
def test_the_bulk_ring_orders_are_load_bearing(old, new, sync_kinds, race_kinds, tmp_path):
    """BULK=1 (session 22): the checkers pass the bulk-copied ring (test_sync_check_clean) and
    fail it without each of its orders: the warp's reads of a slot before lane 0 refills it, the
    slot's phase before it is read, and the phase's parity."""
    sc = pytest.importorskip("tirxh_sync_check")
    mut = load_mutant("topk_warp", old, new, tmp_path)
    suite = mut.SUITE_BF16
    case = _case(suite, "r5_c4104_k50_v4_bk")
    sync, race = sc.check_kernel(suite.kernel, suite.make_inputs(case, 0),
                                 consts=suite.consts(case), grid=suite.grid(case))
    assert {f.kind for f in sync.findings} == sync_kinds
    assert {f.kind for f in race.findings} == race_kinds


@pytest.mark.parametrize("case,keep", [
    ("r5_c4104_k50_v4_so", "        ents.append(ent)\n"),   # the sorted end's loads
    ("r5_c1000_k33_fu", "                _store_entry(values, indices, row * k + rank, me, "
     "keybits, dt)\n"),   # the fused ranking's broadcast loads
])
def test_a_row_ends_warp_sync_is_load_bearing(case, keep, tmp_path):
    """The lanes read the buffer at a row's end (the sorted end's loads, the ranking's
    broadcast loads), then the next row's appends overwrite it: only the ``bar.warp.sync``
    after `keep` orders one lane's read before another lane's store (the shuffles in between
    order no memory, the ring's cp.async group waits retire each lane's own copies). Without it
    racecheck reports race.converged-lanes; before session 23 it took the converged warp's
    lockstep as order and passed both mutants."""
    sc = pytest.importorskip("tirxh_sync_check")
    sync_line = ZOO_TOPK.read_text().split(keep)[1].splitlines(True)[0]
    assert "bar.warp.sync(FULL)" in sync_line
    mut = load_mutant("topk_warp", keep + sync_line, keep, tmp_path)
    suite = mut.SUITE_BF16
    c = _case(suite, case)
    sync, race = sc.check_kernel(suite.kernel, suite.make_inputs(c, 0), consts=suite.consts(c),
                                 grid=suite.grid(c))
    assert not sync.findings
    assert {f.kind for f in race.findings} == {"race.converged-lanes"}


@pytest.mark.parametrize("dt,cols,k,extra", [
    ("f32", 2052, 50, dict(VECS=8, STAGES=24, CAP=160, FE=4, SEED=1)),
    ("bf16", 4104, 9, dict(VECS=4, STAGES=12, CAP=96, SEED=2, PK=1)),
    ("bf16", 2056, 64, dict(VECS=4, STAGES=16, CAP=256)),
])
def test_the_sorted_row_end_hands_on_the_same_guess_without_the_redux_chain(dt, cols, k, extra):
    """SORT=1 (session 22): one bitonic sort in place of the final refine and the ranking.
    Over 8 rows on one warp (normal rows, a row of ties whose guess must become -inf, a row far
    below the others that is read again), the outputs are bit-identical to SORT=0's, and so is
    every append (one ``bfind`` a round of appends): each row started from the same guess. The
    sort's cost is fixed (128 entries): at k 50 and 64 it takes fewer warp-instructions than the
    refine and ranking it replaces, at k 9 (a short refine, 5 ranking loads) more; at every k it
    leaves out the refine's chain of ``redux.sync`` rounds (one a key bit), its point: that
    chain's latency is the row end's."""
    suite = MOD.SUITE_F32 if dt == "f32" else MOD.SUITE_BF16
    rng = np.random.default_rng(k)
    x = rng.standard_normal((8, cols)).astype(np.float32)
    x[3] = rng.integers(-3, 4, cols)
    x[5] -= 50.0
    runs = []
    for sort in (0, 1):
        case = MOD.make_case("c", rows=8, cols=cols, k=k, WARPS=1, CTAS=1, STRICT=1, APPEND=1,
                             GUESS=1, FUSE=1, SORT=sort, **extra, **({"dt": dt} if dt == "bf16"
                                                                      else {}))
        inputs = suite.make_inputs(case, 0)
        inputs["x"][:] = x.astype(inputs["x"].dtype)
        res, _ = simulate(suite, case, inputs=inputs)
        assert_matches(suite, case, res, inputs)
        runs.append(res)
    plain, sort = runs
    for name in ("values", "indices"):
        assert np.asarray(sort.outputs[name]).tobytes() == np.asarray(plain.outputs[name]).tobytes()
    ops0, ops1 = plain.stats["ops"], sort.stats["ops"]
    # one ``bfind`` a round of appends (`_append_rounds`, nothing else): the same elements
    # reached each row's threshold, so each row started from the same guess
    assert ops1["bfind"] == ops0["bfind"] > 0
    w0, w1 = plain.stats["warp_instructions"], sort.stats["warp_instructions"]
    assert (w1 < w0) == (k >= 50), (w0, w1)
    # the final refine's rounds (keybits + 16, one ``redux.sync`` each) gone from at least 6 of
    # the 8 rows (the row of ties buffers more than 128 and keeps the refine); the in-row
    # refines' rounds stay
    rounds = (32 if dt == "f32" else 16) + 16
    assert ops1["redux.sync"] <= ops0["redux.sync"] - 6 * rounds, (ops0["redux.sync"],
                                                                  ops1["redux.sync"])


DYN_CASES = [(suite, c.name) for suite in (MOD.SUITE_F32, MOD.SUITE_BF16) for c in suite.cases
             if c.small and c.params.get("DYN")]


@pytest.mark.parametrize("suite,name", DYN_CASES, ids=[n for _, n in DYN_CASES])
@pytest.mark.parametrize("per_warp", [False, True], ids=["lockstep", "per-warp"])
def test_rows_from_the_counter_are_exact_and_the_counter_resets_itself(suite, name, per_warp):
    """DYN=1 (session 23): every row taken exactly once whatever the warps' pace (numsim's
    per-warp schedule lets one warp run until it waits: it takes rows ahead of the others), and a
    launch takes exactly rows + grid warps tickets, so a second launch on the same counter is
    right too (the counter is never cleared; SPLIT=2: its items are half rows)."""
    ns = pytest.importorskip("tirxh_numsim")
    case = _case(suite, name)
    inputs = suite.make_inputs(case, 0)
    items = case.params["rows"] * (2 if case.params.get("SPLIT") else 1)   # SPLIT: half rows
    tickets = items + suite.grid(case)[0] * case.params["WARPS"]
    take = case.params.get("TAKE", 0)
    if not take:
        inputs["sched"] = inputs["sched"][:1]   # DYN=1's one counter: every element written
    else:   # TAKE: a counter left at a multiple of its tickets (a DYN=1 run) works too
        Q, warps = case.params.get("QUEUES", 1), tickets - items   # noqa: N806
        for q in range(Q):   # queue q: rows and warps = q (mod Q), a counter of its own
            inputs["sched"][MOD._Queue.counter_index(Q, q)] = 3 * (
                len(range(q, items, Q)) + len(range(q, warps, Q)))
    for launch in (1, 2):
        res = ns.run(suite.kernel, inputs, grid=suite.grid(case), consts=suite.consts(case),
                     outputs=list(suite.outputs) + ([] if take else ["sched"]),  # TAKE: u32
                     per_warp=per_warp)
        assert_matches(suite, case, res, inputs)
        # TAKE (session 26): each u32 counter goes back to 0 with its queue's last ticket
        if take:
            assert not res.outputs["sched"].any()
        else:
            assert int(res.outputs["sched"][0]) == launch * tickets
        inputs = dict(inputs, sched=res.outputs["sched"])


def _assert_check_clean(cases):
    """sync_check and racecheck find nothing on each (suite, case name) of `cases`."""
    sc = pytest.importorskip("tirxh_sync_check")
    for suite, name in cases:
        case = _case(suite, name)
        sync, race = sc.check_kernel(suite.kernel, suite.make_inputs(case, 0),
                                     consts=suite.consts(case), grid=suite.grid(case))
        assert [f.kind for f in sync.findings + race.findings] == [], name


def test_rows_from_the_counter_check_clean():
    _assert_check_clean(DYN_CASES)


SPLIT_CASES = [(suite, c.name) for suite in (MOD.SUITE_F32, MOD.SUITE_BF16)
               for c in suite.cases if c.small and c.params.get("SPLIT")]


@pytest.mark.parametrize("suite,name", SPLIT_CASES, ids=[n for _, n in SPLIT_CASES])
@pytest.mark.parametrize("per_warp", [False, True], ids=["lockstep", "per-warp"])
def test_half_rows_merge_exactly_and_their_counters_need_no_clearing(suite, name, per_warp):
    """SPLIT=2 (session 24): a row's two halves end on different warps (per-warp: in either
    order); the second to count in merges both halves' k into the row's k, exactly; each
    launch adds 2 to every row's counter, so a second launch on the same counters (odd: second)
    is right too."""
    ns = pytest.importorskip("tirxh_numsim")
    case = _case(suite, name)
    inputs = suite.make_inputs(case, 0)
    inputs["sched"] = inputs["sched"][:1]   # DYN=1's one counter: every element written
    extra = ["pcount"] + (["sched"] if case.params.get("DYN") else [])
    for launch in (1, 2):
        res = ns.run(suite.kernel, inputs, grid=suite.grid(case), consts=suite.consts(case),
                     outputs=list(suite.outputs) + extra, per_warp=per_warp)
        assert_matches(suite, case, res, inputs)
        assert res.outputs["pcount"].tolist() == [2 * launch] * case.params["rows"]
        inputs = dict(inputs, **{k: res.outputs[k] for k in extra})


def test_half_rows_check_clean():
    _assert_check_clean(SPLIT_CASES)


@pytest.mark.parametrize("old,new", [
    ("    T.ptx.bar.warp.sync(FULL)          # every lane's partial stores before lane 0's "
     "release\n", "\n"),
    ("        old.set(T.ptx.atom.acq_rel.gpu.global_.add.u32(pcount.at(r), 1))\n",
     "        old.set(T.ptx.atom.relaxed.gpu.global_.add.u32(pcount.at(r), 1))\n")],
    ids=["no-warp-sync", "relaxed-count"])
def test_the_merge_handover_is_load_bearing(old, new, tmp_path, request):
    """Lane 0's count publishes the other lanes' partial stores only after ``bar.warp.sync``
    (race.converged-lanes without it, where the row end is the sorted one: the refine's
    ranking ends in its own), and only as a release/acquire (a relaxed count orders nothing:
    the merging warp's loads race with the other half's stores)."""
    sc = pytest.importorskip("tirxh_sync_check")
    mut = load_mutant("topk_warp", old, new, tmp_path)
    suite = mut.SUITE_F32
    case = _case(suite, "r5_c4112_k50_g2_dyn_sp2")
    sync, race = sc.check_kernel(suite.kernel, suite.make_inputs(case, 0),
                                 consts=suite.consts(case), grid=suite.grid(case))
    kinds = {f.kind for f in sync.findings + race.findings}
    want = {"no-warp-sync": "race.converged-lanes", "relaxed-count": "race.read-write"}
    assert kinds == {want[request.node.callspec.id]}, kinds


TAKE_BIG = [(suite, c.name) for suite in (MOD.SUITE_F32, MOD.SUITE_BF16) for c in suite.cases
            if not c.small and c.params.get("TAKE")]


@pytest.mark.parametrize("suite,name", TAKE_BIG, ids=[n for _, n in TAKE_BIG])
def test_an_early_ticket_lands_where_it_is_held(suite, name):
    """TAKE (session 26): every ticket's atomic writes the register the ticket is held in, and
    the next instruction does not read it, so the warp runs on without waiting for the round
    trip. With a u64 ticket ptxas copied the result into an unaligned register pair right
    after the atomic (``MOV R2, R6``: a wait for the atomic there), as the plain DYN=1 path
    waits at its first use (20.7% of f32 8192's stall samples in session 26's ncu profile)."""
    resources, adds, wide = ticket_atomics(suite, _case(suite, name))
    assert (resources.spill_stores, resources.spill_loads) == (0, 0)
    assert len(adds) >= 2, "the first row's ticket and the loop's early asks"
    for dest, atom, nxt in adds:
        assert not re.search(rf"\b{dest}\b", nxt), (atom, nxt)
    # every ticket from the u32 path: none asked and read at once on the u64 counter
    assert not wide


def test_each_queue_count_has_counters_of_its_own():
    """QUEUES (session 26): a shard's variants share their inputs, so a DYN=1 run (element 0,
    left at a multiple of ITS tickets) then TAKE's 3 queues on the same `sched`: exact, and the
    queues' counters back at 0 (on element 0 the reset of queue 0 came mid-launch)."""
    ns = pytest.importorskip("tirxh_numsim")
    suite = MOD.SUITE_F32
    dyn, q3 = _case(suite, "r9_c2056_k50_g2_dyn"), _case(suite, "r9_c2056_k50_g2_dyn_ta2_q3")
    inputs = suite.make_inputs(dyn, 0)
    for case in (dyn, q3):
        res = ns.run(suite.kernel, inputs, grid=suite.grid(case), consts=suite.consts(case),
                     outputs=list(suite.outputs))
        assert_matches(suite, case, res, inputs)
        inputs = dict(inputs, sched=res.outputs["sched"])
    assert int(inputs["sched"][0]) == 9 + 4                 # DYN=1's tickets, untouched
    assert not inputs["sched"][1:].any()                     # the queues' counters reset
    assert {MOD._Queue.counter_index(3, q) for q in range(3)}.isdisjoint(
        {MOD._Queue.counter_index(Q, q) for Q in (1, 2, 4, 8) for q in range(Q)})


@pytest.mark.parametrize("name", ["r3_c8200_k9_g2_sd_bk", "r3_c8200_k9_g2_dyn_ta2_bk"])
def test_a_warp_without_a_first_row_does_not_wait_for_its_seed(name, tmp_path):
    """BULK=1 with SEED (session 30): four warps over three rows, so one warp's first row is
    none (the static walk's warp 3; the counter's END ticket). It asked for no bulk copy, and
    the seed's wait for its slots' phase 0 would never return: both checkers call that a
    deadlock, and the guarded wait checks clean (numsim: the outputs match)."""
    sc = pytest.importorskip("tirxh_sync_check")
    ns = pytest.importorskip("tirxh_numsim")
    mut = load_mutant(
        "topk_warp",
        "        with T.if_(live, uniform=True) if live is not None else contextlib.nullcontext():\n",
        "        with contextlib.nullcontext():\n", tmp_path)
    for mod, stuck in ((mut, True), (MOD, False)):
        suite = mod.SUITE_F32
        case = _case(suite, name)
        inputs = suite.make_inputs(case, 0)
        sync, _ = sc.check_kernel(suite.kernel, inputs, consts=suite.consts(case),
                                  grid=suite.grid(case))
        res = ns.run(suite.kernel, inputs, grid=suite.grid(case), consts=suite.consts(case),
                     outputs=list(suite.outputs))
        kinds = {f.kind for f in sync.findings} | {f.kind for f in res.diagnostics}
        if stuck:
            assert "numsim.deadlock" in kinds and kinds & {"deadlock", "mbarrier.parity-never"}
        else:
            assert not kinds, kinds
            assert_matches(suite, case, res, inputs)
