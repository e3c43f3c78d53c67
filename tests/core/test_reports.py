"""Every report format, parsed back: JSON lines, JUnit XML, SARIF 2.1.0, and the event schema."""

import json
import xml.etree.ElementTree as ET

import pytest

from tirxh.core import reports

from .pytester import BAD, SCALE, VADD

FINDINGS = '''
from tirxh.core.findings import AnalyzerResult, Finding, SourceRef


def tirxh_check_item(item, compiled):
    if item.kernel.name != "scale":
        return AnalyzerResult("racey", "clean")
    f = item.kernel.loc.file
    return AnalyzerResult("racey", "error", [Finding(
        "race.shared.write-read", "write and read of out[tid] are unordered",
        where=SourceRef(f, 6, "write"), related=[SourceRef(f, 5, "read")],
        warps=[0, 1], witness=["w0 writes", "w1 reads"])], summary="1 race")
'''


@pytest.fixture
def run_all(tirxh):
    tirxh.project(vadd=VADD, scale=SCALE, bad=BAD, broken="raise ImportError('nope')\n")
    tirxh.write("tirxconf.py", FINDINGS)
    r = tirxh.run("check", "--report-log", "out/log.jsonl", "--junitxml", "out/junit.xml",
                  "--sarif", "out/findings.sarif")
    assert r.ret == 1, r
    return tirxh.path / "out"


def test_report_log_round_trips(run_all):
    lines = (run_all / "log.jsonl").read_text().splitlines()
    events = [reports.from_json(json.loads(ln)) for ln in lines]
    kinds = [e.event for e in events]
    assert kinds[0] == "session_start" and kinds[-1] == "session_finish"
    assert kinds.count("collect_report") == 4 and kinds.count("item_report") == 4
    for ln, ev in zip(lines, events):
        assert ev.to_json() == json.loads(ln)
    finish = events[-1]
    assert finish.exitstatus == 1
    assert finish.counts["passed"] == 2 and finish.counts["failed"] == 2
    assert finish.counts["collection_errors"] == 1
    scale = next(e for e in events if e.event == "item_report" and e.kernel == "scale")
    assert scale.results()[0]["findings"][0]["kind"] == "race.shared.write-read"


def test_report_schema_is_checked():
    with pytest.raises(ValueError, match="report schema 'tirxh.report/0'"):
        reports.from_json({"schema": "tirxh.report/0", "event": "session_finish"})
    with pytest.raises(ValueError, match="unknown report event 'x'"):
        reports.from_json({"schema": reports.SCHEMA, "event": "x"})


def test_junit_xml(run_all):
    root = ET.parse(run_all / "junit.xml").getroot()
    suite = root.find("testsuite")
    assert suite.get("name") == "tirxh.check"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("5", "2", "1")
    cases = {(c.get("classname"), c.get("name")): c for c in suite.iter("testcase")}
    assert set(cases) == {("kernels.broken", "[collect]"), ("kernels.bad", "broken@sm_90a"),
                          ("kernels.scale", "scale@sm_90a"),
                          ("kernels.vadd", "vadd[small]@sm_90a"),
                          ("kernels.vadd", "vadd[big]@sm_90a")}
    assert "ImportError: nope" in cases[("kernels.broken", "[collect]")].find("error").text
    bad = cases[("kernels.bad", "broken@sm_90a")]
    assert bad.get("file") == "kernels/bad.py" and bad.get("line") == "4"
    assert bad.find("failure").get("message").startswith("TraceError: ")
    scale = cases[("kernels.scale", "scale@sm_90a")]
    assert "race.shared.write-read" in scale.find("failure").text
    props = {p.get("name"): p.get("value") for p in scale.iter("property")}
    assert props["analyzer.racey"] == "error" and props["target"] == "sm_90a"
    assert cases[("kernels.vadd", "vadd[big]@sm_90a")].find("failure") is None


def test_sarif(run_all):
    doc = json.loads((run_all / "findings.sarif").read_text())
    assert doc["version"] == "2.1.0"
    run = doc["runs"][0]
    assert run["tool"]["driver"]["name"] == "tirxh"
    rules = {r["id"] for r in run["tool"]["driver"]["rules"]}
    assert rules == {"race.shared.write-read", "tirxh.compile-error"}
    by_rule = {r["ruleId"]: r for r in run["results"]}
    race = by_rule["race.shared.write-read"]
    assert race["level"] == "error"
    loc = race["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "kernels/scale.py", "uriBaseId": "%SRCROOT%"}
    assert loc["region"]["startLine"] == 6
    assert race["relatedLocations"][0]["physicalLocation"]["region"]["startLine"] == 5
    assert race["properties"]["nodeid"] == "kernels/scale.py::scale@sm_90a"
    assert race["properties"]["warps"] == [0, 1]
    comp = by_rule["tirxh.compile-error"]
    assert comp["locations"][0]["physicalLocation"]["region"]["startLine"] == 7
    assert comp["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == \
        "kernels/bad.py"
    assert run["invocations"][0]["exitCode"] == 1
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"].startswith("file:///")


def test_blocked_reporter_drops_its_option(tirxh):
    tirxh.project(vadd=VADD)
    r = tirxh.run("check", "-p", "no:junitxml", "--junitxml", "x.xml")
    assert r.ret == 4 and "unrecognized arguments: --junitxml" in r.stderr


def test_junit_marks_compiled_items_as_skipped_compiled(tirxh):
    tirxh.project(vadd=VADD)  # no analyzer: both items are compiled only
    r = tirxh.run("check", "--junitxml", "j.xml")
    assert r.ret == 0, r
    root = ET.parse(tirxh.path / "j.xml").getroot()
    skipped = root.findall(".//testcase/skipped")
    assert [s.get("type") for s in skipped] == ["compiled", "compiled"]
    assert root.find("testsuite").get("skipped") == "2"
