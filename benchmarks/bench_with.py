"""``tirxh bench`` with per-job overrides a device session needs: a short execution budget (a
kernel that hangs costs `--exec-s` seconds of the board instead of the default 120 s), timing off
(a correctness-only smoke run), or fewer correctness seeds.

    (device) python benchmarks/bench_with.py --kcoral HOST:PORT --exec-s 20 --no-timing -k EXPR
    (device) python benchmarks/bench_with.py --kcoral HOST:PORT --exec-s 60 --seeds 1 -k EXPR
    (device) python benchmarks/bench_with.py --kcoral HOST:PORT --share-inputs -k EXPR

Run a correctness-only smoke pass before timing kernels that only the simulator has run: numsim
runs every CTA to completion in one legal order, while hardware may interleave CTAs in an order
that deadlocks (2026-12-01: a split-K GEMM that numsim passed hung on the H200).

`--share-inputs`: variants of one kernel that differ only in constants (BLOCK, CTAS, EF, ...)
get the same inputs and reference outputs, yet each job builds them again: 20-100 s of numpy per
large case on the host. With it, a suite's inputs are made once per (the parameters its inputs()
takes, seed) and its reference once per (those inputs, the parameters reference() takes); the
latest four entries per inputs() function are kept (consecutive items of one suite share them).
Suites that declare the same inputs() function for kernels of the same runtime parameters share
them too (kda_decode_bulk takes kda_decode's inputs and reference: one job times both on the
same arrays); another kernel signature never meets another's inputs.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys

import tirxh
from tirxh.core import benchjob
from tirxh.plugins import bench as bench_plugin


def _taken(fn, params: dict) -> tuple:
    """The parameters `fn` is called with (tirxh matches them by name; **kwargs takes all)."""
    sig = inspect.signature(fn).parameters
    every = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.values())
    return tuple(sorted((k, repr(v)) for k, v in params.items() if every or k in sig))


class SharedData:
    """A suite whose make_inputs and expected are memoized in `memo`: per suite name and kind
    the last KEEP entries (the protocol's four seeds); everything else is the suite's own. An
    expected entry holds the inputs it was computed from and matches only those (by identity)."""

    KEEP = 4

    def __init__(self, suite, memo: dict):
        self._suite, self._memo = suite, memo

    def __getattr__(self, name):
        return getattr(self._suite, name)

    def _get(self, kind, same, key, make):
        # by the function that makes the value and the kernel's runtime parameters it must fit
        # (names and declared types), not the suite's name: two kernels sharing inputs() share
        fn = self._suite.inputs if kind == "inputs" else self._suite.reference
        params = tuple(repr(p) for p in self._suite.kernel.runtime_params)
        entries = self._memo.setdefault((kind, fn, params), [])
        for k, v in entries:
            if same(k, key):
                return v
        v = make()
        entries.append((key, v))
        del entries[:-self.KEEP]
        return v

    def make_inputs(self, case, seed=0):
        return self._get("inputs", lambda a, b: a == b,
                         (_taken(self._suite.inputs, case.params), seed),
                         lambda: self._suite.make_inputs(case, seed))

    def expected(self, case, inputs):
        taken = () if self._suite.reference is None else \
            _taken(self._suite.reference, case.params)
        return self._get("expected", lambda a, b: a[0] is b[0] and a[1] == b[1],
                         (inputs, taken), lambda: self._suite.expected(case, inputs))


def with_overrides(a, build):
    """`build` (benchjob.build_job) with the command line's overrides: --seeds N runs seeds
    1..N, the first half (rounded up) before timing (the bench plugin's ``before`` is for its
    own seed count); --share-inputs, --exec-s. (--no-timing is `tirxh bench --no-timing`.)"""
    memo: dict = {}

    def job_with_overrides(compiled, suite, case, **kw):
        if a.share_inputs:
            suite = SharedData(suite, memo)
        if a.seeds is not None:
            kw["seeds"], kw["before"] = range(1, a.seeds + 1), None
        job = build(compiled, suite, case, **kw)
        if a.exec_s is not None:
            job.budgets.exec_s = a.exec_s
        return job
    return job_with_overrides


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kcoral", required=True, help="the daemon's HOST:PORT")
    p.add_argument("--exec-s", type=float, default=None, help="execution budget per job")
    p.add_argument("--no-timing", action="store_true",
                   help="correctness only (tirxh bench --no-timing: exit 0 when all verified)")
    p.add_argument("--seeds", type=int, default=None,
                   help="correctness seeds (1: one run before timing; default: the protocol's)")
    p.add_argument("--share-inputs", action="store_true",
                   help="make a suite's inputs and reference once for all its variants")
    p.add_argument("-k", dest="keyword", required=True, help="tirxh -k selection")
    p.add_argument("--rootdir", default="zoo", help="the tirx.toml project (default: zoo)")
    a, rest = p.parse_known_args(argv)
    bench_plugin.build_job = with_overrides(a, benchjob.build_job)  # the name it calls
    os.chdir(a.rootdir)
    return tirxh.main(["bench", "--kcoral", a.kcoral, "-k", a.keyword,
                       *(["--no-timing"] if a.no_timing else []), *rest])


if __name__ == "__main__":
    sys.exit(main())
