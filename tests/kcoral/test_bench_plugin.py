"""``tirxh bench`` glue: jobs built from a compiled kernel and its suite (`tirxh.api.build_job`,
in tirxh/core/benchjob.py); refusals typed by code; result verdicts."""

import hashlib

import numpy as np
import pytest

import tirxh.lang as T
from kcoral.errors import KCoralError, Refusal
from kcoral.job import Job
from tirxh.api import bench_error, build_job
from tirxh.core.compiler import compile_kernel
from tirxh.plugins.bench import BenchResult


@T.kernel(grid=lambda n: T.cdiv(n, 256), block=256)
def vadd(a: T.gptr[T.f32], b: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32):
    i = T.ctaid.x * 256 + T.tid.x
    with T.if_(i < n):
        x = T.ptx.ld.global_.f32(a.at(i))
        y = T.ptx.ld.global_.f32(b.at(i))
        T.ptx.st.global_.f32(out.at(i), x + y)


@T.kernel(grid=1, block=32)
def uses_map(m: T.tensormap, src: T.gptr[T.bf16], out: T.gptr[T.f32], n: T.u32):
    i = T.tid.x
    with T.if_(i < n):
        T.ptx.st.global_.f32(out.at(i), T.ptx.ld.global_.f32(out.at(i)))


def inputs(rng, n):
    return dict(a=rng.standard_normal(n, dtype=np.float32),
                b=rng.standard_normal(n, dtype=np.float32), out=np.empty(n, np.float32), n=n)


SUITE = T.suite(vadd, inputs=inputs, reference=lambda a, b: {"out": a + b}, outputs=["out"],
                cases=[T.case("n1000", n=1000)], tolerance=T.tolerance(rtol=1e-6),
                flops=lambda n: n, bytes=lambda n: 12 * n,
                baselines=[{"name": "torch.add", "args": {"n": "n", "x": "y"}}])


def test_build_job_from_suite():
    ck = compile_kernel(vadd, "sm_90a")
    blobs = {}

    def put(data):
        import hashlib
        d = hashlib.sha256(data).hexdigest()
        blobs[d] = data
        return d
    built = build_job(ck, SUITE, SUITE.cases[0], put=put)
    assert isinstance(built, Job)  # the typed model, validated on the client
    doc = built.to_doc()
    job = Job.from_json(doc)  # and its JSON form is valid
    from kcoral.job import check_module
    check_module("cubin", ck.cubin, ["vadd"])
    check_module("ptx", ck.ptx.encode(), ["vadd"])
    assert job.doc["launches"][0]["grid"] == [4, 1, 1]
    assert job.launches[0].args[3].scalar == 1000 and job.launches[0].args[3].dtype == "u32"
    assert doc["launches"][0]["args"][3] == {"scalar": 1000, "dtype": "u32"}
    assert [b["name"] for b in doc["buffers"] if b["output"]] == ["out"]
    assert doc["module"] == {"format": "cubin", "blob": put(ck.cubin),
                             "ir": put(ck.ir_json().encode())}  # the IR for the sim board
    assert [(r["seed"], r["when"]) for r in doc["runs"]] == \
        [(1, "before"), (2, "before"), (3, "after"), (4, "after")]  # 2 + 2 (issue 17)
    assert doc["guards"]["seeds_before"] == doc["guards"]["seeds_after"] == 2
    assert doc["timing"]["seed"] == 1  # the first run's inputs are timed
    assert job.blobs() <= set(blobs)
    from kcoral.blobs import array_from_bytes
    r0 = doc["runs"][0]
    a = array_from_bytes(blobs[r0["inputs"]["a"]])
    b = array_from_bytes(blobs[r0["inputs"]["b"]])
    assert np.array_equal(array_from_bytes(blobs[r0["expected"]["out"]]), a + b)
    assert doc["work"] == {"flops": 1000.0, "bytes": 12000.0}
    assert [(c.buffer, c.rtol, c.atol, c.rms) for c in job.checks] == [("out", 1e-6, 0.0, None)]
    # a baseline arg naming a case parameter takes its value
    # optional: a daemon without the baseline times the kernel alone and says so
    assert doc["baselines"] == [{"name": "torch.add", "args": {"n": 1000, "x": "y"},
                                 "optional": True}]


