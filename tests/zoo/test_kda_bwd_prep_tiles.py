"""zoo/kernels/kda_bwd_prep_tiles.py (the prep's tiles stored once by kda_bwd_prep3s and loaded
by kda_bwd_pieces_ld, plan "tc4", and T alone by kda_bwd_local_ld, plan "tc5"): the store
variant's walks are prep3's bit for bit; the pieces from the loaded tiles are
kda_bwd_pieces_tc's (PREP=2) bit for bit, on one chunk and on a varlen pack of two heads; piece
3 from the stored T meets the public rule within rounding of its own inverse; tiles loaded for
the wrong chunk are caught; sync_check is clean on the three kernels. Plan "tc8"'s image layout
(prep3g IMG=1, pieces_ld BULK=1: three bulk copies) sits where the prep's shared memory holds
the tiles, gives the same pieces bit for bit, is clean, and its mbarrier wait load-bearing."""

import numpy as np
import pytest

from tests.zoo._zoo import mutant, run_clean
from tests.zoo.zoo_modules import assert_matches, load

P3 = load("kda_bwd_prep3")
CH = load("kda_bwd_chain")
TC = load("kda_bwd_pieces_tc")
PTL = load("kda_bwd_prep_tiles")
LT = load("kda_bwd_local_tc")
SLOW = pytest.mark.slow   # numsim of 256 threads: a few s a chunk and kernel


def _pieces_case(name):
    return next(c for c in TC.SUITE.cases if c.name == name)


def _run(kernel, x, case, outputs, consts):
    return run_clean(kernel, x, TC.SUITE.grid(case), outputs, consts)


def _raw(x):
    """The prep's inputs among a case's arrays."""
    return {n: x[n] for n in ("q", "k", "g_raw", "v", "beta", "A_log", "dt_bias", "do",
                              "chunk_tok", "chunk_rows")}


def _stored(case):
    """kda_bwd_prep3s and kda_bwd_prep3 on the pieces case's raw inputs: (prep3s's outputs,
    prep3's outputs, the pieces' inputs)."""
    x = TC.SUITE.make_inputs(case, 0)
    chunks, H = x["s0"].shape[:2]
    walks = P3.P2._outputs(H, chunks)
    raw = _raw(x)
    got = _run(P3.kda_bwd_prep3s, dict(raw, **walks, **PTL.outputs(H, chunks)), case,
               list(P3.OUTPUTS) + ["ptile"], {"PREP": 2})
    want = _run(P3.kda_bwd_prep3, dict(raw, **P3.P2._outputs(H, chunks)), case,
                list(P3.OUTPUTS), {"PREP": 2})
    return got, want, x


def _pieces_args(tiles, x):
    """kda_bwd_pieces_ld's arguments: the stored tiles, the case's v, dO, S0, dS1."""
    args = {n: x[n] for n in ("v", "do", "chunk_tok", "chunk_rows", "s0", "ds1")}
    args.update({n: np.zeros_like(x[n]) for n in TC.OUTPUTS}, ptile=tiles)
    return args


def _split_args(tiles, x):
    """`_pieces_args` with S0 and dS1 as the chains' split fragments (FRAGS=1), in their
    f32 buffers' bytes."""
    args = _pieces_args(tiles, x)
    for n in ("s0", "ds1"):
        args[n] = CH.state_fragments(x[n]).view(np.float32).reshape(x[n].shape)
    return args


def _pieces_from(tiles, x, case, kernel=None):
    """kda_bwd_pieces_ld (or `kernel`) on `_pieces_args`."""
    return _run(kernel or TC.kda_bwd_pieces_ld, _pieces_args(tiles, x), case, list(TC.OUTPUTS),
                {})


def _pieces_tc(x, case):
    y = {n: (np.zeros_like(a) if n in TC.OUTPUTS else a) for n, a in x.items()}
    return _run(TC.kda_bwd_pieces_tc, y, case, list(TC.OUTPUTS), {"PREP": 2})


def test_the_layout_holds_what_the_pieces_read():
    assert (PTL.KE0, PTL.KL0, PTL.M0, PTL.T0, PTL.BETA0, PTL.EG0) == (
        0, 8192, 16384, 20480, 24576, 24640)
    assert PTL.WORDS == 24768 and PTL.outputs(2, 3)["ptile"].shape == (3, 2, PTL.WORDS)


