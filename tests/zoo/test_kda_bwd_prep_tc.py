"""zoo/kernels/kda_bwd_prep_tc.py (piece 2a with its products on tensor cores, split bf16
operands): every small case (both walks) in numsim against kda_bwd_split.chain_operands /
state_operands in float64 (B^T and exp(G_C) by kda_bwd_chain_prep's rule, N's fragment words
as hi + lo); a dropped M W term, N's words in the wrong n-tile and a wrong lo word are caught
(the dropped lo product of the shared `_product` is test_kda_bwd_pieces_tc's); sync_check
clean on both walks; resources; the interface of kda_bwd_chain_prep. PREP=1 (the prep's P
and M as split mma, kda_bwd_pieces_tc._pairs_tc, whose mutants are that module's tests): both
walks' small cases and sync_check, and PREP=2's (T's blocks too). The chained check (plan
"tc": both walks' operands -> chain -> kda_bwd_pieces_tc -> kda_bwd_local within the public
rule; plan "tc2" with PREP=2) is in test_kda_fwd_bwd.py."""

import numpy as np
import pytest

import tirxh.lang as T
from tests.zoo._zoo import resident_ctas_per_sm, sync_race
from tests.zoo.test_kda_bwd_chain_prep import _n_error, _run
from tests.zoo.zoo_modules import assert_matches, load, load_mutant, mismatches

MOD = load("kda_bwd_prep_tc")
SLOW = pytest.mark.slow   # numsim of 256 threads: ~167K warp-instructions (~1 s) a chunk


def _sim(mod, case):
    """(result, inputs) of one case through kda_bwd_chain_prep's test driver (the kernel
    attribute is this module's)."""
    class _As:
        kda_bwd_chain_prep = mod.kda_bwd_prep_tc
        SUITE, OUTPUTS = mod.SUITE, mod.OUTPUTS
    return _run(_As, case)


@pytest.mark.parametrize("case", [pytest.param(c, marks=() if "t20" in c.name else SLOW)
                                  for c in MOD.SUITE.cases if c.small], ids=lambda c: c.name)
def test_small_case_matches_reference(case):
    res, x = _sim(MOD, case)
    assert_matches(MOD.SUITE, case, res, x)
    # N: 4.9e-6 to 5.7e-6 normalized RMS on 2026-12-02 (split products; the f32 kernel's
    # 6e-7 to 7e-7); B^T 2.5e-6 to 4.0e-6 (the rule 1e-5); PREP=1 (pm_ cases, P and M split
    # too): docs/TUNING.md "Forward + backward at 3x" has the figures
    assert _n_error(MOD, res, x, case) < 1e-5


@SLOW
@pytest.mark.parametrize("old,new,fwd", [
    # B = (QE - M W)^T dO: U = QE
    ("T.ptx.ld.shared.f32(sm.qe.at(row, col)) - acc[j][e])",
     "T.ptx.ld.shared.f32(sm.qe.at(row, col)))", 0),
    # N's words of n-tile a / 8 stored at the next n-tile's (h of the row pair ignored)
    ("at = base + 4 * (sp * 16 * 32 * 4 + h * 32 * 4)", "at = base + 4 * (sp * 16 * 32 * 4)", 1),
    # the odd column's lo word replaced by the even one's: N at bf16 precision there
    ("                                         words[1][1]])",
     "                                         words[0][1]])", 0),
], ids=["no_m_w", "n_tile", "lo_word"])
def test_mutants_are_caught(old, new, fwd, tmp_path):
    mut = load_mutant("kda_bwd_prep_tc", old, new, tmp_path)
    case = next(c for c in mut.SUITE.cases if c.name == ("fwd_t20_h1_deep" if fwd else
                                                         "t20_h1_deep"))
    res, x = _sim(mut, case)
    assert mismatches(mut.SUITE, case, res, x) or _n_error(mut, res, x, case) > 1e-4


@SLOW
@pytest.mark.parametrize("name", ["t20_h1_deep", "fwd_t20_h1_deep", "pm_t20_h1_deep",
                                  "pm_fwd_t20_h1_deep", "pmt_t20_h1_deep",
                                  "pmt_fwd_t20_h1_deep", "pmtm_t20_h1_deep"])
def test_sync_check_is_clean(name):
    """One chunk of 20 rows, each walk: the prep, then W / X and U written over the G and P
    tiles between barriers, N and B^T read from them."""
    case = next(c for c in MOD.SUITE.cases if c.name == name)
    for result in sync_race(MOD.SUITE, case):
        assert result.verdict == "clean", [f.message for f in result.findings]


