"""zoo/kernels/kda_bwd_local.py (piece 3 of the chunked backward): every small case in numsim
against the float64 final gradients under the public rule (saturated gates over two chunks with
a tail; a varlen pack with a one-token and a one-chunk sequence, 2 heads, mixed gates), far
inside it (f32 throughout); the block factor F_ab dropped is caught; sync_check clean; the chunk
map; refused shapes; resources."""

import numpy as np
import pytest

import tirxh.lang as T
from tests.zoo._zoo import sync_race
from tests.zoo.zoo_modules import assert_matches, load, load_mutant, mismatches, simulate

MOD = load("kda_bwd_local")
SLOW = pytest.mark.slow   # numsim of 256 threads over a chunk's whole backward: ~10-20 s a CTA


@SLOW
@pytest.mark.parametrize("case", [c for c in MOD.SUITE.cases if c.small], ids=lambda c: c.name)
def test_small_case_matches_reference(case):
    res, inputs = simulate(MOD.SUITE, case)
    assert_matches(MOD.SUITE, case, res, inputs)
    # f32 throughout: far inside the rule (1e-3 leaves room for ddt_bias's cancellations)
    exp = MOD.SUITE.expected(case, inputs)
    for n in MOD.OUTPUTS:
        err = np.abs(res.outputs[n] - exp[n]) / (1.0 + np.abs(exp[n]))
        assert err.max() < 1e-3, (n, float(err.max()))


@SLOW
def test_dropped_block_factor_is_caught(tmp_path):
    """exp(G_i - G_j) across 16-row blocks needs F_ab = 2^(r_a - r_b): with the factor of the
    da sums dropped (F = 1) the saturated-gate case fails."""
    mut = load_mutant("kda_bwd_local", "kd = T.ptx.ld.shared.f32(sm.kd.at(j, d)) * f\n",
                      "kd = T.ptx.ld.shared.f32(sm.kd.at(j, d))\n", tmp_path)
    case = mut.SUITE.cases[0]
    res, inputs = simulate(mut.SUITE, case)
    assert mismatches(mut.SUITE, case, res, inputs)


@SLOW
def test_sync_check_is_clean():
    """Two chunks of two sequences (3 + 2 rows: tails) on one head: every phase's barrier, the
    register-kept results written over the operands after the barrier that frees them, the gate
    parameters' slots and counter across CTAs."""
    case = T.case("sync", B=1, T_=5, H=1, lens=(3, 2), gate="deep")
    for result in sync_race(MOD.SUITE, case):
        assert result.verdict == "clean", [f.message for f in result.findings]


@SLOW
def test_a_full_chunk_stays_within_its_instruction_budget():
    """numsim's dynamic count of one full 64-row chunk, the basis of the docs' prediction:
    271K PTX warp-instructions on 2026-12-01 (the first draft's 602K were mostly address
    arithmetic recomputed for every unrolled row)."""
    res, _ = simulate(MOD.SUITE, T.case("full", B=1, T_=64, H=1))
    assert res.verdict == "clean"
    assert res.stats["warp_instructions"] < 300_000, res.stats["warp_instructions"]


def test_chunk_map_and_pieces_layout():
    x = MOD.inputs(np.random.default_rng(0), B=1, T_=74, H=2, lens=(9, 1, 64))
    assert list(x["chunk_tok"]) == [0, 9, 10] and list(x["chunk_rows"]) == [9, 1, 64]
    assert x["dqe"].shape == (3, 2, 64, 128) and x["dm"].shape == (3, 2, 64, 64)
    assert x["dgs"].shape == (3, 2, 128) and x["gred"].shape == (3, 2, 2, 128)
    # rows past a sequence carry no gradient (the kernel masks them; the pieces agree)
    assert not x["dqe"][0, :, 9:].any() and not x["dke"][1, :, 1:].any()
    assert np.array_equal(np.triu(x["dm"][2, 0], 1), np.zeros((64, 64)))
    x = MOD.inputs(np.random.default_rng(0), B=2, T_=70, H=1)
    assert list(x["chunk_tok"]) == [0, 64, 70, 134] and list(x["chunk_rows"]) == [64, 6, 64, 6]


def test_timing_inputs_have_the_pieces_structure():
    """The timing suite's synthetic pieces: the chunk map of a pack, rows past a sequence zero,
    dm and dtb lower triangular; no reference (SUITE's small cases check the kernel)."""
    x = MOD.timing_inputs(np.random.default_rng(0), 1, 200, 2, lens=(150, 50))
    assert list(x["chunk_tok"]) == [0, 64, 128, 150] and list(x["chunk_rows"]) == [64, 64, 22, 50]
    assert not x["dqe"][2, :, 22:].any() and x["dqe"][2, :, :22].all()
    assert not np.triu(x["dtb"], 1).any() and x["dm"].dtype == np.float32
    assert all(not c.small for c in MOD.SUITE_TIMING.cases) and MOD.SUITE_TIMING.reference is None


@pytest.mark.parametrize("params,match", [
    (dict(B=1, T_=1 << 22, H=1), r"65536 chunks: at most 65535 \(grid y\)"),
    (dict(B=1, T_=1 << 21, H=16), r"every tensor \(the pieces \[32768, H, 64, 128\] included\)"),
    (dict(B=2, T_=10, H=1, lens=(4, 6)), r"a varlen pack is one row \(B=1\)"),
])
def test_refused_shapes_name_the_case_and_the_rule(params, match):
    with pytest.raises(ValueError, match=r"case 'bad': .*" + match):
        T.suite(MOD.kda_bwd_local, inputs=MOD.inputs, reference=MOD.reference, outputs=["dq"],
                constraints=MOD.constraints, cases=[T.case("bad", **params)])


def test_compiles_without_spills():
    """ptxas on this machine: 255 registers (the inverse keeps a column of T, 64 values, in
    registers), no spills; one CTA of 256 threads per SM."""
    r = MOD.kda_bwd_local.compile("sm_90a").resources
    assert r.spill_stores == 0 and r.stack_frame == 0, r
    assert 256 * r.registers <= 65536, r
