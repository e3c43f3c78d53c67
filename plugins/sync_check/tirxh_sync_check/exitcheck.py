"""Exit hazards: asynchronous operations on a CTA's shared memory still in flight when it exits.

A CTA's shared memory is released when its last thread exits, and the SM may hand it to the
next CTA at once. An asynchronous operation that still reads or writes that memory then reads
the next CTA's data or overwrites it. Nothing in PTX waits for such an operation at exit: the
program must, and the only waits are the ones the operation's completion mechanism offers (PTX
ISA 9.7.9.25 "Data Movement and Conversion Instructions: Asynchronous copy", the async-group and
mbarrier completion mechanisms):

- **bulk async-groups** (``cp.async.bulk.global.shared::cta.bulk_group``,
  ``cp.async.bulk.tensor...global.shared::cta``, committed by ``cp.async.bulk.commit_group``) are
  per thread: only ``cp.async.bulk.wait_group[.read] N`` *by the committing thread* waits for
  them (``.read``: until their reads of the source are done, which is what exit needs). A store
  whose group that thread never retires may read its shared source after the CTA is gone and
  copy garbage to global memory: ``exit.bulk-store-pending`` (CUTLASS's ``tma_store_wait<0>``
  before the epilogue ends). The check is per thread (lane), at the thread's exit: no other
  thread can wait on the group, so its exit bounds the CTA's only chance to;
- **cp.async groups** (sm_80) are per thread too: ``cp.async.wait_group N`` /
  ``cp.async.wait_all`` by the issuing thread, or a ``cp.async.mbarrier.arrive`` after the copy
  whose mbarrier phase some thread of the CTA then waits for. A copy neither covers may write
  the CTA's shared memory after the CTA exited (``exit.cp-async-pending``); such a copy's data is
  also never read safely, so it is dead work at best;
- **mbarrier completion** (TMA and bulk loads into shared memory, ``st.async`` /
  ``red.async`` into a peer CTA's): the write is known to have landed only once the mbarrier
  phase that counts its bytes (``complete_tx``) completed and a thread of the destination CTA
  waited for that phase or a later one. A write no such wait covers may land in the shared
  memory of whatever CTA runs there next: ``exit.async-write-pending``. This is a CTA-level rule:
  any thread of the destination CTA waiting is enough (the CTA exits after it).

Not an exit finding: wgmma groups committed and never waited (``wgmma.wait_group``). Their
results are registers of the issuing warps; reading them before the wait is
``wgmma.accumulator-early`` (`wgmmacheck`, on every path), and a group whose accumulators are
never read is dead work whose shared-memory reads (A/B by descriptor) write nothing anyone sees.

What is assumed is sync_check's (README, "Orders explored, orders assumed"): each warp's path
is numsim's, and an mbarrier wait consumed the phase it consumed in numsim's run (synccheck
reports the interleavings where it does not: ``mbarrier.phase-overrun``). numsim records no
event for ``ret``/``exit``: a lane's exit is after the last event it took part in. The rules
run only on a trace numsim ran to its end without a deadlock (`analyze` skips them otherwise: a
CTA that never exits has no exit hazard, and the result is ``incomplete`` or ``error`` then).
A wait_group whose count is not an immediate (never legal PTX) is reported as not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tirxh_numsim import events as ev

from .racesync import binding, family_of
from .report import Issue, describe_event


@dataclass
class _Lane:
    """One thread's async-group bookkeeping for one family (bulk or cp.async)."""

    open: list = field(default_factory=list)  # issue events not yet committed
    groups: list = field(default_factory=list)  # [(commit event, [issue events])], oldest first