def test_compiles_without_spills():
    """ptxas on this machine (2026-12-02): 149 / 147 registers (FORWARD 0 / 1), no spills;
    kda_bwd_reverse's 227 KB of shared memory: one CTA of 256 threads an SM."""
    for fwd in (0, 1):
        r = MOD.kda_bwd_prep_tc.compile("sm_90a", FORWARD=fwd).resources
        assert r.spill_stores == 0 and r.registers <= 168, r
        # PREP=1 and 2: 255 registers, no spills (test_kda_bwd_pieces_tc says why that costs
        # nothing)
        for prep in (1, 2):
            r = MOD.kda_bwd_prep_tc.compile("sm_90a", FORWARD=fwd, PREP=prep).resources
            assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_frame == 0, r
    assert resident_ctas_per_sm(MOD.SUITE, MOD.SUITE.cases[0]) == 1


def test_same_interface_as_the_f32_kernel():
    PR = load("kda_bwd_chain_prep")
    assert ([p.name for p in MOD.kda_bwd_prep_tc.runtime_params]
            == [p.name for p in PR.kda_bwd_chain_prep.runtime_params])
    assert MOD.OUTPUTS == PR.OUTPUTS and MOD.SUITE_TIMING.reference is None
    # W, U (or X) and N three mma a multiply-add, B^T two: per chunk and head
    ck, kk = 64 * 64 * 128, 128 * 64 * 128
    assert MOD._flops(1, 8192, 96) == 2 * (3 * (2 * ck + kk) + 2 * kk) * 12288
    assert MOD._flops(1, 8192, 96, FORWARD=1) == 2 * (3 * (ck + kk) + 2 * kk) * 12288
    assert MOD._flops(1, 8192, 96, PREP=2) - MOD._flops(1, 8192, 96, PREP=1) == (
        2 * 3 * 16 * 16 ** 3 * 12288)
    assert MOD._flops(1, 8192, 96, PREP=1) - MOD._flops(1, 8192, 96) == (
        2 * 3 * 2 * 10 * 16 * 16 * 128 * 12288)
    with pytest.raises(ValueError, match=r"PREP=3 must be 0 \(the f32 prep\), 1 .* or 2"):
        T.suite(MOD.kda_bwd_prep_tc, inputs=MOD.inputs, reference=MOD.reference,
                outputs=["bt"], constraints=MOD.constraints,
                cases=[T.case("bad", B=1, T_=10, H=1, PREP=3)])
    with pytest.raises(ValueError, match=r"FORWARD=2 must be 0"):
        T.suite(MOD.kda_bwd_prep_tc, inputs=MOD.inputs, reference=MOD.reference,
                outputs=["bt"], constraints=MOD.constraints,
                cases=[T.case("bad", B=1, T_=10, H=1, FORWARD=2)])


# --- MSW (the [C, C] M and T tiles swizzled; docs/PERFORMANCE.md "Session 15, branch kdabwd12")

@pytest.mark.parametrize("name,msw", [
    ("t20_h1_deep", 1), ("t20_h1_deep", 2),
    pytest.param("pack_80_1_30_h2", 2, marks=SLOW)])
def test_msw_is_bit_identical_to_prep2(name, msw):
    """Only addresses change (a bijection within each row of M, T), so N's words, B^T and
    exp(G_C) equal PREP=2's to the bit."""
    import tirxh_numsim as ns  # the numsim plugin distribution (installed with the project)
    case = next(c for c in MOD.SUITE.cases if c.name == name)
    x = MOD.SUITE.make_inputs(case, 0)
    out = {}
    for m in (0, msw):
        res = ns.run(MOD.kda_bwd_prep_tc, x, grid=MOD.SUITE.grid(case),
                     outputs=list(MOD.OUTPUTS), consts=dict(FORWARD=0, PREP=2, MSW=m))
        out[m] = {k: np.asarray(v) for k, v in res.outputs.items()}
    for k in MOD.OUTPUTS:
        assert np.array_equal(out[0][k], out[msw][k]), k


