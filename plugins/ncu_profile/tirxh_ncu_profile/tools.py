"""The KCoral tools: Nsight Compute (``ncu``) and compute-sanitizer, run around one job.

Registered through the ``kcoral`` entry-point group. Both run the job's launch in a child
process, ``python -m kcoral.runjob JOB.json --out DIR`` (`kcoral.tools.runjob_command`, for the
board the tool runs on), under the profiler, in the tool's directory under the job's. A client
chooses only the typed options (`NcuOptions`, `SanitizerOptions`), which the daemon validates
before it accepts the job; the command lines are built here. The job is trimmed first (`profiling_job`):
one correctness run, no timing loop, no baselines; ``runjob`` then fills the inputs and launches
the kernel once, so the profiler sees one launch and none of the measurement protocol's L2-flush
kernels.

ncu::

    ncu --clock-control none --set basic|full [--section SourceCounters --section WarpStateStats]
        --metrics <RAW_METRICS + user's> --import-source yes
        --kernel-name <entry> --launch-count 1 -o rep -f python -m kcoral.runjob JOB.json ...

ncu of one of the job's baselines (option ``baseline``: what the kernel is compared with,
profiled the same way, so that "why is cuBLAS faster here" has counters and a launch
configuration to answer with): the job keeps that baseline, ``runjob --baseline NAME`` calls it
once to warm it up and then inside the CUDA profiler range, and ncu captures that range's
launches, at most `BASELINE_LAUNCHES` of them, whatever their kernels are called::

    ncu --clock-control none --set basic|full [...] --metrics <...> --profile-from-start off
        --launch-count 16 -o rep -f python -m kcoral.runjob JOB.json ... --baseline NAME
    ncu --import rep.ncu-rep --csv --page details --print-units base
    ncu --import rep.ncu-rep --csv --page source --print-source sass

compute-sanitizer::

    compute-sanitizer --tool memcheck|racecheck|synccheck|initcheck --print-limit 100
        python -m kcoral.runjob JOB.json ...
"""

from __future__ import annotations

import copy
import json
import os
import pathlib
import subprocess
from dataclasses import dataclass

from kcoral.job import Job
from kcoral.schema import PLUGIN, Int, ListOf, Model, Optional, Str, spec
from kcoral.tools import Tool, ToolResult, runjob_command

from . import ncu_csv, sanitizer
from .source_map import line_table, map_hotspots

SETS = ("basic", "full")
# a raw ncu metric name (sm__inst_executed.sum): no commas (they are joined with ','), no
# leading '-' (it could not pass as an option), nothing a shell would read
METRIC = r"[A-Za-z][A-Za-z0-9_.:]{0,127}"
# Added to --set basic so the source page has per-instruction warp samples (hot spots): on the
# H200 (2026-11-30) a basic-set report exported only "Address, Source, launch__registers_per_
# thread" for the source page. SourceCounters carries the warp-stall sampling, WarpStateStats
# the per-reason stall breakdown; --set full includes both already.
SAMPLING_SECTIONS = ("SourceCounters", "WarpStateStats")
RUN_TIMEOUT_S = 900
# the most launches ncu captures of a baseline's call: torch.matmul is one kernel, a compiled
# norm one or two; the bound keeps a baseline that launches in a loop from profiling for minutes
BASELINE_LAUNCHES = 16
_SEARCH = ("/opt/nvidia/nsight-compute",)


class ToolError(Exception):
    """The profiler could not run or its output could not be read (message says which)."""


def find_binary(name: str, env: str) -> "str | None":
    """`env` (e.g. ``KCORAL_NCU``) if set; else where tirxh finds CUDA tools (CUDA_HOME/bin, the
    ``nvidia-*`` wheels' bin directories, PATH, /usr/local/cuda/bin; ``pip install
    nvidia-cuda-sanitizer-api`` provides compute-sanitizer); else an Nsight Compute install
    under /opt/nvidia/nsight-compute."""
    if os.environ.get(env):
        return os.environ[env]
    # start-up cost: KCoral's daemon and workers load this module as a tool plugin and import
    # nothing from tirxh; tirxh.api (numpy, ml_dtypes, the compiler) costs 0.3-0.5 s there
    from tirxh.api import find_tool
    found = find_tool(name)
    if found:
        return found
    for base in _SEARCH:
        if os.path.isdir(base):
            for root, _, files in os.walk(base):
                if name in files:
                    return os.path.join(root, name)
    return None


