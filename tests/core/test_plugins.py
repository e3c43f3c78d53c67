"""Plugin loading, blocking, ordering, check_pending, analyzers and the bench delegation."""

import json

import pytest

from tirxh.core.pluginmanager import (
    DEFAULT_PLUGINS, ESSENTIAL_PLUGINS, PluginValidationError, build_plugin_manager,
)

from .pytester import SCALE, VADD

ANALYZERS = '''
from tirxh.core.findings import AnalyzerResult, Finding, SourceRef

VERDICT = {verdict!r}


def tirxh_check_item(item, compiled, config):
    n = sum(1 for _ in compiled.ir.instructions())
    loc = item.kernel.loc
    findings = [] if VERDICT == "clean" else [
        Finding("demo.count", f"{{n}} instructions", severity=VERDICT,
                where=SourceRef(loc.file, loc.line, "def"))]
    return AnalyzerResult("counter", VERDICT, findings, summary=f"{{n}} instructions")
'''


def test_builtins_are_registered_under_fixed_names():
    pm = build_plugin_manager(autoload=False)
    names = [n for n, _ in pm.list_name_plugin()]
    present = [n for n in ESSENTIAL_PLUGINS + DEFAULT_PLUGINS if n in names]
    assert names[:len(present)] == present
    assert set(ESSENTIAL_PLUGINS) <= set(names)
    info = {i["name"]: i for i in pm.plugin_infos()}
    assert info["compile"]["hooks"] == ["tirxh_compile"]
    assert info["compile"]["distribution"] == "tirxh"
    assert info["compile"]["file"].endswith("tirxh/plugins/compile.py")


def test_blocking_a_default_plugin():
    pm = build_plugin_manager(blocked=["junitxml"], autoload=False)
    assert pm.get_plugin("junitxml") is None and pm.is_blocked("junitxml")


def test_misspelled_hook_is_an_error(tirxh):
    tirxh.project(vadd=VADD)
    tirxh.write("tirxconf.py", "def tirxh_chek_item(item, compiled, config):\n    return None\n")
    r = tirxh.run("check")
    assert r.ret == 4
    assert "plugin error" in r.stderr and "tirxh_chek_item" in r.stderr


def test_bad_hook_signature_is_an_error(tirxh):
    tirxh.project(vadd=VADD)
    tirxh.write("tirxconf.py", "def tirxh_check_item(item, compiled, config, extra):\n"
                               "    return None\n")
    r = tirxh.run("check")
    assert r.ret == 4 and "extra" in r.stderr


def test_plugin_listing_and_trace_config(tirxh):
    tirxh.project(vadd=VADD)
    tirxh.write("tirxconf.py", ANALYZERS.format(verdict="clean"))
    r = tirxh.run("plugins", "--json")
    doc = json.loads(r.stdout)
    assert doc["schema"] == "tirxh.report/1" and doc["command"] == "plugins"
    conf = next(p for p in doc["plugins"] if p["name"] == "tirxconf")
    assert conf["origin"] == "tirxconf" and conf["hooks"] == ["tirxh_check_item"]
    assert conf["file"].endswith("tirxconf.py")
    r = tirxh.run("plugins", "-p", "no:tirxconf", "-p", "no:sarif")
    assert "tirxconf" not in r.stdout.split("blocked:")[0]
    assert "blocked: sarif, tirxconf" in r.stdout
    r = tirxh.run("check", "--trace-config")
    r.fnmatch_lines(["*plugins*", "tirxconf * (tirxconf)", "    file:  *tirxconf.py",
                     "    hooks: tirxh_check_item"])


@pytest.mark.parametrize("verdict, fail_on, ret, outcome", [
    ("clean", "error", 0, "passed"),
    ("review", "error", 0, "passed"),
    ("incomplete", "error", 0, "incomplete"),
    ("error", "error", 1, "failed"),
    ("incomplete", "incomplete", 1, "failed"),
    ("review", "review", 1, "failed"),
])
def test_analyzer_verdicts_and_fail_on(tirxh, verdict, fail_on, ret, outcome):
    tirxh.project(f'[project]\n[check]\nfail_on = "{fail_on}"\n', scale=SCALE)
    tirxh.write("tirxconf.py", ANALYZERS.format(verdict=verdict))
    r = tirxh.run("check", "--json")
    assert r.ret == ret, r
    item = json.loads(r.stdout)["items"][0]
    assert item["outcome"] == outcome
    check = item["phases"][1]
    assert check["phase"] == "check" and check["results"][0]["analyzer"] == "counter"
    assert check["results"][0]["verdict"] == verdict


def test_incomplete_is_shown_in_terminal(tirxh):
    tirxh.project(scale=SCALE)
    tirxh.write("tirxconf.py", ANALYZERS.format(verdict="incomplete"))
    r = tirxh.run("check")
    assert r.ret == 0
    r.fnmatch_lines(["kernels/scale.py I *", "*INCOMPLETE*", "kernels/scale.py::scale@sm_90a:",
                     "  [[]counter] incomplete: * instructions",
                     "    kernels/scale.py:4 (def): incomplete demo.count: *",
                     "*1 incomplete in*"])