def check(trace, ignored=frozenset(), names: "dict | None" = None) -> "tuple[list, list]":
    """Exit hazards of a trace numsim ran to its end: ``(issues, notes)``, notes being
    ``(event, why)`` pairs of what was not modelled. `ignored`: ids of try_wait instructions that
    are not waits (`waituse`); `names`: shared address -> variable name (for messages).

    One pass over the trace picks the few events the rules read (the rest of a warp's events
    are looked at only to name a pending group's exit)."""
    # (cta, mbarrier address) -> the most phases a thread of that CTA saw completed when a wait
    # on it returned: a write counted in phase p is covered by a wait that saw p + 1
    waited: dict = {}
    per_warp: dict = {}  # (cta, warp) -> its bulk / cp.async group events, cp.async arrives
    completes: list = []  # complete_tx events of async operations
    issues_of: dict = {}  # op id -> issue event of an mbarrier-completed write (the first)
    for e in trace.events:
        if isinstance(e, ev.MBarrierEvent):
            if e.op in ("try_wait", "test_wait"):
                if e.success and id(e.instr) not in ignored and e.cta == e.space_cta:
                    k = (e.space_cta, e.addr)
                    waited[k] = max(waited.get(k, 0), e.phase)
            elif e.op == "complete_tx":
                if e.by_async is not None:
                    completes.append(e)
            elif e.op == "arrive" and binding(e) == "cp.async.mbarrier.arrive":
                per_warp.setdefault((e.cta, e.warp), []).append(e)
        elif isinstance(e, ev.AsyncOp):
            if e.stage == "issue" and e.mbarrier is not None:
                issues_of.setdefault(e.op_id, e)
            if family_of(e) in ("bulk", "cp.async"):
                per_warp.setdefault((e.cta, e.warp), []).append(e)
    issues, notes = [], []
    for key in sorted(per_warp):
        i, n = _groups(trace, key, per_warp[key], waited)
        issues += i
        notes += n
    issues += _mbar_writes(trace, completes, issues_of, waited, names or {})
    return issues, notes


def _phase_of(e) -> int:
    """The phase index an mbarrier event counted in (its ``phase`` is the barrier's after it)."""
    return e.phase - 1 if e.completed_phase else e.phase


def _groups(trace, warp: tuple, evs: list, waited: dict) -> "tuple[list, list]":
    """Bulk and cp.async groups of `warp` ((cta, warp); `evs`: its group events and
    cp.async.mbarrier.arrives), per lane, at each lane's exit."""
    lanes: dict = {}  # (family, lane) -> _Lane
    covered: set = set()  # ids of cp.async issues a waited cp.async.mbarrier.arrive covers
    notes = []
    for e in evs:
        if isinstance(e, ev.MBarrierEvent):  # a cp.async.mbarrier.arrive
            if waited.get((e.space_cta, e.addr), 0) > _phase_of(e):
                for ln in ev.lanes_of(e.lanes):
                    st = lanes.get(("cp.async", ln))
                    if st is not None:
                        covered.update(id(x) for x in st.open)
                        covered.update(id(x) for _, g in st.groups for x in g)
            continue
        fam = family_of(e)
        for ln in ev.lanes_of(e.lanes):
            st = lanes.setdefault((fam, ln), _Lane())
            if e.stage == "issue":
                st.open.append(e)
            elif e.stage == "commit":
                st.groups.append((e, st.open))
                st.open = []
            elif e.stage == "wait":
                if binding(e) == "cp.async.wait_all":  # commits the open group, then waits
                    st.groups.append((e, st.open))
                    st.open = []
                    keep = 0
                else:
                    keep = _wait_count(e)
                    if keep is None:
                        notes.append((e, f"{e.instr.spelling if e.instr else 'wait_group'}: "
                                         "its group count is not an immediate; the groups it "
                                         "retires before the thread exits are not known"))
                        keep = 0
                if len(st.groups) > keep:
                    st.groups = st.groups[len(st.groups) - keep:] if keep else []
    # pending at the lane's exit, by the line that commits them (or issues them, uncommitted)
    pending: dict = {}  # (family, primary event id) -> [primary, issue, {lanes}]
    for (fam, ln), st in lanes.items():
        left = [(c, x) for c, g in st.groups for x in g] + [(None, x) for x in st.open]
        for c, x in left:
            if fam == "bulk" and x.direction != "store":
                continue
            if fam == "cp.async" and id(x) in covered:
                continue
            prim = c if c is not None else x
            rec = pending.setdefault((fam, id(prim)), [prim, x, set()])
            rec[2].add(ln)
    issues = [_group_issue(trace, fam, prim, x, sorted(ls), warp)
              for (fam, _), (prim, x, ls) in pending.items()]
    return issues, notes


def _wait_count(e) -> "int | None":
    for o in getattr(e.instr, "operands", None) or ():
        if hasattr(o, "value"):
            return int(o.value)
    return None if e.instr is not None else 0


def _last_event_of(trace, warp: tuple, lanes: list):
    """The last event of `warp` that one of `lanes` took part in (engine events aside)."""
    mask = 0
    for ln in lanes:
        mask |= 1 << ln
    for e in reversed(trace.events):
        if (e.cta, e.warp) == warp and e.lanes & mask and \
                not (isinstance(e, ev.AsyncOp) and e.stage == "complete"):
            return e
    return None