def test_rms_relative_atol_resolves_per_seed_and_the_check_keeps_the_strictest():
    """A job carries absolute tolerances: each run atol_rms * RMS(its own reference), as
    `Tolerance.compare` applies the rule (kcoral compares with rtol/atol/rms only); the check's
    atol, for the guards' comparisons no run covers, is the smallest over the job's seeds."""
    suite = T.suite(vadd, inputs=inputs, reference=lambda a, b: {"out": a + b}, outputs=["out"],
                    cases=[T.case("n1000", n=1000)],
                    tolerance=T.tolerance(rtol=0.05, atol_rms=0.5, rms=0.03))
    ck = compile_kernel(vadd, "sm_90a")
    seeds = (1, 2)
    doc = build_job(ck, suite, suite.cases[0], seeds=seeds, before=1).to_doc()
    rms = [float(np.sqrt(np.mean(np.square((x["a"] + x["b"]).astype(np.float64)))))
           for x in (suite.make_inputs(suite.cases[0], s) for s in seeds)]
    (check,) = doc["checks"]
    assert check["atol"] == pytest.approx(0.5 * min(rms), rel=1e-12) and check["rtol"] == 0.05
    assert check["rms"] == 0.03 and 0.5 < check["atol"] < 1.0
    assert [r["atol"]["out"] for r in doc["runs"]] == \
        [pytest.approx(0.5 * x, rel=1e-12) for x in rms]
    assert rms[0] != rms[1]
    plain = build_job(ck, SUITE, SUITE.cases[0], seeds=seeds, before=1).to_doc()
    assert all("atol" not in r or r["atol"] == {} for r in plain["runs"])   # no rule, no atol


def test_seeds_and_guards_are_the_callers():
    ck = compile_kernel(vadd, "sm_90a")
    doc = build_job(ck, SUITE, SUITE.cases[0], seeds=(5, 6, 7), before=1,
                    guards={"constant_outputs": ["out"]}).to_doc()
    assert [(r["seed"], r["when"]) for r in doc["runs"]] == \
        [(5, "before"), (6, "after"), (7, "after")]
    assert doc["guards"]["seeds_before"] == 1 and doc["guards"]["seeds_after"] == 2
    assert doc["guards"]["constant_outputs"] == ["out"]
    two = build_job(ck, SUITE, SUITE.cases[0], seeds=(1, 2)).to_doc()
    assert [r["when"] for r in two["runs"]] == ["before", "after"]
    with pytest.raises(ValueError, match=r"seeds \[1\] with 2 before timing: expected"):
        build_job(ck, SUITE, SUITE.cases[0], seeds=(1,), before=2)
    with pytest.raises(ValueError, match="guards.constant_outputs\\[0\\]: 'nope' is not a"):
        build_job(ck, SUITE, SUITE.cases[0], guards={"constant_outputs": ["nope"]})


def test_tensormap_params_are_described():
    from tirxh.core.types import numpy_dtype
    ck = compile_kernel(uses_map, "sm_90a")

    def inp(rng, n):
        return dict(m=T.TensorMap("src", box=(8, 16), swizzle=32),
                    src=np.zeros((64, 32), numpy_dtype("bf16")),
                    out=np.empty(n, np.float32), n=n)
    s = T.suite(uses_map, inputs=inp, reference=None, outputs=["out"],
                cases=[T.case("c", n=32)])
    doc = build_job(ck, s, s.cases[0]).to_doc()
    tm = doc["launches"][0]["args"][0]["tensormap"]
    assert tm["source"] == "src" and tm["dims"] == [32, 64] and tm["strides"] == [64]
    assert tm["box"] == [16, 8] and tm["swizzle"] == 32 and tm["dtype"] == "bf16"
    Job.from_json(doc)


def test_bad_inputs_are_named():
    ck = compile_kernel(vadd, "sm_90a")
    s = T.suite(vadd, inputs=lambda rng, n: dict(a=np.zeros(n, np.float32),
                                                 b=np.zeros(n, np.float32),
                                                 out=np.zeros(n, np.float32), n=n),
                outputs=["nope"], cases=[T.case("c", n=8)])
    with pytest.raises(ValueError, match="output 'nope' is not a pointer parameter"):
        build_job(ck, s, s.cases[0])


def _res(state="done", **r):
    base = {"status": "ok", "verified": True, "board": "cuda0",
            "timing": {"candidate": {"median_ms": 0.05, "iqr_ms": 0.001, "n": 40},
                       "converged": True, "gbps": 3800.0, "floor_fraction": 0.9,
                       "baselines": {"torch.add": {"speedup": 1.1, "median_ms": 0.055}}}}
    base.update(r)
    return BenchResult("vadd[n16M]@sm_90a", state, base)


def test_bench_result_verdicts_and_summary():
    r = _res()
    assert r.verdict == "clean"
    s = r.summary
    assert "50.00 us" in s and "3800 GB/s" in s and "90% of floor" in s
    assert "1.10x vs torch.add" in s
    assert r.to_json()["verdict"] == "clean"
    sus = _res()
    sus.result["timing"]["suspect"] = True
    assert sus.verdict == "review" and "SUSPECT" in sus.summary
    assert _res(verified=False).verdict == "incomplete"
    fail = BenchResult("x", "failed", {"error": {"type": "runtime.illegal-address",
                                                 "message": "boom"}})
    assert fail.verdict == "error" and "runtime.illegal-address" in fail.summary
    una = BenchResult("x", "failed", {"error": {"type": "unavailable.board", "message": "m"}})
    assert una.verdict == "incomplete"
    notime = _res(timing={"skipped": "board kind 'sim' does not time"})
    assert notime.verdict == "incomplete" and "not timed" in notime.summary


