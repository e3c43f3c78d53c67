"""Timeline -> a PNG picture (matplotlib, Agg backend: no display needed).

Rows are the Chrome-trace tracks (SM x role lane), top-level and nested ranges drawn as bars
(nested ones thinner), marks as ticks. Large grids are cut to the first `max_sms` SMs, and the
title says so.

Every bar goes into ONE `PolyCollection` and every mark into one line, built from numpy arrays:
a full trace of a persistent kernel (132 CTAs x 9 recording warps x 1024 events, the FA3
attention profile of sessions 7 and 8) has ~40,000 ranges on its first 12 SMs, and one
``broken_barh`` artist per range took 340 s to draw on a 2-core CPU (past the job's budget, so
`tirxh profile --iket` was killed); one collection draws them in about a second.
"""

from __future__ import annotations

import numpy as np

from .chrome import _lanes
from .decode import Timeline

BAR_HEIGHT = {True: 0.8, False: 0.45}  # top-level range: True; nested: False


def bars(tl: Timeline, max_sms: int = 12) -> dict:
    """What `write_png` draws, as arrays: ``x0``/``width`` (us), ``y``, ``height``, ``name``
    (index into ``names``) per bar; ``mark_x``/``mark_y`` per mark; ``labels`` per row; the SMs
    shown. Widths are at least 1 ns, so an instantaneous range stays visible."""
    sms = tl.sms[:max_sms]
    lanes = {k: v for k, v in _lanes(tl).items() if k[0] in sms}
    names = sorted({s.name for w in tl.warps for s in w.spans})
    index = {n: i for i, n in enumerate(names)}
    x0, w, y, h, nm, mx, my, labels = [], [], [], [], [], [], [], []
    row = 0
    for (sm, role), lane_list in sorted(lanes.items()):
        for li, warps in enumerate(lane_list):
            for wp in warps:
                x0.extend(s.start for s in wp.spans)
                w.extend(s.dur for s in wp.spans)
                h.extend(BAR_HEIGHT[s.depth == 0] for s in wp.spans)
                nm.extend(index[s.name] for s in wp.spans)
                y.extend([row] * len(wp.spans))
                mx.extend(m.t for m in wp.marks)
                my.extend([row] * len(wp.marks))
            labels.append(f"SM{sm} {role[:18]}" + (f" #{li + 1}" if len(lane_list) > 1 else ""))
            row += 1
    f64 = np.float64
    return {"x0": np.asarray(x0, f64) / 1e3, "width": np.maximum(np.asarray(w, f64), 1.0) / 1e3,
            "y": np.asarray(y, f64), "height": np.asarray(h, f64),
            "name": np.asarray(nm, np.int64), "names": names,
            "mark_x": np.asarray(mx, f64) / 1e3, "mark_y": np.asarray(my, f64),
            "labels": labels, "sms": sms}


def write_png(tl: Timeline, path, max_sms: int = 12, title: "str | None" = None) -> dict:
    """Draw `tl` into `path`; returns what was drawn (rows, SMs shown/total)."""
    try:
        import matplotlib  # optional dependency (the test extra): only the PNG needs it
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # optional dependency, as above
        from matplotlib.collections import PolyCollection  # optional dependency, as above
    except ImportError as e:  # a usage problem on this machine, said plainly
        raise RuntimeError("the iket PNG timeline needs matplotlib: pip install matplotlib") from e
    b = bars(tl, max_sms)
    labels, names, sms = b["labels"], b["names"], b["sms"]
    cmap = plt.get_cmap("tab10")
    palette = np.array([cmap(i % 10) for i in range(max(len(names), 1))])
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.28 * max(len(labels), 1)), dpi=110)
    if len(b["x0"]):
        x0, x1 = b["x0"], b["x0"] + b["width"]
        y0, y1 = b["y"] - b["height"] / 2, b["y"] + b["height"] / 2
        verts = np.stack([np.stack([x0, y0], 1), np.stack([x0, y1], 1),
                          np.stack([x1, y1], 1), np.stack([x1, y0], 1)], 1)
        ax.add_collection(PolyCollection(verts, facecolors=palette[b["name"]], linewidths=0))
        ax.set_xlim(float(x0.min()), float(x1.max()))
    if len(b["mark_x"]):
        ax.plot(b["mark_x"], b["mark_y"], "|", color="k", markersize=7)
    ax.set_ylim(-0.5, max(len(labels), 1) - 0.5)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time since first event (us)")
    shown = f"SMs {len(sms)} of {len(tl.sms)}" if len(tl.sms) > len(sms) else f"{len(sms)} SMs"
    ax.set_title(title or f"iket timeline: {tl.kernel} ({shown}, time base {tl.timebase})",
                 fontsize=9)
    handles = [plt.Rectangle((0, 0), 1, 1, color=palette[i]) for i in range(len(names))]
    if handles:
        ax.legend(handles, names, loc="upper right", fontsize=7, ncol=min(len(names), 6))
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return {"rows": len(labels), "sms_shown": len(sms), "sms_total": len(tl.sms)}
