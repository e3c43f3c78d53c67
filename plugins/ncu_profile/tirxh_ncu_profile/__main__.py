"""``python -m tirxh_ncu_profile``: the parsers and the tools without the tirxh CLI.

    summarize --details D.csv [--source S.csv] [--sass K.sass | --cubin K.cubin] [--json OUT]
    sanitizer LOG --tool memcheck [--block 256,1,1] [--json OUT]
    run JOB.json (--ncu [--set basic|full] [--metrics M,..] [--baseline NAME] | --sanitizer TOOL)
        [--device N] --workdir DIR
    profile NODEID [--ncu [--ncu-set S] [--ncu-metrics M,..]] [--sanitizer T] [--iket] [--out DIR]

``summarize``/``sanitizer`` read exports recorded anywhere (a CPU machine is enough); ``run``
executes a KCoral JOB.json (with ``_blob_root``) under the tool on this machine's GPU, as a board
would; ``profile`` is ``tirxh profile`` (see `profile_cmd`): one item of the project, through
KCoral. Exit status: 0 ok, 1 findings (sanitizer verdict error), 2 usage or parse error.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

from kcoral.boards import BoardSpec
from kcoral.job import Job
from tirxh.api import cubin_to_sass

from . import ncu_csv, sanitizer, tools
from .profile_cmd import main as profile_main
from .report import format_ncu, format_summary
from .tools import summarize_exports


def _summarize(a) -> int:
    sass = None
    if a.sass:
        sass = pathlib.Path(a.sass).read_text()
    elif a.cubin:
        sass = cubin_to_sass(pathlib.Path(a.cubin).read_bytes())
    src = pathlib.Path(a.source).read_text() if a.source else None
    s = summarize_exports(pathlib.Path(a.details).read_text(), src, entry=a.entry or "",
                          sass=sass)
    print(format_ncu(s))
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(s, indent=1))
    return 0


def _sanitizer(a) -> int:
    block = [int(x) for x in a.block.split(",")] if a.block else None
    rep = sanitizer.parse(pathlib.Path(a.log).read_text(), a.tool, block_dim=block,
                          source=a.log)
    res = rep.to_result()
    print(res.summary + f" -> {res.verdict}")
    for f in rep.findings:
        print(f"  {f.severity}: {f.kind} at {f.where}: {f.message}")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(res.to_json(), indent=1))
    return 1 if res.verdict == "error" else 0


def _run(a) -> int:
    doc = json.loads(pathlib.Path(a.job).read_text())
    root = doc.pop("_blob_root", None)
    tool_opts = []
    if a.ncu:
        tool_opts.append({"name": "ncu",
                          "options": tools.ncu_request(a.set, a.metrics, a.baseline)})
    if a.sanitizer:
        tool_opts.append({"name": "compute-sanitizer", "options": {"tool": a.sanitizer}})
    if not tool_opts:
        print("run: give --ncu and/or --sanitizer TOOL", file=sys.stderr)
        return 2
    doc["tools"] = tool_opts
    job = Job.from_json(doc)
    job.blob_root = root
    # this machine's GPU `device`, as a board of type cuda: the tools start runjob for it
    board = BoardSpec(name=f"cuda{a.device}", type="cuda", target=job.target,
                      options={"ordinal": a.device})
    work = pathlib.Path(a.workdir)
    code = 0
    for t in tool_opts:
        tool = tools.NcuTool() if t["name"] == "ncu" else tools.SanitizerTool()
        why = tool.available(board)
        if why:
            print(f"{t['name']}: {why}", file=sys.stderr)
            return 2
        wd = work / t["name"]
        wd.mkdir(parents=True, exist_ok=True)
        try:
            r = tool.run(job, wd, board)
        except tools.ToolError as e:
            print(f"{t['name']}: {e}", file=sys.stderr)
            return 2
        if t["name"] == "ncu":
            print(format_summary(r.summary))
        else:
            print(r.summary["summary"] + f" -> {r.verdict}")
            for f in r.findings:
                print(f"  {f.severity}: {f.kind} at {f.where}: {f.message}")
            code = max(code, 1 if r.verdict == "error" else 0)
        (wd / "tool_result.json").write_text(json.dumps(r.to_json(), indent=1))
    return code


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["profile"]:  # the project's own command line: parsed by tirxh's config
        return int(profile_main(argv[1:]))
    ap = argparse.ArgumentParser(prog="python -m tirxh_ncu_profile",
                                 description="Nsight Compute / compute-sanitizer for tirxh")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("summarize", help="parse ncu CSV exports into the summary table")
    p.add_argument("--details", required=True)
    p.add_argument("--source")
    p.add_argument("--sass", help="nvdisasm -c -g text of the profiled cubin")
    p.add_argument("--cubin", help="the profiled cubin (disassembled with nvdisasm)")
    p.add_argument("--entry")
    p.add_argument("--json")
    p = sub.add_parser("sanitizer", help="parse compute-sanitizer output into findings")
    p.add_argument("log")
    p.add_argument("--tool", required=True, choices=sanitizer.TOOLS)
    p.add_argument("--block", help="launch block, e.g. 256,1,1 (for warp/lane of a finding)")
    p.add_argument("--json")
    p = sub.add_parser("run", help="run a KCoral JOB.json under ncu/compute-sanitizer here")
    p.add_argument("job")
    p.add_argument("--ncu", action="store_true")
    p.add_argument("--set", default="basic", choices=("basic", "full"))
    p.add_argument("--metrics")
    p.add_argument("--baseline", help="--ncu: profile this baseline of the job instead")
    p.add_argument("--sanitizer", choices=sanitizer.TOOLS)
    p.add_argument("--device", type=int, default=0, help="the GPU's ordinal (default 0)")
    p.add_argument("--workdir", default="profile_out")
    a = ap.parse_args(argv)
    try:
        return {"summarize": _summarize, "sanitizer": _sanitizer, "run": _run}[a.cmd](a)
    except (ncu_csv.NcuParseError, sanitizer.SanitizerParseError, OSError, ValueError) as e:
        print(f"tirxh_ncu_profile {a.cmd}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