def _board_gpu_reason(board) -> "str | None":
    kind = getattr(board, "type", None)
    if kind is not None and kind not in ("cuda", "agent", "remote"):
        return f"board {getattr(board, 'name', '?')!r} is of type {kind!r}; profilers need a " \
               "CUDA board"
    return None


def profiling_job(doc: dict, baseline: "str | None" = None) -> dict:
    """A copy of job `doc` that launches the kernel once: first correctness run, no timing, no
    baselines but `baseline` (the one a baseline profile runs; ToolError if the job has none
    of that name)."""
    d = copy.deepcopy(doc)
    d.setdefault("timing", {})["enabled"] = False
    d["runs"] = d.get("runs", [])[:1]
    keep = [b for b in d.get("baselines", []) if baseline and b.get("name") == baseline]
    if baseline and not keep:
        raise ToolError(f"ncu options: baseline {baseline!r} is not one of the job's baselines "
                        f"{[b.get('name') for b in d.get('baselines', [])]}")
    d["baselines"] = [dict(b, optional=False) for b in keep]
    d["tools"] = []
    return d


def ncu_request(section_set: str = "basic", metrics: "str | None" = None,
                baseline: "str | None" = None) -> dict:
    """The ``ncu`` tool's options from command-line text (``--ncu-set``, ``--ncu-metrics
    M1,M2``, ``--ncu-baseline``): what `NcuOptions` then validates."""
    return dict({"set": section_set or "basic",
                 "metrics": [m for m in (metrics or "").split(",") if m]},
                **({"baseline": baseline} if baseline else {}))


@dataclass
class NcuOptions(Model):
    """``tools: [{"name": "ncu", "options": {...}}]``: the section set, extra raw metrics, and
    which launch to profile."""

    set: str = spec(Str(choices=SETS), "basic")
    metrics: list = spec(ListOf(Str(METRIC, what="ncu metric name"), 64), [])
    launch: int = spec(Int(0, 63), 0)
    # profile this baseline of the job (its launches, whatever kernels they are) instead of the
    # candidate's launch; the daemon checks that the job names it (`Job.validate_plugins`)
    baseline: "str | None" = spec(Optional(Str(PLUGIN, what="baseline name")), None)


@dataclass
class SanitizerOptions(Model):
    """``tools: [{"name": "compute-sanitizer", "options": {...}}]``."""

    tool: str = spec(Str(choices=sanitizer.TOOLS), "memcheck")
    launch: int = spec(Int(0, 63), 0)
    print_limit: int = spec(Int(1, 10000), 100)


def _write_job(job, workdir: pathlib.Path,
               baseline: "str | None" = None) -> "tuple[pathlib.Path, pathlib.Path]":
    trimmed = Job.from_json(profiling_job(job.doc, baseline))
    trimmed.blob_root = getattr(job, "blob_root", None)  # runjob reads the blobs from there
    path, out = workdir / "job.json", workdir / "runjob_out"
    out.mkdir(parents=True, exist_ok=True)
    trimmed.write_json(path)
    return path, out


def _run(cmd: list, what: str, timeout: int = RUN_TIMEOUT_S) -> subprocess.CompletedProcess:
    # the C locale: numbers in the exports use '.' for decimals and ',' for thousands only
    env = dict(os.environ, LC_ALL="C", LANG="C")
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise ToolError(f"{what} did not finish in {timeout} s: {' '.join(cmd[:6])} ...") from None


# -- ncu ------------------------------------------------------------------------------------------

def ncu_profile_command(ncu: str, report: pathlib.Path, entry: str, target: list,
                        section_set: str = "basic", metrics=(), select=None) -> list:
    """`select`: which launches ncu profiles (default: one launch of kernel `entry`)."""
    if section_set not in SETS:
        raise ValueError(f"ncu --set {section_set!r}: expected one of {SETS}")
    wanted = list(dict.fromkeys(list(ncu_csv.RAW_METRICS) + list(metrics)))
    sections = [] if section_set == "full" else \
        [a for sec in SAMPLING_SECTIONS for a in ("--section", sec)]
    return [ncu, "--clock-control", "none", "--set", section_set, *sections,
            "--metrics", ",".join(wanted), "--import-source", "yes",
            *(select or ["--kernel-name", entry, "--launch-count", "1"]),
            "-o", str(report), "-f", *target]


