"""Where each benchmarked item's wall time went, from `tirxh bench --report-log` files: device
time is the scarcest thing a session has, and a call that times three items in 500 s spent
most of it somewhere other than timing.

Per item: the bench phase's wall time; the client's job building (inputs, the host reference, blob uploads: `client_s.build_job`),
the submit round trip (queue + run: `client_s.submit`), the worker's run (`run_s`) split into
its phases by the progress timeline (loaded, correctness, guards, baselines, timing loop,
perturbation), and the timing loop's own elapsed seconds.

    python benchmarks/job_times.py LOGS...
"""

from __future__ import annotations

import sys

from report_tables import bench_phase, bench_result, cli, item_reports


def phases(timeline: list, run_s) -> list:
    """[(label, seconds)] from a worker timeline: each event lasts until the next (the last
    until `run_s`); labels are the state and the message's first words."""
    out = []
    for i, (t, state, message) in enumerate(timeline):
        end = timeline[i + 1][0] if i + 1 < len(timeline) else run_s
        if end is None:
            continue
        words = " ".join(str(message).split()[:4])
        out.append((f"{state}: {words}" if words else state, max(0.0, end - t)))
    return out


def read(paths) -> list:
    items = []
    for rec in item_reports(paths, lambda r: bench_phase(r) is not None):
        bench, res = bench_phase(rec), bench_result(rec)
        client = res.get("client_s") or {}
        timing = res.get("timing") or {}
        items.append({"item": f"{rec.get('kernel', '?')}[{rec.get('case', '?')}]",
                      "outcome": rec.get("outcome"), "bench": bench.get("duration"),
                      "build_job": client.get("build_job"), "submit": client.get("submit"),
                      "run": res.get("run_s"),
                      "timing_loop": timing.get("elapsed_s"),
                      "phases": phases(res.get("timeline") or [], res.get("run_s")),
                      "error": (res.get("error") or {}).get("type", "")})
    return items


def _s(v) -> str:
    return "-" if v is None else f"{v:.1f}"


def render(items: list, top: int = 3) -> str:
    """A markdown table, one row per item, and the totals."""
    lines = ["| item | outcome | bench phase s | build_job s | submit s | worker run s | "
             f"timing loop s | longest phases (top {top}) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for it in items:
        longest = sorted(it["phases"], key=lambda p: -p[1])[:top]
        ph = "; ".join(f"{label} {sec:.1f}" for label, sec in longest) or "-"
        out = it["outcome"] + (f" ({it['error']})" if it["error"] else "")
        lines.append(f"| {it['item']} | {out} | {_s(it['bench'])} | {_s(it['build_job'])} | "
                     f"{_s(it['submit'])} | "
                     f"{_s(it['run'])} | {_s(it['timing_loop'])} | {ph} |")
    total = {k: sum(i[k] or 0 for i in items) for k in ("bench", "build_job", "submit", "run")}
    lines += ["", f"total over {len(items)} items: bench phases {total['bench']:.1f} s = "
              f"build_job {total['build_job']:.1f} s + submit {total['submit']:.1f} s (worker "
              f"run {total['run']:.1f} s)"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    return cli(sys.argv[1:] if argv is None else argv, __doc__, "job_times", read, render,
               "benchmarked items")


if __name__ == "__main__":
    sys.exit(main())
