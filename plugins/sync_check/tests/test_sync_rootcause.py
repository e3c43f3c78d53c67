"""Root-cause locations (`rootcause`, `hbquery.reinit_races`): a hang's finding points at the
branch, the parity computation or the re-init that causes it."""

from __future__ import annotations

import numpy as np

import tirxh.lang as T
from sync_check_testutil import CORPUS, load_module
from tirxh_numsim import events as ev
from tirxh_sync_check import check_kernel, check_trace, hbquery, racecheck
from tirxh_sync_check.report import Issue
from tirxh_sync_check.rootcause import relocate


def _trace(mod, name):
    import tirxh_numsim
    kern = getattr(mod, name)
    res = tirxh_numsim.run(kern, mod.inputs(), grid=mod.GRID, trace=True)
    return res.trace, kern.specialize()


def test_reinit_races_are_found_from_the_clocks_alone():
    mod = load_module(CORPUS / "root_reinit_handshake.py")
    for name, want in (("buggy", 1), ("fixed", 0)):
        trace, kir = _trace(mod, name)
        _, rc = racecheck.check(trace, kir)
        found = hbquery.reinit_races(rc)
        assert len(found) == want, (name, [i.message for i in found])
    (issue,) = hbquery.reinit_races(racecheck.check(*_trace(mod, "buggy"))[1])
    assert issue.event.op == "init" and issue.event.loc.line == 34
    assert any(r.op in ("arrive", "try_wait") and r.warp == 1 for r in issue.related)


def test_consequences_on_a_reinitialized_barrier_fold_into_the_reinit(tb):
    b = tb(block=(64, 1, 1))
    init = b.add(ev.MBarrierEvent, 0, 1, op="init", addr=8, count=1)
    reinit = b.add(ev.MBarrierEvent, 0, 2, op="init", addr=8, count=1)
    wait = b.add(ev.MBarrierEvent, 1, 3, op="try_wait", addr=8, parity=0, success=False)
    other = b.add(ev.MBarrierEvent, 1, 4, op="try_wait", addr=16, parity=0, success=False)
    issues = [Issue("mbarrier.reinit-in-use", "re-init", event=reinit),
              Issue("deadlock", "hang", event=wait),
              Issue("mbarrier.arrival-count", "count", event=init),
              Issue("deadlock", "other barrier", event=other)]
    out = relocate(issues, b.trace, None)
    assert [i.kind for i in out] == ["mbarrier.reinit-in-use", "deadlock"]
    assert out[0].related == [wait, init] and out[1].event is other
    assert any("consequence: deadlock" in w for w in out[0].witness)


def test_a_parity_given_as_an_immediate_stays_on_the_wait():
    mod = load_module(CORPUS / "mbar_parity_never.py")
    sync, _ = check_kernel(mod.buggy, mod.inputs(), grid=mod.GRID)
    (f,) = [f for f in sync.findings if f.kind == "mbarrier.parity-never"]
    assert f.where.label == "mbarrier try_wait" and not f.related


def test_a_parity_register_points_at_its_computation_with_the_wait_related():
    mod = load_module(CORPUS / "root_parity_register.py")
    sync, _ = check_kernel(mod.buggy, mod.inputs(), grid=mod.GRID)
    (f,) = [f for f in sync.findings if f.kind == "mbarrier.parity-never"]
    assert (f.where.line, f.where.label) == (35, "parity computed here")
    assert [r.line for r in f.related] == [36]


@T.kernel(block=128)
def count_too_big(out: T.gptr[T.u32]):
    w = T.warp_index()
    with T.if_(w < 2, uniform=True):
        T.ptx.barrier.sync(1, 96)  # two warps use it, but the count says three
    T.ptx.st.global_.u32(out.at(T.tid.x), w)


def test_a_wrong_count_stays_on_the_barrier_not_on_the_branch():
    """Warps 2 and 3 skip the barrier, but with them it would hold four warps, not three: the
    count is what is wrong."""
    sync, _ = check_kernel(count_too_big, dict(out=np.zeros(128, np.uint32)), grid=(1,))
    (f,) = [f for f in sync.findings if f.kind == "barrier.count-mismatch"]
    assert f.where.label == "bar.sync" and "the cause" not in f.message


def test_a_blocked_warp_the_barrier_ran_past_is_overrun_not_parity_never(tb):
    """The producer completes two phases before the consumer's first wait (parity 0)."""
    b = tb(block=(64, 1, 1))
    b.add(ev.MBarrierEvent, 0, 1, op="init", addr=0, count=1)
    b.bar_sync((0, 1), 2)
    for k in (1, 2):
        b.add(ev.MBarrierEvent, 0, 3, op="arrive", addr=0, count=1, phase=k, completed_phase=True)
    b.add(ev.MBarrierEvent, 1, 4, op="try_wait", addr=0, parity=0, success=False, phase=2)
    sync, _ = check_trace(b.trace)
    kinds = {(f.kind, f.where.line) for f in sync.findings}
    assert ("mbarrier.phase-overrun", 4) in kinds and \
        ("mbarrier.parity-never", 4) not in kinds


def test_a_tie_in_a_mixed_generation_does_not_depend_on_the_arrival_order():
    """Two barrier instructions with as many arrivals in numsim's first mixed generation: the
    one on the blocked barrier's line is the main one, whichever arrived first (numsim's grouped
    and per-warp schedules order a generation's arrivals differently)."""
    from types import SimpleNamespace as NS

    from tirxh_sync_check.rootcause import _mixed_generation

    instrs = {309: object(), 318: object()}  # one barrier instruction per line

    def arrival(warp, line):
        return NS(warp=warp, instr=instrs[line], loc=NS(file="k.py", line=line))
    a = [arrival(w, 309) for w in (4, 5)]
    b = [arrival(w, 318) for w in (8, 9)]
    for order in (a + b, b + a, [a[0], b[0], a[1], b[1]]):
        main, missing = _mixed_generation(order, 4, ("k.py", 318))
        assert (main.loc.line, missing) == (318, [4, 5])
    main, missing = _mixed_generation(a + b + [arrival(10, 309)], 5, ("k.py", 318))
    assert (main.loc.line, missing) == (309, [8, 9])  # more arrivals decide first
