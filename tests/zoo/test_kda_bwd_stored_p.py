"""P stored by the prep and loaded by piece 3 (plan "tc36": kda_bwd_prep3g PSTORE=1,
kda_bwd_local_lg PLOAD=1; zoo/kernels/kda_bwd_prep_tiles.py GATE_P0, `GateStore.store_p`,
`load_p`). The layout keeps the gate tiles' bulk copies aligned; the prep's other outputs and
the gate's words are PSTORE=0's bit for bit and its P slot is strict-lower; piece 3 on the
stored P gives PLOAD=0's outputs within rounding (P enters only dbeta's dA o P term: the other
outputs bit for bit); a P of another chunk is caught; sync_check is clean on both kernels; the
pair products' mma.sync leave piece 3's PTX; NEXT prefetches P's lines with the gate tiles'."""

import functools
import re

import numpy as np
import pytest

from tests.zoo._kda_prep import LT, P3, PTL, prep_args
from tests.zoo._kda_prep import case as _case
from tests.zoo._prefetch import traced
from tests.zoo._zoo import mutant, run_clean
from tests.zoo.zoo_modules import load

FB = load("kda_fwd_bwd")
SLOW = pytest.mark.slow   # numsim of 256 threads: a few s a chunk and kernel
PREP = FB.PLAN_CONSTS["tc36"]                # the plan's prep, PSTORE=1 included
LOCAL = FB.LAUNCH_CONSTS["tc36"][1]          # its piece 3, PLOAD=1 included
C = 64


def test_the_plan_stores_and_loads_p():
    assert PREP["PSTORE"] == 1 and LOCAL["PLOAD"] == 1
    assert dict(PREP, PSTORE=0) == dict(FB.PLAN_CONSTS["tc35"], PSTORE=0)
    assert dict(LOCAL, PLOAD=0) == dict(FB.LAUNCH_CONSTS["tc35"][1], PLOAD=0)


def test_p_follows_the_gate_words_on_a_line_and_keeps_the_copies_aligned():
    assert PTL.GATE_P0 == PTL.GATE_WORDS and PTL.GATE_WORDS_P == PTL.GATE_WORDS + C * C
    assert PTL.GATE_P0 * 4 % 128 == 0 and PTL.GATE_WORDS_P * 4 % 16 == 0
    assert (PTL.gate_words(), PTL.gate_words(True)) == (PTL.GATE_WORDS, PTL.GATE_WORDS_P)
    assert PTL.gate_outputs(2, 3, p=True)["gtile"].shape == (3, 2, PTL.GATE_WORDS_P)
    assert PTL.gate_outputs(2, 3)["gtile"].shape == (3, 2, PTL.GATE_WORDS)


def _with_p(args):
    """`prep_args` with `gtile` sized for P (GATE_WORDS_P a chunk and head)."""
    chunks, H = args["gtile"].shape[:2]
    return dict(args, **PTL.gate_outputs(H, chunks, p=True))


@functools.lru_cache(maxsize=4)
def _preps(name):
    """(piece 3's inputs, the prep's outputs with PSTORE=0, with PSTORE=1) on `name`."""
    case = _case(name)
    x = LT.SUITE.make_inputs(case, 0)
    outs = list(P3.OUTPUTS) + ["ptile", "gtile"]
    grid = LT.SUITE.grid(case)
    base = run_clean(P3.kda_bwd_prep3g, prep_args(x), grid, outs, dict(PREP, PSTORE=0))
    stored = run_clean(P3.kda_bwd_prep3g, _with_p(prep_args(x)), grid, outs, PREP)
    return x, base, stored


@SLOW
@pytest.mark.parametrize("name", ["t86_h1_deep", "pack_9_1_64_h2"])
def test_the_prep_stores_a_strict_lower_p_and_changes_nothing_else(name):
    """Two chunks with a 22-row tail; a varlen pack of two heads with a one-token sequence:
    every output and the gate's words of PSTORE=1 are PSTORE=0's bit for bit; each stored P is
    zero on and above the diagonal, finite, and not all zero where the chunk has 2+ rows."""
    x, base, stored = _preps(name)
    for n in P3.OUTPUTS + ("ptile",):
        assert np.array_equal(stored[n], base[n]), n
    g = stored["gtile"]
    assert np.array_equal(g[..., :PTL.GATE_WORDS], base["gtile"])
    p = g[..., PTL.GATE_P0:].reshape(*g.shape[:2], C, C)
    assert np.isfinite(p).all()
    assert not np.triu(p).any()
    rows = np.asarray(x["chunk_rows"])
    for c in range(p.shape[0]):
        assert np.abs(p[c]).max() > 0 if rows[c] > 1 else not p[c].any(), c


def _local(x, case, consts, mod=LT):
    import tirxh_numsim as ns
    res = ns.run(mod.kda_bwd_local_lg, x, grid=LT.SUITE.grid(case), outputs=list(LT.OUTPUTS),
                 consts=consts)
    assert res.verdict == "clean", res.summary()
    return res.outputs


