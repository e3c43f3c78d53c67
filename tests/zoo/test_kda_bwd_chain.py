"""zoo/kernels/kda_bwd_chain.py (the serial part of piece 2 on tensor cores, and with FORWARD
piece 1's S0): every small case in numsim against kda_bwd_split.chain in float64 (saturated
gates over three chunks with a tail, tails, a varlen pack on 2 heads, 1-8 warps, both walks);
the dropped lo products, the dropped decay and a forward walk run backwards are caught;
sync_check clean; the fragment layout round-trips; refused shapes; resources; and the chain:
chain kernel (both walks) -> kda_bwd_split.chunk_pieces -> kda_bwd_local (numsim) within the
public rule of kda_ref.backward."""

import numpy as np
import pytest

import tirxh.lang as T
from tests.zoo._zoo import sync_race
from tests.zoo.zoo_modules import load, load_mutant, matches_within, mismatches, simulate

MOD = load("kda_bwd_chain")
SLOW = pytest.mark.slow


@pytest.mark.parametrize("case", [c for c in MOD.SUITE.cases if c.small], ids=lambda c: c.name)
def test_small_case_matches_reference(case):
    errors = matches_within(MOD.SUITE, case)
    # the split state and f32 sums: <= 3.2e-6 normalized RMS on 2026-12-02 (the rule is 1e-5)
    assert max(errors.values()) < 5e-6, errors


@pytest.mark.parametrize("old,new", [
    # the state's lo part: dS^T rounded to plain bf16 for the product
    ("            mma(st[j], alo[s], hi)\n", ""),
    # N's lo part
    ("            mma(st[j], ahi[s], lo)\n", ""),
    # dS <- Diag(exp(G_C)) dS + ...: the decay of the carried state dropped
    ("T.ptx.fma.rn.f32(st[j][e], st[j][e], e2[e & 1], add)",
     "T.ptx.add.f32(st[j][e], st[j][e], add)"),
    # the forward walk run from the last chunk
    ("c = cbase + (i if FORWARD else nch - 1 - i)", "c = cbase + (nch - 1 - i)"),
], ids=["state_lo", "operand_lo", "decay", "walk_direction"])
def test_mutants_are_caught(old, new, tmp_path):
    mut = load_mutant("kda_bwd_chain", old, new, tmp_path)
    case = T.case("three_chunks", B=1, T_=150, H=1, gate="deep", FORWARD=1)
    res, inputs = simulate(mut.SUITE, case)
    assert mismatches(mut.SUITE, case, res, inputs)


@pytest.mark.parametrize("params", [dict(T_=66, WARPS=2), dict(T_=150, WARPS=2, STAGED=1),
                                    dict(T_=150, WARPS=2, STAGED=1, FRAGS=1)],
                         ids=["global", "staged", "staged_frags"])
def test_sync_check_is_clean(params):
    """Global: two chunks (64 + 2 rows), two warps, no shared memory and no barrier, each
    warp reads the operands and writes its own value rows of xs and xn. Staged: three chunks
    through the two-stage ring (the third reuses stage 0 after the `empty` wait)."""
    case = T.case("sync", B=1, H=1, gate="deep", **params)
    for result in sync_race(MOD.SUITE, case):
        assert result.verdict == "clean", [f.message for f in result.findings]


@SLOW
@pytest.mark.parametrize("old,new,match", [
    # thread 0 refills the stage before chunk i - 1's readers are done with it
    ("                empty[nxt].wait(((i - 1) >> 1) & 1)\n", "                pass\n",
     "conflict on shared sN"),
    # the warps read the stage before its bulk copy completed
    ("        full[ring.stage].wait(ring.phase)\n", "", "conflict on shared sN"),
], ids=["no_empty_wait", "no_full_wait"])
def test_sync_check_catches_the_ring_without_its_waits(old, new, match, tmp_path):
    mut = load_mutant("kda_bwd_chain", old, new, tmp_path)
    case = T.case("sync", B=1, T_=150, H=1, gate="deep", WARPS=2, STAGED=1)
    found = [f.message for r in sync_race(mut.SUITE, case) for f in r.findings]
    assert any(match in m for m in found), found


