"""zoo/kernels/kda_bwd.py: every small case in numsim against the float64 gradients under the
public rule (atol = rtol = 0.01 on every element; saturated, slow and mixed gates, a chunk tail, a
varlen pack with a one-token and a one-chunk sequence; dA_log and ddt_bias summed over the
CTAs of a head), clean under sync_check (and not clean
when the partials' double buffer is removed), refused shapes, and the cases' inputs."""

import numpy as np
import pytest
import tirxh_numsim as ns

import tirxh.lang as T
from tests.zoo._zoo import sync_race
from tests.zoo.zoo_modules import assert_matches, load, load_mutant, mismatches, simulate

MOD = load("kda_bwd")
SLOW = pytest.mark.slow   # numsim / sync_check of 256 threads over the whole recurrence: ~5-30 s
SUITES = (MOD.SUITE, MOD.SUITE_VARLEN)
TOL = MOD.TOLERANCE
# mixed gates (deep ones saturate: s (1 - s) ~ 0 leaves dA_log, ddt_bias ~ 0), 2 heads x 3
# sequences: the gate parameters' sums over CTAs
MIXED = T.case("mixed_pack", B=1, T_=40, H=2, lens=(7, 20, 13), gate="mixed")


def _cases():
    return [pytest.param(s, c, id=c.name) for s in SUITES for c in s.cases if c.small]


@SLOW
@pytest.mark.parametrize("suite,case", _cases())
def test_small_case_matches_reference(suite, case):
    res, inputs = simulate(suite, case)
    assert_matches(suite, case, res, inputs)
    # float32 throughout: far inside the rule (a regression to bf16 intermediates would not be)
    exp = suite.expected(case, inputs)
    for n in MOD.GRADS:
        err = np.abs(res.outputs[n] - exp[n]) / (1.0 + np.abs(exp[n]))
        assert err.max() < 1e-4, (n, float(err.max()))


@SLOW
def test_two_heads_of_a_pack_match_reference():
    """Heads index every tensor with the stride H (the suites' small cases have one head each:
    `tirxh check` simulates them within numsim's instruction budget): 2 heads x 2 sequences."""
    case = T.case("extra", B=1, T_=50, H=2, lens=(20, 30), gate="deep")
    res, inputs = simulate(MOD.SUITE_VARLEN, case)
    assert_matches(MOD.SUITE_VARLEN, case, res, inputs)


@SLOW
def test_gate_parameter_sums_cross_ctas_and_reset_the_counter():
    """dA_log and ddt_bias sum every (head, sequence) CTA's slot: 2 heads x 3 sequences, checked
    against float64; the last CTA of each head resets its counter (a second launch would
    otherwise never find a last CTA) and every CTA wrote its slot."""
    suite, case = MOD.SUITE_VARLEN, MIXED
    inputs = suite.make_inputs(case, 0)
    res = ns.run(suite.kernel, inputs, grid=suite.grid(case),
                 outputs=["dA_log", "ddt_bias", "cnt", "gred", "dg"], consts=suite.consts(case))
    assert res.verdict == "clean", [f.message for f in res.diagnostics]
    exp = suite.expected(case, inputs)
    for n in ("dA_log", "ddt_bias"):
        assert TOL.compare(res.outputs[n], exp[n])["ok"], n
    assert not res.outputs["cnt"].any()
    # the slots hold each CTA's sums: ddt_bias is their sum over the sequences
    np.testing.assert_allclose(res.outputs["gred"][:, :, 0].sum(0), res.outputs["ddt_bias"],
                               rtol=1e-5, atol=1e-5)


@SLOW
def test_pass_1_stores_the_split_backwards_chunk_start_states():
    """Pass 1's workspace s0 is piece 1 of the chunked split (kda_bwd_split.chunk_states), in
    its token-by-token form: every chunk's start state within 1e-4 of float64."""
    split = load("kda_bwd_split")
    ref = load("kda_ref")
    case = T.case("s0", B=1, T_=70, H=1, gate="mixed")
    x = MOD.SUITE.make_inputs(case, 0)
    res = ns.run(MOD.SUITE.kernel, x, grid=MOD.SUITE.grid(case), outputs=["s0"],
                 consts=MOD.SUITE.consts(case))
    q, k, g, beta = ref._prepare(x["q"], x["k"], x["g_raw"], x["beta"], x["A_log"],
                                 x["dt_bias"], 0, 0, 70)
    want, _ = split.chunk_states(k, np.asarray(x["v"][0], np.float64), g, beta, x["h0"][0])
    got = res.outputs["s0"]                                  # [chunks, H, K, V]
    assert got.shape == (2, 1, 128, 128)
    err = np.abs(np.moveaxis(got, 0, 1) - want) / (1.0 + np.abs(want))
    assert err.max() < 1e-4, float(err.max())


@SLOW
def test_dropped_dt_bias_in_the_dA_log_term_is_caught(tmp_path):
    """dA_log's term is dg_raw (g_raw + dt_bias): with dt_bias dropped the check fails."""
    mut = load_mutant("kda_bwd", "dgr, gx + dtb, T.ptx", "dgr, gx, T.ptx", tmp_path)
    res, inputs = simulate(mut.SUITE_VARLEN, MIXED)
    exp = mut.SUITE_VARLEN.expected(MIXED, inputs)
    assert not TOL.compare(res.outputs["dA_log"], exp["dA_log"])["ok"]
    assert TOL.compare(res.outputs["ddt_bias"], exp["ddt_bias"])["ok"]


