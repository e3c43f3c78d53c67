"""A pytester-style helper: temporary ``tirx.toml`` projects, and ``tirxh`` run in-process
(through ``main(argv)``, output captured) or as a subprocess (``python -m tirxh``).

Runs are hermetic: the artifact cache lives in the test's temporary directory and installed
entry-point plugins are not autoloaded unless a test asks for them (``autoload=True``), so the
outcome does not depend on which analyzer plugins happen to be installed.
"""

from __future__ import annotations

import contextlib
import fnmatch
import io
import os
import subprocess
import sys
import textwrap
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from tirxh.core import ir
from tirxh.core.lang.trace import Trace, emit, tracing

REPO = Path(__file__).resolve().parents[2]

VADD = '''
import numpy as np
import tirxh.lang as T


@T.kernel(grid=lambda n: T.cdiv(n, 128), block=128)
def vadd(a: T.gptr[T.f32], b: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32):
    i = T.ctaid.x * 128 + T.tid.x
    with T.if_(i < n):
        x = T.ptx.ld.global_.f32(a.at(i))
        y = T.ptx.ld.global_.f32(b.at(i))
        T.ptx.st.global_.f32(out.at(i), x + y)


def inputs(rng, n):
    return dict(a=rng.standard_normal(n, np.float32), b=rng.standard_normal(n, np.float32),
                out=np.zeros(n, np.float32), n=n)


SUITE = T.suite(vadd, inputs=inputs, reference=lambda a, b, **_: {"out": a + b},
                outputs=["out"], cases=[T.case("small", n=1000), T.case("big", n=1 << 20)])
'''

# a compile-only kernel (no Suite) whose body uses a misspelled instruction on line 7
BAD = '''
import tirxh.lang as T


@T.kernel(block=32)
def broken(out: T.gptr[T.f32]):
    x = T.ptx.mov.f32(1.0)
    T.ptx.st.globl.f32(out.at(T.tid.x), x)
'''

SCALE = '''
import tirxh.lang as T


@T.kernel(block=64)
def scale(out: T.gptr[T.f32], k: T.const = 2):
    x = T.ptx.ld.global_.f32(out.at(T.tid.x))
    T.ptx.st.global_.f32(out.at(T.tid.x), x * float(k))
'''


# a project plugin (tirxconf.py) with an analyzer that checks every item and finds it clean, so
# items pass in hermetic runs (no analyzer plugins are autoloaded there)
CLEAN_ANALYZER = '''
from tirxh.api import AnalyzerResult


def tirxh_check_item(item):
    return AnalyzerResult("always-clean", "clean")
'''


def membar_first(k, ctx):
    """An IR transform for tests: a ``membar.cta`` before the body (a new IR; `k` untouched);
    hands back how many statements it added and its options."""
    t = Trace(k.name, ctx.isa)
    t.regs = list(k.regs)
    t.loc_override = k.loc
    with tracing(t):
        emit("membar.cta")
    ctx.output = {"added": len(t.blocks[0].stmts), "options": dict(ctx.options)}
    return dataclasses.replace(k, body=ir.Block(t.blocks[0].stmts + list(k.body.stmts)),
                               regs=list(t.regs))


DEFAULT_TOML = '''
[project]
name = "demo"
targets = ["sm_90a"]
kernels = ["kernels/*.py"]
'''


@dataclass
class RunResult:
    ret: int
    stdout: str
    stderr: str

    @property
    def outlines(self) -> list:
        return self.stdout.splitlines()

    @property
    def errlines(self) -> list:
        return self.stderr.splitlines()

    def fnmatch_lines(self, patterns: list, err: bool = False) -> None:
        """Each glob pattern must match a line, in order (later lines after earlier ones)."""
        lines = self.errlines if err else self.outlines
        i = 0
        for pat in patterns:
            while i < len(lines) and not fnmatch.fnmatch(lines[i], pat):
                i += 1
            if i == len(lines):
                raise AssertionError(f"pattern {pat!r} not found in order in:\n" +
                                     "\n".join(lines))
            i += 1

    def __str__(self) -> str:
        return f"exit {self.ret}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


class Tirxh:
    """One temporary project directory and ways to run ``tirxh`` in it."""

    def __init__(self, path: Path, monkeypatch):
        self.path = path
        self.monkeypatch = monkeypatch
        self.cache = path / ".tirxh-cache"
        monkeypatch.setenv("TIRXH_CACHE_DIR", str(self.cache))
        monkeypatch.delenv("NO_COLOR", raising=False)

    def write(self, relpath: str, text: str) -> Path:
        p = self.path / relpath
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
        return p

    def project(self, toml: str = DEFAULT_TOML, **kernels: str) -> Path:
        """Write ``tirx.toml`` and ``kernels/<name>.py`` for each keyword argument."""
        self.write("tirx.toml", toml)
        for name, text in kernels.items():
            self.write(f"kernels/{name}.py", text)
        return self.path

    def run(self, *args: str, autoload: bool = False, cwd: "Path | None" = None) -> RunResult:
        """``tirxh ARGS`` in this process, with stdout/stderr captured."""
        from tirxh.core.cli import main
        self.monkeypatch.chdir(cwd or self.path)
        if autoload:
            self.monkeypatch.delenv("TIRXH_DISABLE_PLUGIN_AUTOLOAD", raising=False)
        else:
            self.monkeypatch.setenv("TIRXH_DISABLE_PLUGIN_AUTOLOAD", "1")
        from tirxh.core import registry
        saved = registry._ACTIVE  # a run activates its own toolset; leave others' as it was
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                ret = main(list(args))
        finally:
            registry._ACTIVE = saved
        return RunResult(int(ret), out.getvalue(), err.getvalue())

    def run_subprocess(self, *args: str, python: str = sys.executable, env: "dict | None" = None,
                       autoload: bool = False, timeout: float = 120) -> RunResult:
        """``python -m tirxh ARGS`` in a child process (the repository on PYTHONPATH)."""
        e = dict(os.environ)
        e["PYTHONPATH"] = os.pathsep.join([str(REPO), e.get("PYTHONPATH", "")]).rstrip(
            os.pathsep)
        e["TIRXH_CACHE_DIR"] = str(self.cache)
        if autoload:
            e.pop("TIRXH_DISABLE_PLUGIN_AUTOLOAD", None)
        else:
            e["TIRXH_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        e.update(env or {})
        p = subprocess.run([python, "-m", "tirxh", *args], cwd=self.path, env=e,
                           capture_output=True, text=True, timeout=timeout)
        return RunResult(p.returncode, p.stdout, p.stderr)
