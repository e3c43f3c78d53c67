"""benchmarks/bench_with.py: --share-inputs (variants of one suite that differ only in constants
share inputs and reference outputs; a parameter that inputs() or reference() takes, another
seed or other inputs are computed afresh) and --seeds with the bench plugin's own seed count."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

import bench_with as B  # benchmarks/ is on sys.path (tests/benchmarks/conftest.py)
import tirxh.lang as T
from tirxh.core import benchjob
from tirxh.core.errors import SuiteError

CALLS = {"inputs": 0, "reference": 0}


@T.kernel(grid=lambda n: n, block=lambda BLOCK: BLOCK)
def scale(x: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32, BLOCK: T.const = 32):
    i = T.ctaid.x * BLOCK + T.tid.x
    with T.if_(i < n):
        T.ptx.st.global_.f32(out.at(i), T.ptx.ld.global_.f32(x.at(i)))


def _inputs(rng, n):
    CALLS["inputs"] += 1
    return dict(x=rng.standard_normal(n).astype(np.float32), out=np.empty(n, np.float32), n=n)


def _reference(x, factor):
    CALLS["reference"] += 1
    return {"out": x * factor}


SUITE = T.suite(scale, inputs=_inputs, reference=_reference, outputs=["out"], cases=[
    T.case("a", n=64, factor=1.0), T.case("a_b64", n=64, factor=1.0, BLOCK=64),
    T.case("a_f2", n=64, factor=2.0), T.case("b", n=128, factor=1.0)])


def test_variants_share_inputs_and_reference_per_seed():
    memo: dict = {}
    a, a_b64, a_f2, b = SUITE.cases
    shared = B.SharedData(SUITE, memo)
    CALLS.update(inputs=0, reference=0)
    x1, x2 = shared.make_inputs(a, 1), shared.make_inputs(a, 2)
    e1 = shared.expected(a, x1)
    assert shared.make_inputs(a_b64, 1) is x1 and shared.make_inputs(a_b64, 2) is x2
    assert shared.expected(a_b64, x1) is e1  # BLOCK is not reference()'s
    assert CALLS == {"inputs": 2, "reference": 1}
    assert shared.expected(a_f2, x1) is not e1  # factor is
    assert shared.expected(a, dict(x1)) is not e1  # other inputs (equal values, not the same)
    assert shared.make_inputs(b, 1) is not x1  # n is inputs()'
    assert CALLS == {"inputs": 3, "reference": 3}
    np.testing.assert_array_equal(shared.make_inputs(b, 1)["x"],
                                  SUITE.make_inputs(b, 1)["x"])
    assert shared.grid(b) == SUITE.grid(b) and shared.name == SUITE.name


def test_only_the_last_four_entries_per_suite_are_kept():
    memo: dict = {}
    shared = B.SharedData(SUITE, memo)
    a = SUITE.cases[0]
    first = shared.make_inputs(a, 1)
    assert [shared.make_inputs(a, s) for s in (2, 3, 4, 1)][-1] is first
    shared.make_inputs(a, 5)
    assert [len(v) for k, v in memo.items() if k[0] == "inputs"] == [4]
    assert shared.make_inputs(a, 1) is not first


@T.kernel(grid=lambda n: n, block=32)
def twice(x: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32):
    i = T.ctaid.x * 32 + T.tid.x
    with T.if_(i < n):
        T.ptx.st.global_.f32(out.at(i), T.ptx.ld.global_.f32(x.at(i)) * 2.0)


@T.kernel(grid=lambda n: n, block=32)
def other(x: T.gptr[T.bf16], out: T.gptr[T.f32], n: T.u32):
    T.ptx.st.global_.f32(out.at(T.tid.x), 0.0)


def test_suites_of_one_inputs_function_share_unless_the_kernels_parameters_differ():
    """kda_decode_bulk declares kda_decode's inputs() and reference(): one job times both on one
    set of arrays (the float64 reference of a large decode case is ~30-70 s of host time). A
    kernel whose parameters differ (x bf16 here) never gets arrays made for another's."""
    memo: dict = {}
    CALLS.update(inputs=0, reference=0)
    a = SUITE.cases[0]
    x = B.SharedData(SUITE, memo).make_inputs(a, 1)
    e = B.SharedData(SUITE, memo).expected(a, x)
    same = T.suite(twice, inputs=_inputs, reference=_reference, outputs=["out"], cases=[a])
    assert same.name != SUITE.name
    assert B.SharedData(same, memo).make_inputs(a, 1) is x
    assert B.SharedData(same, memo).expected(a, x) is e
    assert CALLS == {"inputs": 1, "reference": 1}
    diff = T.suite(other, inputs=_inputs, reference=_reference, outputs=["out"], cases=[a])
    with pytest.raises(SuiteError, match=r"parameter 'x' is a gptr\[bf16\] \(bfloat16\); the "
                                         r"array is float32"):
        B.SharedData(diff, memo).make_inputs(a, 1)     # made and checked afresh, not served
    assert CALLS["inputs"] == 2


def test_seeds_override_the_plugins_seed_count_and_before():
    """The bench plugin passes its own seeds (1..4) and before=2; --seeds 1 must give one run
    before timing and guards asking for exactly that (seeds [1] with before=2 is refused)."""
    a = argparse.Namespace(seeds=1, share_inputs=True, no_timing=True, exec_s=5.0)
    build = B.with_overrides(a, benchjob.build_job)
    compiled = scale.compile("sm_90a", **SUITE.consts(SUITE.cases[0]))
    job = build(compiled, SUITE, SUITE.cases[0], seeds=range(1, 5), before=2)
    assert [(r.seed, r.when) for r in job.runs] == [(1, "before")]
    assert (job.guards.seeds_before, job.guards.seeds_after) == (1, 0)
    assert job.budgets.exec_s == 5.0
    two = B.with_overrides(argparse.Namespace(seeds=2, share_inputs=False, no_timing=False,
                                              exec_s=None), benchjob.build_job)
    job = two(compiled, SUITE, SUITE.cases[0], seeds=range(1, 5), before=2)
    assert [(r.seed, r.when) for r in job.runs] == [(1, "before"), (2, "after")]


def test_no_timing_is_tirxh_benchs_own_option(monkeypatch, tmp_path):
    """A smoke pass exits 0 when every item was verified: the option is tirxh's, not a job
    edit that left every item 'not timed' and the run exiting 1."""
    seen = []
    monkeypatch.setattr(B.tirxh, "main", lambda argv: seen.append(argv) or 0)
    # main() installs its job builder in the bench plugin: restore the plugin's afterwards
    monkeypatch.setattr(B.bench_plugin, "build_job", B.bench_plugin.build_job)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "zoo").mkdir()
    assert B.main(["--kcoral", "h:1", "--no-timing", "-k", "vadd", "--report-log", "r"]) == 0
    assert seen == [["bench", "--kcoral", "h:1", "-k", "vadd", "--no-timing", "--report-log", "r"]]
