"""Timeline -> the numbers that answer "where does the time go": per-role busy/idle, the longest
bubbles, and the load-balance tail across SMs.

Definitions (all per warp, then aggregated by role): a warp's *lifetime* runs from its first to its
last event; it is *busy* while inside at least one top-level range; *idle* is the rest of its
lifetime; a *bubble* is an idle gap between two consecutive top-level ranges of the same warp. The
*tail* is how long the last SM kept working after the median SM finished.

CTA phases. When every warp of every complete CTA records the same top-level ranges in the same
order (a kernel whose phases are separated by ``bar.sync``, each warp entering each phase), a
phase's *wall* in a CTA is the CTA's latest end of that range less its latest end of the range
before (the first: less the CTA's first begin), and the walls add up to the CTA's time. A warp's
own span does not give it: a warp idle in a phase records the barrier wait before the next one
inside that next range (session 30's kda_bwd_local_tc trace, docs/PROFILING.md "Ranges across a
barrier"), while the latest end is when the slowest warp, the one the barrier waits for, got
there. The walls are medians and 90th percentiles over the CTAs; a kernel whose warps record
different ranges (warp-specialized roles, persistent walks) has no phase table.

Lost events. A warp that ran out of trace capacity kept its first events and its last one
(`decode._pair`): its lifetime for busy/idle is its first events' (up to the gap), while the SM
finish times still use its true last event. ``events_lost`` says how many, in how many warps, the
largest per-warp need and the capacity to rerun with; the verdict is then ``incomplete``.
"""

from __future__ import annotations

import numpy as np

from .decode import Timeline, loss_message


def _union(intervals) -> float:
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def cta_phases(tl: Timeline) -> "dict | None":
    """The CTA phase table (module docstring), or None: where a CTA's warps, or two CTAs,
    record different sequences of top-level ranges, where fewer than two ranges or warps make
    a phase, and where the trace lost events or left a range unpaired. A CTA with fewer warps
    recorded than the fullest CTA (a warp that wrote no event) is left out of the table."""
    ctas: dict = {}
    for w in tl.warps:
        ctas.setdefault((w.sm, w.cta), []).append(w)
    if not ctas or tl.issues or any(w.dropped or w.cut for w in tl.warps):
        return None
    size = max(len(ws) for ws in ctas.values())
    order, walls, totals = None, [], []
    for ws in ctas.values():
        if len(ws) != size:
            continue
        seqs = {tuple(s.name for s in w.spans if s.depth == 0) for w in ws}
        if len(seqs) != 1:
            return None
        (seq,) = seqs
        if not seq:
            return None
        if order is None:
            order = seq
        elif seq != order:
            return None
        tops = [[s for s in w.spans if s.depth == 0] for w in ws]
        prev = min(t[0].start for t in tops)
        first, row = prev, []
        for i in range(len(order)):
            end = max(t[i].end for t in tops)
            row.append(end - prev)
            prev = end
        walls.append(row)
        totals.append(prev - first)
    if not order or len(order) < 2 or size < 2:
        return None
    w = np.array(walls)
    total = float(np.median(totals))
    return {"ctas": len(walls), "warps_per_cta": size, "cta_median_ns": total,
            "phases": [{"name": n, "median_ns": float(np.median(w[:, i])),
                        "p90_ns": float(np.percentile(w[:, i], 90)),
                        "share": float(np.median(w[:, i])) / total if total else 0.0}
                       for i, n in enumerate(order)]}


