"""The report stream: serializable events every reporter consumes (``tirxh_report``).

A run sends, in order: one `SessionStart`, one `CollectReport` per collected file, one
`ItemReport` per item run, one `SessionFinish`. Each event serializes to a JSON object carrying
``"schema": SCHEMA`` and ``"event"``; `from_json` reads one back. The terminal summary,
``--report-log`` (JSON lines), ``--json``, ``--junitxml`` and ``--sarif`` are all plugins built on
these events, so they cannot disagree.

Schema history: ``tirxh.report/1`` — first version. A field is only ever added within a version;
renaming or removing one bumps the version.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

SCHEMA = "tirxh.report/1"

# item outcomes, worst last; "compiled": built, but nothing checked it (no analyzer applied);
# "error" is a crash in a plugin
OUTCOMES = ("passed", "skipped", "compiled", "incomplete", "failed", "error")
PHASES = ("compile", "check", "bench", "build")


@dataclass
class SessionStart:
    command: str
    rootdir: str
    configfile: "str | None"
    tirxh_version: str
    python: str
    targets: list
    plugins: list  # plugin infos (name, distribution, version, file, origin, hooks)
    time: float
    event: str = "session_start"

    def to_json(self) -> dict:
        return {"schema": SCHEMA, **asdict(self)}


@dataclass
class CollectReport:
    """One collected file: ``failed`` carries the import traceback in `longrepr`."""

    nodeid: str
    outcome: str  # passed | failed
    longrepr: str
    items: list  # node ids collected from the file
    duration: float = 0.0
    event: str = "collect_report"

    def to_json(self) -> dict:
        return {"schema": SCHEMA, **asdict(self)}


@dataclass
class PhaseReport:
    """One phase of one item.

    outcome: one of `OUTCOMES`; longrepr: the error text
    (for a compile error, the user's file:line and message); location: (file, line) of that error
    when known; results: `AnalyzerResult` JSON objects (check); data: phase-specific facts
    (compile: resources, cache_hit, timings; bench: the bench result; build: files written).
    """

    phase: str
    outcome: str
    duration: float = 0.0
    longrepr: str = ""
    location: "list | None" = None
    results: list = field(default_factory=list)
    data: dict = field(default_factory=dict)


@dataclass
class ItemReport:
    nodeid: str
    kernel: str
    case: "str | None"
    target: str
    location: list  # [file relative to rootdir, line of the kernel's def]
    outcome: str
    duration: float
    phases: list  # of PhaseReport
    event: str = "item_report"

    def to_json(self) -> dict:
        d = asdict(self)
        return {"schema": SCHEMA, **d}

    @property
    def longrepr(self) -> str:
        return "\n".join(p.longrepr for p in self.phases if p.longrepr)

    def results(self) -> list:
        """Every analyzer result (JSON objects) of the check phase."""
        return [r for p in self.phases for r in p.results]


@dataclass
class SessionFinish:
    exitstatus: int
    counts: dict  # outcome -> number, plus collected, deselected, collection_errors
    duration: float
    event: str = "session_finish"

    def to_json(self) -> dict:
        return {"schema": SCHEMA, **asdict(self)}


_EVENTS = {"session_start": SessionStart, "collect_report": CollectReport,
           "item_report": ItemReport, "session_finish": SessionFinish}


def from_json(d: dict):
    """Rebuild an event from its JSON object (the inverse of ``to_json``)."""
    if d.get("schema") != SCHEMA:
        raise ValueError(f"report schema {d.get('schema')!r} is not {SCHEMA!r}")
    cls = _EVENTS.get(d.get("event"))
    if cls is None:
        raise ValueError(f"unknown report event {d.get('event')!r}")
    d = {k: v for k, v in d.items() if k != "schema"}
    if cls is ItemReport:
        d["phases"] = [PhaseReport(**p) for p in d["phases"]]
    return cls(**d)


def worst_outcome(outcomes) -> str:
    return max(outcomes, key=OUTCOMES.index, default="passed")
