"""kda_bwd_local_lg GSTAGE=1 (plan "tc39"; zoo/kernels/kda_bwd_local_tc.py `ScanStage`): the
scan's operands (g_raw's C rows, dgs's and dt_bias's rows, A_log) copied into shared memory by
``cp.async`` once `da` is behind its barrier, the scan reading them there. With the plan's
other constants it gives tc38's piece 3 outputs (GRAW=1) bit for bit on two chunks with a
22-row tail and on a varlen pack with a one-token sequence, numsim clean; sync_check is clean
with it and finds the race when the copies' wait is dropped; the PTX has the copies, one
group, its wait before the scan's barrier and no global load left in the scan; GSTAGE with
GRAW is refused. QKSTAGE=1 (plan "tc40"): q's and k's rows too, after the pair products' barrier,
for the row dots and dq_dk: bit for bit tc39, sync_check clean, its PTX a second group of eight
copies and no 16-byte global load left in the row dots; refused without GSTAGE."""

import re

import numpy as np
import pytest

from tests.zoo._kda_prep import LT
from tests.zoo._kda_prep import case as _case
from tests.zoo._zoo import mutant
from tests.zoo.test_kda_bwd_stored_p import _preps
from tests.zoo.zoo_modules import load

FB = load("kda_fwd_bwd")
SLOW = pytest.mark.slow       # numsim of 256 threads: a few s a chunk and kernel
TC38 = FB.LAUNCH_CONSTS["tc38"][1]
TC39 = FB.LAUNCH_CONSTS["tc39"][1]
TC40 = FB.LAUNCH_CONSTS["tc40"][1]


def _lines(consts):
    ptx = LT.kda_bwd_local_lg.ptx("sm_90a", **consts)
    return [ln.strip() for ln in ptx.splitlines() if ln.strip() and not ln.strip().startswith(".")]


def _op(ln):
    return re.sub(r"^@!?%p\d+\s+", "", ln)


def test_plan_tc39_is_tc38s_piece_3_with_gstage_for_graw():
    assert TC39 == dict({n: v for n, v in TC38.items() if n != "GRAW"}, GSTAGE=1)


def test_the_ptx_stages_the_scans_operands_in_one_group():
    """Seven copies a thread's code (four 16-byte pieces of g_raw's rows, one of dgs's row, one
    of dt_bias's, A_log's 4-byte word), one commit and one wait, the wait before the last
    barrier ahead of the scan's dg stores; sixteen fewer 2-byte global loads (a rolled trip of
    g_raw's rows) and none of A_log's and dt_bias's words at the scan."""
    old, new = _lines(TC38), _lines(TC39)
    def copy(ln):
        return re.match(r"cp\.async\.c[ag]\.", _op(ln))
    copies = [i for i, ln in enumerate(new) if copy(ln)]
    assert len(copies) == 7 and not any(copy(ln) for ln in old)
    assert sum(_op(new[i]).startswith("cp.async.ca.shared.global") for i in copies) == 1
    assert [ln for ln in new if ln.startswith("cp.async.commit_group")] == \
        ["cp.async.commit_group;"]
    wait = [i for i, ln in enumerate(new) if ln.startswith("cp.async.wait_group")]
    assert len(wait) == 1 and wait[0] > max(copies)
    bars = [i for i, ln in enumerate(new) if ln.startswith("bar.sync")]
    nxt = min(i for i in bars if i > wait[0])
    assert not any(ln.startswith("mma.sync") for ln in new[wait[0]:nxt])   # the elementwise
    dg = [i for i, ln in enumerate(new) if _op(ln).startswith("st.global.f32")]   # is before
    assert any(i > nxt for i in dg)

    def u16(lines):
        return sum(1 for ln in lines if re.match(r"ld\.global\.nc\.(u16|b16)", _op(ln)))
    assert u16(old) - u16(new) == 16


def test_gstage_with_graw_is_refused():
    with pytest.raises(Exception, match="GSTAGE=1 copies g_raw's rows into shared memory"):
        LT.kda_bwd_local_lg.ptx("sm_90a", **dict(TC39, GRAW=1))


