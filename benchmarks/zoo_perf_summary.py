"""Tables from `tirxh bench` report logs of the zoo's memory-bound kernels (issue 14 goals).

    python benchmarks/zoo_perf_summary.py REPORT.jsonl [...]

Prints markdown: every timed item (median, GB/s, fraction of the measured copy bandwidth, of
the datasheet floor, ratio to the eager and the torch.compile baseline timed in the same job,
and to the kernel's plain case of the same size in the same run), then the fastest variant of
each kernel and problem size against the two goals of issue 14: >= 90% of the MEASURED copy
bandwidth (4.25 TB/s on our H200, /work/shared/ANCHORS.md; the datasheet's 4.8 TB/s is the
"floor" KCoral reports), and at least as fast as the faster of eager and torch.compile (both
ratios >= 1.00). A ratio is baseline median / candidate median (> 1: the zoo kernel is faster).
The copy bandwidth is the H200's: an item timed on another board (KCoral's result names the
device) has no "of copy BW" figure and no bandwidth verdict ("-"), and the tables say which
device timed what (session 25's calls ran on an H100 and read "NO" against the H200's rate).
Items that failed or were not timed (a run cut short by its time limit leaves none for the
items it never reached) are listed with the reason. Reads logs that end mid-run: each line is
one finished item.
"""

from __future__ import annotations

import re
import sys

from report_tables import bench_result, bench_timing, cli, flush_label, item_reports, not_timed

# the problem size at the start of a case name: r16384_c8192_p256 -> r16384_c8192, n64M_ef -> n64M
_SIZE = re.compile(r"^(r\d+_c\d+[KM]?|n\d+[KM]?)")
COPY_GOAL = 0.90  # of the measured copy bandwidth
COPY_GBPS = 4250.0  # device-to-device copy (read + write) measured on the H200, GB/s
COPY_DEVICE = "H200"  # the board COPY_GBPS was measured on (a substring of its device name)
COMPILED = "torch.compile."


def read_items(paths) -> list:
    """One dict per benchmarked zoo item with a problem size in its case name (a later line for
    the same item wins). ValueError names the file and line of a line that is not JSON."""
    return [item(rec) for rec in item_reports(paths, lambda r: _SIZE.match(r.get("case") or ""))]


def item(rec: dict) -> dict:
    """The figures of one item report: median (us), GB/s, floor fraction, best eager and best
    compiled ratio (None where not timed), and a note saying why not."""
    out = {"kernel": rec["kernel"], "case": rec["case"],
           "size": _SIZE.match(rec["case"]).group(1), "outcome": rec["outcome"],
           "median_us": None, "gbps": None, "copy": None, "floor": None, "eager": None,
           "compiled": None, "note": "", "flush": flush_label(rec),
           "device": ((bench_result(rec) or {}).get("device") or {}).get("name")}
    timing, out["note"] = bench_timing(rec)
    if not timing:
        return out
    out.update(median_us=timing["candidate"]["median_ms"] * 1e3, gbps=timing.get("gbps"),
               floor=timing.get("floor_fraction"))
    if out["gbps"] and on_copy_device(out):
        out["copy"] = out["gbps"] / COPY_GBPS
    for name, b in (timing.get("baselines") or {}).items():
        key = "compiled" if name.startswith(COMPILED) else "eager"
        if b.get("speedup") is not None:  # the worst ratio if a kind has several baselines
            out[key] = b["speedup"] if out[key] is None else min(out[key], b["speedup"])
    if not timing.get("converged", True):
        out["note"] = f"noise {timing.get('rel_noise') or 0:.1%}"
    return out


def on_copy_device(it: dict) -> bool:
    """Whether the item was timed where COPY_GBPS was measured (an unnamed device counts as
    that board: reports from before KCoral named it)."""
    return it.get("device") is None or COPY_DEVICE in it["device"]


def faster(it: dict) -> "float | None":
    """The ratio to the faster of the two baselines (the smaller ratio); None unless both were
    timed (which one is faster is unknown otherwise)."""
    ratios = [it["eager"], it["compiled"]]
    return None if None in ratios else min(ratios)