def ncu_baseline_command(ncu: str, report: pathlib.Path, target: list,
                         section_set: str = "basic", metrics=()) -> list:
    """`ncu_profile_command` for a baseline's call: the launches inside the profiler range
    (``--profile-from-start off``), up to `BASELINE_LAUNCHES`, instead of one named kernel."""
    return ncu_profile_command(ncu, report, "", target, section_set, metrics, select=[
        "--profile-from-start", "off", "--launch-count", str(BASELINE_LAUNCHES)])


def ncu_export_commands(ncu: str, rep: pathlib.Path) -> dict:
    return {"details": [ncu, "--import", str(rep), "--csv", "--page", "details",
                        "--print-units", "base"],
            "source": [ncu, "--import", str(rep), "--csv", "--page", "source",
                       "--print-source", "sass"]}


class NcuTool(Tool):
    """``ncu``: Nsight Compute around one launch; artifacts: the ``.ncu-rep`` and the CSVs."""

    name = "ncu"
    options = NcuOptions

    def available(self, board) -> "str | None":
        why = _board_gpu_reason(board)
        if why:
            return why
        if find_binary("ncu", "KCORAL_NCU") is None:
            return "ncu (Nsight Compute CLI) not found on this board: install Nsight Compute " \
                   "or set KCORAL_NCU to the ncu binary"
        return None

    def run(self, job, workdir: pathlib.Path, board):
        workdir = pathlib.Path(workdir)
        ncu = find_binary("ncu", "KCORAL_NCU")
        if ncu is None:
            raise ToolError(self.available(board) or "ncu not found")
        opts = job.tool_options(self.name, NcuOptions)
        entry = "" if opts.baseline else _launch(job, opts.launch).entry
        job_json, out = _write_job(job, workdir, opts.baseline)
        rep = workdir / "profile"
        target = runjob_command(job_json, out, board, baseline=opts.baseline)
        cmd = ncu_baseline_command(ncu, rep, target, opts.set, opts.metrics) if opts.baseline \
            else ncu_profile_command(ncu, rep, entry, target, opts.set, opts.metrics)
        p = _run(cmd, "ncu")
        (workdir / "ncu_profile.log").write_text(p.stdout + p.stderr)
        rep_file = workdir / "profile.ncu-rep"
        what = f"baseline {opts.baseline!r}" if opts.baseline else repr(entry)
        if not rep_file.exists():  # no report at all (a non-zero exit alone may be the job's)
            raise ToolError(f"ncu failed (exit {p.returncode}) profiling {what}; last "
                            f"output:\n{(p.stdout + p.stderr)[-3000:]}")
        arts = {"profile.ncu-rep": rep_file, "ncu_profile.log": workdir / "ncu_profile.log"}
        texts = {}
        for page, c in ncu_export_commands(ncu, rep_file).items():
            q = _run(c, f"ncu --import ({page})", 300)
            if q.returncode == 0:
                path = workdir / f"ncu_{page}.csv"
                path.write_text(q.stdout)
                arts[path.name] = path
                texts[page] = q.stdout
        if "details" not in texts:
            raise ToolError(f"ncu could not export the details page of {rep_file}")
        summary = summarize_baseline(texts["details"], opts.baseline) if opts.baseline \
            else summarize_exports(texts["details"], texts.get("source"), entry=entry)
        summary["exit_code"] = p.returncode
        (workdir / "ncu_summary.json").write_text(json.dumps(summary, indent=1))
        arts["ncu_summary.json"] = workdir / "ncu_summary.json"
        return ToolResult(artifacts=arts, summary=summary, findings=[], verdict=None)


def summarize_exports(details: str, source: "str | None" = None, entry: str = "",
                      sass: "str | None" = None, top: int = 10) -> dict:
    """The JSON summary of one profiled launch from the CSV exports (and, for hot spots by
    Python line, the cubin's ``nvdisasm -c -g`` text; without it, hot spots are SASS addresses
    that the client maps with `source_map`)."""
    launches = ncu_csv.parse_details(details)
    pick = [s for s in launches if not entry or s.kernel.split("(")[0] == entry] or launches
    s = pick[0]
    out = s.to_json()
    out["launches_in_report"] = len(launches)
    if source:
        rows = ncu_csv.parse_source(source, kernel=entry)
        if ncu_csv.source_sampled(rows):
            out["sass_samples"] = rows
            spots, cov = map_hotspots(rows, line_table(sass) if sass else {}, top)
            out["hotspots"] = [h.__dict__ for h in spots]
            out["hotspot_coverage"] = cov
        else:  # a report without sampling: say so, keep the rest of the summary
            out["missing"].append("hotspots")
            out["hotspots_note"] = ncu_csv.not_sampled_reason(source, entry)
    else:
        out["missing"].append("hotspots")
        out["hotspots_note"] = "not sampled: ncu could not export the source page"
    return out


