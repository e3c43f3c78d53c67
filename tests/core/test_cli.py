"""Commands and exit codes, in-process and as a subprocess."""

import json

import pytest

from tirxh.core.main import ExitCode

from .pytester import BAD, CLEAN_ANALYZER, SCALE, VADD


def test_exit_codes_are_pytests():
    assert [int(c) for c in ExitCode] == [0, 1, 2, 3, 4, 5]


def test_check_passes_and_summarizes(tirxh):
    tirxh.project(vadd=VADD)
    tirxh.write("tirxconf.py", CLEAN_ANALYZER)
    r = tirxh.run("check")
    assert r.ret == 0, r
    r.fnmatch_lines(["*tirxh check session starts*",
                     "project: demo, rootdir: *, configfile: tirx.toml",
                     "targets: sm_90a", "collected 2 items", "kernels/vadd.py .. [[]100%]",
                     "*2 passed in *"])
    assert "\x1b[" not in r.stdout  # not a TTY: no colour


def test_color_forced_and_no_color(tirxh, monkeypatch):
    tirxh.project(vadd=VADD)
    tirxh.write("tirxconf.py", CLEAN_ANALYZER)
    assert "\x1b[32m" in tirxh.run("check", "--color", "yes").stdout
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in tirxh.run("check", "--color", "auto").stdout


def test_exitfirst_stops_after_first_failure(tirxh):
    tirxh.project(a_bad=BAD, b_vadd=VADD)
    r = tirxh.run("check", "-x")
    assert r.ret == 1
    assert "1 failed, stopping after 1 failure (-x)" in r.stdout
    assert "passed" not in r.stdout.splitlines()[-1]


def test_usage_errors_exit_4(tirxh):
    tirxh.project(vadd=VADD)
    for args, msg in [((), "no command given"), (("frobnicate",), "invalid choice"),
                      (("check", "--no-such-option"), "unrecognized arguments"),
                      (("show", "kernels/vadd.py::vadd"), "one of the arguments"),
                      (("check", "-p", "no:compile"), "essential and cannot be blocked"),
                      (("check", "-p", "no_such_module_xyz"), "no plugin, entry point or module")]:
        r = tirxh.run(*args)
        assert r.ret == 4, (args, r)
        assert msg in r.stderr, (args, r)


def test_internal_error_exit_3(tirxh):
    tirxh.project(vadd=VADD)
    tirxh.write("tirxconf.py", '''
        def tirxh_collection_modifyitems(session, config, items):
            raise RuntimeError("a bug in a plugin")
    ''')
    r = tirxh.run("check")
    assert r.ret == 3
    assert "INTERNAL ERROR" in r.stderr and "RuntimeError: a bug in a plugin" in r.stderr
    assert r.stdout.rstrip().endswith("=")  # the summary line is still written


def test_interrupted_exit_2(tirxh):
    tirxh.project(vadd=VADD)
    tirxh.write("tirxconf.py", '''
        def tirxh_check_item(item, compiled, config):
            raise KeyboardInterrupt
    ''')
    r = tirxh.run("check")
    assert r.ret == 2
    assert "ERROR: interrupted" in r.stderr


def test_json_document(tirxh):
    tirxh.project(vadd=VADD, bad=BAD)
    r = tirxh.run("check", "--json")
    assert r.ret == 1
    doc = json.loads(r.stdout)  # nothing but the document on stdout
    assert doc["schema"] == "tirxh.report/1" and doc["command"] == "check"
    assert doc["exitstatus"] == 1
    assert doc["summary"]["compiled"] == 2 and doc["summary"]["failed"] == 1  # no analyzers
    bad = next(i for i in doc["items"] if i["kernel"] == "broken")
    assert bad["outcome"] == "failed" and bad["location"] == ["kernels/bad.py", 4]
    compile_phase = bad["phases"][0]
    assert compile_phase["phase"] == "compile" and compile_phase["location"][1] == 7
    good = next(i for i in doc["items"] if i["outcome"] == "compiled")
    assert good["phases"][0]["data"]["resources"]["registers"] > 0
    assert {"name": "compile", "distribution": "tirxh", "version": doc["tirxh_version"]} in \
        doc["plugins"]


