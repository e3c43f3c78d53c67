"""zoo/kernels/kda_bwd_pieces_tc.py (piece 2c with its products on tensor cores, split bf16
operands): every small case in numsim against kda_bwd_split.chunk_pieces in float64 (saturated
gates over three chunks with a tail, a varlen pack on 2 heads); the chained check (its outputs
-> kda_bwd_local in numsim -> every final gradient within the public rule of kda_ref.backward);
a dropped lo product and a wrong mask are caught; sync_check clean; resources. PREP=1 (the
prep's P and M as split mma, `_pairs_tc`): its small cases, a dropped lo product, a missing
block factor and M's diagonal masked off are caught, its own sync_check; PREP=2 (T's blocks
too, `_inverse_tc`) the same, with a wrong sign, a missing beta, a dropped lo product and
missing zeros above the diagonal caught."""

import numpy as np
import pytest

import tirxh.lang as T
from tests.zoo._zoo import resident_ctas_per_sm, sync_race
from tests.zoo.zoo_modules import load, load_mutant, matches_within, mismatches, simulate

MOD = load("kda_bwd_pieces_tc")
SLOW = pytest.mark.slow   # numsim of 256 threads: ~345K warp-instructions (~3 s) a chunk
# the final gradients piece 2c feeds (dh0 is the chain's, not this kernel's)
GRADS = ("dq", "dk", "dv", "dg", "dbeta", "dA_log", "ddt_bias")


@pytest.mark.parametrize("case", [pytest.param(c, marks=() if c.name == "t20_h1_deep" else SLOW)
                                  for c in MOD.SUITE.cases if c.small], ids=lambda c: c.name)
def test_small_case_matches_reference(case):
    errors = matches_within(MOD.SUITE, case)
    # split bf16 products, f32 accumulation: <= 7.3e-6 normalized RMS on 2026-12-02 (the
    # f32 kernel 6.7e-7; the rule is 1e-4)
    assert max(errors.values()) < 2e-5, errors


@SLOW
@pytest.mark.parametrize("old,new,name", [
    # the A operand's lo part dropped: every product's A plain bf16
    ("        mma(acc, alo, bhi)\n", "        pass\n", "t20_h1_deep"),
    # dm and dtb's lower mask off by one (the diagonal zeroed)
    ("col + e <= row", "col + e < row", "t20_h1_deep"),
    # PREP=1: M's diagonal masked off (P's strict mask on M)
    ("0.0, col <= row))", "0.0, col < row))", "pm_t20_h1_deep"),
    # PREP=1: the block factor F_ab left off KD's fragment (exact on diagonal blocks only)
    ("_split2(x0 * f[2 * h], x1 * f[2 * h + 1])", "_split2(x0, x1)", "pm_t20_h1_deep"),
    # PREP=1: the B fragment's lo part dropped from P and M (KD F as plain bf16)
    ("                        mma(out, ahi, blo)\n", "                        pass\n",
     "pm_t20_h1_deep"),
    # PREP=2: T's off-diagonal blocks without their sign (U_a = +(...) D_a^T)
    ("ua = [[T.ptx.neg.f32(v) for v in ua[n]] for n in range(2)]", "ua = [list(v) for v in ua]",
     "pmt_t20_h1_deep"),
    # PREP=2: A_am^T without beta (P alone)
    ("                                      T.ptx.ld.shared.f32(sm.beta.at(row)))",
     "                                      None)", "pmt_t20_h1_deep"),
    # PREP=2: the lo x hi product of T's blocks dropped (U plain bf16)
    ("    mma(acc, a[1], b[0])\n", "    pass\n", "pmt_t20_h1_deep"),
    # PREP=2: the zeros above T's diagonal not written (a previous chunk's T there on a GPU;
    # numsim reads its never-written shared memory as zeros and says so: verdict "review")
    ("            T.ptx.st.shared.f32(sm.t.at((a << 4) + (within >> 4), "
     "(b << 4) + (within & 15)),\n                                0.0)", "            pass",
     "pmt_t20_h1_deep"),
], ids=["a_lo", "diagonal", "pm_m_diagonal", "pm_factor", "pm_b_lo", "pmt_sign", "pmt_beta",
        "pmt_lo", "pmt_upper_zeros"])
