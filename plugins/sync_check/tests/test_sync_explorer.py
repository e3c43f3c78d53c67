"""synccheck on hand-built traces: the explorer's rules, bounds and reductions."""

from __future__ import annotations

from tirxh_numsim import events as ev
from tirxh_sync_check import check_trace, model, synccheck


def _kinds(result):
    return {(f.kind, f.where.line if f.where else None) for f in result.findings}


def _pipeline(tb, empty_count: int, consumer2_arrives: bool):
    """Producer warp 0 fills one stage twice; consumers 1 and 2 wait on `full` (0x0);
    `empty` (0x8) is released by consumer 1 (and 2 when asked)."""
    b = tb(block=(96, 1, 1))
    M = ev.MBarrierEvent
    b.add(M, 0, 1, op="init", addr=0, count=1)
    b.add(M, 0, 2, op="init", addr=8, count=empty_count)
    b.bar_sync(range(3), 3)
    full_done = empty_done = 0
    for k in range(2):
        b.add(M, 0, 10, op="try_wait", addr=8, parity=(k & 1) ^ 1, success=True,
              phase=empty_done)
        full_done += 1
        b.add(M, 0, 11, op="arrive", addr=0, count=1, phase=full_done, completed_phase=True)
        for w in (1, 2):
            b.add(M, w, 20, op="try_wait", addr=0, parity=k & 1, success=True, phase=full_done)
            if w == 1 or consumer2_arrives:
                b.add(M, w, 21, op="arrive", addr=8, count=1)
        empty_done += 1
    return b.trace


def test_phase_overrun_found_on_the_late_consumer(tb):
    sync, _ = check_trace(_pipeline(tb, empty_count=1, consumer2_arrives=False))
    assert ("mbarrier.phase-overrun", 20) in _kinds(sync)
    f = [f for f in sync.findings if f.kind == "mbarrier.phase-overrun"][0]
    assert f.witness[-1].endswith("<-- here")
    assert f.data["reference_generation"] == 1
    assert sync.verdict == "error"


def test_fixed_pipeline_is_clean(tb):
    sync, race = check_trace(_pipeline(tb, empty_count=2, consumer2_arrives=True))
    assert sync.verdict == "clean", sync.findings
    assert race.verdict == "clean"


def test_state_bound_gives_incomplete_not_clean(tb):
    sync, _ = check_trace(_pipeline(tb, empty_count=2, consumer2_arrives=True), max_states=4)
    assert sync.verdict == "incomplete"
    assert any(f.kind == "sync_check.state-bound" for f in sync.findings)


def test_identical_warps_are_explored_once(tb):
    """Eight interchangeable waiters: symmetry keeps the state count linear in their number."""
    b = tb(block=(288, 1, 1))
    b.add(ev.MBarrierEvent, 0, 1, op="init", addr=0, count=1)
    b.bar_sync(range(9), 2)
    b.add(ev.MBarrierEvent, 0, 3, op="arrive", addr=0, count=1, phase=1, completed_phase=True)
    for w in range(1, 9):
        b.add(ev.MBarrierEvent, w, 4, op="try_wait", addr=0, parity=0, success=True, phase=1)
    (cm,) = model.build(b.trace)
    r = synccheck.explore(cm)
    assert r.complete and not r.issues
    assert r.states < 40  # 2^8 orders of the waiters without symmetry


def test_try_wait_spin_collapses_to_one_wait(tb):
    b = tb(block=(32, 1, 1))
    b.add(ev.MBarrierEvent, 0, 1, op="init", addr=0, count=1)
    b.add(ev.MBarrierEvent, 0, 2, op="try_wait", addr=0, parity=1, success=True, phase=0)
    for _ in range(3):
        b.add(ev.MBarrierEvent, 0, 5, op="try_wait", addr=0, parity=0, success=False, phase=0)
    (cm,) = model.build(b.trace)
    kinds = [op.kind for op in cm.warps[0].ops]
    assert kinds == ["minit", "mwait", "mwait"]
    assert cm.warps[0].ops[-1].ref_gen is None  # never returned in the reference run


def test_failed_probe_followed_by_other_work_is_reported_incomplete(tb):
    """A try_wait whose failure the path depended on: the other outcome was not explored."""
    b = tb(block=(64, 1, 1))
    b.add(ev.MBarrierEvent, 0, 1, op="init", addr=0, count=1)
    b.bar_sync((0, 1), 2)
    b.add(ev.MBarrierEvent, 0, 3, op="try_wait", addr=0, parity=0, success=False, phase=0)
    b.add(ev.MemAccess, 0, 4, space="shared", access="write", ranges=[(0, 64, 68)])
    b.add(ev.MBarrierEvent, 1, 5, op="arrive", addr=0, count=1, phase=1, completed_phase=True)
    sync, _ = check_trace(b.trace)
    assert sync.verdict == "incomplete"
    assert any(f.kind == "sync_check.not-modelled" and f.where.line == 3 for f in sync.findings)


