"""The per-item protocol (`tirxh.core.runner`): the build phase and its plugin hook."""

import json

from tirxh.core import compiler

from .pytester import SCALE

BUILD_PLUGIN = '''
import json
import tirxh


@tirxh.hookimpl
def tirxh_build_item(item, compiled, outdir):
    (outdir / "regs.json").write_text(json.dumps({"registers": compiled.resources.registers}))
    return ["regs.json"]
'''


def _build(tirxh, *args):
    r = tirxh.run("build", "--json", *args)
    return r, json.loads(r.stdout)["items"][0]["phases"][1]


def test_a_plugin_adds_artifacts_to_the_build(tirxh):
    tirxh.project(scale=SCALE)
    tirxh.write("tirxconf.py", BUILD_PLUGIN)
    r, phase = _build(tirxh)
    assert r.ret == 0 and phase["outcome"] == "passed", r
    assert phase["data"]["files"][-1] == "regs.json"
    d = tirxh.path / "tirx-build" / "scale@sm_90a"
    assert json.loads((d / "regs.json").read_text())["registers"] > 0


def test_a_build_plugin_that_raises_is_an_error_naming_it_and_keeps_the_rest(tirxh):
    tirxh.project(scale=SCALE)
    tirxh.write("tirxconf.py", '''
        def tirxh_build_item(item):
            raise RuntimeError("disk full")
    ''')
    r, phase = _build(tirxh)
    assert r.ret == 1 and phase["outcome"] == "error"
    assert "build plugin 'tirxconf' raised:" in phase["longrepr"]
    assert "RuntimeError: disk full" in phase["longrepr"]
    assert "kernel.ptx" in phase["data"]["files"]
    assert (tirxh.path / "tirx-build" / "scale@sm_90a" / "kernel.sass").exists()


def test_a_build_plugin_must_return_file_names(tirxh):
    tirxh.project(scale=SCALE)
    tirxh.write("tirxconf.py", '''
        def tirxh_build_item(item):
            return "one.txt"
    ''')
    r, phase = _build(tirxh)
    assert r.ret == 1 and phase["outcome"] == "error"
    assert ("build plugin 'tirxconf' returned 'one.txt'; tirxh_build_item must return a list "
            "of file names or None") in phase["longrepr"]


def test_a_warm_build_takes_the_sass_from_the_cache(tirxh, monkeypatch):
    tirxh.project(scale=SCALE)
    r, phase = _build(tirxh)
    assert r.ret == 0 and "kernel.sass" in phase["data"]["files"], r
    sass = (tirxh.path / "tirx-build" / "scale@sm_90a" / "kernel.sass").read_text()

    def no_nvdisasm(cubin):
        raise AssertionError("nvdisasm ran although the cubin's SASS is cached")
    monkeypatch.setattr(compiler, "cubin_to_sass", no_nvdisasm)
    r, phase = _build(tirxh)
    assert r.ret == 0 and phase["outcome"] == "passed", r
    assert (tirxh.path / "tirx-build" / "scale@sm_90a" / "kernel.sass").read_text() == sass
    r, phase = _build(tirxh, "--no-cache")  # without the cache, nvdisasm runs (and is missed)
    assert phase["outcome"] == "incomplete"
    assert "kernel.sass not written: AssertionError" in phase["longrepr"]
