"""The gate's tiles copied out by kda_bwd_prep3g and loaded by kda_bwd_local_lg (plan "tc6" of
kda_fwd_bwd; zoo/kernels/kda_bwd_prep_tiles.py, GateStore and load_gates): both kernels' shared
memory keeps the copied ranges where the copies assume; prep3g's outputs are prep3s's bit for
bit; piece 3 from the copied tiles is kda_bwd_local_ld bit for bit (one chunk, two chunks of
saturated gates, a varlen pack of two heads); another chunk's tiles are caught; sync_check is
clean on both kernels, and calls the prep without its wait for the copy or its proxy fence,
and piece 3 without its wait on the mbarrier, a race; the prep's STAGE=1 (q, k, g_raw staged
for the norms and gate: plan "tc7") changes no bit, is clean, and its wait is load-bearing;
ROLL=1 (the walks' products and the gate's rows as runtime loops: plan "tc10") and ROLL=2
(more of its code rolled: plan "tc12") change no bit and are clean; so does piece 3's ROLL=1
(its scan, row dots and dq_dk as runtime loops: plan "tc11")."""

import functools
import sys

import numpy as np
import pytest

from tirxh.api import TraceError

from tests.zoo._kda_prep import case as _case
from tests.zoo._kda_prep import prep_args as _prep_args
from tests.zoo._zoo import mutant, run_clean
from tests.zoo.zoo_modules import assert_matches, load

P3 = load("kda_bwd_prep3")
PTL = load("kda_bwd_prep_tiles")
LT = load("kda_bwd_local_tc")
SLOW = pytest.mark.slow   # numsim of 256 threads: a few s a chunk and kernel


def _offsets(kernel, consts):
    return {v.name: v.offset for v in kernel.specialize(**consts).shared}


def test_both_kernels_keep_the_copied_ranges_where_the_copies_assume():
    """KL, KD, QL, G: four [C, K + 1] f32 tiles from offset 0, one after another; rn [2, C]
    then beta [C] right behind it: one bulk copy each, the same image in both kernels."""
    tile = 64 * 129 * 4
    prep = _offsets(P3.kda_bwd_prep3g, {"PREP": 2})
    local = _offsets(LT.kda_bwd_local_lg, {})
    assert [prep[f"sTile{i}"] for i in range(4)] == [0, tile, 2 * tile, 3 * tile]
    assert [local[n] for n in ("sKL", "sKD", "sQL", "sGc")] == [0, tile, 2 * tile, 3 * tile]
    for offs in (prep, local):
        assert offs["sBeta"] == offs["sRn"] + 2 * 64 * 4 and offs["sRn"] % 16 == 0
    assert PTL.GATE_TILES * 4 == 4 * tile and PTL.GATE_WORDS == 4 * 64 * 129 + 3 * 64
    assert PTL.GATE_WORDS * 4 % 16 == 0   # every (chunk, head)'s image 16-byte aligned


def _run(kernel, x, case, outputs, consts):
    return run_clean(kernel, x, LT.SUITE.grid(case), outputs, consts)


def _local_inputs(case, prep=None):
    """Piece 3's inputs of `case` with `ptile` and `gtile` from kda_bwd_prep3g (or `prep`) on
    the same raw inputs."""
    x = LT.SUITE.make_inputs(case, 0)
    tiles = _run(prep or P3.kda_bwd_prep3g, _prep_args(x), case, ["ptile", "gtile"],
                 {"PREP": 2})
    return dict(x, **tiles)


def _local(kernel, x, case, consts=None):
    import tirxh_numsim as ns
    return ns.run(kernel, x, grid=LT.SUITE.grid(case), outputs=list(LT.OUTPUTS),
                  consts=consts or {})


@SLOW
def test_the_preps_outputs_are_prep3s_bit_for_bit():
    """The copy-out adds a padding store, a fence, two bulk copies and a barrier: the walks'
    outputs and `ptile` are kda_bwd_prep3s's to the last bit (two chunks, a 22-row tail)."""
    case = _case("t86_h1_deep")
    x = LT.SUITE.make_inputs(case, 0)
    args = _prep_args(x)
    outs = list(P3.OUTPUTS) + ["ptile"]
    got = _run(P3.kda_bwd_prep3g, args, case, outs, {"PREP": 2})
    want = _run(P3.kda_bwd_prep3s, {n: a for n, a in args.items() if n != "gtile"}, case, outs,
                {"PREP": 2})
    for n in outs:
        assert np.array_equal(got[n], want[n]), n


