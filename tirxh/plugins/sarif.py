"""``--sarif FILE``: analyzer findings (and compile errors) as SARIF 2.1.0.

Code-scanning tools (GitHub, IDEs) show SARIF results at their source line. Each `Finding` becomes
a result: ``ruleId`` is the finding's kind, ``level`` maps severity (``error`` -> error,
``review`` -> warning, ``incomplete`` -> note), the location is the finding's file:line relative to
the project root (``%SRCROOT%``), related lines become ``relatedLocations``, and the item's node
id, analyzer, warps, lanes and witness travel in ``properties``. A compile error is a result with
rule ``tirxh.compile-error`` at the user's line.
"""

from __future__ import annotations

import json
from pathlib import Path

from tirxh import __version__
from tirxh.core.pluginmanager import hookimpl

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {"error": "error", "review": "warning", "incomplete": "note"}


@hookimpl
def tirxh_addoption(parser):
    parser.addoption("--sarif", metavar="FILE", default=None,
                     help="write analyzer findings as SARIF 2.1.0 to FILE")


@hookimpl
def tirxh_configure(config):
    path = config.getoption("sarif")
    if path and not config.worker:  # a worker of -n: the main process reports
        config.pm.register(SarifReport(Path(path), config), "sarif_writer")


class SarifReport:
    def __init__(self, path: Path, config):
        self.path = path
        self.root = config.rootdir
        self.results: list = []
        self.rules: dict = {}

    def _uri(self, file: str) -> str:
        p = Path(file)
        try:
            return p.resolve().relative_to(self.root).as_posix()
        except (ValueError, OSError):
            return p.as_posix()

    def _location(self, file, line, label: str = "") -> dict:
        loc = {"physicalLocation": {
            "artifactLocation": {"uri": self._uri(file), "uriBaseId": "%SRCROOT%"},
            "region": {"startLine": max(int(line or 1), 1)}}}
        if label:
            loc["message"] = {"text": label}
        return loc

    def _rule(self, rule_id: str, text: str) -> None:
        self.rules.setdefault(rule_id, {"id": rule_id, "shortDescription": {"text": text}})

    @hookimpl
    def tirxh_report(self, report, config):
        ev = report.event
        if ev == "item_report":
            self._item(report)
        elif ev == "session_finish":
            self._write(report)

    def _item(self, rep) -> None:
        for phase in rep.phases:
            if phase.phase == "compile" and phase.outcome == "failed":
                self._rule("tirxh.compile-error", "the kernel does not trace or compile")
                file, line = phase.location or rep.location
                self.results.append({
                    "ruleId": "tirxh.compile-error", "level": "error",
                    "message": {"text": phase.longrepr},
                    "locations": [self._location(file, line)],
                    "properties": {"nodeid": rep.nodeid, "target": rep.target}})
            for res in phase.results:
                for f in res["findings"]:
                    self._rule(f["kind"], f["kind"])
                    where = f.get("where") or {"file": rep.location[0],
                                               "line": rep.location[1], "label": ""}
                    r = {"ruleId": f["kind"], "level": _LEVEL.get(f["severity"], "warning"),
                         "message": {"text": f["message"]},
                         "locations": [self._location(where["file"], where["line"],
                                                      where.get("label", ""))],
                         "properties": {"nodeid": rep.nodeid, "analyzer": res["analyzer"],
                                        "verdict": res["verdict"], "target": rep.target}}
                    if f.get("related"):
                        r["relatedLocations"] = [
                            dict(self._location(x["file"], x["line"], x.get("label", "")),
                                 id=i) for i, x in enumerate(f["related"])]
                    for k in ("warps", "lanes", "addresses", "witness"):
                        if f.get(k):
                            r["properties"][k] = f[k]
                    self.results.append(r)

    def _write(self, finish) -> None:
        doc = {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [{
            "tool": {"driver": {"name": "tirxh", "version": __version__,
                                "rules": list(self.rules.values())}},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": self.root.as_uri() + "/"}},
            "invocations": [{"executionSuccessful": finish.exitstatus in (0, 1, 5),
                             "exitCode": finish.exitstatus}],
            "results": self.results}]}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