def test_build_writes_artifacts(tirxh):
    tirxh.project(vadd=VADD, scale=SCALE)
    r = tirxh.run("build", "-k", "small or scale")
    assert r.ret == 0, r
    d = tirxh.path / "tirx-build" / "vadd[small]@sm_90a"
    names = sorted(p.name for p in d.iterdir())
    assert names == ["kernel.cubin", "kernel.ptx", "kernel.sass", "launch.json",
                     "resources.json"]
    assert ".entry vadd(" in (d / "kernel.ptx").read_text()
    assert (d / "kernel.cubin").read_bytes()[:4] == b"\x7fELF"
    assert "LDG" in (d / "kernel.sass").read_text()
    launch = json.loads((d / "launch.json").read_text())
    assert launch["grid"] == [8, 1, 1] and launch["block"] == [128, 1, 1]
    assert [p["name"] for p in launch["params"]] == ["a", "b", "out", "n"]
    assert json.loads((d / "resources.json").read_text())["registers"] > 0
    assert (tirxh.path / "tirx-build" / "scale@sm_90a" / "kernel.ptx").exists()
    r = tirxh.run("build", "--builddir", "out", "-k", "scale")
    assert (tirxh.path / "out" / "scale@sm_90a" / "kernel.sass").exists()


@pytest.mark.parametrize("kind, expect", [("ptx", ".entry vadd("), ("ir", "kernel vadd("),
                                          ("sass", "EXIT"), ("resources", '"registers"')])
def test_show(tirxh, kind, expect):
    tirxh.project(vadd=VADD)
    r = tirxh.run("show", "kernels/vadd.py::vadd[small]@sm_90a", f"--{kind}")
    assert r.ret == 0, r
    assert expect in r.stdout


def test_show_prefix_json_and_errors(tirxh):
    tirxh.project('[project]\ntargets = ["sm_80", "sm_90a"]\n', vadd=VADD, bad=BAD)
    r = tirxh.run("show", "kernels/vadd.py::vadd[small]@sm_80", "--ptx", "--json")
    doc = json.loads(r.stdout)
    assert doc["nodeid"] == "kernels/vadd.py::vadd[small]@sm_80" and ".target sm_80" in \
        doc["content"]
    r = tirxh.run("show", "kernels/vadd.py::vadd[small]", "--ptx")
    assert r.ret == 4 and "ambiguous" in r.stderr
    r = tirxh.run("show", "kernels/vadd.py::nope", "--ptx")
    assert r.ret == 4 and "no collected item has this node id" in r.stderr
    r = tirxh.run("show", "kernels/bad.py::broken@sm_90a", "--ptx")
    assert r.ret == 1 and "TraceError" in r.stderr


def test_init_then_check_is_clean(tirxh):
    r = tirxh.run("init", "demo")
    assert r.ret == 0, r
    assert (tirxh.path / "demo" / "tirx.toml").exists()
    r = tirxh.run("check", cwd=tirxh.path / "demo" / "kernels",  # rootdir found upward
                  autoload=True)  # the installed analyzers check the small case
    assert r.ret == 0, r
    assert "1 passed, 1 compiled" in r.stdout  # the 1M-element case is for bench only
    r = tirxh.run("init", "demo")
    assert r.ret == 4 and "already exist" in r.stderr


def test_subprocess_run(tirxh):
    tirxh.project(vadd=VADD, bad=BAD)
    r = tirxh.run_subprocess("check", "-q")
    assert r.ret == 1, r
    assert "1 failed, 2 compiled" in r.stdout  # no analyzer plugins in a hermetic run
    r = tirxh.run_subprocess("--version")
    assert r.ret == 0 and r.stdout.startswith("tirxh ")


def test_artifact_cache_and_no_cache(tirxh):
    tirxh.project(scale=SCALE)

    def hit(*args):
        doc = json.loads(tirxh.run("check", "--json", *args).stdout)
        return doc["items"][0]["phases"][0]["data"]["cache_hit"]

    assert hit() is False  # a fresh cache directory per test
    assert hit() is True
    assert hit("--no-cache") is False
    assert any(tirxh.cache.iterdir())
