"""zoo/kernels/norms.py: RMSNorm, LayerNorm, residual-add + RMSNorm and fp8 quantization."""

import re

import numpy as np
import pytest

import tirxh.lang as T

from ._zoo import (SMS, check, load, resident_ctas_per_sm, simulate, small_cases, spills,
                   sync_race)
from .zoo_modules import load_mutant

norms = load("norms")
SUITES = (norms.RMSNORM, norms.LAYERNORM, norms.ADD_RMSNORM, norms.QUANT_FP8)


@pytest.mark.parametrize("suite,case", small_cases(*SUITES))
def test_small_cases_match_the_reference_in_numsim(suite, case):
    res = check(suite, case)
    assert res.verdict == "clean", [f.message for f in res.findings]


def test_a_two_ulp_error_is_caught():
    """The tolerance is one bf16 ulp: an output two ulps off fails it."""
    suite = norms.RMSNORM
    case = next(c for c in suite.cases if c.name == "r5_c1000_b64")
    _, out, exp = simulate(suite, case)
    tol = suite.tolerance_for("out")
    assert tol.compare(out["out"], exp["out"])["ok"]
    bad = out["out"].copy()
    bad[2, 999] = (exp["out"][2, 999].astype(np.float64) * (1 + 2 ** -6)).astype(norms.BF16)
    r = tol.compare(bad, exp["out"])
    assert not r["ok"] and r["first"][0]["index"] == [2, 999]


def test_fp8_quantization_is_bitwise_and_an_all_zero_row_gets_the_floor_scale():
    suite = norms.QUANT_FP8
    case = next(c for c in suite.cases if c.name == "r5_c1000_b64")
    inputs, out, exp = simulate(suite, case)
    assert not inputs["x"][0].astype(np.float32).any()
    np.testing.assert_array_equal(out["q"].view(np.uint8), exp["q"].view(np.uint8))
    np.testing.assert_array_equal(out["scale"], exp["scale"])
    assert out["scale"][0] == np.float32(1e-12) / np.float32(448) and not out["q"][0].any()
    # the largest |x| of every other row maps to +-448 exactly
    assert np.all(np.abs(out["q"][1:].astype(np.float32)).max(axis=1) == 448)


def test_residual_add_is_the_exact_sum_rounded_once():
    suite = norms.ADD_RMSNORM
    case = next(c for c in suite.cases if c.name == "r3_c4096")
    inputs, out, _ = simulate(suite, case)
    want = (inputs["x"].astype(np.float64) + inputs["residual"].astype(np.float64))
    np.testing.assert_array_equal(out["h"], want.astype(norms.BF16))


@pytest.mark.parametrize("suite", SUITES, ids=lambda s: s.name)
def test_shapes_the_kernels_cannot_run_are_refused_when_declared(suite):
    with pytest.raises(ValueError, match=r"case 'odd': cols=1001 must be a positive multiple "
                                         r"of 8"):
        T.suite(suite.kernel, inputs=suite.inputs, constraints=norms.constraints,
                cases=[T.case("odd", rows=4, cols=1001)])
    with pytest.raises(ValueError, match=r"case 'wide': cols=40960 is more than 8 \* BLOCK \* "
                                         r"16 = 32768"):
        T.suite(suite.kernel, inputs=suite.inputs, constraints=norms.constraints,
                cases=[T.case("wide", rows=4, cols=40960)])
    with pytest.raises(ValueError, match=r"case 'huge': rows=1048576: need 1 <= rows and "
                                         r"rows \* cols < 2\^32"):
        T.suite(suite.kernel, inputs=suite.inputs, constraints=norms.constraints,
                cases=[T.case("huge", rows=1 << 20, cols=4096)])
    with pytest.raises(ValueError, match=r"case 'knobs': CTAS=5000 must be in 0..4096 \(0: one "
                                         r"CTA per row\), EF=1 0 or 1 and MAXREG=8 0 \(no cap\)"):
        T.suite(suite.kernel, inputs=suite.inputs, constraints=norms.constraints,
                cases=[T.case("knobs", rows=4, cols=4096, CTAS=5000, EF=1, MAXREG=8)])
    with pytest.raises(ValueError, match=r"case 'hint': L2=64 must be 0 \(no hint\), 128 or 256"):
        T.suite(suite.kernel, inputs=suite.inputs, constraints=norms.constraints,
                cases=[T.case("hint", rows=4, cols=4096, L2=64)])
    with pytest.raises(ValueError, match=r"case 'l1': L1=1 must be in \[0, 1\] and 0 with EF=1 "
                                         r"\(ld takes a \.cs cache operator or an \.L1"):
        T.suite(suite.kernel, inputs=suite.inputs, constraints=norms.constraints,
                cases=[T.case("l1", rows=4, cols=4096, L1=1, EF=1)])


