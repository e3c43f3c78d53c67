"""kda_bwd_pieces_ld VLOAD=1 (kda_bwd_prep_tiles.load_wide): the prep's tiles and dO by 16-byte
loads, all of a thread's in flight at once, instead of `load`'s 97 scalar loads and `stage`'s 32
two-byte loads in dependent rounds of 8 (the tiles_load phase: 9.47 us of a 42.5 us CTA in
session 36's profile, H100, T8192 H16). The same words in the same shared locations, so with the
plan's constants (FRAGS=1, PLANES=4) every output equals VLOAD=0's to the last bit, on one
20-row chunk (rows past the sequence) and on a varlen pack of two heads; sync_check is clean;
a wrong row in the pieces' mapping is caught; the launch compiles without spills."""

import functools

import numpy as np
import pytest

from tests.zoo._zoo import mutant, run_clean
from tests.zoo.zoo_modules import load

P3 = load("kda_bwd_prep3")
CH = load("kda_bwd_chain")
TC = load("kda_bwd_pieces_tc")
PTL = load("kda_bwd_prep_tiles")
SLOW = pytest.mark.slow   # numsim of 256 threads: a few s a chunk and kernel
PLAN = {"FRAGS": 1, "PLANES": 4}   # the current plan's constants


def _case(name):
    return next(c for c in TC.SUITE.cases if c.name == name)


def _split_args(case):
    """kda_bwd_pieces_ld's arguments on `case`: prep3s's stored tiles of its raw inputs, its
    v and dO, S0 and dS1 as the chains' split fragments (FRAGS=1), zeroed outputs (a fresh
    dict of one cached run a case: the prep in numsim is seconds of CI, and numsim copies its
    inputs, so the arrays are shared safely)."""
    return dict(_split_args_of(case.name))


@functools.lru_cache(maxsize=4)
def _split_args_of(name):
    case = _case(name)
    x = TC.SUITE.make_inputs(case, 0)
    chunks, H = x["s0"].shape[:2]
    raw = {n: x[n] for n in ("q", "k", "g_raw", "v", "beta", "A_log", "dt_bias", "do",
                             "chunk_tok", "chunk_rows")}
    tiles = run_clean(P3.kda_bwd_prep3s, dict(raw, **P3.P2._outputs(H, chunks),
                                              **PTL.outputs(H, chunks)),
                      TC.SUITE.grid(case), ["ptile"], {"PREP": 2})["ptile"]
    args = {n: x[n] for n in ("v", "do", "chunk_tok", "chunk_rows")}
    args.update({n: np.zeros_like(x[n]) for n in TC.OUTPUTS}, ptile=tiles)
    for n in ("s0", "ds1"):
        args[n] = CH.state_fragments(x[n]).view(np.float32).reshape(x[n].shape)
    return args


def _pieces(kernel, args, case, vload):
    return run_clean(kernel, args, TC.SUITE.grid(case), list(TC.OUTPUTS),
                     dict(PLAN, VLOAD=vload))


@SLOW
@pytest.mark.parametrize("name", ["t20_h1_deep", "pack_80_1_30_h2"])
def test_wide_loads_are_bit_identical(name):
    """VLOAD=1 against VLOAD=0 (FRAGS=1, PLANES=4): every output to the last bit, on one
    20-row chunk (44 rows past the sequence: dO's zeros) and on the varlen pack of two heads."""
    case = _case(name)
    args = _split_args(case)
    wide = _pieces(TC.kda_bwd_pieces_ld, args, case, 1)
    plain = _pieces(TC.kda_bwd_pieces_ld, args, case, 0)
    for n in TC.OUTPUTS:
        assert np.array_equal(wide[n], plain[n]), n


@SLOW
def test_sync_check_is_clean_on_the_wide_loads():
    """One 20-row chunk: the wide loads' shared stores, like `load`'s, before the barrier the
    products start behind."""
    analyze = pytest.importorskip("tirxh_sync_check.analyze")
    case = _case("t20_h1_deep")
    for result in analyze.check_kernel(TC.kda_bwd_pieces_ld, _split_args(case),
                                       consts=dict(PLAN, VLOAD=1), grid=TC.SUITE.grid(case)):
        assert result.verdict == "clean", [f.message for f in result.findings]


@SLOW
def test_a_wrong_row_of_the_pieces_is_caught(tmp_path):
    """The matrices' pieces at row l % 4 of their block instead of l / 8 (lanes l, l + 8, l +
    16, l + 24 load and store the same piece; three quarters of KE, KL, M and T, valid rows
    included, never written): the outputs differ from VLOAD=0's, or numsim reports the reads
    of unwritten words."""
    import tirxh_numsim as ns
    mut = mutant(tmp_path, "kda_bwd_prep_tiles", [(
        "<< 2) + (lane >> 3)", "<< 2) + (lane & 3)")])
    mod = mutant(tmp_path, "kda_bwd_pieces_tc", [(
        "import kda_bwd_prep_tiles as PTL", "PTL = None")])
    mod.PTL = mut
    case = _case("t20_h1_deep")
    args = _split_args(case)
    res = ns.run(mod.kda_bwd_pieces_ld, args, grid=TC.SUITE.grid(case),
                 outputs=list(TC.OUTPUTS), consts=dict(PLAN, VLOAD=1))
    plain = _pieces(TC.kda_bwd_pieces_ld, args, case, 0)
    assert res.verdict != "clean" or not all(
        np.array_equal(res.outputs[n], plain[n]) for n in TC.OUTPUTS)


def test_wide_loads_with_bulk_copies_are_refused():
    """BULK=1 loads the tiles by bulk copies: VLOAD=1 with it is a trace error naming both."""
    with pytest.raises(Exception, match=r"kda_bwd_pieces_ld: VLOAD=1 .*BULK"):
        TC.kda_bwd_pieces_ld.ptx("sm_90a", BULK=1, VLOAD=1)


def test_wide_loads_compile_without_spills():
    """nvJitLink on this machine (2026-12-07), the plan's constants: VLOAD=0 and 1 both 255
    registers, no spills; VLOAD=1's SASS 116,096 bytes, VLOAD=0's 125,184 (no rounds of scalar
    loads). Straight-line, VLOAD=1 spilled 16 bytes in the products (load_wide says why)."""
    got = {v: TC.kda_bwd_pieces_ld.compile("sm_90a", **PLAN, VLOAD=v).resources for v in (0, 1)}
    for r in got.values():
        assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_frame == 0, r
        assert 256 * r.registers <= 65536, r
    assert got[1].code_bytes < got[0].code_bytes, got
