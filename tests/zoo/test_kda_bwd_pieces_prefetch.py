"""kda_bwd_pieces_ld PREFETCH=1 (zoo/kernels/kda_bwd_pieces_tc.py `_prefetch_state`):
``prefetch.global.L2`` of every 128-byte line of the chunk's S0 and dS1 (FRAGS=1's split
fragments: the f32 states' 64 KB each) and of the V rows `r` reads, after the tiles' loads and
before the barrier. With the plan's constants (FRAGS=1, PLANES=4, VLOAD=1) every
output equals PREFETCH=0's to the last bit on a varlen pack of two heads (rows past the
sequences) and numsim finds it clean; sync_check is clean; the PTX has the five prefetches
(4.5 a thread) only where asked, after the tile loads and before the first barrier; and, traced
in numsim, every prefetched address lies inside s0, ds1 or v and each CTA's prefetched lines are
exactly the lines its global loads of S0, dS1 and V read (rows past the sequence clamped
alike; unclamped rows are caught)."""

import re

import numpy as np
import pytest

from tests.zoo._prefetch import LINE, traced
from tests.zoo._zoo import mutant, run_clean
from tests.zoo.test_kda_bwd_pieces_vload import _split_args
from tests.zoo.zoo_modules import load

TC = load("kda_bwd_pieces_tc")
SLOW = pytest.mark.slow   # numsim of 256 threads: a few s a chunk and kernel
PLAN = {"FRAGS": 1, "PLANES": 4, "VLOAD": 1}   # the current plan's constants (tc27)
TENSORS = {"s0", "ds1", "v"}
TILE_LINES = 774                                  # a (chunk, head)'s stored tiles
STATE_LINES = 2 * 64 * 1024 // LINE               # S0's and dS1's 64 KB of a chunk and head
V_LINES = 64 * 256 // LINE                        # V's C rows of 256 bytes (fewer if clamped)


def _case(name):
    return next(c for c in TC.SUITE.cases if c.name == name)


def _ptx_lines(prefetch):
    ptx = TC.kda_bwd_pieces_ld.ptx("sm_90a", **PLAN, PREFETCH=prefetch)
    return [ln.strip() for ln in ptx.splitlines()
            if ln.strip() and not ln.strip().startswith(".")]


@pytest.mark.parametrize("prefetch", [0, 1])
def test_the_ptx_has_five_prefetches_only_where_asked(prefetch):
    """Two lines of S0 and of dS1 a thread, one of V's on threads 0..127 (predicated): five
    instructions, none with PREFETCH=0; after the tiles' wide loads (``ld.global.nc.v4``) and
    before the first ``bar.sync``, with the products' loads of S0 and dS1 still to come."""
    lines = _ptx_lines(prefetch)
    at = [i for i, ln in enumerate(lines) if re.match(r"(@!?%p\d+\s+)?prefetch", ln)]
    assert len(at) == (0 if prefetch == 0 else 5), at
    if not prefetch:
        return
    assert all(re.match(r"(@!?%p\d+\s+)?prefetch\.global\.L2\s+\[", lines[i]) for i in at)
    assert sum(lines[i].startswith("@") for i in at) == 1
    bar = min(i for i, ln in enumerate(lines) if ln.startswith("bar.sync"))
    wide = [i for i, ln in enumerate(lines) if ln.startswith("ld.global.nc.v4")]
    assert wide and max(i for i in wide if i < bar) < min(at) and max(at) < bar
    assert any(ln.startswith("ld.global.v4.b32") for ln in lines[bar:])   # `_Split`'s loads


def test_the_timing_case_is_tc27_with_prefetch():
    """SUITE_LD_TIMING's tc30_t8192_h16: tc27_t8192_h16's constants and shape, PREFETCH=1."""
    cases = {c.name: c.params for c in TC.SUITE_LD_TIMING.cases}
    assert cases["tc30_t8192_h16"] == dict(cases["tc27_t8192_h16"], PREFETCH=1)
    assert cases["tc27_t8192_h16"] == dict(B=1, T_=8192, H=16, **PLAN)


