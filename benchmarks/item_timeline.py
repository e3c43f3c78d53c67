"""Where a persistent kernel's time goes when each warp walks a static list of items (rows of
top-k, heads of the KDA decode): per warp, how many items, how long it lived, how much of that it
waited for data and how long an item's end took; across warps and SMs, when they finished and
what a dynamic walk (items handed out by a counter) would have saved.

    python benchmarks/item_timeline.py PROFILE_DIR [PROFILE_DIR ...] --item row_end --wait wait

PROFILE_DIR holds `tirxh profile --iket`'s iket_trace.bin and iket_trace.layout.json (a
gpu_bench.sh archive's profile_N/<node>/, or any directory above them). `--item` names the
range that closes each item (one a row or head), `--wait` the range(s) in which a warp waits
for its data; only the warps that record the item range count (kda_decode_cols' producer
records only `wait_done`). Exit 1 when a trace lost events (its counts are then partial: rerun
with the capacity the report names), 2 when no trace was found.

Why: the session-21 timelines of kda_decode_cols (/work/notes/s21, the ad-hoc script this
replaces) showed SMs walking heads at rates 14-35% apart, the static walk ending with the
slowest; the same question for top-k (docs/TUNING.md "top-k (session 22)") is whether its warps
wait for data (a stream-bound kernel: more bytes in flight), spend their time at the row end (a
selection-bound one: fewer instructions on that chain), or end at different times (a balance
problem: a counter). The *dynamic estimate* is items / (sum over warps of items / lifetime):
the end if every warp kept its measured rate and items were dealt as warps freed up, without the
quantization of the last items; compare it with the last warp's end.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys

import numpy as np


def _pct(a, q) -> float:
    return float(np.percentile(a, q)) if len(a) else 0.0


def analyze(tl, item: str, waits=("wait",)) -> dict:
    """The per-warp figures of timeline `tl` (a `tirxh_iket.decode.Timeline`), in microseconds;
    only the warps with at least one `item` span count."""
    t0 = min((w.start for w in tl.warps), default=0.0)
    rows = []
    for w in tl.warps:
        spans = w.spans
        items = [s for s in spans if s.name == item]
        if not items:
            continue
        waited = sum(s.dur for s in spans if s.name in waits and s.depth == 0)
        life = w.end - w.start
        rows.append({"sm": w.sm, "cta": w.cta, "warp": w.warp, "items": len(items),
                     "start": (w.start - t0) / 1e3, "end": (w.end - t0) / 1e3,
                     "life": life / 1e3, "wait": waited / 1e3,
                     "item_end": sum(s.dur for s in items) / 1e3,
                     "per_item": life / len(items) / 1e3})
    if not rows:
        raise ValueError(f"no warp of {tl.kernel} recorded a {item!r} range (ranges seen: "
                         f"{sorted({s.name for w in tl.warps for s in w.spans})})")
    end = np.array([r["end"] for r in rows])
    n_items = np.array([r["items"] for r in rows])
    life = np.array([r["life"] for r in rows])
    wait_frac = np.array([r["wait"] / r["life"] if r["life"] else 0.0 for r in rows])
    end_frac = np.array([r["item_end"] / r["life"] if r["life"] else 0.0 for r in rows])
    per_sm: dict = {}
    for r in rows:
        per_sm[r["sm"]] = max(per_sm.get(r["sm"], 0.0), r["end"])
    sm_end = np.array(list(per_sm.values()))
    by_count = {int(k): float(np.median(end[n_items == k])) for k in sorted(set(n_items))}
    total = int(n_items.sum())
    dynamic = total / float(np.sum(n_items / np.maximum(life, 1e-9)))
    start_med = _pct([r["start"] for r in rows], 50)
    return {
        "kernel": tl.kernel, "events_lost": tl.loss(), "warps": len(rows), "sms": len(per_sm), "items": total,
        "items_per_warp": [int(n_items.min()), int(n_items.max())],
        "end_us": {"min": float(end.min()), "median": _pct(end, 50), "max": float(end.max())},
        "sm_end_us": {"median": _pct(sm_end, 50), "max": float(sm_end.max()),
                      "tail": float(sm_end.max()) - _pct(sm_end, 50)},
        "median_end_by_items": by_count,
        "wait_fraction": {"p10": _pct(wait_frac, 10), "median": _pct(wait_frac, 50),
                          "p90": _pct(wait_frac, 90)},
        "item_end_fraction": {"median": _pct(end_frac, 50)},
        "item_end_us": _pct([r["item_end"] / r["items"] for r in rows], 50),
        "per_item_us": {"p10": _pct([r["per_item"] for r in rows], 10),
                        "median": _pct([r["per_item"] for r in rows], 50),
                        "p90": _pct([r["per_item"] for r in rows], 90)},
        "dynamic_estimate_us": dynamic + start_med,
        "slowest": sorted(rows, key=lambda r: -r["end"])[:4],
    }


def format_report(a: dict) -> str:
    e, s, w = a["end_us"], a["sm_end_us"], a["wait_fraction"]
    p = a["per_item_us"]
    lines = [
        f"{a['kernel']}: {a['warps']} warps on {a['sms']} SMs, {a['items']} items "
        f"({a['items_per_warp'][0]}-{a['items_per_warp'][1]} a warp)",
        f"  warp end: min {e['min']:.1f} median {e['median']:.1f} max {e['max']:.1f} us; SM end "
        f"median {s['median']:.1f}, tail {s['tail']:.1f} us "
        f"({s['tail'] / max(e['max'], 1e-9):.1%})",
        "  median end by items a warp: " + ", ".join(
            f"{k}: {v:.1f} us" for k, v in a["median_end_by_items"].items()),
        f"  waiting for data: {w['median']:.1%} of a warp's life (p10 {w['p10']:.1%}, p90 "
        f"{w['p90']:.1%}); item ends {a['item_end_fraction']['median']:.1%} "
        f"({a['item_end_us']:.2f} us an item)",
        f"  time an item per warp: p10 {p['p10']:.2f} median {p['median']:.2f} p90 "
        f"{p['p90']:.2f} us",
        f"  dynamic estimate {a['dynamic_estimate_us']:.1f} us against the last warp's "
        f"{e['max']:.1f} us",
    ]
    if a.get("events_lost"):  # item counts and shares then cover only the kept events
        from tirxh_iket.decode import loss_message
        lines.append(f"  INCOMPLETE: {loss_message(a['events_lost'])}")
    return "\n".join(lines)


def _trace_dirs(path: str) -> list:
    """`path` itself when it holds a trace, else every directory below it that does."""
    if os.path.exists(os.path.join(path, "iket_trace.bin")):
        return [path]
    return sorted(os.path.dirname(p) for p in
                  glob.glob(os.path.join(path, "**", "iket_trace.bin"), recursive=True))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--item", default="row_end", help="the range that closes each item")
    ap.add_argument("--wait", action="append", help="range(s) of waiting for data "
                    "(repeatable; default: wait)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from tirxh_iket.decode import load  # the iket plugin distribution
    found = [d for p in args.dirs for d in _trace_dirs(p)]
    if not found:
        print(f"item_timeline: no iket_trace.bin under {', '.join(args.dirs)}", file=sys.stderr)
        return 2
    out = []
    for d in found:
        tl = load(os.path.join(d, "iket_trace.bin"), os.path.join(d, "iket_trace.layout.json"))
        a = analyze(tl, args.item, tuple(args.wait or ["wait"]))
        out.append(a)
        if not args.json:
            print(f"{d}\n{format_report(a)}")
    if args.json:
        print(json.dumps(out, indent=1))
    return 1 if any(a["events_lost"] for a in out) else 0


if __name__ == "__main__":
    sys.exit(main())
