"""kda_bwd_local_lg PREFETCH (zoo/kernels/kda_bwd_local_tc.py `_prefetch`): ``prefetch.global.L2``
of every 128-byte line the elementwise terms load, at the launch's start (1) or right before the
pair products (2). With the plan's other constants (kda_fwd_bwd LAUNCH_CONSTS["tc24"]: ROLL=1)
both give PREFETCH=0's outputs bit for bit (two chunks with a 22-row tail; a varlen pack of two
heads with a one-token sequence) and numsim finds them clean; sync_check is clean; the PTX has
the five prefetches (four a thread) only where asked; and, traced in numsim, every prefetched
address lies inside its tensor and each CTA's prefetched lines are exactly the lines its
`_tile_terms` loads read (rows past the sequence clamped alike)."""

import functools
import re

import numpy as np
import pytest

from tests.zoo._kda_prep import LT, P3, prep_args
from tests.zoo._kda_prep import case as _case
from tests.zoo._prefetch import LINE, traced
from tests.zoo._zoo import mutant, run_clean
from tests.zoo.zoo_modules import load

FB = load("kda_fwd_bwd")
SLOW = pytest.mark.slow   # numsim of 256 threads: a few s a chunk and kernel
PLAN = FB.LAUNCH_CONSTS["tc24"][1]          # piece 3's constants in the current plan


def _local_inputs(case):
    """Piece 3's inputs of `case` with `ptile` and `gtile` from kda_bwd_prep3g on the same raw
    inputs (a fresh dict of one cached run a case: numsim copies its inputs)."""
    return dict(_local_inputs_of(case.name))


@functools.lru_cache(maxsize=4)
def _local_inputs_of(name):
    case = _case(name)
    x = LT.SUITE.make_inputs(case, 0)
    tiles = run_clean(P3.kda_bwd_prep3g, prep_args(x), LT.SUITE.grid(case), ["ptile", "gtile"],
                      {"PREP": 2})
    return dict(x, **tiles)


def _local(x, case, consts):
    import tirxh_numsim as ns
    return ns.run(LT.kda_bwd_local_lg, x, grid=LT.SUITE.grid(case), outputs=list(LT.OUTPUTS),
                  consts=consts)


def test_plan_uses_piece3_with_roll_1():
    """The constants these tests take as the plan's (if the plan moves on, so should they)."""
    assert PLAN == {"ROLL": 1}
    assert FB.PLANS["tc24"][2].name == LT.kda_bwd_local_lg.name


@pytest.mark.parametrize("prefetch", [0, 1, 2])
def test_the_ptx_has_five_prefetches_only_where_asked(prefetch):
    """Three pieces' lines and one of k's or q's (predicated on the warp): five instructions, four
    issued a thread; none with PREFETCH=0. PREFETCH=1 before the gate tiles' bulk copies (the
    launch's start), PREFETCH=2 after them, with the pair products' mma.sync still to come."""
    ptx = LT.kda_bwd_local_lg.ptx("sm_90a", **PLAN, PREFETCH=prefetch)
    lines = [ln.strip() for ln in ptx.splitlines()
             if ln.strip() and not ln.strip().startswith(".")]
    at = [i for i, ln in enumerate(lines) if re.match(r"(@!?%p\d+\s+)?prefetch", ln)]
    assert len(at) == (0 if prefetch == 0 else 5), at
    assert all(re.match(r"(@!?%p\d+\s+)?prefetch\.global\.L2\s+\[", lines[i]) for i in at)
    assert sum(lines[i].startswith("@") for i in at) == (2 if prefetch else 0)
    if prefetch:
        bulk = min(i for i, ln in enumerate(lines) if ln.startswith("cp.async.bulk"))
        assert (max(at) < bulk) if prefetch == 1 else (min(at) > bulk)
        if prefetch == 2:
            mmas = [i for i, ln in enumerate(lines) if ln.startswith("mma.sync")]
            assert any(i > max(at) for i in mmas)         # the pair products follow


