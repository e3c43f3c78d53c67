"""zoo/kernels/kda_fwd.py: the chunked KDA forward in numsim against the float64 reference under
the public rule (small cases of both suites, one per compiled variant: three chunks through the
two-stage ring with saturated gates, helper warps; the scaled-down public varlen pack), clean
under sync_check, every benchmarked variant compiled without spills within its shared-memory
budget, refused shapes, and inputs shared by a shape's variants."""

import importlib.util

import numpy as np
import pytest

import tirxh.lang as T
from tests.zoo._zoo import sync_race
from tests.zoo.zoo_modules import ZOO, assert_matches, load, mismatches, simulate

MOD = load("kda_fwd")
SUITES = (MOD.SUITE, MOD.SUITE_VARLEN)


def _cases(suite):
    return [pytest.param(c, id=c.name) for c in suite.cases if c.small]


def _assert_close(suite, case):
    res, inputs = simulate(suite, case)
    assert_matches(suite, case, res, inputs)
    rep = suite.tolerance_for("o").compare(res.outputs["o"], suite.expected(case, inputs)["o"])
    assert rep["rms_ratio"] < 0.01          # the model's ~0.004, with room; the rule is 0.03


# every compiled variant has a small case (the device smoke pass runs them all before timing):
# one chunk with saturated gates (v128s2), two rows of a chunk and a 1-token tail (v64s1), three
# chunks through the two-stage ring (v64s2), helper warps (v64s2w8), a varlen pack of 3
@pytest.mark.parametrize("case", _cases(MOD.SUITE) + _cases(MOD.SUITE_VARLEN))
def test_small_case_matches_reference(case):
    _assert_close(MOD.SUITE_VARLEN if case.params.get("lens") else MOD.SUITE, case)


def _variant(p):
    return (p.get("BV", 64), p.get("STAGES", 2), p.get("WARPS", 0), p.get("PREP", 0),
            p.get("BATCH", 0))


def test_small_cases_cover_every_variant():
    small = {_variant(c.params) for s in SUITES for c in s.cases if c.small}
    variants = {_variant(v) for v in MOD.VARIANTS.values()}
    assert variants <= small, variants - small


def test_scaled_down_public_pack_matches_reference():
    """The public pack [1300, 547, 2048, 963, 271, 3063] / 32: a sequence of exactly one chunk,
    one of 1.5 chunks, short ones; their rows interleave in the tiles and must not leak."""
    _assert_close(MOD.SUITE_VARLEN, T.case("extra", B=1, T_=256, H=1,
                                           lens=(41, 17, 64, 30, 8, 96), BV=128, gate="deep"))


def test_final_state_is_checked_against_its_own_rms():
    """The H200 run of 2026-12-01 failed kda_fwd[t8192_h64_v64s2] on 64 of 1M ht elements (max
    error 1.69): bf16 rounding (numsim gives the GPU's values) judged by one absolute atol of 0.5
    fitted to o, while RMS(ht) was 11x RMS(o). Here 4 full chunks x 4 heads, seed 3, reproduce
    it: ht passes the public rule (atol 0.5 x its own RMS), the o-fitted atol would fail it."""
    case = next(c for c in MOD.SUITE.cases if c.name == "t256_h4_v64s2")
    res, inputs = simulate(MOD.SUITE, case, seed=3)
    assert_matches(MOD.SUITE, case, res, inputs)
    exp = MOD.SUITE.expected(case, inputs)
    rms = {n: float(np.sqrt(np.mean(np.square(exp[n], dtype=np.float64)))) for n in exp}
    assert rms["ht"] > 8 * rms["o"] and 1 <= rms["o"] < 2     # inputs scaled by o's RMS
    assert MOD.SUITE.tolerance_for("ht").absolute(exp["ht"]) == pytest.approx(0.5 * rms["ht"])
    o_fitted = T.tolerance(rtol=0.05, atol=0.5, rms=0.03).compare(res.outputs["ht"], exp["ht"])
    assert not o_fitted["ok"] and o_fitted["rms_ratio"] < 0.01, o_fitted


