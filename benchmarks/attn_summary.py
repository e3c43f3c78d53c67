"""Tables from `tirxh bench` report logs of the zoo's attention forward (zoo/kernels/attention.py).

    python benchmarks/attn_summary.py REPORT.jsonl [...] [--json OUT.json]

Prints markdown: every timed item (median, TFLOP/s by the FlashAttention convention -- causal
counts half of 4 B H S^2 D --, ratio to torch.sdpa timed in the same job, SM clock before and
after), the fastest variant of each shape and mask with the issue 16 goal (>= 1.00x torch.sdpa),
and each technique's ratio to the main variant at the same shape (the table docs/TUNING.md
keeps). A ratio is baseline median / candidate median (> 1: the zoo kernel is faster). Items
that failed or were not timed are listed with the reason.
"""

from __future__ import annotations

import re
import sys

from report_tables import bench_timing, cli, item_reports, json_option, not_timed, regimes

_CASE = re.compile(r"^b(\d+)h(\d+)(?:kv(\d+))?s(\d+)(_causal)?_(\w+)$")
BASELINE = "torch.sdpa"
GOAL = 1.00
TECHNIQUES = ("np", "sync", "nopp", "bn160", "lazy8", "bn160_lazy8",
              "pairs_lazy8")   # the variants of zoo attention.py but p
# torch SDPA on this H200, TFLOP/s (docs/ANCHORS: 2026-11-29, do_bench), for context
ANCHORS = {(4, 32, 32, 2048): (589, 481), (4, 32, 32, 8192): (596, 565),
           (2, 16, 16, 16384): (607, 573)}


def read_items(paths) -> list:
    """One dict per benchmarked attention_fwd item of the report logs (later lines win)."""
    return [_item(rec) for rec in item_reports(
        paths, lambda r: r.get("kernel") == "attention_fwd" and _CASE.match(r.get("case") or ""))]


def _item(rec: dict) -> dict:
    m = _CASE.match(rec["case"])
    B, H, HKV, S = (int(x) if x else None for x in m.groups()[:4])
    out = {"kernel": rec["kernel"], "case": rec["case"], "shape": (B, H, HKV or H, S),
           "causal": bool(m.group(5)), "variant": m.group(6), "outcome": rec["outcome"],
           "median_us": None, "tflops": None, "ratios": {}, "clock": None, "note": "",
           "regimes": {}}
    timing, out["note"] = bench_timing(rec)
    if timing:
        clk = timing.get("sm_clock_mhz") or {}
        out.update(median_us=timing["candidate"]["median_ms"] * 1e3, tflops=timing.get("tflops"),
                   ratios={n: b.get("speedup") for n, b in timing.get("baselines", {}).items()},
                   clock=(clk.get("before"), clk.get("after")))
        out["regimes"] = regime_ratios(timing)
        if not timing.get("converged", True):
            out["note"] = f"noise {timing.get('rel_noise', 0):.1%}"
    return out


def regime_ratios(timing: dict) -> dict:
    """{"full" | "sustained": (rounds, SM MHz, ratio to torch.sdpa)} for each clock regime the
    job's paired rounds fell in (KCoral /3 splits them; issue 16's goal holds in both)."""
    return {name: (reg["rounds"], reg["clock_mhz"], reg["ratios"][BASELINE])
            for name, reg in regimes(timing).items()
            if reg["ratios"].get(BASELINE) is not None}


def _regime(it: dict, name: str) -> str:
    r = it["regimes"].get(name)
    return f"{r[2]:.3f}x ({r[0]} at {r[1]:.0f} MHz)" if r else "-"


def _ratio(x) -> str:
    return f"{x:.3f}x" if isinstance(x, (int, float)) else "-"


def _shape(shape, causal) -> str:
    B, H, HKV, S = shape
    return f"B{B} H{H}" + (f"/{HKV}" if HKV != H else "") + f" S{S}" + (" causal" if causal else "")


def best_per_shape(items: list) -> list:
    """The fastest timed variant of each (shape, mask), with the goal verdict: every ratio the
    job reports (the median of paired ratios, and each clock regime's) at least GOAL."""
    best: dict = {}
    for it in items:
        key = (it["shape"], it["causal"])
        if it["median_us"] is not None and (key not in best or
                                            it["median_us"] < best[key]["median_us"]):
            best[key] = it
    rows = []
    for (shape, causal), it in sorted(best.items()):
        r = it["ratios"].get(BASELINE)
        worst = min([r] + [x[2] for x in it["regimes"].values()]) if r is not None else None
        rows.append(dict(it, goal_met=None if worst is None else worst >= GOAL,
                         anchor=ANCHORS.get(shape, (None, None))[int(causal)]))
    return rows


def techniques(items: list) -> list:
    """Per (shape, mask): each variant's median relative to the persistent ping-pong "p" (the
    base every technique is one change from; the main variant is lazy8 since 2026-12-01)."""
    by: dict = {}
    for it in items:
        if it["median_us"] is not None:
            by.setdefault((it["shape"], it["causal"]), {})[it["variant"]] = it["median_us"]
    rows = []
    for key, meds in sorted(by.items()):
        if "p" in meds:
            rows.append((key, {v: meds["p"] / us for v, us in meds.items() if v != "p"}))
    return rows


def markdown(items: list) -> str:
    lines = ["## Every item", "",
             "| item | median | TFLOP/s | vs torch.sdpa | full clock (rounds) | sustained (rounds) "
             "| SM MHz before/after | note |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for it in sorted(items, key=lambda i: (i["shape"], i["causal"], i["variant"])):
        med = f"{it['median_us']:.1f} us" if it["median_us"] is not None else it["outcome"]
        tf = f"{it['tflops']:.0f}" if it["tflops"] else "-"
        clk = "/".join(f"{c:.0f}" if c else "?" for c in it["clock"]) if it["clock"] else "-"
        lines.append(f"| attention_fwd[{it['case']}] | {med} | {tf} | "
                     f"{_ratio(it['ratios'].get(BASELINE))} | {_regime(it, 'full')} | "
                     f"{_regime(it, 'sustained')} | {clk} | {it['note']} |")
    lines += ["", f"## Fastest variant per shape (goal: >= {GOAL:.2f}x torch.sdpa, issue 16)", "",
              "| shape | variant | TFLOP/s | vs torch.sdpa | met | SDPA in ANCHORS |",
              "| --- | --- | --- | --- | --- | --- |"]
    for r in best_per_shape(items):
        met = {True: "yes", False: "NO", None: "-"}[r["goal_met"]]
        tf = f"{r['tflops']:.0f}" if r["tflops"] else "-"
        anchor = f"{r['anchor']} TFLOP/s" if r["anchor"] else "-"
        lines.append(f"| {_shape(r['shape'], r['causal'])} | {r['variant']} | {tf} | "
                     f"{_ratio(r['ratios'].get(BASELINE))} | {met} | {anchor} |")
    lines += ["", "## Techniques (speed relative to the persistent ping-pong p: > 1 is faster "
              "than p)", "", "| shape | " + " | ".join(TECHNIQUES) + " |",
              "| --- |" + " --- |" * len(TECHNIQUES)]
    for (shape, causal), rel in techniques(items):
        lines.append(f"| {_shape(shape, causal)} | "
                     + " | ".join(_ratio(rel.get(v)) for v in TECHNIQUES) + " |")
    lines += not_timed(items)
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    return cli(argv, __doc__, "attn_summary", read_items, markdown, "attention_fwd items",
               json_option(best_per_shape))


if __name__ == "__main__":
    sys.exit(main())