@SLOW
@pytest.mark.parametrize("name", ["t20_h1_deep", "t86_h1_deep", "pack_9_1_64_h2"])
def test_piece3_from_the_copied_tiles_is_local_ld_bit_for_bit(name):
    """kda_bwd_local_lg computes from the prep's own norms and gate words (the same functions on
    the same inputs), so every output equals kda_bwd_local_ld's to the last bit, and meets the
    public rule."""
    case = _case(name)
    x = _local_inputs(case)
    got = _local(LT.kda_bwd_local_lg, x, case)
    assert got.verdict == "clean", got.summary()
    assert_matches(LT.SUITE, case, got, x)
    want = _local(LT.kda_bwd_local_ld, x, case)
    for n in LT.OUTPUTS:
        assert np.array_equal(got.outputs[n], want.outputs[n]), n


@SLOW
def test_piece3_with_another_chunks_gate_tiles_is_caught(tmp_path):
    """The gate's tiles loaded one (chunk, head) off: the gradients past the public rule."""
    mut = mutant(tmp_path, "kda_bwd_local_tc", [(
        "PTL.load_gates(sm, ck.c * ck.H + ck.h, gtile, full, p)",
        "PTL.load_gates(sm, (ck.c * ck.H + ck.h + 1) % (ck.H * T.nctaid.y), gtile, full, p)")])
    case = _case("pack_9_1_64_h2")
    x = _local_inputs(case)
    res = _local(mut.kda_bwd_local_lg, x, case)
    with pytest.raises(AssertionError):
        assert_matches(LT.SUITE, case, res, x)


def _verdicts(kernel, args, consts, case):
    analyze = pytest.importorskip("tirxh_sync_check.analyze")
    return [(r.verdict, [f.message for f in r.findings])
            for r in analyze.check_kernel(kernel, args, consts=consts,
                                          grid=LT.SUITE.grid(case))]


@SLOW
def test_sync_check_is_clean_on_both_kernels():
    """One 20-row chunk: the copy engine reads the gate's tiles after the fence and the barrier
    and before the wait and barrier that `_decayed`'s stores start behind; piece 3's copies
    land before every thread's wait on the mbarrier."""
    case = _case("t20_h1_deep")
    x = _local_inputs(case)
    runs = [(P3.kda_bwd_prep3g, _prep_args(x), {"PREP": 2}),
            (LT.kda_bwd_local_lg, x, {})]
    for kernel, args, consts in runs:
        for verdict, messages in _verdicts(kernel, args, consts, case):
            assert verdict == "clean", (kernel.name, messages)


def _prep_findings(tmp_path, monkeypatch, chain, consts=None):
    """sync_check's findings on kda_bwd_prep3g of one 20-row chunk, built from a chain of
    mutants: `chain` is [(stem, edits, alias)], the first module mutated by `edits`, and each
    later one importing the one before it (`alias`, the name it imports it as) in its place:
    a kernel traces the modules its own module imported. `consts`: the prep's (PREP=2)."""
    prev = None
    for stem, edits, alias in chain:
        if prev is not None:
            edits = edits + [(f"import {prev} as {alias} ", f"import {prev}_mutant as {alias} ")]
        mod = mutant(tmp_path, stem, edits)
        monkeypatch.setitem(sys.modules, f"{stem}_mutant", mod)
        prev = stem
    case = _case("t20_h1_deep")
    verdicts = _verdicts(mod.kda_bwd_prep3g, _prep_args(LT.SUITE.make_inputs(case, 0)),
                         consts or {"PREP": 2}, case)
    return " ".join(" ".join(m) for _, m in verdicts)


@SLOW
def test_the_preps_wait_for_the_copy_is_load_bearing(tmp_path, monkeypatch):
    """Without thread 0's wait for the bulk group before the barrier `_decayed` starts behind,
    its stores into KL, KD, QL race the copy engine's reads of them: sync_check says so."""
    found = _prep_findings(tmp_path, monkeypatch, [
        ("kda_bwd_prep_tiles", [("            T.ptx.cp.async_.bulk.wait_group(0)\n",
                                 "            pass\n")], None),
        ("kda_bwd_prep3", [], "PTL")])
    assert "async read shared" in found, found