def test_the_image_layout_is_the_preps_shared_memory():
    """Plan "tc8"'s image: KE and KL as their [C, K + 1] tiles back to back, M and T, beta and
    exp(G_C), each range where kda_bwd_reverse's shared memory (the prep's and the pieces')
    holds it, so each moves as one bulk copy."""
    tile, mat = 64 * 129, 64 * 64
    assert (PTL.IKE0, PTL.IKL0, PTL.IM0, PTL.IT0, PTL.IBETA0, PTL.IEG0, PTL.IWORDS) == (
        0, tile, 2 * tile, 2 * tile + mat, 2 * tile + 2 * mat, 2 * tile + 2 * mat + 64,
        2 * tile + 2 * mat + 192)
    assert PTL.IWORDS * 4 % 16 == 0 and PTL.image_outputs(2, 3)["pimg"].shape == (3, 2,
                                                                                  PTL.IWORDS)
    for kernel, consts in ((TC.kda_bwd_pieces_ld, {"BULK": 1}),
                           (P3.kda_bwd_prep3g, {"PREP": 2, "IMG": 1})):
        at = {v.name: v.offset for v in kernel.specialize(**consts).shared}
        assert at["sTile1"] == at["sTile0"] + tile * 4, kernel.name
        assert at["sT"] == at["sM"] + mat * 4 and at["sEg"] == at["sBeta"] + 64 * 4, kernel.name
        assert all(at[n] % 16 == 0 for n in ("sTile0", "sM", "sBeta")), kernel.name


def _stored_image(case, x):
    """kda_bwd_prep3g's `ptile` in the image layout (IMG=1) on the case's raw inputs."""
    chunks, H = x["s0"].shape[:2]
    args = dict(_raw(x), **P3.P2._outputs(H, chunks), ptile=PTL.image_outputs(H, chunks)["pimg"],
                **PTL.gate_outputs(H, chunks))
    return _run(P3.kda_bwd_prep3g, args, case, ["ptile"], {"PREP": 2, "IMG": 1})["ptile"]


@SLOW
@pytest.mark.parametrize("name", ["t20_h1_deep", "pack_80_1_30_h2"])
def test_pieces_from_the_image_by_bulk_copies_are_bit_identical(name):
    """kda_bwd_pieces_ld BULK=1 on prep3g's image: the same words in the same tiles, so every
    output equals the dense layout's thread loads to the last bit."""
    case = _pieces_case(name)
    got, _, x = _stored(case)
    image = _stored_image(case, x)
    bulk = _run(TC.kda_bwd_pieces_ld, _pieces_args(image, x), case, list(TC.OUTPUTS),
                {"BULK": 1})
    dense = _pieces_from(got["ptile"], x, case)
    for n in TC.OUTPUTS:
        assert np.array_equal(bulk[n], dense[n]), n


@SLOW
def test_sync_check_is_clean_on_the_image_and_the_mbarrier_wait_is_load_bearing(tmp_path):
    """prep3g IMG=1 and pieces_ld BULK=1 on one 20-row chunk: clean; the pieces without their
    wait on the copies' mbarrier: the products' reads race the copies' writes."""
    analyze = pytest.importorskip("tirxh_sync_check.analyze")
    case = _pieces_case("t20_h1_deep")
    _, _, x = _stored(case)
    image = _stored_image(case, x)
    chunks, H = x["s0"].shape[:2]
    prep_args = dict(_raw(x), **P3.P2._outputs(H, chunks), ptile=np.zeros_like(image),
                     **PTL.gate_outputs(H, chunks))
    mut = mutant(tmp_path, "kda_bwd_pieces_tc", [(
        "    if BULK:\n        full.wait(0)\n", "")])
    runs = [(P3.kda_bwd_prep3g, prep_args, {"PREP": 2, "IMG": 1}, True),
            (TC.kda_bwd_pieces_ld, _pieces_args(image, x), {"BULK": 1}, True),
            (mut.kda_bwd_pieces_ld, _pieces_args(image, x), {"BULK": 1}, False)]
    for kernel, args, consts, clean in runs:
        results = analyze.check_kernel(kernel, args, consts=consts, grid=TC.SUITE.grid(case))
        found = " ".join(f.message for r in results for f in r.findings)
        if clean:
            assert all(r.verdict == "clean" for r in results), (kernel.name, found)
        else:
            assert "async write shared" in found, found


