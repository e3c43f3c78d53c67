"""The ncu summary as a terminal table (the JSON form is `NcuSummary.to_json`)."""

from __future__ import annotations

import os


def _fmt(v, kind: str) -> str:
    if v is None:
        return "n/a"
    if kind == "ns":
        return f"{v / 1e3:.2f} us" if v < 1e6 else f"{v / 1e6:.3f} ms"
    if kind == "pct":
        return f"{v:.1f} %"
    if kind == "bytes":
        for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
            if v >= scale:
                return f"{v / scale:.2f} {unit}"
        return f"{v:.0f} B"
    if kind == "ghz":
        return f"{v:.3f} GHz"
    return f"{v:g}"


ROWS = (
    ("duration", "duration_ns", "ns"),
    ("compute (SM) throughput", "sm_throughput_pct", "pct"),
    ("memory throughput", "memory_throughput_pct", "pct"),
    ("DRAM throughput", "dram_throughput_pct", "pct"),
    ("DRAM bytes (read + write)", "dram_bytes", "bytes"),
    ("L1/TEX hit rate", "l1_hit_pct", "pct"),
    ("L2 hit rate", "l2_hit_pct", "pct"),
    ("achieved occupancy", "achieved_occupancy_pct", "pct"),
    ("theoretical occupancy", "theoretical_occupancy_pct", "pct"),
    ("registers per thread", "registers_per_thread", ""),
    ("static shared memory / block", "static_smem_bytes", "bytes"),
    ("dynamic shared memory / block", "dynamic_smem_bytes", "bytes"),
    ("SM frequency", "sm_frequency_ghz", "ghz"),
)


def format_ncu(s: dict, top: int = 5) -> str:
    """`s`: a summary dict from `tools.summarize_exports`."""
    dev = f", device {s['device']}" if s.get("device") else ""
    out = [f"ncu profile of {s['kernel']} (launch {s['launch_id']}, grid {s.get('grid') or '?'}, "
           f"block {s.get('block') or '?'}{dev})"]
    for label, key, kind in ROWS:
        out.append(f"  {label:<32} {_fmt(s.get(key), kind):>14}")
    if s.get("stalls"):
        out.append("  top warp stall reasons (warps per issue cycle):")
        for st in s["stalls"][:top]:
            out.append(f"    {st['reason']:<28} {st['ratio']:>8.2f}")
    spots = s.get("hotspots") or []
    if s.get("hotspots_note"):
        out.append(f"  hot spots: {s['hotspots_note']}")
    elif "hotspot_coverage" in s and not s["hotspot_coverage"].get("samples"):
        out.append("  hot spots: the sampler took no samples (a kernel shorter than the "
                   "sampling interval?)")
    if spots:
        cov = s.get("hotspot_coverage", {})
        out.append(f"  hot spots ({cov.get('samples', 0)} samples, {cov.get('mapped', 0)} mapped "
                   "to source lines):")
        for h in spots[:top]:
            where = f"{os.path.basename(h['file'])}:{h['line']}" if h.get("file") else \
                f"SASS +0x{h['address']:x}"
            top_stall = next(iter(h.get("stalls") or {}), "")
            why = f" [{top_stall}]" if top_stall else ""
            out.append(f"    {h['share']:>6.1%}  {where:<24} {h.get('sass', '')[:52]}{why}")
    if s.get("missing"):
        out.append(f"  not in this report: {', '.join(s['missing'])}")
    return "\n".join(out)


def _cluster(metrics: dict) -> str:
    """The cluster rows of the details page's launch statistics (those whose name starts with
    "Cluster": the size, the scheduling policy), as ncu exported them; "" when it exported
    none (a kernel launched without clusters, or an ncu that does not report them)."""
    rows = [(k.split("/", 1)[1], v) for k, v in sorted((metrics or {}).items())
            if k.startswith("Launch Statistics/Cluster")]
    return "".join(f", {name.lower()} {val[1]}" for name, val in rows
                   if val and val[1] not in (None, ""))


def format_baseline(s: dict, top: int = 3) -> str:
    """`s`: a summary dict from `tools.summarize_baseline`: one block per captured launch."""
    ks = s.get("kernels") or []
    out = [f"ncu profile of baseline {s.get('baseline', '?')}: {len(ks)} launch(es), "
           f"{_fmt(s.get('duration_ns'), 'ns')} in all"]
    for i, k in enumerate(ks):
        smem = (k.get("static_smem_bytes") or 0) + (k.get("dynamic_smem_bytes") or 0)
        out.append(f"  [{i}] {k.get('kernel', '?')}")
        out.append(f"      grid {k.get('grid') or '?'}, block {k.get('block') or '?'}"
                   f"{_cluster(k.get('metrics'))}, {_fmt(k.get('registers_per_thread'), '')} "
                   f"registers, {_fmt(smem, 'bytes')} shared, waves "
                   f"{_fmt(k.get('waves_per_sm'), '')}")
        out.append(f"      {_fmt(k.get('duration_ns'), 'ns')}, SM "
                   f"{_fmt(k.get('sm_throughput_pct'), 'pct')}, DRAM "
                   f"{_fmt(k.get('dram_throughput_pct'), 'pct')}, L2 hit "
                   f"{_fmt(k.get('l2_hit_pct'), 'pct')}, occupancy "
                   f"{_fmt(k.get('achieved_occupancy_pct'), 'pct')} of "
                   f"{_fmt(k.get('theoretical_occupancy_pct'), 'pct')}")
        if k.get("stalls"):
            out.append("      stalls: " + ", ".join(f"{st['reason']} {st['ratio']:.2f}"
                                                     for st in k["stalls"][:top]))
    if s.get("missing"):
        out.append(f"  not in this report: {', '.join(s['missing'])}")
    return "\n".join(out)


def format_summary(s: dict) -> str:
    """The ncu tool's summary as text: a baseline's launches (`format_baseline`) or the
    item's one (`format_ncu`)."""
    return format_baseline(s) if "kernels" in s else format_ncu(s)
