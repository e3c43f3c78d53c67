"""Parse compute-sanitizer's text output into `tirxh.core.findings.Finding` objects.

compute-sanitizer prints every report behind a prefix (``=========`` unless ``--prefix``): a
header line (``Invalid __global__ write of size 4 bytes``, ``Error: Race reported between ...``,
``Barrier error detected. Divergent thread(s) in warp``, ``Uninitialized __global__ memory read
...``) followed by indented detail lines: ``at <pc/function> in <file>:<line>[:<function>]``,
``by thread (x,y,z) in block (x,y,z)``, ``Access to 0x... is out of bounds`` (as recorded on an
H200, 2026-11-30; ``Address 0x...`` and ``Access at 0x...`` in other versions). Both location styles
of recent versions are read (``at 0x70 in k.py:6:vadd`` and ``at vadd+0x70 in k.py:6``). When
the kernel has line info (tirxh always assembles with ``-lineinfo``) the file and line are the
kernel's Python source.

Finding kinds are sync_check's (plugins/sync_check, ``report.KINDS``) so the two compare
directly: ``race.read-write``, ``race.write-write``, ``barrier.divergent``,
``memory.out-of-bounds``; plus ``memory.misaligned``, ``memory.uninitialized`` (initcheck) and
``memory.invalid`` for what sync_check has no name for. The state space, the access and the
hazard type (RAW/WAR/WAW) are in ``data``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tirxh.api import AnalyzerResult, Finding, SourceRef, worst

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")

_LOC = re.compile(r"(?P<file>[^\s:()]+\.[A-Za-z0-9_]+):(?P<line>\d+)")
_PC = re.compile(r"0x[0-9a-fA-F]+")
_FUNC_PLUS = re.compile(r"\bat (?P<func>[A-Za-z_][\w:<>,]*)(?:\([^)]*\))?\+(?P<pc>0x[0-9a-fA-F]+)")
_FUNC_AFTER = re.compile(r":\d+:(?P<func>[A-Za-z_][\w:<>,]*)")
_FUNC_IN = re.compile(r"\bin (?P<func>[A-Za-z_][\w:<>,]*)\(")
_THREAD = re.compile(r"\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)")
_MEM = re.compile(r"^Invalid (?P<space>__\w+__) (?P<rw>read|write|atomic) of size (?P<size>\d+)")
_INIT = re.compile(r"^Uninitialized (?P<space>__\w+__) memory (?P<rw>read|write) of size "
                   r"(?P<size>\d+)")
_RACE = re.compile(r"^(?P<sev>Error|Warning): Race reported between (?P<a>Read|Write) access "
                   r"at (?P<loc>.*)$")
_HAZARD = re.compile(r"^(?P<sev>Error|Warning|WARN|ERROR)\s*:?(?:\([^)]*\))?\s*Potential "
                     r"(?P<kind>RAW|WAR|WAW) hazard detected at (?P<space>__\w+__) "
                     r"(?P<addr>0x[0-9a-fA-F]+)")
_BARRIER = re.compile(r"^Barrier error detected\.?\s*(?P<what>.*)$")
# anchored: with --print-limit the tool also prints "ERROR SUMMARY: 28 errors were not printed"
# (seen on the H200), which is not the total
_SUMMARY = re.compile(r"^ERROR SUMMARY: (?P<n>\d+) errors?\s*$")
_NOT_PRINTED = re.compile(r"^ERROR SUMMARY: \d+ errors? (were|was) not printed")
_RACE_SUMMARY = re.compile(r"^RACECHECK SUMMARY: (?P<n>\d+) hazards? displayed "
                           r"\((?P<e>\d+) errors?, (?P<w>\d+) warnings?\)")
_DETAIL = re.compile(r"^(at |by thread|Address |Access (?:at|to) |and |(Read|Write) Thread|"
                     r"Current Value|Saved host|Host Frame|Device Frame)")
# the line that says what was wrong with the address, in the three spellings seen:
# "Address 0x.. is out of bounds" (older), "Access at 0x.. is ..." and, recorded on the H200
# with the CUDA toolkit there (2026-11-30), "Access to 0x.. is out of bounds"
_ACCESS = re.compile(r"^(?:Address|Access at|Access to) (0x[0-9a-fA-F]+)(?: is (.*))?$")
_HAZ_KIND = {"RAW": "race.read-write", "WAR": "race.read-write", "WAW": "race.write-write"}


class SanitizerParseError(ValueError):
    """Output that is not compute-sanitizer's (names the source)."""


