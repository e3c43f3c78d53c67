"""zoo/kernels/attention.py (issue 16), on the CPU: every small case through numsim against the
float64 reference (errors where the bf16 roundings put them, not merely inside the tolerance);
the references and the tolerance themselves; shapes the kernel cannot run refused with the rule;
the benchmark plan; SASS with HGMMA (SS and RS), both setmaxnreg honoured, no spills and no
wgmma serialization; sync_check clean on both ping-pong protocols, and planted synchronization
bugs caught."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import tirxh.lang as T
from tirxh.api import TraceError

from ._zoo import ZOO, load

A = load("attention")
SMALL = [c for c in A.SUITE.cases if c.small]


def _case(name):
    return next(c for c in A.SUITE.cases if c.name == name)


def _exact(q, k, v, causal):
    """Attention in float64 straight from the definition (no chunking)."""
    g = q.shape[2] // k.shape[2]
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    kk, vv = np.repeat(k, g, axis=2), np.repeat(v, g, axis=2)
    s = np.einsum("bihd,bjhd->bhij", q, kk) / math.sqrt(A.D)
    if causal:
        s = np.where(np.tri(s.shape[-2], s.shape[-1], dtype=bool), s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(-1, keepdims=True)
    return np.einsum("bhij,bjhd->bihd", p / l, vv), (m + np.log(l))[..., 0]


# --- references and tolerance -------------------------------------------------------------------

@pytest.mark.parametrize("causal", [False, True])
def test_reference_is_attention(causal):
    """The chunked reference (2048 rows at a time in production, 64 here) against the
    definition, with grouped heads, two batches and a causal mask crossing chunk borders."""
    inp = A.inputs(np.random.default_rng(1), B=2, S=150, H=4, HKV=2, CAUSAL=causal, HG=2)
    want_o, want_lse = _exact(inp["q"], inp["k"], inp["v"], causal)
    got = A.reference(inp["q"], inp["k"], inp["v"], CAUSAL=causal)
    np.testing.assert_allclose(got["o"], want_o, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got["lse"], want_lse, rtol=1e-7)
    o, lse = A._head(inp["q"][1, :, 3], inp["k"][1, :, 1], inp["v"][1, :, 1], causal,
                     np.float64, rows=64)
    np.testing.assert_allclose(o, want_o[1, :, 3], rtol=1e-12, atol=1e-14)
    o32, lse32 = A._head(inp["q"][1, :, 3], inp["k"][1, :, 1], inp["v"][1, :, 1], causal,
                         np.float32, rows=64)   # the large cases' precision: far inside tolerance
    assert np.abs(o32 - o).max() < 1e-5 and np.abs(lse32 - lse).max() < 1e-5


def test_large_inputs_and_references_are_computed_once_per_seed_and_mask(monkeypatch):
    monkeypatch.setattr(A, "_LARGE", 1000)   # these shapes count as large
    x = A.inputs(np.random.default_rng(5), B=1, S=16, H=2, HKV=1)
    y = A.inputs(np.random.default_rng(5), B=1, S=16, H=2, HKV=1)
    z = A.inputs(np.random.default_rng(6), B=1, S=16, H=2, HKV=1)
    assert x["q"] is y["q"] and x["v"] is y["v"] and x["q"] is not z["q"]
    assert not x["k"].flags.writeable
    r = A.reference(x["q"], x["k"], x["v"], CAUSAL=False)
    assert A.reference(y["q"], y["k"], y["v"], CAUSAL=False) is r
    rc = A.reference(x["q"], x["k"], x["v"], CAUSAL=True)
    assert rc is not r and not np.allclose(rc["o"], r["o"])
    np.testing.assert_allclose(r["o"], _exact(x["q"], x["k"], x["v"], False)[0], rtol=1e-5,
                               atol=1e-6)


def test_tolerance_takes_bf16_roundings_and_refuses_a_missing_kv_block():
    """The rule of TOLERANCE: P and O rounded to bf16 pass; one of 4 KV blocks left out, or a
    causal mask shifted by one key, does not."""
    bf16 = A.numpy_dtype("bf16")
    inp = A.inputs(np.random.default_rng(2), B=1, S=512, H=2, HKV=2, HG=2)
    q, k, v = (inp[n].astype(np.float64) for n in "qkv")
    ref_o, ref_lse = _exact(inp["q"], inp["k"], inp["v"], False)
    s = np.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(A.D)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(-1, keepdims=True)
    pb = p.astype(np.float32).astype(bf16).astype(np.float64)          # P in bf16
    o = np.einsum("bhij,bjhd->bihd", pb / l, v).astype(bf16)            # O in bf16
    assert A.TOLERANCE["o"].compare(o, ref_o)["ok"]
    keep = np.ones(512, bool)
    keep[128:256] = False
    o_missing = np.einsum("bhij,bjhd->bihd", p[..., keep] / p[..., keep].sum(-1, keepdims=True),
                          v[:, keep]).astype(bf16)
    assert not A.TOLERANCE["o"].compare(o_missing, ref_o)["ok"]
    lse_missing = (m + np.log(p[..., keep].sum(-1, keepdims=True)))[..., 0]
    assert not A.TOLERANCE["lse"].compare(lse_missing.astype(np.float32), ref_lse)["ok"]
    shifted, _ = _exact(inp["q"][:, :256], inp["k"][:, 1:257], inp["v"][:, 1:257], True)
    exact, _ = _exact(inp["q"][:, :256], inp["k"][:, :256], inp["v"][:, :256], True)
    assert not A.TOLERANCE["o"].compare(shifted.astype(bf16), exact)["ok"]


# --- numsim ----------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("case", SMALL, ids=[c.name for c in SMALL])
def test_small_case_in_numsim_matches_attention(case):
    """numsim's H200 tensor-core model against float64: the normalized RMS error is that of two
    bf16 roundings (~2e-3; a wrong block would be ~1e-1), every element within those two
    roundings' bound (u = 2^-8 of itself plus u max |v|: 0.011 at an output of 4.19, a row of
    the S300 case that sees 9 keys), LSE is right to f32 accuracy."""
    ns = pytest.importorskip("tirxh_numsim")
    s = A.SUITE
    inputs = s.make_inputs(case, 0)
    res = ns.run(s.kernel, inputs, consts=s.consts(case), grid=s.grid(case),
                 outputs=["o", "lse"])
    assert res.verdict == "clean", res.summary
    want = s.expected(case, inputs)
    o = s.tolerance_for("o").compare(res.outputs["o"], want["o"])
    lse = s.tolerance_for("lse").compare(res.outputs["lse"], want["lse"])
    assert o["ok"] and lse["ok"], (o, lse)
    assert o["rms_ratio"] < 2.5e-3, o
    got, exact = (np.asarray(x, np.float64) for x in (res.outputs["o"], want["o"]))
    u = 2.0 ** -8
    assert (np.abs(got - exact) <= u * (np.abs(exact) + np.abs(inputs["v"].astype(
        np.float64)).max())).all(), o
    assert lse["max_abs"] < 1e-5, lse


# --- shapes and plan ------------------------------------------------------------------------------

@pytest.mark.parametrize("params,rule", [
    (dict(B=1, S=64, H=6, HKV=4), r"H = 6 must be HKV = 4 times a power of two"),
    (dict(B=1, S=64, H=12, HKV=4), r"H = 12 must be HKV = 4 times a power of two"),
    (dict(B=0, S=64, H=1, HKV=1), r"B, S, H, HKV must be positive \(got 0, 64, 1, 1\)"),
    (dict(B=1, S=64, H=1, HKV=1, HG=0), r"HG = 0 \(heads per schedule section\)"),
    (dict(B=1 << 16, S=1 << 16, H=1, HKV=1), r"B \* H \* S = 4294967296: LSE indices"),
    (dict(B=1, S=64, H=1, HKV=1, BN=72), r"BN = 72 keys per block: expected a multiple of 16"),
    (dict(B=1, S=64, H=1, HKV=1, BN=176), r"BN = 176: 245760 bytes of shared memory, more "
                                          r"than the 232448"),
    (dict(B=1, S=64, H=1, HKV=1, BN=160, CAUSAL=True),
     r"BN = 160 with CAUSAL: the causal schedule needs square blocks"),
])
def test_shapes_the_kernel_cannot_run_are_refused(params, rule):
    with pytest.raises(ValueError, match="attention_fwd: " + rule):
        A.inputs(np.random.default_rng(0), **params)
    with pytest.raises(ValueError, match=r"case 'bad': " + rule):
        T.suite(A.attention_fwd, inputs=A.inputs, cases=[T.case("bad", **params)],
                constraints=lambda B, S, H, HKV, HG=8, BN=128, CAUSAL=False:
                A._check_shape(B, S, H, HKV, HG, BN, CAUSAL))


def test_a_block_size_the_kernel_cannot_run_is_refused_when_specialized():
    with pytest.raises(TraceError, match=r"attention_fwd: BN = 160 with CAUSAL: the causal "
                       r"schedule needs square blocks"):
        A.attention_fwd.specialize(H=1, HKV=1, CAUSAL=True, BN=160)


@pytest.mark.slow
@pytest.mark.parametrize("lazy", [0, 8])
def test_lazy_rescaling_is_exact_where_row_maxima_jump_late(lazy, tmp_path):
    """KV blocks run from the last down, so keys of block 0 scaled by 6 make the row maxima jump
    in a tile's last block, past the lazy threshold (2^8): the rescale runs there, and O and
    LSE match float64 attention as tightly as without it. With the rescale taken out (a
    mutant), the same inputs fail: the test sees the branch that runs."""
    ns = pytest.importorskip("tirxh_numsim")
    case = _case("s400_causal_lazy8_p2")
    s = A.SUITE
    inputs = s.make_inputs(case, 3)
    k = inputs["k"].astype(np.float32)
    k[:, :128] *= 6.0
    inputs["k"] = k.astype(inputs["k"].dtype)
    consts = dict(s.consts(case), LAZY=lazy)
    want = s.expected(case, inputs)

    def run(kernel):
        res = ns.run(kernel, dict(inputs), consts=consts, grid=s.grid(case),
                     outputs=["o", "lse"])
        assert res.verdict == "clean", res.summary
        return (s.tolerance_for("o").compare(res.outputs["o"], want["o"]),
                s.tolerance_for("lse").compare(res.outputs["lse"], want["lse"]))
    o, lse = run(s.kernel)
    assert o["ok"] and lse["ok"] and o["rms_ratio"] < 2.5e-3, (o, lse)
    if lazy:
        mut = _mutant(tmp_path, [(r"        sc = sm_state\.sc    # ex2", "        return\n"
                                  "        sc = sm_state.sc    # ex2")])
        o, lse = run(mut.kernel)
        assert not o["ok"], o


def test_a_lazy_threshold_out_of_range_is_refused():
    with pytest.raises(TraceError, match=r"attention_fwd: LAZY = 20: the lazy-rescale threshold "
                       r"in log2 units must be in \[0, 16\]"):
        A.attention_fwd.specialize(H=1, HKV=1, LAZY=20)


def test_an_unknown_tile_order_is_refused():
    with pytest.raises(TraceError, match=r"attention_fwd: ORDER = 'lpt': expected one of "
                       r"\('snake', 'pairs'\) \(the tile order"):
        A.attention_fwd.specialize(H=1, HKV=1, ORDER="lpt")


def test_the_pair_order_runs_its_small_cases_tiles_as_the_model_says():
    """The two small pair-order cases are the schedules their comments describe (the model
    runs the kernel's own arithmetic): what numsim and sync_check then check on them."""
    got = {}
    for name in ("s384_causal_pairs_lazy8_p3", "gqa_b1h2kv1s300_causal_pairs_lazy8_p3"):
        c = _case(name).params
        got[name] = load("attn_schedule").per_cta("pairs", c["B"], c["S"], c["H"], c["HG"],
                                                  A.SUITE.grid(_case(name))[0])
    assert got["s384_causal_pairs_lazy8_p3"] == [[(0, 0, 2)], [(0, 0, 1), (0, 0, 0)], []]
    assert got["gqa_b1h2kv1s300_causal_pairs_lazy8_p3"] == [
        [(0, 0, 2), (0, 0, 0), (0, 1, 1)], [(0, 1, 2), (0, 1, 0)], [(0, 0, 1)]]


def test_an_unknown_pingpong_mode_is_refused():
    with pytest.raises(TraceError, match=r"attention.py:\d+: in kernel 'attention_fwd': "
                       r"ValueError: attention_fwd: PINGPONG = 'yes': expected 'arrive', "
                       r"'sync' or "):
        A.attention_fwd.specialize(H=1, HKV=1, PINGPONG="yes")


@pytest.mark.parametrize("H,HKV,S,hg", [(32, 32, 2048, 16), (32, 32, 8192, 4), (16, 16, 16384, 2),
                                        (32, 8, 8192, 16), (2, 2, 64, 2)])
def test_sections_keep_about_16mb_of_k_and_v(H, HKV, S, hg):
    assert A.heads_per_section(H, HKV, S) == hg


def test_benchmark_plan_covers_every_shape_mask_and_variant():
    large = [c for c in A.SUITE.cases if not c.small and c.tags != ("smoke",)]
    assert len(large) == len(A.SHAPES) * (len(A.variants(False)) + len(A.variants(True)))
    assert {"bn160", "bn160_lazy8"} <= set(A.variants(False))
    assert not {"bn160", "bn160_lazy8"} & set(A.variants(True))
    assert "pairs_lazy8" in A.variants(True) and "pairs_lazy8" not in A.variants(False)
    for B, H, HKV, S in A.SHAPES:
        for causal in (False, True):
            mine = [c for c in large if (c.params["B"], c.params["H"], c.params["HKV"],
                                         c.params["S"], c.params["CAUSAL"]) ==
                    (B, H, HKV, S, causal)]
            assert sorted(c.tags[0] for c in mine) == \
                ["alt"] * (4 if causal else 5) + ["main", "sweep"]
            main = next(c for c in mine if c.tags == ("main",))
            # the fastest measured: the causal pair order (session 7), else the lazy rescale
            assert main.name.endswith("_pairs_lazy8" if causal else "_lazy8")
            assert A.SUITE.grid(main) == (A.H200_SMS, 1, 1)          # persistent
            np_ = next(c for c in mine if c.name.endswith("_np"))
            assert A.SUITE.grid(np_) == (B * H * -(-S // A.BM), 1, 1)  # a CTA per tile
            work = A.SUITE.work(main)
            assert work["flops"] == 4 * B * H * S * S * A.D // (2 if causal else 1)


def test_smoke_cases_run_every_variant_on_full_grids_with_several_tiles_per_cta():
    """attn_bench.sh's hardware smoke pass: what numsim's one legal order cannot show (real
    concurrency of many CTAs, ring and turn phases over several tiles), cheap to check."""
    smoke = [c for c in A.SUITE.cases if c.tags == ("smoke",)]
    assert not any(c.small for c in smoke)
    for causal in (False, True):
        mine = [c for c in smoke if c.params["CAUSAL"] == causal]
        names = {c.name for c in mine}
        assert len(mine) == len(A.variants(causal)) and all(
            any(n.endswith("_" + v) for n in names) for v in A.variants(causal))
        for c in mine:
            tiles = c.params["B"] * c.params["H"] * -(-c.params["S"] // A.BM)
            grid = A.SUITE.grid(c)[0]
            assert grid == tiles if c.name.endswith("_np") else tiles >= 1.9 * grid >= 60
            assert c.params["S"] % A.BN and c.params["B"] * c.params["S"] * c.params["H"] * A.D \
                <= A._LARGE                     # a tail; a float64 reference of seconds
    assert any(c.params["HKV"] < c.params["H"] for c in smoke)


def test_large_cases_tensor_maps_are_ones_the_driver_takes():
    """The 4-D maps of the largest shapes, through the CUDA board's own checks (strides, rank;
    box and swizzle limits are numsim's, on the small cases)."""
    cuda = pytest.importorskip("kcoral.boards.cuda")
    bf16 = A.numpy_dtype("bf16")
    for B, H, HKV, S in A.SHAPES:
        shapes = {"q": (B, S, H, A.D), "k": (B, S, HKV, A.D), "v": (B, S, HKV, A.D),
                  "o": (B, S, H, A.D)}
        for tmap in A.tensor_maps().values():
            args = cuda.tensormap_args(tmap.describe(np.empty(shapes[tmap.source], bf16)))
            assert args["rank"] == 4 and args["dims"] == list(reversed(shapes[tmap.source]))
            assert args["box"][0] * 2 == 128 and max(args["box"]) <= 256


# --- SASS -------------------------------------------------------------------------------------------

def _sass_ops(sass: str) -> dict:
    ops = re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", sass, re.M)
    out: dict = {}
    for o in ops:
        out[o] = out.get(o, 0) + 1
    return out


@pytest.mark.parametrize("consts", [
    dict(H=32, HKV=32, HG=4), dict(H=32, HKV=32, HG=4, CAUSAL=True), dict(H=32, HKV=8, HG=16),
    dict(H=32, HKV=32, HG=4, PINGPONG="sync"), dict(H=32, HKV=32, HG=4, PINGPONG=False),
    dict(H=32, HKV=32, HG=4, BN=160), dict(H=32, HKV=32, HG=4, CAUSAL=True, LAZY=8),
    dict(H=32, HKV=32, HG=4, BN=160, LAZY=8), dict(H=32, HKV=8, HG=16, CAUSAL=True, LAZY=8,
                                                    ORDER="pairs"),
], ids=["noncausal", "causal", "gqa", "sync", "nopp", "bn160", "lazy8", "bn160_lazy8",
        "gqa_causal_pairs_lazy8"])
def test_sass_has_both_wgmma_forms_register_budgets_and_no_spills(consts):
    ck = A.attention_fwd.compile("sm_90a", **consts)
    r = ck.resources
    assert (r.spill_stores, r.spill_loads, r.stack_frame) == (0, 0, 0)
    # ptxas honours setmaxnreg (C7508 otherwise) and keeps the wgmma pipeline (C7513 / C7514:
    # "wgmma.mma_async instructions are serialized" when registers are touched in flight)
    assert not [w for w in r.warnings if re.search(r"C75(08|13|14)", w)], r.warnings
    ops = _sass_ops(ck.sass)
    # Q K^T of the first block and of the loop (SS), P V of the loop and of the last block (RS:
    # A from registers, V transposed): Q K^T in 8 k16 steps of N = BN, P V in BN / 16 of N = 128
    bn = consts.get("BN", 128)
    ss = re.findall(rf"HGMMA\.64x{bn}x16\.F32\.BF16 R\d+, gdesc\[UR\d+\], ", ck.sass)
    rs = re.findall(r"HGMMA\.64x128x16\.F32\.BF16 R\d+, R\d+, gdesc\[UR\d+\]\.tnspB", ck.sass)
    assert (len(ss), len(rs)) == (16, 2 * bn // 16)
    assert ops.get("USETMAXREG.DEALLOC.CTAPOOL") == 1 and \
        ops.get("USETMAXREG.TRY_ALLOC.CTAPOOL") == 1
    # the consumers' setmaxnreg.inc draws on the CTA's pool: what it got at launch (registers x
    # 384 threads); asking more waits for ever (every gemm_sm90 launch hung so on the H200)
    assert 128 * A.PRODUCER_REGS + 256 * A.CONSUMER_REGS <= r.registers * 384, r.registers
    assert f"USETMAXREG.DEALLOC.CTAPOOL {A.PRODUCER_REGS:#x}" in ck.sass
    assert re.search(rf"USETMAXREG\.TRY_ALLOC\.CTAPOOL \w+, {A.CONSUMER_REGS:#x}", ck.sass)
    assert ops.get("STSM.16.M88.4") == 8        # two 64 x 64 chunks of O per consumer
    assert ops.get("UTMASTG.4D") == 2 and ops.get("UTMALDG.4D") == 10  # Q, K, K, V, V: 2 boxes
    assert "LDL" not in str(ops) and "STL" not in str(ops)
    assert ops.get("MUFU.EX2") == 2 * bn // 2 + 2   # the first block's and the loop's P, 2 rescales
    regs = max(int(x) for x in re.findall(r"\bR(\d+)\b", ck.sass))
    assert regs < A.CONSUMER_REGS, regs


# --- sync_check -------------------------------------------------------------------------------------

def _sync(kernel_suite, case):
    sc = pytest.importorskip("tirxh_sync_check")
    sync, race = sc.check_kernel(kernel_suite.kernel, kernel_suite.make_inputs(case, 0),
                                 consts=kernel_suite.consts(case), grid=kernel_suite.grid(case))
    return sc, sync, race


@pytest.mark.slow
@pytest.mark.parametrize("case", [
    # FlashAttention-3's arrive hand-over, one CTA: two tiles of two KV blocks (before
    # `hbquery.bars_ordered` the explorer interleaved the turn barriers' arrivals and passed its
    # 200000 states already at one tile of two blocks; now ~6900 states)
    T.case("s256_arrive_p1", B=1, S=256, H=1, HKV=1, HG=1, CAUSAL=False, SMS=1),
    T.case("s400_causal_arrive_p1", B=1, S=400, H=1, HKV=1, HG=1, CAUSAL=True, SMS=1),
    # no ping-pong: four tiles of 4, 3, 2 and 1 blocks on one CTA
    T.case("s400_causal_nopp_p1", B=1, S=400, H=1, HKV=1, HG=1, CAUSAL=True, SMS=1,
           PINGPONG=False),
], ids=lambda c: c.name)
def test_both_pingpong_protocols_are_sync_clean(case):
    sc, sync, race = _sync(A.SUITE, case)
    findings = sync.findings + race.findings
    assert not findings, "\n".join(sc.format_finding(f) for f in findings)
    assert sync.verdict == race.verdict == "clean"
    if "arrive" in case.name:  # the turn barriers are proven ordered, not interleaved
        assert sync.stats["ordered_bars"] >= 2 and sync.stats["states"] < 50_000


def _mutant(tmp_path, edits):
    src = (ZOO / "attention.py").read_text()
    for pattern, repl in edits:
        src, n = re.subn(pattern, repl, src)
        assert n == 1, f"attention.py no longer has the one {pattern!r} this test edits"
    path = tmp_path / "attention_mut.py"
    path.write_text(src)
    import importlib.util
    spec = importlib.util.spec_from_file_location(f"attention_mut_{tmp_path.name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.SUITE


@pytest.mark.slow
@pytest.mark.parametrize("edits,kind", [
    # the last block waiting for V before the cursor moved past the running P V's stage (a
    # bug this kernel had: numsim's TMA lands at issue, so only the race shows it)
    ([(r"            retire_pv\(\)                      # \(advances the V ring: wait for V "
       r"after it\)\n            wait_full\(sm.v_full, v_ring, \"wait_v\"\)\n",
       "            wait_full(sm.v_full, v_ring, \"wait_v\")\n            retire_pv()\n")],
     "race.read-write"),
    ([(r"T\.ptx\.fence\.proxy\.async_\.shared__cta\(\)", "pass")], "proxy.missing-fence"),
    ([(r"T\.ptx\.cp\.async_\.bulk\.wait_group\.read\(0\)", "pass")], "race.stage-reuse"),
    # the consumers never hand Q back: the producer waits for ever before the second tile
    ([(r"                sm\.q_empty\.arrive\(\)", "                pass")], "deadlock"),
    # consumer 1's last hand-over not taken: it waits at the rendezvous for ever (reported as
    # the barrier whose expected count consumer 0's warps never make up, naming the branch)
    ([(r"            turn_begin\(\)\n    with T\.if_\(leader\):", "            pass\n"
       "    with T.if_(leader):")], "barrier.count-mismatch"),
], ids=["v-wait-before-retire", "no-proxy-fence", "no-read-wait", "q-never-released",
        "no-final-turn"])
def test_synchronization_mutations_are_caught(tmp_path, edits, kind):
    """On the smallest case (one CTA, two tiles of 2 and 1 blocks, rendezvous ping-pong)."""
    s = _mutant(tmp_path, edits)
    case = next(c for c in s.cases if c.name == "s200_causal_sync_p1")
    _, sync, race = _sync(s, case)
    kinds = {f.kind for f in sync.findings + race.findings}
    assert kind in kinds, kinds
