"""Parse Nsight Compute's CSV exports into a `NcuSummary`.

Two exports are read, both from ``ncu --import REPORT --csv``:

* ``--page details``: one row per (kernel launch, section, metric) with the columns ``ID``,
  ``Kernel Name``, ``Section Name``, ``Metric Name``, ``Metric Unit``, ``Metric Value`` (plus
  process, device and, in newer versions, rule columns, which are ignored). Human-named metrics of
  the sections (``Duration``, ``Compute (SM) Throughput``, ``Achieved Occupancy``) and the raw
  metrics the tool asks for with ``--metrics`` (under the section ``Command line profiler
  metrics``) arrive in the same table. Units are taken as printed (``usecond``, ``Kbyte/block``)
  and converted to base units, so ``--print-units base`` or not both parse.
* ``--page source --print-source sass``: one row per SASS instruction with its ``Address`` and
  sampling columns; see `parse_source`.

Columns are found by name, never by position, so columns added by a newer ncu do not break it; a
missing required column is a `NcuParseError` naming the file and the columns it did find.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import asdict, dataclass, field

# warp stall reasons: the raw ncu metric family the tool requests, and a short reason name
STALL_REASONS = (
    "barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle",
    "long_scoreboard", "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction",
    "not_selected", "selected", "short_scoreboard", "sleeping", "tex_throttle", "wait",
)
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
_STALL_RX = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")

# raw metrics requested on every profile, so the summary is complete under --set basic too
RAW_METRICS = (
    "dram__bytes_read.sum", "dram__bytes_write.sum",
    "l1tex__t_sector_hit_rate.pct", "lts__t_sector_hit_rate.pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "launch__registers_per_thread",
) + tuple(STALL_METRIC.format(r) for r in STALL_REASONS)

# summary field -> candidate (section, metric name) in order of preference; a section of None
# matches the metric in any section
_FIELDS = {
    "duration_ns": [("GPU Speed Of Light Throughput", "Duration"),
                    (None, "gpu__time_duration.sum")],
    "sm_throughput_pct": [("GPU Speed Of Light Throughput", "Compute (SM) Throughput"),
                          ("GPU Speed Of Light Throughput", "SM [%]")],
    "memory_throughput_pct": [("GPU Speed Of Light Throughput", "Memory Throughput"),
                              ("GPU Speed Of Light Throughput", "Memory [%]")],
    "dram_throughput_pct": [("GPU Speed Of Light Throughput", "DRAM Throughput")],
    "l1_hit_pct": [(None, "L1/TEX Hit Rate"), (None, "l1tex__t_sector_hit_rate.pct")],
    "l2_hit_pct": [(None, "L2 Hit Rate"), (None, "lts__t_sector_hit_rate.pct")],
    "achieved_occupancy_pct": [("Occupancy", "Achieved Occupancy"),
                               (None, "sm__warps_active.avg.pct_of_peak_sustained_active")],
    "theoretical_occupancy_pct": [("Occupancy", "Theoretical Occupancy")],
    "registers_per_thread": [("Launch Statistics", "Registers Per Thread"),
                             (None, "launch__registers_per_thread")],
    "static_smem_bytes": [("Launch Statistics", "Static Shared Memory Per Block")],
    "dynamic_smem_bytes": [("Launch Statistics", "Dynamic Shared Memory Per Block")],
    "sm_frequency_ghz": [("GPU Speed Of Light Throughput", "SM Frequency")],
    "elapsed_cycles": [("GPU Speed Of Light Throughput", "Elapsed Cycles")],
    "waves_per_sm": [("Launch Statistics", "Waves Per SM")],
}
_TIME = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6,
         "second": 1e9, "s": 1e9}
_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_FREQ = {"cycle/nsecond": 1.0, "cycle/ns": 1.0, "cycle/usecond": 1e-3, "cycle/us": 1e-3,
         "cycle/msecond": 1e-6, "cycle/second": 1e-9, "hz": 1e-9, "khz": 1e-6, "mhz": 1e-3,
         "ghz": 1.0}


class NcuParseError(ValueError):
    """An ncu export this parser cannot read (names the source and what was found)."""


@dataclass
class HotSpot:
    """Where the samples are: a SASS address or a source line, with its share of the samples."""

    samples: int
    share: float
    address: "int | None" = None
    sass: str = ""
    file: str = ""
    line: int = 0
    stalls: dict = field(default_factory=dict)


@dataclass
class NcuSummary:
    """The facts of one profiled kernel launch (base units: ns, bytes, %, GHz)."""

    kernel: str
    launch_id: int
    block: str = ""
    grid: str = ""
    device: str = ""
    duration_ns: "float | None" = None
    sm_throughput_pct: "float | None" = None
    memory_throughput_pct: "float | None" = None
    dram_throughput_pct: "float | None" = None
    dram_bytes: "float | None" = None
    dram_read_bytes: "float | None" = None
    dram_write_bytes: "float | None" = None
    l1_hit_pct: "float | None" = None
    l2_hit_pct: "float | None" = None
    achieved_occupancy_pct: "float | None" = None
    theoretical_occupancy_pct: "float | None" = None
    registers_per_thread: "float | None" = None
    static_smem_bytes: "float | None" = None
    dynamic_smem_bytes: "float | None" = None
    sm_frequency_ghz: "float | None" = None
    elapsed_cycles: "float | None" = None
    waves_per_sm: "float | None" = None
    stalls: list = field(default_factory=list)       # [(reason, warps per issue cycle)], top first
    hotspots: list = field(default_factory=list)     # [HotSpot], by source line when mapped
    missing: list = field(default_factory=list)      # summary fields the export did not have
    metrics: dict = field(default_factory=dict)      # "section/metric" -> [unit, value] as read

    def to_json(self) -> dict:
        d = asdict(self)
        d["stalls"] = [{"reason": r, "ratio": v} for r, v in self.stalls]
        return d


_GROUPED = re.compile(r"^-?\d{1,3}(,\d{3})+(\.\d+)?$")
_DECIMAL_COMMA = re.compile(r"^-?\d+,\d+$")


def to_number(text: str) -> "float | None":
    """``"1,234.5"`` -> 1234.5; ``"9,00"`` (a decimal comma, from a non-English locale) -> 9.0;
    ``"n/a"``/empty -> None. Thousands groups have exactly three digits, which tells the two
    apart; the tool also exports with ``LC_ALL=C`` so the ambiguity does not arise."""
    t = (text or "").strip()
    if not t or t.lower() in ("n/a", "nan", "-"):
        return None
    if _GROUPED.match(t):
        t = t.replace(",", "")
    elif _DECIMAL_COMMA.match(t):
        t = t.replace(",", ".")
    try:
        return float(t)
    except ValueError:
        return None


def to_base(value: "float | None", unit: str) -> "float | None":
    """Convert an ncu value printed in `unit` to tirxh's base unit for that quantity."""
    if value is None:
        return None
    u = (unit or "").strip()
    lu = u.lower()
    if lu in _TIME:
        return value * _TIME[lu]
    if lu in _FREQ:
        return value * _FREQ[lu]
    m = re.match(r"^(?:([kmgt])(i?))?b(?:yte)?s?(?:/.*)?$", lu)
    if m:  # byte, Kbyte/block, MiB, Gbyte/second
        p, binary = m.group(1) or "", m.group(2)
        return value * ((1024.0 ** " kmgt".index(p)) if p and binary else _PREFIX[p])
    return value  # %, register/thread, cycle, ratio, warp: already base