def test_fragments_round_trip_and_carry_the_split():
    rng = np.random.default_rng(0)
    N = rng.standard_normal((2, 128, 128)) * np.exp(rng.uniform(-8, 2, (2, 128, 128)))
    frag = MOD.fragments(N)
    assert frag.shape == (2, 8, 16, 32, 4) and frag.dtype == np.uint32
    back = MOD.unsplit(frag)
    hi, lo = MOD.bf16_split(N)
    np.testing.assert_array_equal(back, hi.astype(np.float64) + lo.astype(np.float64))
    # hi + lo carries ~16 bits: far closer than bf16 alone
    rel = np.abs(back - N) / np.abs(N)
    assert rel.max() < 2 ** -15 and (np.abs(hi.astype(np.float64) - N) / np.abs(N)).max() > 2 ** -9
    # lane (g, t) = (1, 2) of k-step 1, n-tile 3: b0 = N[8*3 + 1, 16 + 4 .. 5] (hi, low half)
    word = int(frag[0, 1, 3, 1 * 4 + 2, 0])
    first = np.array([word & 0xFFFF], np.uint16).view(hi.dtype)[0]
    assert first == hi[0, 25, 20]


def test_inputs_layout():
    x = MOD.inputs(np.random.default_rng(0), B=1, T_=111, H=2, lens=(80, 1, 30))
    assert list(x["chunk_off"]) == [0, 2, 3, 4] and list(x["cu_seqlens"]) == [0, 80, 81, 111]
    assert x["nfrag"].shape == (4, 2, 8, 16, 32, 4) and x["bt"].shape == (4, 2, 128, 128)
    assert x["eg"].shape == (4, 2, 128) and x["xs"].shape == (4, 2, 128, 128)
    assert x["xn"].shape == (3, 2, 128, 128) and x["x0"].shape == (3, 2, 128, 128)
    # the one-token sequence's B is that token's alone: rank one in the value rows
    sv = np.linalg.svd(x["bt"][2, 0].astype(np.float64), compute_uv=False)
    assert sv[1] < 1e-5 * sv[0], sv[:3]
    t = MOD.timing_inputs(np.random.default_rng(0), 1, 200, 2, lens=(150, 50))
    assert t["nfrag"].shape == (4, 2, 8, 16, 32, 4) and list(t["order"]) == [0, 1]
    assert all(not c.small for c in MOD.SUITE_TIMING.cases) and MOD.SUITE_TIMING.reference is None


@pytest.mark.parametrize("params,match", [
    (dict(B=1, T_=1 << 20, H=96), r"nfrag and xs \(16384 chunks x H x 64 KB\)"),
    (dict(B=2, T_=10, H=1, lens=(4, 6)), r"a varlen pack is one row \(B=1\)"),
    (dict(B=1, T_=10, H=1, WARPS=3), r"WARPS=3 must be 1, 2, 4 or 8"),
    (dict(B=1, T_=10, H=1, FORWARD=2), r"FORWARD=2 must be 0"),
    (dict(B=1, T_=10, H=1, STAGED=2), r"STAGED=2 must be 0"),
])
def test_refused_shapes_name_the_case_and_the_rule(params, match):
    with pytest.raises(ValueError, match=r"case 'bad': .*" + match):
        T.suite(MOD.kda_bwd_chain, inputs=MOD.inputs, reference=MOD.reference,
                outputs=["xs"], constraints=MOD.constraints, cases=[T.case("bad", **params)])


def test_compiles_without_shared_memory():
    """ptxas on this machine: 255 registers and no shared memory, so the register file decides
    residency: 8 warps an SM. 112 bytes spilled (2026-12-02: ~12 ``STL.64``/``LDL.64`` pairs
    a chunk beside 384 HMMA, ptxas hoisting N's fragment loads; 24 bytes when every state
    store computed its own address, at 512 more address instructions a chunk)."""
    ck = MOD.kda_bwd_chain.compile("sm_90a", WARPS=2)
    r = ck.resources
    assert r.registers <= 255 and r.spill_stores <= 128, r
    assert r.smem_static == 0 and int(ck.launch_metadata()["dynamic_smem"]) == 0


def test_staged_compiles_to_one_cta_of_8_warps_an_sm():
    """STAGED=1, WARPS=8: 242 registers, no spills (2026-12-02), 128 KB of ring and its
    mbarriers: one CTA (a whole head) an SM."""
    ck = MOD.kda_bwd_chain.compile("sm_90a", WARPS=8, STAGED=1)
    r = ck.resources
    assert r.registers <= 255 and r.spill_stores == 0, r
    smem = r.smem_static + int(ck.launch_metadata()["dynamic_smem"])
    assert 128 * 1024 < smem <= 129 * 1024 and 256 * r.registers <= 65536, (smem, r)


