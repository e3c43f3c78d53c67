"""``--report-log FILE``: every report event as one JSON object per line (JSON lines).

The log is the report stream itself, so a consumer (CI, an agent) can rebuild any other report
from it with `tirxh.core.reports.from_json`. Lines are flushed as they are written, so a run that
is killed leaves a readable prefix.
"""

from __future__ import annotations

import json
from pathlib import Path

from tirxh.core.pluginmanager import hookimpl


@hookimpl
def tirxh_addoption(parser):
    parser.addoption("--report-log", metavar="FILE", default=None,
                     help="write the report events as JSON lines to FILE")


@hookimpl
def tirxh_configure(config):
    path = config.getoption("report_log")
    if path and not config.worker:  # a worker of -n would truncate the main process's log
        config.pm.register(ReportLog(Path(path)), "report_log_writer")


class ReportLog:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = path.open("w", encoding="utf-8")

    @hookimpl
    def tirxh_report(self, report, config):
        self.file.write(json.dumps(report.to_json(), default=str) + "\n")
        self.file.flush()

    @hookimpl
    def tirxh_unconfigure(self, config):
        self.file.close()
