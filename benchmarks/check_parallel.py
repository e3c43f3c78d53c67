"""``tirxh check`` over the zoo, serial against ``-n N``, alternated (A B A B), for
docs/PERFORMANCE.md ("`tirxh check -n` over the zoo").

    python benchmarks/check_parallel.py [-n auto] [--repeat 2] [--json OUT] [PATH ...]

PATHs (relative to zoo/; default: the whole zoo) select the kernel files. A warm-up run fills the
artifact cache (a temporary ``TIRXH_CACHE_DIR``) and the durations history that orders ``-n``'s
work; then serial and parallel runs alternate, so a shared machine's changing load falls on both
alike. Each run is its own process, as a user runs it: wall seconds and user+sys CPU seconds
(workers included), and the 1-minute load average before it. On a machine shared with other
sessions the wall clock measures the share the scheduler gives this session (with autogroup,
one share for the session however many processes it runs), so measure ``-n`` on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from zoo_times import _run  # benchmarks/ is on sys.path when this script runs


def measure(n: str, repeat: int, paths: list) -> dict:
    """{"serial": [...], "-n N": [...]}: each a list of {"wall_s", "cpu_s", "load"}."""
    runs: dict = {"serial": [], f"-n {n}": []}
    with tempfile.TemporaryDirectory(prefix="tirxh-check-parallel-") as tmp:
        env = dict(os.environ, TIRXH_CACHE_DIR=str(Path(tmp) / "cache"))
        _run(["check", "-q", *paths], env)  # warm-up: the cache and the durations history
        for _ in range(repeat):
            for key, extra in (("serial", []), (f"-n {n}", ["-n", n])):
                load = os.getloadavg()[0]
                wall, cpu = _run(["check", "-q", *extra, *paths], env)
                runs[key].append({"wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                                  "load": round(load, 2)})
    return runs


def summary(runs: dict) -> list:
    """One line per mode (median wall and CPU), then the wall-time ratio."""
    lines, med = [], {}
    for key, rs in runs.items():
        med[key] = statistics.median(r["wall_s"] for r in rs)
        cpu = statistics.median(r["cpu_s"] for r in rs)
        loads = ", ".join(f"{r['load']:.1f}" for r in rs)
        lines.append(f"{key:<10} {med[key]:8.2f} s wall  {cpu:8.2f} s CPU  (load before: "
                     f"{loads})")
    serial, par = med.values()
    lines.append(f"parallel / serial wall time: {par / serial:.2f}")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", default="auto", help="tirxh check's -n for the parallel runs")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", metavar="OUT")
    ap.add_argument("paths", nargs="*", metavar="PATH")
    a = ap.parse_args(argv)
    runs = measure(a.n, a.repeat, a.paths)
    print("\n".join(summary(runs)))
    if a.json:
        Path(a.json).write_text(json.dumps(runs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
