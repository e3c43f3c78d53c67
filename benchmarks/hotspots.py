"""Every hot spot of a ``tirxh profile --ncu --json-file`` document, as text:
``python benchmarks/hotspots.py PROFILE.json [--top N]``.

Why: the profile's own text (`tirxh_ncu_profile.report.format_ncu`) prints five hot spots, enough
for a kernel with one hot loop; a launch of fifteen barrier-separated phases (the KDA backward's)
spreads its stall samples over dozens of source lines, and a device call returns at most eight
files, so the whole ranking has to reach the call's stdout. Each line: the share of the samples,
file:line, the line's hottest SASS, and its two largest stall reasons (their shares of
the line's samples).
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def ncu_summaries(doc: dict) -> list:
    """The ncu summaries of a profile document (one per ncu report; none for iket-only runs)."""
    return [r["summary"] for r in doc.get("reports", [])
            if isinstance(r, dict) and isinstance(r.get("summary"), dict)
            and "hotspots" in r["summary"]]


def format_hotspots(summary: dict, top: int = 30) -> str:
    """The `top` hot spots of one ncu summary, with the kernel's stall table first."""
    cov = summary.get("hotspot_coverage") or {}
    out = [f"hot spots of {summary.get('kernel', '?')}: {cov.get('samples', 0)} samples, "
           f"{cov.get('mapped', 0)} mapped to source lines"]
    stalls = summary.get("stalls") or []
    if stalls:
        out.append("  stalls (warps per issue cycle): " + ", ".join(
            f"{s['reason']} {s['ratio']:.2f}" for s in stalls[:8]))
    for h in (summary.get("hotspots") or [])[:top]:
        where = (f"{os.path.basename(h['file'])}:{h['line']}" if h.get("file")
                 else f"SASS +0x{h.get('address', 0):x}")
        n = max(h.get("samples") or 0, 1)
        why = ", ".join(f"{k} {v / n:.0%}" for k, v in list((h.get("stalls") or {}).items())[:2])
        out.append(f"  {h.get('share', 0.0):>6.1%}  {where:<28} {str(h.get('sass', ''))[:48]:<48}"
                   f"  {why}")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("profile_json")
    p.add_argument("--top", type=int, default=30)
    o = p.parse_args(argv)
    with open(o.profile_json) as f:
        doc = json.load(f)
    summaries = ncu_summaries(doc)
    if not summaries:
        print(f"{o.profile_json}: no ncu report with hot spots in it")
        return 1
    print("\n".join(format_hotspots(s, o.top) for s in summaries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
