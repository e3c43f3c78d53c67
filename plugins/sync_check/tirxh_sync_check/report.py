"""Findings for people and agents: `Issue` (an analysis' raw result) -> `Finding`.

Both analyses produce `Issue`s that keep the trace events involved. Converting to a `Finding`
resolves them into what reports carry: the primary source line (`where`), the other line(s)
(`related`: the second access of a race, the init of a barrier used too early), the warps, lanes
and addresses involved, and the witness (the interleaving, or the two unordered events) as text
lines. `format_finding` renders one for the terminal with the source lines around each location.
"""

from __future__ import annotations

import linecache
import os
from dataclasses import dataclass, field
from typing import Any

from tirxh.api import Finding, SourceRef
from tirxh_numsim import events as ev

# finding kinds (stable ids) and whether each is a bug (error) or advisory (review)
KINDS = {
    # synccheck
    "mbarrier.uninitialized": "error",
    "mbarrier.reinit-in-use": "error",
    "mbarrier.arrival-count": "error",
    "mbarrier.tx-mismatch": "error",
    "mbarrier.parity-never": "error",
    "mbarrier.phase-overrun": "error",
    "barrier.count-mismatch": "error",
    "barrier.divergent": "error",
    "barrier.shared-id": "error",
    "wgmma.accumulator-early": "error",
    "wgmma.missing-fence": "error",
    "setmaxnreg.partial-warpgroup": "error",
    "setmaxnreg.pool-exhausted": "error",
    "warp.membermask": "error",
    "warp.aligned-divergent": "error",
    "cluster-barrier.mismatch": "error",
    "deadlock": "error",
    "exit.bulk-store-pending": "error",
    "exit.async-write-pending": "error",
    "exit.cp-async-pending": "error",
    # racecheck
    "race.read-write": "error",
    "race.write-write": "error",
    "race.stage-reuse": "error",
    "race.unordered-atomic-read": "error",
    "race.divergent-lanes": "error",
    "race.converged-lanes": "error",
    "proxy.missing-fence": "error",
    "memory.out-of-bounds": "error",
}


def op_step(text: str) -> str:
    return text


@dataclass
class Issue:
    """One problem before it becomes a `Finding`: the events stay attached."""

    kind: str
    message: str
    event: Any = None  # the primary event (its loc is `where`)
    related: list = field(default_factory=list)  # other events (their locs are `related`)
    witness: list = field(default_factory=list)
    data: dict = field(default_factory=dict)
    loc: Any = None  # a source location when there is no event (static checks)
    related_locs: list = field(default_factory=list)
    addresses: list = field(default_factory=list)
    lanes: list = field(default_factory=list)
    label: str = ""  # what the primary location is, when it is `loc` rather than an event


def _ref(loc, label: str = "") -> "SourceRef | None":
    if loc is None:
        return None
    return SourceRef(loc.file, loc.line, label)


def _label(e) -> str:
    if isinstance(e, ev.MemAccess):
        return f"{e.proxy} {e.access} {e.space}"
    if isinstance(e, ev.MBarrierEvent):
        return f"mbarrier {e.op}"
    if isinstance(e, ev.BarrierEvent):
        return f"bar.{e.op}"
    if isinstance(e, ev.AsyncOp):
        return f"{e.engine} {e.stage}"
    if e is None:
        return ""
    return type(e).__name__


def describe_event(e) -> str:
    """One line naming an event: who, what, where."""
    if e is None:
        return "?"
    where = f"{os.path.basename(e.loc.file)}:{e.loc.line}" if e.loc is not None else "?"
    return f"cta {e.cta} warp {e.warp} lanes {e.lanes:#010x}: {_label(e)} @ {where}"


def to_finding(issue: Issue) -> Finding:
    severity = KINDS.get(issue.kind, "error")
    loc = issue.loc or (issue.event.loc if issue.event is not None else None)
    where = _ref(loc, issue.label or _label(issue.event))
    related = [_ref(e.loc, _label(e)) for e in issue.related if e is not None and e.loc]
    related += [_ref(loc_, label) for loc_, label in issue.related_locs]
    evs = [e for e in [issue.event] + list(issue.related) if e is not None]
    warps = sorted({(e.cta, e.warp) for e in evs})
    lanes = issue.lanes or sorted({ln for e in evs[:1] for ln in ev.lanes_of(e.lanes)})
    uniq, seen = [], {(where.file, where.line) if where else None}
    for r in related:
        if r is not None and (r.file, r.line) not in seen:
            seen.add((r.file, r.line))
            uniq.append(r)
    return Finding(kind=issue.kind, message=issue.message, severity=severity, where=where,
                   related=uniq,
                   warps=[{"cta": c, "warp": w} for c, w in warps], lanes=list(lanes),
                   addresses=list(issue.addresses), witness=list(issue.witness),
                   data=dict(issue.data))


def format_finding(f: Finding, context: int = 1) -> str:
    """Terminal text: kind and message, each source line with context, then the witness."""
    out = [f"{f.severity.upper()} {f.kind}: {f.message}"]
    for ref, tag in [(f.where, "at")] + [(r, "and") for r in f.related]:
        if ref is None:
            continue
        out.append(f"  {tag} {ref}")
        for n in range(max(1, ref.line - context), ref.line + context + 1):
            text = linecache.getline(ref.file, n).rstrip()
            if text or n == ref.line:
                out.append(f"    {'>' if n == ref.line else ' '} {n:5d} | {text}")
    if f.warps:
        out.append("  warps: " + ", ".join(
            f"cta {w['cta']} warp {w['warp']}" if "warp" in w else str(w.get("where", w))
            for w in f.warps[:8]) + (f", ... ({len(f.warps)})" if len(f.warps) > 8 else ""))
    if f.lanes and len(f.lanes) < 32:
        out.append("  lanes: " + ", ".join(str(x) for x in f.lanes))
    if f.addresses:
        out.append("  addresses: " + ", ".join(str(a) for a in f.addresses[:8]))
    if f.witness:
        out.append("  witness:")
        out.extend(f"    {w}" for w in f.witness[:40])
        if len(f.witness) > 40:
            out.append(f"    ... ({len(f.witness) - 40} more steps)")
    return "\n".join(out)