@SLOW
def test_the_preps_proxy_fence_is_load_bearing(tmp_path, monkeypatch):
    """Without every thread's ``fence.proxy.async.shared::cta`` after the gate, the copy
    engine may read the tiles' generic writes stale: sync_check says so (the prep's module
    reached through kda_bwd_pieces_tc, whose prep calls it)."""
    found = _prep_findings(tmp_path, monkeypatch, [
        ("kda_bwd_chain_prep", [("        T.ptx.fence.proxy.async_.shared__cta()",
                                 "        pass  #")], None),
        ("kda_bwd_pieces_tc", [], "PR"),
        ("kda_bwd_prep3", [], "TC")])
    assert "fence.proxy.async" in found, found


@SLOW
def test_piece3s_wait_on_the_copies_is_load_bearing(tmp_path):
    """Without every thread's wait on the mbarrier, the block references' loads of G (and the
    pairs' reads of the tiles) race the bulk copies' writes: sync_check says so."""
    mut = mutant(tmp_path, "kda_bwd_local_tc", [("    full.wait(0)\n", "")])
    case = _case("t20_h1_deep")
    x = _local_inputs(case)
    verdicts = _verdicts(mut.kda_bwd_local_lg, x, {}, case)
    assert any("async write shared" in " ".join(m) for _, m in verdicts), verdicts


@SLOW
def test_the_staged_rows_change_no_bit_of_the_prep():
    """STAGE=1 (kda_bwd_local.StagedRows): the norms and gate read the same bf16 words from
    shared memory, so every output and both tile buffers equal STAGE=0's (two chunks, a 22-row
    tail: the staged copies of the rows past it are masked as the global loads were)."""
    case = _case("t86_h1_deep")
    args = _prep_args(LT.SUITE.make_inputs(case, 0))
    outs = list(P3.OUTPUTS) + ["ptile", "gtile"]
    got = _run(P3.kda_bwd_prep3g, args, case, outs, {"PREP": 2, "STAGE": 1})
    want = _run(P3.kda_bwd_prep3g, args, case, outs, {"PREP": 2})
    for n in outs:
        assert np.array_equal(got[n], want[n]), n


@SLOW
def test_sync_check_is_clean_on_the_staged_prep_and_its_wait_is_load_bearing(tmp_path,
                                                                             monkeypatch):
    """The staged rows land (every thread's ``cp.async.wait_group 0``, then a barrier) before
    the norms and gate read them, and P's tile and M, which hold them, are written only after
    the gate's barrier: clean; without the wait, sync_check calls the reads a race."""
    case = _case("t20_h1_deep")
    args = _prep_args(LT.SUITE.make_inputs(case, 0))
    for verdict, messages in _verdicts(P3.kda_bwd_prep3g, args, {"PREP": 2, "STAGE": 1}, case):
        assert verdict == "clean", messages
    found = _prep_findings(tmp_path, monkeypatch, [
        ("kda_bwd_local", [("        T.ptx.cp.async_.wait_group(0)\n", "        pass\n")], None),
        ("kda_bwd_prep3", [], "BL")], {"PREP": 2, "STAGE": 1})
    assert "not ordered by happens-before" in found, found


def test_a_roll_the_kernels_lack_is_refused_at_trace_time():
    """ROLL values past the ones each kernel has (prep3g 0-3, piece 3 0-2: their
    ``T.const.one_of``) name the kernel and the constant instead of building the largest roll
    silently, however the constants are bound (a plan binds them without a suite)."""
    with pytest.raises(TraceError, match=r"'kda_bwd_prep3g': constant ROLL=4 is not one of "
                       r"the values the kernel has code for: 0, 1, 2, 3"):
        P3.kda_bwd_prep3g.ptx("sm_90a", ROLL=4)
    with pytest.raises(TraceError, match=r"'kda_bwd_local_lg': constant ROLL=3 is not one of "
                       r"the values the kernel has code for: 0, 1, 2"):
        LT.kda_bwd_local_lg.ptx("sm_90a", ROLL=3)


@functools.lru_cache(maxsize=16)
def _prep_outputs(name, consts):
    """Every output and both tile buffers of kda_bwd_prep3g on case `name` (seed 0) with the
    constants `consts` (sorted (name, value) pairs), kept: the variant tests below share their
    references (GATE=1's outputs are GATE's result and VSTAGE's and DECAY's baseline), and a
    prep3g run in numsim is tens of seconds of CI."""
    case = _case(name)
    args = _prep_args(LT.SUITE.make_inputs(case, 0))
    return _run(P3.kda_bwd_prep3g, args, case, list(P3.OUTPUTS) + ["ptile", "gtile"],
                dict(consts))