@SLOW
def test_prefetch_changes_no_bit():
    """PREFETCH=1 with NEXT=2 (hints: no data effect) against neither, every output to the last
    bit, on the varlen pack of two heads (chunks of 64, 16, 1 and 30 rows: rows past the
    sequence in three; CTAs 6 and 7 have no CTA two ahead), numsim clean."""
    case = _case("pack_80_1_30_h2")
    args = _split_args(case)
    want, got = [run_clean(TC.kda_bwd_pieces_ld, args, TC.SUITE.grid(case), list(TC.OUTPUTS),
                           dict(PLAN, PREFETCH=p, NEXT=2 * p)) for p in (0, 1)]
    for n in TC.OUTPUTS:
        assert np.array_equal(got[n], want[n]), n


@SLOW
def test_sync_check_is_clean_with_prefetch():
    """One 20-row chunk, PREFETCH=1 and NEXT=1 (no next CTA: predicated off): the prefetches
    touch no shared memory and order nothing."""
    analyze = pytest.importorskip("tirxh_sync_check.analyze")
    case = _case("t20_h1_deep")
    for r in analyze.check_kernel(TC.kda_bwd_pieces_ld, _split_args(case),
                                  consts=dict(PLAN, PREFETCH=1, NEXT=1),
                                  grid=TC.SUITE.grid(case)):
        assert r.verdict == "clean", [f.message for f in r.findings]


def _traced(monkeypatch, mod, case):
    """numsim of `mod`'s kda_bwd_pieces_ld (PREFETCH=1) on `case`, traced
    (tests/zoo/_prefetch.traced): the recorded prefetches, per CTA the lines prefetched and
    those the launch's global loads of s0, ds1 and v read, the number of CTAs."""
    seen, got, want = traced(monkeypatch, mod.kda_bwd_pieces_ld, _split_args(case),
                             TC.SUITE.grid(case), list(TC.OUTPUTS), dict(PLAN, PREFETCH=1),
                             None, TENSORS)
    return seen, got, want, int(np.prod(TC.SUITE.grid(case)))


@SLOW
def test_prefetched_lines_are_in_bounds_and_are_the_loaded_lines(monkeypatch):
    """150 tokens (chunks of 64, 64 and 22 rows), traced: every prefetch address lies inside
    s0, ds1 or v, 4.5 a thread; per CTA the set of prefetched 128-byte lines equals the set of
    lines its loads of S0, dS1 (`_Split`, `_dgs_split`) and V (`r`) read: all 1,024 of the
    states' and two a valid row of V's (a line missed, one too many, another chunk's, or a row
    not clamped fails: `test_unclamped_rows_are_caught`)."""
    seen, got, want, ctas = _traced(monkeypatch, TC, _case("t150_h1_deep"))
    assert len(seen) == (4 * 256 + 128) * ctas
    assert {b for _, _, b in seen} == TENSORS, {b for _, _, b in seen}
    assert sorted(want) == list(range(ctas))
    for c in range(ctas):
        assert got[c] == want[c], (c, len(got[c] - want[c]), len(want[c] - got[c]))
        assert STATE_LINES < len(want[c]) <= STATE_LINES + V_LINES
    assert sorted(len(w) - STATE_LINES for w in want.values()) == [2 * 22, 2 * 64, 2 * 64]


@SLOW
def test_unclamped_rows_are_caught(tmp_path, monkeypatch):
    """The check can fail: `_prefetch_state` with V's rows not clamped to the sequence, on 150
    tokens (chunks of 64, 64 and 22 rows): the last CTA (22 rows at the tensor's end)
    prefetches past v's end (the bounds check sees it) and lines its loads never read; the
    full chunks' stay exact."""
    mut = mutant(tmp_path, "kda_bwd_pieces_tc", [(
        "v.at(ck.row(t >> 1) + ((t & 1) << 6))",
        "v.at((ck.tok0 + (t >> 1)) * ck.H * K + ck.h * K + ((t & 1) << 6))")])
    seen, got, want, ctas = _traced(monkeypatch, mut, _case("t150_h1_deep"))
    assert None in {b for _, _, b in seen}             # past v's end
    full = {c for c in range(ctas) if len(want[c]) == STATE_LINES + V_LINES}
    assert len(full) == 2                              # the two 64-row chunks
    assert all((got[c] == want[c]) == (c in full) for c in range(ctas))


