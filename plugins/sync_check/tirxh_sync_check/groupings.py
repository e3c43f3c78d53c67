"""Named-barrier generations the hardware may form other than numsim's (issue 13 class 1).

``bar.sync a, b`` / ``bar.arrive a, b`` complete a generation of barrier `a` once `b` threads
arrived, whoever they are: the hardware groups arrivals in arrival order. When more warps use an
id than one generation holds (two producer/consumer pairs on one id), or a warp arrives without
waiting, a generation can be formed by warps that were never meant to meet. numsim's run forms
one grouping; synccheck's explorer interleaves the arrivals on such barriers and records every
generation it saw formed (`synccheck._Explorer.formed`).

For each generation formed by a set of arrivals that no generation of numsim's run had, this
module takes one whole interleaving through it (`path_through`), derives the grouping of every
such barrier along it, and runs racecheck again with that grouping (`racecheck.check(...,
bar_groups=...)`). A race that appears only under the other grouping is a
``barrier.shared-id`` finding: its primary line is the barrier instruction of the warp that the
foreign arrival released, the foreign arrival and the two accesses are related lines.

At most `MAX_ALTERNATIVES` groupings are checked; beyond that the result says so (incomplete).
"""

from __future__ import annotations

import os

from tirxh_numsim import events as ev

from . import racecheck
from .report import Issue, describe_event

MAX_ALTERNATIVES = 8


def reference_groups(trace) -> set:
    """The generations numsim's run formed: frozensets of arrival events' ids."""
    block = 1
    for d in trace.block:
        block *= d
    everyone = -(-block // 32) * 32
    open_: dict = {}  # (cta, id) -> [threads, ids]
    out = set()
    for e in trace.events:
        if isinstance(e, ev.BarrierEvent) and e.op in ("sync", "arrive") and not e.released:
            st = open_.setdefault((e.cta, e.barrier), [0, []])
            st[0] += 32
            st[1].append(id(e))
            if st[0] >= (e.count if e.count is not None else everyone):
                out.add(frozenset(st[1]))
                st[0], st[1] = 0, []
    return out


def check(trace, kir, buffers, ignored, results: list, base_issues: list) -> "tuple[list, list]":
    """(``barrier.shared-id`` issues, notes of what was not checked) for the explorer results
    `results` of every cluster; `base_issues` are racecheck's issues under numsim's grouping."""
    ref = reference_groups(trace)
    alts = []
    for r in results:
        ex = r.explorer
        if ex is None:
            continue
        for ids, (key, step) in ex.formed.items():
            if ids not in ref:
                alts.append((ex, ids, key, step))
    notes = []
    if len(alts) > MAX_ALTERNATIVES:
        notes.append((None, f"{len(alts)} named-barrier generations can be formed otherwise than "
                            f"in numsim's run; racecheck checked the first {MAX_ALTERNATIVES}"))
        alts = alts[:MAX_ALTERNATIVES]
    seen = {_key(i) for i in base_issues}
    out = []
    for ex, ids, key, step in alts:
        steps = ex.path_through(key, step)
        assign = _assignment(ex, steps)
        if assign is None:  # the interleaving blocks: the explorer reports that itself
            continue
        issues, _ = racecheck.check(trace, kir, buffers, ignored, bar_groups=assign)
        for issue in issues:
            if _key(issue) in seen or not issue.kind.startswith("race."):
                continue
            seen.add(_key(issue))
            out.append(_finding(ex, ids, ref, assign, issue))
    return out, notes


def _assignment(ex, steps: list) -> "dict | None":
    """``{id(arrival event): generation key}`` for the grouping-sensitive barriers along
    `steps`; None when an arrival of them is not on the path (it blocked)."""
    assign, cur = {}, {}
    for step in steps:
        if step[0] != "warp":
            continue
        op = ex.ops[step[1]][step[2]]
        if op.kind != "bar_arrive" or op.obj not in ex.sensitive:
            continue
        st = cur.setdefault(op.obj, [0, 0])
        assign[id(op.event)] = ("alt",) + op.obj[1:] + (st[1],)
        st[0] += op.count
        if st[0] >= op.expected:
            st[0], st[1] = 0, st[1] + 1
    wanted = {id(op.event) for ops in ex.ops for op in ops
              if op.kind == "bar_arrive" and op.obj in ex.sensitive}
    return assign if wanted <= set(assign) else None


def _finding(ex, ids: frozenset, ref: set, assign: dict, race: Issue) -> Issue:
    """The race under the other grouping, as a finding on the barrier (module docstring): the
    primary line is the last ``bar.sync`` before one of the racing accesses (the primary access
    first) whose generation differs from numsim's run; `ids` (the generation that led here) is
    the fallback."""
    home = {i: g for g in ref for i in g}
    by_gen: dict = {}
    for i, g in assign.items():
        by_gen.setdefault(g, set()).add(i)
    arrivals = {id(op.event): op for ops in ex.ops for op in ops if op.kind == "bar_arrive"}
    victim, members = None, None
    for acc in [race.event] + list(race.related[:1]):
        if acc is None:
            continue
        mine = [op for op in arrivals.values() if op.event.op == "sync" and
                (op.event.cta, op.event.warp) == (acc.cta, acc.warp) and
                op.event.seq < acc.seq and id(op.event) in assign]
        if mine:
            last = max(mine, key=lambda op: op.event.seq)
            gen = by_gen[assign[id(last.event)]]
            if gen != home.get(id(last.event)):
                victim, members = last, [arrivals[i] for i in gen]
                break
    if victim is None:
        members = [arrivals[i] for i in ids]
        victim = next((op for op in members if op.event.op == "sync"), members[0])
    partners = home.get(id(victim.event), frozenset())
    foreign = [op for op in members if op is not victim and id(op.event) not in partners]
    e = victim.event
    count = victim.expected
    users = sorted({(op.event.cta, op.event.warp) for op in arrivals.values()
                    if op.obj == victim.obj})
    msg = (f"named barrier {e.barrier} (count {count}) is used by warps "
           f"{', '.join(str(w) for _, w in users)} of cta {e.cta}, more than one generation "
           f"holds: the hardware forms a generation from the first {count} threads to arrive, "
           f"so warp {e.warp}'s {_name(e)} at {_where(e)} can complete together with "
           + ", ".join(f"warp {op.event.warp}'s {_name(op.event)} at {_where(op.event)}"
                       for op in foreign)
           + f" instead of its partner's; with that grouping: {race.message}")
    witness = ["generation formed by: " + "; ".join(describe_event(op.event) for op in members)]
    witness += list(race.witness)
    return Issue("barrier.shared-id", msg, event=e,
                 related=[op.event for op in foreign] + [race.event] + list(race.related[:1]),
                 witness=witness, addresses=list(race.addresses), lanes=list(race.lanes),
                 data={"barrier": e.barrier, "count": count, "race": race.kind})


def _key(issue: Issue):
    lines = [_line(issue.event)] + [_line(r) for r in issue.related[:1]]
    return (issue.kind, frozenset(lines))


def _line(e):
    return (os.path.basename(e.loc.file), e.loc.line) if e is not None and e.loc else None


def _where(e) -> str:
    return f"{os.path.basename(e.loc.file)}:{e.loc.line}" if e.loc is not None else "?"


def _name(e) -> str:
    return "bar.sync" if e.op == "sync" else "bar.arrive"