def _numsim(kernel, arrays, grid, outputs, consts=None):
    import tirxh_numsim as ns  # the numsim plugin distribution (installed with the project)
    res = ns.run(kernel, arrays, grid=grid, outputs=list(outputs), consts=consts or {})
    assert res.verdict == "clean", res.summary()
    return res.outputs


GRADS = ("dq", "dk", "dv", "dg", "dbeta", "dh0", "dA_log", "ddt_bias")


def _pieces(x, lens, H, s0, ds1):
    """kda_bwd_split.chunk_pieces of every sequence from S0 and dS1 ([chunks, H, ...]): the
    PIECES ([chunks, H, ...] f32) and dv ([B, T, H, V])."""
    R, SP = MOD.R, MOD.SP
    T_ = x["q"].shape[1]
    pieces = {n: [] for n in SP.PIECES}
    dv = np.zeros(x["v"].shape)
    for n, (b, t0, t1) in enumerate(R.spans(1, T_, x["cu_seqlens"] if lens else None)):
        c0, c1 = int(x["chunk_off"][n]), int(x["chunk_off"][n + 1])
        qn, kn, gn, bn = R._prepare(x["q"], x["k"], x["g_raw"], x["beta"], x["A_log"],
                                    x["dt_bias"], b, t0, t1)
        seq = [np.moveaxis(np.asarray(a[c0:c1], np.float64), 0, 1) for a in (s0, ds1)]
        out = SP.chunk_pieces(qn, kn, np.asarray(x["v"][b, t0:t1], np.float64), gn, bn, seq[0],
                              MOD.SCALE, np.asarray(x["do"][b, t0:t1], np.float64), seq[1])
        for m in SP.PIECES:
            pieces[m].append(np.moveaxis(out[m], 0, 1))
        dv[b, t0:t1] = np.moveaxis(out["dv"], 0, 2).reshape(-1, H, 128)[:t1 - t0]
    return {m: np.concatenate(v).astype(np.float32) for m, v in pieces.items()}, dv


def _chained(gate, lens, H, kernels=False):
    """(the final gradients of the chained pieces, kda_ref.backward's): S0 of every chunk by
    the kernel's forward walk and dS1 by its reverse walk (numsim, operands from float64
    chain_operands / state_operands), then kda_bwd_split.chunk_pieces (float64) and
    kda_bwd_local (numsim). With `kernels` both walks' operands come from kda_bwd_chain_prep
    and dv and the pieces from kda_bwd_chain_pieces (numsim both)."""
    BW, BL, R, SP = load("kda_bwd"), load("kda_bwd_local"), MOD.R, MOD.SP
    T_ = 150 if lens is None else sum(lens)
    x = BW.inputs(np.random.default_rng(1), 1, T_, H, lens=lens, gate=gate)
    grid = MOD._grid(1, T_, H, lens, WARPS=4)
    walks = {}
    for forward in (1, 0):
        ins = MOD.chain_inputs(x, lens, FORWARD=forward)
        if kernels:
            PR = load("kda_bwd_chain_prep")
            ins.update(_numsim(PR.kda_bwd_chain_prep, PR.prep_inputs(x, lens, forward),
                               PR._grid(1, T_, H, lens), PR.OUTPUTS, dict(FORWARD=forward)))
        walks[forward] = _numsim(MOD.kda_bwd_chain, ins, grid, MOD.OUTPUTS,
                                 dict(WARPS=4, FORWARD=forward))
    fwd, rev = walks[1], walks[0]
    if kernels:
        PC = load("kda_bwd_chain_pieces")
        got = _numsim(PC.kda_bwd_chain_pieces, PC.pieces_inputs(x, fwd["xs"], rev["xs"], lens),
                      PC._grid(1, T_, H, lens), PC.OUTPUTS)
        pieces, dv = {m: got[m] for m in SP.PIECES}, got["dv"]
    else:
        pieces, dv = _pieces(x, lens, H, fwd["xs"], rev["xs"])
    tok, rows = BL._chunk_map(1, T_, lens)
    raw = ("q", "k", "g_raw", "beta", "A_log", "dt_bias")
    loc_in = dict({n: x[n] for n in raw}, chunk_tok=tok, chunk_rows=rows, **pieces,
                  **BL._outputs(1, T_, H, len(tok)))
    loc = _numsim(BL.kda_bwd_local, loc_in, BL._grid(1, T_, H, lens), BL.OUTPUTS)
    ref = R.backward(x["q"], x["k"], x["v"], x["g_raw"], x["beta"], x["A_log"], x["dt_bias"],
                     x["h0"], x["do"], x["dht"], cu_seqlens=x["cu_seqlens"] if lens else None,
                     method="recurrent")
    return dict(loc, dv=dv, dh0=rev["xn"]), ref


