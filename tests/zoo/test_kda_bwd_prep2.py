"""zoo/kernels/kda_bwd_prep2.py (piece 2a of both walks from one prep): every small case in
numsim against kda_bwd_split.chain_operands / state_operands in float64 (both walks' B^T and
exp(G_C) by kda_bwd_chain_prep's rule, N's fragment words as hi + lo); each walk's outputs
bit-identical to kda_bwd_prep_tc's at the same PREP (the plan can swap it in for the two
launches without moving a number); V staged in half the rows and the barrier between the walks
dropped are caught; sync_check clean; resources; flops and bytes."""

import numpy as np
import pytest

import tirxh.lang as T

from tests.zoo._zoo import mutant, resident_ctas_per_sm, sync_race
from tests.zoo.zoo_modules import assert_matches, load, mismatches

MOD = load("kda_bwd_prep2")
PT = load("kda_bwd_prep_tc")
SLOW = pytest.mark.slow   # numsim of 256 threads: ~166K warp-instructions (~2-3 s) a chunk


def _sim(mod, case):
    import tirxh_numsim as ns  # the numsim plugin distribution (installed with the project)
    x = mod.SUITE.make_inputs(case, 0)
    res = ns.run(mod.kda_bwd_prep2, x, grid=mod.SUITE.grid(case), outputs=list(mod.OUTPUTS),
                 consts=mod.SUITE.consts(case))
    return res, x


def _n_errors(mod, res, x, case):
    """Normalized RMS error of each walk's N (hi + lo of the words against the float64 N)."""
    out = []
    for fwd, name in ((0, "nfrag"), (1, "nfrag_f")):
        raw = dict(x, y=x["v"] if fwd else x["do"])
        N = mod.CH._operands(raw, case.params.get("lens"), forward=bool(fwd))[0]
        err = mod.CH.unsplit(np.asarray(res.outputs[name])) - N
        out.append(float(np.sqrt(np.mean(err ** 2) / np.mean(N ** 2))))
    return out


def _case(name):
    return next(c for c in MOD.SUITE.cases if c.name == name)


@pytest.mark.parametrize("case", [pytest.param(c, marks=() if "t20" in c.name else SLOW)
                                  for c in MOD.SUITE.cases if c.small], ids=lambda c: c.name)
def test_small_case_matches_reference(case):
    res, x = _sim(MOD, case)
    assert_matches(MOD.SUITE, case, res, x)
    # kda_bwd_prep_tc's bound for N as hi + lo (its split products: 4.9e-6 to 5.7e-6)
    assert max(_n_errors(MOD, res, x, case)) < 1e-5


@SLOW
def test_each_walk_is_bit_identical_to_kda_bwd_prep_tc():
    """One 20-row chunk, deep gates: the reverse walk's nfrag, bt and the forward walk's against
    kda_bwd_prep_tc FORWARD 0 / 1 at the same PREP on the same inputs (dO or V as its y)."""
    import tirxh_numsim as ns
    case = _case("t20_h1_deep")
    res, x = _sim(MOD, case)
    keep = ("q", "k", "g_raw", "beta", "A_log", "dt_bias", "chunk_tok", "chunk_rows")
    for fwd, sfx in ((0, ""), (1, "_f")):
        y = {n: x[n] for n in keep}
        y.update(y=x["v"] if fwd else x["do"], nfrag=np.zeros_like(x["nfrag"]),
                 bt=np.zeros_like(x["bt"]), eg=np.zeros_like(x["eg"]))
        one = ns.run(PT.kda_bwd_prep_tc, y, grid=MOD.SUITE.grid(case),
                     outputs=["nfrag", "bt", "eg"], consts=dict(FORWARD=fwd, PREP=2))
        for name in ("nfrag", "bt"):
            assert np.array_equal(np.asarray(res.outputs[name + sfx]),
                                  np.asarray(one.outputs[name])), (fwd, name)
        assert np.array_equal(np.asarray(res.outputs["eg"]), np.asarray(one.outputs["eg"]))


@SLOW
def test_v_staged_in_half_the_rows_is_caught(tmp_path):
    """Each thread stages 32 rows of its column (t / 128 picks the half): with both halves on
    rows 0..31, rows 32..63 of the forward walk's V are the QE tile's values, and B^T = V^T X
    fails on a full chunk (three chunks, saturated gates)."""
    mut = mutant(tmp_path, "kda_bwd_prep2", [(
        "i0 = (T.tid.x >> 7) * (C // 2)", "i0 = (T.tid.x >> 7) * 0")])
    case = next(c for c in mut.SUITE.cases if c.name == "t150_h1_deep")
    res, x = _sim(mut, case)
    assert mismatches(mut.SUITE, case, res, x)


@SLOW
def test_barrier_between_the_walks_is_load_bearing(tmp_path):
    """The reverse walk's N reads W from the G tile while the forward walk writes X over it:
    without the barrier between them sync_check reports the race (numsim's one order of the
    warps still gives the right values, so only sync_check sees it)."""
    mut = mutant(tmp_path, "kda_bwd_prep2", [(
        "    T.ptx.bar.sync(0)\n    _stage_v(sm, ck, v)", "    _stage_v(sm, ck, v)")])
    case = next(c for c in mut.SUITE.cases if c.name == "t20_h1_deep")
    verdicts = [r.verdict for r in sync_race(mut.SUITE, case)]
    assert any(v != "clean" for v in verdicts), verdicts


@SLOW
def test_sync_check_is_clean():
    """One 20-row chunk: the prep, the reverse walk over the G and P tiles, the barrier, V over
    the QE tile and the forward walk over the G tile."""
    for result in sync_race(MOD.SUITE, _case("t20_h1_deep")):
        assert result.verdict == "clean", [f.message for f in result.findings]


def test_compiles_without_spills():
    """ptxas on this machine (2026-12-03): no spills at PREP 1 and 2; kda_bwd_reverse's 227 KB
    of shared memory: one CTA of 256 threads an SM, as kda_bwd_prep_tc."""
    for prep in (1, 2):
        r = MOD.kda_bwd_prep2.compile("sm_90a", PREP=prep).resources
        assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_frame == 0, r
    assert resident_ctas_per_sm(MOD.SUITE, MOD.SUITE.cases[0]) == 1


def test_flops_and_bytes_are_the_two_launches_less_one_prep():
    """Both walks' products as kda_bwd_prep_tc's; the prep's products and the inputs q, k,
    g_raw, beta once."""
    ck = 12288
    two = sum(PT._flops(1, 8192, 96, FORWARD=f, PREP=2) for f in (0, 1))
    assert MOD._flops(1, 8192, 96) == two - 2 * PT.TC.pm_macs(2) * ck
    tok = 8192 * 96
    assert MOD._bytes(1, 8192, 96) == 2 * PT._bytes(1, 8192, 96) - tok * (3 * 2 * 128 + 2) - (
        ck * 4 * 128)
    with pytest.raises(ValueError, match=r"PREP=3 must be 0"):
        T.suite(MOD.kda_bwd_prep2, inputs=MOD.inputs, reference=MOD.reference,
                outputs=["bt"], constraints=MOD.constraints,
                cases=[T.case("bad", B=1, T_=10, H=1, PREP=3)])