@pytest.mark.parametrize("params", [
    dict(B=1, T_=40, H=1, BV=128, gate="deep"),
    dict(B=1, T_=40, H=1, BV=64, WARPS=8),
    # the handover: 3 chunks, so chunk 2's TMA waits for the state warps to release stage 0
    dict(B=1, T_=150, H=1, BV=128, PREP=4, gate="deep"),
    dict(B=1, T_=40, H=1, BV=64, PREP=4),
    dict(B=1, T_=100, H=1, BV=64, PREP=8),
    # the batched prep: the in-place phases' loads ahead of their stores, within one thread
    dict(B=1, T_=100, H=1, BV=64, PREP=8, BATCH=8)],
    ids=["v128", "v64_helpers", "v128ws_3chunks", "v64ws", "v64ws8_2chunks", "v64ws8b_2chunks"])
def test_sync_check_is_clean(params):
    case = T.case("sync", **params)
    for result in sync_race(MOD.SUITE, case):
        assert result.verdict == "clean", [f.message for f in result.findings]


@pytest.mark.parametrize("variant", sorted(MOD.VARIANTS))
def test_benchmarked_variants_have_no_spills_and_fit(variant):
    """ptxas on this machine: no local memory; shared memory within the H200's 227 KB, and
    BV = 64 with one stage small enough for two CTAs per SM (2 x (113 KB + 1 KB reserved))."""
    consts = MOD.VARIANTS[variant]
    ck = MOD.kda_fwd.compile("sm_90a", **consts)
    r = ck.resources
    assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_frame == 0, r
    # ptxas's report leaves out what it spills around setmaxnreg (the warp-specialized
    # variants): no local memory instruction in the SASS either
    sass = ck.sass() if callable(ck.sass) else ck.sass
    assert " STL" not in sass and " LDL" not in sass
    smem = ck.launch_metadata()["dynamic_smem"]
    assert smem <= 227 * 1024
    if variant == "v64s1":
        assert smem <= 113 * 1024 and 2 * 128 * r.registers <= 65536


@pytest.mark.parametrize("params,match", [
    (dict(B=1, T_=10, H=1, BV=32), r"BV=32 must be 64 or 128"),
    (dict(B=1, T_=10, H=1, STAGES=3), r"STAGES=3 must be 1 or 2"),
    (dict(B=1, T_=10, H=1, BV=128, WARPS=4), r"WARPS=4 must be 0 \(BV / 16\), or 8 with BV = 64"),
    (dict(B=1, T_=10, H=1, PREP=6), r"PREP=6 with BV=64: prep warps must be 0, 4 or 8"),
    (dict(B=1, T_=10, H=1, BV=128, PREP=8), r"PREP=8 with BV=128: .* 8 only with BV = 64 \(8 "
                                            r"prep \+ 8 state warps do not fit"),
    (dict(B=1, T_=10, H=1, PREP=4, STAGES=1), r"PREP=4 \(warp-specialized\) takes STAGES=2 and "
                                              r"WARPS=0, not STAGES=1, WARPS=0"),
    (dict(B=1, T_=10, H=1, BATCH=3), r"BATCH=3 must be 0 \(the prep's in-place phases row by row\) or 8"),
    (dict(B=2, T_=10, H=1, lens=(4, 6)), r"lens=\(4, 6\): a varlen pack is one row \(B=1\)"),
    (dict(B=1, T_=10, H=1, lens=(4, 5)), r"lens=\(4, 5\): a varlen pack is one row \(B=1\) of "
                                          r"T_=10 tokens"),
    (dict(B=1, T_=0, H=1), r"B=1, T_=0, H=1 must be positive"),
    (dict(B=1, T_=70000, H=1, lens=(1,) * 70000), r"70000 sequences: at most 65535 \(grid z\)"),
    (dict(B=1, T_=1 << 20, H=64), r"B=1, T_=1048576, H=64, 1 sequences: o and h0 must each "
                                  r"hold fewer than 2\^32 elements"),
])
def test_refused_shapes_name_the_case_and_the_rule(params, match):
    with pytest.raises(ValueError, match=r"case 'bad': " + match):
        T.suite(MOD.kda_fwd, inputs=MOD.inputs, reference=MOD.reference, outputs=["o"],
                constraints=MOD.constraints, cases=[T.case("bad", **params)])


