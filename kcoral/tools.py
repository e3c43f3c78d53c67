"""The tool interface: profilers and checkers that KCoral runs around a job (ncu, compute-sanitizer,
iket, ...).

A tool is an object registered by a plugin through ``kcoral_register_tools(registry)``. The daemon
runs a job's tools after its measurement, on the same board, one at a time; a tool usually starts
``python -m kcoral.runjob JOB.json --out DIR`` as the target process of a profiler, so it never
needs the daemon's own process. Tools return artifacts as files; the daemon stores them as
content-addressed blobs and returns their digests with the result.

The interface (duck-typed; `Tool` is a convenience base class)::

    class Ncu(Tool):
        name = "ncu"
        def available(self, board) -> str | None:   # None when usable, else the reason why not
            ...
        def run(self, job, workdir) -> ToolResult:  # job: kcoral.job.Job, workdir: pathlib.Path
            job.write_json(workdir / "job.json")    # the JOB.json that kcoral.runjob executes
            ...
            return ToolResult(artifacts={"report.ncu-rep": path}, summary={...}, findings=[...])

A job names tools with options: ``"tools": [{"name": "ncu", "options": {"sections": [...]}}]``;
``job.tool_options(name)`` gives a tool its options.
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass, field


@dataclass
class ToolResult:
    """What a tool returns.

    artifacts: name -> path of a file the tool wrote under its workdir (stored as blobs);
    summary: JSON-serializable facts for the terminal and JSON reports (e.g. achieved occupancy);
    findings: `tirxh.core.findings.Finding` objects or plain dicts with the same fields;
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

    def available(self, board) -> "str | None":
        """None when this tool can run on `board` (a `kcoral.boards.BoardInfo`), else the reason
        (e.g. ``"ncu not found on PATH"``); a job naming an unavailable tool gets that reason
        back in its result instead of a silent skip."""
        return None

    def run(self, job, workdir: pathlib.Path) -> ToolResult:  # pragma: no cover - interface
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
