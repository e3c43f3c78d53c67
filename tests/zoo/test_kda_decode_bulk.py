"""zoo/kernels/kda_decode_bulk.py: kda_decode's small cases (and rings that wrap) in numsim
against the float64 recurrence; sync_check clean, and the protocol's three orderings shown to be
load-bearing (without each, sync_check reports the race); two launches of one token equal one of
two; one CTA per SM, no spills; refused shapes."""

import numpy as np
import pytest

import tirxh.lang as T

from ._zoo import check, load, mutant, resident_ctas_per_sm, small_cases, spills, sync_race

MOD = load("kda_decode_bulk")
RING = next(c for c in MOD.SUITE.cases if c.name == "n7_h1_t2_c2")


@pytest.mark.parametrize("suite,case", small_cases(MOD.SUITE))
def test_small_cases_match_the_reference_in_numsim(suite, case):
    res = check(suite, case)
    assert res.verdict == "clean", [f.message for f in res.findings]


def test_the_ring_is_clean_under_sync_check():
    """Two CTAs walk 4 and 3 heads through 3 stages: each stage is refilled behind its store."""
    assert MOD.SUITE.grid(RING) == (2, 1, 1)
    sync, race = sync_race(MOD.SUITE, RING)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings
    assert "events checked" in race.summary


@pytest.mark.parametrize("old,new,code", [
    ("T.ptx.cp.async_.bulk.wait_group.read(1)", "pass", "race.stage-reuse"),
    ("T.ptx.fence.proxy.async_.shared__cta()", "pass", "proxy.missing-fence"),
    ("par.set(T.ptx.xor.b32(par, 1))", "pass", "race.read-write"),
    ("T.ptx.cp.async_.bulk.wait_group(0)", "pass", "exit.bulk-store-pending"),
], ids=["no-wait-group-read", "no-proxy-fence", "one-partials-buffer", "no-wait-before-exit"])
def test_each_ordering_of_the_protocol_is_needed(tmp_path, old, new, code):
    """The stage refilled before its store has read it, the threads' writes not fenced for the
    copy engine, the next token's partials written over this token's, the CTA exiting while its
    last head's store still reads its stage: each is a finding."""
    mod = mutant(tmp_path, "kda_decode_bulk", [(old, new)])
    found = [f for r in sync_race(mod.SUITE, RING) for f in r.findings]
    assert code in {f.kind for f in found}, [f.message for f in found]


def test_two_single_token_launches_equal_one_two_token_launch():
    two = type(RING)("t2", dict(N=3, H=2, TT=2, CTAS=2))
    x = MOD.SUITE.make_inputs(two, seed=3)
    full = MOD.kda_decode_bulk
    numsim = pytest.importorskip("tirxh_numsim")

    def run(case, inputs):
        res = numsim.run(full, inputs, consts=MOD.SUITE.consts(case), grid=MOD.SUITE.grid(case),
                         outputs=["o", "state"])
        assert res.verdict == "clean", res.summary()
        return res.outputs

    res2 = run(two, x)
    one = type(RING)("t1", dict(two.params, TT=1))
    state, outs = x["state"].copy(), []
    for t in range(2):
        step = dict(x, state=state, o=np.empty_like(x["o"][:, :1]),
                    **{n: np.ascontiguousarray(x[n][:, t:t + 1])
                       for n in ("q", "k", "v", "g_raw", "beta")})
        res = run(one, step)
        state = res["state"]
        outs.append(res["o"])
    np.testing.assert_array_equal(np.concatenate(outs, axis=1), res2["o"])
    np.testing.assert_array_equal(state, res2["state"])


def test_one_persistent_cta_per_sm_without_spills():
    """Three 68 KB stages fill an SM's shared memory: one CTA per SM, so the grid (132) is one
    wave; the 64 state registers and the tokens' rows fit in 255 without spilling."""
    big = {c.name: c for c in MOD.SUITE.cases if not c.small}
    assert set(big) == {"n256_h64_t1", "n128_h96_t1", "n64_h64_t4", "n1024_h32_t2",
                        "n64_h64_t4_c128"}
    assert all("ring" in c.tags for c in big.values())
    assert MOD.SUITE.grid(big["n256_h64_t1"]) == (132, 1, 1)
    assert MOD.SUITE.grid(big["n64_h64_t4_c128"]) == (128, 1, 1)
    assert resident_ctas_per_sm(MOD.SUITE, big["n64_h64_t4"]) == 1
    assert spills(MOD.SUITE) == {}


@pytest.mark.parametrize("params,match", [
    (dict(N=2, H=2, TT=5), r"TT=5 tokens per sequence must be in \[1, 4\] \(decode\)"),
    (dict(N=2, H=2, STAGES=2), r"STAGES=2: the ring needs 3 stages or more"),
    (dict(N=2, H=2, TT=1, STAGES=4), r"STAGES=4, TT=1: 283024 bytes of shared memory exceed"),
    (dict(N=2, H=2, CTAS=0), r"CTAS=0 must be >= 1"),
])
def test_refused_shapes_name_the_case_and_the_rule(params, match):
    with pytest.raises(ValueError, match=r"case 'bad': " + match):
        T.suite(MOD.kda_decode_bulk, inputs=MOD.D.inputs, reference=MOD.D.reference,
                outputs=["o"], constraints=MOD.constraints, cases=[T.case("bad", **params)])


def test_inputs_and_reference_are_kda_decodes():
    """The same functions and the same runtime parameters: benchmarks/bench_with.py
    --share-inputs makes a large case's arrays and float64 reference once for both kernels."""
    assert MOD.SUITE.inputs is MOD.D.SUITE.inputs
    assert MOD.SUITE.reference is MOD.D.SUITE.reference
    assert (list(map(repr, MOD.kda_decode_bulk.runtime_params))
            == list(map(repr, MOD.D.kda_decode.runtime_params)))
    assert MOD.SUITE.tolerance == MOD.D.SUITE.tolerance