def _line(e):
    return e.loc.line if e.loc is not None else "?"


def _lanes_text(lanes: list) -> str:
    """``lane 0``, ``lanes 0-31``, ``lanes 0-3,8``."""
    runs: list = []
    for ln in lanes:
        if runs and runs[-1][1] == ln - 1:
            runs[-1][1] = ln
        else:
            runs.append([ln, ln])
    text = ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)
    return f"lane{'s' if len(lanes) > 1 else ''} {text}"


def _group_issue(trace, fam: str, prim, issue, lanes: list, warp: tuple) -> Issue:
    last = _last_event_of(trace, warp, lanes) or prim
    committed = prim is not issue
    who = f"cta {prim.cta} warp {prim.warp} {_lanes_text(lanes)}"
    exit_text = (f"before {who} exit (after line {_line(last)}: a ret/exit or the end of "
                 f"kernel {trace.kernel!r})")
    if fam == "bulk":
        what = (f"kernel {trace.kernel!r}: the {issue.engine} store at line {_line(issue)} "
                + (f"(its bulk async-group committed at line {_line(prim)}) " if committed else
                   "(never committed to a bulk async-group, so no wait_group can cover it) ")
                + "may still be reading its shared-memory source when the CTA exits: no "
                "cp.async.bulk.wait_group.read N (or wait_group N) by the committing thread "
                f"retires that group {exit_text}. The CTA's shared memory is then released and "
                "may be reused by the next CTA on the SM, and the store copies whatever that "
                "CTA wrote there; add cp.async.bulk.wait_group.read 0 before the exit")
        kind = "exit.bulk-store-pending"
    else:
        what = (f"kernel {trace.kernel!r}: the cp.async at line {_line(issue)} "
                + (f"(its group committed at line {_line(prim)}) " if committed else
                   "(never committed to a group) ")
                + "may still be writing shared memory when the CTA exits: neither a "
                "cp.async.wait_group / wait_all by the issuing thread nor a "
                "cp.async.mbarrier.arrive whose phase a thread of the CTA waits for covers it "
                f"{exit_text}. The write may land in the shared memory of the next CTA on the "
                "SM; add cp.async.wait_all (or wait_group 0) before the exit")
        kind = "exit.cp-async-pending"
    witness = [f"issue:  {describe_event(issue)}"]
    if committed:
        witness.append(f"commit: {describe_event(prim)}")
    witness.append(f"exit:   {who} leave the kernel after {describe_event(last)}, the group "
                   "still pending")
    return Issue(kind, what, event=prim, related=[issue, last] if committed else [last],
                 witness=witness, lanes=lanes,
                 data={"exit_line": _line(last), "issue_line": _line(issue)})


def _mbar_writes(trace, completes: list, issues_of: dict, waited: dict, names: dict) -> list:
    """TMA/bulk loads, st.async and red.async (`issues_of`: op id -> issue; multicast repeats
    the issue per CTA): each destination CTA must wait for the phase that counts the write's
    bytes, its `complete_tx` among `completes` (see the module docstring)."""
    seen: dict = {}  # (issue line, destination cta) -> Issue
    for e in completes:
        if e.by_async not in issues_of:
            continue
        p = _phase_of(e)
        if waited.get((e.space_cta, e.addr), 0) > p:
            continue
        issue = issues_of[e.by_async]
        key = (issue.loc.line if issue.loc is not None else None, e.space_cta)
        if key in seen:
            continue
        line = _line(issue)
        seen[key] = Issue(
            "exit.async-write-pending",
            f"kernel {trace.kernel!r}: the {issue.engine} {issue.direction} at line {line} "
            f"writes shared memory of cta {e.space_cta} and counts its bytes in phase {p} of "
            f"mbarrier {names.get(e.addr, hex(e.addr))}, but no thread of cta {e.space_cta} "
            "waits for that phase (or a later one) before the CTA exits: the write may land "
            "after the CTA's shared memory was released, in the next CTA's; wait for the phase "
            "(or do not issue a copy nobody consumes)",
            event=issue, related=[e],
            witness=[f"issue:       {describe_event(issue)}",
                     f"complete_tx: {describe_event(e)} (phase {p})",
                     f"waits of cta {e.space_cta} on it saw at most "
                     f"{waited.get((e.space_cta, e.addr), 0)} phase(s) completed"],
            data={"phase": p, "mbarrier": e.addr, "cta": e.space_cta})
    return list(seen.values())
