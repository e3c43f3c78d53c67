"""Cold and warm ``tirxh check`` / ``tirxh build`` over the zoo (CPU), for docs/PERFORMANCE.md.

    python benchmarks/zoo_times.py [--repeat N] [--json OUT]

"Cold" runs with an empty artifact cache (a fresh ``TIRXH_CACHE_DIR``), "warm" runs again with
the cache the cold run filled. Each command runs in its own process, as a user runs it; the
figures are the best of `--repeat` runs (wall seconds, and the child's user+sys CPU seconds,
which a busy shared machine disturbs less than the wall clock).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "zoo"


def _run(args: list, env: dict) -> "tuple[float, float]":
    """(wall s, child CPU s) of one ``tirxh`` process; a non-zero exit is an error."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "tirxh", *args], cwd=ZOO, env=env,
                       capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"tirxh {' '.join(args)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(repeat: int) -> dict:
    best: dict = {}
    with tempfile.TemporaryDirectory(prefix="tirxh-zoo-times-") as tmp:
        for _ in range(repeat):
            for cmd in ("check", "build"):
                cache = Path(tmp) / "cache"
                shutil.rmtree(cache, ignore_errors=True)
                env = dict(os.environ, TIRXH_CACHE_DIR=str(cache))
                args = [cmd, "-q"] + (["--builddir", str(Path(tmp) / "build")]
                                      if cmd == "build" else [])
                for phase in ("cold", "warm"):
                    wall, cpu = _run(args, env)
                    key = f"{cmd} {phase}"
                    w, c = best.get(key, (wall, cpu))
                    best[key] = (min(w, wall), min(c, cpu))
    return {k: {"wall_s": round(w, 2), "cpu_s": round(c, 2)} for k, (w, c) in best.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", metavar="OUT")
    a = ap.parse_args(argv)
    res = measure(a.repeat)
    for k, v in res.items():
        print(f"{k:<12} {v['wall_s']:6.2f} s wall  {v['cpu_s']:6.2f} s CPU")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
