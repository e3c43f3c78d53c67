"""Timeline -> a PNG picture (matplotlib, Agg backend: no display needed).

Rows are the Chrome-trace tracks (SM x role lane), top-level and nested ranges drawn as bars
(nested ones thinner), marks as ticks. Large grids are cut to the first `max_sms` SMs, and the
title says so.
"""

from __future__ import annotations

from .chrome import _lanes
from .decode import Timeline


def write_png(tl: Timeline, path, max_sms: int = 12, title: "str | None" = None) -> dict:
    """Draw `tl` into `path`; returns what was drawn (rows, SMs shown/total)."""
    try:
        import matplotlib  # optional dependency (the test extra): only the PNG needs it
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # optional dependency, as above
    except ImportError as e:  # a usage problem on this machine, said plainly
        raise RuntimeError("the iket PNG timeline needs matplotlib: pip install matplotlib") from e
    sms = tl.sms[:max_sms]
    lanes = {k: v for k, v in _lanes(tl).items() if k[0] in sms}
    rows = sorted(lanes.items())
    names = sorted({s.name for w in tl.warps for s in w.spans})
    cmap = plt.get_cmap("tab10")
    color = {n: cmap(i % 10) for i, n in enumerate(names)}
    nrows = sum(len(v) for _, v in rows)
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.28 * max(nrows, 1)), dpi=110)
    labels, y = [], 0
    for (sm, role), lane_list in rows:
        for li, warps in enumerate(lane_list):
            for w in warps:
                for s in w.spans:
                    h = 0.8 if s.depth == 0 else 0.45
                    ax.broken_barh([(s.start / 1e3, max(s.dur, 1.0) / 1e3)],
                                   (y - h / 2, h), facecolors=color[s.name], linewidth=0)
                if w.marks:
                    ax.plot([m.t / 1e3 for m in w.marks], [y] * len(w.marks), "|", color="k",
                            markersize=7)
            labels.append(f"SM{sm} {role[:18]}" + (f" #{li + 1}" if len(lane_list) > 1 else ""))
            y += 1
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time since first event (us)")
    shown = f"SMs {len(sms)} of {len(tl.sms)}" if len(tl.sms) > len(sms) else f"{len(sms)} SMs"
    ax.set_title(title or f"iket timeline: {tl.kernel} ({shown}, time base {tl.timebase})",
                 fontsize=9)
    handles = [plt.Rectangle((0, 0), 1, 1, color=color[n]) for n in names]
    if handles:
        ax.legend(handles, names, loc="upper right", fontsize=7, ncol=min(len(names), 6))
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return {"rows": len(labels), "sms_shown": len(sms), "sms_total": len(tl.sms)}