def test_variants_of_a_large_shape_share_inputs(monkeypatch):
    """A benchmark shape's variants reuse one seed's inputs (their float64 reference takes
    seconds); small shapes are regenerated, identically."""
    monkeypatch.setattr(MOD, "_INPUTS", [])
    params = dict(B=1, T_=20, H=1)
    a = MOD.inputs(np.random.default_rng(5), **params)
    b = MOD.inputs(np.random.default_rng(5), **params)
    assert b["q"] is not a["q"] and np.array_equal(b["q"], a["q"]) and MOD._INPUTS == []
    monkeypatch.setattr(MOD, "LARGE", 1)
    c = MOD.inputs(np.random.default_rng(5), **params)
    d = MOD.inputs(np.random.default_rng(5), **params)
    e = MOD.inputs(np.random.default_rng(6), **params)
    assert d["q"] is c["q"] and d["o"] is not c["o"] and e["q"] is not c["q"]
    assert np.array_equal(c["q"], a["q"]) and np.array_equal(c["order"], [0])


def _mutant(tmp_path, name, src):
    """kda_fwd.py's source `src` (a mutated copy) loaded as module `name`."""
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mut = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mut)
    return mut


@pytest.mark.parametrize("line", [
    "                    sm.empty[ring.stage].wait(ring.phase)\n",
    "            sm.ready[ring.stage].wait(ring.phase)\n"], ids=["no_empty_wait", "no_ready_wait"])
def test_sync_check_catches_a_broken_handover(tmp_path, line):
    """Without the TMA issuer's wait for the state warps' release of a stage (chunk 2's loads
    over chunk 0's tiles while they are read) or the state warps' wait for the prep warps (chunk
    c's operands read while written), sync_check reports races or an overrun phase: the clean
    verdict above is not vacuous. (The prep warps' own wait for the release is redundant to the
    checker: their writes follow the issuer's wait through the TMA's completion; kept, costing
    one satisfied try_wait per chunk.)"""
    src = (ZOO / "kda_fwd.py").read_text()
    assert src.count(line) == 1
    mut = _mutant(tmp_path, "kda_fwd_nowait", src.replace(line, ""))
    case = T.case("sync", B=1, T_=150, H=1, BV=128, PREP=4, gate="deep")
    kinds = {f.kind for r in sync_race(mut.SUITE, case) for f in r.findings
             if f.severity == "error"}
    assert kinds & {"race.read-write", "race.write-write", "race.stage-reuse",
                    "mbarrier.phase-overrun"}, kinds


# --- kda_fwd_s0: the forward that saves every chunk's start state (chunked backward, piece 1) ---

@pytest.mark.parametrize("case", _cases(MOD.SUITE_S0))
def test_saved_chunk_states_match_the_split_backwards_piece_1(case):
    """o, ht and S0 of every chunk within the public rule of float64 (S0 against
    kda_bwd_split.chunk_states), and the first chunk's S0 of each sequence is its h0 exactly
    (a state stored before any chunk changed it: f32 in, f32 out)."""
    s = MOD.SUITE_S0
    res, inputs = simulate(s, case)
    assert_matches(s, case, res, inputs)
    rep = s.tolerance_for("s0").compare(res.outputs["s0"], s.expected(case, inputs)["s0"])
    assert rep["rms_ratio"] < 0.01, rep
    firsts = inputs["chunk_off"][:-1]
    np.testing.assert_array_equal(res.outputs["s0"][firsts], inputs["h0"])


def test_states_saved_after_the_chunks_update_are_caught(tmp_path):
    """The stores moved after the chunk's state update: slot c holds S0 of chunk c + 1 and the
    check fails, so the test above is not vacuous."""
    src = (ZOO / "kda_fwd.py").read_text()
    store = src[src.index("        if s0 is not None:      # S0 of chunk c"):
                src.index("        sm.full[ring.stage].wait(ring.phase)\n        nv =")]
    step = "            _state_step(sm, ck, ln, st, o, tok0, H, h, vcol0)\n"
    assert src.count(store) == 1 and src.count(step) == 1
    late = store.replace("        if s0 is not None:", "            if s0 is not None:") \
        .replace("\n            ", "\n                ").replace("with state_warps():", "if True:")
    mut = _mutant(tmp_path, "kda_fwd_late", src.replace(store, "").replace(step, step + late))
    case = next(c for c in mut.SUITE_S0.cases if c.name == "t150_h1_v64s2_deep")
    res, inputs = simulate(mut.SUITE_S0, case)
    assert res.verdict == "clean" and mismatches(mut.SUITE_S0, case, res, inputs)
