"""zoo/kernels/gemm_sm90.py (issue 15), on the CPU: every small case through numsim, compared
bit by bit with numpy; the split-K / stream-K workspace left zero; sync_check clean on the
persistent, cluster, split-K and stream-K kernels and planted synchronization bugs caught; SASS
with HGMMA/QGMMA, stmatrix, TMA stores and red, both setmaxnreg honoured, no spills. The host
side (inputs, shape rules, references, tolerances): test_gemm_host.py."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

import tirxh.lang as T
from tirxh.api import TraceError

ZOO = Path(__file__).resolve().parents[2] / "zoo" / "kernels"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


G = _load(ZOO / "gemm_sm90.py", "zoo_gemm_sm90_test")
SUITES = {name: s for name, s in vars(G).items() if isinstance(s, T.Suite)}
SMALL = [(name, c.name) for name, s in SUITES.items() for c in s.cases if c.small]


def _case(suite, name):
    return next(c for c in suite.cases if c.name == name)


def _ordered(x: np.ndarray) -> np.ndarray:
    """bf16 bit patterns as integers ordered like the values (adjacent values differ by 1)."""
    b = x.view(np.uint16).astype(np.int32)
    return np.where(b & 0x8000, -(b & 0x7FFF), b)


@pytest.mark.slow
@pytest.mark.parametrize("suite,case", SMALL, ids=[f"{s}:{c}" for s, c in SMALL])
def test_small_case_in_numsim_matches_numpy(suite, case):
    ns = pytest.importorskip("tirxh_numsim")
    s = SUITES[suite]
    c = _case(s, case)
    inputs = s.make_inputs(c, 0)
    res = ns.run(s.kernel, inputs, consts=s.consts(c), grid=s.grid(c), outputs=["c"])
    assert res.verdict == "clean", res.summary
    out, ref = res.outputs["c"], s.expected(c, inputs)["c"]
    cmp = s.tolerance.compare(out, ref)
    assert cmp["ok"], cmp
    ulps = np.abs(_ordered(out) - _ordered(ref))
    if "fp8" in s.kernel.name:
        # 13-bit tensor-core accumulation (numsim's H200 model) against exact f32 sums
        assert cmp["rms_ratio"] < 3e-3
        return
    # bf16: the same value but where the two f32 sums round to neighbouring bf16 values, or
    # where cancellation leaves a result smaller than the f32 sums' own rounding
    diff = np.abs(out.astype(np.float64) - ref.astype(np.float64))
    assert (ulps > 0).mean() < 1e-3, int((ulps > 0).sum())
    assert np.all((ulps <= 1) | (diff < 1e-3)), diff[ulps > 1]


def test_an_unknown_split_k_reduction_is_refused():
    with pytest.raises(T.TraceError, match=r"REDUCE = 'atomic': expected 'slots', 'peers' or 'red'"):
        G.gemm_bf16.compile("sm_90a", BN=128, STAGES=2, SPLITK=2, REDUCE="atomic")


def test_the_lockstep_tail_takes_the_red_sum_and_no_split_k():
    with pytest.raises(T.TraceError, match=r"STREAMK takes SPLITK = 1 \(got SPLITK = 2\)"):
        G.gemm_bf16.compile("sm_90a", BN=128, STAGES=2, STREAMK="lock", REDUCE="red",
                            SPLITK=2)
    with pytest.raises(T.TraceError, match=r"STREAMK sums through REDUCE = 'red'"):
        G.gemm_bf16.compile("sm_90a", BN=128, STAGES=2, STREAMK="lock")


def test_stream_k_needs_the_red_sum_and_no_split_k():
    with pytest.raises(T.TraceError, match=r"STREAMK takes SPLITK = 1 \(got SPLITK = 2\)"):
        G.gemm_bf16_c2.compile("sm_90a", BN=128, STAGES=2, STREAMK="tail", REDUCE="red",
                               SPLITK=2)
    with pytest.raises(T.TraceError, match=r"STREAMK sums through REDUCE = 'red'"):
        G.gemm_bf16.compile("sm_90a", BN=128, STAGES=2, STREAMK=True)
    with pytest.raises(T.TraceError, match=r"STREAMK = 'last': expected False, True .* 'tail'"):
        G.gemm_bf16.compile("sm_90a", BN=128, STAGES=2, STREAMK="last", REDUCE="red")


def test_wave_cases_at_every_large_shape_run_on_every_sm():
    """The stream-K tail and spread-epilogue variants run on every SM (66 clusters) at every
    M >= 2048 shape, are bf16's only, and WAVE_SHAPES lists each such shape once."""
    large = sorted(s for s in G.SHAPES if s[0] >= 2048 and s[1] % 8 == 0)
    assert sorted(G.WAVE_SHAPES) == large
    names = {c.name for c in G.SUITE_C2_PEERS.cases if "wave" in c.tags}
    for M, N, K in G.WAVE_SHAPES:
        for v in G.WAVE[M, N, K]:
            c = _case(G.SUITE_C2_PEERS, f"m{M}n{N}k{K}_{v}")
            assert G.SUITE_C2_PEERS.grid(c) == (132, 1, 1)
            assert c.params.get("STREAMK") == ("tail" if "skt" in v else None)
            assert c.params.get("EPI_DEFER") == ("spread" if "ds" in v else None)
            names.discard(c.name)
    assert not names
    assert not [c for c in G.SUITE_FP8_C2.cases if "wave" in c.tags]


def test_the_stream_k_tail_is_main_only_where_the_last_wave_is_small():
    """Session 15's rule (s15/d7: the tail won at 8192^3, 8192 x 14336 x 4096, 6144^3, whose
    last waves are 0.52, 0.15, 0.73 full, and lost at 0.76-0.94): bf16's main there is c2
    t256sktds4 with t256 as alt; fp8 keeps t256 (no stream-K tail cases)."""
    skt = {s for s in G.SHAPES if G.skt_main(*s)}
    assert skt == {(8192, 8192, 8192), (8192, 14336, 4096), (6144, 6144, 6144)}
    assert round(G.tail_fraction(8192, 8192, 8192), 3) == 0.515        # 1024 pairs mod 66 = 34
    assert round(G.tail_fraction(2048, 4096, 4096), 3) == 0.939        # 128 mod 66 = 62
    for M, N, K in skt:
        mains = {c.name for c in G.SUITE_C2_PEERS.cases if "main" in c.tags
                 and c.name.startswith(f"m{M}n{N}k{K}_")}
        assert mains == {f"m{M}n{N}k{K}_t256sktds4"}
        assert "alt" in _case(G.SUITE_C2_PEERS, f"m{M}n{N}k{K}_t256").tags
        fp8 = {c.name for c in G.SUITE_FP8_C2.cases if "main" in c.tags
               and c.name.startswith(f"m{M}n{N}k{K}_")}
        assert fp8 == {f"m{M}n{N}k{K}_t256"}
    kept = _case(G.SUITE_C2_PEERS, "m8192n4096k4096_t256")             # 0.758: no tail
    assert "main" not in kept.tags and "alt" in kept.tags              # t256ds4 is (below)