@dataclass
class SanitizerReport:
    tool: str
    findings: list = field(default_factory=list)
    error_summary: "int | None" = None   # the tool's own count (None: it never printed one)
    notes: list = field(default_factory=list)

    @property
    def verdict(self) -> str:
        if self.error_summary is None:
            return "incomplete"  # the run did not finish; silence is not "clean"
        v = worst(*(f.severity for f in self.findings))
        if self.error_summary and v == "clean":
            v = "error"  # errors counted that we did not parse (print limit, new message)
        return v

    def to_result(self) -> AnalyzerResult:
        n = len(self.findings)
        summary = (f"compute-sanitizer {self.tool}: {n} finding(s)" +
                   (f", tool counted {self.error_summary} error(s)"
                    if self.error_summary is not None else ", run did not finish"))
        return AnalyzerResult(analyzer=f"sanitizer.{self.tool}", verdict=self.verdict,
                              findings=self.findings, summary=summary,
                              stats={"error_summary": self.error_summary,
                                     "notes": self.notes})


def _records(text: str, prefix: str) -> "tuple[list, list]":
    """Group prefixed lines into records (header + indented details); also the summary lines."""
    records, summaries, cur = [], [], None
    for raw in text.splitlines():
        if not raw.startswith(prefix):
            continue
        body = raw[len(prefix):]
        if not body.strip():
            cur = None
            continue
        stripped = body.strip()
        # detail lines are indented, but some versions indent by one space only: known detail
        # openings count as details whatever their indentation
        indented = len(body) - len(body.lstrip()) >= 2
        if cur is not None and (indented or _DETAIL.match(stripped)):
            cur.append(stripped)
        elif _SUMMARY.match(stripped) or _RACE_SUMMARY.match(stripped) or \
                _NOT_PRINTED.match(stripped):
            summaries.append(stripped)
            cur = None
        else:
            cur = [stripped]
            records.append(cur)
    return records, summaries


def _where(line: str, label: str) -> "tuple[SourceRef | None, dict]":
    info = {}
    m = _FUNC_PLUS.search(line)
    if m:
        info["function"], info["pc"] = m.group("func"), m.group("pc")
    else:
        pc = _PC.search(line)
        if pc:
            info["pc"] = pc.group(0)
        f = _FUNC_AFTER.search(line) or _FUNC_IN.search(line)
        if f:
            info["function"] = f.group("func")
    loc = _LOC.search(line)
    if loc is None:
        return None, info
    return SourceRef(loc.group("file"), int(loc.group("line")), label), info


def _threads(details: list, block_dim) -> dict:
    out = {}
    for d in details:
        if d.startswith("by thread"):
            t = _THREAD.findall(d)
            if t:
                out["thread"] = [int(x) for x in t[0]]
            if len(t) > 1:
                out["block"] = [int(x) for x in t[1]]
    if "thread" in out and block_dim:
        x, y, z = out["thread"]
        lin = x + block_dim[0] * (y + block_dim[1] * z)
        out["warp"], out["lane"] = lin // 32, lin % 32
    return out


def parse(text: str, tool: str, block_dim=None, prefix: str = "=========",
          source: str = "<compute-sanitizer output>") -> SanitizerReport:
    """Parse the output of ``compute-sanitizer --tool TOOL`` into a `SanitizerReport`.

    `block_dim` (the launch's block) turns ``by thread (x,y,z)`` into a warp and lane.
    """
    if tool not in TOOLS:
        raise ValueError(f"unknown compute-sanitizer tool {tool!r}; expected one of {TOOLS}")
    if prefix not in text:
        raise SanitizerParseError(f"{source}: no line starts with {prefix!r}; is this "
                                  "compute-sanitizer output?")
    rep = SanitizerReport(tool)
    records, summaries = _records(text, prefix)
    for s in summaries:
        m = _SUMMARY.match(s)
        if m:
            rep.error_summary = int(m.group("n"))
    for s in summaries:  # racecheck may print only its own summary line
        m = _RACE_SUMMARY.match(s)
        if m and rep.error_summary is None:
            rep.error_summary = int(m.group("e"))
    for rec in records:
        f = _finding(rec, tool, block_dim)
        if f is not None:
            rep.findings.append(f)
        elif not rec[0].startswith(("COMPUTE-SANITIZER", "Saved host backtrace", "Host Frame",
                                    "Target application", "LEAK SUMMARY")):
            rep.notes.append(rec[0])
    return rep


