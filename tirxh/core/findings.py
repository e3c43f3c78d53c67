"""Analyzer results: verdicts and findings shared by every checker (numsim, sync_check,
compute-sanitizer parsing, third-party analyzers) and by the JSON/SARIF reports.

Verdict precedence: ``error`` > ``incomplete`` > ``review`` > ``clean``. An analyzer that cannot
model something it met returns ``incomplete`` naming it, never ``clean``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

VERDICTS = ("clean", "review", "incomplete", "error")
_RANK = {v: i for i, v in enumerate(VERDICTS)}


def worst(*verdicts: str) -> str:
    """The verdict of highest precedence (``clean`` when given none)."""
    return max(verdicts, key=_RANK.__getitem__, default="clean")


@dataclass
class SourceRef:
    """A place in the user's source: file, line, and an optional label (``write``, ``read``)."""

    file: str
    line: int
    label: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" + (f" ({self.label})" if self.label else "")


@dataclass
class Finding:
    """One problem found by an analyzer.

    kind: a stable dotted id (``race.shared.write-read``, ``mbarrier.phase-overrun``,
    ``numsim.mismatch``); severity: ``error`` (a bug), ``review`` (advisory) or ``incomplete``
    (could not model); where: the primary source line; related: other lines involved (the second
    access of a race); warps/lanes/addresses: who and what; witness: the interleaving or the pair of
    unordered events, as text lines.
    """

    kind: str
    message: str
    severity: str = "error"
    where: "SourceRef | None" = None
    related: list = field(default_factory=list)
    warps: list = field(default_factory=list)
    lanes: list = field(default_factory=list)
    addresses: list = field(default_factory=list)
    witness: list = field(default_factory=list)
    data: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "Finding":
        d = dict(d)
        if d.get("where"):
            d["where"] = SourceRef(**d["where"])
        d["related"] = [SourceRef(**r) for r in d.get("related", [])]
        return cls(**d)


@dataclass
class AnalyzerResult:
    """What one analyzer says about one item (returned from ``tirxh_check_item``)."""

    analyzer: str
    verdict: str
    findings: list = field(default_factory=list)
    summary: str = ""
    stats: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")

    def to_json(self) -> dict:
        return {"analyzer": self.analyzer, "verdict": self.verdict, "summary": self.summary,
                "stats": self.stats, "findings": [f.to_json() for f in self.findings]}
