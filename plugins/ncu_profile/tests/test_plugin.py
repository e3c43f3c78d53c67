"""The tirxh side: hooks validate against the hookspecs, options parse, and
``tirxh_profile_item`` turns a KCoral result into a report (a fake client stands in for KCoral;
the zoo's vadd is compiled for real, so hot spots map through its real line table)."""

import argparse
import importlib.util
import pathlib
import types

import pytest

from ncu_fakes import FakeClient
from tirxh.api import Parser
from tirxh.testing import check_plugin
from tirxh_ncu_profile import plugin

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_hooks_match_specs():
    pm = check_plugin(plugin, "ncu_profile")
    assert pm.hook.tirxh_profile_item.get_hookimpls()


def _config(argv, ini=None):
    parser = Parser()
    plugin.tirxh_addoption(parser)
    ap = argparse.ArgumentParser()
    for names, kw in parser.options:
        ap.add_argument(*names, **kw)
    ns = ap.parse_args(argv)
    return types.SimpleNamespace(getoption=lambda n, d=None: getattr(ns, n, d),
                                 getini=lambda s, k: (ini or {}).get(k), stash={})


def test_options():
    req = plugin.request_from_config(_config(["--ncu", "--ncu-set", "full", "--ncu-metrics",
                                              "a.sum,b.sum", "--sanitizer", "racecheck"]))
    assert req == {"ncu": {"set": "full", "metrics": ["a.sum", "b.sum"]},
                   "sanitizer": "racecheck"}
    assert plugin.request_from_config(_config([])) == {"ncu": None, "sanitizer": None}
    with pytest.raises(SystemExit):
        _config(["--sanitizer", "leakcheck"])


