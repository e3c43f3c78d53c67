"""zoo/kernels/kda_bwd_prep_only.py (piece 2a's prep alone, the session-13 calibration kernel):
its exp(G_C) against float64 and bit-identical to kda_bwd_prep_tc's; its numsim counts are
kda_bwd_prep_tc's less the walk (the split the cycle model of docs/PERFORMANCE.md "Session 13,
branch kdabwd10" uses); the walks' fragment loads conflict ~4-way on the shared-memory banks,
the prep's few; sync_check clean; resources; bytes."""

from collections import defaultdict

import numpy as np
import pytest

import tirxh.lang as T

from tests.zoo._zoo import resident_ctas_per_sm, sync_race
from tests.zoo.zoo_modules import assert_matches, load

MOD = load("kda_bwd_prep_only")
PT = load("kda_bwd_prep_tc")
P2 = load("kda_bwd_prep2")
SLOW = pytest.mark.slow   # numsim of 256 threads with a trace: ~2-4 s a chunk


def _run(kernel, x, case, outputs, consts=None, trace=False):
    import tirxh_numsim as ns  # the numsim plugin distribution (installed with the project)
    return ns.run(kernel, x, grid=MOD.SUITE.grid(case), outputs=outputs, consts=consts or {},
                  trace=trace)


def _full(gate="deep"):
    """One full 64-row chunk on one head: the unit the cycle model counts."""
    return T.case("full", B=1, T_=64, H=1, gate=gate)


def _prep_tc_args(x, fwd=0):
    """kda_bwd_prep_tc's arguments from this kernel's inputs (y = dO, or V given as `fwd`)."""
    keep = ("q", "k", "g_raw", "beta", "A_log", "dt_bias", "chunk_tok", "chunk_rows")
    ch, h = x["eg"].shape[:2]
    return dict({n: x[n] for n in keep}, y=x["do"] if not fwd else fwd,
                nfrag=np.zeros((ch, h, 8, 16, 32, 4), np.uint32),
                bt=np.zeros((ch, h, 128, 128), np.float32), eg=np.zeros_like(x["eg"]))