def test_mutants_are_caught(old, new, name, tmp_path):
    mut = load_mutant("kda_bwd_pieces_tc", old, new, tmp_path)
    case = next(c for c in mut.SUITE.cases if c.name == name)
    res, x = simulate(mut.SUITE, case)
    assert mismatches(mut.SUITE, case, res, x) or res.verdict != "clean"


def _chained(gate, lens, H, T_, TF32=0, unit=False):
    """(this kernel's dv and kda_bwd_local's gradients from its pieces, kda_ref.backward's):
    S0 and dS1 of every chunk from float64 (kda_bwd_chain_pieces.inputs: what the chain's
    two walks compute, rounded to f32), seed 1; `unit`: v and h0 unscaled (c = 1)."""
    BL, R = load("kda_bwd_local"), load("kda_ref")
    import tirxh_numsim as ns  # the numsim plugin distribution (installed with the project)
    x = MOD.inputs(np.random.default_rng(1), 1, T_, H, lens=lens, gate=gate, unit=unit)
    res = ns.run(MOD.kda_bwd_pieces_tc, x, grid=MOD.SUITE.grid(T.case("c", B=1, T_=T_, H=H,
                                                                      lens=lens)),
                 outputs=list(MOD.OUTPUTS),
                 consts=MOD.kda_bwd_pieces_tc.resolve_consts({"TF32": TF32}))
    assert res.verdict == "clean", res.summary()
    tok, rows = BL._chunk_map(1, T_, lens)
    raw = ("q", "k", "g_raw", "beta", "A_log", "dt_bias")
    loc_in = dict({n: x[n] for n in raw}, chunk_tok=tok, chunk_rows=rows,
                  **{n: res.outputs[n] for n in MOD.OUTPUTS if n != "dv"},
                  **BL._outputs(1, T_, H, len(tok)))
    loc = ns.run(BL.kda_bwd_local, loc_in, grid=BL._grid(1, T_, H, lens), outputs=BL.OUTPUTS)
    assert loc.verdict == "clean", loc.summary()
    BW = load("kda_bwd")
    raw_x = (MOD.unit_inputs if unit else BW.inputs)(np.random.default_rng(1), 1, T_, H,
                                                     lens=lens, gate=gate)
    ref = R.backward(*(raw_x[n] for n in ("q", "k", "v", "g_raw", "beta", "A_log",
                                          "dt_bias", "h0", "do", "dht")),
                     cu_seqlens=raw_x["cu_seqlens"] if lens else None, method="recurrent")
    return dict(loc.outputs, dv=res.outputs["dv"]), ref


@SLOW
@pytest.mark.parametrize("gate,lens,H,T_", [("deep", None, 1, 150),
                                            ("mixed", (80, 1, 30), 2, 111)],
                         ids=["t150_deep", "pack_80_1_30_h2"])
def test_pieces_chain_to_the_public_rule(gate, lens, H, T_):
    """Every final gradient this kernel feeds within atol = rtol = 0.01 of kda_ref.backward
    (kda_bwd.TOLERANCE), with room: the worst |error| / (0.01 + 0.01 |ref|) was 0.142 (dbeta,
    deep gates) and 0.065 (dg, the pack) on 2026-12-02, against 0.025 with the f32 pieces
    (kda_bwd_chain's chained check): the split products' ~2^-16 per operand shows in dbeta's
    sums, 7x inside the rule."""
    BW = load("kda_bwd")
    got, ref = _chained(gate, lens, H, T_)
    for n in GRADS:
        rep = BW.TOLERANCE.compare(np.asarray(got[n], np.float32), ref[n].astype(np.float32))
        assert rep["ok"], (n, rep)
        worst = np.max(np.abs(np.asarray(got[n], np.float64) - ref[n])
                       / (0.01 + 0.01 * np.abs(ref[n])))
        assert worst < 0.25, (n, worst)


