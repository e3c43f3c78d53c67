"""kda_bwd_prep3g PREFETCH=1 (zoo/kernels/kda_bwd_prep3.py `prefetch_decayed`: plan "tc31"):
``prefetch.global.L2`` of the lines of k, q and dO the decayed operands' phase reads, issued as
the gate phase ends. The PTX has the three prefetches only where asked, between the staged
rows' wait and the pair products; traced in numsim, every prefetched address lies inside its
tensor and each CTA's prefetched lines are exactly the lines the decayed phase's loads read
(rows past the sequence clamped alike: `decayed_chunks`, the plans' DECAY=3); a prefetch
of unclamped rows is caught. That the outputs are unchanged, and sync_check's verdict, are in
tests/zoo/test_kda_bwd_gate_tiles.py (with the other prep variants, sharing its runs)."""

import re

import numpy as np
import pytest

from tests.zoo._kda_prep import LT, P3, case, prep_args
from tests.zoo._prefetch import LINE, traced
from tests.zoo._zoo import mutant
from tests.zoo.zoo_modules import load

FB = load("kda_fwd_bwd")
SLOW = pytest.mark.slow   # numsim of 256 threads: a few s a chunk and kernel
BASE = {"PREP": 2, "STAGE": 1, "ROLL": 2, "GATE": 1, "VSTAGE": 2}
TENSORS = {"q", "k", "do"}


def _prep_args(name):
    return prep_args(LT.SUITE.make_inputs(case(name), 0))


def test_plan_tc31_is_tc29_with_the_prefetch():
    assert FB.PLAN_CONSTS["tc31"] == dict(FB.PLAN_CONSTS["tc29"], PREFETCH=1)


@pytest.mark.parametrize("prefetch", [0, 1])
def test_the_ptx_has_three_prefetches_only_where_asked(prefetch):
    """k's and dO's (threads 0..127) and q's (128..255): three predicated instructions, none
    with PREFETCH=0; after the staged rows' wait (the gate's rows) and before the pair
    products' first mma.sync."""
    ptx = P3.kda_bwd_prep3g.ptx("sm_90a", **BASE, DECAY=3, PREFETCH=prefetch)
    lines = [ln.strip() for ln in ptx.splitlines()
             if ln.strip() and not ln.strip().startswith(".")]
    at = [i for i, ln in enumerate(lines) if re.match(r"(@!?%p\d+\s+)?prefetch", ln)]
    assert len(at) == 3 * prefetch, at
    assert all(re.match(r"@!?%p\d+\s+prefetch\.global\.L2\s+\[", lines[i]) for i in at)
    if prefetch:
        wait = min(i for i, ln in enumerate(lines) if ln.startswith("cp.async.wait"))
        mma = min(i for i, ln in enumerate(lines) if ln.startswith("mma.sync"))
        assert wait < min(at) and max(at) < mma


def _traced(monkeypatch, mod, name):
    """The plans' prep (DECAY=3) with PREFETCH=1 on case `name`, traced
    (tests/zoo/_prefetch.traced) against `decayed_chunks`' loads."""
    grid = LT.SUITE.grid(case(name))
    seen, got, want = traced(monkeypatch, mod.kda_bwd_prep3g, _prep_args(name), grid, ["bt"],
                             dict(BASE, DECAY=3, PREFETCH=1), [mod.decayed_chunks], TENSORS)
    return seen, got, want, int(np.prod(grid))


@SLOW
def test_prefetched_lines_are_in_bounds_and_are_the_decayed_phases(monkeypatch):
    """Two chunks with a 22-row tail (rows past the sequence at the tensors' end), traced:
    every prefetch address lies inside q, k or dO, three a thread less the predicated ones
    (two issued by threads 0..127, one by 128..255); per CTA the prefetched lines are the lines
    the decayed phase's 16-byte loads read (`decayed_chunks`, DECAY=3: the plans')."""
    seen, got, want, ctas = _traced(monkeypatch, P3, "t86_h1_deep")
    assert len(seen) == 3 * 128 * ctas
    assert {b for _, _, b in seen} == TENSORS
    assert sorted(want) == list(range(ctas))
    for c in range(ctas):
        assert got[c] == want[c], (c, len(got[c] - want[c]), len(want[c] - got[c]))
        assert len(want[c]) <= 3 * 64 * 256 // LINE


@SLOW
def test_unclamped_rows_are_caught(tmp_path, monkeypatch):
    """The check can fail: `prefetch_decayed` with its rows not clamped to the sequence, on two
    chunks with a 22-row tail at the tensors' end: the tail's CTA prefetches past the tensors'
    ends and its lines are not the loads' (the full chunk's are)."""
    mut = mutant(tmp_path, "kda_bwd_prep3", [(
        "return ck.row((t >> 1) & (C - 1)) + ((t & 1) << 6)",
        "return ((ck.tok0 + ((t >> 1) & (C - 1))) * ck.H + ck.h) * K + ((t & 1) << 6)")])
    seen, got, want, _ = _traced(monkeypatch, mut, "t86_h1_deep")
    assert None in {b for _, _, b in seen}
    assert got[0] == want[0] and got[1] != want[1]


@pytest.mark.parametrize("nxt", [0, 132])
def test_next_adds_three_prefetches_before_the_forward_walk(nxt):
    """NEXT: q's and g_raw's rows (threads 0..127) and k's (128..255) of the next wave's chunk,
    predicated on that CTA existing: three instructions after PREFETCH=1's three, before the
    forward walk's last mma.sync."""
    ptx = P3.kda_bwd_prep3g.ptx("sm_90a", **BASE, DECAY=3, PREFETCH=1, NEXT=nxt)
    lines = [ln.strip() for ln in ptx.splitlines()
             if ln.strip() and not ln.strip().startswith(".")]
    at = [i for i, ln in enumerate(lines) if re.match(r"(@!?%p\d+\s+)?prefetch", ln)]
    assert len(at) == 3 + (3 if nxt else 0), at
    if nxt:
        mma = [i for i, ln in enumerate(lines) if ln.startswith("mma.sync")]
        assert max(at[:3]) < min(at[3:]) and max(mma) > max(at)


def test_next_is_refused_without_the_staged_rows():
    with pytest.raises(Exception, match="NEXT must be a CTA count >= 0 and needs STAGE=1"):
        P3.kda_bwd_prep3g.ptx("sm_90a", PREP=2, NEXT=132)


@SLOW
def test_next_prefetches_the_rows_of_the_cta_a_wave_ahead(monkeypatch):
    """Two chunks with a 22-row tail, NEXT=1 and PREFETCH=0: CTA 0 prefetches exactly the lines
    CTA 1's `rows` phase copies (kda_bwd_local.StagedRows: its chunk's rows of q, k and g_raw,
    rows past the sequence clamped alike), all inside q, k and g_raw; CTA 1 prefetches
    nothing."""
    name = "t86_h1_deep"
    grid = LT.SUITE.grid(case(name))
    _, got, want = traced(monkeypatch, P3.kda_bwd_prep3g, _prep_args(name), grid, ["bt"],
                          dict(BASE, DECAY=3, NEXT=1), [P3.BL.StagedRows.stage],
                          {"q", "k", "g_raw"})
    assert sorted(got) == [0] and sorted(want) == [0, 1]
    assert got[0] == want[1] and len(want[1]) == 3 * 22 * 2
