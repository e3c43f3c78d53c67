"""``--junitxml FILE``: the run as JUnit XML for CI dashboards.

One ``<testcase>`` per item (classname: the module path dotted, name: ``kernel[case]@target``).
A failed item has ``<failure>``, an item whose plugin crashed ``<error>``, a skipped item
``<skipped>``, and an incomplete item ``<skipped type="incomplete">`` (JUnit has no verdict between
passing and failing; CI shows it as not passed, which is the honest reading). A kernel module that
failed to import is a ``<testcase name="[collect]">`` with ``<error>``.
"""

from __future__ import annotations

import platform
import xml.etree.ElementTree as ET
from pathlib import Path

from tirxh.core.pluginmanager import hookimpl


@hookimpl
def tirxh_addoption(parser):
    parser.addoption("--junitxml", metavar="FILE", default=None,
                     help="write a JUnit XML report to FILE")


@hookimpl
def tirxh_configure(config):
    path = config.getoption("junitxml")
    if path and not config.worker:  # a worker of -n: the main process reports
        config.pm.register(JUnitXml(Path(path)), "junitxml_writer")


def _classname(module_path: str) -> str:
    return module_path[:-3].replace("/", ".") if module_path.endswith(".py") else module_path


class JUnitXml:
    def __init__(self, path: Path):
        self.path = path
        self.cases: list = []
        self.stats = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        self.command = "check"

    def _case(self, classname: str, name: str, time: float, file=None, line=None):
        tc = ET.Element("testcase", classname=classname, name=name, time=f"{time:.3f}")
        if file:
            tc.set("file", str(file))
            tc.set("line", str(line))
        self.cases.append(tc)
        self.stats["tests"] += 1
        return tc

    @hookimpl
    def tirxh_report(self, report, config):
        ev = report.event
        if ev == "session_start":
            self.command = report.command
        elif ev == "collect_report" and report.outcome == "failed":
            tc = self._case(_classname(report.nodeid), "[collect]", report.duration,
                            report.nodeid, 1)
            el = ET.SubElement(tc, "error", message=f"error collecting {report.nodeid}")
            el.text = report.longrepr
            self.stats["errors"] += 1
        elif ev == "item_report":
            module, _, name = report.nodeid.partition("::")
            tc = self._case(_classname(module), name, report.duration, *report.location)
            props = ET.SubElement(tc, "properties")
            for k, v in (("kernel", report.kernel), ("case", report.case or ""),
                         ("target", report.target), ("outcome", report.outcome)):
                ET.SubElement(props, "property", name=k, value=str(v))
            for r in report.results():
                ET.SubElement(props, "property", name=f"analyzer.{r['analyzer']}",
                              value=r["verdict"])
            first = (report.longrepr.splitlines() or [report.outcome])[0][:200]
            if report.outcome == "failed":
                el = ET.SubElement(tc, "failure", message=first)
                el.text = report.longrepr
                self.stats["failures"] += 1
            elif report.outcome == "error":
                el = ET.SubElement(tc, "error", message=first)
                el.text = report.longrepr
                self.stats["errors"] += 1
            elif report.outcome in ("skipped", "incomplete", "compiled"):
                el = ET.SubElement(tc, "skipped", message=first)
                if report.outcome != "skipped":
                    el.set("type", report.outcome)
                el.text = report.longrepr
                self.stats["skipped"] += 1
        elif ev == "session_finish":
            self._write(report.duration)

    def _write(self, duration: float) -> None:
        root = ET.Element("testsuites")
        suite = ET.SubElement(root, "testsuite", name=f"tirxh.{self.command}",
                              hostname=platform.node(), time=f"{duration:.3f}",
                              **{k: str(v) for k, v in self.stats.items()})
        suite.extend(self.cases)
        ET.indent(root)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        ET.ElementTree(root).write(self.path, encoding="utf-8", xml_declaration=True)