def _assert_prep_unchanged(name, base, **change):
    """kda_bwd_prep3g with `base`'s constants and `change` on top gives every output and both
    tile buffers of `base` alone, bit for bit (numsim, case `name`)."""
    got = _prep_outputs(name, tuple(sorted(dict(base, **change).items())))
    want = _prep_outputs(name, tuple(sorted(base.items())))
    for n, x in want.items():
        assert np.array_equal(got[n], x), n


@SLOW
@pytest.mark.parametrize("roll", [1, 2, 3])
def test_the_rolled_prep_changes_no_bit(roll):
    """ROLL=1 (kda_bwd_local._gate's rows rolled, the walks' product loops not unrolled), ROLL=2
    (the norms' dots, the tiles' store and the walks' two halves too) and ROLL=3 (T's blocked
    inverse too: plan "tc15"): the same instructions
    per row, k-step and half in the same order, so every output and both tile buffers equal
    STAGE=1's (two chunks, a 22-row tail: the rolled gate masks the rows past it)."""
    _assert_prep_unchanged("t86_h1_deep", {"PREP": 2, "STAGE": 1}, ROLL=roll)


@SLOW
@pytest.mark.parametrize("name, decay", [("t86_h1_deep", 1), ("t86_h1_deep", 2),
                                         ("t86_h1_deep", 3), ("t86_h1_deep", 4),
                                         ("pack_9_1_64_h2", 4)])
def test_the_decayed_operands_other_ways_change_no_bit(name, decay):
    """DECAY=1, 2 (kda_bwd_reverse._decayed with 16, 32 rows a loop iteration: plans tc21,
    tc22), DECAY=3, 4 (kda_bwd_prep3.decayed_chunks: 16-byte loads, 4 from a trip ahead: plans
    tc25, tc26) on GATE=1's prep: every output and both tile buffers equal DECAY=0's (two
    chunks with a 22-row tail, and a varlen pack: the rows past each sequence staged as
    zeros, k and q read from the clamped last row)."""
    _assert_prep_unchanged(name, {"PREP": 2, "STAGE": 1, "ROLL": 2, "GATE": 1}, DECAY=decay)


@SLOW
@pytest.mark.parametrize("name", ["t86_h1_deep", "pack_9_1_64_h2"])
def test_the_gate_on_both_halves_changes_no_bit(name):
    """GATE=1 (kda_bwd_local._gate_halves: the second half of the CTA runs the first half's
    running sum again before its own rows) on plan tc19's prep (ROLL=2): every output and
    both tile buffers equal GATE=0's, on two chunks with a 22-row tail and on a varlen pack
    (a 9-row and a one-row sequence: rows past the sequence inside the first half)."""
    _assert_prep_unchanged(name, {"PREP": 2, "STAGE": 1, "ROLL": 2}, GATE=1)


@SLOW
@pytest.mark.parametrize("vstage", [1, 2])
@pytest.mark.parametrize("name", ["t86_h1_deep", "pack_9_1_64_h2"])
def test_v_staged_by_16_byte_chunks_changes_no_bit(name, vstage):
    """VSTAGE=1, 2 (kda_bwd_prep3.stage_v_chunks, stage_v_async: plans tc23, tc24) on GATE=1's
    prep: every output and both tile buffers equal VSTAGE=0's, on two chunks with a 22-row
    tail and on a varlen pack (V's rows past each sequence staged as zeros either way:
    VSTAGE=2's copies zero-fill them)."""
    _assert_prep_unchanged(name, {"PREP": 2, "STAGE": 1, "ROLL": 2, "GATE": 1}, VSTAGE=vstage)


@SLOW
@pytest.mark.parametrize("name", ["t86_h1_deep", "pack_9_1_64_h2"])
def test_the_decayed_lines_prefetched_change_no_bit(name):
    """PREFETCH=1 (kda_bwd_prep3.prefetch_decayed: plan tc31) with NEXT=1 (prefetch_next_rows:
    plan tc35), hints, on GATE=1's prep: every output and both tile buffers equal neither's
    (two chunks with a 22-row tail; a varlen pack)."""
    _assert_prep_unchanged(name, {"PREP": 2, "STAGE": 1, "ROLL": 2, "GATE": 1}, PREFETCH=1,
                           NEXT=1)


