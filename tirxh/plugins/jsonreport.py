"""``--json``: one JSON document on stdout at the end of a run (schema ``tirxh.report/1``).

The document gathers the run's events: the session facts, failed collections, every item report
and the summary counts. Its keys are documented in docs/CLI.md; a key is only ever added within a
schema version.
"""

from __future__ import annotations

import json
import sys

from tirxh.core.pluginmanager import hookimpl
from tirxh.core.reports import SCHEMA


@hookimpl
def tirxh_configure(config):
    if config.getoption("json") and config.command in ("check", "bench", "build") and \
            not config.worker:  # a worker of -n: the main process reports
        config.pm.register(JsonReport(config), "jsonreport_writer")


class JsonReport:
    def __init__(self, config):
        self.config = config
        self.doc = {"schema": SCHEMA, "command": config.command}
        self.items: list = []
        self.collect_errors: list = []
        self.collected: list = []

    @hookimpl
    def tirxh_report(self, report, config):
        ev = report.event
        if ev == "session_start":
            d = report.to_json()
            for k in ("rootdir", "configfile", "tirxh_version", "python", "targets"):
                self.doc[k] = d[k]
            self.doc["plugins"] = [{k: p[k] for k in ("name", "distribution", "version")}
                                   for p in d["plugins"]]
        elif ev == "collect_report":
            if report.outcome == "failed":
                self.collect_errors.append(report.to_json())
        elif ev == "item_report":
            self.items.append(report.to_json())
        elif ev == "session_finish":
            self.doc["exitstatus"] = report.exitstatus
            self.doc["summary"] = report.counts
            self.doc["duration"] = report.duration
            self.doc["collected"] = self.collected
            self.doc["collect_errors"] = self.collect_errors
            self.doc["items"] = self.items
            sys.stdout.write(json.dumps(self.doc, indent=2, default=str) + "\n")
            sys.stdout.flush()

    @hookimpl
    def tirxh_collection_finish(self, session):
        self.collected = [i.nodeid for i in session.items]
