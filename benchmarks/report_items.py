"""What the benchmark summaries (gemm_summary.py, kda_summary.py) read from `tirxh bench
--report-log` files: the item reports, and the timing of each as KCoral measured it.

    records = item_reports(paths, keep=lambda rec: rec["kernel"] == "kda_fwd")
    t = timing(rec)   # {"median_ms", "ratios", "clock", "note", "timing"}, median None if untimed
    sys.exit(cli(argv, __doc__, "kda_summary", build, "KDA items"))  # build -> (markdown, data)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def item_reports(paths, keep) -> list:
    """Every ``item_report`` record that `keep(record)` accepts, one per node id (a later line
    wins); ValueError names the file and line of anything that is not JSON."""
    items: dict = {}
    for path in paths:
        for n, line in enumerate(Path(path).read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not a JSON line ({e.msg})") from None
            if rec.get("event") == "item_report" and keep(rec):
                items[rec["nodeid"]] = rec
    return list(items.values())


def timing(rec: dict) -> dict:
    """The bench phase's timing: median (ms), ratio to each baseline (baseline median / ours),
    SM clock (before, after), and a note (why it was not timed, or the noise it did not beat)."""
    out = {"median_ms": None, "ratios": {}, "clock": None, "note": "", "timing": {}}
    bench = next((p for p in rec.get("phases", []) if p["phase"] == "bench"), None)
    result = ((bench or {}).get("data") or {}).get("result") or {}
    t = result.get("timing") or {}
    out["timing"] = t
    if "candidate" not in t:
        out["note"] = ((bench or {}).get("longrepr") or t.get("skipped") or
                       (result.get("error") or {}).get("message") or
                       ("not benchmarked" if bench is None else "not timed"))
        return out
    out["median_ms"] = t["candidate"]["median_ms"]
    out["ratios"] = {name: b.get("speedup") for name, b in t.get("baselines", {}).items()}
    clk = t.get("sm_clock_mhz") or {}
    out["clock"] = (clk.get("before"), clk.get("after"))
    if not t.get("converged", True):
        out["note"] = f"noise {t.get('rel_noise', 0):.1%}"
    return out


def not_timed(items: list, median: str) -> list:
    """Markdown lines listing the items whose `median` field is None, with the reason."""
    untimed = [i for i in items if i[median] is None]
    if not untimed:
        return []
    return ["", "## Not timed", ""] + [f"- {i['kernel']}[{i['case']}]: {i['outcome']}: "
                                       f"{i['note']}" for i in untimed]


def cli(argv, doc: str, name: str, build, what: str = "items") -> int:
    """The summaries' command line: LOG... [--json OUT]; `build(paths)` returns (markdown, data
    for --json), or None when the logs hold none of `what` (the summary's items). Exit 0, 1 (no
    items), 2 (a log unreadable: named with its line)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("logs", nargs="+", help="tirxh bench --report-log files")
    ap.add_argument("--json", help="also write the items and the per-shape table here")
    args = ap.parse_args(argv)
    try:
        built = build(args.logs)
    except (OSError, ValueError) as e:
        print(f"{name}: {e}", file=sys.stderr)
        return 2
    if built is None:
        print(f"{name}: no {what} in " + ", ".join(args.logs), file=sys.stderr)
        return 1
    text, data = built
    sys.stdout.write(text)
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=1))
    return 0
