"""SASS addresses -> the kernel's Python lines, through the line table of the cubin.

The PTX that tirxh emits carries ``.file``/``.loc`` pointing at the Python source, and nvJitLink
is given ``-lineinfo``, so ``nvdisasm -c -g`` prints a ``//## File "k.py", line 12`` comment before
each run of instructions from one line. `line_table` reads those comments; `map_hotspots` sums
the profiler's per-instruction samples by Python line. Works on any machine with the cubin (the
client has it; the board need not have the Python file).
"""

from __future__ import annotations

import re

from .ncu_csv import HotSpot

_FILE = re.compile(r'^\s*//## File "(?P<file>[^"]*)", line (?P<line>\d+)')
_INSN = re.compile(r"^\s*/\*(?P<addr>[0-9a-fA-F]{4,})\*/\s+(?P<text>.*?)\s*;?\s*$")


def line_table(sass: str) -> dict:
    """``{address: (file, line)}`` from ``nvdisasm -c -g`` text (instructions before any line
    comment are left out)."""
    table, cur = {}, None
    for ln in sass.splitlines():
        m = _FILE.match(ln)
        if m:
            cur = (m.group("file"), int(m.group("line")))
            continue
        m = _INSN.match(ln)
        if m and cur is not None:
            table[int(m.group("addr"), 16)] = cur
    return table


def map_hotspots(rows: list, table: dict, top: int = 10) -> "tuple[list, dict]":
    """Sum `rows` (from `parse_source`) by source line; returns (hot spots, coverage).

    coverage: samples total, samples mapped to a line, addresses not in the table. When nothing
    maps (a cubin built without line info, or a table of another build) the hot spots are the raw
    SASS addresses and coverage says so.
    """
    rows = [dict(r, samples=r["samples"] or 0) for r in rows]  # None: not sampled, counts 0
    total = sum(r["samples"] for r in rows)
    by_line: dict = {}
    unmapped = []
    for r in rows:
        where = table.get(r["address"])
        if where is None:
            if r["samples"]:
                unmapped.append(r)
            continue
        h = by_line.setdefault(where, {"samples": 0, "sass": [], "stalls": {}})
        h["samples"] += r["samples"]
        for reason, n in (r.get("stalls") or {}).items():
            h["stalls"][reason] = h["stalls"].get(reason, 0) + n
        if r["samples"]:
            h["sass"].append((r["samples"], r["sass"]))
    spots = []
    for (f, line), h in by_line.items():
        if not h["samples"]:
            continue
        hottest = max(h["sass"])[1] if h["sass"] else ""
        stalls = dict(sorted(h["stalls"].items(), key=lambda kv: -kv[1]))
        spots.append(HotSpot(samples=h["samples"], share=h["samples"] / total if total else 0.0,
                             file=f, line=line, sass=hottest, stalls=stalls))
    for r in unmapped:
        spots.append(HotSpot(samples=r["samples"], share=r["samples"] / total if total else 0.0,
                             address=r["address"], sass=r["sass"],
                             stalls=dict(r.get("stalls") or {})))
    spots.sort(key=lambda h: -h.samples)
    mapped = sum(h["samples"] for h in by_line.values())
    return spots[:top], {"samples": total, "mapped": mapped,
                         "unmapped_addresses": len(unmapped)}
