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
    ("                mma(acc[j], alo, bhi)\n", "                pass\n", "t20_h1_deep"),
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


def _chained(gate, lens, H, T_):
    """(this kernel's dv and kda_bwd_local's gradients from its pieces, kda_ref.backward's):
    S0 and dS1 of every chunk from float64 (kda_bwd_chain_pieces.inputs: what the chain's
    two walks compute, rounded to f32), seed 1."""
    BL, R = load("kda_bwd_local"), load("kda_ref")
    import tirxh_numsim as ns  # the numsim plugin distribution (installed with the project)
    x = MOD.inputs(np.random.default_rng(1), 1, T_, H, lens=lens, gate=gate)
    res = ns.run(MOD.kda_bwd_pieces_tc, x, grid=MOD.SUITE.grid(T.case("c", B=1, T_=T_, H=H,
                                                                      lens=lens)),
                 outputs=list(MOD.OUTPUTS))
    assert res.verdict == "clean", res.summary()
    tok, rows = BL._chunk_map(1, T_, lens)
    raw = ("q", "k", "g_raw", "beta", "A_log", "dt_bias")
    loc_in = dict({n: x[n] for n in raw}, chunk_tok=tok, chunk_rows=rows,
                  **{n: res.outputs[n] for n in MOD.OUTPUTS if n != "dv"},
                  **BL._outputs(1, T_, H, len(tok)))
    loc = ns.run(BL.kda_bwd_local, loc_in, grid=BL._grid(1, T_, H, lens), outputs=BL.OUTPUTS)
    assert loc.verdict == "clean", loc.summary()
    BW = load("kda_bwd")
    raw_x = BW.inputs(np.random.default_rng(1), 1, T_, H, lens=lens, gate=gate)
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
                     "pmt_t8192_h96", "pmt_t8192_h64"]
    assert [c.params.get("PREP") for c in MOD.SUITE_TIMING.cases[3:]] == [1, 1, 2, 2]