def test_tails_and_layouts():
    """A row whose vectors do not fill the threads predicates only the last vector."""
    assert norms.threads(520, 256) == 96 and norms.threads(8192, 256) == 256
    assert norms.threads(8, 1024) == 32
    assert norms.rmsnorm.specialize(cols=520, BLOCK=256).block == (96, 1, 1)


@pytest.mark.parametrize("suite", SUITES, ids=lambda s: s.name)
def test_the_cross_warp_reduction_is_race_free(suite):
    case = next(c for c in suite.cases if c.name == "r3_c4096")  # 8 warps, one bar.sync
    sync, race = sync_race(suite, case)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings


@pytest.mark.parametrize("suite", SUITES, ids=lambda s: s.name)
def test_persistent_grids_fit_one_wave_and_share_the_rows_evenly(suite):
    """A persistent grid larger than what the SMs hold at once would run a second wave; rows
    that do not divide among the CTAs leave a tail of CTAs with one row more. Both are checked
    against the compiled register count; and no benchmarked variant spills (MAXREG caps)."""
    cases = [c for c in suite.cases if not c.small and c.params.get("CTAS")]
    assert cases
    for case in cases:
        grid = suite.grid(case)[0]
        assert grid <= SMS * resident_ctas_per_sm(suite, case), case.name
        assert case.params["rows"] % grid == 0, case.name
    assert spills(suite) == {}


def test_persistent_rows_alternate_the_reduction_words(tmp_path):
    """Persistent CTAs reduce row after row with one barrier each: a fast warp's next row must
    not overwrite a word another warp has yet to read, hence two halves alternating per row.
    racecheck is clean with them and finds the race without them."""
    case = next(c for c in norms.RMSNORM.cases if c.name == "r5_c4096_p2")
    sync, race = sync_race(norms.RMSNORM, case)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings
    mut = load_mutant("norms", "body(r, r * cols, cur, it & 1)", "body(r, r * cols, cur, 0)",
                      tmp_path)
    _, race = sync_race(mut.RMSNORM, case)
    assert race.verdict == "error" and any("red" in f.message for f in race.findings), \
        race.summary


def test_layernorm_reduces_sum_and_m2_behind_one_barrier():
    """The (sum, M2) pairs of every warp cross one ``bar.sync`` (was two: mean, then variance)."""
    suite = norms.LAYERNORM
    case = next(c for c in suite.cases if c.name == "r3_c4096")
    ptx = suite.kernel.compile("sm_90a", **suite.consts(case)).ptx
    assert ptx.count("bar.sync") == 1
    assert ptx.count("shfl.sync.bfly.b32") == 10  # sum and M2, five offsets each


@pytest.mark.parametrize("name", ["r3_c4096", "r5_c1000_b64", "r1_c520"])
def test_layernorm_is_exact_to_tolerance_on_rows_far_from_zero(name):
    """Rows of mean 100 and standard deviation 3 (the variance 1e3 times below E[x^2]): the
    per-thread M2 around the thread's own mean and the Chan combine keep it within the
    tolerance rule, with the tails (threads with fewer vectors, threads with none: the
    register-count path of `chan`). At mean 1000 the f32 mean itself is off by ~5e-5, which
    the bias's cancellation turns into an absolute error above atol=1e-5 (as in any f32
    LayerNorm): the rule, not the variance, is the limit there."""
    numsim = pytest.importorskip("tirxh_numsim")
    suite = norms.LAYERNORM
    case = next(c for c in suite.cases if c.name == name)
    inputs = suite.make_inputs(case, 0)
    inputs["x"] = (inputs["x"].astype(np.float32) * 3 + 100).astype(norms.BF16)
    res = numsim.run(suite.kernel, inputs, consts=suite.consts(case), grid=suite.grid(case),
                     outputs=["out"])
    assert res.verdict == "clean", res.summary()
    exp = suite.expected(case, inputs)["out"]
    r = suite.tolerance_for("out").compare(res.outputs["out"], exp)
    assert r["ok"], r["first"]


def test_chan_combine_of_trace_time_counts_matches_numpy():
    """`chan` on equal and unequal trace-time counts: the combined M2 equals the M2 of the
    concatenation (float64 reference), through numsim on a one-thread kernel."""
    numsim = pytest.importorskip("tirxh_numsim")
    a = np.array([1.0, 2.0, 4.0], np.float32)
    b = np.array([10.0, 11.0, 11.0, 13.0, 20.0], np.float32)

    def part(v):
        return float(v.sum()), float(((v - v.mean()) ** 2).sum()), len(v)

    @T.kernel(grid=1, block=1)
    def k(out: T.gptr[T.f32]):
        pa, pb, pc = [(T.ptx.mov.f32(s), T.ptx.mov.f32(m), n) for s, m, n in
                      (part(a), part(b), part(a))]
        for i, (p, q) in enumerate(((pa, pb), (pb, pa), (pa, pc))):
            s, m2, _ = norms.chan(p, q)
            T.ptx.st.global_.f32(out.at(2 * i), s)
            T.ptx.st.global_.f32(out.at(2 * i + 1), m2)

    res = numsim.run(k, {"out": np.zeros(6, np.float32)}, outputs=["out"])
    got = res.outputs["out"]
    ab = np.concatenate([a, b]).astype(np.float64)
    aa = np.concatenate([a, a]).astype(np.float64)
    want = [ab.sum(), ((ab - ab.mean()) ** 2).sum()] * 2 + [aa.sum(), ((aa - aa.mean()) ** 2).sum()]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got[1] == got[3]  # symmetric to the bit


