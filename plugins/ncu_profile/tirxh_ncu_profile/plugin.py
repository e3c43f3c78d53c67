"""The tirxh side of ncu_profile: ``tirxh profile NODEID --ncu [--set basic|full] [--metrics ...]``
and ``--sanitizer memcheck|racecheck|synccheck|initcheck``.

The item's job is built exactly as for ``tirxh bench`` (`tirxh.api.build_job`), with timing off
and the tools named with their typed options (`NcuOptions`, `SanitizerOptions`); KCoral runs them on a board and returns their summaries and
artifacts, which are downloaded into ``request["out"]``. Hot spots come back as SASS addresses and
are mapped here to the kernel's Python lines through the cubin's line table.
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass, field

from kcoral.errors import KCoralError
from kcoral.job import ToolRequest
from tirxh.api import AnalyzerResult, Finding, build_job, client_for, hookimpl, worst

from .ncu_csv import HotSpot
from .report import format_summary
from .sanitizer import TOOLS
from .source_map import line_table, map_hotspots
from .tools import SETS, NcuOptions, SanitizerOptions, ncu_request

# Source lines the summary (and so the JSON document) keeps, hottest first; the text report
# prints five. Why 40: a kernel of fifteen barrier-separated phases (the KDA backward's) spreads
# its samples over dozens of lines, and its cubin (ptxas on the GPU machine) is not the one a
# CPU machine assembles, so the ranking cannot be redone from `sass_samples` elsewhere
# (session 39: 10 kept, 73% of the addresses shifted in a nvJitLink rebuild).
HOTSPOTS_KEPT = 40


@dataclass
class ProfileReport:
    """What ``tirxh profile`` prints and stores for one item and one tool."""

    item: str
    tool: str
    verdict: "str | None"
    summary: dict
    text: str
    artifacts: dict = field(default_factory=dict)  # name -> local path
    analysis: "AnalyzerResult | None" = None

    def to_json(self) -> dict:
        d = {"item": self.item, "tool": self.tool, "verdict": self.verdict,
             "summary": self.summary, "artifacts": {k: str(v) for k, v in self.artifacts.items()}}
        if self.analysis is not None:
            d["analysis"] = self.analysis.to_json()
        return d


@hookimpl
def tirxh_addoption(parser):
    parser.addoption("--ncu", action="store_true", default=False,
                     help="profile: run the item under Nsight Compute on a KCoral board")
    parser.addoption("--ncu-set", dest="ncu_set", default="basic", choices=SETS,
                     help="profile --ncu: the ncu section set (default basic)")
    parser.addoption("--ncu-metrics", dest="ncu_metrics", default=None,
                     metavar="M1,M2", help="profile --ncu: extra raw ncu metrics")
    parser.addoption("--ncu-baseline", dest="ncu_baseline", default=None, metavar="NAME",
                     help="profile --ncu: profile the item's baseline NAME (e.g. torch.matmul: "
                          "its kernels, launch configuration and counters) instead of the item")
    parser.addoption("--sanitizer", default=None, choices=TOOLS,
                     help="profile: run the item under compute-sanitizer with this tool")


def request_from_config(config) -> dict:
    """The ncu/sanitizer part of a profile request from parsed options (for the CLI)."""
    return {"ncu": ncu_request(config.getoption("ncu_set"), config.getoption("ncu_metrics"),
                               config.getoption("ncu_baseline"))
            if config.getoption("ncu") else None,
            "sanitizer": config.getoption("sanitizer")}


@hookimpl
def tirxh_profile_item(item, compiled, config, request):
    req = dict(request_from_config(config), **{k: v for k, v in request.items() if v})
    if not req.get("ncu") and not req.get("sanitizer"):
        return None
    client = client_for(config)
    job = build_job(compiled, item.suite, item.case, put=client.put_blob)
    job.timing.enabled = False
    tools = []
    try:  # the typed option sets the daemon will check, checked here first
        if req.get("ncu"):
            tools.append({"name": "ncu", "options": NcuOptions.parse(
                dict(req["ncu"]), "--ncu options").to_doc()})
        if req.get("sanitizer"):
            tools.append({"name": "compute-sanitizer", "options": SanitizerOptions.parse(
                {"tool": req["sanitizer"]}, "--sanitizer").to_doc()})
        want = (req.get("ncu") or {}).get("baseline")
        mine = [b.name for b in job.baselines]
        if want and want not in mine:
            raise ValueError(f"--ncu-baseline {want!r}: item {item.name} declares the "
                             f"baselines {mine}")
    except ValueError as e:  # kcoral.errors.JobError, naming the option
        return ProfileReport(item.name, "ncu" if req.get("ncu") else "compute-sanitizer",
                             "error", {"reason": str(e)}, f"profile: {e}")
    job.tools = [ToolRequest(**t) for t in tools]
    last = None
    try:
        for ev in client.submit(job, timeout=float(config.getini("bench", "timeout_s") or 900.0)):
            last = ev
    except KCoralError as e:  # refused (no board for the target, bad job) or daemon gone
        refused = [ProfileReport(item.name, t["name"], "error",
                                 {"reason": f"{e.code}: {e.message}"},
                                 f"{t['name']}: KCoral refused the job: {e.code}: {e.message}")
                   for t in tools]
        return refused[0] if len(refused) == 1 else refused
    out = pathlib.Path(req.get("out") or ".").joinpath(_safe(item.name))
    out.mkdir(parents=True, exist_ok=True)
    result = (last or {}).get("result") or {}
    reports = []
    for t in tools:  # one report per tool, in the order asked
        got = (result.get("tools") or {}).get(t["name"])
        reports.append(_report(item, compiled, t, got, result, client, out))
    return reports[0] if len(reports) == 1 else reports


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.[]" else "_" for c in name)[:120]


def _report(item, compiled, tool, got, result, client, out: pathlib.Path) -> ProfileReport:
    name = tool["name"]
    if not got or got.get("status") != "ok":
        why = (got or {}).get("reason") or (result.get("error") or {}).get("message") or \
            "the job returned no result for this tool"
        return ProfileReport(item.name, name, "error", {"status": (got or {}).get("status"),
                                                        "reason": why},
                             f"{name}: {why}")
    arts = {}
    for aname, dg in (got.get("artifacts") or {}).items():
        path = out / aname
        path.write_bytes(client.download(dg))
        arts[aname] = path
    s = got.get("summary") or {}
    if name == "ncu":
        if s.get("sass_samples") and compiled.cubin is not None:
            spots, cov = map_hotspots(s["sass_samples"], line_table(compiled.sass),
                                       HOTSPOTS_KEPT)
            s["hotspots"] = [h.__dict__ for h in spots]
            s["hotspot_coverage"] = cov
        (out / "ncu_summary.json").write_text(json.dumps(s, indent=1))
        arts["ncu_summary.json"] = out / "ncu_summary.json"
        return ProfileReport(item.name, name, None, s, format_summary(s), arts)
    findings = [Finding.from_json(f) for f in got.get("findings") or []]
    verdict = got.get("verdict") or worst(*(f.severity for f in findings))
    analysis = AnalyzerResult(f"sanitizer.{s.get('tool', '?')}", verdict, findings,
                              s.get("summary", ""), {"error_summary": s.get("error_summary")})
    lines = [s.get("summary", name)] + [f"  {f.severity}: {f.kind} at {f.where}: {f.message}"
                                         for f in findings[:20]]
    return ProfileReport(item.name, name, verdict, s, "\n".join(lines), arts, analysis)


__all__ = ["ProfileReport", "HotSpot", "request_from_config"]