def _mains(suite, M, N, K) -> set:
    return {c.name for c in suite.cases if "main" in c.tags and c.name.startswith(f"m{M}n{N}k{K}_")}


def test_session_17_mains_follow_the_measurements():
    """s17/d2 and d7: one CTA a 128 x 128 tile beat the 2-CTA pair at 512 x 4096 x K and 2048 x
    1024 x 7168 in bf16 and fp8, so the single-CTA t128 is main there and the pair its alt;
    s17/d3 and d9: bf16's c2 t256ds4 at or above t256 in both regimes at DS4_MAIN, main there
    with t256 as alt; fp8 keeps t256 at M >= 2048 (no deferred-epilogue fp8 case was timed)."""
    for M, N, K in [(512, 4096, 4096), (512, 4096, 14336), (2048, 1024, 7168)]:
        name = f"m{M}n{N}k{K}_t128"
        pdl = (M, N, K) == (2048, 1024, 7168)   # session 20: its PDL twin is bf16's main
        assert _mains(G.SUITE_PEERS, M, N, K) == {name + "pdl" if pdl else name}
        assert _mains(G.SUITE_FP8, M, N, K) == {name}
        assert not _mains(G.SUITE_C2_PEERS, M, N, K) and not _mains(G.SUITE_FP8_C2, M, N, K)
        assert "alt" in _case(G.SUITE_C2_PEERS, name).tags
        assert "alt" in _case(G.SUITE_FP8_C2, name).tags
    assert G.DS4_MAIN <= set(G.SHAPES)
    assert not {s for s in G.DS4_MAIN if G.skt_main(*s)}               # one main a shape
    for M, N, K in G.DS4_MAIN:   # session 21: three of them run their PDL twin (PDL_DS4_MAIN)
        pdl = "pdl" if (M, N, K) in G.PDL_DS4_MAIN else ""
        assert _mains(G.SUITE_C2_PEERS, M, N, K) == {f"m{M}n{N}k{K}_t256ds4{pdl}"}
        assert "alt" in _case(G.SUITE_C2_PEERS, f"m{M}n{N}k{K}_t256").tags
        assert _mains(G.SUITE_FP8_C2, M, N, K) == {f"m{M}n{N}k{K}_t256"}
    assert _mains(G.SUITE_C2_PEERS, 2048, 14336, 4096) == {"m2048n14336k4096_t256"}  # untimed
    assert "alt" in _case(G.SUITE_C2_PEERS, "m2048n14336k4096_t256ds4").tags    # timed next


def test_small_m_mains_are_the_measured_best():
    """The first small-M mains (t128k4, t256k2, t128k8) were never the fastest; SMALL_MAIN's
    variants are (sessions 10-13), so `tirxh bench -k main` times them, the old main as alt."""
    old = {(128, 4096, 4096): "t128k4", (128, 14336, 4096): "t256k2",
           (128, 4096, 14336): "t128k4", (128, 1024, 7168): "t128k8", (512, 1024, 7168): "t128k4"}
    assert set(G.SMALL_MAIN) == set(old)
    for (M, N, K), v in G.SMALL_MAIN.items():
        one_cta = G.SUITE_PEERS if M == 512 else G.SUITE     # M = 512 has pyptx beside it
        assert _mains(one_cta, M, N, K) == {f"m{M}n{N}k{K}_{v}"}
        assert not _mains(G.SUITE_C2_PEERS, M, N, K)
        assert "alt" in _case(one_cta, f"m{M}n{N}k{K}_{old[M, N, K]}").tags
        assert _mains(G.SUITE_FP8, M, N, K) == {f"m{M}n{N}k{K}_{old[M, N, K]}"}  # fp8 as was
    assert not [c for c in G.SUITE_C2_PEERS.cases if c.name.startswith("m4095n4097k4104_t256ds")]


def test_wave2_cases_are_bf16_clusters_on_every_sm():
    """Session 15's wave2 round: the deferred epilogue without stream-K (one, two or four
    rounds) at each short shape and the K-lockstep tail where it has few units per idle
    cluster, on 132 CTAs, and at 2048 x 1024 x 7168 c2 t256k2r on 128 (64 tile pairs x 2
    splits); none in fp8."""
    for M, N, K in G.WAVE2_SHAPES:
        for v in G.WAVE2[M, N, K]:
            c = _case(G.SUITE_C2_PEERS, f"m{M}n{N}k{K}_{v}")
            assert "wave2" in c.tags
            assert c.params.get("STREAMK") == ("lock" if "skl" in v else None)
            if v == "t256k2r":
                assert G.SUITE_C2_PEERS.grid(c) == (128, 1, 1)
                assert (c.params["SPLITK"], c.params["REDUCE"]) == (2, "red")
            else:
                assert G.SUITE_C2_PEERS.grid(c) == (132, 1, 1)
                assert c.params.get("EPI_DEFER") == ("spread" if "ds" in v else
                                                     None if v == "t256skl" else True)
                if "skl" in v:   # the lock tail where helpers have <= ~7 units each
                    T_ = round(G.tail_fraction(M, N, K) * G.CLUSTERS)
                    assert 0 < T_ and T_ / (G.CLUSTERS - T_) <= 7.25
        assert "main" in {t for c in G.SUITE_C2_PEERS.cases + G.SUITE_PEERS.cases   # its control
                          if c.name.startswith(f"m{M}n{N}k{K}_") for t in c.tags}
    assert not [c for c in G.SUITE_FP8_C2.cases if "wave2" in c.tags]


