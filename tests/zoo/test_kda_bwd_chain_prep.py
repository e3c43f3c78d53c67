"""zoo/kernels/kda_bwd_chain_prep.py (piece 2a of the chain split: kda_bwd_chain's operands of
every chunk at once, and with FORWARD the forward walk's): every small case in numsim against
kda_bwd_split.chain_operands / state_operands in float64 (B^T and exp(G_C) by the suite's rule; N's fragment words as what the chain multiplies
by, hi + lo); the dropped M W term is caught; sync_check clean; resources. The chained check
(prep -> chain -> chunk_pieces -> kda_bwd_local within the public rule) is in
test_kda_bwd_chain.py."""

import numpy as np
import pytest

import tirxh.lang as T
from tests.zoo._zoo import resident_ctas_per_sm, sync_race
from tests.zoo.zoo_modules import assert_matches, load, load_mutant, mismatches

MOD = load("kda_bwd_chain_prep")
SLOW = pytest.mark.slow   # numsim of 256 threads: ~340K warp-instructions (~2 s) a chunk


def _run(mod, case):
    import tirxh_numsim as ns  # the numsim plugin distribution (installed with the project)
    x = mod.SUITE.make_inputs(case, 0)
    res = ns.run(mod.kda_bwd_chain_prep, x, grid=mod.SUITE.grid(case), outputs=list(mod.OUTPUTS),
                 consts=mod.SUITE.consts(case))
    return res, x


def _n_error(mod, res, x, case):
    """Normalized RMS error of N (hi + lo of the kernel's words against the float64 N)."""
    fwd = case.params.get("FORWARD", 0)
    raw = dict(x, **{"v" if fwd else "do": x["y"]})
    N = mod.CH._operands(raw, case.params.get("lens"), forward=bool(fwd))[0]
    err = mod.CH.unsplit(np.asarray(res.outputs["nfrag"])) - N
    return float(np.sqrt(np.mean(err ** 2) / np.mean(N ** 2)))


@pytest.mark.parametrize("case", [c for c in MOD.SUITE.cases if c.small], ids=lambda c: c.name)
def test_small_case_matches_reference(case):
    res, x = _run(MOD, case)
    assert_matches(MOD.SUITE, case, res, x)
    # N: 6e-7 to 7e-7 normalized RMS on 2026-12-02 (hi + lo carries ~2^-17)
    assert _n_error(MOD, res, x, case) < 5e-6


@SLOW
def test_dropped_m_w_term_is_caught(tmp_path):
    """B = (QE - M W)^T dO: with U = QE (the M W term dropped) B^T fails."""
    mut = load_mutant("kda_bwd_chain_prep",
                      "T.ptx.ld.shared.f32(sm.qe.at(i, d)) - acc[r])",
                      "T.ptx.ld.shared.f32(sm.qe.at(i, d)))", tmp_path)
    case = next(c for c in mut.SUITE.cases if c.name == "t20_h1_deep")
    res, x = _run(mut, case)
    assert mismatches(mut.SUITE, case, res, x)


@SLOW
def test_sync_check_is_clean():
    """One chunk of 20 rows: the reused prep phases, the W and U tiles written over G and P,
    N's pair exchange by shuffle."""
    case = next(c for c in MOD.SUITE.cases if c.name == "t20_h1_deep")
    for result in sync_race(MOD.SUITE, case):
        assert result.verdict == "clean", [f.message for f in result.findings]


def test_compiles_within_one_cta_per_sm():
    """ptxas on this machine: 143 registers, no spills, kda_bwd_reverse's 227 KB of shared
    memory: one CTA of 256 threads an SM."""
    assert MOD.kda_bwd_chain_prep.compile("sm_90a").resources.spill_stores == 0
    assert resident_ctas_per_sm(MOD.SUITE, MOD.SUITE.cases[0]) == 1


def test_inputs_and_refused_shapes():
    x = MOD.inputs(np.random.default_rng(0), B=1, T_=111, H=2, lens=(80, 1, 30))
    assert list(x["chunk_tok"]) == [0, 64, 80, 81] and list(x["chunk_rows"]) == [64, 16, 1, 30]
    assert x["nfrag"].shape == (4, 2, 8, 16, 32, 4) and x["bt"].shape == (4, 2, 128, 128)
    with pytest.raises(ValueError, match=r"case 'bad': .*a varlen pack is one row \(B=1\)"):
        T.suite(MOD.kda_bwd_chain_prep, inputs=MOD.inputs, reference=MOD.reference,
                outputs=["bt"], constraints=MOD.constraints,
                cases=[T.case("bad", B=2, T_=10, H=1, lens=(4, 6))])


def test_timing_inputs():
    """The timing suite: raw inputs, dO and the chunk map, no reference."""
    x = MOD.timing_inputs(np.random.default_rng(0), 1, 200, 2, lens=(150, 50))
    assert list(x["chunk_rows"]) == [64, 64, 22, 50] and x["y"].shape == (1, 200, 2, 128)
    assert x["nfrag"].shape == (4, 2, 8, 16, 32, 4)
    assert all(not c.small for c in MOD.SUITE_TIMING.cases) and MOD.SUITE_TIMING.reference is None