@pytest.mark.parametrize("name", ["t20_h1_deep", pytest.param("pack_80_1_30_h2", marks=SLOW)])
def test_pieces_from_the_stored_tiles_are_bit_identical(name):
    """prep3s's walks are prep3's, and the pieces computed from its stored tiles are the
    pieces that compute the prep themselves (PREP=2), every output, bit for bit."""
    case = _pieces_case(name)
    got, want, x = _stored(case)
    for n in P3.OUTPUTS:
        assert np.array_equal(got[n], want[n]), n
    loaded, own = _pieces_from(got["ptile"], x, case), _pieces_tc(x, case)
    for n in TC.OUTPUTS:
        assert np.array_equal(loaded[n], own[n]), n


@SLOW
def test_tiles_of_the_wrong_chunk_are_caught(tmp_path):
    """Pieces that load the next chunk-head's tiles (one past the last: a zero tile appended)
    differ from the pieces that compute their own prep on the pack's chunks."""
    case = _pieces_case("pack_80_1_30_h2")
    got, _, x = _stored(case)
    mut = mutant(tmp_path, "kda_bwd_pieces_tc", [(
        "PTL.load(sm, hc, ptile)", "PTL.load(sm, hc + 1, ptile)")])
    tiles = np.concatenate([got["ptile"].reshape(-1, PTL.WORDS), np.zeros((1, PTL.WORDS),
                                                                         np.float32)])
    bad = _pieces_from(tiles, x, case, kernel=mut.kda_bwd_pieces_ld)
    own = _pieces_tc(x, case)
    assert not all(np.array_equal(bad[n], own[n]) for n in TC.OUTPUTS)


@SLOW
def test_sync_check_is_clean_on_both_kernels():
    """One 20-row chunk: the store reads the prep's tiles between its last barrier and the
    split's first (reads only); the load's shared stores and dO's staging before the barrier
    the products start behind."""
    analyze = pytest.importorskip("tirxh_sync_check.analyze")
    case = _pieces_case("t20_h1_deep")
    got, _, x = _stored(case)
    chunks, H = x["s0"].shape[:2]
    raw = _raw(x)
    runs = [(P3.kda_bwd_prep3s, dict(raw, **P3.P2._outputs(H, chunks),
                                     **PTL.outputs(H, chunks)), {"PREP": 2}),
            (TC.kda_bwd_pieces_ld, _pieces_args(got["ptile"], x), {})]
    for kernel, args, consts in runs:
        for result in analyze.check_kernel(kernel, args, consts=consts,
                                           grid=TC.SUITE.grid(case)):
            assert result.verdict == "clean", (kernel.name, [f.message for f in
                                                             result.findings])


@SLOW
def test_the_loads_barrier_is_load_bearing(tmp_path):
    """Without the barrier after the load and dO's staging, the products' fragment loads race
    the other warps' shared stores of the tiles: sync_check reports it."""
    analyze = pytest.importorskip("tirxh_sync_check.analyze")
    case = _pieces_case("t20_h1_deep")
    got, _, x = _stored(case)
    mut = mutant(tmp_path, "kda_bwd_pieces_tc", [(
        "                _prefetch_state(ck, v, s0, ds1)\n    T.ptx.bar.sync(0)\n",
        "                _prefetch_state(ck, v, s0, ds1)\n")])
    verdicts = [r.verdict for r in analyze.check_kernel(
        mut.kda_bwd_pieces_ld, _pieces_args(got["ptile"], x), consts={},
        grid=TC.SUITE.grid(case))]
    assert any(v != "clean" for v in verdicts), verdicts


def _local_case(name):
    return next(c for c in LT.SUITE.cases if c.name == name)


def _local_inputs(case):
    """Piece 3's inputs of `case` with `ptile`: kda_bwd_prep3s's tiles of the same raw inputs."""
    x = LT.SUITE.make_inputs(case, 0)
    chunks, H = x["dqe"].shape[:2]
    raw = _raw(x)
    tiles = _run(P3.kda_bwd_prep3s, dict(raw, **P3.P2._outputs(H, chunks),
                                         **PTL.outputs(H, chunks)),
                 case, ["ptile"], {"PREP": 2})["ptile"]
    return dict(x, ptile=tiles)


