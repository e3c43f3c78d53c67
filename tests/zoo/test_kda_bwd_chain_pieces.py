"""zoo/kernels/kda_bwd_chain_pieces.py (piece 2c of the chain split: dv and the pieces of every
chunk at once from S0 and dS1): the small cases in numsim against kda_bwd_split.chunk_pieces in
float64 (far inside the rule: f32 throughout); a chunk that reads the wrong chunk's dS1 is
caught; sync_check clean; resources. The chained check (prep -> chain -> pieces ->
kda_bwd_local within the public rule) is in test_kda_bwd_chain.py."""

import numpy as np
import pytest

import tirxh.lang as T
from tests.zoo._zoo import resident_ctas_per_sm, sync_race
from tests.zoo.zoo_modules import load, load_mutant, matches_within, mismatches, simulate

MOD = load("kda_bwd_chain_pieces")
SLOW = pytest.mark.slow   # numsim of 256 threads: ~675K warp-instructions (~4 s) a chunk


@SLOW
@pytest.mark.parametrize("case", [c for c in MOD.SUITE.cases if c.small], ids=lambda c: c.name)
def test_small_case_matches_reference(case):
    errors = matches_within(MOD.SUITE, case)
    # f32 throughout: <= 6.7e-7 normalized RMS on 2026-12-02 (the rule is 1e-4)
    assert max(errors.values()) < 1e-5, errors


@SLOW
def test_a_chunk_reading_its_neighbours_ds1_is_caught(tmp_path):
    """Each chunk reads its own dS1 (ds1[c]): the next chunk's instead fails the pack."""
    mut = load_mutant("kda_bwd_chain_pieces", "BR._Mat(ds1, ck.state())",
                      "BR._Mat(ds1, ck.state() + (T.nctaid.x << 14))", tmp_path)
    case = T.case("two_chunks", B=1, T_=70, H=1, gate="mixed")
    x = mut.SUITE.make_inputs(case, 0)
    x["ds1"] = np.concatenate([x["ds1"], x["ds1"][:1] * 0 + 1]).astype(np.float32)
    res, x = simulate(mut.SUITE, case, inputs=x)
    assert mismatches(mut.SUITE, case, res, x)


@SLOW
def test_sync_check_is_clean():
    """One chunk of 20 rows: kda_bwd_reverse's phases without its state update."""
    case = next(c for c in MOD.SUITE.cases if c.name == "t20_h1_deep")
    for result in sync_race(MOD.SUITE, case):
        assert result.verdict == "clean", [f.message for f in result.findings]


def test_compiles_without_spills():
    """ptxas on this machine: 248 registers, no spills (kda_bwd_reverse spills 16 bytes with
    its update), 227 KB of shared memory: one CTA of 256 threads an SM."""
    r = MOD.kda_bwd_chain_pieces.compile("sm_90a").resources
    assert r.spill_stores == 0 and r.registers <= 255, r
    assert resident_ctas_per_sm(MOD.SUITE, MOD.SUITE.cases[0]) == 1


def test_inputs_and_timing_inputs():
    x = MOD.inputs(np.random.default_rng(0), B=1, T_=111, H=2, lens=(80, 1, 30))
    assert x["s0"].shape == (4, 2, 128, 128) and x["ds1"].shape == (4, 2, 128, 128)
    assert x["dqe"].shape == (4, 2, 64, 128) and "dh0" not in x
    # the last chunk of each sequence ends in dht: its dS1 is dht
    BW = load("kda_bwd")
    raw = BW.inputs(np.random.default_rng(0), 1, 111, 2, lens=(80, 1, 30))
    np.testing.assert_array_equal(x["ds1"][[1, 2, 3]], raw["dht"])
    t = MOD.timing_inputs(np.random.default_rng(0), 1, 200, 2, lens=(150, 50))
    assert t["ds1"].shape == (4, 2, 128, 128) and list(t["chunk_rows"]) == [64, 64, 22, 50]
    assert MOD.SUITE_TIMING.reference is None
