"""``tirxh bench`` with per-job overrides a device session needs: a short execution budget (a
kernel that hangs costs `--exec-s` seconds of the board instead of the default 120 s), timing off
(a correctness-only smoke run), or fewer correctness seeds.

    (device) python benchmarks/bench_with.py --kcoral HOST:PORT --exec-s 20 --no-timing -k EXPR
    (device) python benchmarks/bench_with.py --kcoral HOST:PORT --exec-s 60 --seeds 1 -k EXPR

Run a correctness-only smoke pass before timing kernels that only the simulator has run: numsim
runs every CTA to completion in one legal order, while hardware may interleave CTAs in an order
that deadlocks (2026-12-01: a split-K GEMM that numsim passed hung on the H200).
"""

from __future__ import annotations

import argparse
import os
import sys

import tirxh
from tirxh.core import benchjob
from tirxh.plugins import bench as bench_plugin


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kcoral", required=True, help="the daemon's HOST:PORT")
    p.add_argument("--exec-s", type=float, default=None, help="execution budget per job")
    p.add_argument("--no-timing", action="store_true", help="correctness only")
    p.add_argument("--seeds", type=int, default=None,
                   help="correctness seeds (1: one run before timing; default: the protocol's)")
    p.add_argument("-k", dest="keyword", required=True, help="tirxh -k selection")
    p.add_argument("--rootdir", default="zoo", help="the tirx.toml project (default: zoo)")
    a, rest = p.parse_known_args(argv)
    build = benchjob.build_job

    def job_with_overrides(compiled, suite, case, **kw):
        if a.seeds is not None:
            kw["seeds"] = benchjob.CORRECTNESS_SEEDS[:a.seeds]
        job = build(compiled, suite, case, **kw)
        if a.no_timing:
            job.timing.enabled = False
        if a.exec_s is not None:
            job.budgets.exec_s = a.exec_s
        return job

    bench_plugin.build_job = job_with_overrides  # the name the bench plugin calls
    os.chdir(a.rootdir)
    return tirxh.main(["bench", "--kcoral", a.kcoral, "-k", a.keyword, *rest])


if __name__ == "__main__":
    sys.exit(main())