def test_prefetch_compiles_without_spills():
    """nvJitLink on this machine, the plan's constants: PREFETCH=0, and PREFETCH=1 with NEXT=132
    (plan tc33's), both 255 registers, no spills (SASS 116,096 bytes; 117,632 with PREFETCH=1
    alone, its five CCTL.E.PF2 after the tiles' shared stores; 118,272 with NEXT too)."""
    got = {p: TC.kda_bwd_pieces_ld.compile("sm_90a", **PLAN, PREFETCH=p,
                                           NEXT=132 * p).resources for p in (0, 1)}
    for r in got.values():
        assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_frame == 0, r
        assert 256 * r.registers <= 65536, r


def _prefetches(**consts):
    """The launch's PTX lines (directives dropped), the indices of its ``prefetch`` lines and
    of its ``bar.sync`` lines, with the plan's constants and `consts`."""
    ptx = TC.kda_bwd_pieces_ld.ptx("sm_90a", **PLAN, **consts)
    lines = [ln.strip() for ln in ptx.splitlines()
             if ln.strip() and not ln.strip().startswith(".")]
    at = [i for i, ln in enumerate(lines) if re.match(r"(@!?%p\d+\s+)?prefetch", ln)]
    return lines, at, [i for i, ln in enumerate(lines) if ln.startswith("bar.sync")]


@pytest.mark.parametrize("nxt", [0, 132])
def test_next_adds_five_prefetches_before_the_last_product(nxt):
    """NEXT: four lines of the next wave's tiles a thread (the fourth predicated: 774 lines)
    and one of its dO (threads 0..127), all predicated on that CTA existing, after the last
    ``bar.sync`` (before dke's loads of S0)."""
    lines, at, bars = _prefetches(NEXT=nxt)
    assert len(at) == (5 if nxt else 0), at
    if nxt:
        assert all(lines[i].startswith("@") for i in at)
        assert bars[-1] < min(at)
        assert any(ln.startswith("ld.global.v4.b32") for ln in lines[max(at):])


def test_next_is_refused_with_bulk_copies():
    with pytest.raises(Exception, match="NEXT prefetches the stored layout's words"):
        TC.kda_bwd_pieces_ld.ptx("sm_90a", BULK=1, NEXT=132)


def _traced_next(monkeypatch, mod, case, nxt):
    """numsim of `mod`'s kda_bwd_pieces_ld with NEXT=`nxt` on `case`, traced: the prefetches,
    per CTA the lines prefetched and those its `tiles_load` (kda_bwd_prep_tiles._wide) read."""
    seen, got, want = traced(monkeypatch, mod.kda_bwd_pieces_ld, _split_args(case),
                             TC.SUITE.grid(case), list(TC.OUTPUTS), dict(PLAN, NEXT=nxt),
                             [mod.PTL._wide], {"ptile", "do"})
    return seen, got, want, int(np.prod(TC.SUITE.grid(case)))


@SLOW
def test_next_prefetches_the_lines_of_the_cta_a_wave_ahead(monkeypatch):
    """150 tokens (3 CTAs: chunks of 64, 64 and 22 rows) with NEXT=1: CTA c prefetches exactly
    the lines CTA c + 1's `tiles_load` reads (its 774 lines of stored tiles and two a valid row
    of its dO: the last chunk's rows clamped alike), all inside ptile and dO; the last CTA
    prefetches nothing."""
    seen, got, want, ctas = _traced_next(monkeypatch, TC, _case("t150_h1_deep"), 1)
    assert {b for _, _, b in seen} == {"ptile", "do"}
    assert sorted(got) == list(range(ctas - 1)) and sorted(want) == list(range(ctas))
    for c in range(ctas - 1):
        assert got[c] == want[c + 1], (c, len(got[c] - want[c + 1]), len(want[c + 1] - got[c]))
    assert len(want[2]) == TILE_LINES + 2 * 22