def test_stream_k_grid_is_every_sm_while_each_gets_a_slice():
    c = _case(G.SUITE, "m128n14336k4096_t256sk")
    assert G.SUITE.grid(c) == (132, 1, 1)          # 56 tiles x 64 slices on 132 SMs
    assert G.SUITE.grid(_case(G.SUITE, "m200n136k296_streamk")) == (4, 1, 1)
    small = T.case("x", M=64, N=64, K=128, BN=64, STREAMK=True, REDUCE="red")
    assert G.SUITE.grid(small) == (1, 1, 1)        # one tile of 2 slices: one CTA (>= 1 each)


@pytest.mark.slow
@pytest.mark.parametrize("suite,case", [("SUITE", "m128n128k256_splitk"),
                                        ("SUITE", "m200n136k296_bn64_red"),
                                        ("SUITE", "m200n136k296_streamk"),
                                        ("SUITE", "m200n136k296_streamk_tail"),
                                        ("SUITE_C2", "m200n136k296_streamk_tail_defer"),
                                        # 5 tiles of one slice on 4 CTAs: one whole tile
                                        # each, the last tile's one slice on CTA 3 alone,
                                        # CTAs 0-2 no tail unit at all
                                        pytest.param("SUITE", dict(
                                            M=128, N=320, K=64, BN=64, STAGES=2, EPI_BUFS=1,
                                            STREAMK="tail", REDUCE="red", SMS=4),
                                            id="m128n320k64_streamk_tail_p4"),
                                        ("SUITE_FP8", "m128n128k512_splitk_red"),
                                        # wave2's t256k2r in clusters, BN 256 (128 f32 a
                                        # thread summed), 4 units on 2 clusters
                                        ("SUITE_C2", "m200n512k200_bn256_splitk_red"),
                                        ("SUITE", "m256n128k384_peers3"),
                                        # REDUCE "pair" (no workspace at all): 6 tiles with
                                        # tails on 2 clusters, 3 units each (the receive
                                        # buffer reused); one cluster, 6 tiles of 10 slices
                                        # with A's own ring, staged C (sync_check stops at its
                                        # state bound on both: out of the suite)
                                        pytest.param("SUITE_K2", dict(
                                            M=200, N=136, K=296, BN=64, STAGES=3, EPI_BUFS=1,
                                            SPLITK=2, REDUCE="pair", SMS=4),
                                            id="m200n136k296_bn64_pair"),
                                        pytest.param("SUITE_K2", dict(
                                            M=200, N=136, K=600, BN=64, STAGES=5, ASTAGES=2,
                                            EPI_BUFS=1, SPLITK=2, REDUCE="pair", SMS=2),
                                            id="m200n136k600_bn64_pair_a2")])
def test_split_k_leaves_workspace_and_counters_zero(suite, case):
    """The next launch starts from zero sums and counts: KCoral and callers reuse the
    buffers, so a red sum not cleared by the split that read it would add into the next."""
    ns = pytest.importorskip("tirxh_numsim")
    s = SUITES[suite]
    c = _case(s, case) if isinstance(case, str) else T.case("tail", **case)
    inputs = s.make_inputs(c, 0)
    res = ns.run(s.kernel, inputs, consts=s.consts(c), grid=s.grid(c),
                 outputs=["c", "ws", "cnt"])
    # stream-K leaves the sums of whole tiles untouched (and on the tail only, the counters of
    # whole tiles: a slot per tile the tail may have), "pair" both (it sums in shared memory):
    # numsim says so, nothing else
    untouched = (("ws", "cnt") if c.params.get("STREAMK") == "tail"
                 or c.params.get("REDUCE") == "pair" else ("ws",))
    others = [d for d in res.diagnostics
              if not (d.kind == "numsim.unwritten-output" and d.data["output"] in untouched)]
    assert not others and not res.incomplete, res.summary
    assert not res.outputs["cnt"].any()
    if c.params.get("REDUCE") == "red":
        assert not res.outputs["ws"].any()
    assert s.tolerance.compare(res.outputs["c"], s.expected(c, inputs)["c"])["ok"]


@pytest.mark.slow
@pytest.mark.parametrize("case,cut_tiles", [("m200n136k296_streamk_lock", 2),
                                            ("m128n448k712_streamk_lock_t3", 3),
                                            ("m128n320k128_streamk_lock_1tail", 1),
                                            ("m128n448k128_streamk_lock_whole", 0)])