@SLOW
@pytest.mark.parametrize("name", ["t20_h1_deep", "pm_t20_h1_deep", "pmt_t20_h1_deep"])
def test_sync_check_is_clean(name):
    """One chunk of 20 rows: the reused prep phases (PREP=1: P and M as mma over the KL, KD, QL
    tiles, stored into the P and M tiles between barriers; PREP=2: T's diagonal blocks and
    zeros, a barrier, then each column of blocks by its own warp), the products' tiles written
    between barriers (R into G, Delta and dDelta into P, dR into R)."""
    case = next(c for c in MOD.SUITE.cases if c.name == name)
    for result in sync_race(MOD.SUITE, case):
        assert result.verdict == "clean", [f.message for f in result.findings]


def test_compiles_without_spills():
    """ptxas on this machine (2026-12-02): 150 registers, no spills; kda_bwd_reverse's 227 KB
    of shared memory: one CTA of 256 threads an SM. PREP=1 and 2: 255 registers, no spills
    (ptxas takes the whole file once P and M leave the f32 loop: with the f32 inverse removed
    from PREP=1 it is 150 again; 256 threads x 255 fit the SM's 64K, and the shared memory
    allows one CTA anyway)."""
    r = MOD.kda_bwd_pieces_tc.compile("sm_90a").resources
    assert r.spill_stores == 0 and r.registers <= 168, r
    for prep in (1, 2):
        r = MOD.kda_bwd_pieces_tc.compile("sm_90a", PREP=prep).resources
        assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_frame == 0, (prep, r)
    assert resident_ctas_per_sm(MOD.SUITE, MOD.SUITE.cases[0]) == 1
    pm = next(c for c in MOD.SUITE.cases if c.name == "pm_t20_h1_deep")
    assert resident_ctas_per_sm(MOD.SUITE, pm) == 1


def test_same_interface_as_the_f32_kernel():
    """The plan swaps it for kda_bwd_chain_pieces: same parameters in the same order."""
    PC = load("kda_bwd_chain_pieces")
    names = [p.name for p in MOD.kda_bwd_pieces_tc.runtime_params]
    assert names == [p.name for p in PC.kda_bwd_chain_pieces.runtime_params]
    assert MOD.OUTPUTS == PC.OUTPUTS and MOD.SUITE_TIMING.reference is None
    # 3 mma a multiply-add, 2 where dO is an operand: 2 x (3 (4 C K V + 3 C C V) + 2 (C K V
    # + 2 C C V)) per chunk and head
    ckv, ccv = 64 * 128 * 128, 64 * 64 * 128
    assert MOD._flops(1, 8192, 96) == 2 * (3 * (4 * ckv + 3 * ccv) + 2 * (ckv + 2 * ccv)) * 12288
    # PREP=1 adds P and M: 3 mma, 2 products over 10 of 16 [16, 16] blocks, K deep; PREP=2
    # T's: 16 [16, 16, 16] products (10 A_am T_mb, 6 by D_a)
    pm = 2 * 3 * 2 * 10 * 16 * 16 * 128 * 12288
    assert MOD._flops(1, 8192, 96, PREP=1) - MOD._flops(1, 8192, 96) == pm
    assert MOD._flops(1, 8192, 96, PREP=2) - MOD._flops(1, 8192, 96, PREP=1) == (
        2 * 3 * 16 * 16 ** 3 * 12288)
    with pytest.raises(ValueError, match=r"PREP=3 must be 0 \(the f32 prep\), 1 .* or 2"):
        T.suite(MOD.kda_bwd_pieces_tc, inputs=MOD.inputs, reference=MOD.reference,
                outputs=["dv"], constraints=MOD.constraints,
                cases=[T.case("bad", B=1, T_=10, H=1, PREP=3)])