@SLOW
def test_gradients_are_not_trivially_small():
    """The rule's atol of 0.01 is meaningful only if the gradients are not all below it."""
    case = MOD.SUITE.cases[0]
    exp = MOD.SUITE.expected(case, MOD.SUITE.make_inputs(case, 0))
    for n in ("dq", "dk", "dv", "dbeta", "dh0"):
        assert np.sqrt(np.mean(np.square(exp[n]))) > 0.05, n
    # saturated gates have s (1 - s) ~ 0: the gate parameters' gradients are checked on mixed
    exp = MOD.SUITE_VARLEN.expected(MIXED, MOD.SUITE_VARLEN.make_inputs(MIXED, 0))
    for n in ("dA_log", "ddt_bias"):
        assert np.sqrt(np.mean(np.square(exp[n]))) > 0.05, n


@SLOW
def test_wrong_gate_chain_is_caught(tmp_path):
    """The gate's chain rule dropped (dg of g instead of g_raw): the check fails."""
    mut = load_mutant("kda_bwd", "dgs * (ln.a * R.LOWER_BOUND) * s * (ex * s)", "dgs",
                      tmp_path)
    case = MOD.SUITE.cases[0]
    res, inputs = simulate(mut.SUITE, case)
    assert mismatches(mut.SUITE, case, res, inputs)


@SLOW
def test_sync_check_is_clean():
    for result in sync_race(MOD.SUITE, T.case("sync", B=1, T_=3, H=1, gate="deep")):
        assert result.verdict == "clean", [f.message for f in result.findings]


@SLOW
@pytest.mark.parametrize("suite,case", [
    pytest.param(s, c, id=c.name) for s in SUITES for c in s.cases
    if c.small and "sync-slow" in c.tags])
def test_cases_the_zoo_check_leaves_to_the_tests_are_sync_clean(suite, case):
    """`tirxh check` over the zoo skips these in sync_check (zoo/tirx.toml `exclude_tags`): two
    rows with a chunk boundary, three chunks, and a varlen pack are checked here."""
    for result in sync_race(suite, case):
        assert result.verdict == "clean", [f.message for f in result.findings]


@SLOW
def test_single_buffered_partials_race(tmp_path):
    """The partials are double-buffered by token parity so that one barrier per token suffices:
    with one buffer, the next token's writes race with this token's reads."""
    mut = load_mutant("kda_bwd", "    par = tok & 1\n", "    par = tok & 0\n", tmp_path)
    results = sync_race(mut.SUITE, T.case("sync", B=1, T_=3, H=1))
    found = [f.message for r in results for f in r.findings]
    assert any("conflict on shared sPart" in m for m in found), found


def test_compiles_within_the_register_file_with_few_spills():
    """ptxas on this machine: 256 threads x its registers fit the 64 K register file (one CTA
    per SM); S and dS take 128 of the 255 registers, and what spills is a dozen loop-invariant
    scalars (48 bytes of stack on 2026-12-01, reloaded from L1 a few times per token): more
    would mean the per-row arithmetic spills."""
    r = MOD.kda_bwd.compile("sm_90a").resources
    assert r.stack_frame <= 64 and r.spill_stores <= 64, r
    assert 256 * r.registers <= 65536, r


def test_workspaces_and_offsets():
    x = MOD.inputs(np.random.default_rng(0), B=1, T_=112, H=2, lens=(17, 1, 64, 30))
    assert list(x["cu_seqlens"]) == [0, 17, 18, 82, 112]
    assert list(x["chunk_off"]) == [0, 1, 2, 3, 4]
    assert list(x["order"]) == [2, 3, 0, 1]               # longest first
    assert x["s0"].shape == (4, 2, 128, 128) and x["ws"].shape == (8, 64, 128, 128)
    assert not x["s0"].any() and not x["dq"].any()     # zeros: KCoral's guards see workspaces
    assert x["gred"].shape == (4, 2, 2, 128) and x["cnt"].shape == (2,) and not x["cnt"].any()


@pytest.mark.parametrize("params,match", [
    (dict(B=2, T_=10, H=1, lens=(4, 6)), r"lens=\(4, 6\): a varlen pack is one row \(B=1\)"),
    (dict(B=1, T_=0, H=1), r"B=1, T_=0, H=1 must be positive"),
    (dict(B=1, T_=70000, H=1, lens=(1,) * 70000), r"70000 sequences: at most 65535 \(grid y\)"),
    (dict(B=1, T_=1 << 18, H=64), r"B=1, T_=262144, H=64, 1 sequences: every tensor \(the "
                                  r"workspaces s0 \[4096, H, K, V\]"),
])
def test_refused_shapes_name_the_case_and_the_rule(params, match):
    with pytest.raises(ValueError, match=r"case 'bad': " + match):
        T.suite(MOD.kda_bwd, inputs=MOD.inputs, reference=MOD.reference, outputs=["dq"],
                constraints=MOD.constraints, cases=[T.case("bad", **params)])
