"""The KCoral side of iket: run the instrumented job on the board and turn its trace buffer into
the timeline artifacts (Chrome JSON, PNG, text and JSON summaries).

Registered through the ``kcoral`` entry-point group (``kcoral_register_tools``). The tool starts
``python -m kcoral.runjob JOB.json --out DIR --save-outputs`` (one launch) and reads the trace
buffer that runjob saves as an output (``DIR/iket_trace.npy``; ``.bin`` is accepted too).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np

from .chrome import write_chrome
from .decode import decode
from .layout import LayoutError, TraceLayout
from .png import write_png
from .summary import format_summary, summarize

try:
    from kcoral.tools import Tool, ToolResult
except ImportError:  # pragma: no cover - KCoral is part of the tirxh distribution
    Tool, ToolResult = object, None

RUN_TIMEOUT_S = 600


class ToolError(Exception):
    """The tool could not produce a timeline (message says why and where)."""


def runjob_command(job_json: pathlib.Path, out_dir: pathlib.Path, extra=()) -> list:
    return [sys.executable, "-m", "kcoral.runjob", str(job_json), "--out", str(out_dir),
            "--save-outputs", *extra]


def find_trace(out_dir: pathlib.Path, param: str) -> np.ndarray:
    for suffix in (".npy", ".bin"):
        p = out_dir / f"{param}{suffix}"
        if p.exists():
            return np.load(p) if suffix == ".npy" else np.fromfile(p, dtype=np.uint8)
    found = sorted(x.name for x in out_dir.glob("*")) if out_dir.exists() else []
    raise ToolError(f"kcoral.runjob wrote no {param}.npy/.bin in {out_dir} (found: {found}); "
                    "is the trace buffer marked as an output of the job?")


def render(data, layout: TraceLayout, workdir: pathlib.Path, clock_ghz=None,
           role_names=None, max_sms: int = 12) -> "tuple[dict, dict]":
    """Decode `data` and write the artifacts; returns (artifacts, summary)."""
    tl = decode(data, layout, clock_ghz=clock_ghz, role_names=role_names)
    s = summarize(tl)
    s["instrumentation"] = dict(layout.cost)
    arts = {}
    raw = workdir / "iket_trace.bin"
    np.asarray(data, dtype=np.uint8).tofile(raw)
    arts["iket_trace.bin"] = raw
    (workdir / "iket_trace.layout.json").write_text(layout.dumps())
    arts["iket_trace.layout.json"] = workdir / "iket_trace.layout.json"
    write_chrome(tl, workdir / "iket_trace.json")
    arts["iket_trace.json"] = workdir / "iket_trace.json"
    (workdir / "iket_summary.txt").write_text(format_summary(s) + "\n")
    arts["iket_summary.txt"] = workdir / "iket_summary.txt"
    (workdir / "iket_summary.json").write_text(json.dumps(s, indent=1))
    arts["iket_summary.json"] = workdir / "iket_summary.json"
    if tl.warps:
        try:
            write_png(tl, workdir / "iket_timeline.png", max_sms=max_sms)
            arts["iket_timeline.png"] = workdir / "iket_timeline.png"
        except RuntimeError as e:  # matplotlib missing on the board: say so, keep the rest
            s["issues"].append(str(e))
    return arts, s


class IketTool(Tool):
    name = "iket"

    def available(self, board) -> "str | None":
        return None  # needs only the board's GPU and kcoral.runjob

    def run(self, job, workdir: pathlib.Path):
        workdir = pathlib.Path(workdir)
        opts = job.tool_options(self.name)
        try:
            layout = TraceLayout.from_json(opts.get("layout") or {})
        except LayoutError as e:
            raise ToolError(f"job {job.name!r}: tools.iket.options: {e}") from None
        job_json, out = workdir / "job.json", workdir / "runjob_out"
        out.mkdir(parents=True, exist_ok=True)
        job.write_json(job_json)
        cmd = runjob_command(job_json, out, opts.get("runjob_args", ()))
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        if p.returncode != 0:
            raise ToolError(f"kcoral.runjob failed (exit {p.returncode}) running the profiling "
                            f"build of {layout.kernel!r}:\n{(p.stdout + p.stderr)[-4000:]}")
        data = find_trace(out, layout.param)
        arts, s = render(data, layout, workdir, clock_ghz=opts.get("clock_ghz"),
                         role_names={int(k): v for k, v in (opts.get("roles") or {}).items()})
        verdict = "incomplete" if s["verdict"] == "incomplete" else None
        return ToolResult(artifacts=arts, summary=s, findings=[], verdict=verdict)


def kcoral_register_tools(registry):
    """Entry point of the ``kcoral`` group: register the iket tool."""
    registry.add(IketTool(), owner="tirxh-iket")
