"""racecheck's findings: which line is primary, and races that come from divergent lanes.

A mixin of `racecheck.RaceChecker`. The primary line of a race is the access that consumed
unordered data (the read of a read/write race), the overwriting write of a stage reuse, or the
generic write that lacks its proxy fence.

``race.divergent-lanes`` (issue 13 class 4): the conflict exists only because the lanes of one
warp are separate threads after it diverged (`lanes`); at warp granularity the accesses would be
ordered. Two shapes:

- both accesses are by lanes of the same warp, with no join (``bar.warp.sync``) between them: the
  primary line is the second access;
- an access by some lanes of warp W is published by a release (mbarrier arrive, async-op issue,
  fence, barrier) that other lanes of W execute later in W's program, and that release is how the
  conflicting access synchronizes with W: the lanes that published never joined the lanes that
  wrote. The primary line is that release (where a ``bar.warp.sync`` belongs before it).
"""

from __future__ import annotations

import bisect
import os

from tirxh_numsim import events as ev

from .report import Issue, describe_event

MAX_ISSUES = 64


class RaceReports:
    """`add` and `_race` of `RaceChecker` (see the module docstring)."""

    def add(self, issue: Issue) -> None:
        if len(self.issues) >= MAX_ISSUES:
            return
        e = issue.event
        rel = issue.related[0] if issue.related else None
        key = (issue.kind, frozenset((_line(e), _line(rel))))
        self.issues.setdefault(key, issue)

    def _race(self, kind, first, second, reg, offset, lane, message=None, t1=None,
              t2=None) -> None:
        where = self.describe_region(reg, offset, second)
        if kind in ("race.read-write", "race.write-write") and t1 is not None and \
                t2 is not None and self._divergent_lanes(first, second, t1, t2, where, lane):
            return
        what = {"race.write-write": "write/write conflict",
                "race.read-write": "read/write conflict",
                "race.stage-reuse": "buffer overwritten while an asynchronous operation may "
                                    "still read it"}.get(kind, kind)
        msg = message or (f"{what} on {where}: {describe_event(first)} and "
                          f"{describe_event(second)} are not ordered by happens-before")
        witness = [f"1. {describe_event(first)} (step {first.step})",
                   f"2. {describe_event(second)} (step {second.step})",
                   "no synchronization orders 1 before 2 in every execution"
                   if kind != "proxy.missing-fence" else
                   "ordered, but no fence.proxy.async between the proxies"]
        primary, other = second, first
        if kind == "race.read-write" and second.access != "read":
            primary, other = first, second
        elif kind == "proxy.missing-fence":
            primary, other = first, second
        related = [other]
        probe = self.ignored_seen.get(self.widx.get((primary.cta, primary.warp)))
        if probe is not None and probe.seq < primary.seq:
            related.append(probe)
            witness.append(f"{describe_event(probe)}: its result decides nothing, so it is not a "
                           "wait (a wait loops or branches on the try_wait's predicate)")
        self.add(Issue(kind, msg, event=primary, related=related, witness=witness,
                       addresses=[where], lanes=[lane] if lane >= 0 else [],
                       data={"space": second.space}))

    def describe_region(self, reg, offset: int, e) -> str:
        """Where byte `offset` of `reg` is, for a message about access `e`: the shared buffer's
        name, or the global parameter and offset."""
        if reg.name.startswith("('shared'") and self.layout is not None:
            return f"shared {self.layout.name_of(offset)} (cta {e.space_cta})"
        if reg.name.startswith("('global'"):
            return f"global {reg.name.split(',')[1].strip(' )')!s}+{offset}"
        return reg.name

    def _divergent_lanes(self, first, second, t1: int, t2: int, where: str, lane: int) -> bool:
        """Report the race as ``race.divergent-lanes`` when it is one (module docstring)."""
        if t1 >= self.nthreads or t1 == t2:
            return False
        w1 = self.lanes.warp_of[t1]
        split = self.lanes.split_at.get(t1)
        branch = self.events[split] if split is not None else None
        if t2 < self.nthreads and self.lanes.warp_of[t2] == w1:
            msg = (f"{where}: {describe_event(first)} and {describe_event(second)} are lanes of "
                   "one warp that diverged; nothing joins them in between (bar.warp.sync), so "
                   "under independent thread scheduling the two accesses are unordered")
            self.add(Issue("race.divergent-lanes", msg, event=second,
                           related=[first] + ([branch] if branch is not None else []),
                           witness=[f"1. {describe_event(first)}", f"2. {describe_event(second)}",
                                    "the lanes of 1 and 2 run as separate threads since the "
                                    "warp diverged" + (f" at {_where(branch)}" if branch else "")],
                           addresses=[where], lanes=[lane] if lane >= 0 else []))
            return True
        vc2 = self.clock(t2)
        for t in self.lanes.classes_of_warp(w1):
            if t == t1:
                continue
            rel = self._publishing_release(t, first.seq, int(vc2[t]))
            if rel is None:
                continue
            msg = (f"{where}: {describe_event(first)} happened after its warp diverged; "
                   f"{describe_event(rel)} later releases only its own lanes' accesses (no "
                   "bar.warp.sync joined the lanes first), so "
                   f"{describe_event(second)} is not ordered after it")
            self.add(Issue("race.divergent-lanes", msg, event=rel,
                           related=[first, second] + ([branch] if branch is not None else []),
                           witness=[f"1. {describe_event(first)}",
                                    f"2. {describe_event(rel)} (publishes)",
                                    f"3. {describe_event(second)} (synchronizes with 2)",
                                    "1 and 2 are lanes of one warp that never joined"],
                           addresses=[where], lanes=[lane] if lane >= 0 else []))
            return True
        return False

    def _publishing_release(self, t: int, after_seq: int, known: int):
        """The last release by lane class `t` after its warp's event `after_seq` that the other
        side knows (its clock value is at most `known`): the one it synchronized through; None
        when it knows none. Proxy fences are not publications (they are logged as releases for
        the proxy rule only)."""
        log = [(v, e) for v, e in self.rel_log.get(t, []) if not isinstance(e, ev.FenceEvent)]
        lo = bisect.bisect_right([e.seq for _, e in log], after_seq)
        hi = bisect.bisect_right([v for v, _ in log], known)
        return log[hi - 1][1] if hi > lo else None


def _line(e):
    if e is None or e.loc is None:
        return None
    return (os.path.basename(e.loc.file), e.loc.line)


def _where(e) -> str:
    return f"{os.path.basename(e.loc.file)}:{e.loc.line}" if e.loc is not None else "?"