def summarize_baseline(details: str, baseline: str) -> dict:
    """The JSON summary of a baseline's profiled call: every launch the range captured, in
    order, each with the facts of `summarize_exports` but hot spots (a library's kernel has no
    source here); ToolError when the range captured none (the baseline launched nothing on the
    GPU, or not on this process's context)."""
    try:
        launches = ncu_csv.parse_details(details)
    except ncu_csv.NcuParseError as e:  # an empty table: the range held no launch
        raise ToolError(f"ncu captured no launch of baseline {baseline!r}: {e}") from None
    kernels = []
    for s in launches:
        d = s.to_json()
        for k in ("hotspots", "stalls"):
            d.pop(k, None)
        d["stalls"] = [{"reason": r, "ratio": v} for r, v in s.stalls[:5]]
        kernels.append(d)
    return {"baseline": baseline, "kernels": kernels, "launches_in_report": len(launches),
            "duration_ns": sum(k.get("duration_ns") or 0.0 for k in kernels),
            "missing": sorted({m for k in kernels for m in k.get("missing", [])})}


# -- compute-sanitizer ----------------------------------------------------------------------------

def sanitizer_command(binary: str, tool: str, target: list, print_limit: int = 100) -> list:
    if tool not in sanitizer.TOOLS:
        raise ValueError(f"--sanitizer {tool!r}: expected one of {sanitizer.TOOLS}")
    cmd = [binary, "--tool", tool, "--print-limit", str(print_limit)]
    if tool == "racecheck":
        cmd += ["--racecheck-report", "all"]
    return cmd + target


class SanitizerTool(Tool):
    """``compute-sanitizer``: findings in the `tirxh.core.findings` format."""

    name = "compute-sanitizer"
    options = SanitizerOptions

    def available(self, board) -> "str | None":
        why = _board_gpu_reason(board)
        if why:
            return why
        if find_binary("compute-sanitizer", "KCORAL_COMPUTE_SANITIZER") is None:
            return "compute-sanitizer not found on this board: install the CUDA toolkit's " \
                   "sanitizer or set KCORAL_COMPUTE_SANITIZER"
        return None

    def run(self, job, workdir: pathlib.Path, board):
        workdir = pathlib.Path(workdir)
        binary = find_binary("compute-sanitizer", "KCORAL_COMPUTE_SANITIZER")
        if binary is None:
            raise ToolError(self.available(board) or "compute-sanitizer not found")
        opts = job.tool_options(self.name, SanitizerOptions)
        tool = opts.tool
        launch = _launch(job, opts.launch)
        job_json, out = _write_job(job, workdir)
        p = _run(sanitizer_command(binary, tool, runjob_command(job_json, out, board),
                                   opts.print_limit), "compute-sanitizer")
        log = workdir / f"sanitizer_{tool}.log"
        log.write_text(p.stdout + p.stderr)
        rep = sanitizer.parse(p.stdout + "\n" + p.stderr, tool, block_dim=launch.block,
                              source=str(log))
        res = rep.to_result()
        summary = {"tool": tool, "verdict": res.verdict, "summary": res.summary,
                   "error_summary": rep.error_summary, "findings": len(rep.findings),
                   "exit_code": p.returncode, "notes": rep.notes[:20]}
        return ToolResult(artifacts={log.name: log}, summary=summary, findings=rep.findings,
                          verdict=res.verdict)


def _launch(job, index: int):
    if index >= len(job.launches):
        raise ToolError(f"tools options: launch {index} does not exist (the job has "
                        f"{len(job.launches)} launch(es))")
    return job.launches[index]


def kcoral_register_tools(registry):
    """Entry point of the ``kcoral`` group: register ncu and compute-sanitizer."""
    registry.add(NcuTool(), owner="tirxh-ncu-profile")
    registry.add(SanitizerTool(), owner="tirxh-ncu-profile")
