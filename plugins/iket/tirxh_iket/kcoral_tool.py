"""The KCoral side of iket: run the instrumented job on the board and turn its trace buffer into
the timeline artifacts (Chrome JSON, PNG, text and JSON summaries).

Registered through the ``kcoral`` entry-point group (``kcoral_register_tools``). The tool starts
``python -m kcoral.runjob JOB.json --out DIR --save-outputs`` (`kcoral.tools.runjob_command`: one
launch, on the board the tool runs on) in its directory under the job's, and reads the trace
buffer that runjob saves as an output (``DIR/iket_trace.npy``; ``.bin`` is accepted too). A
client chooses only the typed `IketOptions`, which the daemon validates before it accepts the
job (the layout included: its trace parameter is an identifier, so no file name escapes).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import time
from dataclasses import dataclass

import numpy as np

from kcoral.schema import IDENT, Int, Json, MapOf, Model, Num, Optional, Str, spec
from kcoral.tools import Tool, ToolResult, runjob_command

from .chrome import write_chrome
from .decode import decode
from .layout import LayoutError, TraceLayout
from .png import write_png
from .summary import format_summary, summarize

RUN_TIMEOUT_S = 600


class ToolError(Exception):
    """The tool could not produce a timeline (message says why and where)."""


@dataclass
class IketOptions(Model):
    """``tools: [{"name": "iket", "options": {...}}]``: the trace layout of the profiling build
    (`TraceLayout.to_json()`), which launch carries the trace, names for warp roles, how many
    SMs the PNG shows, and the SM clock to convert cycles with (default: the board's)."""

    layout: dict = spec(Json(max_depth=6))
    launch: int = spec(Int(0, 63), 0)
    roles: dict = spec(MapOf(Str(r"[A-Za-z0-9_.:+ -]{1,64}", what="role name"),
                             key=Str(r"[0-9]{1,4}", what="warp index"), max_len=1024), {})
    max_sms: int = spec(Int(1, 1024), 12)
    clock_ghz: "float | None" = spec(Optional(Num(0.01, 10.0)), None)

    def check(self, path, p):
        try:
            lay = TraceLayout.from_json(self.layout)
        except LayoutError as e:
            p.add(f"{path}.layout", str(e))
            return
        Str(IDENT, what="buffer name").parse(lay.param, f"{path}.layout.param", p)


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
    """Decode `data` and write the artifacts; returns (artifacts, summary).

    The summary's ``render_s`` says how long each step took (decode, summary, chrome, png), so
    a slow profile shows whether the board's CPU was the cause (issue of sessions 7 and 8: the
    PNG of a full attention trace took minutes)."""
    times = {}
    t = time.perf_counter()

    def lap(step):
        nonlocal t
        now = time.perf_counter()
        times[step] = round(now - t, 3)
        t = now

    tl = decode(data, layout, clock_ghz=clock_ghz, role_names=role_names)
    lap("decode")
    s = summarize(tl)
    s["instrumentation"] = dict(layout.cost)
    lap("summary")
    arts = {}
    raw = workdir / "iket_trace.bin"
    np.asarray(data, dtype=np.uint8).tofile(raw)
    arts["iket_trace.bin"] = raw
    (workdir / "iket_trace.layout.json").write_text(layout.dumps())
    arts["iket_trace.layout.json"] = workdir / "iket_trace.layout.json"
    write_chrome(tl, workdir / "iket_trace.json")
    arts["iket_trace.json"] = workdir / "iket_trace.json"
    lap("chrome")
    if tl.warps:
        try:
            write_png(tl, workdir / "iket_timeline.png", max_sms=max_sms)
            arts["iket_timeline.png"] = workdir / "iket_timeline.png"
        except RuntimeError as e:  # matplotlib missing on the board: say so, keep the rest
            s["issues"].append(str(e))
        lap("png")
    s["render_s"] = times
    (workdir / "iket_summary.txt").write_text(format_summary(s) + "\n")
    arts["iket_summary.txt"] = workdir / "iket_summary.txt"
    (workdir / "iket_summary.json").write_text(json.dumps(s, indent=1))
    arts["iket_summary.json"] = workdir / "iket_summary.json"
    return arts, s


class IketTool(Tool):
    name = "iket"
    options = IketOptions

    def available(self, board) -> "str | None":
        """Needs only the board's GPU and kcoral.runjob: a sim board runs the profiling build
        (its outputs checked) but its clocks are numsim's counters, not time."""
        kind = getattr(board, "type", None)
        if kind == "sim":
            return (f"board {getattr(board, 'name', '?')!r} is of type {kind!r}; iket records "
                    "time on a CUDA board")
        return None

    def run(self, job, workdir: pathlib.Path, board):
        workdir = pathlib.Path(workdir)
        opts = job.tool_options(self.name, IketOptions)  # validated, layout included
        layout = TraceLayout.from_json(opts.layout)
        job_json, out = workdir / "job.json", workdir / "runjob_out"
        out.mkdir(parents=True, exist_ok=True)
        job.write_json(job_json)
        cmd = runjob_command(job_json, out, board, save_outputs=True)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        if p.returncode != 0:
            raise ToolError(f"kcoral.runjob failed (exit {p.returncode}) running the profiling "
                            f"build of {layout.kernel!r}:\n{(p.stdout + p.stderr)[-4000:]}")
        data = find_trace(out, layout.param)
        arts, s = render(data, layout, workdir, clock_ghz=opts.clock_ghz,
                         role_names={int(k): v for k, v in opts.roles.items()},
                         max_sms=opts.max_sms)
        verdict = "incomplete" if s["verdict"] == "incomplete" else None
        return ToolResult(artifacts=arts, summary=s, findings=[], verdict=verdict)


def kcoral_register_tools(registry):
    """Entry point of the ``kcoral`` group: register the iket tool."""
    registry.add(IketTool(), owner="tirxh-iket")
