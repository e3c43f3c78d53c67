"""The README's commands, .ci/run and the packaging metadata agree with each other."""

import argparse
import importlib.util
import os
import re
import subprocess
import sys

from tirxh.core.cli import build_argparser
from tirxh.core.config import Parser, tomllib  # tomli on Python 3.10
from tirxh.core.pluginmanager import build_plugin_manager

from .pytester import REPO


def test_ci_runs_exactly_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    assert "python -m pytest -q" in readme
    runs = [ln.strip() for ln in ci.splitlines() if "-m pytest" in ln and
            not ln.strip().startswith(("#", "echo"))]
    assert runs == ['exec "$PYTHON" -m pytest -q']
    assert (REPO / ".ci" / "run").stat().st_mode & 0o111
    subprocess.run(["bash", "-n", str(REPO / ".ci" / "run")], check=True)


def test_readme_main_job_uses_the_console_script_and_the_zoo():
    readme = (REPO / "README.md").read_text()
    assert re.search(r"pip install -e \"\.\[test\]\" .*plugins/\*/.* && tirxh check --rootdir zoo",
                     readme)
    assert (REPO / "zoo" / "tirx.toml").is_file()


def test_readme_command_1_installs_what_command_2_needs():
    """Run in order on a fresh machine, the README's two commands work: the first installs the
    test extra, which holds pytest and everything the test command's options need."""
    readme = (REPO / "README.md").read_text()
    assert '-e ".[test]"' in readme.split("python -m pytest -q")[0]
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    test_extra = " ".join(meta["project"]["optional-dependencies"]["test"])
    addopts = meta["tool"]["pytest"]["ini_options"]["addopts"]
    assert "pytest" in test_extra
    if "-n " in addopts:
        assert "pytest-xdist" in test_extra


def _collect(*args, run_all: bool = False):
    e = {k: v for k, v in os.environ.items() if k != "TIRXH_TESTS"}
    if run_all:
        e["TIRXH_TESTS"] = "all"
    p = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist",
                        "-o", "addopts=--import-mode=importlib -p tirxh.testing", *args],
                       cwd=REPO, env=e, capture_output=True, text=True, timeout=300)
    return p.stdout


def test_slow_tests_are_left_out_by_default_and_ci_runs_them():
    target = "tests/kcoral/test_restart.py"
    assert "deselected" in _collect(target).splitlines()[-1]
    assert "test_restart.py::" in _collect(target, run_all=True)
    ci = (REPO / ".ci" / "run").read_text()
    assert "export TIRXH_TESTS=all" in ci


def test_the_slow_list_names_existing_files():
    spec = importlib.util.spec_from_file_location("_root_conftest", REPO / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    missing = [f for f in conftest.SLOW_FILES if not (REPO / f).is_file()]
    assert not missing, f"conftest.py SLOW_FILES names files that do not exist: {missing}"


def test_console_scripts_resolve():
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    scripts = meta["project"]["scripts"]
    assert scripts["tirxh"] == "tirxh.core.cli:main"
    from tirxh.core.cli import main
    assert callable(main)
    deps = " ".join(meta["project"]["dependencies"])
    for needed in ("pluggy", "packaging", "cuda-bindings", "nvidia-nvjitlink",
                   "nvidia-cuda-nvdisasm", "tomli>=2.0; python_version < '3.11'"):
        assert needed in deps


def test_every_command_is_in_the_readme_table_and_cli_md():
    """Built-in commands and the commands of the plugins installed here (zoo, ptx, skills,
    mcp) each have a row in README's command table and in docs/CLI.md."""
    ap = build_argparser(Parser(), build_plugin_manager().commands())
    names = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction)).choices
    readme_rows = [ln for ln in (REPO / "README.md").read_text().splitlines()
                   if ln.startswith("| `tirxh ")]
    cli_rows = [ln for ln in (REPO / "docs" / "CLI.md").read_text().splitlines()
                if ln.startswith("| `")]
    assert {"zoo", "ptx", "skills"} <= set(names)
    for name in names:
        assert any(r.startswith(f"| `tirxh {name}") for r in readme_rows), name
        assert any(r.startswith(f"| `{name}") for r in cli_rows), name
