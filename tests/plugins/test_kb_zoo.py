"""`tirxh zoo` end to end: list, search, show, new (then check clean), JSON and errors."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tirxh.kb.zoo as tirxh_zoo

from ..core.pytester import REPO
from ..kb.conftest import FACTORY, ODD, PAIR, README, TOML
from ..zoo.zoo_modules import small_cases

CHECKERS = ("-p", "tirxh_numsim.plugin", "-p", "tirxh_sync_check.plugin")


@pytest.fixture
def testzoo(tmp_path):
    root = tmp_path / "testzoo"
    (root / "kernels").mkdir(parents=True)
    (root / "tirx.toml").write_text(TOML)
    (root / "README.md").write_text(README)
    (root / "kernels" / "pair.py").write_text(PAIR.lstrip("\n"))
    (root / "kernels" / "odd.py").write_text(ODD.lstrip("\n"))
    (root / "kernels" / "factory.py").write_text(FACTORY.lstrip("\n"))
    return root


def test_list_json_and_text(tirxh):
    r = tirxh.run("zoo", "list", "--json")
    assert r.ret == 0, r
    doc = json.loads(r.stdout)
    assert (doc["schema"], doc["command"], doc["action"]) == ("tirxh.report/1", "zoo", "list")
    assert doc["zoo"] == str(REPO / "zoo") and doc["problems"] == doc["warnings"] == []
    vadd = next(k for k in doc["kernels"] if k["name"] == "vadd")
    assert vadd["module"] == "kernels/vadd.py" and vadd["cases"] == 4
    r = tirxh.run("zoo", "list")
    r.fnmatch_lines(["* kernels in the zoo (*zoo)", "*vadd*kernels/vadd.py*Vector add*"])


def test_search_and_show(tirxh):
    r = tirxh.run("zoo", "search", "shfl", "--json")
    doc = json.loads(r.stdout)
    hits = {x["name"]: x for x in doc["results"]}
    assert doc["query"] == "shfl" and "reduce_rows" in hits and "vadd" not in hits
    assert hits["reduce_rows"]["matched"]["instructions"] == ["shfl.sync", "shfl.sync.bfly.b32"]
    r = tirxh.run("zoo", "search", "reduce", "shfl", "--json")
    assert json.loads(r.stdout)["results"][0]["name"] == "reduce_rows"  # the name ranks first
    r = tirxh.run("zoo", "show", "gemm_wgmma")
    assert r.ret == 0
    r.fnmatch_lines(["gemm_wgmma -- kernels/gemm_wgmma.py:*", "*Techniques:*",
                     "cases (small: checked by numsim*", "  m128n128k128 * small  M=128*",
                     "  m4096n4096k4096 * large *", "checked (SUITE): outputs c; tolerance*"
                     "baselines: torch.matmul",
                     "PTX instructions (3 specializations traced):",
                     "  wgmma.mma_async.ss: *m64n128k16*m64n256k16*", "measured (zoo README):",
                     "copy it: tirxh zoo new my_gemm_wgmma --from gemm_wgmma"])
    doc = json.loads(tirxh.run("zoo", "show", "gemm_wgmma", "--json").stdout)["kernel"]
    assert doc["checking"][0]["baselines"][0]["name"] == "torch.matmul"
    assert {c["name"]: c["small"] for c in doc["cases"]}["m8192n8192k8192"] is False


def test_the_command_is_listed_and_can_be_blocked(tirxh):
    r = tirxh.run("--help")
    r.fnmatch_lines(["*zoo*the kernel zoo: list, search, show*"])
    r = tirxh.run("zoo", "list", "-p", "no:kb_zoo")
    assert r.ret == 4 and "invalid choice: 'zoo'" in r.stderr


def test_search_without_hits(tirxh):
    r = tirxh.run("zoo", "search", "nosuchthing")
    assert r.ret == 0
    r.fnmatch_lines(["0 of * zoo kernels match 'nosuchthing'", "*try fewer or shorter words*"])


def test_another_zoo_and_its_problems(tirxh, testzoo):
    (testzoo / "kernels" / "sick.py").write_text("raise ImportError('cannot')\n")
    pair = testzoo / "kernels" / "pair.py"
    pair.write_text(pair.read_text().replace('TAGS = ("elementwise", "tail-handling")',
                                             'TAGS = ("elementwise",)'))
    r = tirxh.run("zoo", "list", "--zoo", str(testzoo))
    assert r.ret == 1  # listed, but a module that does not import fails the listing
    r.fnmatch_lines(["6 kernels in the zoo*", "*broken*kernels/odd.py*"])
    assert "ERROR: zoo kernels/sick.py: failed to import:" in r.stderr
    assert "WARNING: zoo kernels/pair.py: TAGS ('elementwise',) and the docstring's" in r.stderr
    doc = json.loads(tirxh.run("zoo", "list", "--zoo", str(testzoo), "--json").stdout)
    assert doc["problems"] == ["kernels/sick.py: failed to import:\nImportError: cannot"]
    assert len(doc["warnings"]) == 1
    (testzoo / "kernels" / "sick.py").unlink()
    r = tirxh.run("zoo", "list", "--zoo", str(testzoo))
    assert r.ret == 0 and "WARNING: zoo kernels/pair.py" in r.stderr  # a warning does not fail
    r = tirxh.run("zoo", "show", "broken", "--zoo", str(testzoo))
    assert r.ret == 0  # showing a kernel is not failed by another module
    r.fnmatch_lines(["PTX instructions (0 specializations traced, INCOMPLETE):",
                     "  trace failed: kernels/odd.py::broken: TraceError*"])


def test_listings_read_from_the_index_are_those_traced(tirxh, testzoo, monkeypatch):
    """The instruction index changes no listing: `zoo search`, `zoo show` and `ptx show` print
    the same when every kernel is traced (an empty index) as when its uses are read back."""
    index = tirxh.cache / "zoo-instructions"
    index.unlink()  # a private, empty index instead of the shared one
    commands = [("zoo", "search", "st.global.f32", "--json"), ("zoo", "search", "tail"),
                ("zoo", "show", "relu", "--json"), ("zoo", "show", "double"),
                ("ptx", "show", "st.global.f32", "--json"), ("ptx", "show", "ld")]

    def run_all():
        return [tirxh.run(*c, "--zoo", str(testzoo)) for c in commands]
    cold = run_all()
    assert [r.ret for r in cold] == [0] * len(commands), cold
    assert len(list(index.glob("*.json"))) == 5  # every kernel of the zoo that traces
    traced = []
    real = tirxh_zoo.trace_use
    monkeypatch.setattr(tirxh_zoo, "trace_use",
                        lambda kernel, params, ident, isa: traced.append(ident) or
                        real(kernel, params, ident, isa))
    warm = run_all()
    assert set(traced) == {"kernels/odd.py::broken"}  # never stored: it does not trace
    assert [(r.ret, r.stdout, r.stderr) for r in warm] == [(r.ret, r.stdout, r.stderr)
                                                          for r in cold]


@pytest.mark.parametrize("args, match", [
    (["zoo", "list", "extra"], "zoo list: expected zoo list, got 1 argument(s) 'extra'"),
    (["zoo", "show"], "zoo show: expected zoo show NAME, got 0 argument(s)"),
    (["zoo", "search"], "zoo search: give the words to search for"),
    (["zoo", "list", "--from", "vadd"], "zoo list: --from, --dir and --force belong to"),
    (["zoo", "show", "nosuch"], "no kernel named 'nosuch'"),
    (["zoo", "new", "x"], "zoo new: name the zoo kernel to copy with --from"),
    (["zoo", "frob"], "invalid choice: 'frob'"),
    (["zoo", "list", "--zoo", "kernels"], "not a zoo"),
])
def test_usage_errors(tirxh, args, match):
    tirxh.project()
    r = tirxh.run(*args)
    assert r.ret == 4 and match in r.stderr, r


def test_new_needs_a_project(tirxh):
    r = tirxh.run("zoo", "new", "v2", "--from", "vadd")
    assert r.ret == 4 and "zoo new: no tirx.toml in" in r.stderr


def test_new_then_check_is_clean(tirxh):
    tirxh.project()
    r = tirxh.run("zoo", "new", "my_vadd", "--from", "vadd", "--json")
    assert r.ret == 0, r
    doc = json.loads(r.stdout)
    assert doc["relpath"] == "kernels/my_vadd.py" and doc["from"] == "kernels/vadd.py::vadd"
    r = tirxh.run("check", *CHECKERS, "--json")
    assert r.ret == 0, r
    items = {i["nodeid"]: i for i in json.loads(r.stdout)["items"]}
    mine = items["kernels/my_vadd.py::my_vadd[n1000]@sm_90a"]
    assert mine["outcome"] == "passed"
    assert {x["analyzer"]: x["verdict"] for x in mine["phases"][1]["results"]} == {
        "numsim": "clean", "synccheck": "clean", "racecheck": "clean"}
    assert len(items) == 4  # n1000, n4096 (simulated), n16M, n64M (compiled)


def test_new_of_a_two_kernel_module_checks_clean(tirxh, testzoo):
    tirxh.project()
    r = tirxh.run("zoo", "new", "act", "--from", "relu", "--zoo", str(testzoo))
    assert r.ret == 0, r
    r.fnmatch_lines(["wrote kernels/act.py (zoo kernels/pair.py::relu, renamed to act)",
                     "removed the module's other definitions: SQUARE, square, square_of",
                     "next: tirxh check kernels/act.py"])
    r = tirxh.run("zoo", "new", "times3", "--from", "triple", "--zoo", str(testzoo))
    assert r.ret == 0, r  # a kernel made by a factory, name= on its decorator
    r = tirxh.run("check", *CHECKERS, "--json")
    doc = json.loads(r.stdout)
    assert r.ret == 0 and [i["nodeid"] for i in doc["items"]] == [
        "kernels/act.py::act[n100]@sm_90a", "kernels/act.py::act[n1M]@sm_90a",
        "kernels/times3.py::times3[n50]@sm_90a", "kernels/times3.py::times3[n1M]@sm_90a"]
    for i in (0, 2):
        verdicts = {x["analyzer"]: x["verdict"] for x in doc["items"][i]["phases"][1]["results"]}
        assert verdicts == {"numsim": "clean", "synccheck": "clean", "racecheck": "clean"}


def test_new_into_another_directory(tirxh):
    tirxh.project(toml='[project]\nkernels = ["kernels/*.py", "extra/*.py"]\n')
    r = tirxh.run("zoo", "new", "v3", "--from", "vadd", "--dir", "extra")
    assert r.ret == 0 and (tirxh.path / "extra" / "v3.py").is_file(), r
    r = tirxh.run("zoo", "new", "v4", "--from", "vadd", "--dir", "nowhere")
    assert r.ret == 4 and "[project] kernels does not match this file" in r.stderr
    assert not (tirxh.path / "nowhere" / "v4.py").exists()


@pytest.mark.slow
def test_installed_tirxh_finds_its_zoo_outside_a_checkout(tmp_path):
    """A regular (non-editable) install into a directory, run from elsewhere: the zoo and the
    skills come from the installed package data, not from this checkout."""
    site, src = tmp_path / "site", tmp_path / "src"
    # a copy of the source, so that setuptools' build/ and egg-info stay out of this checkout
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".whl", "build", "*.egg-info", "__pycache__", ".pytest_cache"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--no-build-isolation", "--no-index", "--target", str(site), str(src)],
                   check=True, capture_output=True, cwd=tmp_path,
                   env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
    assert (site / "tirxh" / "zoo" / "kernels" / "vadd.py").is_file()
    assert (site / "tirxh" / "skills" / "tirxh-write-kernel" / "SKILL.md").is_file()
    env = dict(os.environ, PYTHONPATH=str(site), TIRXH_DISABLE_PLUGIN_AUTOLOAD="1",
               TIRXH_CACHE_DIR=str(tmp_path / "cache"))
    work = tmp_path / "elsewhere"
    work.mkdir()

    def tirxh(*args):
        return subprocess.run([sys.executable, "-m", "tirxh", *args], cwd=work, env=env,
                              capture_output=True, text=True, timeout=120)
    p = tirxh("zoo", "list", "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert Path(doc["zoo"]) == site / "tirxh" / "zoo"
    assert "vadd" in {k["name"] for k in doc["kernels"]}
    assert tirxh("init", "proj").returncode == 0
    work = work / "proj"
    p = tirxh("zoo", "new", "my_rows", "--from", "reduce_rows")
    assert p.returncode == 0, p.stderr
    p = tirxh("check", "kernels/my_rows.py", "-p", "tirxh_numsim.plugin")
    # every small case of the copied kernel passes (its count from the suite: variants add cases)
    small = len(small_cases("reduce_rows"))
    assert p.returncode == 0 and f" {small} passed" in p.stdout, p.stdout + p.stderr
    assert tirxh("skills", "install").returncode == 0
    assert (work / ".claude" / "skills" / "tirxh-debug-kernel" / "SKILL.md").is_file()