def test_layernorm_holds_as_many_rows_per_sm_as_rmsnorm_without_spilling():
    """LayerNorm moves the same bytes as RMSNorm: its plain case must keep at least as many
    rows in flight per SM (it held 2 CTAs at 103 registers against RMSNorm's 3, 15% slower)."""
    ln = next(c for c in norms.LAYERNORM.cases if c.name == "r16384_c8192")
    rms = next(c for c in norms.RMSNORM.cases if c.name == "r16384_c8192")
    assert resident_ctas_per_sm(norms.LAYERNORM, ln) >= resident_ctas_per_sm(norms.RMSNORM, rms)
    ck = norms.LAYERNORM.kernel.compile("sm_90a", **norms.LAYERNORM.consts(ln))
    assert ck.resources.spill_stores == 0 and ck.resources.stack_frame == 0


def test_the_l2_prefetch_hint_reaches_the_row_loads_only():
    """L2=256 puts ``.L2::256B`` on the row's loads (ptxas: LDG.E.LTC256B.128) and not on w's
    (read once per CTA, from L2)."""
    suite = norms.RMSNORM
    case = next(c for c in suite.cases if c.name == "r5_c1000_b64_l2p256")
    ptx = suite.kernel.compile("sm_90a", **suite.consts(case)).ptx
    loads = re.findall(r"ld\.global\S*", ptx)
    assert loads.count("ld.global.L2::256B.v4.b32") == 2  # the row's two vectors
    assert loads.count("ld.global.v4.b32") == 2  # w's


@pytest.mark.parametrize("suite", [norms.RMSNORM, norms.LAYERNORM], ids=lambda s: s.name)
def test_l1_policy_keeps_the_parameters_and_streams_the_row(suite):
    """L1=1: the persistent row loads (this row's and the next one's) ``.L1::no_allocate``,
    w (and b) ``.L1::evict_last``; ptxas's SASS says LDG.E.NA.128 / LDG.E.EL.128."""
    case = next(c for c in suite.cases if c.name == "r5_c4096_p2_l1na")
    ck = suite.kernel.compile("sm_90a", **suite.consts(case))
    loads = re.findall(r"ld\.global\S*", ck.ptx)
    params = 2 if suite is norms.LAYERNORM else 1
    assert loads.count("ld.global.L1::evict_last.v4.b32") == 2 * params  # V = 2 vectors
    assert loads.count("ld.global.L1::no_allocate.v4.b32") == 2 * 2  # first row, next row
    assert len(loads) == 2 * params + 4
    assert {"LDG.E.NA.128", "LDG.E.EL.128"} <= set(re.findall(r"LDG\S*", ck.sass))


def test_session6_knobs_are_checked_when_declared():
    with pytest.raises(ValueError, match=r"case 'pol': POL=1 must be 0, 1 or 2, ST=0 and WLATE=0 "
                                         r"0 or 1, and POL > 0 needs EF=0, L1=0 and L2=0"):
        T.suite(norms.rmsnorm, inputs=norms.RMSNORM.inputs, constraints=norms.constraints,
                cases=[T.case("pol", rows=4, cols=4096, POL=1, EF=1)])
    with pytest.raises(ValueError, match=r"case 'st': POL=0 must be 0, 1 or 2, ST=2 and "
                                         r"WLATE=0 0 or 1"):
        T.suite(norms.rmsnorm, inputs=norms.RMSNORM.inputs, constraints=norms.constraints,
                cases=[T.case("st", rows=4, cols=4096, ST=2)])


def _ptx(suite, name):
    case = next(c for c in suite.cases if c.name == name)
    return suite.kernel.compile("sm_90a", **suite.consts(case)).ptx


