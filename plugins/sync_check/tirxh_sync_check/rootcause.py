"""The root cause of a hang, not where it shows up (issue 13 class 6).

synccheck finds a hang where a warp blocks for ever: at a barrier, at a wait. The line to fix is
usually elsewhere, and that is where a finding's primary location goes; the blocked instruction
becomes a related location:

- a named barrier that some warps never reach (``barrier.count-mismatch``): the branch those
  warps did not take, or the loop whose trip count differed between them (`structure`). When a
  generation of numsim's run mixed arrivals from two barrier instructions, the warps that skipped
  the first one are the missing ones;
- a wait whose parity no phase will complete (``mbarrier.parity-never``): the instruction that
  computed the parity, when it is on another line than the wait;
- an mbarrier re-initialized while another warp may still use it (``hbquery.reinit_races``): the
  re-init; the hangs and count errors it causes on that barrier are folded into it.
"""

from __future__ import annotations

from tirxh.api import ir
from tirxh_numsim import events as ev

from .report import Issue, describe_event
from .structure import Structure, construct_label

# what a re-init of a barrier in use leads to, reported on that barrier
_REINIT_CONSEQUENCES = ("mbarrier.arrival-count", "mbarrier.parity-never",
                        "mbarrier.phase-overrun", "mbarrier.tx-mismatch", "deadlock")


def relocate(issues: list, trace, kir) -> list:
    """`issues` with their primary locations moved to the causes (module docstring)."""
    structure = Structure(kir)
    out = []
    for issue in issues:
        if issue.kind == "barrier.count-mismatch" and isinstance(issue.event, ev.BarrierEvent):
            issue = _skipped_barrier(issue, trace, structure) or issue
        elif issue.kind == "mbarrier.parity-never" and isinstance(issue.event, ev.MBarrierEvent):
            issue = _parity_source(issue, kir) or issue
        out.append(issue)
    return _fold_reinit(out)


def _skipped_barrier(issue: Issue, trace, structure: Structure) -> "Issue | None":
    blocked = issue.event
    key = (blocked.cta, blocked.barrier)
    arrivals = [e for e in trace.events if isinstance(e, ev.BarrierEvent) and
                (e.cta, e.barrier) == key and e.op in ("sync", "arrive") and not e.released]
    threads = 1
    for d in trace.block:
        threads *= d
    slots = (blocked.count if blocked.count is not None else -(-threads // 32) * 32) // 32
    target, missing = _mixed_generation(arrivals, slots, _line(blocked))
    if target is None:
        # warps that executed the blocked barrier fewer times than others: they are the ones
        # missing if, with them, the open generation would be exactly full (otherwise the
        # barrier's count is what is wrong, and the finding stays on it)
        target = blocked
        per_warp: dict = {}
        for e in arrivals:
            if e.instr is blocked.instr:
                per_warp[e.warp] = per_warp.get(e.warp, 0) + 1
        most = max(per_warp.values(), default=0)
        warps = {e.warp for e in trace.events if e.cta == blocked.cta}
        missing = sorted(w for w in warps if per_warp.get(w, 0) < most)
        if len(arrivals) % slots + len(missing) != slots:
            return None
    if not missing:
        return None
    others = [e for e in trace.events if e.cta == blocked.cta and e.warp in missing and
              e.instr is not None]
    cause = structure.split_point(target.instr, others) or \
        structure.innermost_loop(target.instr)
    if cause is None:
        return None
    how = construct_label(cause)
    who = ("warp " if len(missing) == 1 else "warps ") + ", ".join(map(str, missing))
    msg = (f"{issue.message} — the cause: {who} of cta {blocked.cta} "
           f"{'does' if len(missing) == 1 else 'do'} not reach the barrier at {_where(target)} "
           "as the others do: "
           f"{how} at {cause.loc.file.rsplit('/', 1)[-1]}:{cause.loc.line} sends them "
           f"elsewhere" + (" (a different trip count)" if how == "the loop" else ""))
    return Issue(issue.kind, msg, event=None, loc=cause.loc, label=how,
                 related=[issue.event] + ([target] if target is not blocked else []) +
                 list(issue.related),
                 witness=list(issue.witness) + [f"{how} at {cause.loc} (warps "
                                                f"{missing} took another path)"],
                 data=dict(issue.data, missing_warps=missing))


def _mixed_generation(arrivals: list, slots: int, blocked_line=None):
    """(an arrival at the barrier instruction most of a mixed generation came from, the warps
    that arrived from another instruction) for the first generation (`slots` warps) of numsim's
    run whose arrivals came from different barrier instructions; (None, None) if none did.
    Between instructions with as many arrivals, one on the source line where warps hang
    (`blocked_line`) is the main one, whatever order numsim's schedule had them arrive in."""
    gen: list = []
    for e in arrivals:
        gen.append(e)
        if len(gen) < slots:
            continue
        instrs: dict = {}
        for a in gen:
            instrs.setdefault(id(a.instr), []).append(a)
        if len(instrs) > 1:
            main = max(instrs.values(), key=lambda g: (len(g), _line(g[0]) == blocked_line))
            odd = sorted({a.warp for a in gen if a.instr is not main[0].instr})
            return main[0], odd
        gen = []
    return None, None


def _parity_source(issue: Issue, kir) -> "Issue | None":
    """The instruction that computed the parity operand of the blocked wait, when it is on
    another line (a parity register set far from the wait)."""
    wait = issue.event.instr
    if kir is None or wait is None or len(wait.operands) < 3:
        return None
    par = wait.operands[2]
    if not isinstance(par, ir.Reg):
        return None
    defs, seen = [], False
    for i in kir.instructions():
        if i is wait:
            seen = True
        if not seen and any(d is par for d in i.defs()):
            defs.append(i)
    src = defs[-1] if defs else None
    if src is None or (src.loc.file, src.loc.line) == (wait.loc.file, wait.loc.line):
        return None
    msg = (f"{issue.message} — the parity it waits on is computed at "
           f"{src.loc.file.rsplit('/', 1)[-1]}:{src.loc.line} ({src.spelling})")
    return Issue(issue.kind, msg, event=None, loc=src.loc, label="parity computed here",
                 related=[issue.event] + list(issue.related), witness=list(issue.witness),
                 data=dict(issue.data))


def _fold_reinit(issues: list) -> list:
    """Hangs and count errors on a barrier whose re-init raced with its use become related
    locations of the ``mbarrier.reinit-in-use`` finding."""
    reinit = [i for i in issues if i.kind == "mbarrier.reinit-in-use" and i.event is not None]
    keys = {_mbar(i.event): i for i in reinit}
    out = []
    for issue in issues:
        host = keys.get(_mbar(issue.event)) if issue.kind in _REINIT_CONSEQUENCES else None
        if host is None:
            out.append(issue)
            continue
        host.related.append(issue.event)
        host.witness.append(f"consequence: {issue.kind} at {describe_event(issue.event)}")
    return out


def _mbar(e):
    if isinstance(e, ev.MBarrierEvent):
        return (e.space_cta, e.addr)
    return None


def _line(e) -> tuple:
    return (e.loc.file, e.loc.line) if e.loc is not None else (None, None)


def _where(e) -> str:
    return f"{e.loc.file.rsplit('/', 1)[-1]}:{e.loc.line}" if e.loc is not None else "?"
