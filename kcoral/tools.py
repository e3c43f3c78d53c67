"""The tool interface: profilers and checkers that KCoral runs around a job (ncu, compute-sanitizer,
iket, ...).

A tool is an object registered by a plugin through ``kcoral_register_tools(registry)``. The worker
runs a job's tools after its measurement, on the same board, one at a time, each in its own
directory under the job's directory (created by the daemon, removed once the artifacts are
stored as content-addressed blobs). A tool usually starts ``python -m kcoral.runjob JOB.json
--out DIR`` as the target process of a profiler; `runjob_command` builds that command line for
the board the tool runs on, so neither a client nor a tool chooses a path outside the workdir.

The interface (duck-typed; `Tool` is a convenience base class)::

    @dataclass
    class NcuOptions(Model):                        # kcoral.schema: typed, validated options
        set: str = spec(Str(choices=("basic", "full")), "basic")

    class Ncu(Tool):
        name = "ncu"
        options = NcuOptions                        # None: the tool takes no options
        def available(self, board) -> str | None:   # None when usable, else the reason why not
            ...
        def run(self, job, workdir, board) -> ToolResult:
            opts = job.tool_options(self.name, self.options)   # a validated NcuOptions
            job.write_json(workdir / "job.json")    # the JOB.json that kcoral.runjob executes
            cmd = runjob_command(workdir / "job.json", workdir / "out", board)
            ...
            return ToolResult(artifacts={"report.ncu-rep": path}, summary={...}, findings=[...])

A job names tools with options: ``"tools": [{"name": "ncu", "options": {"set": "full"}}]``; the
daemon refuses a job that names a tool not installed, or options the tool's model refuses
(INVALID_ARGUMENT naming ``tools[0].options.set``), before the job is queued.
"""

from __future__ import annotations

import pathlib
import sys
from dataclasses import dataclass, field

from .schema import Model


def runjob_command(job_json, out_dir, board, save_outputs: bool = False,
                   iterations: int = 1, baseline: "str | None" = None) -> list:
    """The argv of ``python -m kcoral.runjob`` on `board` (a `kcoral.boards.BoardSpec`): the
    job file and the output directory are the tool's, under its workdir; the board type and
    device ordinal are the board's; `baseline` (a name the job's schema validated, one of the
    job's baselines) runs that baseline instead of the kernel."""
    cmd = [sys.executable, "-m", "kcoral.runjob", str(job_json), "--out", str(out_dir),
           "--board-type", board.type, "--device", str(int(board.options.get("ordinal", 0))),
           "--iterations", str(int(iterations))]
    return cmd + (["--save-outputs"] if save_outputs else []) + \
        (["--baseline", baseline] if baseline else [])


def inside(workdir: pathlib.Path, path) -> pathlib.Path:
    """`path` resolved, if it lies under `workdir`; ValueError otherwise (an artifact outside
    the tool's directory is never read back)."""
    root = pathlib.Path(workdir).resolve()
    p = pathlib.Path(path).resolve()
    if p != root and root not in p.parents:
        raise ValueError(f"{str(path)!r} is outside the tool's directory {str(root)!r}")
    return p


@dataclass
class ToolResult:
    """What a tool returns.

    artifacts: name -> path of a file the tool wrote under its workdir (stored as blobs);
    summary: JSON-serializable facts for the terminal and JSON reports (e.g. achieved occupancy);
    findings: objects with ``to_json()`` (tirxh's ``Finding``) or plain dicts with the same fields;
    verdict: ``clean``/``review``/``incomplete``/``error`` in the findings sense, or None when the
    tool only measures.
    """

    artifacts: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    findings: list = field(default_factory=list)
    verdict: "str | None" = None

    def to_json(self) -> dict:
        fs = [f.to_json() if hasattr(f, "to_json") else dict(f) for f in self.findings]
        return {"artifacts": {k: str(v) for k, v in self.artifacts.items()},
                "summary": self.summary, "findings": fs, "verdict": self.verdict}


class Tool:
    """Base class for tools (optional: any object with `name`, `available` and `run` works)."""

    name: str = ""
    options = None  # a kcoral.schema.Model subclass, or None: the tool takes no options

    def available(self, board) -> "str | None":
        """None when this tool can run on `board` (a `kcoral.boards.BoardInfo`), else the reason
        (e.g. ``"ncu not found on PATH"``); a job naming an unavailable tool gets that reason
        back in its result instead of a silent skip."""
        return None

    def run(self, job, workdir: pathlib.Path, board) -> ToolResult:  # pragma: no cover
        raise NotImplementedError


class ToolRegistry:
    """Tools by name, filled through ``kcoral_register_tools(registry)``."""

    def __init__(self):
        self._tools: dict[str, object] = {}
        self._owners: dict[str, str] = {}

    def add(self, tool, owner: str = "?") -> None:
        name = getattr(tool, "name", "")
        for attr in ("available", "run"):
            if not callable(getattr(tool, attr, None)):
                raise TypeError(f"tool {name or tool!r} from {owner!r} has no callable {attr!r}")
        if not name:
            raise TypeError(f"tool {tool!r} from {owner!r} has no name")
        model = getattr(tool, "options", None)
        if model is not None and not (isinstance(model, type) and issubclass(model, Model)):
            raise TypeError(f"tool {name!r} from {owner!r}: options must be a "
                            f"kcoral.schema.Model subclass or None, got {model!r}")
        if name in self._tools:
            raise ValueError(f"tool {name!r} registered twice: by {self._owners[name]!r} and "
                             f"{owner!r}")
        self._tools[name] = tool
        self._owners[name] = owner

    def get(self, name: str):
        try:
            return self._tools[name]
        except KeyError:
            raise KeyError(f"unknown tool {name!r}; known: {sorted(self._tools)}") from None

    def names(self) -> list:
        return sorted(self._tools)

    def __contains__(self, name) -> bool:
        return name in self._tools