def _shared_wavefronts(res):
    """(shared-memory accesses, wavefronts) of a traced run. Every access here is 4 bytes a
    lane (numsim records wider ones an element at a time: refused below), served in as many
    wavefronts as the most distinct words one of the 32 banks holds."""
    accesses = waves = 0
    for e in res.trace.events:
        if getattr(e, "space", None) != "shared":
            continue
        banks = defaultdict(set)
        for _, start, end in e.ranges:
            assert end - start == 4, (e.loc, start, end)
            banks[(start // 4) % 32].add(start // 4)
        accesses += 1
        waves += max(len(w) for w in banks.values())
    return accesses, waves


@pytest.mark.parametrize("case", [pytest.param(c, marks=() if "t20" in c.name else SLOW)
                                  for c in MOD.SUITE.cases if c.small], ids=lambda c: c.name)
def test_small_case_matches_reference(case):
    x = MOD.SUITE.make_inputs(case, 0)
    res = _run(MOD.kda_bwd_prep_only, x, case, ["eg"])
    assert_matches(MOD.SUITE, case, res, x)


@SLOW
def test_exp_gc_is_bit_identical_to_kda_bwd_prep_tc():
    """The varlen pack on 2 heads: the same prep, so the same exp(G_C) to the bit."""
    case = next(c for c in MOD.SUITE.cases if c.name == "pack_80_1_30_h2")
    x = MOD.SUITE.make_inputs(case, 0)
    mine = _run(MOD.kda_bwd_prep_only, x, case, ["eg"])
    theirs = _run(PT.kda_bwd_prep_tc, _prep_tc_args(x), case, ["eg"], dict(FORWARD=0, PREP=2))
    assert np.array_equal(np.asarray(mine.outputs["eg"]), np.asarray(theirs.outputs["eg"]))


@SLOW
def test_counts_split_the_launches_into_prep_and_walks():
    """numsim, one full chunk, deep gates (2026-12-03): the prep 58,166 warp-instructions and
    1,056 mma.sync (kda_bwd_prep_tc with its walk removed: 58,206, its chunk-head index kept);
    kda_bwd_prep_tc's reverse walk (pmt_) 114,814 less that, its forward walk (pmt_fwd_)
    103,918 less that, and kda_bwd_prep2 = prep + both walks + the V staging (5,216): the
    decomposition behind the session-13 cycle model."""
    case = _full()
    x = MOD.SUITE.make_inputs(case, 0)
    prep = _run(MOD.kda_bwd_prep_only, x, case, ["eg"]).stats
    rev = _run(PT.kda_bwd_prep_tc, _prep_tc_args(x), case, ["eg"],
               dict(FORWARD=0, PREP=2)).stats
    assert (prep["warp_instructions"], prep["ops"]["mma.sync"]) == (58166, 1056)
    assert (rev["warp_instructions"], rev["ops"]["mma.sync"]) == (114814, 5152)


@SLOW
def test_the_walks_fragment_loads_conflict_four_ways():
    """The diagnosis behind session 13's 2.1-2.5x misses: the split products read their
    fragments as scalar ``ld.shared.f32`` from [64, 129]-word tiles, lane (g, t) at row g,
    column 2t (or transposed), bank (g + 2t) mod 32: four lanes a bank. Measured on one full
    chunk: the prep ~2.1 wavefronts an access (14,930 for 7,050), the reverse walk's products
    ~4.1 (36,096 for 8,704), every access 4 bytes a lane."""
    case = _full()
    x = MOD.SUITE.make_inputs(case, 0)
    a0, w0 = _shared_wavefronts(_run(MOD.kda_bwd_prep_only, x, case, ["eg"], trace=True))
    a1, w1 = _shared_wavefronts(_run(PT.kda_bwd_prep_tc, _prep_tc_args(x), case, ["eg"],
                                     dict(FORWARD=0, PREP=2), trace=True))
    assert (a0, w0) == (7050, 14930)
    assert (a1 - a0, w1 - w0) == (8704, 36096)
    assert (w1 - w0) / (a1 - a0) > 4.0 > 2 * w0 / a0 / 1.1


def test_the_wavefront_count_sees_a_four_way_fragment_load():
    """The measure itself: the A-fragment pattern (lane 4g + t at word 129 g + 2t) is 4
    wavefronts; one row of 32 consecutive words is 1."""
    class Ev:
        space = "shared"
        ranges = [(4 * g + t, 4 * (129 * g + 2 * t), 4 * (129 * g + 2 * t) + 4)
                  for g in range(8) for t in range(4)]

    class Row:
        space = "shared"
        ranges = [(lane, 4 * lane, 4 * lane + 4) for lane in range(32)]

    class Res:
        class trace:
            events = [Ev, Row]
    assert _shared_wavefronts(Res) == (2, 5)


@SLOW
def test_sync_check_is_clean():
    """The varlen pack on 2 heads: kda_bwd_prep_tc's prep phases and their barriers, then the
    eg store."""
    case = next(c for c in MOD.SUITE.cases if c.name == "pack_80_1_30_h2")
    for result in sync_race(MOD.SUITE, case):
        assert result.verdict == "clean", [f.message for f in result.findings]


def test_compiles_without_spills_one_cta_an_sm():
    """ptxas on this machine (2026-12-03): no spills; kda_bwd_reverse's 227 KB of shared
    memory, one CTA of 256 threads an SM, as the launches it calibrates."""
    r = MOD.kda_bwd_prep_only.compile("sm_90a").resources
    assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_frame == 0, r
    assert resident_ctas_per_sm(MOD.SUITE, MOD.SUITE.cases[0]) == 1


def test_bytes_and_flops_are_the_launchs_inputs_and_prep():
    """The inputs of kda_bwd_prep_tc (q, k, g_raw, dO, beta) and eg; its products are the
    prep's P, M and T only."""
    ck = 12288
    assert MOD._bytes(1, 8192, 96) == 8192 * 96 * (4 * 256 + 2) + ck * 4 * 128
    assert MOD._flops(1, 8192, 96) == 2 * PT.TC.pm_macs(2) * ck
    with pytest.raises(ValueError, match=r"must be"):
        T.suite(MOD.kda_bwd_prep_only, inputs=MOD.inputs, reference=MOD.reference,
                outputs=["eg"], constraints=MOD.constraints,
                cases=[T.case("bad", B=1, T_=0, H=1)])
