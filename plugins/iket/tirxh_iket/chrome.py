"""Timeline -> Chrome trace-event JSON (opens in Perfetto UI and chrome://tracing).

One process per SM (``SM 17``), one thread (track) per warp role on that SM. Warps of one role that
are resident on the SM at the same time (two CTAs per SM, two consumer warpgroups) get separate
lanes of that role (``mma+epilogue #1``, ``#2``) so that no two complete events on a track overlap
unless they nest. Timestamps are microseconds since the first event, as the format asks.
"""

from __future__ import annotations

import json

from .decode import Timeline


def _lanes(tl: Timeline) -> dict:
    """(sm, role) -> list of warps per lane, packing warps whose lifetimes do not overlap."""
    lanes: dict = {}
    for w in sorted(tl.warps, key=lambda w: (w.sm, w.role, w.start)):
        rows = lanes.setdefault((w.sm, w.role), [])
        for row in rows:
            if row[-1].end <= w.start:
                row.append(w)
                break
        else:
            rows.append([w])
    return lanes


def to_chrome(tl: Timeline) -> dict:
    """The trace-event document (``{"traceEvents": [...], ...}``)."""
    roles = {r: i for i, r in enumerate(tl.roles)}
    out = []
    for sm in tl.sms:
        out.append({"ph": "M", "name": "process_name", "pid": sm, "tid": 0,
                    "args": {"name": f"SM {sm}"}})
        out.append({"ph": "M", "name": "process_sort_index", "pid": sm, "tid": 0,
                    "args": {"sort_index": sm}})
    for (sm, role), rows in sorted(_lanes(tl).items()):
        for lane, warps in enumerate(rows):
            tid = roles[role] * 1000 + lane + 1
            label = role if len(rows) == 1 else f"{role} #{lane + 1}"
            out.append({"ph": "M", "name": "thread_name", "pid": sm, "tid": tid,
                        "args": {"name": label}})
            out.append({"ph": "M", "name": "thread_sort_index", "pid": sm, "tid": tid,
                        "args": {"sort_index": tid}})
            for w in warps:
                who = {"cta": w.cta, "warp": w.warp, "hw_warp": w.hwwarp}
                for s in w.spans:
                    out.append({"ph": "X", "name": s.name, "cat": role, "pid": sm, "tid": tid,
                                "ts": s.start / 1e3, "dur": max(s.dur, 0.0) / 1e3,
                                "args": dict(who, where=s.where)})
                for m in w.marks:
                    out.append({"ph": "i", "s": "t", "name": m.name, "cat": role, "pid": sm,
                                "tid": tid, "ts": m.t / 1e3, "args": dict(who, where=m.where)})
    return {"traceEvents": out, "displayTimeUnit": "ns",
            "otherData": {"kernel": tl.kernel, "timebase": tl.timebase,
                          "clock_ghz": tl.clock_ghz, "events_dropped": tl.dropped,
                          "issues": tl.issues[:50], "producer": "tirxh-iket"}}


def write_chrome(tl: Timeline, path) -> None:
    """Write the document in one `json.dumps`: `json.dump` to a file streams through the pure
    Python encoder, 2-3x slower on the ~460,000 ranges of a full attention trace."""
    with open(path, "w") as f:
        f.write(json.dumps(to_chrome(tl), separators=(",", ":")))