def test_the_lockstep_tail_cuts_exactly_the_tail_tiles(case, cut_tiles):
    """STREAMK "lock" touches the workspace and counters of the tail's tiles only, each of them
    (2, 3 and 1 tail tiles cut), and none where the cut is the whole K range (3 tail tiles of 2
    slices on 4 CTAs: P = 3, cut = min(ceil((6 + 2 * 3) / 4), 2) = 2); C is right and every
    sum and counter is left zero."""
    ns = pytest.importorskip("tirxh_numsim")
    s = G.SUITE
    c = _case(s, case)
    inputs = s.make_inputs(c, 0)
    res = ns.run(s.kernel, inputs, consts=s.consts(c), grid=s.grid(c),
                 outputs=["c", "ws", "cnt"])
    unwritten = {d.data["output"]: d.data["unwritten"] for d in res.diagnostics
                 if d.kind == "numsim.unwritten-output"}
    slot = 2 * (c.params["BN"] // 2) * 128             # a tile's f32 sum: 2 warpgroups
    assert unwritten.get("ws", 0) == res.outputs["ws"].size - cut_tiles * slot
    assert unwritten.get("cnt", 0) == res.outputs["cnt"].size - 2 * cut_tiles
    assert not res.outputs["ws"].any() and not res.outputs["cnt"].any()
    assert s.tolerance.compare(res.outputs["c"], s.expected(c, inputs)["c"])["ok"]


@pytest.mark.slow
def test_peers_at_two_splits_is_bitwise_the_slots_sum():
    """REDUCE "peers" at S = 2 adds the peer's slot to the last split's own partial, "slots"
    adds slot 1 to slot 0: the same two f32 values, and IEEE addition commutes, so C is
    bitwise the same (docs/TUNING.md "Small M, round 2": why "peers" stays deterministic at 2
    splits). 12 units with tails on 4 CTAs, so both splits arrive last somewhere. REDUCE
    "pair" (gemm_bf16_k2) adds split 1's partial to split 0's: the same bits again."""
    ns = pytest.importorskip("tirxh_numsim")
    out = {}
    for reduce in ("slots", "peers", "pair"):   # "pair": split 0 adds split 1's, as "peers"
        s = G.SUITE_K2 if reduce == "pair" else G.SUITE
        c = T.case(reduce, M=200, N=136, K=296, BN=64, STAGES=3, EPI_BUFS=1, SPLITK=2,
                   REDUCE=reduce, SMS=4)
        inputs = s.make_inputs(c, 0)
        res = ns.run(s.kernel, inputs, consts=s.consts(c), grid=s.grid(c),
                     outputs=["c", "cnt"])
        assert not res.outputs["cnt"].any()
        out[reduce] = res.outputs["c"]
    assert np.array_equal(out["slots"].view(np.uint16), out["peers"].view(np.uint16))
    assert np.array_equal(out["slots"].view(np.uint16), out["pair"].view(np.uint16))


@pytest.mark.slow
def test_peers_with_more_units_than_ctas_launched_twice_on_one_workspace():
    """t64k2p's constants with 4 units per CTA (12 units on 3 CTAs, the ring wrapping under
    the reduction and the epilogue), launched twice on the same workspace and counters as
    KCoral's warm-up does: both launches match numpy and leave every counter zero, so no
    state carries from one launch into the next. What session 13 took for a hang of
    512 x 4096 x 4096 t64k2p on its second launch was the pyptx baseline's first call
    (docs/TUNING.md "A timeout in the warm-up")."""
    ns = pytest.importorskip("tirxh_numsim")
    s = G.SUITE
    c = _case(s, "m256n136k520_bn64_peers_s8")
    assert {k: c.params[k] for k in G.VARIANTS["t64k2p"]} == G.VARIANTS["t64k2p"]
    assert s.grid(c) == (3, 1, 1)            # 2 x 3 tiles x 2 splits: 4 units per CTA
    big = _case(G.SUITE_PEERS, "m512n4096k4096_t64k2p")   # 4 x 64 tiles x 2 on 132 CTAs
    assert G.SUITE_PEERS.grid(big) == (132, 1, 1)
    inputs = s.make_inputs(c, 0)
    ref = s.expected(c, inputs)["c"]
    for launch in range(2):
        res = ns.run(s.kernel, inputs, consts=s.consts(c), grid=s.grid(c),
                     outputs=["c", "ws", "cnt"])
        assert res.verdict == "clean" and not res.incomplete, (launch, res.summary)
        assert not res.outputs["cnt"].any(), launch
        assert s.tolerance.compare(res.outputs["c"], ref)["ok"], launch
        assert res.outputs["ws"].any()       # the slots were written: the path ran
        inputs = dict(inputs, ws=res.outputs["ws"], cnt=res.outputs["cnt"])


def test_lowm_cases_are_the_two_shapes_candidates_on_128_ctas():
    """Role "lowm" (benchmarks/gemm_bench.sh small2): exactly LOWM's (kernel, variant) pairs at
    its two shapes, once each, bf16 only, every one on 128 CTAs (64 tiles x 2 splits, or 32
    tile pairs x 2 in clusters); the control t64k2r keeps its "small" role too."""
    suites = {"c1": (G.SUITE, G.SUITE_PEERS), "c2": (G.SUITE_C2, G.SUITE_C2_PEERS)}
    want = {(kern, f"m{M}n{N}k{K}_{v}") for (M, N, K), vs in G.LOWM.items() for kern, v in vs}
    got = [(kern, c.name) for kern, ss in suites.items() for s in ss for c in s.cases
           if "lowm" in c.tags]
    assert sorted(got) == sorted(want)
    for kern, ss in suites.items():
        for s in ss:
            for c in s.cases:
                if "lowm" in c.tags:
                    assert s.grid(c) == (128, 1, 1), c.name
                    assert c.params["SPLITK"] == 2 and c.params["BN"] == 64
    assert _case(G.SUITE, "m128n4096k4096_t64k2r").tags == ("small", "lowm")
    assert not [c for s in (G.SUITE_FP8, G.SUITE_FP8_C2) for c in s.cases if "lowm" in c.tags]
    assert G.VARIANTS["t64k2p9d"]["EPI"] == "direct"   # 9 stages leave no room for staged C


def test_pdl_cases_are_the_mains_twins_launched_as_programmatic_dependents():
    """Role "pdl" (benchmarks/gemm_bench.sh pdl, sessions 19 and 20): at each of gemm_sm90.PDL's
    shapes a main's twin with PDL=1 -- the same specialization plus griddepcontrol
    (launch_dependents, then wait, after the barriers' set-up and before any global access),
    so its launch carries the programmatic-stream-serialization attribute; bf16 only. Where
    the twin measured at least as fast in both protocols (2048 x 1024 x 7168 in session 20, the
    three c2 shapes in session 21) it is the main and the PDL-less form an alt."""
    want = {f"m{M}n{N}k{K}_{v}": kern for (M, N, K), vs in G.PDL.items() for kern, v in vs}
    got = {c.name: (s, c) for s in (G.SUITE, G.SUITE_PEERS, G.SUITE_C2, G.SUITE_C2_PEERS)
           for c in s.cases if "pdl" in c.tags}
    assert set(got) == set(want)
    assert {n for n, k in want.items() if k == "c2"} == {
        "m2048n4096k4096_t256ds4pdl", "m8192n1024k7168_t256ds4pdl", "m2048n4096k14336_t256ds4pdl"}
    for name, (s, c) in got.items():
        assert s.kernel.name.endswith("_c2") == (want[name] == "c2"), name
        twin = _case(s, name.removesuffix("pdl"))
        roles = {"main", "alt"} & (set(twin.tags) | set(c.tags))
        assert roles == {"main", "alt"} or "main" in twin.tags, name
        assert {**twin.params, "PDL": True} == c.params
        ck = s.kernel.compile("sm_90a", **s.consts(c))
        assert ck.launch_metadata()["pdl"] is True
        ptx = ck.ptx
        assert ptx.index("griddepcontrol.launch_dependents") < ptx.index("griddepcontrol.wait")
        assert ptx.index("griddepcontrol.wait") < ptx.index("cp.async.bulk.tensor")
        assert s.kernel.compile("sm_90a", **s.consts(twin)).launch_metadata()["pdl"] is False
    assert "main" in _case(G.SUITE_PEERS, "m2048n1024k7168_t128pdl").tags
    assert "alt" in _case(G.SUITE_PEERS, "m2048n1024k7168_t128").tags
    for shape in ("m2048n4096k4096", "m8192n1024k7168", "m2048n4096k14336"):   # session 21
        s = next(s for s in (G.SUITE_C2, G.SUITE_C2_PEERS)
                 if any(c.name == f"{shape}_t256ds4pdl" for c in s.cases))
        assert "main" in _case(s, f"{shape}_t256ds4pdl").tags, shape
        assert "alt" in _case(s, f"{shape}_t256ds4").tags, shape
    assert not [c for s in (G.SUITE_FP8, G.SUITE_FP8_C2) for c in s.cases if "pdl" in c.tags]


def test_small3_cases_are_lowm3s_pairs_and_the_rings_hold_what_the_docs_say():
    """Role "small3" (benchmarks/gemm_bench.sh small3): exactly LOWM3's (kernel, variant) pairs,
    once each, bf16 only; the 128 x 64 split-K cases on 128 CTAs at M = 128 (64 tiles x 2
    splits) and on every SM at M = 512 (512 units). The deep-ring variants keep 4 A stages and
    12 / 18 B stages (96 / 144 KB of B in flight per SM, t64k2p 64 KB: docs/TUNING.md "Small
    M, round 3") within the H200's 227 KB window."""
    suites = {"c1": (G.SUITE, G.SUITE_PEERS), "c2": (G.SUITE_C2, G.SUITE_C2_PEERS),
              "k2": (G.SUITE_K2,)}
    want = {(kern, f"m{M}n{N}k{K}_{v}") for (M, N, K), vs in G.LOWM3.items() for kern, v in vs}
    got = [(kern, c.name) for kern, ss in suites.items() for s in ss for c in s.cases
           if "small3" in c.tags]
    assert sorted(got) == sorted(want)
    for s in suites["c1"] + suites["k2"]:
        for c in s.cases:
            if "small3" in c.tags:
                assert s.grid(c) == ((128 if c.params["M"] == 128 else 132), 1, 1), c.name
    assert G.gemm_bf16_k2.specialize(**G.VARIANTS["t64k2x7"]).cluster == (2, 1, 1)
    assert {c.params["REDUCE"] for c in G.SUITE_K2.cases} == {"pair"}
    assert not [c for s in (G.SUITE_FP8, G.SUITE_FP8_C2) for c in s.cases
                if "small3" in c.tags]
    b_in_flight = {v: G.VARIANTS[v]["STAGES"] * G.VARIANTS[v]["BN"] * 128
                   for v in ("t64k2p", "t64k2pb12", "t64k2pb18")}
    assert b_in_flight == {"t64k2p": 64 << 10, "t64k2pb12": 96 << 10, "t64k2pb18": 144 << 10}
    for v in ("t64k2pb12", "t64k2pb18"):
        assert G.VARIANTS[v]["ASTAGES"] == 4
        assert G.gemm_bf16.specialize(**G.VARIANTS[v]).dynamic_smem <= 232448


@pytest.mark.parametrize("consts,match", [
    (dict(BN=64, STAGES=4, ASTAGES=4),
     r"ASTAGES = 4: expected 0 \(one ring\) or 1\.\.STAGES - 1"),
    (dict(BN=64, STAGES=4, ASTAGES=-1), r"ASTAGES = -1: expected 0"),
], ids=["as-deep-as-b", "negative"])
def test_a_stages_must_be_shallower_than_b(consts, match):
    with pytest.raises(TraceError, match=match):
        G.gemm_bf16.specialize(**consts)


@pytest.mark.parametrize("kernel,consts,match", [
    ("gemm_bf16", dict(SPLITK=2, REDUCE="pair"), r"REDUCE = 'pair' is the gemm_bf16_k2"),
    ("gemm_bf16_k2", dict(REDUCE="peers"), r"gemm_bf16_k2 sums through it alone \(got "
                                           r"REDUCE = 'peers'\)"),
    ("gemm_bf16_k2", dict(SPLITK=3), r"REDUCE = 'pair' takes SPLITK = 2, .*\(got SPLITK = 3\)"),
], ids=["pair-outside-k2", "k2-without-pair", "k2-three-splits"])
def test_the_pair_reduction_is_k2s_alone_at_two_splits(kernel, consts, match):
    with pytest.raises(TraceError, match=match):
        getattr(G, kernel).specialize(BN=64, STAGES=4, **consts)


def test_the_pair_grid_is_even_so_a_cluster_holds_a_tiles_two_splits():
    assert G.SUITE_K2.grid(T.case("x", M=130, N=135, K=72, BN=128, SPLITK=2, SMS=3)) == (2, 1, 1)
    assert G.SUITE_K2.grid(T.case("x", M=128, N=4096, K=4096, BN=64, SPLITK=2)) == (128, 1, 1)


def test_a_stages_is_refused_in_clusters():
    with pytest.raises(TraceError, match=r"ASTAGES takes one-CTA kernels \(CM = 1\)"):
        G.gemm_bf16_c2.specialize(BN=64, STAGES=4, ASTAGES=2)


def test_odd_n_takes_the_direct_epilogue_and_a_placeholder_map():
    c = _case(G.SUITE, "m4095n4097k4104_t256")
    assert c.params["EPI"] == "direct"
    inputs = G.bf16_inputs(G.BM, 1)(np.random.default_rng(0), 130, 135, 40, BN=128,
                                    EPI="direct")
    assert inputs["c_map"].source == "a"   # the direct epilogue never reads it


def test_grid_is_persistent_and_clusters_pair_tiles():
    assert G.SUITE_PEERS.grid(_case(G.SUITE_PEERS, "m8192n8192k8192_t256")) == (132, 1, 1)
    assert G.SUITE_C2_PEERS.grid(_case(G.SUITE_C2_PEERS, "m8192n8192k8192_t256")) == (132, 1, 1)
    assert G.SUITE.grid(_case(G.SUITE, "m200n136k72")) == (2, 1, 1)      # two tiles only
    assert G.SUITE_C2.grid(_case(G.SUITE_C2, "m200n136k72")) == (2, 1, 1)   # one pair
    assert G.gemm_bf16_c2.specialize().cluster == (2, 1, 1)
    assert G.gemm_bf16.specialize().cluster is None


@pytest.mark.slow
@pytest.mark.parametrize("suite,case", [("SUITE", "m256n256k64_persistent"),
                                        ("SUITE_C2", "m256n256k64_persistent"),
                                        # BM 256: two row blocks a consumer, the ring wraps
                                        ("SUITE", "m512n256k64_tall_persistent"),
                                        # PAIR_N: A's halves multicast across the pair
                                        ("SUITE_C2", "m256n256k64_tall_n"),
                                        ("SUITE", "m128n128k256_splitk"),
                                        ("SUITE", "m128n128k256_splitk_red"),
                                        ("SUITE", "m200n136k296_bn64_red"),
                                        ("SUITE_FP8", "m128n128k512_splitk_red"),
                                        ("SUITE", "m200n136k296_streamk"),
                                        ("SUITE_FP8", "m128n256k640_streamk"),
                                        ("SUITE", "m200n136k296_streamk_tail_defer"),
                                        ("SUITE", "m200n264k296_defer_spread"),
                                        # the tail in K-lockstep: 2 tail tiles cut at slice
                                        # 2 between a main CTA and a helper each
                                        ("SUITE", "m200n136k296_streamk_lock"),
                                        # REDUCE "peers": the last split's own partial never
                                        # leaves its registers; 3 splits on 4 CTAs, 2 in a
                                        # cluster
                                        ("SUITE", "m256n128k384_peers3"),
                                        ("SUITE_C2", "m200n136k200_bn64_peers"),
                                        # A in its own ring: units shorter than B's lead,
                                        # both rings wrapping, N-major B
                                        ("SUITE", "m200n136k296_bn64_peers_a2"),
                                        ("SUITE", "m200n136k600_bn64_a2"),
                                        ("SUITE", "m200n136k200_kn_a3"),
                                        # REDUCE "pair": split 1's partial into split 0's
                                        # shared memory, the buffer handed back once
                                        ("SUITE_K2", "m130n135k136_pair_direct"),
                                        ("SUITE_K2", "m130n135k72_pair_a1_direct"),
                                        # stream-K in clusters: one tile pair cut between
                                        # 2 clusters (2 + 3 slices); two clusters with two
                                        # units each are the suite's tail cases (`tirxh
                                        # check`) and the test below
                                        pytest.param("SUITE_C2", dict(
                                            M=200, N=64, K=296, BN=64, STAGES=3, EPI_BUFS=1,
                                            STREAMK="tail", REDUCE="red"),
                                            id="c2_m200n64k296_streamk_tail"),
                                        # 3 splits of 2 tiles on 4 persistent CTAs: racecheck's
                                        # replay once ran a CTA's acquire of the split count
                                        # before the increment it read (a false race)
                                        pytest.param("SUITE", dict(
                                            M=256, N=128, K=384, BN=128, STAGES=2, SPLITK=3,
                                            SMS=4), id="m256n128k384_splitk3_p4"),
                                        # split-K in a 2-CTA cluster: > 200000 states
                                        # (incomplete) before `hbquery.bars_ordered`
                                        pytest.param("SUITE_C2", dict(
                                            M=200, N=136, K=200, BN=64, STAGES=3, EPI_BUFS=1,
                                            SPLITK=2), id="c2_m200n136k200_splitk2"),
                                        pytest.param("SUITE_C2", dict(
                                            M=200, N=136, K=200, BN=64, STAGES=3, EPI_BUFS=1,
                                            SPLITK=2, REDUCE="red"),
                                            id="c2_m200n136k200_splitk2_red"),
                                        # t64k2p's constants, 4 units per CTA (~290000
                                        # states, ~30 s on 2 cores: tagged sync-slow)
                                        ("SUITE", "m256n136k520_bn64_peers_s8")])
def test_persistent_and_cluster_kernels_are_sync_clean(suite, case):
    sc = pytest.importorskip("tirxh_sync_check")
    s = SUITES[suite]
    c = _case(s, case) if isinstance(case, str) else T.case("sync", **case)
    sync, race = sc.check_kernel(s.kernel, s.make_inputs(c, 0), consts=s.consts(c),
                                 grid=s.grid(c))
    findings = sync.findings + race.findings
    assert not findings, "\n".join(sc.format_finding(f) for f in findings)


@pytest.mark.slow
def test_two_clusters_of_two_units_get_a_definite_verdict():
    """The plain persistent cluster GEMM on two clusters of two tile pairs each: racecheck once
    reported race.stage-reuse / race.write-write on sA/sB (its replay let the peer CTA's
    releases complete a phase of `empty` before this CTA's) and, its clocks then proving no
    wait ordered, the explorer interleaved every wait and stopped at the 200000-state bound
    (87 s, incomplete). Now both analyses finish clean: ~9300 states, ~11 s on 2 cores
    (docs/TUNING.md)."""
    sc = pytest.importorskip("tirxh_sync_check")
    s = G.SUITE_C2
    c = T.case("sync", M=200, N=136, K=296, BN=64, STAGES=3, EPI_BUFS=1, SMS=4)
    assert s.grid(c) == (4, 1, 1)
    sync, race = sc.check_kernel(s.kernel, s.make_inputs(c, 0), consts=s.consts(c),
                                 grid=s.grid(c))
    assert (sync.verdict, race.verdict) == ("clean", "clean"), \
        "\n".join(sc.format_finding(f) for f in sync.findings + race.findings)
    assert sync.stats["eager_waits"] and sync.stats["states"] < 50_000, sync.stats


_RELEASE = r"T\.ptx\.mbarrier\.arrive\.shared__cluster\.b64\(T\.sink, peer_empty \+ \(stage << 3\)\)"


@pytest.mark.slow
@pytest.mark.parametrize("edits,suite,case,kind", [
    ([(r"T\.ptx\.fence\.proxy\.async_\.shared__cta\(\)", "pass")], "SUITE",
     "m256n256k64_persistent", "proxy.missing-fence"),
    ([(r"T\.ptx\.cp\.async_\.bulk\.wait_group\.read\(0\)", "pass")], "SUITE",
     "m256n256k64_persistent", "race.stage-reuse"),
    ([(r"T\.ptx\.fence\.acq_rel\.gpu\(\)", "pass"),
      (r"T\.ptx\.atom\.acq_rel\.gpu", "T.ptx.atom.relaxed.gpu")], "SUITE",
     "m128n128k256_splitk", "race.read-write"),
    # the red sum is touched only by atomics and strong (relaxed.gpu) accesses, which never
    # race in PTX's model: the load that may miss a split is `race.unordered-atomic-read`
    ([(r"T\.ptx\.fence\.acq_rel\.gpu\(\)", "pass"),
      (r"T\.ptx\.atom\.acq_rel\.gpu", "T.ptx.atom.relaxed.gpu")], "SUITE",
     "m128n128k256_splitk_red", "race.unordered-atomic-read"),
    ([(r"T\.ptx\.fence\.acq_rel\.gpu\(\)", "pass"),
      (r"T\.ptx\.atom\.acq_rel\.gpu", "T.ptx.atom.relaxed.gpu")], "SUITE",
     dict(M=256, N=128, K=384, BN=128, STAGES=2, SPLITK=3, SMS=4), "race.read-write"),
    ([(r"T\.ptx\.fence\.acq_rel\.gpu\(\)", "pass"),
      (r"T\.ptx\.atom\.acq_rel\.gpu", "T.ptx.atom.relaxed.gpu")], "SUITE",
     "m200n136k296_bn64_peers", "race.read-write"),
    ([(r"wgmma\.wait_group\.sync\.aligned\(1\)", "wgmma.wait_group.sync.aligned(2)")], "SUITE",
     dict(M=128, N=128, K=512, BN=128, STAGES=2), "race.stage-reuse"),
    ([(_RELEASE, "pass")], "SUITE_C2", "m256n256k64_persistent", "mbarrier.arrival-count"),
    # A's own ring (ASTAGES): wgmma reading A before its TMA landed; the producer refilling
    # an A stage without waiting for its release
    ([(r"a_bars\[0\]\[ast\]\.wait\(a_ring\.phase\)", "pass")], "SUITE",
     "m200n136k600_bn64_a2", "race.read-write"),
    ([(r"st = slot\(a_bars, a_ring, a_bytes\)",
       "st = a_ring.stage; a_bars[0][st].arrive_expect_tx(a_bytes)")], "SUITE",
     "m200n136k200_kn_a3", "mbarrier.phase-overrun"),
    # REDUCE "pair": split 0 reading the receive buffer before split 1's stores are published
    ([(r"_wait_cluster\(r_full\[cw\], par\)", "pass")], "SUITE_K2",
     "m130n135k136_pair_direct", "race.read-write"),
], ids=["no-proxy-fence", "no-read-wait", "relaxed-split-k-count", "relaxed-red-split-k-count",
        "relaxed-split-k3-count-p4", "relaxed-peers-count", "release-a-group-early",
        "no-remote-release", "no-a-full-wait", "no-a-empty-wait", "no-pair-full-wait"])
def test_synchronization_mutations_are_caught(tmp_path, edits, suite, case, kind):
    """Without the proxy fence the TMA store may read C before stmatrix's writes reach the async
    proxy; without the read wait the next round overwrites chunks a store still reads; with a
    relaxed split-K count the last split may read a partial before it is stored; releasing a
    stage after `wait_group 2` lets TMA refill it under a running wgmma; without the remote
    arrival the peer CTA's producer never sees the stage free."""
    sc = pytest.importorskip("tirxh_sync_check")
    src = (ZOO / "gemm_sm90.py").read_text()
    for pattern, repl in edits:
        src, n = re.subn(pattern, repl, src)
        assert n == 1, f"gemm_sm90.py no longer has the one {pattern!r} this test edits"
    path = tmp_path / "gemm_mut.py"
    path.write_text(src)
    s = getattr(_load(path, "zoo_gemm_sm90_mut"), suite)
    c = _case(s, case) if isinstance(case, str) else T.case("mutation", **case)
    sync, race = sc.check_kernel(s.kernel, s.make_inputs(c, 0), consts=s.consts(c),
                                 grid=s.grid(c))
    assert kind in {f.kind for f in sync.findings + race.findings}


def _sass_ops(sass: str) -> dict:
    ops = re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]+)", sass, re.M)
    out: dict = {}
    for o in ops:
        out[o] = out.get(o, 0) + 1
    return out


