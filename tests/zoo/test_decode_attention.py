"""zoo/kernels/decode_attention.py: small cases in numsim against float64 attention (with every
cache slot outside a sequence NaN, so a leak shows), a second launch on the same scratch (the
split counters reset themselves), refused shapes."""

import numpy as np
import pytest

from tests.zoo.zoo_modules import (assert_matches, declare, load, load_mutant, mismatches,
                                  simulate, small_cases)

MOD = load("decode_attention")


@pytest.mark.parametrize("case", small_cases("decode_attention"), ids=lambda c: c.name)
def test_small_case_matches_reference(case):
    res, inputs = simulate(MOD.SUITE, case)
    assert np.isnan(inputs["k_cache"].astype(np.float32)).any()  # stale slots are poisoned
    assert_matches(MOD.SUITE, case, res, inputs)


def test_split_counters_reset_for_the_next_launch():
    case = MOD.make_case("twice", B=1, KVH=1, G=2, PAGE=16, L=100, SPLITS=2, STAGES=2)
    res, inputs = simulate(MOD.SUITE, case)
    assert_matches(MOD.SUITE, case, res, inputs)
    assert res.outputs["counters"].tolist() == [[0]]
    again = dict(inputs, q=-inputs["q"], counters=res.outputs["counters"],
                 part_o=res.outputs["part_o"], part_ml=res.outputs["part_ml"])
    res2, _ = simulate(MOD.SUITE, case, inputs=again)
    assert_matches(MOD.SUITE, case, res2, again)


@pytest.mark.parametrize("params,match", [
    (dict(G=17), r"case 'bad': G=17 query heads per KV head must be in \[1, 16\]"),
    (dict(PAGE=24), r"PAGE=24 must be 16, 32, 64, 128 or 256 tokens"),
    (dict(SPLITS=0), r"SPLITS=0 must be in \[1, 64\]"),
    (dict(lens=(5, 200)), r"lens=\(5, 200\) must hold B=2 lengths in \[1, L=100\]"),
    (dict(lens=(0, 10)), r"lens=\(0, 10\) must hold B=2 lengths"),
])
def test_refused_shapes_name_the_case_and_the_constraint(params, match):
    base = dict(B=2, KVH=1, G=4, PAGE=16, L=100)
    with pytest.raises(ValueError, match=match):
        declare(MOD.SUITE, MOD.make_case("bad", **dict(base, **params)), MOD.constraints)


@pytest.mark.parametrize("old,new,case_name,why", [
    ("b0 = [T.ptx.and_.b32(r0, lo_mask), T.ptx.and_.b32(r1, hi_mask)]", "b0 = [r0, r1]",
     "b1_kv2_g2_p16_s2", "masked tokens' V (NaN slots) reach the accumulator"),
    ("T.ptx.mul.f32(a[2 * r], a[2 * r], corr)", "pass", "b1_g1_p64",  # 2 blocks in one CTA
     "the accumulator is not rescaled when the running max grows"),
    ("T.ptx.fma.rn.f32(lsum, ml[s][1], f, lsum)", "pass", "b2_g4_p32_s2",
     "the splits' sums are not combined"),
])
def test_the_check_catches_a_broken_kernel(tmp_path, old, new, case_name, why):
    mut = load_mutant("decode_attention", old, new, tmp_path)
    case = next(c for c in mut.SUITE.cases if c.name == case_name)
    res, inputs = simulate(mut.SUITE, case)
    assert mismatches(mut.SUITE, case, res, inputs), why


def test_the_tma_ring_is_1024_aligned_whatever_the_window_base(tmp_path):
    """Issue 19: on the H200 the kernel faulted (misaligned address) on every launch: its small
    variables were static .shared declarations, the dynamic window followed them at the next
    16-byte boundary (GPU call 3) and the 128B-swizzled TMA ring was not 1024-aligned. Now every
    variable is in the window at a compiler offset and the base is rounded up at run time; the
    old layout still faults in numsim as it did on the GPU."""
    case = next(c for c in MOD.SUITE.cases if c.name == "b1_g1_p64")
    kir = MOD.SUITE.kernel.specialize(**MOD.SUITE.consts(case))
    ring = {v.name: v.offset for v in kir.shared if v.swizzle}
    assert set(ring) == {"sK", "sV"} and all(off % 1024 == 0 for off in ring.values())
    assert all(v.dynamic for v in kir.shared) and kir.smem_base_align == 1024
    ptx = MOD.SUITE.kernel.ptx("sm_90a", **MOD.SUITE.consts(case))
    assert "\t.shared" not in ptx and "and.b32 \t%tirx_smem, %tirx_smem, -1024;" in ptx

    old = load_mutant("decode_attention", "@T.kernel(grid=_grid, block=32 * (CONSUMERS + 1))",
                      "@T.kernel(grid=_grid, block=32 * (CONSUMERS + 1), smem_layout='split')",
                      tmp_path)
    res, _ = simulate(old.SUITE, case)
    mis = [f for f in res.diagnostics if f.kind == "numsim.misaligned"]
    assert res.verdict == "error" and mis and "TMA box in shared memory (128B swizzle)" in \
        mis[0].message