def test_numsim_not_finishing_makes_both_results_incomplete(tb):
    b = tb(block=(32, 1, 1))
    b.add(ev.MemAccess, 0, 1, space="shared", access="write", ranges=[(0, 0, 4)])
    sync, race = check_trace(b.trace, incomplete=["wgmma.sp: numsim has no semantics"])
    assert sync.verdict == race.verdict == "incomplete"
    assert "numsim did not run" in sync.findings[0].message


def test_no_trace_is_incomplete():
    sync, race = check_trace(None)
    assert sync.verdict == race.verdict == "incomplete"


def test_named_barrier_producer_running_ahead_is_flagged(tb):
    """bar.arrive twice by the producer before the consumer's bar.sync: the second arrival
    completes the first generation without the consumer, which then waits for ever."""
    b = tb(block=(64, 1, 1))
    for _ in range(2):
        b.add(ev.BarrierEvent, 0, 1, op="arrive", barrier=1, count=64)
    for _ in range(2):
        b.add(ev.BarrierEvent, 1, 2, op="sync", barrier=1, count=64)
        b.add(ev.BarrierEvent, 1, 2, op="sync", barrier=1, count=64, released=True)
    sync, _ = check_trace(b.trace)
    assert ("barrier.count-mismatch", 2) in _kinds(sync)


def test_named_barrier_handshake_is_clean(tb):
    """Producer arrives on barrier 1 and waits on barrier 2, which the consumer arrives on."""
    b = tb(block=(64, 1, 1))
    for k in range(2):
        b.add(ev.BarrierEvent, 0, 1, op="arrive", barrier=1, count=64)
        b.add(ev.BarrierEvent, 1, 2, op="sync", barrier=1, count=64)
        b.add(ev.BarrierEvent, 1, 2, op="sync", barrier=1, count=64, released=True)
        b.add(ev.BarrierEvent, 1, 3, op="arrive", barrier=2, count=64)
        b.add(ev.BarrierEvent, 0, 4, op="sync", barrier=2, count=64)
        b.add(ev.BarrierEvent, 0, 4, op="sync", barrier=2, count=64, released=True)
    sync, _ = check_trace(b.trace)
    assert sync.verdict == "clean", sync.findings


def test_an_async_engine_not_modelled_makes_both_results_incomplete(tb):
    b = tb(block=(32, 1, 1))
    b.add(ev.AsyncOp, 0, 7, engine="tcgen05", stage="issue", op_id=1)
    sync, race = check_trace(b.trace)
    assert sync.verdict == race.verdict == "incomplete"
    assert any("tcgen05" in f.message and f.where.line == 7 for f in race.findings)


def _explore_both_ways(kernel, inputs, grid, consts=None):
    """synccheck's issues with waits taken eagerly (when racecheck proves that safe) and
    without the shortcut."""
    import tirxh_numsim
    from tirxh_sync_check import hbquery, racecheck
    res = tirxh_numsim.run(kernel, inputs, grid=grid, consts=consts, trace=True)
    models = model.build(res.trace)
    _, checker = racecheck.check(res.trace)
    safe = hbquery.waits_ordered(checker, models)
    out = []
    for eager in (safe, False):
        issues = set()
        for cm in models:
            r = synccheck.explore(cm, eager_waits=eager)
            assert r.complete
            issues |= {(i.kind, i.event.loc.line if i.event is not None else None)
                       for i in r.issues}
        out.append(issues)
    return safe, out


def test_eager_waits_change_no_result_on_the_corpus():
    from sync_check_testutil import corpus_files, load_module
    shortcut = 0
    for path in corpus_files():
        mod = load_module(path)
        for name in ("buggy", "fixed"):
            safe, (fast, full) = _explore_both_ways(getattr(mod, name), mod.inputs(), mod.GRID)
            assert fast == full, (path.name, name)
            shortcut += safe
    assert shortcut > 10  # the shortcut applies to most kernels


def test_eager_waits_apply_to_the_zoo_gemm_and_not_to_the_overrun():
    from pathlib import Path
    from sync_check_testutil import CORPUS, load_module
    zoo = Path(__file__).resolve().parents[3] / "zoo" / "kernels" / "gemm_wgmma.py"
    suite = load_module(zoo).SUITE
    case = suite.cases[0]
    safe, (fast, full) = _explore_both_ways(suite.kernel, suite.make_inputs(case, 0),
                                            suite.grid(case), suite.consts(case))
    assert safe and fast == full == set()
    mod = load_module(CORPUS / "mbar_phase_overrun.py")
    safe, _ = _explore_both_ways(mod.buggy, mod.inputs(), mod.GRID)
    assert not safe


def test_instructions_with_unmodelled_sync_roles_make_results_incomplete(tb):
    """tcgen05 (sm_100a) synchronizes through rules neither analysis models: incomplete."""
    from pathlib import Path
    from sync_check_testutil import load_module
    import tirxh.lang as T
    zoo = Path(__file__).resolve().parents[3] / "zoo" / "kernels" / "gemm_tcgen05.py"
    mod = load_module(zoo)
    kern = [v for v in vars(mod).values() if isinstance(v, T.Kernel)][0]
    sync, race = check_trace(tb(block=(128, 1, 1)).trace, kern.specialize())
    assert sync.verdict == race.verdict == "incomplete"
    assert any("tcgen05" in f.message for f in sync.findings)