@pytest.mark.parametrize("kernel,consts,mma", [
    ("gemm_bf16", {}, "HGMMA"),
    ("gemm_bf16", {"B_KMAJOR": False, "BN": 128, "STAGES": 6}, "HGMMA"),
    ("gemm_bf16", {"BN": 128, "STAGES": 6, "SPLITK": 4}, "HGMMA"),
    ("gemm_bf16", {"BN": 128, "STAGES": 6, "SPLITK": 4, "REDUCE": "red"}, "HGMMA"),
    ("gemm_bf16", {"BN": 64, "STAGES": 8, "EPI_BUFS": 1, "SPLITK": 2, "REDUCE": "red"}, "HGMMA"),
    ("gemm_bf16", G.VARIANTS["t64k2p"], "HGMMA"),
    ("gemm_bf16", G.VARIANTS["t64k2pb18"], "HGMMA"),   # A's own ring: still 4 per slice
    ("gemm_bf16_k2", G.VARIANTS["t64k2xb12"], "HGMMA"),  # the pair's DSMEM hand-over
    ("gemm_bf16_c2", {}, "HGMMA"),
    ("gemm_bf16_c2", G.VARIANTS["t256skt"], "HGMMA"),   # stream-K tail: one epilogue copy
    ("gemm_fp8", {}, "QGMMA"),
])
def test_sass_has_warpgroup_mma_tma_stores_and_no_spills(kernel, consts, mma):
    ck = getattr(G, kernel).compile("sm_90a", **consts)
    r = ck.resources
    assert (r.spill_stores, r.spill_loads, r.stack_frame) == (0, 0, 0)
    assert not any("C7508" in w for w in r.warnings), r.warnings   # setmaxnreg ignored
    ops = _sass_ops(ck.sass)
    assert ops.get(mma) == 4                  # one K slice: four m64nBNk16 (k32 for fp8)
    assert ops.get("STSM") == 16 * consts.get("BN", 256) // 256   # stmatrix.x4: 64 x BN bf16
    assert ops.get("UTMASTG") == consts.get("BN", 256) // 64      # one TMA store per chunk
    assert ops.get("USETMAXREG") == 2         # producer down, consumers up
    # the consumers' setmaxnreg.inc draws on the CTA's pool: what the CTA got at launch
    # (registers x 384 threads); more than that waits forever (every launch hung on the H200)
    assert 128 * G.PRODUCER_REGS + 256 * G.CONSUMER_REGS <= r.registers * 384, r.registers
    assert f"USETMAXREG.DEALLOC.CTAPOOL {G.PRODUCER_REGS:#x}" in ck.sass
    assert re.search(rf"USETMAXREG\.TRY_ALLOC\.CTAPOOL \w+, {G.CONSUMER_REGS:#x}", ck.sass)
    assert "LDL" not in ops and "STL" not in ops
    # fences at the start and the end only, never one per K slice (a cluster-scope release there
    # compiles to MEMBAR.ALL.GPU)
    counts = consts.get("SPLITK", 1) > 1 or bool(consts.get("STREAMK"))
    # + the split-K / stream-K count (its fence.acq_rel and its acq_rel atomic)
    assert ck.sass.count("MEMBAR.ALL.GPU") <= 2 + 2 * counts
    if consts.get("REDUCE") == "red":         # one coalesced red per accumulator, no slots
        assert ops.get("REDG") == consts["BN"] // 2 and "REDG.E.ADD.F32" in ck.sass
    if kernel.endswith("_c2"):                # B multicast; releases reach the peer's barrier
        assert "UTMALDG.2D.MULTICAST" in ck.sass and "SYNCS.ARRIVE.TRANS64.RED" in ck.sass