def _local_with_stored_t(case, kernel=None):
    """kda_bwd_local_ld (or `kernel`) on `_local_inputs`: (its result, the inputs)."""
    import tirxh_numsim as ns
    x = _local_inputs(case)
    res = ns.run(kernel or LT.kda_bwd_local_ld, x, grid=LT.SUITE.grid(case),
                 outputs=list(LT.OUTPUTS))
    return res, x


@SLOW
@pytest.mark.parametrize("name", ["t86_h1_deep", "pack_9_1_64_h2"])
def test_piece3_from_the_stored_t_is_its_own_within_rounding(name):
    """kda_bwd_local_ld (plan "tc5"): T from the prep's blocked inverse instead of piece 3's
    forward substitution, two chunks (a 22-row tail) of saturated gates and a varlen pack of two
    heads: every output within the public rule, and within 1e-5 of kda_bwd_local_tc's largest
    value (measured on 2026-12-06: <= 6e-7 relative, every output)."""
    import tirxh_numsim as ns
    case = _local_case(name)
    res, x = _local_with_stored_t(case)
    assert_matches(LT.SUITE, case, res, x)
    own = ns.run(LT.kda_bwd_local_tc, x, grid=LT.SUITE.grid(case), outputs=list(LT.OUTPUTS))
    for n in LT.OUTPUTS:
        a, b = (np.asarray(r.outputs[n], np.float64) for r in (res, own))
        assert np.abs(a - b).max() <= 1e-5 * np.abs(b).max(), n


@SLOW
def test_piece3_with_another_chunks_t_is_caught(tmp_path):
    """T loaded one (chunk, head) off: the gradients past the public rule."""
    mut = mutant(tmp_path, "kda_bwd_local_tc", [(
        "PTL.load_t(sm.t, ck.c * ck.H + ck.h, ptile)",
        "PTL.load_t(sm.t, (ck.c * ck.H + ck.h + 1) % (ck.H * T.nctaid.y), ptile)")])
    case = _local_case("pack_9_1_64_h2")
    res, x = _local_with_stored_t(case, kernel=mut.kda_bwd_local_ld)
    with pytest.raises(AssertionError):
        assert_matches(LT.SUITE, case, res, x)


@SLOW
def test_sync_check_is_clean_on_piece3_from_the_stored_t():
    """One 20-row chunk: T's shared stores before the barrier that X's products start behind."""
    analyze = pytest.importorskip("tirxh_sync_check.analyze")
    case = _local_case("t20_h1_deep")
    for result in analyze.check_kernel(LT.kda_bwd_local_ld, _local_inputs(case), consts={},
                                       grid=LT.SUITE.grid(case)):
        assert result.verdict == "clean", [f.message for f in result.findings]


@SLOW
@pytest.mark.parametrize("name", ["t20_h1_deep", "pack_80_1_30_h2"])
def test_pieces_with_s0_and_ds1_loaded_ahead_are_bit_identical(name):
    """kda_bwd_pieces_ld AHEAD=1 (plan "tc9": S0's and dS1's words loaded a k-step ahead of
    their products) multiplies the same words in the same order: every output equals AHEAD=0's
    to the last bit, on one 20-row chunk and on the varlen pack of two heads."""
    case = _pieces_case(name)
    got, _, x = _stored(case)
    ahead = _run(TC.kda_bwd_pieces_ld, _pieces_args(got["ptile"], x), case, list(TC.OUTPUTS),
                 {"AHEAD": 1})
    plain = _pieces_from(got["ptile"], x, case)
    for n in TC.OUTPUTS:
        assert np.array_equal(ahead[n], plain[n]), n


@SLOW
@pytest.mark.parametrize("name", ["t20_h1_deep", "pack_80_1_30_h2"])
def test_pieces_from_the_chains_split_fragments_match_but_for_dgs(name):
    """kda_bwd_pieces_ld FRAGS=1 (plan "tc13") on S0 and dS1 as the chains' split fragments
    (kda_bwd_chain.state_fragments of the same f32 states): its products multiply the same hi
    and lo words in the same order (the transposed uses through ``movmatrix``), so every
    output but dgs equals FRAGS=0's to the last bit, on one 20-row chunk and on the varlen
    pack of two heads; dgs sums hi + lo (~16 bits of each state) in another order: within
    2^-12 of FRAGS=0's."""
    case = _pieces_case(name)
    got, _, x = _stored(case)
    args = _split_args(got["ptile"], x)
    split = _run(TC.kda_bwd_pieces_ld, args, case, list(TC.OUTPUTS), {"FRAGS": 1})
    plain = _pieces_from(got["ptile"], x, case)
    for n in TC.OUTPUTS:
        if n != "dgs":
            assert np.array_equal(split[n], plain[n]), n
    scale = np.abs(plain["dgs"]).max()
    assert scale > 0
    np.testing.assert_allclose(split["dgs"], plain["dgs"], rtol=2 ** -12, atol=2 ** -12 * scale)


