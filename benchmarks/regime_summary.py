"""Every timed item of `tirxh bench` report logs by clock regime (issue 17's proof table).

    python benchmarks/regime_summary.py REPORT.jsonl [...]

KCoral's `/3` protocol reads the SM clock around every paired round and splits the rounds into
the board's full clock and a sustained (throttled) regime. The bench line prints both ratios
only when they differ by more than 2%, so a run of the whole zoo hides which items throttled
and in which regime their ratio came from. This table shows it for every item, whatever the
kernel: the median of paired ratios to each baseline over all rounds, then each regime's
rounds, median SM clock and ratios, and the clock range of the job (throttled: it fell more
than 5%). A ratio is baseline median / candidate median (> 1: the zoo kernel is faster). Items
without a median are listed with the reason.
"""

from __future__ import annotations

import sys

from report_tables import bench_timing, cli, item_reports, not_timed, plan_lines, regimes

REGIMES = ("full", "sustained")


def read_items(paths) -> list:
    """One dict per item report of the logs (later lines win), benchmarked or not, and one per
    plan job's line (report_tables.plan_lines: session 21's fb call had no table)."""
    return ([item(rec) for rec in item_reports(paths, lambda r: bool(r.get("kernel")))]
            + [_item(ln["kernel"], ln["case"], ln["rec"].get("verdict") or "?", ln["timing"],
                     ln["why"]) for ln in plan_lines(paths)])


def item(rec: dict) -> dict:
    return _item(rec["kernel"], rec.get("case") or "", rec["outcome"], *bench_timing(rec))


def _item(kernel: str, case: str, outcome: str, timing: dict, note: str) -> dict:
    out = {"kernel": kernel, "case": case, "outcome": outcome, "median_us": None, "ratios": {},
           "regimes": {}, "clock": None, "throttled": None, "note": note}
    if not timing:
        return out
    clk = timing.get("sm_clock_mhz") or {}
    out.update(median_us=timing["candidate"]["median_ms"] * 1e3,
               ratios={n: b.get("speedup") for n, b in (timing.get("baselines") or {}).items()},
               clock=(clk.get("min"), clk.get("max")), throttled=timing.get("throttled"),
               regimes=regimes(timing))
    return out


def _ratios(ratios: dict, cis: "dict | None" = None) -> str:
    """"0.999x torch.matmul [0.997-1.003]": each ratio with its 95% interval when the daemon
    gave one (whether a figure near 1.00x is a tie or a loss)."""
    shown = []
    for n, r in ratios.items():
        if not isinstance(r, (int, float)):
            continue
        ci = (cis or {}).get(n)
        shown.append(f"{r:.3f}x {n}" + (f" [{ci[0]:.3f}-{ci[1]:.3f}]" if ci else ""))
    return ", ".join(shown) or "-"


def _regime(it: dict, name: str) -> str:
    reg = it["regimes"].get(name)
    if not reg:
        return "-"
    mhz = reg["clock_mhz"]
    head = f"{reg['rounds']} at {mhz:.0f} MHz" if isinstance(mhz, (int, float)) else \
        f"{reg['rounds']} rounds"
    return f"{head}: {_ratios(reg['ratios'], reg.get('cis'))}" if reg["ratios"] else head


def _clock(it: dict) -> str:
    lo, hi = it["clock"] or (None, None)
    if not isinstance(lo, (int, float)) or not isinstance(hi, (int, float)):
        return "-"
    return f"{lo:.0f}-{hi:.0f}" + (" (throttled)" if it["throttled"] else "")


def markdown(items: list) -> str:
    timed = sorted((i for i in items if i["median_us"] is not None),
                   key=lambda i: (i["kernel"], i["case"]))
    lines = ["## Every timed item by clock regime", "",
             "| item | median | ratio, all rounds | full clock | sustained | SM MHz in the job |",
             "| --- | --- | --- | --- | --- | --- |"]
    for it in timed:
        lines.append(f"| {it['kernel']}[{it['case']}] | {it['median_us']:.2f} us | "
                     f"{_ratios(it['ratios'])} | {_regime(it, 'full')} | "
                     f"{_regime(it, 'sustained')} | {_clock(it)} |")
    n_thr = sum(1 for i in timed if i["throttled"])
    lines += ["", f"{len(timed)} items timed; {n_thr} throttled (both regimes shown), "
              f"{len(timed) - n_thr} held their clock (one regime)."]
    return "\n".join(lines + not_timed(items)) + "\n"


def main(argv=None) -> int:
    return cli(argv, __doc__, "regime_summary", read_items, markdown, "item reports")


if __name__ == "__main__":
    sys.exit(main())