@SLOW
@pytest.mark.parametrize("name", ["t86_h1_deep", "pack_9_1_64_h2"])
def test_prefetch_changes_no_bit(name):
    """PREFETCH=1, and 2 with NEXT=1 (hints: no data effect) give every output of PREFETCH=0 to
    the last bit (two chunks with a 22-row tail; a varlen pack of two heads with a one-token
    sequence), and numsim finds them clean."""
    case = _case(name)
    x = _local_inputs(case)
    want = _local(x, case, dict(PLAN))
    assert want.verdict == "clean", want.summary()
    for prefetch in (1, 2):
        got = _local(x, case, dict(PLAN, PREFETCH=prefetch, NEXT=prefetch // 2))
        assert got.verdict == "clean", got.summary()
        for n in LT.OUTPUTS:
            assert np.array_equal(got.outputs[n], want.outputs[n]), (prefetch, n)


@SLOW
def test_sync_check_is_clean_with_prefetch():
    analyze = pytest.importorskip("tirxh_sync_check.analyze")
    case = _case("t20_h1_deep")
    x = _local_inputs(case)
    for r in analyze.check_kernel(LT.kda_bwd_local_lg, x, consts=dict(PLAN, PREFETCH=1, NEXT=1),
                                  grid=LT.SUITE.grid(case)):
        assert r.verdict == "clean", [f.message for f in r.findings]


def _traced(monkeypatch, mod, case, consts):
    """numsim of `mod`'s kda_bwd_local_lg on `case`, traced (tests/zoo/_prefetch.traced): the
    recorded prefetches, per CTA the lines prefetched and the lines `_tile_terms`' global loads
    read, and the number of CTAs."""
    seen, got, want = traced(monkeypatch, mod.kda_bwd_local_lg, _local_inputs(case),
                             LT.SUITE.grid(case), list(LT.OUTPUTS), consts, [mod._tile_terms],
                             TENSORS)
    return seen, got, want, int(np.prod(LT.SUITE.grid(case)))


TENSORS = {"q", "k", "dqe", "dke", "dkl"}


@SLOW
@pytest.mark.parametrize("prefetch", [2])   # the plans' (1 differs only in where it stands)
def test_prefetched_lines_are_in_bounds_and_are_the_elementwise_lines(monkeypatch, prefetch):
    """A varlen pack (two heads, three chunks of 9, 1 and 64 rows: rows past the sequence in
    two of them), traced: every prefetch address lies inside q, k, dqe, dke or dkl, 4 a thread;
    per CTA the set of prefetched 128-byte lines equals the set of lines `_tile_terms`' global
    loads read (a line missed, one too many, another chunk's or head's, or a row not clamped
    fails: `test_unclamped_rows_are_caught`)."""
    seen, got, want, ctas = _traced(monkeypatch, LT, _case("pack_9_1_64_h2"),
                                    dict(PLAN, PREFETCH=prefetch))
    assert len(seen) == 4 * 256 * ctas
    assert {b for _, _, b in seen} == TENSORS, {b for _, _, b in seen}
    assert sorted(want) == list(range(ctas))
    pieces = 3 * 64 * 512 // LINE                     # the pieces' lines; k's and q's fewer
    for c in range(ctas):                             # where rows are clamped
        assert got[c] == want[c], (c, len(got[c] - want[c]), len(want[c] - got[c]))
        assert pieces < len(want[c]) <= pieces + 2 * 64 * 256 // LINE


@SLOW
def test_unclamped_rows_are_caught(tmp_path, monkeypatch):
    """The check can fail: `_prefetch` with k's and q's rows not clamped to the sequence, on two
    chunks with a 22-row tail at the tensors' end: the tail's CTA prefetches past q's and k's
    ends (the bounds check sees it) and its lines are not the loads' (the full chunk's are)."""
    mut = mutant(tmp_path, "kda_bwd_local_tc", [(
        "off = ck.row((t >> 1) & (C - 1)) + ((t & 1) << 6)",
        "off = ((ck.tok0 + ((t >> 1) & (C - 1))) * ck.H + ck.h) * K + ((t & 1) << 6)")])
    seen, got, want, _ = _traced(monkeypatch, mut, _case("t86_h1_deep"),
                                    dict(PLAN, PREFETCH=1))
    assert None in {b for _, _, b in seen}             # past the tensors' end
    assert got[0] == want[0] and got[1] != want[1]


@pytest.mark.parametrize("nxt", [0, 132])
def test_next_adds_nine_prefetches_before_dq_dk(nxt):
    """NEXT: six lines a thread of the next wave's gate tiles, stored T, dtb and dm (1,422
    lines: rounds 5 and 6 split between runs, nine instructions), all predicated on that CTA
    existing, after PREFETCH=2's five and a barrier (the scan's), before dq_dk's stores."""
    ptx = LT.kda_bwd_local_lg.ptx("sm_90a", **PLAN, PREFETCH=2, NEXT=nxt)
    lines = [ln.strip() for ln in ptx.splitlines()
             if ln.strip() and not ln.strip().startswith(".")]
    at = [i for i, ln in enumerate(lines) if re.match(r"(@!?%p\d+\s+)?prefetch", ln)]
    assert len(at) == 5 + (9 if nxt else 0), at
    if nxt:
        last = at[5:]
        assert all(lines[i].startswith("@") for i in last)
        bars = [i for i, ln in enumerate(lines) if ln.startswith("bar.sync")]
        assert any(max(at[:5]) < i < min(last) for i in bars)     # after the elementwise's
        assert any(ln.startswith("st.global") for ln in lines[max(last):])


def test_next_is_refused_with_the_image_layout():
    with pytest.raises(Exception, match="NEXT must be a CTA count >= 0 and needs IMG=0"):
        LT.kda_bwd_local_lg.ptx("sm_90a", IMG=1, NEXT=132)


NEXT_TENSORS = {"gtile", "ptile", "dtb", "dm"}


def _traced_next(monkeypatch, mod, case, nxt):
    """numsim of `mod`'s kda_bwd_local_lg with NEXT=`nxt` on `case`, traced: the prefetches, per
    CTA the lines prefetched and those its `gates_load` (the gate tiles' bulk copies,
    kda_bwd_prep_tiles._bulk_in, and T's loads, _load_matrix) and its dtb and dm staging
    (`_stage`) read."""
    seen, got, want = traced(monkeypatch, mod.kda_bwd_local_lg, _local_inputs(case),
                             LT.SUITE.grid(case), list(LT.OUTPUTS), dict(PLAN, NEXT=nxt),
                             [mod.PTL._bulk_in, mod.PTL._load_matrix, mod._stage], NEXT_TENSORS)
    return seen, got, want, int(np.prod(LT.SUITE.grid(case)))


@SLOW
def test_next_prefetches_the_lines_of_the_cta_a_wave_ahead(monkeypatch):
    """A varlen pack (two heads, three chunks: 6 CTAs) with NEXT=2: CTA c prefetches exactly
    the lines CTA c + 2's `gates_load` and dtb and dm staging read (1,038 of gate tiles, 128 of
    T, of dtb and of dm), all inside gtile, ptile, dtb and dm; CTAs 4 and 5 prefetch
    nothing."""
    seen, got, want, ctas = _traced_next(monkeypatch, LT, _case("pack_9_1_64_h2"), 2)
    assert {b for _, _, b in seen} == NEXT_TENSORS
    assert sorted(got) == list(range(ctas - 2)) and sorted(want) == list(range(ctas))
    for c in range(ctas - 2):
        assert got[c] == want[c + 2], (c, len(got[c] - want[c + 2]), len(want[c + 2] - got[c]))
        assert len(want[c + 2]) == LT.GATE_LINES + 3 * LT.T_LINES


# --- GRAW=1 (plan "tc37"): g_raw's rows for the scan, with PREFETCH's lines ----------------------

def test_graw_adds_one_prefetch_and_needs_prefetch():
    """One more instruction (warps 0..3: predicated), only with PREFETCH; refused without."""
    counts = []
    for graw in (0, 1):
        ptx = LT.kda_bwd_local_lg.ptx("sm_90a", **PLAN, PREFETCH=2, GRAW=graw)
        counts.append(sum(1 for ln in ptx.splitlines()
                          if re.match(r"\s*(@!?%p\d+\s+)?prefetch", ln)))
    assert counts == [5, 6]
    with pytest.raises(Exception, match="GRAW=1 adds g_raw's rows to PREFETCH's lines"):
        LT.kda_bwd_local_lg.ptx("sm_90a", **PLAN, GRAW=1)


@SLOW
def test_graw_changes_no_bit_and_prefetches_the_scans_rows(monkeypatch):
    """A varlen pack (two heads, chunks of 9, 1 and 64 rows: rows past the sequence clamped),
    traced: GRAW=1's outputs are GRAW=0's bit for bit, and per CTA the g_raw lines it
    prefetches are exactly the lines the launch's g_raw loads (the scan's) read, all inside
    g_raw."""
    case = _case("pack_9_1_64_h2")
    consts = dict(PLAN, PREFETCH=2)
    want_out = _local(_local_inputs(case), case, consts)
    seen, _, want = traced(monkeypatch, LT.kda_bwd_local_lg, _local_inputs(case),
                           LT.SUITE.grid(case), list(LT.OUTPUTS), dict(consts, GRAW=1), None,
                           {"g_raw"})
    got = {}
    for c, a, b in seen:
        assert b is not None, a                         # every prefetch inside some tensor
        if b == "g_raw":
            got.setdefault(c, set()).add(a // LINE)
    ctas = int(np.prod(LT.SUITE.grid(case)))
    assert sorted(got) == sorted(want) == list(range(ctas))
    for c in range(ctas):
        assert got[c] == want[c], (c, len(got[c] - want[c]), len(want[c] - got[c]))
    out = _local(_local_inputs(case), case, dict(consts, GRAW=1))
    for n in LT.OUTPUTS:
        assert np.array_equal(out.outputs[n], want_out.outputs[n]), n
