"""exitcheck: asynchronous operations still on a CTA's shared memory when it exits.

The corpus holds one buggy kernel and its fixed twin per finding kind (``exit_*.py``); these
tests pin the rules' edges: per-thread groups (a wait by another lane covers nothing), the
group count of ``wait_group N`` (empty groups count), a store never committed, cp.async covered
through ``cp.async.mbarrier.arrive``, an st.async whose receiver never waits, and the runs the
rules must not judge (numsim stopped early or deadlocked) or cannot (a count that is not an
immediate)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

import tirxh.lang as T
from sync_check_testutil import TraceBuilder
from tirxh_sync_check import check_kernel, check_trace, format_finding

def _found(kernel, **inputs):
    sync, race = check_kernel(kernel, inputs, grid=(1,))
    return sync, [f for f in sync.findings + race.findings if f.kind.startswith("exit.")]


def _store_kernel(commit: bool, wait_lane: int, empty_groups: int = 0, keep: int = 0):
    @T.kernel(block=32)
    def k(out: T.gptr[T.u32]):
        buf = T.shared(T.u32, 32, align=128, name="buf")
        lane = T.laneid()
        T.ptx.st.shared.u32(buf.at(lane), lane)
        T.ptx.fence.proxy.async_.shared__cta()
        with T.if_(lane == 0):
            T.ptx.cp.async_.bulk.global_.shared__cta.bulk_group(out.at(0), buf.at(0), 128)
            if commit:
                T.ptx.cp.async_.bulk.commit_group()
            for _ in range(empty_groups):
                T.ptx.cp.async_.bulk.commit_group()
        with T.if_(lane == wait_lane):
            T.ptx.cp.async_.bulk.wait_group.read(keep)
    return k


def test_a_wait_by_another_lane_does_not_retire_the_committing_lanes_group():
    """Bulk async-groups are per thread: lane 1's wait_group.read 0 waits for lane 1's (no)
    groups, and lane 0 exits with its store still reading."""
    sync, found = _found(_store_kernel(commit=True, wait_lane=1), out=np.zeros(32, np.uint32))
    assert [f.kind for f in found] == ["exit.bulk-store-pending"], found
    assert found[0].lanes == [0]
    assert "committed at line" in found[0].message and "kernel 'k'" in found[0].message
    assert sync.verdict == "error"
    sync, found = _found(_store_kernel(commit=True, wait_lane=0), out=np.zeros(32, np.uint32))
    assert found == [] and sync.verdict == "clean", [format_finding(f) for f in found]


def test_a_store_never_committed_is_pending_at_its_issue_line():
    k = _store_kernel(commit=False, wait_lane=0)
    _, found = _found(k, out=np.zeros(32, np.uint32))
    assert [f.kind for f in found] == ["exit.bulk-store-pending"]
    assert "never committed" in found[0].message
    assert found[0].where.label == "bulk issue"


def test_wait_group_n_counts_empty_groups():
    """commit (the store), commit (empty), wait_group.read 1: the newest group, the empty one,
    may stay pending; the store's is retired. With two empty groups it is not."""
    _, found = _found(_store_kernel(True, 0, empty_groups=1, keep=1), out=np.zeros(32, np.uint32))
    assert found == [], [format_finding(f) for f in found]
    _, found = _found(_store_kernel(True, 0, empty_groups=0, keep=1), out=np.zeros(32, np.uint32))
    assert [f.kind for f in found] == ["exit.bulk-store-pending"]


def _cp_async_arrive_kernel(wait: bool):
    @T.kernel(block=32)
    def k(x: T.gptr[T.u32], out: T.gptr[T.u32]):
        buf = T.shared(T.u32, 32, name="buf")
        bar = T.mbarrier(1, name="bar")
        lane = T.laneid()
        with T.if_(lane == 0):
            bar.init(32)
        T.ptx.bar.warp.sync(0xFFFFFFFF)
        T.ptx.cp.async_.ca.shared.global_(buf.at(lane), x.at(lane), 4)
        T.ptx.cp.async_.mbarrier.arrive.noinc.shared__cta.b64(bar[0])
        T.ptx.st.global_.u32(out.at(lane), lane)
        if wait:
            bar.wait(0)
    return k