def _access_kind(why: str) -> str:
    """``out of bounds`` -> ``out-of-bounds`` (sync_check's kind), ``misaligned``; anything else
    becomes a slug of what the sanitizer said, so a new wording is visible, not misfiled."""
    w = why.strip().rstrip(".").lower()
    for known in ("out of bounds", "misaligned"):
        if w.startswith(known):
            return known.replace(" ", "-")
    return re.sub(r"[^a-z0-9]+", "-", w).strip("-")[:40] or "invalid"


def _finding(rec: list, tool: str, block_dim) -> "Finding | None":
    head, details = rec[0], rec[1:]
    at = next((d for d in details if d.startswith("at ")), "")
    m = _MEM.match(head) or _INIT.match(head)
    if m:
        space = m.group("space").strip("_")
        what = "uninitialized" if head.startswith("Uninitialized") else "invalid"
        addr = None
        for d in details:
            am = _ACCESS.match(d)
            if am:
                addr = am.group(1)
                if am.group(2):
                    what = _access_kind(am.group(2))
        where, info = _where(at, m.group("rw"))
        who = _threads(details, block_dim)
        return Finding(
            kind=f"memory.{what}",
            message=f"{head} (by thread {who.get('thread')} in block {who.get('block')})",
            severity="error", where=where, addresses=[addr] if addr else [],
            warps=[who["warp"]] if "warp" in who else [],
            lanes=[who["lane"]] if "lane" in who else [],
            witness=rec, data=dict(info, tool="compute-sanitizer", sanitizer=tool, space=space,
                                   access=m.group("rw"), size=int(m.group("size")), **who))
    m = _RACE.match(head)
    if m:
        first = m.group("a").lower()
        where, info = _where(head, first)
        related, seconds = [], []
        for d in details:
            dm = re.match(r"^and (Read|Write) access at (.*)$", d)
            if dm:
                r, _ = _where(dm.group(2), dm.group(1).lower())
                seconds.append(dm.group(1).lower())
                if r is not None:
                    related.append(r)
        pair = "write-write" if first == "write" and seconds and \
            all(s == "write" for s in seconds) else "read-write"
        hazards = sum(int(h) for h in re.findall(r"\[(\d+) hazards?\]", " ".join(details)))
        return Finding(
            kind=f"race.{pair}", message=head.split(": ", 1)[1],
            severity="error" if m.group("sev") == "Error" else "review", where=where,
            related=related, witness=rec,
            data=dict(info, tool="compute-sanitizer", sanitizer=tool, hazards=hazards,
                      space="shared", accesses=[first] + seconds))
    m = _HAZARD.match(head)
    if m:
        accesses = [d for d in details if re.match(r"^(Read|Write) Thread", d)]
        refs, threads = [], []
        for d in accesses:
            r, _ = _where(d, d.split()[0].lower())
            if r is not None:
                refs.append(r)
            t = _THREAD.findall(d)
            if t:
                threads.append([int(x) for x in t[0]])
        sev = "error" if m.group("sev").lower().startswith("err") else "review"
        return Finding(
            kind=_HAZ_KIND[m.group("kind")],
            message=head, severity=sev, where=refs[0] if refs else None, related=refs[1:],
            addresses=[m.group("addr")], witness=rec,
            data={"tool": "compute-sanitizer", "sanitizer": tool, "threads": threads,
                  "hazard": m.group("kind"), "space": m.group("space").strip("_")})
    m = _BARRIER.match(head)
    if m:
        what = m.group("what").lower()
        slug = "divergent" if "divergent" in what else \
            re.sub(r"[^a-z0-9]+", "-", what).strip("-") or "error"
        where, info = _where(at, "barrier")
        who = _threads(details, block_dim)
        return Finding(
            kind=f"barrier.{slug}", message=head, severity="error", where=where,
            warps=[who["warp"]] if "warp" in who else [],
            lanes=[who["lane"]] if "lane" in who else [], witness=rec,
            data=dict(info, tool="compute-sanitizer", sanitizer=tool, **who))
    if at:  # a report with a device location we do not know by name: keep it, generically
        where, info = _where(at, "")
        who = _threads(details, block_dim)
        slug = re.sub(r"[^a-z0-9]+", "-", head.lower()).strip("-")[:48]
        return Finding(kind=f"sanitizer.{tool}.{slug}", message=head, severity="error",
                       where=where, witness=rec,
                       data=dict(info, tool="compute-sanitizer", sanitizer=tool, **who))
    return None