@SLOW
@pytest.mark.parametrize("name", ["t86_h1_deep", "pack_9_1_64_h2"])
def test_piece3_on_the_stored_p_is_its_own_within_rounding(name):
    """Piece 3 with PLOAD=1 on the prep's stored P against PLOAD=0 (its own pair products) on
    the same gate tiles: dbeta within 1e-6 of its largest value (the prep folds the decay
    factors into KD's fragment, piece 3 into KL's), every other output bit for bit (P enters
    only dbeta's dA o P term)."""
    case = _case(name)
    x, base, stored = _preps(name)
    want = _local(dict(x, ptile=base["ptile"], gtile=base["gtile"]), case,
                  dict(LOCAL, PLOAD=0))
    got = _local(dict(x, ptile=stored["ptile"], gtile=stored["gtile"]), case, LOCAL)
    for n in LT.OUTPUTS:
        a, b = np.asarray(got[n], np.float64), np.asarray(want[n], np.float64)
        if n == "dbeta":
            assert np.abs(a - b).max() <= 1e-6 * np.abs(b).max(), n
        else:
            assert np.array_equal(a, b), n


@SLOW
def test_another_chunks_p_is_caught(tmp_path):
    """The check can fail: piece 3 loading the next (chunk, head)'s P (the last wraps to the
    first) on the varlen pack moves dbeta past the rounding bound above."""
    case = _case("pack_9_1_64_h2")
    x, base, stored = _preps(case.name)
    mut = mutant(tmp_path, "kda_bwd_local_tc", [(
        "PTL.load_p(sm.p, hc, gtile)",
        "PTL.load_p(sm.p, (hc + 1) % (ck.H * T.nctaid.y), gtile)")])
    got = _local(dict(x, ptile=stored["ptile"], gtile=stored["gtile"]), case, LOCAL, mod=mut)
    want = _local(dict(x, ptile=base["ptile"], gtile=base["gtile"]), case,
                  dict(LOCAL, PLOAD=0))
    a, b = (np.asarray(v["dbeta"], np.float64) for v in (got, want))
    assert np.abs(a - b).max() > 1e-3 * np.abs(b).max()


@SLOW
def test_sync_check_is_clean_on_both_kernels():
    """One 20-row chunk: the prep's P stores read sP between its last barrier and the split's
    first (reads only); piece 3's P loads under the gate tiles' copies, before the barrier the
    pairs phase starts behind."""
    analyze = pytest.importorskip("tirxh_sync_check.analyze")
    case = _case("t20_h1_deep")
    x, _, stored = _preps(case.name)
    runs = [(P3.kda_bwd_prep3g, _with_p(prep_args(x)), PREP),
            (LT.kda_bwd_local_lg, dict(x, ptile=stored["ptile"], gtile=stored["gtile"]),
             LOCAL)]
    for kernel, args, consts in runs:
        for r in analyze.check_kernel(kernel, args, consts=consts, grid=LT.SUITE.grid(case)):
            assert r.verdict == "clean", (kernel.name, [f.message for f in r.findings])


def _count(ptx, op):
    return sum(1 for ln in ptx.splitlines() if re.match(rf"\s*(@!?%p\d+\s+)?{op}\b", ln))


def test_piece3s_pair_products_leave_its_ptx():
    """PLOAD=1 drops the pairs phase's split products (two column blocks of two n-tiles, 3
    mma.sync a product, in one runtime loop over the k-steps: 12 in the PTX) and adds P's
    loads; the prep's PSTORE=1 adds its stores and no mma.sync."""
    own, loaded = (LT.kda_bwd_local_lg.ptx("sm_90a", **dict(LOCAL, PLOAD=p)) for p in (0, 1))
    assert _count(own, "mma.sync") - _count(loaded, "mma.sync") == 2 * 2 * 3
    assert _count(loaded, "ld.global") > _count(own, "ld.global")
    base, stored = (P3.kda_bwd_prep3g.ptx("sm_90a", **dict(PREP, PSTORE=p)) for p in (0, 1))
    assert _count(base, "mma.sync") == _count(stored, "mma.sync")
    assert _count(stored, "st.global") > _count(base, "st.global")


@SLOW
def test_next_prefetches_the_stored_p_of_the_cta_a_wave_ahead(monkeypatch):
    """A varlen pack (6 CTAs) with NEXT=2 and PLOAD=1: CTA c prefetches exactly the lines CTA
    c + 2's `gates_load` (the gate tiles' copies, T's and P's loads) and dtb and dm staging
    read: 128 lines more than without P."""
    case = _case("pack_9_1_64_h2")
    x, _, stored = _preps(case.name)
    tensors = {"gtile", "ptile", "dtb", "dm"}
    seen, got, want = traced(monkeypatch, LT.kda_bwd_local_lg,
                             dict(x, ptile=stored["ptile"], gtile=stored["gtile"]),
                             LT.SUITE.grid(case), list(LT.OUTPUTS), dict(LOCAL, NEXT=2, PREFETCH=0),
                             [LT.PTL._bulk_in, LT.PTL._load_matrix, LT._stage], tensors)
    ctas = int(np.prod(LT.SUITE.grid(case)))
    assert {b for _, _, b in seen} == tensors
    assert sorted(got) == list(range(ctas - 2)) and sorted(want) == list(range(ctas))
    for c in range(ctas - 2):
        assert got[c] == want[c + 2], (c, len(got[c] - want[c + 2]), len(want[c + 2] - got[c]))
        assert len(want[c + 2]) == LT.GATE_LINES + 4 * LT.T_LINES