def test_a_job_the_model_refuses_names_the_item_and_field():
    ck = compile_kernel(vadd, "sm_90a")
    s = T.suite(vadd, inputs=inputs, outputs=["out"], cases=[T.case("n8", n=8)],
                tolerance=T.tolerance(rtol=-1.0))
    with pytest.raises(ValueError, match=r"vadd\[n8\]: the KCoral job is invalid: "
                                         r"checks\[0\]\.rtol: -1 is outside"):
        build_job(ck, s, s.cases[0])


@pytest.mark.parametrize("refusal,code,etype", [
    (Refusal.NO_BOARD, "INVALID_ARGUMENT", "unavailable.board"),
    (Refusal.INVALID_JOB, "INVALID_ARGUMENT", "validation.job"),
    (Refusal.SHUTTING_DOWN, "UNAVAILABLE", "unavailable.daemon"),
    ("", "UNAVAILABLE", "unavailable.daemon"),           # no daemon at all: no refusal code
    (Refusal.PERMISSION_DENIED, "PERMISSION_DENIED", "internal.daemon"),
])
def test_refusals_are_typed_by_code_not_text(refusal, code, etype):
    # the message says "unavailable" in every case: only the code decides
    e = KCoralError(code, "board 'x' is unavailable", refusal=str(refusal))
    assert bench_error(e)["type"] == etype


def test_inplace_outputs_are_uploaded_not_poisoned():
    """An in-place output starts from its input values (in every run) and is still checked."""
    ck = compile_kernel(vadd, "sm_90a")
    s = T.suite(vadd, inputs=inputs, reference=lambda a, b: {"out": a + b}, outputs=["out"],
                inplace=["out"], cases=[T.case("n64", n=64)])

    def put(data):
        return hashlib.sha256(data).hexdigest()
    doc = build_job(ck, s, s.cases[0], put=put).to_doc()
    Job.from_json(doc)  # valid
    out = next(b for b in doc["buffers"] if b["name"] == "out")
    assert out["output"] and out["init"]["kind"] == "blob"
    for r in doc["runs"]:
        assert set(r["inputs"]) == {"a", "b", "out"} and set(r["expected"]) == {"out"}
    plain = build_job(ck, SUITE, SUITE.cases[0], put=put).to_doc()
    assert next(b for b in plain["buffers"] if b["name"] == "out")["init"] == {"kind": "empty"}
    assert "out" not in plain["runs"][0]["inputs"]


def test_back_to_back_samples_are_named_in_the_line():
    r = _res()
    assert "(IQR 1.00, n=40)" in r.summary  # one launch a sample: nothing added
    r.result["timing"]["repeat"] = 20
    assert "50.00 us (IQR 1.00, n=40 x 20 back to back)" in r.summary


def test_a_flush_other_than_the_default_is_named_in_the_line():
    """Times under different L2 flushes are not comparable: the line says which it had."""
    r = _res()
    t = r.result["timing"]
    t["l2_flush"], t["l2_flush_by"] = True, "write"
    assert "(IQR 1.00, n=40)" in r.summary
    t["l2_flush_by"] = "read"
    assert "(IQR 1.00, n=40, L2 flushed by reading)" in r.summary
    t["l2_flush"], t["l2_flush_by"] = False, None
    assert "(IQR 1.00, n=40, no L2 flush)" in r.summary


def test_both_regime_ratios_are_printed_when_they_differ():
    r = _res()
    t = r.result["timing"]
    t["throttled"] = True
    t["sm_clock_mhz"] = {"max": 1980.0, "min": 1680.0}
    t["regimes"] = {"full": {"rounds": 20, "baselines": {"torch.add": {"speedup": 0.87}}},
                    "sustained": {"rounds": 30, "baselines": {"torch.add": {"speedup": 1.02}}}}
    assert "1.10x vs torch.add (full clock 0.87x, sustained 1.02x; throttled 1980->1680 MHz)" \
        in r.summary
    t["regimes"]["sustained"]["baselines"]["torch.add"]["speedup"] = 0.88  # within 2%
    assert "full clock" not in r.summary and "1.10x vs torch.add [cuda0]" in r.summary


def test_an_incomplete_guard_is_never_clean():
    r = _res(guards={"seeds": {"status": "incomplete", "why": "4 checked runs on only 1 "
                                                             "distinct input set(s)"},
                     "timed_output": {"status": "passed"}})
    assert r.verdict == "incomplete"
    assert "guard seeds incomplete (4 checked runs on only 1 distinct input set(s))" in r.summary
    assert _res(guards={"seeds": {"status": "passed"}}).verdict == "clean"