def test_timing_cases_pair_each_t8192_shape_with_its_prep_twins():
    """`kda_bench.sh tc2` times PREP=0, 1 and 2 of a shape in one job: all are cases."""
    names = [c.name for c in MOD.SUITE_TIMING.cases]
    assert names == ["t8192_h96", "t8192_h64", "pack6_h96", "pm_t8192_h96", "pm_t8192_h64",
                     "pmt_t8192_h96", "pmt_t8192_h64", "tfpmt_t8192_h96", "tfpmt_t8192_h64"]
    assert [c.params.get("PREP") for c in MOD.SUITE_TIMING.cases[3:]] == [1, 1, 2, 2, 2, 2]


# --- TF32=1: single-pass tf32 products (session 12, branch kdatf32) -----------------------------

def _worst(got, ref):
    """{gradient: worst |error| / (0.01 + 0.01 |ref|)} (1 = the public rule's edge)."""
    return {n: float(np.max(np.abs(np.asarray(got[n], np.float64) - ref[n])
                            / (0.01 + 0.01 * np.abs(ref[n])))) for n in GRADS}


def test_tf32_off_leaves_the_kernel_unchanged(tmp_path):
    """TF32=0 (the default) emits the PTX of the kernel as it was before TF32 existed (commit
    BASE, the branch point), comments and line records aside; TF32=1 has no bf16 mma left in
    the products (PREP=0: none at all), rounds every operand to nearest and does not spill.
    Update BASE when the TF32=0 code is changed on purpose."""
    import subprocess
    from pathlib import Path
    base, rel = "ecb3300", "zoo/kernels/kda_bwd_pieces_tc.py"
    root = Path(__file__).resolve().parents[2]
    old = subprocess.run(["git", "show", f"{base}:{rel}"], cwd=root, capture_output=True,
                         text=True)
    if old.returncode:
        pytest.skip(f"git show {base}: {old.stderr.strip()} (not a full clone)")
    path = tmp_path / "kda_bwd_pieces_tc_base.py"
    path.write_text(old.stdout)
    import importlib.util
    spec = importlib.util.spec_from_file_location("zoo_base_kda_bwd_pieces_tc", path)
    was = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(was)

    def body(ptx):
        return [ln for ln in ptx.splitlines()
                if not ln.lstrip().startswith(("//", ".file", ".loc"))]
    now = body(MOD.kda_bwd_pieces_tc.compile("sm_90a", PREP=2).ptx)
    assert now == body(was.kda_bwd_pieces_tc.compile("sm_90a", PREP=2).ptx)
    tf = MOD.kda_bwd_pieces_tc.compile("sm_90a", TF32=1).ptx
    assert "m16n8k16" not in tf and tf.count("m16n8k8.row.col.f32.tf32.tf32.f32") > 0
    assert tf.count("cvt.rna.tf32.f32") > 0
    # ptxas (2026-12-03): TF32=1 143 registers at PREP=0 (the split 150), 255 at PREP=2 (as
    # the split), no spills
    for prep in (0, 2):
        r = MOD.kda_bwd_pieces_tc.compile("sm_90a", PREP=prep, TF32=1).resources
        assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_frame == 0, (prep, r)


def test_tf32_small_case_matches_reference():
    """One 20-row chunk at unit scale: every piece within TOLERANCE_TF32, normalized RMS <=
    4.9e-4 on 2026-12-03 (tf32's 2^-11 per operand; the split's 7.3e-6)."""
    case = MOD.SUITE_TF32.cases[0]
    errors = matches_within(MOD.SUITE_TF32, case)
    assert max(errors.values()) < 1e-3, errors


@SLOW
def test_tf32_dropping_half_of_each_k_step_is_caught(tmp_path):
    mut = load_mutant("kda_bwd_pieces_tc", "for h in (0, 8):", "for h in (0,):", tmp_path)
    case = mut.SUITE_TF32.cases[0]
    res, x = simulate(mut.SUITE_TF32, case)
    assert mismatches(mut.SUITE_TF32, case, res, x)