def _rows(text: str, source: str) -> list:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    # ncu prints "==PROF==" notes before the table when asked to profile and export at once
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"')), None)
    if start is None:
        raise NcuParseError(f"{source}: no CSV table found (expected ncu --csv output)")
    return list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))


def _need(rows: list, cols: tuple, source: str) -> None:
    have = list(rows[0].keys()) if rows else []
    miss = [c for c in cols if c not in have]
    if miss:
        raise NcuParseError(f"{source}: missing column(s) {miss}; found {have}")


def parse_details(text: str, source: str = "<details csv>") -> list:
    """Every kernel launch in a ``--page details --csv`` export, as `NcuSummary` objects."""
    rows = _rows(text, source)
    if not rows:
        raise NcuParseError(f"{source}: the table is empty (was any kernel profiled?)")
    # "Section Name" is absent when only --metrics were collected (no sections)
    _need(rows, ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value"), source)
    by_id: dict = {}
    for r in rows:
        by_id.setdefault(r["ID"], []).append(r)
    out = []
    for lid, rs in by_id.items():
        first = rs[0]
        s = NcuSummary(kernel=first["Kernel Name"], launch_id=int(to_number(lid) or 0),
                       block=first.get("Block Size", ""), grid=first.get("Grid Size", ""),
                       device=first.get("Device", ""))
        table = {}
        for r in rs:
            table[(r.get("Section Name") or "", r["Metric Name"])] = (r["Metric Unit"],
                                                                     r["Metric Value"])
        s.metrics = {f"{sec}/{name}": [u, v] for (sec, name), (u, v) in table.items()}
        for fld, cands in _FIELDS.items():
            val = _lookup(table, cands)
            setattr(s, fld, val)
            if val is None:
                s.missing.append(fld)
        rd = _lookup(table, [(None, "dram__bytes_read.sum")])
        wr = _lookup(table, [(None, "dram__bytes_write.sum")])
        s.dram_read_bytes, s.dram_write_bytes = rd, wr
        s.dram_bytes = None if rd is None and wr is None else (rd or 0.0) + (wr or 0.0)
        if s.dram_bytes is None:
            s.missing.append("dram_bytes")
        stalls = []
        for (_, name), (unit, v) in table.items():
            m = _STALL_RX.match(name)
            if m and to_number(v) is not None:
                stalls.append((m.group(1), to_number(v)))
        s.stalls = sorted(stalls, key=lambda x: -x[1])
        if not stalls:
            s.missing.append("stalls")
        out.append(s)
    return out


def _lookup(table: dict, cands: list) -> "float | None":
    for sec, name in cands:
        for (tsec, tname), (unit, v) in table.items():
            if tname == name and (sec is None or tsec == sec):
                num = to_base(to_number(v), unit)
                if num is not None:
                    return num
    return None


_SAMPLES = ("Warp Stall Sampling (All Samples)", "# Samples", "Sampling Data (All)")
_NOT_ISSUED = ("Warp Stall Sampling (Not-issued Samples)", "Sampling Data (Not Issued)")
_STALL_COL = re.compile(r"^(?:stall_|smsp__pcsamp_warps_issue_stalled_)(\w+)$")


def parse_source(text: str, source: str = "<source csv>", kernel: str = "") -> list:
    """SASS rows of a ``--page source --print-source sass --csv`` export.

    The export is one block per profiled kernel: a ``"Kernel Name","<name>"`` row, a header row
    starting with ``Address``, then one row per instruction. Returns, for the block of `kernel`
    (or the first block), ``[{"address": offset, "sass", "samples", "not_issued", "executed",
    "stalls": {reason: samples}}]``. Addresses become offsets from the function's first
    instruction (ncu prints loaded virtual addresses), so they match the cubin's line table.
    The sample column is ``Warp Stall Sampling (All Samples)`` (``# Samples`` or ``Sampling Data
    (All)`` in other versions). A block without one is *not sampled*, which is not an error:
    the report was collected without the SourceCounters section (seen on the H200, 2026-11-30:
    ``--set basic`` exported only ``Address, Source, launch__registers_per_thread``). Its rows
    then carry ``"samples": None`` (unknown, not zero); `source_sampled` tells the two apart.
    """
    blocks, name, header = [], "", None
    for row in csv.reader(io.StringIO(text)):
        if not row or not any(c.strip() for c in row):
            continue
        first = row[0].strip().lstrip("#").strip()
        if first == "Kernel Name":
            name, header = (row[1].strip() if len(row) > 1 else ""), None
            continue
        if first == "Address":
            header = [c.strip() for c in row]
            blocks.append((name, header, []))
            continue
        if header is not None and len(row) == len(header):
            blocks[-1][2].append(row)
    if not blocks:
        raise NcuParseError(f"{source}: no SASS table (a header row starting with 'Address'); "
                            "export with --page source --print-source sass --csv")
    pick = [b for b in blocks if kernel and b[0].split("(")[0] == kernel] or blocks[:1]
    name, header, rows = pick[0]
    col = {h: i for i, h in enumerate(header)}
    src = next((i for h, i in col.items() if h == "Source"), None)
    allc = next((col[h] for h in _SAMPLES if h in col), None)
    noti = next((col[h] for h in _NOT_ISSUED if h in col), None)
    exe = col.get("Instructions Executed")
    stall_cols = {m.group(1): i for h, i in col.items()
                  for m in [_STALL_COL.match(h)] if m and not h.endswith("_not_issued")}
    out = []
    for r in rows:
        try:
            address = int(r[0].strip(), 16)
        except ValueError:
            continue  # a label or summary row
        out.append({"address": address, "sass": r[src].strip() if src is not None else "",
                    "samples": None if allc is None else int(to_number(r[allc]) or 0),
                    "not_issued": int(to_number(r[noti]) or 0) if noti is not None else 0,
                    "executed": None if exe is None else to_number(r[exe]),
                    "stalls": {k: int(to_number(r[i]) or 0) for k, i in stall_cols.items()
                               if to_number(r[i])}})
    if out:
        base = min(x["address"] for x in out)
        for x in out:
            x["address"] -= base
    return out


def source_sampled(rows: list) -> bool:
    """Whether `parse_source` rows carry warp samples (a sampling column was exported)."""
    return any(r["samples"] is not None for r in rows)


def not_sampled_reason(text: str, kernel: str = "") -> str:
    """Why a source export has no samples, naming the columns it did have (for the summary)."""
    headers, name = [], ""
    for row in csv.reader(io.StringIO(text)):
        first = row[0].strip().lstrip("#").strip() if row else ""
        if first == "Kernel Name":
            name = row[1].strip() if len(row) > 1 else ""
        elif first == "Address":
            headers.append((name, [c.strip() for c in row]))
    pick = [h for n, h in headers if kernel and n.split("(")[0] == kernel] or \
        [h for _, h in headers[:1]]
    if not pick:
        return "not sampled: no SASS table in the source export"
    return (f"not sampled: the source page of {kernel or 'the kernel'} has no sampling column "
            f"({' / '.join(_SAMPLES)}); it has {pick[0]}. Collect the SourceCounters section "
            "(the ncu tool adds it to --set basic) or use --set full")
