"""The per-item protocol (`tirxh.core.runner`): the build phase and its plugin hook."""

import json

import pytest

from tirxh.core import compiler

from .pytester import SCALE, VADD

BUILD_PLUGIN = '''
import json

import pytest
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


# -- outcomes: an item nothing checked is "compiled", never "passed" ---------------------------

ONE_ANALYZER = '''
from tirxh.api import AnalyzerResult


def tirxh_check_item(item):
    if item.case is not None and item.case.name == "small":
        return AnalyzerResult("small-only", "clean")
    return None
'''


def test_an_item_no_analyzer_checked_is_compiled_not_passed(tirxh):
    tirxh.project(vadd=VADD)
    tirxh.write("tirxconf.py", ONE_ANALYZER)
    r = tirxh.run("check", "--json")
    assert r.ret == 0, r
    doc = json.loads(r.stdout)
    by = {i["case"]: i for i in doc["items"]}
    assert by["small"]["outcome"] == "passed" and by["big"]["outcome"] == "compiled"
    assert doc["summary"]["passed"] == 1 and doc["summary"]["compiled"] == 1
    assert "no analyzer checked this item (installed analyzers: tirxconf;" in \
        by["big"]["phases"][1]["longrepr"]
    r = tirxh.run("check")
    r.fnmatch_lines(["kernels/vadd.py .C [[]100%]", "*COMPILED, NOT CHECKED*",
                     "kernels/vadd.py::vadd[[]big]@sm_90a", "*1 passed, 1 compiled in *"])


def test_fail_on_compiled_fails_unchecked_items(tirxh):
    tirxh.project('[project]\ntargets = ["sm_90a"]\n[check]\nfail_on = "compiled"\n', vadd=VADD)
    tirxh.write("tirxconf.py", ONE_ANALYZER)
    r = tirxh.run("check", "--json")
    assert r.ret == 1
    big = next(i for i in json.loads(r.stdout)["items"] if i["case"] == "big")
    assert big["outcome"] == "failed"
    assert "[check] fail_on = 'compiled' fails it" in big["phases"][1]["longrepr"]


def test_without_analyzer_plugins_the_note_says_so(tirxh):
    tirxh.project(vadd=VADD)
    r = tirxh.run("check")
    assert r.ret == 0
    assert "note: no analyzer plugin is installed (items were compiled only)" in r.stdout
    assert "2 compiled" in r.stdout and "passed" not in r.stdout


# -- errors in the user's kernels and suites read like trace errors ------------------------------

NAME_ERROR = '''
import tirxh.lang as T


@T.kernel(block=32)
def k(out: T.gptr[T.f32]):
    T.ptx.st.global_.f32(out.at(T.tid.x), undefined_value)
'''

# an analyzer that uses the suite as numsim does (inputs, then the reference)
SUITE_USER = '''
from tirxh.api import AnalyzerResult


def tirxh_check_item(item):
    if item.suite is None:
        return None
    item.suite.expected(item.case, item.suite.make_inputs(item.case))
    return AnalyzerResult("suite-user", "clean")
'''

BAD_SUITE = '''
import numpy as np
import tirxh.lang as T


@T.kernel(block=32)
def k(out: T.gptr[T.f32], n: T.u32):
    T.ptx.st.global_.f32(out.at(T.tid.x), 1.0)


def inputs(n):
    return dict(out=np.zeros(n, np.float32), n=n)


def reference(out):
    return {"outt": out + 1.0}


SUITE = T.suite(k, inputs=inputs, reference=reference, outputs=["out"],
                cases=[T.case("c", n=32)])
'''


def _line_of(text: str, marker: str) -> int:
    """The line of `marker` in a kernel file written by ``tirxh.write`` (leading newline cut)."""
    return next(n for n, ln in enumerate(text.lstrip("\n").splitlines(), 1) if marker in ln)


def test_a_name_error_in_a_kernel_body_is_the_users_line_in_one_line(tirxh):
    tirxh.project(k=NAME_ERROR)
    r = tirxh.run("check")
    assert r.ret == 1, r
    line = _line_of(NAME_ERROR, "undefined_value")
    assert f"kernels/k.py:{line}: in kernel 'k': NameError: name 'undefined_value' is not " \
           "defined" in r.stdout
    assert "Traceback" not in r.stdout and "pluggy" not in r.stdout
    r = tirxh.run("check", "--tb=long")
    assert "Traceback (most recent call last)" in r.stdout and "undefined_value" in r.stdout
    assert "Traceback" in tirxh.run("check", "-v").stdout


def test_a_reference_missing_an_output_fails_the_item_at_the_users_line(tirxh):
    tirxh.project(k=BAD_SUITE)
    tirxh.write("tirxconf.py", SUITE_USER)
    r = tirxh.run("check", "--json")
    assert r.ret == 1, r
    item = json.loads(r.stdout)["items"][0]
    assert item["outcome"] == "failed"
    check = item["phases"][1]
    assert check["longrepr"].startswith("SuiteError: ")
    assert "in kernel 'k': reference() for case 'c' gives no value for declared output(s) " \
           "'out' (it gives 'outt')" in check["longrepr"]
    assert check["location"][1] == _line_of(BAD_SUITE, "def reference")
    assert "raised:" not in check["longrepr"]
    r = tirxh.run("check")
    assert "no analyzer" not in r.stdout  # an analyzer ran and met the user's mistake


def test_an_exception_in_inputs_is_one_line_with_the_users_frame(tirxh):
    tirxh.project(k=BAD_SUITE.replace("return dict(out=np.zeros(n, np.float32), n=n)",
                                      "return dict(out=np.zeros(n, np.flaot32), n=n)"))
    tirxh.write("tirxconf.py", SUITE_USER)
    r = tirxh.run("check")
    assert r.ret == 1
    line = _line_of(BAD_SUITE, "return dict(out=")
    assert f"kernels/k.py:{line}: in kernel 'k': inputs() for case 'c' raised AttributeError: " \
           "module 'numpy' has no attribute 'flaot32'" in r.stdout
    assert "Traceback" not in r.stdout


# -- tirxh bench: an item not timed says why; timing nothing it was asked to is a failure ---------

FAKE_BENCH = '''
from dataclasses import dataclass


