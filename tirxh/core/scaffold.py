"""``tirxh init DIR``: a starter project (``tirx.toml`` + one kernel with a Suite) that checks
clean, so a new user starts from something that works and is measured."""

from __future__ import annotations

import json
from pathlib import Path

from .errors import UsageError

TIRX_TOML = '''\
# tirxh project file: see `tirxh --help` and docs/CLI.md
[project]
name = {name}
targets = ["sm_90a"]
kernels = ["kernels/*.py"]
requires = []

[check]
fail_on = "error"

[build]
builddir = "tirx-build"
'''

VADD = '''\
"""Vector add: out[i] = a[i] + b[i] for i < n.

One thread per element, 256 threads per block; every instruction is spelled as PTX. The numpy
reference beside the kernel is what numerical checkers compare against.
"""

import numpy as np

import tirxh.lang as T

BLOCK = 256


@T.kernel(grid=lambda n: T.cdiv(n, BLOCK), block=BLOCK)
def vadd(a: T.gptr[T.f32], b: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32):
    i = T.ctaid.x * BLOCK + T.tid.x                  # mad.lo.u32
    with T.if_(i < n):                               # setp.lt.u32 + branch
        x = T.ptx.ld.global_.f32(a.at(i))
        y = T.ptx.ld.global_.f32(b.at(i))
        T.ptx.st.global_.f32(out.at(i), x + y)       # add.f32, st.global.f32


def inputs(rng, n):
    return dict(a=rng.standard_normal(n, np.float32), b=rng.standard_normal(n, np.float32),
                out=np.zeros(n, np.float32), n=n)


def reference(a, b, **_):
    return {"out": a + b}


SUITE = T.suite(vadd, inputs=inputs, reference=reference, outputs=["out"],
                cases=[T.case("n1000", n=1000), T.case("n1m", n=1 << 20, small=False)],
                tolerance=T.tolerance(rtol=0, atol=0),
                flops=lambda n: n, bytes=lambda n: 12 * n)
'''

GITIGNORE = "tirx-build/\n__pycache__/\n"


def init_project(root: Path, force: bool = False) -> list:
    """Write the starter files under `root`; refuse to overwrite unless `force`."""
    root = Path(root)
    files = {
        root / "tirx.toml": TIRX_TOML.format(name=json.dumps(root.resolve().name)),
        root / "kernels" / "vadd.py": VADD,
        root / ".gitignore": GITIGNORE,
    }
    existing = [p for p in files if p.exists()]
    if existing and not force:
        raise UsageError(f"init {root}: {', '.join(map(str, existing))} already exist(s); "
                         f"use --force to overwrite")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return list(files)