@SLOW
@pytest.mark.parametrize("gate,lens,H,T_,limit", [("deep", None, 1, 150, 0.6),
                                                  ("mixed", (80, 1, 30), 2, 111, 0.6)],
                         ids=["t150_deep", "pack_80_1_30_h2"])
def test_tf32_chains_to_the_public_rule_at_unit_scale(gate, lens, H, T_, limit):
    """TF32=1 at c = 1 (v, h0 ~ N(0, 1)): every final gradient within atol = rtol = 0.01 of
    kda_ref.backward. Worst |error| / (0.01 + 0.01 |ref|) on 2026-12-03: 0.44 (dbeta, three
    saturated chunks; kdaprec's emulation 0.63) and 0.28 (dbeta, the pack), against 0.0099
    with the split at the same scale (docs/PERFORMANCE.md "Session 12, branch kdatf32")."""
    BW = load("kda_bwd")
    got, ref = _chained(gate, lens, H, T_, TF32=1, unit=True)
    for n in GRADS:
        rep = BW.TOLERANCE.compare(np.asarray(got[n], np.float32), ref[n].astype(np.float32))
        assert rep["ok"], (n, rep)
    worst = _worst(got, ref)
    assert max(worst.values()) < limit, worst


@SLOW
def test_tf32_is_not_enough_at_the_suites_scale():
    """The same three saturated chunks at kda_bwd's scale (v, h0 x c = 32-128): TF32=1 misses
    the public rule: dbeta 4.7x and dk 2.4x the allowance on 2026-12-03 (kdaprec's emulation
    9.7x and 2.0x), where the split keeps 0.14 (`test_pieces_chain_to_the_public_rule`)."""
    got, ref = _chained("deep", None, 1, 150, TF32=1, unit=False)
    worst = _worst(got, ref)
    assert worst["dbeta"] > 2 and worst["dk"] > 1, worst


@SLOW
def test_tf32_sync_check_is_clean():
    """TF32=1 changes only the products' registers (the same tiles, the same barriers)."""
    for result in sync_race(MOD.SUITE_TF32, MOD.SUITE_TF32.cases[0]):
        assert result.verdict == "clean", [f.message for f in result.findings]


def test_tf32_constant_flops_and_timing_twins():
    """TF32 takes 0 or 1; its FLOPs count the nine products once at twice bf16's weight (tf32
    mma at half the rate); the T8192 PREP=2 shapes have a TF32=1 twin (tfpmt_) for tc2."""
    ckv, ccv = 64 * 128 * 128, 64 * 64 * 128
    pm2 = MOD._flops(1, 8192, 96, PREP=2) - MOD._flops(1, 8192, 96)
    assert MOD._flops(1, 8192, 96, PREP=2, TF32=1) == 2 * 2 * (5 * ckv + 5 * ccv) * 12288 + pm2
    with pytest.raises(ValueError, match=r"TF32=2 must be 0 \(split bf16 products\) or 1"):
        T.suite(MOD.kda_bwd_pieces_tc, inputs=MOD.inputs, reference=MOD.reference,
                outputs=["dv"], constraints=MOD.constraints,
                cases=[T.case("bad", B=1, T_=10, H=1, TF32=2)])
    tf = [c for c in MOD.SUITE_TIMING.cases if c.name.startswith("tf")]
    assert [(c.name, c.params["PREP"], c.params["TF32"]) for c in tf] == [
        ("tfpmt_t8192_h96", 2, 1), ("tfpmt_t8192_h64", 2, 1)]
    x = MOD.inputs(np.random.default_rng(3), 1, 20, 1, gate="deep", unit=True)
    y = MOD.inputs(np.random.default_rng(3), 1, 20, 1, gate="deep")
    ratio = np.asarray(y["v"], np.float64) / np.asarray(x["v"], np.float64)
    c = ratio[np.isfinite(ratio)]
    # one power of two (16 here), the other inputs the same draws
    assert np.all(c == c[0]) and c[0] > 1 and np.log2(c[0]) % 1 == 0
    assert np.array_equal(x["q"], y["q"]) and np.array_equal(x["do"], y["do"])
