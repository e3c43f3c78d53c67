"""zoo/kernels/activations.py: SwiGLU and GELU(tanh) on bf16 vectors."""

import math
import re

import numpy as np
import pytest

import tirxh.lang as T

from ._zoo import SMS, check, load, resident_ctas_per_sm, simulate, small_cases, spills

act = load("activations")
SUITES = (act.SWIGLU, act.GELU_TANH)


@pytest.mark.parametrize("suite,case", small_cases(*SUITES))
def test_small_cases_match_the_reference_in_numsim(suite, case):
    res = check(suite, case)
    assert res.verdict == "clean", [f.message for f in res.findings]


def test_the_tail_cta_writes_exactly_n_elements():
    """n = 4099: full vectors, then 3 single elements; numsim flags any element outside or
    unwritten (numsim.out-of-bounds / numsim.unwritten-output), so a clean run proves it."""
    case = next(c for c in act.SWIGLU.cases if c.name == "n4099")
    assert act.SWIGLU.grid(case) == (2, 1, 1)  # 4096 elements per CTA
    _, out, exp = simulate(act.SWIGLU, case)
    assert act.ONE_BF16_ULP.compare(out["out"][-3:], exp["out"][-3:])["ok"]


def test_gelu_reference_is_the_tanh_formula_where_float64_can_evaluate_it():
    x = np.linspace(-6, 6, 1001).astype(act.BF16)
    u = math.sqrt(2 / math.pi) * (x.astype(np.float64) + 0.044715 * x.astype(np.float64) ** 3)
    tanh_form = (0.5 * x.astype(np.float64) * (1 + np.tanh(u))).astype(act.BF16)
    np.testing.assert_array_equal(act._gelu_ref(x)["out"], tanh_form)


@pytest.mark.parametrize("suite", SUITES, ids=lambda s: s.name)
def test_shapes_the_kernels_cannot_run_are_refused_when_declared(suite):
    with pytest.raises(ValueError, match=r"case 'empty': n=0 must be in 1..2\^31"):
        T.suite(suite.kernel, inputs=suite.inputs, constraints=act.constraints,
                cases=[T.case("empty", n=0)])
    with pytest.raises(ValueError, match=r"(?s)case 'odd': BLOCK=100 must be a multiple of 32.*"
                                         r"UNROLL=9 must be in 1..8"):
        T.suite(suite.kernel, inputs=suite.inputs, constraints=act.constraints,
                cases=[T.case("odd", n=64, BLOCK=100, UNROLL=9)])
    with pytest.raises(ValueError, match=r"case 'grid': CTAS=-1 must be in 0..4096 \(0: one tile "
                                         r"per CTA\) and EF=2 0 or 1"):
        T.suite(suite.kernel, inputs=suite.inputs, constraints=act.constraints,
                cases=[T.case("grid", n=64, CTAS=-1, EF=2)])
    with pytest.raises(ValueError, match=r"case 'cap': MAXREG=16 must be 0 \(no cap\) or in "
                                         r"32..255"):
        T.suite(suite.kernel, inputs=suite.inputs, constraints=act.constraints,
                cases=[T.case("cap", n=64, MAXREG=16)])
    with pytest.raises(ValueError, match=r"case 'hint': L2=512 must be 0 \(no hint\), 128 or "
                                         r"256"):
        T.suite(suite.kernel, inputs=suite.inputs, constraints=act.constraints,
                cases=[T.case("hint", n=64, L2=512)])


@pytest.mark.parametrize("suite", SUITES, ids=lambda s: s.name)
def test_persistent_grids_are_exactly_one_wave_of_resident_ctas(suite):
    """A persistent grid larger than what the SMs hold at once runs a second, mostly idle wave;
    smaller leaves SMs without work. The compiled register count decides (swiglu: 78 registers,
    3 CTAs of 256 threads per SM; gelu: 53, 4)."""
    cases = [c for c in suite.cases if not c.small and c.params.get("CTAS")]
    assert cases
    for case in cases:
        assert suite.grid(case)[0] == SMS * resident_ctas_per_sm(suite, case), case.name


@pytest.mark.parametrize("suite", SUITES, ids=lambda s: s.name)
def test_no_benchmarked_variant_spills(suite):
    assert spills(suite) == {}


def test_the_persistent_loop_covers_every_vector_once():
    """3 CTAs of 32 threads, 2 vectors per iteration: threads take 6 or 5 of the 512 vectors
    (the next iteration's loads predicated off at the end), CTA 0 the 3 trailing elements; numsim
    flags any element never written (numsim.unwritten-output), so a clean run proves coverage."""
    case = next(c for c in act.SWIGLU.cases if c.name == "n4099_p3_ef")
    assert act.SWIGLU.grid(case) == (3, 1, 1)
    _, out, exp = simulate(act.SWIGLU, case)
    assert act.ONE_BF16_ULP.compare(out["out"], exp["out"])["ok"]


@pytest.mark.parametrize("name,spelling", [("n4099_u1_l2p256", "ld.global.L2::256B.v4.b32"),
                                           ("n4099_p3_l2p128", "ld.global.L2::128B.v4.b32")])
def test_the_l2_prefetch_hint_is_on_every_vector_load(name, spelling):
    """Both paths (one tile per CTA, persistent) put the hint on each 16-byte load and on
    nothing else (the scalar tail's ``ld.global.b16`` stays plain)."""
    suite = act.SWIGLU
    case = next(c for c in suite.cases if c.name == name)
    loads = re.findall(r"ld\.global\S*", suite.kernel.compile("sm_90a", **suite.consts(case)).ptx)
    vec = [ld for ld in loads if ".v4." in ld]
    assert vec and set(vec) == {spelling}
    assert "ld.global.b16" in loads


def test_session6_knobs_are_checked_when_declared():
    with pytest.raises(ValueError, match=r"case 'pol': POL=1 and ST=3 must be 0 or 1, and POL=1 "
                                         r"needs EF=0"):
        T.suite(act.swiglu, inputs=act.SWIGLU.inputs, constraints=act.constraints,
                cases=[T.case("pol", n=64, POL=1, ST=3, EF=1)])


@pytest.mark.parametrize("name", ["n4099_u1_pol_st", "n4099_p3_pol_st"])
def test_policies_and_streaming_stores_are_on_every_vector_access(name):
    """POL=1: every 16-byte load is Triton's evict-first spelling with the one policy register;
    ST=1: every 16-byte store is st.global.cs; the scalar tail stays plain on both paths."""
    suite = act.SWIGLU
    case = next(c for c in suite.cases if c.name == name)
    ptx = suite.kernel.compile("sm_90a", **suite.consts(case)).ptx
    loads = re.findall(r"ld\.global\S* .*", ptx)
    vec = [ld for ld in loads if ".v4." in ld]
    assert vec and all(re.match(r"ld\.global\.L1::evict_first\.L2::cache_hint\.v4\.b32 .*%rd1;",
                                ld) for ld in vec), vec
    stores = re.findall(r"st\.global\S*", ptx)
    assert {s for s in stores if ".v4." in s} == {"st.global.cs.v4.b32"}
    assert "ld.global.b16" in ptx and "st.global.b16" in ptx
    assert ptx.count("createpolicy") == 1