@SLOW
@pytest.mark.parametrize("gate,lens,H,kernels", [("deep", None, 1, False),
                                                 ("mixed", (80, 1, 30), 2, False),
                                                 ("deep", None, 1, True)],
                         ids=["t150_deep", "pack_80_1_30_h2", "t150_deep_kernels"])
def test_the_chunked_backward_chains_to_the_public_rule(gate, lens, H, kernels):
    """Every final gradient of `_chained` within the public rule (atol = rtol = 0.01) of
    kda_ref.backward: worst 0.025 of the allowance (dbeta of the deep case, dg of the pack) on
    2026-12-02.
    Unlike kda_fwd_s0's bf16 S0 (dq, dk, dbeta up to 6.2x the allowance on the deep case:
    test_kda_bwd_reverse.py), the chain's hi + lo S0 passes. With `kernels`: prep (both walks)
    -> chain (both walks) -> pieces -> local, every step a kernel in numsim."""
    BW = load("kda_bwd")
    got, ref = _chained(gate, lens, H, kernels)
    for n in GRADS:
        rep = BW.TOLERANCE.compare(np.asarray(got[n], np.float32), ref[n].astype(np.float32))
        assert rep["ok"], (n, rep)


@pytest.mark.parametrize("params", [dict(WARPS=2, FORWARD=1), dict(WARPS=8, STAGED=1)],
                         ids=["global_forward", "staged_reverse"])
def test_split_fragments_are_the_f32_states_split(params):
    """FRAGS=1 (plan "tc13"): xs holds each chunk's state as the split A fragments the chain
    multiplies by, which are `state_fragments` of the f32 state FRAGS=0 stores, word for word
    (three chunks under saturated gates); the final state is unchanged."""
    out = {}
    for frags in (0, 1):
        case = T.case("three_chunks", B=1, T_=150, H=1, gate="deep", FRAGS=frags, **params)
        res, _ = simulate(MOD.SUITE, case)
        assert res.verdict == "clean", res.summary()
        out[frags] = res.outputs
    want = MOD.state_fragments(out[0]["xs"])
    assert np.array_equal(np.asarray(out[1]["xs"]).view(np.uint32).reshape(want.shape), want)
    assert np.array_equal(out[1]["xn"], out[0]["xn"])


def test_state_fragments_round_trip():
    rng = np.random.default_rng(1)
    S = (rng.standard_normal((2, 3, 128, 128)) * np.exp(rng.uniform(-8, 2, (2, 3, 128, 128))))
    frag = MOD.state_fragments(S)
    assert frag.shape == (2, 3, 8, 8, 2, 32, 4) and frag.dtype == np.uint32
    assert frag.nbytes == S.astype(np.float32).nbytes       # the f32 state's bytes
    hi, lo = MOD.bf16_split(S)
    np.testing.assert_array_equal(MOD.unsplit_state(frag),
                                  hi.astype(np.float64) + lo.astype(np.float64))
    # one element's place: the lo part's word 3 (A register a3: rows g + 8, channels 2t + 8)
    # holds S[16 s + 2t + 9, 16 vb + g + 8] in its high half
    s_, t, vb, g = 3, 2, 5, 6
    word = frag[1, 2, vb, s_, 1, 4 * g + t, 3]
    bits = np.uint16(word >> 16)
    assert bits == lo[1, 2, 16 * s_ + 2 * t + 9, 16 * vb + g + 8].view(np.uint16)


@pytest.mark.parametrize("forward", [1, 0], ids=["forward", "reverse"])
def test_a_head_split_over_two_ctas_changes_no_word(forward):
    """kda_fwd_bwd plan "tc42" runs a head's chain as two CTAs of four warps (`SPLIT_HEADS`):
    staged, FRAGS=1, three chunks under saturated gates, both walks: WARPS=4's xs and xn are
    WARPS=8's word for word (each warp's 16 value columns are computed alike either way)."""
    out = {}
    for warps in (8, 4):
        case = T.case("three_chunks", B=1, T_=150, H=1, gate="deep", FRAGS=1, STAGED=1,
                      WARPS=warps, FORWARD=forward)
        res, _ = simulate(MOD.SUITE, case)
        assert res.verdict == "clean", res.summary()
        out[warps] = res.outputs
    for name in ("xs", "xn"):
        assert np.array_equal(np.asarray(out[4][name]).view(np.uint32),
                              np.asarray(out[8][name]).view(np.uint32)), name