def goals(it: dict) -> "tuple[bool | None, bool | None]":
    """(>= 90% of the measured copy bandwidth, >= 1.00x the faster baseline); None where a
    figure is missing, and no bandwidth verdict for an item timed under another L2 flush than
    the one COPY_GBPS was measured with (a memset's, as KCoral's default)."""
    bw = None if it["copy"] is None or it["flush"] else it["copy"] >= COPY_GOAL
    best = faster(it)
    return bw, None if best is None else best >= 1.0


def vs_plain(items: list) -> dict:
    """(kernel, case) -> plain median / this median, where the kernel's plain case of the same
    size (the case named by the size alone) was timed in the same logs (> 1: faster than
    plain; separate jobs, so not a paired ratio)."""
    plain = {(i["kernel"], i["case"], i["flush"]): i["median_us"] for i in items
             if i["case"] == i["size"] and i["median_us"]}
    return {(i["kernel"], i["case"], i["flush"]): plain[i["kernel"], i["size"], i["flush"]] /
            i["median_us"] for i in items
            if i["median_us"] and (i["kernel"], i["size"], i["flush"]) in plain}


def best_per_size(items: list) -> list:
    """The fastest timed item of each (kernel, size, L2 flush)."""
    best: dict = {}
    for it in items:
        key = (it["kernel"], it["size"], it["flush"])
        if it["median_us"] is not None and (key not in best or
                                            it["median_us"] < best[key]["median_us"]):
            best[key] = it
    return [best[k] for k in sorted(best)]


def _r(x) -> str:
    return "-" if x is None else f"{x:.3f}x"


def _yes(v) -> str:
    return {True: "yes", False: "NO", None: "-"}[v]


def _flush(it: dict) -> str:
    return f" ({it['flush']})" if it["flush"] else ""


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"


def markdown(items: list) -> str:
    rel = vs_plain(items)
    lines = ["## Every item", "", "| item | median | GB/s | of copy BW | floor | vs eager | "
             "vs compiled | vs plain | note |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for it in sorted(items, key=lambda i: (i["kernel"], i["size"], i["case"], i["flush"])):
        med = f"{it['median_us']:.2f} us" if it["median_us"] is not None else it["outcome"]
        gbps = f"{it['gbps']:.0f}" if it["gbps"] else "-"
        note = it["note"] if on_copy_device(it) else "; ".join(
            x for x in (f"on {it['device']}", it["note"]) if x)
        lines.append(f"| {it['kernel']}[{it['case']}]{_flush(it)} | {med} | {gbps} | "
                     f"{_pct(it['copy'])} | {_pct(it['floor'])} | {_r(it['eager'])} | "
                     f"{_r(it['compiled'])} | "
                     f"{_r(rel.get((it['kernel'], it['case'], it['flush'])))} | {note} |")
    lines += ["", f"## Fastest variant per size (issue 14: >= {COPY_GOAL:.0%} of the measured "
              f"copy bandwidth, {COPY_GBPS / 1000:.2f} TB/s, and >= 1.00x the faster of eager "
              "and torch.compile)", "",
              "| kernel | size | variant | of copy BW | vs eager | vs compiled | vs faster | "
              "bandwidth goal | baseline goal |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for it in best_per_size(items):
        bw_met, beat = goals(it)
        lines.append(f"| {it['kernel']} | {it['size']} | {it['case']}{_flush(it)} | "
                     f"{_pct(it['copy'])} | "
                     f"{_r(it['eager'])} | {_r(it['compiled'])} | {_r(faster(it))} | "
                     f"{_yes(bw_met)} | {_yes(beat)} |")
    others = sorted({it["device"] for it in items if not on_copy_device(it)})
    if others:
        lines += ["", f"Timed on {', '.join(others)}, not the {COPY_DEVICE} whose copy rate the "
                  "bandwidth goal uses: those items have no copy fraction and no bandwidth "
                  "verdict; compare them only with items of the same job."]
    lines += not_timed(items)
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    return cli(argv, __doc__, "zoo_perf_summary", read_items, markdown, "zoo items")


if __name__ == "__main__":
    sys.exit(main())