@dataclass
class Result:
    verdict: str
    timed: bool
    not_timed: str = ""
    summary: str = ""

    def to_json(self):
        return {"verdict": self.verdict, "timed": self.timed}


def tirxh_bench_item(item):
    if item.case.name in TIMED:
        return Result("clean", True, summary="1.0 us")
    return Result("incomplete", False, "sim board: the sim board does not time")


TIMED = {timed}
'''


def _bench(tirxh, timed):
    tirxh.project(vadd=VADD)
    tirxh.write("tirxconf.py", FAKE_BENCH.replace("{timed}", repr(set(timed))))
    return tirxh.run("bench", "-p", "no:bench")


def test_an_untimed_item_says_not_timed_and_why(tirxh):
    r = _bench(tirxh, {"small"})
    assert r.ret == 0, r  # one item was timed
    r.fnmatch_lines(["*NOT TIMED*", "kernels/vadd.py::vadd[[]big]@sm_90a: not timed (sim board:*",
                     "*1 incomplete, 1 passed*"])
    assert "INCOMPLETE" not in r.stdout  # no "an analysis could not model everything"


def test_a_bench_that_timed_nothing_exits_1_with_the_reason(tirxh):
    r = _bench(tirxh, set())
    assert r.ret == 1, r
    assert ("ERROR: tirxh bench timed none of the 2 item(s) it was asked to time: sim board: the "
            "sim board does not time") in r.stderr


# a warp-specialized kernel's one telling instruction: nvJitLink drops it (C7504)
WS = '''
import tirxh.lang as T


@T.kernel(block=128, min_blocks=1)   # the register cap setmaxnreg needs
def ws(out: T.gptr[T.f32]):
    T.ptx.setmaxnreg.inc.sync.aligned.u32(232)
    T.ptx.st.global_.f32(out.at(T.tid.x), 1.0)
'''


def test_an_assembler_warning_is_said_once_on_stderr(tirxh, monkeypatch):
    """Without ptxas, nvJitLink drops setmaxnreg: the compile still passes, and the user hears
    it on stderr, once per compiled variant, not only in the JSON report (session 18's silent
    device build)."""
    from tirxh.core import toolchain
    real = toolchain.find_tool
    monkeypatch.setattr(toolchain, "find_tool", lambda n: None if n == "ptxas" else real(n))
    tirxh.project(ws=WS)
    for _ in range(2):   # the second run's compile is a cache hit: its report is kept
        r = tirxh.run("build")
        assert r.ret == 0, r
        said = [ln for ln in r.errlines if ln.startswith("WARNING: ws (sm_90a): ")]
        assert len(said) == 1 and "setmaxnreg" in said[0], r.stderr


def test_an_assembler_note_stays_in_the_report(tirxh):
    from tirxh.core import toolchain
    if toolchain.find_tool("ptxas") is None:
        pytest.skip("no ptxas here: the setmaxnreg kernel goes to nvJitLink (the test above)")
    tirxh.project(ws=WS)
    r = tirxh.run("build", "--json")
    assert r.ret == 0 and "WARNING" not in r.stderr, r
    res = json.loads(r.stdout)["items"][0]["phases"][0]["data"]["resources"]
    assert res["warnings"][0].startswith("note: the PTX uses setmaxnreg")


def test_setmaxnreg_without_a_register_cap_is_said(tirxh):
    """ptxas ignores setmaxnreg when it cannot tell the register count at entry (C7508): the
    kernel builds, and stderr says why its warps keep one budget."""
    from tirxh.core import toolchain
    if toolchain.find_tool("ptxas") is None:
        pytest.skip("no ptxas here: nvJitLink drops setmaxnreg whatever the cap")
    tirxh.project(ws=WS.replace("block=128, min_blocks=1", "block=128"))
    r = tirxh.run("build")
    assert r.ret == 0, r
    assert [ln for ln in r.errlines if ln.startswith("WARNING: ws (sm_90a): ") and "C7508" in ln]