def test_the_planes_rule_names_the_constant_and_what_it_excludes():
    """PLANES feeds the split products only: 5, or PLANES with TF32 or AHEAD (whose
    products read f32 elements), is refused with the constant named; 0, 1, 2 pass."""
    assert [TC.check_planes(p) for p in (0, 1, 2, 3, 4)] == [[], [], [], [], []]
    assert "PLANES=5 must be" in TC.check_planes(5)[0]
    assert "TF32=1 and AHEAD=0" in TC.check_planes(1, TF32=1)[0]
    assert "AHEAD=1" in TC.constraints(1, 64, 1, PLANES=2, AHEAD=1)[0]
    # a plan binds the constants without a suite's constraints: the trace refuses them too
    with pytest.raises(Exception, match=r"kda_bwd_pieces_ld: PLANES=5 must be"):
        TC.kda_bwd_pieces_ld.ptx("sm_90a", PLANES=5)


@SLOW
@pytest.mark.parametrize("name, planes", [("t20_h1_deep", 1), ("pack_80_1_30_h2", 1),
                                          ("pack_80_1_30_h2", 2), ("t20_h1_deep", 3),
                                          ("pack_80_1_30_h2", 3), ("t20_h1_deep", 4)])
def test_pieces_on_split_planes_are_bit_identical(name, planes):
    """kda_bwd_pieces_ld PLANES=1 to 4 (plans "tc16" to "tc19": R, Delta, dDelta and
    dR split once into bf16 planes as they are stored, their fragments by ``ldmatrix``;
    PLANES=2 with the products' k-steps as runtime loops; 3 with every shared operand on
    planes, the loaded tiles split once; 4 as 3, unrolled): the same hi and lo words
    multiplied in the same order, so every output equals PLANES=0's to the last bit (FRAGS=1's split states, one
    20-row chunk and the varlen pack of two heads)."""
    case = _pieces_case(name)
    got, _, x = _stored(case)
    args = _split_args(got["ptile"], x)
    planes = _run(TC.kda_bwd_pieces_ld, args, case, list(TC.OUTPUTS),
                  {"FRAGS": 1, "PLANES": planes})
    plain = _run(TC.kda_bwd_pieces_ld, args, case, list(TC.OUTPUTS), {"FRAGS": 1})
    for n in TC.OUTPUTS:
        assert np.array_equal(planes[n], plain[n]), n


@SLOW
@pytest.mark.parametrize("planes", [1, 3])
def test_sync_check_is_clean_on_the_pieces_on_split_planes(planes):
    """kda_bwd_pieces_ld PLANES=1 and 3 on one 20-row chunk: the planes are written and read
    across the same barriers as the f32 tiles were (3: the loaded tiles split in place behind
    kda_bwd_prep3.convert's barriers)."""
    analyze = pytest.importorskip("tirxh_sync_check.analyze")
    case = _pieces_case("t20_h1_deep")
    got, _, x = _stored(case)
    args = _split_args(got["ptile"], x)
    for result in analyze.check_kernel(TC.kda_bwd_pieces_ld, args,
                                       consts={"FRAGS": 1, "PLANES": planes},
                                       grid=TC.SUITE.grid(case)):
        assert result.verdict == "clean", [f.message for f in result.findings]


@SLOW
def test_sync_check_is_clean_on_the_pieces_from_split_fragments():
    """kda_bwd_pieces_ld FRAGS=1 on one 20-row chunk: its global loads and ``movmatrix``
    (a warp collective every lane reaches) change no barrier."""
    analyze = pytest.importorskip("tirxh_sync_check.analyze")
    case = _pieces_case("t20_h1_deep")
    got, _, x = _stored(case)
    args = _split_args(got["ptile"], x)
    for result in analyze.check_kernel(TC.kda_bwd_pieces_ld, args, consts={"FRAGS": 1},
                                       grid=TC.SUITE.grid(case)):
        assert result.verdict == "clean", [f.message for f in result.findings]
