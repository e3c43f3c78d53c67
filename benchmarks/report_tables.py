"""What the report-log table scripts (gemm_summary.py, zoo_perf_summary.py) share: reading
`tirxh bench --report-log` JSON lines into item reports, the bench timing of one report (or why
there is none), the "Not timed" list and the command line around a table.

The scripts run as ``python benchmarks/<script>.py`` (this directory is then on ``sys.path``);
tests load them by path after putting this directory on ``sys.path``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def json_lines(paths):
    """Every record of the JSON-lines logs, in order (blank lines skipped). ValueError names the
    file and line of a line that is not JSON."""
    for path in paths:
        for n, line in enumerate(Path(path).read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not a JSON line ({e.msg})") from None


def item_reports(paths, keep) -> list:
    """The ``item_report`` records of the logs for which ``keep(record)`` holds, one per node id
    and L2 flush (`flush_label`: an item timed under two flushes is two items; a later line
    wins). ValueError names the file and line of a line that is not JSON."""
    items: dict = {}
    for rec in json_lines(paths):
        if rec.get("event") == "item_report" and keep(rec):
            items[rec["nodeid"], flush_label(rec)] = rec
    return list(items.values())


def flush_label(rec: dict) -> str:
    """How KCoral emptied the L2 before the item's samples, when not the protocol's default (a
    memset, ``write``): ``"read flush"``, ``"no flush"``, or ``""``. Times under different
    flushes are different measurements (kcoral/boards/l2_flush.py)."""
    timing = bench_result(rec).get("timing") or {}
    if timing.get("l2_flush") is False:
        return "no flush"
    by = timing.get("l2_flush_by")
    return f"{by} flush" if by and by != "write" else ""


def plan_lines(paths) -> list:
    """The lines of a plan job's client (benchmarks/kda_fwd_bwd_bench.py, `BenchResult.to_json`:
    "item" named ``kernel[case]`` and KCoral's "result", no "event"), one per item (a later line
    wins), each as {"kernel", "case", "rec", "timing", "why"}: the timing when it holds a
    candidate median ({} and why not otherwise). Item reports carry no "item" key."""
    found: dict = {}
    for rec in json_lines(paths):
        name = rec.get("item") if "event" not in rec else None
        if isinstance(name, str) and name.endswith("]") and "[" in name:
            found[name] = rec
    out = []
    for name, rec in found.items():
        kernel, case = name[:-1].split("[", 1)
        result = rec.get("result") or {}
        timing = result.get("timing") or {}
        why = ""
        if "candidate" not in timing:
            timing, why = {}, (rec.get("not_timed") or (result.get("error") or {}).get(
                "message") or "not timed")[:160]
        out.append({"kernel": kernel, "case": case, "rec": rec, "timing": timing, "why": why})
    return out


def bench_phase(rec: dict) -> "dict | None":
    """The item report's bench phase (None when the item was not benchmarked)."""
    return next((p for p in rec.get("phases", []) if p["phase"] == "bench"), None)


def bench_result(rec: dict) -> dict:
    """KCoral's result document of the item's bench phase ({} when there is none)."""
    return ((bench_phase(rec) or {}).get("data") or {}).get("result") or {}


def bench_timing(rec: dict) -> "tuple[dict, str]":
    """(the bench phase's timing, "") when it holds a candidate median, else ({}, why not)."""
    bench = bench_phase(rec)
    if bench is None:
        return {}, "not benchmarked"
    result = bench_result(rec)
    timing = result.get("timing") or {}
    if "candidate" in timing:
        return timing, ""
    return {}, (bench.get("longrepr") or timing.get("skipped") or
                (result.get("error") or {}).get("message") or "not timed")[:160]


def regimes(timing: dict) -> dict:
    """KCoral `/3`'s split of a job's paired rounds by clock regime: {"full" | "sustained":
    {"rounds", "clock_mhz", "ratios": {baseline: speedup}, "cis": {baseline: [lo, hi] or
    None}}} for each regime that holds rounds (``cis``: the 95% interval of each ratio, from
    session 19's daemons on; None before)."""
    out = {}
    for name, reg in (timing.get("regimes") or {}).items():
        if reg.get("rounds"):
            out[name] = {"rounds": reg["rounds"], "clock_mhz": reg.get("clock_mhz"),
                         "ratios": {n: b.get("speedup")
                                    for n, b in (reg.get("baselines") or {}).items()},
                         "cis": {n: b.get("speedup_ci95")
                                 for n, b in (reg.get("baselines") or {}).items()}}
    return out


def not_timed(items: list) -> list:
    """Markdown lines listing the items without a median (with the outcome and reason)."""
    untimed = [i for i in items if i["median_us"] is None]
    if not untimed:
        return []
    return ["", "## Not timed", ""] + [f"- {i['kernel']}[{i['case']}]: {i['outcome']}: "
                                       f"{i['note']}" for i in untimed]


def cli(argv, doc: str, prog: str, read, render, what: str, extra=None) -> int:
    """Parse LOGS..., read the items (`read(paths)`), print `render(items)`: exit 2 when a log
    cannot be read, 1 when it holds no `what`. `extra(parser)` adds options and returns
    ``after(args, items)``, run after printing."""
    ap = argparse.ArgumentParser(prog=prog, description=doc.splitlines()[0])
    ap.add_argument("logs", nargs="+", help="tirxh bench --report-log files")
    after = extra(ap) if extra else None
    args = ap.parse_args(argv)
    try:
        items = read(args.logs)
    except (OSError, ValueError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    if not items:
        print(f"{prog}: no {what} in " + ", ".join(args.logs), file=sys.stderr)
        return 1
    sys.stdout.write(render(items))
    if after:
        after(args, items)
    return 0


def json_option(best):
    """An `extra` for `cli`: ``--json PATH`` also writes the items and `best(items)` (the
    summary's per-shape table) there, for tools that read the run."""
    def extra(ap):
        ap.add_argument("--json", help="also write the items and the per-shape table here")

        def after(args, items):
            if args.json:
                Path(args.json).write_text(json.dumps({"items": items, "best": best(items)},
                                                      indent=1))
        return after
    return extra