def test_the_gate_on_both_halves_needs_the_staged_rows():
    with pytest.raises(Exception, match="GATE=1 reads the staged rows: it needs STAGE=1"):
        P3.kda_bwd_prep3g.ptx("sm_90a", GATE=1)


@SLOW
def test_sync_check_is_clean_on_the_preps_latest_variants():
    """GATE=1 with VSTAGE=2, DECAY=4, PREFETCH=1 and NEXT=1 (plan tc26's prep, tc31's and tc35's
    prefetches):
    the gate's two halves, V's copies into QE's slot issued after U's barrier, waited for
    before the barrier that publishes V, the decayed operands' 16-byte loads a trip ahead, and
    their lines prefetched after the gate (one check for all: each check was ~80 s on a loaded
    2-core machine)."""
    case = _case("t20_h1_deep")
    args = _prep_args(LT.SUITE.make_inputs(case, 0))
    consts = {"PREP": 2, "STAGE": 1, "ROLL": 2, "GATE": 1, "VSTAGE": 2, "DECAY": 4,
              "PREFETCH": 1, "NEXT": 1}
    for verdict, messages in _verdicts(P3.kda_bwd_prep3g, args, consts, case):
        assert verdict == "clean", messages


@SLOW
def test_v_copies_not_waited_for_are_caught(tmp_path):
    """VSTAGE=2 without the cp.async wait before the barrier that publishes V: the forward
    walk's ldmatrix may read V's bytes before the copies land (racecheck), and the copies may
    still be writing when the CTA exits (synccheck)."""
    mut = mutant(tmp_path, "kda_bwd_prep3", [(
        "T.ptx.cp.async_.wait_group(0)   # the barrier below publishes V", "pass")])
    case = _case("t20_h1_deep")
    args = _prep_args(LT.SUITE.make_inputs(case, 0))
    consts = {"PREP": 2, "STAGE": 1, "ROLL": 2, "GATE": 1, "VSTAGE": 2}
    sync, race = _verdicts(mut.kda_bwd_prep3g, args, consts, case)
    assert sync[0] == "error" and any("may still be writing shared memory when the CTA exits"
                                      in m for m in sync[1]), sync
    assert race[0] == "error" and any("read/write conflict on shared" in m
                                      for m in race[1]), race


@SLOW
@pytest.mark.parametrize("roll", [1, 2, 3])
def test_sync_check_is_clean_on_the_rolled_prep(roll):
    case = _case("t20_h1_deep")
    args = _prep_args(LT.SUITE.make_inputs(case, 0))
    consts = {"PREP": 2, "STAGE": 1, "ROLL": roll}
    for verdict, messages in _verdicts(P3.kda_bwd_prep3g, args, consts, case):
        assert verdict == "clean", messages


@SLOW
@pytest.mark.parametrize("name, roll", [("t86_h1_deep", 1), ("pack_9_1_64_h2", 1),
                                        ("t86_h1_deep", 2), ("pack_9_1_64_h2", 2)])
def test_piece3_rolled_changes_no_bit(name, roll):
    """kda_bwd_local_lg ROLL=1 (the scan, the row dots and dq_dk as kda_chunk.trips' runtime
    loops) and ROLL=2 (the elementwise terms too: plan "tc15"): every output equals ROLL=0's
    to the last bit (two chunks with a 22-row tail; a varlen pack of two heads with a
    one-token sequence), and numsim finds it clean."""
    case = _case(name)
    x = _local_inputs(case)
    got = _local(LT.kda_bwd_local_lg, x, case, {"ROLL": roll})
    assert got.verdict == "clean", got.summary()
    want = _local(LT.kda_bwd_local_lg, x, case)
    for n in LT.OUTPUTS:
        assert np.array_equal(got.outputs[n], want.outputs[n]), n


@SLOW
@pytest.mark.parametrize("roll", [1, 2])
def test_sync_check_is_clean_on_the_rolled_piece3(roll):
    case = _case("t20_h1_deep")
    x = _local_inputs(case)
    for verdict, messages in _verdicts(LT.kda_bwd_local_lg, x, {"ROLL": roll}, case):
        assert verdict == "clean", messages