def test_crashing_analyzer_is_attributed_and_others_still_run(tirxh, monkeypatch):
    tirxh.project(scale=SCALE)
    tirxh.write("tirxconf.py", ANALYZERS.format(verdict="clean"))
    tirxh.write("crashy.py", "def tirxh_check_item(item):\n    raise ValueError('oops')\n")
    monkeypatch.syspath_prepend(str(tirxh.path))
    r = tirxh.run("check", "-p", "crashy", "--json")
    assert r.ret == 1
    item = json.loads(r.stdout)["items"][0]
    assert item["outcome"] == "error"
    check = item["phases"][1]
    assert "analyzer plugin 'crashy' raised" in check["longrepr"]
    assert "ValueError: oops" in check["longrepr"]
    assert [x["analyzer"] for x in check["results"]] == ["counter"]


def test_analyzer_returning_garbage_is_an_error(tirxh):
    tirxh.project(scale=SCALE)
    tirxh.write("tirxconf.py", "def tirxh_check_item(item):\n    return 'clean'\n")
    r = tirxh.run("check")
    assert r.ret == 1
    assert "must return an AnalyzerResult or None" in r.stdout


def test_ordering_tryfirst_compile_and_registration_order(tirxh, monkeypatch):
    """-p plugins register after tirxconf, so their (non-tryfirst) hooks run first; tryfirst
    beats both; the built-in compile is trylast, so any plugin may take over compiling."""
    tirxh.project(scale=SCALE)
    tirxh.write("tirxconf.py", '''
        import tirxh

        def tirxh_check_item(item, config):
            config.stash.setdefault("order", []).append("tirxconf")

        @tirxh.hookimpl(tryfirst=True)
        def tirxh_compile(item, target, config):
            config.stash.setdefault("order", []).append("compile:tirxconf")
            return None  # decline: fall through to the built-in

        def tirxh_sessionfinish(session):
            print("\\nORDER", session.config.stash["order"])
    ''')
    tirxh.write("late.py", '''
        import tirxh

        def tirxh_check_item(item, config):
            config.stash.setdefault("order", []).append("late")

        @tirxh.hookimpl(tryfirst=True)
        def tirxh_compile(item, target, config):
            config.stash.setdefault("order", []).append("compile:late")
    ''')
    monkeypatch.syspath_prepend(str(tirxh.path))
    r = tirxh.run("check", "-p", "late")
    assert r.ret == 0, r
    # late (registered last) runs before tirxconf; the built-in compile (trylast) answers last
    assert "ORDER ['compile:late', 'compile:tirxconf', 'late', 'tirxconf']" in r.outlines, r
    infos = [n for n in json.loads(tirxh.run("plugins", "--json", "-p", "late").stdout)
             ["plugins"]]
    names = [p["name"] for p in infos]
    assert names.index("tirxconf") < names.index("late")


def test_plugin_compile_override(tirxh):
    tirxh.project(scale=SCALE)
    tirxh.write("tirxconf.py", '''
        from tirxh.core.compiler import compile_kernel

        def tirxh_compile(item, target, config):
            ck = compile_kernel(item.kernel, target, item.consts, isa=config.isa,
                                assemble=False)
            ck.timings["by"] = "tirxconf"
            return ck
    ''')
    r = tirxh.run("check", "--json")
    assert json.loads(r.stdout)["items"][0]["phases"][0]["data"]["timings"]["by"] == "tirxconf"


def test_bench_without_a_bench_plugin_is_a_clear_error(tirxh):
    tirxh.project(vadd=VADD, scale=SCALE)
    r = tirxh.run("bench", "-p", "no:bench", "--json")
    assert r.ret == 1
    doc = json.loads(r.stdout)
    by = {i["nodeid"]: i for i in doc["items"]}
    assert by["kernels/scale.py::scale@sm_90a"]["outcome"] == "skipped"
    small = by["kernels/vadd.py::vadd[small]@sm_90a"]
    assert small["outcome"] == "error"
    assert "no plugin answered tirxh_bench_item" in small["phases"][1]["longrepr"]


def test_bench_delegates_to_the_bench_hook(tirxh):
    tirxh.project(vadd=VADD)
    tirxh.write("tirxconf.py", '''
        class Result:
            def __init__(self, item):
                self.verdict = "clean" if item.case.name == "small" else "error"
                self.summary = "timing was noisy"
                self.item = item

            def to_json(self):
                return {"median_us": 1.5, "case": self.item.case.name,
                        "verdict": self.verdict}

        def tirxh_bench_item(item, compiled, config):
            assert compiled.cubin
            return Result(item)
    ''')
    r = tirxh.run("bench", "-p", "no:bench", "--json")
    assert r.ret == 1
    items = {i["case"]: i for i in json.loads(r.stdout)["items"]}
    assert items["small"]["outcome"] == "passed"
    assert items["small"]["phases"][1]["data"]["median_us"] == 1.5
    assert items["big"]["outcome"] == "failed"
    assert items["big"]["phases"][1]["longrepr"] == "timing was noisy"