def test_the_swizzle_halves_a_half_warps_pair_conflicts():
    """The bank arithmetic behind MSW: a half-warp's (lanes g 0..3, t 0..3) A-fragment pair
    at row g, columns 16 s + 2t (one 8-byte word each; a wavefront serves 16 distinct
    8-byte bank pairs) falls in 4 bank pairs in a 64-word row (4 wavefronts a half-warp, the
    8 of ncu's "N-Way 8" for the warp), in 8 with the swizzle (2, 4 for the warp); and the
    swizzle is a bijection of each row that keeps every fragment offset (+1, +8, +9 columns,
    +8 rows) an immediate."""
    def waves(word):
        pairs = {}
        for g in range(4):
            for t in range(4):
                w = word(g, 16 + 2 * t) // 2
                pairs.setdefault(w % 16, set()).add(w)
        return max(len(v) for v in pairs.values())

    def swz(r, c):
        return r * 64 + (c ^ ((r & 3) << 4))
    assert waves(lambda r, c: r * 64 + c) == 4
    assert waves(swz) == 2
    for r in range(64):
        assert sorted(swz(r, c) - 64 * r for c in range(64)) == list(range(64))
        for c0 in range(0, 64, 16):
            for t in range(4):
                for dr, dc in ((0, 1), (0, 8), (0, 9), (8, 0), (8, 9)):
                    if r + dr < 64:
                        assert (swz(r + dr, c0 + 2 * t + dc)
                                == swz(r, c0 + 2 * t) + 64 * dr + dc)


@SLOW
def test_msw_cuts_the_c_tiles_wavefronts():
    """numsim, one full 64-row chunk, deep gates (2026-12-03), wavefronts counted as
    test_kda_bwd_prep_only does (a scalar access, the most distinct words a bank holds):
    PREP=2 51,026; MSW=2 48,226 (-2,800: the walk's Tb and M fragment loads, 512 accesses
    8 -> 4; M's stores 128, 8 -> 4; T's blocks below the diagonal 48 loads 8 -> 4 and its
    zeros 48 stores 2 -> 1), no access left at 8."""
    from tests.zoo.test_kda_bwd_prep_only import MOD as PO, _full, _prep_tc_args, _run
    from tests.zoo.test_kda_bwd_prep_only import _shared_wavefronts
    case = _full()
    x = PO.SUITE.make_inputs(case, 0)
    res = {m: _run(MOD.kda_bwd_prep_tc, _prep_tc_args(x), case, ["eg"],
                   dict(FORWARD=0, PREP=2, MSW=m), trace=True) for m in (0, 2)}
    assert _shared_wavefronts(res[0]) == (15754, 51026)
    assert _shared_wavefronts(res[2]) == (15754, 48226)

    def worst(r):
        most = 0
        for e in r.trace.events:
            if getattr(e, "space", None) == "shared":
                banks = {}
                for _, start, _end in e.ranges:
                    banks.setdefault((start // 4) % 32, set()).add(start // 4)
                most = max(most, max(len(v) for v in banks.values()))
        return most
    assert (worst(res[0]), worst(res[2])) == (8, 4)


def test_msw_keeps_the_pairs_merged():
    """ptxas 13.0 (2026-12-03): MSW=2 keeps PREP=2's 52 LDS.64 and 650 LDS (the explicit
    ``ld.shared.v2.f32`` of `_PairSrc` and SwizzledM.b_row; through ``at`` per element 24
    LDS.64 became 48 LDS), 255 registers and no spills; the XORs cost ~290 SASS
    instructions (9,032 -> 9,320, most of them T's and M's stores)."""
    sass = {m: MOD.kda_bwd_prep_tc.compile("sm_90a", FORWARD=0, PREP=2, MSW=m).sass
            for m in (0, 2)}

    def count(text, op):
        return sum(1 for line in text.splitlines() if op in line.split("/*")[-1])
    for m in (0, 2):
        assert count(sass[m], "LDS.64") == 52 and count(sass[m], "LDS ") == 650, m
    r = MOD.kda_bwd_prep_tc.compile("sm_90a", FORWARD=0, PREP=2, MSW=2).resources
    assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_frame == 0, r


def test_msw_rule():
    assert MOD.constraints(1, 64, 1, PREP=2, MSW=2) == []
    assert MOD.constraints(1, 64, 1, PREP=2, MSW=1) == []
    for bad in (dict(PREP=2, MSW=3), dict(PREP=1, MSW=1), dict(PREP=2, FORWARD=1, MSW=2)):
        assert any("MSW=" in m for m in MOD.constraints(1, 64, 1, **bad)), bad