@SLOW
def test_a_next_off_by_one_is_caught(tmp_path, monkeypatch):
    """The check can fail: `_prefetch_next` one CTA too far: CTA 0 prefetches CTA 2's lines."""
    ptl = mutant(tmp_path, "kda_bwd_prep_tiles", [(
        "nxt = T.ctaid.y * T.nctaid.x + T.ctaid.x + stride",
        "nxt = T.ctaid.y * T.nctaid.x + T.ctaid.x + stride + 1")])
    mut = mutant(tmp_path, "kda_bwd_pieces_tc", [(
        "import kda_bwd_prep_tiles as PTL", "PTL = None")])
    mut.PTL = ptl
    _, got, want, _ = _traced_next(monkeypatch, mut, _case("t150_h1_deep"), 1)
    assert got[0] == want[2] and got[0] != want[1] and 1 not in got


# --- NEXTAT=1 (plan "tc38"): NEXT's prefetches before dR, not before dke ----------------------

def test_nextat_moves_the_five_prefetches_before_dr():
    """The same five predicated prefetches, now between ddelta's store barrier and dR's dv
    stores (``st.global.v2.f32``), with two barriers after them (dR's, then dke's), not after
    the last one."""
    lines, at, bars = _prefetches(NEXT=132, NEXTAT=1)
    assert len(at) == 5 and all(lines[i].startswith("@") for i in at)
    assert bars[-3] < min(at) and max(at) < bars[-2]
    assert any(re.match(r"(@!?%p\d+\s+)?st\.global\.v2\.f32", ln)
               for ln in lines[max(at):bars[-2]])


def test_nextat_2_splits_the_prefetches_between_dr_and_dke():
    """NEXTAT=2: the same five predicated prefetches, two (the first half of the tiles' lines)
    where NEXTAT=1 puts them (before dR's dv stores, two barriers before the last) and three
    (the second half and dO's row) where NEXTAT=0 puts them (after the last barrier, before
    dke's products)."""
    lines, at, bars = _prefetches(NEXT=132, NEXTAT=2)
    assert len(at) == 5 and all(lines[i].startswith("@") for i in at)
    early = [i for i in at if bars[-3] < i < bars[-2]]
    late = [i for i in at if i > bars[-1]]
    assert len(early) == 2 and len(late) == 3
    assert any(re.match(r"(@!?%p\d+\s+)?st\.global\.v2\.f32", ln)
               for ln in lines[max(early):bars[-2]])


def test_nextat_needs_next():
    with pytest.raises(Exception, match="NEXTAT=1 moves NEXT's prefetches: it needs NEXT"):
        TC.kda_bwd_pieces_ld.ptx("sm_90a", **PLAN, NEXTAT=1)


@SLOW
@pytest.mark.parametrize("at", [1, 2])
def test_nextat_changes_no_bit_and_prefetches_the_same_lines(monkeypatch, at):
    """On 150 tokens (3 CTAs, a 22-row tail) with NEXT=1: NEXTAT=1's and 2's outputs are
    NEXTAT=0's bit for bit, and CTA c still prefetches exactly CTA c + 1's `tiles_load` lines
    (NEXTAT=2: its two halves together)."""
    case = _case("t150_h1_deep")
    want = run_clean(TC.kda_bwd_pieces_ld, _split_args(case), TC.SUITE.grid(case),
                     list(TC.OUTPUTS), dict(PLAN, NEXT=1))
    seen, got, lines = traced(monkeypatch, TC.kda_bwd_pieces_ld, _split_args(case),
                              TC.SUITE.grid(case), list(TC.OUTPUTS),
                              dict(PLAN, NEXT=1, NEXTAT=at), [TC.PTL._wide], {"ptile", "do"})
    for c in range(2):
        assert got[c] == lines[c + 1], c
    out = run_clean(TC.kda_bwd_pieces_ld, _split_args(case), TC.SUITE.grid(case),
                    list(TC.OUTPUTS), dict(PLAN, NEXT=1, NEXTAT=at))
    for n in TC.OUTPUTS:
        assert np.array_equal(out[n], want[n]), n