def test_deferred_epilogue_stores_each_tile_under_the_next_ones_mmas():
    """EPI_DEFER: the epilogue is emitted twice (inside the K loop, for the previous tile, and
    after the unit loop, for the last), from bf16 registers packed once: no spills, no local
    memory, the consumers within their setmaxnreg budget, ptxas keeps the wgmma pipeline."""
    ck = G.gemm_bf16_c2.compile("sm_90a", **G.VARIANTS["t256d"])
    r = ck.resources
    assert (r.spill_stores, r.spill_loads, r.stack_frame) == (0, 0, 0)
    assert not [w for w in r.warnings if re.search(r"C75(08|13|14)", w)], r.warnings
    ops = _sass_ops(ck.sass)
    assert ops.get("STSM") == 2 * 16 and ops.get("UTMASTG") == 2 * 4
    regs = max(int(x) for x in re.findall(r"\bR(\d+)\b", ck.sass))
    assert regs < G.CONSUMER_REGS, regs


def test_deferred_epilogue_takes_true_or_spread():
    with pytest.raises(TraceError, match=r"EPI_DEFER = 'late': expected False, True .* "
                                         r"'spread'"):
        G.gemm_bf16.specialize(BN=128, STAGES=2, EPI_DEFER="late")


@pytest.mark.parametrize("consts", [dict(SPLITK=2), dict(STREAMK=True, REDUCE="red"),
                                    dict(EPI="direct")], ids=["splitk", "streamk", "direct"])