def test_plugin_validation_error_type():
    pm = build_plugin_manager(autoload=False)

    class Bad:
        def tirxh_check_item(self, nope):
            pass

    with pytest.raises(PluginValidationError, match="nope"):
        pm.register(Bad(), "bad")


@pytest.fixture
def fake_dist(tmp_path, monkeypatch):
    """An 'installed' distribution with a tirxh entry point: a dist-info on sys.path."""
    site = tmp_path / "site"
    (site / "fakeplug-1.2.dist-info").mkdir(parents=True)
    (site / "fakeplug-1.2.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fakeplug\nVersion: 1.2\n")
    (site / "fakeplug-1.2.dist-info" / "entry_points.txt").write_text(
        "[tirxh]\nfake = fakeplug_mod\n")
    (site / "fakeplug_mod.py").write_text(
        "def tirxh_check_item(item):\n    return None\n")
    monkeypatch.syspath_prepend(str(site))
    return site


def test_entry_point_autoload_env_switch_and_blocking(tirxh, fake_dist):
    tirxh.project(vadd=VADD)
    doc = json.loads(tirxh.run("plugins", "--json", autoload=True).stdout)
    fake = next(p for p in doc["plugins"] if p["name"] == "fake")
    assert (fake["distribution"], fake["version"], fake["origin"]) == ("fakeplug", "1.2",
                                                                     "entrypoint")
    assert fake["hooks"] == ["tirxh_check_item"]
    # TIRXH_DISABLE_PLUGIN_AUTOLOAD (set by autoload=False) skips it; -p NAME loads it anyway
    names = [p["name"] for p in json.loads(tirxh.run("plugins", "--json").stdout)["plugins"]]
    assert "fake" not in names
    doc = json.loads(tirxh.run("plugins", "--json", "-p", "fake").stdout)
    assert any(p["name"] == "fake" and p["distribution"] == "fakeplug" for p in doc["plugins"])
    doc = json.loads(tirxh.run("plugins", "--json", "-p", "no:fake", autoload=True).stdout)
    assert "fake" not in [p["name"] for p in doc["plugins"]] and doc["blocked"] == ["fake"]


def test_requires_is_satisfied_by_a_loaded_distribution(tirxh, fake_dist):
    tirxh.project('[project]\nrequires = ["fakeplug>=1.0,<2"]\n', vadd=VADD)
    assert tirxh.run("check", "--collect-only", autoload=True).ret == 0
    r = tirxh.run("check", "--collect-only", "-p", "no:fake", autoload=True)
    assert r.ret == 4 and "no loaded plugin comes from distribution 'fakeplug'" in r.stderr
    tirxh.project('[project]\nrequires = ["fakeplug>=2"]\n', vadd=VADD)
    r = tirxh.run("check", "--collect-only", autoload=True)
    assert r.ret == 4 and "'fakeplug>=2': fakeplug 1.2 is installed" in r.stderr


def test_modifyitems_and_terminal_summary_hooks(tirxh):
    tirxh.project(vadd=VADD, scale=SCALE)
    tirxh.write("tirxconf.py", '''
        def tirxh_collection_modifyitems(items):
            items[:] = [i for i in items if i.suite is not None]  # drop compile-only items
            items.reverse()

        def tirxh_terminal_summary(reporter, exitstatus):
            reporter.section("from tirxconf", "-")
            reporter.line(f"exit status was {exitstatus}")
    ''')
    r = tirxh.run("check", "-v")
    assert r.ret == 0, r
    r.fnmatch_lines(["kernels/vadd.py::vadd[[]big]@sm_90a COMPILED*",
                     "kernels/vadd.py::vadd[[]small]@sm_90a COMPILED*",
                     "*from tirxconf*", "exit status was 0", "*2 compiled*"])
    assert "scale" not in r.stdout


def test_trace_config_with_quiet_and_json(tirxh):
    tirxh.project(vadd=VADD)
    r = tirxh.run("check", "-q", "--trace-config")
    r.fnmatch_lines(["*plugins*", "compile * (builtin)"])
    r = tirxh.run("check", "--json", "--trace-config")
    assert json.loads(r.stdout)["command"] == "check"
    assert "compile" in r.stderr and "(builtin)" in r.stderr


def test_p_naming_a_module_that_is_already_loaded_is_harmless(tirxh):
    tirxh.project(vadd=VADD)
    r = tirxh.run("check", "-p", "tirxh.plugins.sarif")  # the built-in `sarif` plugin's module
    assert r.ret == 0, r.stderr


def test_report_header_lines_from_plugins(tirxh):
    tirxh.project(scale=SCALE)
    tirxh.write("tirxconf.py", '''
        def tirxh_report_header(config, start_path):
            return [f"mylint: rules from {start_path.name}", "mylint: strict"]
    ''')
    r = tirxh.run("check")
    assert r.ret == 0, r
    r.fnmatch_lines(["targets: sm_90a", "mylint: rules from *", "mylint: strict",
                     "collected 1 item"])
    assert "mylint" not in tirxh.run("check", "-q").stdout