def test_the_inductor_geometry_is_four_ctas_of_512_per_sm_with_triton_policies():
    """`_tri_pol` mirrors torch.compile's kernel at 16384 x 8192 (docs/TUNING.md, session 6):
    16 warps per row at 32 registers (w read after the barrier) is 4 CTAs per SM, 2048 threads,
    without spills; the row's loads are evict-first with an L2 policy, w's evict-last; ST=1
    stores with st.global.cs."""
    suite = norms.RMSNORM
    case = next(c for c in suite.cases if c.name == "r16384_c8192_tri_pol")
    assert resident_ctas_per_sm(suite, case) == 4 and suite.kernel.specialize(
        **suite.consts(case)).block == (512, 1, 1)
    ptx = _ptx(suite, "r16384_c8192_tri_pol_stcs")
    body = ptx.split("bar.sync", 1)
    first = re.search(r"createpolicy\.fractional\.L2::evict_first\.b64 \t(%rd\d+);", ptx)[1]
    last = re.search(r"createpolicy\.fractional\.L2::evict_last\.b64 \t(%rd\d+);", ptx)[1]
    assert len(re.findall(r"ld\.global\.L1::evict_first\.L2::cache_hint\.v4\.b32 .*"
                          + first + ";", body[0])) == 2
    assert len(re.findall(r"ld\.global\.L1::evict_last\.L2::cache_hint\.v4\.b32 .*"
                          + last + ";", body[1])) == 2  # w after the reduction
    assert "createpolicy.fractional.L2::evict_first.b64" in body[0]
    assert len(re.findall(r"st\.global\.cs\.v4\.b32", ptx)) == 2
    assert "cache_hint" not in _ptx(suite, "r16384_c8192_stcs")
    pol2 = _ptx(suite, "r16384_c8192_tri_pol2")  # one evict-last policy for the row and w
    assert pol2.count("createpolicy") == 1 and "evict_first" not in pol2
    assert len(re.findall(r"ld\.global\.L1::evict_last\.L2::cache_hint\.v4\.b32", pol2)) == 4


def _stream_ops(ptx):
    """The spellings of a kernel's global loads and stores (predicated or not), each with
    whether it takes a createpolicy register (so two kernels' spellings compare), and its
    createpolicy instructions."""
    policies = re.findall(r"createpolicy\.\S+ \t(%rd\d+);", ptx)
    ops = set()
    for op, operands in re.findall(r"\t(?:@!?%p\d+ )?((?:ld|st)\.global\S*) \t([^;]*);", ptx):
        ops.add((op, any(p in operands.split(", ") for p in policies)))
    return ops, sorted(re.findall(r"createpolicy\.\S+", ptx))


def test_the_copy_geometry_variants_read_and_write_as_the_evict_last_copy():
    """Session 13 (`_tri1k_pol2`, `_b1024_r32_pol2`, `_tri1k`): one 16-byte vector per thread,
    2 CTAs of 1024 threads per SM (2048 threads, 32 KB of row loads: reg_copy's per-SM shape)
    without spills; with POL=2 the row's loads and the output's stores are spelled exactly as
    reg_copy `_pol`'s (evict-last loads with one ``L2::evict_last`` policy register, plain
    stores), which is also `_tri_pol2`'s spelling: only the geometry differs from it."""
    suite = norms.RMSNORM
    copy = load("tma_copy").REG_COPY
    want = _stream_ops(_ptx(copy, "r16384_c8192_pol"))
    assert want == ({("ld.global.L1::evict_last.L2::cache_hint.v4.b32", True),
                     ("st.global.v4.b32", False)},
                    ["createpolicy.fractional.L2::evict_last.b64"])
    for name in ("r16384_c8192_tri1k_pol2", "r16384_c8192_b1024_r32_pol2", "r16384_c8192_tri1k"):
        case = next(c for c in suite.cases if c.name == name)
        assert resident_ctas_per_sm(suite, case) == 2, name
        assert suite.kernel.specialize(**suite.consts(case)).block == (1024, 1, 1)
        ptx = _ptx(suite, name)
        assert len(re.findall(r"\tld\.global", ptx)) == 2, name  # the row's and w's vector
        if name.endswith("pol2"):
            assert _stream_ops(ptx) == want == _stream_ops(_ptx(suite, "r16384_c8192_tri_pol2"))
        else:
            assert "cache_hint" not in ptx and "createpolicy" not in ptx
    late = _ptx(suite, "r16384_c8192_tri1k_pol2").split("bar.sync", 1)  # w after the barrier
    assert late[0].count("ld.global") == 1 and late[1].count("ld.global") == 1
    early = _ptx(suite, "r16384_c8192_b1024_r32_pol2").split("bar.sync", 1)
    assert early[0].count("ld.global") == 2 and "ld.global" not in early[1]
    assert spills(suite) == {}


def test_the_copy_geometry_small_case_is_race_free():
    """32 warps, one vector each, the last thread's predicated off: one barrier, race-free."""
    case = next(c for c in norms.RMSNORM.cases if c.name == "r3_c8184_b1024_pol2_late")
    sync, race = sync_race(norms.RMSNORM, case)
    assert (sync.verdict, race.verdict) == ("clean", "clean"), sync.findings + race.findings