def summarize(tl: Timeline, top: int = 5) -> dict:
    """A JSON-serializable summary of `tl` (see the module docstring for the definitions)."""
    roles: dict = {}
    bubbles = []
    for w in tl.warps:
        life = w.covered_end - w.start  # a warp that lost events: up to the gap (its spans end)
        tops = [s for s in w.spans if s.depth == 0]
        busy = _union((s.start, s.end) for s in tops)
        r = roles.setdefault(w.role, {"warps": 0, "lifetime_ns": 0.0, "busy_ns": 0.0,
                                      "ranges": {}})
        r["warps"] += 1
        r["lifetime_ns"] += life
        r["busy_ns"] += busy
        for s in w.spans:
            g = r["ranges"].setdefault(s.name, {"count": 0, "total_ns": 0.0, "max_ns": 0.0})
            g["count"] += 1
            g["total_ns"] += s.dur
            g["max_ns"] = max(g["max_ns"], s.dur)
        for a, b in zip(tops, tops[1:]):
            if b.start > a.end:
                bubbles.append({"gap_ns": b.start - a.end, "role": w.role, "sm": w.sm,
                                "cta": w.cta, "warp": w.warp, "after": a.name, "before": b.name,
                                "at_ns": a.end, "where": b.where})
    for r in roles.values():
        r["idle_ns"] = r["lifetime_ns"] - r["busy_ns"]
        r["busy_fraction"] = r["busy_ns"] / r["lifetime_ns"] if r["lifetime_ns"] else 0.0
        for g in r["ranges"].values():
            g["mean_ns"] = g["total_ns"] / g["count"]
    bubbles.sort(key=lambda b: -b["gap_ns"])
    per_sm: dict = {}
    for w in tl.warps:
        d = per_sm.setdefault(w.sm, {"first_ns": w.start, "last_ns": w.end, "ctas": set()})
        d["first_ns"] = min(d["first_ns"], w.start)
        d["last_ns"] = max(d["last_ns"], w.end)
        d["ctas"].add(w.cta)
    finish = np.array([d["last_ns"] for d in per_sm.values()]) if per_sm else np.zeros(1)
    med = float(np.median(finish))
    stragglers = sorted(per_sm.items(), key=lambda kv: -kv[1]["last_ns"])[:top]
    balance = {
        "sms": len(per_sm),
        "finish_min_ns": float(finish.min()), "finish_median_ns": med,
        "finish_p90_ns": float(np.percentile(finish, 90)), "finish_max_ns": float(finish.max()),
        "tail_ns": float(finish.max()) - med,
        "tail_fraction": (float(finish.max()) - med) / tl.duration if tl.duration else 0.0,
        "ctas_per_sm": {"min": min((len(d["ctas"]) for d in per_sm.values()), default=0),
                        "max": max((len(d["ctas"]) for d in per_sm.values()), default=0)},
        "stragglers": [{"sm": sm, "finish_ns": d["last_ns"], "ctas": sorted(d["ctas"])[:8]}
                       for sm, d in stragglers],
    }
    return {"kernel": tl.kernel, "duration_ns": tl.duration, "timebase": tl.timebase,
            "clock_ghz": tl.clock_ghz, "warps": len(tl.warps), "roles": roles,
            "bubbles": bubbles[:top], "balance": balance, "cta_phases": cta_phases(tl),
            "events_dropped": tl.dropped,
            "events_lost": tl.loss(),
            "verdict": "incomplete" if tl.issues or not tl.warps else "ok",
            "issues": tl.issues[:20], "issues_total": len(tl.issues)}


def _us(ns: float) -> str:
    return f"{ns / 1e3:.2f} us"


def format_summary(s: dict) -> str:
    """The summary as terminal text."""
    out = [f"iket timeline of {s['kernel']}: {s['warps']} warps on {s['balance']['sms']} SMs, "
           f"{_us(s['duration_ns'])} (time base: {s['timebase']})"]
    out.append(f"  {'role':<28} {'warps':>6} {'busy':>7} {'idle/warp':>12}  ranges (mean)")
    for name, r in sorted(s["roles"].items()):
        ranges = ", ".join(f"{n} {_us(g['mean_ns'])} x{g['count']}"
                           for n, g in sorted(r["ranges"].items()))
        out.append(f"  {name[:28]:<28} {r['warps']:>6} {r['busy_fraction']:>6.1%} "
                   f"{_us(r['idle_ns'] / max(r['warps'], 1)):>12}  {ranges}")
    if s["bubbles"]:
        out.append("  longest bubbles:")
        for b in s["bubbles"]:
            out.append(f"    {_us(b['gap_ns']):>11}  {b['role']} sm {b['sm']} cta {b['cta']} "
                       f"warp {b['warp']}: {b['after']} -> {b['before']} ({b['where']})")
    ph = s.get("cta_phases")
    if ph:
        out.append(f"  CTA phases ({ph['ctas']} CTAs of {ph['warps_per_cta']} warps in lockstep; "
                   "wall = the CTA's latest end of the range less its latest end of the one "
                   f"before; CTA median {_us(ph['cta_median_ns'])}):")
        for p in ph["phases"]:
            out.append(f"    {p['name'][:24]:<24} {_us(p['median_ns']):>11} {p['share']:>6.1%}"
                       f"   p90 {_us(p['p90_ns'])}")
    bal = s["balance"]
    out.append(f"  load balance: SM finish median {_us(bal['finish_median_ns'])}, p90 "
               f"{_us(bal['finish_p90_ns'])}, max {_us(bal['finish_max_ns'])}; tail "
               f"{_us(bal['tail_ns'])} ({bal['tail_fraction']:.1%} of the kernel); CTAs per SM "
               f"{bal['ctas_per_sm']['min']}..{bal['ctas_per_sm']['max']}")
    loss = s.get("events_lost")
    if loss:  # the same line heads `issues`: printed once, as the verdict
        out.append(f"  INCOMPLETE: {loss_message(loss)}")
        out.append(f"  (the figures above cover only the first {loss['capacity'] - 1} events of "
                   "each warp that lost events; the SM finish times are exact: a full region "
                   "keeps its warp's last event)")
    elif s["events_dropped"]:
        out.append(f"  INCOMPLETE: {s['events_dropped']} events lost to full warp regions")
    for msg in s["issues"]:
        if not (loss and msg == loss_message(loss)):
            out.append(f"  issue: {msg}")
    if s["issues_total"] > len(s["issues"]):
        out.append(f"  ... and {s['issues_total'] - len(s['issues'])} more issues")
    if s.get("render_s"):  # set by the KCoral tool (kcoral_tool.render)
        out.append("  rendered in " + ", ".join(f"{k} {v:.2f} s" for k, v in s["render_s"].items()))
    return "\n".join(out)