@pytest.fixture
def vadd_item():
    spec = importlib.util.spec_from_file_location("zoo_vadd", ROOT / "zoo/kernels/vadd.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    case = next(c for c in mod.SUITE.cases if c.name == "n4096")
    item = types.SimpleNamespace(name="zoo/kernels/vadd.py::vadd[n4096]@sm_90a",
                                 suite=mod.SUITE, case=case, kernel=mod.vadd)
    return item, mod.vadd.compile("sm_90a")


def test_profile_item_ncu_and_sanitizer(monkeypatch, tmp_path, vadd_item, read):
    from tirxh_ncu_profile.sanitizer import parse
    from tirxh_ncu_profile.tools import summarize_exports
    item, ck = vadd_item
    summary = summarize_exports(read("ncu_vadd_basic_details.csv"),
                                read("ncu_vadd_source_sass.csv"), entry="vadd")
    board_coverage = dict(summary["hotspot_coverage"])
    findings = [f.to_json() for f in parse(read("memcheck_oob.txt"), "memcheck").findings]
    client = FakeClient({})
    client.tools_result = {
        "ncu": {"status": "ok", "summary": summary,
                "artifacts": {"profile.ncu-rep": client.put_blob(b"NVRP")}},
        "compute-sanitizer": {"status": "ok", "verdict": "error", "findings": findings,
                              "summary": {"tool": "memcheck", "summary": "2 findings",
                                          "error_summary": 3}, "artifacts": {}}}
    monkeypatch.setattr(plugin, "client_for", lambda config: client)
    config = _config(["--ncu", "--sanitizer", "memcheck"])
    reps = plugin.tirxh_profile_item(item=item, compiled=ck, config=config,
                                     request={"out": tmp_path})
    ncu, san = reps
    sent = client.docs[0]
    assert [t["name"] for t in sent["tools"]] == ["ncu", "compute-sanitizer"]
    assert sent["timing"]["enabled"] is False
    # the board could not map (no cubin there); the client re-maps through the compiled
    # kernel's own line table, which points at zoo/kernels/vadd.py
    from tirxh_ncu_profile.source_map import line_table, map_hotspots
    assert board_coverage["mapped"] == 0
    table = line_table(ck.sass)
    assert {f for f, _ in table.values()} == {str(ROOT / "zoo/kernels/vadd.py")}
    assert ncu.summary["hotspot_coverage"] == map_hotspots(ncu.summary["sass_samples"], table)[1]
    assert ncu.summary["hotspot_coverage"]["mapped"] > 0
    spots = map_hotspots(ncu.summary["sass_samples"], table, plugin.HOTSPOTS_KEPT)[0]
    assert ncu.summary["hotspots"] == [h.__dict__ for h in spots]
    assert len(spots) > 10 or len(spots) == len({table[r["address"]] for r in
                                                 ncu.summary["sass_samples"] if r["samples"]})
    assert "ncu profile of vadd" in ncu.text
    assert (tmp_path / plugin._safe(item.name) / "profile.ncu-rep").read_bytes() == b"NVRP"
    assert san.verdict == "error" and san.analysis.findings[0].kind == "memory.out-of-bounds"
    assert "memory.out-of-bounds at" in san.text
    assert san.to_json()["analysis"]["verdict"] == "error"


def test_profile_item_not_requested(vadd_item):
    item, ck = vadd_item
    assert plugin.tirxh_profile_item(item=item, compiled=ck, config=_config([]),
                                     request={}) is None


def test_unavailable_tool_is_an_error_report(monkeypatch, tmp_path, vadd_item):
    item, ck = vadd_item
    client = FakeClient({"ncu": {"status": "unavailable",
                                 "reason": "ncu (Nsight Compute CLI) not found on this board"}})
    monkeypatch.setattr(plugin, "client_for", lambda config: client)
    rep = plugin.tirxh_profile_item(item=item, compiled=ck, config=_config(["--ncu"]),
                                    request={"out": tmp_path})
    assert rep.verdict == "error" and "not found on this board" in rep.text


def test_refused_job_is_an_error_report(monkeypatch, tmp_path, vadd_item):
    item, ck = vadd_item
    client = FakeClient({}, refuse="no board for target 'sm_90a'")
    monkeypatch.setattr(plugin, "client_for", lambda config: client)
    rep = plugin.tirxh_profile_item(item=item, compiled=ck, config=_config(["--ncu"]),
                                    request={"out": tmp_path})
    assert rep.verdict == "error" and "no board for target" in rep.text


def test_profile_item_ncu_baseline(monkeypatch, tmp_path, vadd_item, read):
    """``--ncu-baseline NAME`` asks the ncu tool to profile the item's baseline NAME; a name the
    item does not declare is an error report naming the ones it does, and nothing is sent."""
    from kcoral.job import BaselineRequest
    from tirxh_ncu_profile.tools import summarize_baseline
    item, ck = vadd_item
    build = plugin.build_job

    def with_baselines(*a, **k):
        job = build(*a, **k)
        job.baselines = [BaselineRequest(name="torch.add", args={"a": "a", "b": "b",
                                                                  "out": "c"})]
        return job
    monkeypatch.setattr(plugin, "build_job", with_baselines)
    client = FakeClient({"ncu": {"status": "ok", "artifacts": {}, "summary": summarize_baseline(
        read("ncu_vadd_basic_details.csv"), "torch.add")}})
    monkeypatch.setattr(plugin, "client_for", lambda config: client)
    rep = plugin.tirxh_profile_item(item=item, compiled=ck, request={"out": tmp_path},
                                    config=_config(["--ncu", "--ncu-baseline", "torch.mm"]))
    assert rep.verdict == "error" and not client.docs
    assert "--ncu-baseline 'torch.mm': item" in rep.text and "['torch.add']" in rep.text
    assert plugin.request_from_config(_config(["--ncu", "--ncu-baseline", "torch.add"]))[
        "ncu"] == {"set": "basic", "metrics": [], "baseline": "torch.add"}
    rep = plugin.tirxh_profile_item(item=item, compiled=ck, request={"out": tmp_path},
                                    config=_config(["--ncu", "--ncu-baseline", "torch.add"]))
    assert client.docs[0]["tools"][0]["options"]["baseline"] == "torch.add"
    assert rep.verdict is None and rep.summary["kernels"][0]["kernel"] == "vadd"
    assert rep.text.startswith("ncu profile of baseline torch.add: 1 launch(es)")