def test_cp_async_is_covered_by_its_mbarrier_arrive_once_the_phase_is_waited():
    """``cp.async.mbarrier.arrive.noinc`` arrives when the thread's copies landed: a wait for
    that phase covers them; the arrive alone, with nobody waiting, does not."""
    x = np.arange(32, dtype=np.uint32)
    _, found = _found(_cp_async_arrive_kernel(True), x=x, out=np.zeros(32, np.uint32))
    assert found == [], [format_finding(f) for f in found]
    _, found = _found(_cp_async_arrive_kernel(False), x=x, out=np.zeros(32, np.uint32))
    assert [f.kind for f in found] == ["exit.cp-async-pending"]
    assert "never committed" in found[0].message


def _pending_store_trace(wait_instr=None):
    """Lane 0 of warp 0 issues a bulk store and commits it; optionally a wait_group follows."""
    from tirxh_numsim import events as ev
    tb = TraceBuilder(block=(32, 1, 1))
    tb.add(ev.AsyncOp, 0, 10, lanes=1, engine="bulk", stage="issue", op_id=1,
           direction="store", group=0, nbytes=128)
    tb.add(ev.MemAccess, 0, 10, lanes=1, space="shared", access="read", ranges=[(-1, 0, 128)],
           proxy=ev.ASYNC, async_id=1)
    tb.add(ev.AsyncOp, 0, 11, lanes=1, engine="bulk", stage="commit", group=0)
    if wait_instr is not None:
        tb.add(ev.AsyncOp, 0, 12, lanes=1, engine="bulk", stage="wait", group=0,
               instr=wait_instr)
    return tb.trace


def test_no_exit_rule_runs_on_a_run_numsim_did_not_finish():
    sync, _ = check_trace(_pending_store_trace())
    assert [f.kind for f in sync.findings] == ["exit.bulk-store-pending"]
    assert sync.findings[0].where.line == 11
    sync, _ = check_trace(_pending_store_trace(), incomplete=["instruction budget"])
    assert not [f for f in sync.findings if f.kind.startswith("exit.")]
    assert sync.verdict == "incomplete"
    deadlock = SimpleNamespace(kind="numsim.deadlock", message="stuck")
    sync, _ = check_trace(_pending_store_trace(), diagnostics=[deadlock])
    assert not [f for f in sync.findings if f.kind.startswith("exit.")]


def test_a_wait_group_count_that_is_not_an_immediate_is_not_modelled():
    instr = SimpleNamespace(operands=(), spelling="cp.async.bulk.wait_group.read",
                            binding=SimpleNamespace(name="cp.async.bulk.wait_group"),
                            modifiers={"read": True})
    sync, _ = check_trace(_pending_store_trace(instr))
    assert sync.verdict != "clean"
    notes = [f for f in sync.findings if f.severity == "incomplete"]
    assert any("not an immediate" in f.message for f in notes), sync.findings


def test_st_async_into_a_peer_that_never_waits_is_pending_at_its_exit(tmp_path):
    """The corpus' st.async exchange (dsmem_st_async_tx, fixed twin) with the receiver's wait on
    ``ready`` removed (and its read of ``inbox``, which would race): each CTA may exit while its
    peer's st.async still writes its ``inbox``."""
    from sync_check_testutil import CORPUS, load_module
    src = (CORPUS / "dsmem_st_async_tx.py").read_text()
    old = ("        ready.wait(0)\n        T.ptx.st.global_.u32(out.at(T.ctaid.x * 32 + lane), "
           "T.ptx.ld.shared.u32(inbox.at(lane)))\n")
    assert src.count(old) == 1
    path = tmp_path / "st_async_no_wait.py"
    path.write_text(src.replace(old, "        T.ptx.st.global_.u32(out.at(T.ctaid.x * 32 + lane), "
                                     "lane)\n"))
    mod = load_module(path)
    sync, race = check_kernel(mod.fixed, mod.inputs(), grid=mod.GRID)
    found = [f for f in sync.findings if f.kind == "exit.async-write-pending"]
    assert found, [format_finding(f) for f in sync.findings + race.findings]
    assert "st.async" in found[0].message and "mbarrier ready" in found[0].message
    assert "st.async" in open(found[0].where.file).read().splitlines()[found[0].where.line - 1]