def test_deferred_epilogue_is_refused_where_it_cannot_apply(consts):
    with pytest.raises(TraceError, match=r"EPI_DEFER takes EPI = 'tma' without SPLITK or "
                                         r"STREAMK"):
        G.gemm_bf16.specialize(BN=128, STAGES=2, EPI_DEFER=True, **consts)


@pytest.mark.slow
def test_deferred_epilogue_packing_before_the_last_group_retires_is_caught(tmp_path):
    """Packing the accumulators before `wait_group 0` reads registers a wgmma still writes."""
    sc = pytest.importorskip("tirxh_sync_check")
    src = (ZOO / "gemm_sm90.py").read_text()
    old = ("        T.ptx.wgmma.wait_group.sync.aligned(0)\n        with T.if_(leader):\n"
           "            release(prev)\n")
    pack = ("                    bf16x2(_scaled(acc, i, scale), _scaled(acc, i + 1, scale), "
            "packed[i // 2])\n")
    new = ("        if defer:  # the mutation: pack once more before the last group retired\n"
           "            for i in range(0, BN // 2, 2):\n" + pack[4:] + old)
    assert src.count(old) == 1 and src.count(pack) == 1
    path = tmp_path / "gemm_defer_mut.py"
    path.write_text(src.replace(old, new))
    s = _load(path, "zoo_gemm_sm90_defer_mut").SUITE
    c = _case(s, "m256n256k64_persistent_defer")
    sync, race = sc.check_kernel(s.kernel, s.make_inputs(c, 0), consts=s.consts(c),
                                 grid=s.grid(c))
    assert "wgmma.accumulator-early" in {f.kind for f in sync.findings + race.findings}