def _inputs(name):
    """Piece 3's inputs of case `name` with the plan's prep's (PSTORE=1) `ptile` and `gtile`
    (a fresh dict: numsim copies its inputs)."""
    x, _, stored = _preps(name)
    return dict(x, ptile=stored["ptile"], gtile=stored["gtile"])


def _local(name, consts):
    import tirxh_numsim as ns
    return ns.run(LT.kda_bwd_local_lg, _inputs(name), grid=LT.SUITE.grid(_case(name)),
                  outputs=list(LT.OUTPUTS), consts=consts)


@SLOW
@pytest.mark.parametrize("name", ["t86_h1_deep", "pack_9_1_64_h2"])
@pytest.mark.parametrize("base, plan", [(TC38, TC39), (TC39, TC40)], ids=["gstage", "qkstage"])
def test_staging_changes_no_bit(name, base, plan):
    """tc39's piece 3 against tc38's (GSTAGE), tc40's against tc39's (QKSTAGE): every output to
    the last bit, both numsim-clean."""
    want, got = _local(name, dict(base)), _local(name, dict(plan))
    assert want.verdict == "clean" and got.verdict == "clean", got.summary()
    for n in LT.OUTPUTS:
        assert np.array_equal(got.outputs[n], want.outputs[n]), n


def _sync(mod, consts):
    analyze = pytest.importorskip("tirxh_sync_check.analyze")
    name = "t20_h1_deep"
    return analyze.check_kernel(mod.kda_bwd_local_lg, _inputs(name), consts=consts,
                                grid=LT.SUITE.grid(_case(name)))


@SLOW
@pytest.mark.parametrize("plan", [TC39, TC40], ids=["gstage", "qkstage"])
def test_sync_check_is_clean_with_staging(plan):
    for r in _sync(LT, dict(plan, NEXT=1)):
        assert r.verdict == "clean", [f.message for f in r.findings]


@SLOW
def test_a_dropped_wait_is_a_race(tmp_path):
    """The check can fail: without the copies' ``cp.async.wait_group`` the scan's shared reads
    race the copies' writes (the barrier alone does not order an async copy)."""
    mut = mutant(tmp_path, "kda_bwd_local_tc", [("        staged.wait()\n", "        pass\n")])
    verdicts = [r.verdict for r in _sync(mut, dict(TC39, NEXT=1))]
    assert any(v != "clean" for v in verdicts), verdicts


# --- QKSTAGE=1 (plan "tc40"): q's and k's rows for the row dots and dq_dk --------------------------

def test_plan_tc40_is_tc39s_piece_3_with_qkstage():
    assert TC40 == dict(TC39, QKSTAGE=1)


def test_qkstage_is_a_second_group_after_the_pair_products():
    """Eight more copies (four of q's rows, four of k's) after the last mma.sync (the products'
    barrier between), a second commit, still one wait; the row dots' 32 ``ld.global.nc.v4``
    and dq_dk's 2-byte loads of q and k gone."""
    old, new = _lines(TC39), _lines(TC40)

    def copies(lines):
        return [i for i, ln in enumerate(lines) if re.match(r"cp\.async\.c[ag]\.", _op(ln))]
    assert len(copies(new)) == len(copies(old)) + 8 == 15
    mmas = [i for i, ln in enumerate(new) if ln.startswith("mma.sync")]
    later = [i for i in copies(new) if i > max(mmas)]
    assert len(later) == 8
    assert any(ln.startswith("bar.sync") for ln in new[max(mmas):min(later)])
    assert sum(ln.startswith("cp.async.commit_group") for ln in new) == 2
    assert sum(ln.startswith("cp.async.wait_group") for ln in new) == 1

    def count(lines, pat):
        return sum(1 for ln in lines if re.match(pat, _op(ln)))
    assert count(old, r"ld\.global\.nc\.v4") - count(new, r"ld\.global\.nc\.v4") > 0
    assert count(new, r"ld\.global\.nc\.(u16|b16)") < count(old, r"ld\.global\.nc\.(u16|b16)")


def test_qkstage_needs_gstage():
    with pytest.raises(Exception, match="QKSTAGE=1 adds q's and k's rows to GSTAGE's"):
        LT.kda_bwd_local_lg.ptx("sm_90a", **dict(TC38, QKSTAGE=1))
