"""A third-party plugin, proven: pip-install examples/tirxh-example-plugin (a regular install, as
from PyPI) into a fresh virtual environment, then show that `tirxh plugins` lists it, `tirxh check`
runs its analyzer and its instruction binding, and `-p no:example` removes both.

The fresh venv sees the packages of the interpreter running the tests (tirxh and its
dependencies, pip, setuptools and wheel: a venv's, the user site's or the system's) through a
``.pth`` file that adds those site directories after its own, so it works the same in a plain
venv and in CI, offline (``--no-index --no-deps --no-build-isolation``).
"""

import json
import os
import site
import subprocess
import sys

import pytest

from .pytester import REPO, SCALE

pytestmark = pytest.mark.slow(reason="creates a virtual environment and pip-installs a plugin")

EXAMPLE = REPO / "examples" / "tirxh-example-plugin"

DIVLOOP = '''
import tirxh.lang as T


@T.kernel(block=32)
def divloop(out: T.gptr[T.f32], n: T.u32):
    acc = T.reg(T.f32, 1.0)
    with T.range(n):
        acc.set(T.ptx.div.rn.f32(acc, 3.0))
    T.ptx.pmevent(3)
    T.ptx.st.global_.f32(out.at(T.tid.x), acc)
'''


def _outer_site_dirs() -> list:
    """Where this interpreter's packages are: its site-packages (venv or system) and user site."""
    dirs = list(site.getsitepackages()) + [site.getusersitepackages()]
    dirs += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    return list(dict.fromkeys(d for d in dirs if os.path.isdir(d)))


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory):
    root = tmp_path_factory.mktemp("venv")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    purelib = subprocess.run([str(py), "-c", "import sysconfig; "
                              "print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # addsitedir, not a bare path: the outer site's own .pth files (editable installs) must run
    lines = [f"import site; site.addsitedir({d!r})" for d in _outer_site_dirs()]
    with open(os.path.join(purelib, "zz_outer_site.pth"), "w") as f:
        f.write("\n".join(lines) + "\n")
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    # a regular (non-editable) install, as a plugin from PyPI would be
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                    "--no-build-isolation", str(EXAMPLE)], check=True, env=env, cwd=root)
    return py


def _tirxh(py, tirxh, *args):
    env = dict(os.environ, TIRXH_CACHE_DIR=str(tirxh.cache))
    env.pop("TIRXH_DISABLE_PLUGIN_AUTOLOAD", None)
    env.pop("PYTHONPATH", None)  # only what the venv sees
    return subprocess.run([str(py), "-m", "tirxh", *args], cwd=tirxh.path, env=env,
                          capture_output=True, text=True, timeout=300)


def test_installed_plugin_is_listed_runs_and_can_be_blocked(venv_python, tirxh):
    tirxh.project(divloop=DIVLOOP, scale=SCALE)
    p = _tirxh(venv_python, tirxh, "plugins", "--json")
    assert p.returncode == 0, p.stderr
    plugins = {x["name"]: x for x in json.loads(p.stdout)["plugins"]}
    ex = plugins["example"]
    assert (ex["distribution"], ex["version"], ex["origin"]) == \
        ("tirxh-example-plugin", "0.1.0", "entrypoint")
    assert ex["hooks"] == ["tirxh_addoption", "tirxh_check_item", "tirxh_register_instructions"]
    assert "site-packages" in ex["file"]  # the installed copy, not the source tree
    assert plugins["compile"]["distribution"] == "tirxh"

    p = _tirxh(venv_python, tirxh, "check", "--json")
    assert p.returncode in (0, 1), p.stderr  # other installed analyzers may have opinions
    items = {i["kernel"]: i for i in json.loads(p.stdout)["items"]}
    div = next(r for r in items["divloop"]["phases"][1]["results"]
               if r["analyzer"] == "div-in-loop")
    assert div["verdict"] == "review"
    assert div["findings"][0]["kind"] == "example.div-in-loop"
    assert div["findings"][0]["where"]["line"] == 8
    assert div["stats"]["instructions"]["pmevent"] == 1
    scale = next(r for r in items["scale"]["phases"][1]["results"]
                 if r["analyzer"] == "div-in-loop")
    assert scale["verdict"] == "clean"

    p = _tirxh(venv_python, tirxh, "plugins", "-p", "no:example")
    assert "example " not in p.stdout and "blocked: example" in p.stdout
    p = _tirxh(venv_python, tirxh, "check", "-p", "no:example", "--json")
    doc = json.loads(p.stdout)
    assert all(r["analyzer"] != "div-in-loop" for i in doc["items"] for r in i.get(
        "phases", [{}])[-1].get("results", []))
    divloop = next(i for i in doc["items"] if i["kernel"] == "divloop")
    # without the plugin, its pmevent binding is gone too: a compile error at the user's line
    assert divloop["outcome"] == "failed"
    assert "pmevent" in divloop["phases"][0]["longrepr"]
    assert divloop["phases"][0]["location"][1] == 9
