"""Tables from `tirxh bench` report logs of the zoo's Hopper GEMMs (zoo/kernels/gemm_sm90.py).

    python benchmarks/gemm_summary.py REPORT.jsonl [...] [--json OUT.json]

Prints markdown: every timed item (median, TFLOP/s, ratio to each baseline timed in the same
job, SM clock before/after), then the fastest variant of each shape with the issue 15 goals
(bf16: >= 1.00x torch.matmul at M >= 2048, >= 0.95x at M = 128 and 512, faster than pyptx;
fp8: >= 1.00x torch._scaled_mm at M >= 2048). A ratio is baseline median / candidate median
(> 1: the zoo kernel is faster). Items that failed or were not timed are listed with the reason.
"""

from __future__ import annotations

import re
import sys

from report_tables import bench_timing, cli, item_reports, json_option, not_timed

_SHAPE = re.compile(r"^m(\d+)n(\d+)k(\d+)_")
BASELINES = {"torch.matmul": "cuBLAS", "pyptx.gemm_hopper": "pyptx",
             "torch._scaled_mm": "_scaled_mm", "torch._scaled_mm.fast_accum": "fast_accum"}


def read_items(paths) -> list:
    """One dict per benchmarked GEMM item in the report logs (later lines win for an item)."""
    return [_item(rec) for rec in
            item_reports(paths, lambda r: _SHAPE.match(r.get("case") or ""))]


def _item(rec: dict) -> dict:
    M, N, K = (int(x) for x in _SHAPE.match(rec["case"]).groups())
    out = {"kernel": rec["kernel"], "case": rec["case"], "shape": (M, N, K),
           "dtype": "fp8" if "fp8" in rec["kernel"] else "bf16", "outcome": rec["outcome"],
           "median_us": None, "tflops": None, "ratios": {}, "clock": None, "note": ""}
    timing, out["note"] = bench_timing(rec)
    if not timing:
        return out
    out["median_us"] = timing["candidate"]["median_ms"] * 1e3
    out["tflops"] = timing.get("tflops")
    out["ratios"] = {name: b.get("speedup") for name, b in timing.get("baselines", {}).items()}
    clk = timing.get("sm_clock_mhz") or {}
    out["clock"] = (clk.get("before"), clk.get("after"))
    if not timing.get("converged", True):
        out["note"] = f"noise {timing.get('rel_noise', 0):.1%}"
    return out


def _ratio(x) -> str:
    return f"{x:.3f}x" if isinstance(x, (int, float)) else "-"


def _shape(s) -> str:
    return "x".join(str(v) for v in s)


def goal(dtype: str, M: int) -> "tuple[str, float]":
    """(the baseline a goal is stated against, the ratio it must reach), per issue 15."""
    if dtype == "fp8":
        return "torch._scaled_mm", 1.00 if M >= 2048 else 0.0
    return "torch.matmul", 1.00 if M >= 2048 else 0.95


def best_per_shape(items: list) -> list:
    """The fastest timed item of each (dtype, shape), with its goal verdict."""
    best: dict = {}
    for it in items:
        if it["median_us"] is None:
            continue
        key = (it["dtype"], it["shape"])
        if key not in best or it["median_us"] < best[key]["median_us"]:
            best[key] = it
    rows = []
    for (dtype, shape), it in sorted(best.items()):
        base, need = goal(dtype, shape[0])
        r = it["ratios"].get(base)
        met = None if r is None or not need else r >= need
        peer = it["ratios"].get("pyptx.gemm_hopper")
        rows.append(dict(it, goal=need, goal_baseline=base, goal_met=met,
                         beats_pyptx=None if peer is None else peer > 1.0))
    return rows


def ranking(items: list) -> list:
    """Per (dtype, shape) with two or more timed variants: (dtype, shape, [(variant, ratio to
    the goal's baseline)], fastest first), so a run of candidates beside a shape's main variant
    (`gemm_bench.sh small`) shows every margin, not only the winner."""
    by: dict = {}
    for it in items:
        if it["median_us"] is not None:
            by.setdefault((it["dtype"], it["shape"]), []).append(it)
    out = []
    for (dtype, shape), its in sorted(by.items()):
        if len(its) < 2:
            continue
        base = goal(dtype, shape[0])[0]
        ranked = sorted(its, key=lambda i: i["median_us"])
        out.append((dtype, shape, [(_variant(i), i["ratios"].get(base)) for i in ranked]))
    return out


def _variant(it: dict) -> str:
    """'c2 t128k4r' for gemm_bf16_c2[m512n..._t128k4r]: the kernel's cluster and the suffix."""
    suffix = it["case"].split("_", 1)[1] if "_" in it["case"] else it["case"]
    return ("c2 " if it["kernel"].endswith("_c2") else "") + suffix


def markdown(items: list) -> str:
    lines = ["## Every item", "",
             "| item | median | TFLOP/s | " + " | ".join(BASELINES.values())
             + " | SM MHz before/after | note |",
             "| --- | --- | --- | " + " | ".join("---" for _ in BASELINES) + " | --- | --- |"]
    for it in sorted(items, key=lambda i: (i["dtype"], i["shape"], i["kernel"], i["case"])):
        med = f"{it['median_us']:.1f} us" if it["median_us"] is not None else it["outcome"]
        tf = f"{it['tflops']:.0f}" if it["tflops"] else "-"
        clk = "/".join(f"{c:.0f}" if c else "?" for c in it["clock"]) if it["clock"] else "-"
        lines.append(f"| {it['kernel']}[{it['case']}] | {med} | {tf} | "
                     + " | ".join(_ratio(it["ratios"].get(b)) for b in BASELINES)
                     + f" | {clk} | {it['note']} |")
    lines += ["", "## Fastest variant per shape (goal: issue 15)", "",
              "| dtype | shape | variant | TFLOP/s | vs goal baseline | goal | met | vs pyptx |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in best_per_shape(items):
        met = {True: "yes", False: "NO", None: "-"}[r["goal_met"]]
        tf = f"{r['tflops']:.0f}" if r["tflops"] else "-"
        lines.append(f"| {r['dtype']} | {_shape(r['shape'])} | {r['kernel']}[{r['case']}] | "
                     f"{tf} | {_ratio(r['ratios'].get(r['goal_baseline']))} "
                     f"{BASELINES[r['goal_baseline']]} | "
                     f"{r['goal']:.2f}x | {met} | "
                     f"{_ratio(r['ratios'].get('pyptx.gemm_hopper'))} |")
    ranks = ranking(items)
    if ranks:
        lines += ["", "## Variants per shape, fastest first (ratio to the goal's baseline)", "",
                  "| dtype | shape | variants |", "| --- | --- | --- |"]
        lines += [f"| {dtype} | {_shape(shape)} | "
                  + ", ".join(f"{v} {_ratio(r)}" for v, r in ranked) + " |"
                  for dtype, shape, ranked in ranks]
    lines += not_timed(items)
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    return cli(argv, __doc__, "gemm_summary", read_items, markdown, "gemm_sm90 items",
               json_option(best_per_shape))


if __name__ == "__main__":
    sys.exit(main())