def _variants() -> list:
    """Every distinct specialization the benchmark cases build."""
    seen, out = set(), []
    for name, s in SUITES.items():
        for c in s.cases:
            key = (s.kernel.name, tuple(sorted(s.consts(c).items())))
            if key not in seen:
                seen.add(key)
                out.append((name, c.name))
    return out


@pytest.mark.parametrize("suite,case", _variants(), ids=[f"{s}:{c}" for s, c in _variants()])
def test_every_variant_assembles_without_local_memory(suite, case):
    s = SUITES[suite]
    ck = s.kernel.compile("sm_90a", **s.consts(_case(s, case)))
    assert not re.search(r"\b(LDL|STL)\b", ck.sass), "local memory (a spill across setmaxnreg?)"
    assert not any("C7508" in w for w in ck.resources.warnings), ck.resources.warnings


def test_the_256_row_tile_takes_the_plain_path_only():
    """BM = 256 (`t256x128`): two accumulator sets of BN / 2 registers a consumer, built for
    whole tiles stored as they finish; split-K, stream-K, the deferred epilogue, BN > 128 and
    other heights are refused by name, not run as BM = 128."""
    plain = dict(BM=256, BN=128, SPLITK=1, STREAMK=False, EPI_DEFER=False, EPI="tma",
                 ASTAGES=0, PAIR=False)
    G._check_tall(plain)
    G._check_tall(dict(plain, BM=128, BN=256, SPLITK=4))   # BM 128: every path as before
    for bad, word in ((dict(SPLITK=2), "SPLITK"), (dict(EPI_DEFER=True), "EPI_DEFER"),
                      (dict(STREAMK="tail"), "STREAMK"), (dict(BN=256), "BN = 256"),
                      (dict(BM=192), "BM = 192")):
        with pytest.raises(ValueError, match=word):
            G._check_tall(dict(plain, **bad))
    assert G.VARIANTS["t256x128"]["BM"] == 256
    assert [(k, v) for k, v, role in G.plan(8192, 1024, 7168) if role == "tall"] == \
        [("c2", "t256x128"), ("c2", "t256x128n"), ("c1", "t256x128")]
    assert not [r for *_, r in G.plan(8192, 1024, 7168, fp8=True) if r == "tall"]
    G._check_pair_n(dict(plain, CM=2, PAIR_N=True))
    for bad, word in ((dict(CM=1), "CM = 1"), (dict(CM=2, SPLITK=2), "SPLITK")):
        with pytest.raises(ValueError, match=word):
            G._check_pair_n(dict(plain, PAIR_N=True, **bad))
