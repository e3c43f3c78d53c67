"""zoo/kernels/kda_bwd_local_tc.py (piece 3 of the chunked backward with its products on tensor
cores, split bf16 operands): every small case in numsim against the float64 final gradients
under the public rule (one 20-row tail chunk and two chunks with a tail under saturated gates;
a varlen pack with a one-token and a one-chunk sequence, 2 heads, mixed gates), checked like
kda_bwd_local's; a dropped block factor (P's or the pair gradients') and the pair gradients'
A operand in plain bf16 are caught; sync_check clean; the instruction count the docs'
prediction rests on; resources; the interface of kda_bwd_local (plan "tc" swaps it in:
test_kda_fwd_bwd.py)."""

import numpy as np
import pytest

import tirxh.lang as T
from tests.zoo._zoo import resident_ctas_per_sm, sync_race
from tests.zoo.zoo_modules import assert_matches, load, load_mutant, mismatches, simulate

MOD = load("kda_bwd_local_tc")
SLOW = pytest.mark.slow   # numsim of 256 threads: ~152K warp-instructions (~1 s) a chunk
# worst |error| / (0.01 + 0.01 |ref|) of any output on 2026-12-02 (numsim): 0.0025 (dk), 0.012
# (dbeta), 0.032 (ddt_bias: a head's sum over every token, with cancellation; kda_bwd_local's
# 0.067, this kernel's with the pair gradients split two ways 0.27); the bounds leave ~2x
WORST = {"t20_h1_deep": 0.01, "t86_h1_deep": 0.03, "pack_9_1_64_h2": 0.07}


def _worst(case, res, inputs):
    exp = MOD.SUITE.expected(case, inputs)
    return {n: float(np.max(np.abs(np.asarray(res.outputs[n], np.float64) - exp[n])
                            / (0.01 + 0.01 * np.abs(exp[n])))) for n in MOD.OUTPUTS}


@pytest.mark.parametrize("case", [pytest.param(c, marks=() if c.name == "t20_h1_deep" else SLOW)
                                  for c in MOD.SUITE.cases if c.small], ids=lambda c: c.name)
def test_small_case_matches_reference(case):
    res, inputs = simulate(MOD.SUITE, case)
    assert_matches(MOD.SUITE, case, res, inputs)
    worst = _worst(case, res, inputs)
    assert max(worst.values()) < WORST[case.name], worst


@SLOW
@pytest.mark.parametrize("old,new", [
    # the pair gradients' block factor F = 2^(r_a - r_s) dropped (da: k-steps s < a)
    ("lambda s, d: BL._factor(sm, a, s, d))", "lambda s, d: 1.0)"),
    # P's factor F_ab dropped: KL's blocks a against KD's blocks b < a undecayed
    ("return [src * BL._factor(self.sm, self.a, self.b, k0 + dc + e * step[1])",
     "return [src * 1.0"),
    # the pair gradients' A operand without its mid and lo parts: dP, dm as plain bf16
    ("SPLIT3 = [(1, 1), (2, 0), (0, 2), (1, 0), (0, 1), (0, 0)]",
     "SPLIT3 = [(0, 2), (0, 1), (0, 0)]"),
], ids=["da_factor", "p_factor", "a_hi_only"])
def test_mutants_are_caught(old, new, tmp_path):
    mut = load_mutant("kda_bwd_local_tc", old, new, tmp_path)
    case = next(c for c in mut.SUITE.cases if c.name == "t86_h1_deep")
    res, x = simulate(mut.SUITE, case)
    assert mismatches(mut.SUITE, case, res, x)


@SLOW
def test_sync_check_is_clean():
    """Two chunks of two sequences (3 + 2 rows: tails) on one head: the mma phases' tiles (X,
    dA o P and dP over P), the pair gradients kept in registers across the barrier that frees
    KL, KD, QL, the column partials folded by the scan's own thread, the gate parameters'
    slots and counter across CTAs."""
    case = T.case("sync", B=1, T_=5, H=1, lens=(3, 2), gate="deep")
    for result in sync_race(MOD.SUITE, case):
        assert result.verdict == "clean", [f.message for f in result.findings]


@SLOW
def test_a_full_chunk_stays_within_its_instruction_budget():
    """numsim's dynamic count of one full 64-row chunk, the basis of the docs' prediction:
    152K PTX warp-instructions on 2026-12-02 (kda_bwd_local: 271K), 5,088 mma.sync."""
    res, _ = simulate(MOD.SUITE, T.case("full", B=1, T_=64, H=1))
    assert res.verdict == "clean"
    assert res.stats["warp_instructions"] < 165_000, res.stats["warp_instructions"]
    assert res.stats["ops"]["mma.sync"] == 5088, res.stats["ops"]["mma.sync"]


def test_compiles_without_spills():
    """ptxas on this machine (2026-12-02): 255 registers (kda_bwd_local's inverse keeps a
    column of T in registers), no spills; 218 KB of shared memory: one CTA of 256 an SM."""
    r = MOD.kda_bwd_local_tc.compile("sm_90a").resources
    assert r.spill_stores == 0 and r.stack_frame == 0, r
    assert 256 * r.registers <= 65536, r
    assert resident_ctas_per_sm(MOD.SUITE, MOD.SUITE.cases[0]) == 1


def test_same_interface_as_the_f32_kernel():
    """The plan swaps it for kda_bwd_local: same parameters in the same order, same outputs;
    its declared FLOPs are the split products: X and dA (C^3 each) and P (10 of 16 block pairs
    of C^2 K) as three bf16 mma a multiply-add, da and db (two products each, 10 of 16 block
    pairs) as six (three-way split)."""
    BL = load("kda_bwd_local")
    names = [p.name for p in MOD.kda_bwd_local_tc.runtime_params]
    assert names == [p.name for p in BL.kda_bwd_local.runtime_params]
    assert MOD.OUTPUTS == BL.OUTPUTS and MOD.SUITE_TIMING.reference is None
    assert [c.name for c in MOD.SUITE.cases] == [c.name for c in BL.SUITE.cases]
    ccc, cck = 64 ** 3, 64 * 64 * 128
    per = 3 * (2 * ccc + 10 * cck // 16) + 6 * 4 * 10 * cck // 16
    assert MOD._flops(1, 8192, 96) == 2 * per * 12288


def test_the_scan_splits_into_its_two_halves_under_iket():
    """`tirxh profile --iket` of piece 3: inside `scan`, warps 0..3 record `scan_chain` (the
    reverse scan and gate chain) and warps 4..7 `row_dots` (the norms' dots), so the summary's
    per-role means say which half the `scan` wall waits for; a normal build's PTX is the
    unannotated kernel's (the ranges emit nothing)."""
    from tirxh.core.compiler import compile_kernel
    lg = load("kda_bwd_local_tc").kda_bwd_local_lg
    consts = load("kda_fwd_bwd").LAUNCH_CONSTS["tc37"][1]
    built = compile_kernel(lg, "sm_90a", consts, assemble=False, transforms=("iket",))
    sites = [(s.kind, s.name) for s in built.transforms["iket"].sites]
    i = sites.index(("begin", "scan"))
    assert sites[i:i + 6] == [("begin", "scan"), ("begin", "scan_chain"), ("end", "scan_chain"),
                              ("begin", "row_dots"), ("end", "row_dots"), ("end", "scan")]
    plain = compile_kernel(lg, "sm_90a", consts, assemble=False).ptx
    assert "iket" not in plain and plain.count("bar.sync") == built.ptx.count("bar.sync")
