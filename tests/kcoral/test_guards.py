"""The guards against kernels that game the measurement (kcoral/guards.py), each against a
cheating kernel it must catch: fake-board kernels in-process (fast, every branch), and kernels
written in TIRx run through numsim on a daemon's sim board (what `tirxh bench` submits), next to
honest kernels that pass every guard."""

# no `from __future__ import annotations`: the TIRx kernels below need evaluated annotations
import json

import numpy as np
import pytest

import tirxh.lang as T
from kcoral.blobs import BlobStore
from kcoral.boards import BoardSpec
from kcoral.boards.fake import FakeDevice
from kcoral.client import KCoralClient
from kcoral.errors import JobFailure
from kcoral.guards import GRID_BITS, GRID_SAMPLE, _nan_agreed, grid_of, perturbed_float
from kcoral.job import Job
from kcoral.measure import run_job
from kcoral.plugins import registries
from kcoral.server import Daemon
from tirxh.api import build_job
from tirxh.plugins.bench import BenchResult

N = 64


# -------------------------------------------------------------------------------------------------
# fake board, in-process
# -------------------------------------------------------------------------------------------------

def fake_run(tmp_path, op, seeds=(1, 2, 3, 4), same_inputs=False, dtype="f32", extra=(),
             values=None, guards=None, timing=None, expected=None, out_dtype=None):
    """Run a fake-board job whose kernel is `op` over a, b, out (+ `extra` zeroed buffers, e.g.
    a flag); correctness runs on `seeds` (half before timing), inputs uploaded with the
    expected a + b (or `expected(a, b)`)."""
    blobs = BlobStore(tmp_path / "blobs")
    entry = {"op": op, "time_ms": 0.05}
    if values is not None:
        entry["values"] = values
    mod = blobs.put(json.dumps({"kernels": {"k": entry}}).encode())
    dt = np.dtype(np.float32 if dtype == "f32" else np.int32)
    odt = out_dtype or dtype
    runs = []
    for i, seed in enumerate(seeds):
        rng = np.random.default_rng(0 if same_inputs else seed)
        if dt.kind == "f":
            a, b = rng.standard_normal(N).astype(dt), rng.standard_normal(N).astype(dt)
        else:
            a, b = rng.integers(-50, 50, N).astype(dt), rng.integers(-50, 50, N).astype(dt)
        want = expected(a, b) if expected else a + b
        runs.append({"seed": seed, "when": "before" if i < (len(seeds) + 1) // 2 else "after",
                     "inputs": {"a": blobs.put_array(a), "b": blobs.put_array(b)},
                     "expected": {"out": blobs.put_array(want)}})
    doc = {"name": f"fake-{op}", "target": "sm_90a", "module": {"format": "fake", "blob": mod},
           "buffers": [{"name": "a", "dtype": dtype, "shape": [N], "init": {"kind": "normal"}},
                       {"name": "b", "dtype": dtype, "shape": [N], "init": {"kind": "normal"}},
                       {"name": "out", "dtype": odt, "shape": [N], "output": True}]
           + [{"name": x, "dtype": dtype, "shape": [N], "init": {"kind": "zeros"}}
              for x in extra],
           "launches": [{"entry": "k", "grid": [1], "block": [64],
                         "args": [{"buffer": x} for x in ("a", "b", "out", *extra)]}],
           "checks": [{"buffer": "out", "rtol": 1e-6}], "runs": runs,
           "timing": dict({"min_iters": 8, "max_iters": 30, "budget_s": 5,
                                 "seed": seeds[0] if seeds else 1},
                          **(timing or {})),
           "guards": dict({"seeds_before": 2, "seeds_after": 2}, **(guards or {}))}
    job = Job.from_json(doc)
    dev = FakeDevice(BoardSpec("f", "fake", "sm_90a", options={"noise": 0.001}))
    dev.begin_job(job.doc)
    return run_job(job, dev, blobs, registries().baselines, lambda *a: None)


def test_an_honest_kernel_passes_every_guard(tmp_path):
    g = fake_run(tmp_path, "add")["guards"]
    assert {k: v["status"] for k, v in g.items()} == \
        {"timed_output": "passed", "perturbation": "passed", "seeds": "passed"}
    assert g["timed_output"]["timed"] and len(g["timed_output"]["iterations"]) == 2
    assert all("ms" in it and it["ok"] for it in g["timed_output"]["iterations"])
    assert g["timed_output"]["reference"] == {"out": "uploaded"}
    assert g["perturbation"]["perturbed"] == ["a", "b"] and g["perturbation"]["changed"]
    assert g["seeds"]["before"] == g["seeds"]["after"] == g["seeds"]["distinct_inputs"] // 2


def test_timed_output_catches_a_kernel_that_skips_once_it_has_run(tmp_path):
    with pytest.raises(JobFailure) as ei:
        fake_run(tmp_path, "add_once", extra=("state",))
    e = ei.value
    assert e.type == "correctness.timed-output" and "failed when timed" in e.message
    it = e.data["guards"]["timed_output"]["iterations"]
    assert it[-1]["ok"] is False and "timed round" in it[-1]["where"]


def test_perturbation_catches_a_cached_answer(tmp_path):
    with pytest.raises(JobFailure) as ei:
        fake_run(tmp_path, "add_cached", extra=("cache", "state"))
    e = ei.value
    assert e.type == "correctness.perturbation"
    assert "keeps a result across launches" in e.message
    p = e.data["guards"]["perturbation"]
    assert p["status"] == "failed" and p["skipped"] == {
        "cache": "all zeros: taken for a workspace or flags",
        "state": "all zeros: taken for a workspace or flags"}


def test_perturbation_catches_a_precomputed_answer(tmp_path):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    with pytest.raises(JobFailure) as ei:  # the same inputs on every seed: the answer is known
        fake_run(tmp_path, "table", same_inputs=True, values=(a + b).tolist())
    assert ei.value.type == "correctness.perturbation"
    assert "'out' did not change when inputs ['a', 'b'] did" in ei.value.message
    # an output that legitimately ignores its inputs may say so ...
    r = fake_run(tmp_path, "table", same_inputs=True, values=(a + b).tolist(),
                 guards={"constant_outputs": ["out"]})
    assert r["guards"]["perturbation"]["changed"] == {"out": False}
    # ... and then the seeds guard still says the four seeds checked one input set
    s = r["guards"]["seeds"]
    assert s["status"] == "incomplete" and "4 checked runs on only 1 distinct input set" in s["why"]


def test_seeds_guard_counts_checked_runs_on_each_side(tmp_path):
    s = fake_run(tmp_path, "add", seeds=(1, 2))["guards"]["seeds"]
    assert s["status"] == "incomplete" and s["before"] == s["after"] == 1
    assert "1 checked run(s) before timing, the job asks for 2" in s["why"]
    ok = fake_run(tmp_path, "add", seeds=(1, 2), guards={"seeds_before": 1, "seeds_after": 1})
    assert ok["guards"]["seeds"]["status"] == "passed"


def test_integer_kernels_get_the_same_guards(tmp_path):
    g = fake_run(tmp_path, "add", dtype="s32")["guards"]
    assert g["perturbation"]["status"] == "passed" and g["perturbation"]["perturbed"] == ["a", "b"]
    with pytest.raises(JobFailure, match="correctness.timed-output"):
        fake_run(tmp_path, "add_once", dtype="s32", extra=("state",))
    with pytest.raises(JobFailure, match="keeps a result across launches"):
        fake_run(tmp_path, "add_cached", dtype="s32", extra=("cache", "state"))


def test_an_unwritten_integer_output_cannot_pass_on_every_run(tmp_path):
    # the answer is all ones (-1): exactly the first run's poison; the second run's is 0x5A...
    with pytest.raises(JobFailure) as ei:
        fake_run(tmp_path, "noop", dtype="s32", expected=lambda a, b: np.full(N, -1, np.int32))
    assert ei.value.type == "correctness.mismatch" and "seed 2" in ei.value.message
    first = ei.value.data["correctness"][0]
    assert first["ok"] and first["seed"] == 1  # all-ones poison == the answer, once


def _self_referenced(tmp_path, op, dtype="f32"):
    """`op` on a job with no reference on its timing inputs (no correctness runs with expected
    arrays, no baseline): the guards keep the candidate's own first launch as the reference --
    what a zoo timing case whose declared output has no check on those inputs gets (session
    15, H200: kda_bwd_prep_sg po_t8192_h96, /work/notes/s15/d6/calibsg/call.log)."""
    with pytest.raises(JobFailure) as ei:
        fake_run(tmp_path, op, seeds=(), dtype=dtype)
    return ei.value


def test_an_unwritten_output_is_named_not_a_self_mismatch(tmp_path):
    e = _self_referenced(tmp_path, "noop")
    assert e.type == "correctness.unwritten", e
    assert e.message.startswith("'out' was never written by the kernel on the timing inputs: "
                                f"all {N} elements still hold the poison pattern"), e.message
    assert "differs" not in e.message and "the the" not in e.message
    t = e.data["guards"]["timed_output"]
    assert t["status"] == "failed" and t["outputs"] == [
        {"buffer": "out", "total": N, "poisoned": N, "nan": N, "inf": 0}]


def test_a_partly_unwritten_output_says_how_many(tmp_path):
    e = _self_referenced(tmp_path, "add_half")
    assert e.type == "correctness.unwritten"
    assert f"{N // 2} of {N} elements still hold the poison pattern" in e.message, e.message


def test_nan_the_kernel_wrote_is_nonfinite_not_unwritten(tmp_path):
    e = _self_referenced(tmp_path, "add_nan")
    assert e.type == "correctness.nonfinite", e
    assert e.message == (f"'out' from the first launch on the timing inputs holds non-finite "
                         f"values the kernel wrote: {N // 4} NaN and 1 Inf of {N} elements"), \
        e.message
    assert e.data["guards"]["timed_output"]["outputs"] == [
        {"buffer": "out", "total": N, "poisoned": 0, "nan": N // 4, "inf": 1}]


def test_a_finite_self_reference_still_passes_and_catches_a_skipping_kernel(tmp_path):
    r = fake_run(tmp_path, "add", seeds=())
    assert r["guards"]["timed_output"]["reference"] == \
        {"out": "the candidate's first launch on these inputs"}
    with pytest.raises(JobFailure) as ei:  # skips its later launches: poison when timed
        fake_run(tmp_path, "add_once", seeds=(), extra=("state",))
    e = ei.value
    assert e.type == "correctness.timed-output"
    assert "differs from the candidate's first launch on these inputs:" in e.message
    assert "the the" not in e.message and "still hold the poison pattern" in e.message


def test_an_integer_self_reference_is_not_second_guessed(tmp_path):
    # all-ones is a valid int32 (-1): an integer output is not called unwritten on its bits
    r = fake_run(tmp_path, "add", seeds=(), dtype="s32")
    assert r["guards"]["timed_output"]["status"] == "passed"


def test_guards_off_or_without_timing_say_why(tmp_path):
    r = fake_run(tmp_path, "add", guards={"timed_output": False, "perturbation": False})
    assert r["guards"]["timed_output"]["status"] == "n/a" and "disabled" in \
        r["guards"]["timed_output"]["why"]
    r = fake_run(tmp_path, "add", timing={"enabled": False})
    assert r["guards"]["perturbation"] == {"status": "n/a",
                                           "why": "timing disabled: nothing was measured"}


def test_inputs_on_a_coarse_grid_are_perturbed_on_it_and_within_their_range():
    """A suite's deliberately exact float inputs (multiples of 1/16 in [-8, 8], small integers)
    stay so: an exact check of a kernel whose summation order varies between launches still
    holds on the in-place and fresh runs (zoo cumsum on the H200, tests/zoo/test_cumsum.py)."""
    rng = np.random.default_rng(3)
    for a, step in [((rng.integers(-128, 129, 4096) / 16).astype(np.float32), 1 / 16),
                    (rng.integers(0, 4, 4096).astype(np.float32), 1.0)]:
        assert grid_of(a.astype(np.float64)) == int(np.log2(step))
        new = perturbed_float(a, rng, np.dtype(np.float32))
        assert new.dtype == np.float32 and np.all(new / step == np.round(new / step))
        assert new.min() >= a.min() and new.max() <= a.max()
        assert np.mean(new != a) > 0.25  # a perturbation, not a no-op


def test_full_precision_inputs_are_perturbed_by_plain_noise():
    a = np.random.default_rng(1).standard_normal(4096).astype(np.float32)
    a[[5, 9]] = [np.inf, np.nan]
    assert grid_of(a.astype(np.float64)) is None
    new = perturbed_float(a, np.random.default_rng(2), np.dtype(np.float32))
    ok = np.isfinite(a)
    d = new[ok].astype(np.float64) - a[ok]
    sd = np.std(a[ok].astype(np.float64))
    # uniform noise of a quarter of the input's standard deviation, on every finite element
    assert abs(np.std(d) / (0.25 * sd) - 1) < 0.05 and np.all(d != 0)
    assert np.abs(d).max() <= 0.25 * sd * np.sqrt(3) * 1.001
    assert new.dtype == np.float32 and new[5] == np.inf and np.isnan(new[9])
    assert new[ok].max() > a[ok].max()


def test_fp8_inputs_at_their_maximum_stay_finite():
    """On the H200 (2026-12-01) the zoo's fp8 GEMM at 8192^3, inputs scaled to e4m3's maximum
    448, failed `correctness.perturbation`: the noise pushed 3 of 67M elements past 448, which
    float8_e4m3fn (no infinity) turns into NaN, and NaN rows of C never compare equal."""
    import ml_dtypes
    x = np.random.default_rng(1).standard_normal((512, 1024)).astype(np.float32)
    e = (x * (448 / np.abs(x).max())).astype(ml_dtypes.float8_e4m3fn)
    e[0, :64] = 448  # plenty of elements at the maximum, so noise crosses it somewhere
    assert grid_of(e.astype(np.float64)) is None
    new = perturbed_float(e, np.random.default_rng(2), e.dtype).astype(np.float64)
    assert not np.isnan(new).any() and np.abs(new).max() == 448
    assert (new != e.astype(np.float64)).mean() > 0.5  # still a perturbation


def test_shared_nans_agree_and_a_lone_nan_does_not():
    """In place and fresh on the same inputs: a NaN both runs produce at one element is
    agreement; a NaN in one run only stays a difference."""
    a = np.array([1.0, np.nan, 3.0, np.nan], dtype=np.float32)
    b = np.array([1.0, np.nan, np.nan, np.nan], dtype=np.float32)
    x, y = _nan_agreed(a, b)
    assert np.isnan(a[1]) and x[1] == y[1] == 0 and x[3] == y[3] == 0  # inputs left alone
    assert x[2] == 3 and np.isnan(y[2])
    i = np.array([1, 2], dtype=np.int32)
    assert _nan_agreed(i, i)[0] is i


def test_grid_needs_at_most_grid_bits_significant_bits():
    assert GRID_BITS == 16
    assert grid_of(np.array([1.0, 65535.0])) == 0 and grid_of(np.array([1.0, 65536.0])) is None
    assert grid_of(np.array([0.75, -3.0])) == -2  # 3/4 = 3 x 2^-2
    assert grid_of(np.array([0.0, np.inf, np.nan])) is None  # nothing finite and nonzero
    # large inputs are sampled first; the whole input decides
    big = np.random.default_rng(4).integers(-8, 9, 3 * GRID_SAMPLE + 1).astype(np.float64)
    assert grid_of(big) == 0
    big[GRID_SAMPLE + 1] = 0.5  # off the sample (stride 3): a finer grid
    assert grid_of(big) == -1
    big[GRID_SAMPLE + 2] = 2.0 ** 20  # beyond GRID_BITS
    assert grid_of(big) is None
    sparse = np.zeros(3 * GRID_SAMPLE + 1)
    sparse[1] = 0.25  # the sample holds only zeros
    assert grid_of(sparse) == -2
    # a grid input that cannot move within its range is not perturbed (another run's values are)
    assert perturbed_float(np.full(8, 4.0, np.float32), np.random.default_rng(0),
                           np.dtype(np.float32)) is None


# -------------------------------------------------------------------------------------------------
# TIRx kernels on a daemon's sim board (numsim)
# -------------------------------------------------------------------------------------------------

BLOCK = 128


def kernels(dt):
    """An honest vadd and three cheats over element type `dt` (T.f32 or T.u32)."""
    ld, st = getattr(T.ptx.ld.global_, dt.name), getattr(T.ptx.st.global_, dt.name)

    @T.kernel(grid=lambda n: T.cdiv(n, BLOCK), block=BLOCK, name=f"vadd_{dt.name}")
    def vadd(a: T.gptr[dt], b: T.gptr[dt], out: T.gptr[dt], flag: T.gptr[T.u32], n: T.u32):
        i = T.ctaid.x * BLOCK + T.tid.x
        with T.if_(i < n):
            st(out.at(i), ld(a.at(i)) + ld(b.at(i)))

    @T.kernel(grid=lambda n: T.cdiv(n, BLOCK), block=BLOCK, name=f"vadd_once_{dt.name}")
    def vadd_once(a: T.gptr[dt], b: T.gptr[dt], out: T.gptr[dt], flag: T.gptr[T.u32],
                  n: T.u32):
        """Computes on its first launch; later launches see the CTA's flag and return."""
        i = T.ctaid.x * BLOCK + T.tid.x
        done = T.ptx.ld.global_.u32(flag.at(T.ctaid.x))
        T.ptx.bar.sync(0)
        with T.if_(done == 0):
            with T.if_(i < n):
                st(out.at(i), ld(a.at(i)) + ld(b.at(i)))
            with T.if_(T.tid.x == 0):
                T.ptx.st.global_.u32(flag.at(T.ctaid.x), 1)

    @T.kernel(grid=lambda n: T.cdiv(n, BLOCK), block=BLOCK, name=f"vadd_cached_{dt.name}")
    def vadd_cached(a: T.gptr[dt], b: T.gptr[dt], out: T.gptr[dt], cache: T.gptr[dt],
                    flag: T.gptr[T.u32], n: T.u32):
        """Computes once and keeps the answer; later launches copy it, whatever the inputs."""
        i = T.ctaid.x * BLOCK + T.tid.x
        done = T.ptx.ld.global_.u32(flag.at(T.ctaid.x))
        T.ptx.bar.sync(0)
        with T.if_(i < n):
            with T.if_(done == 0):
                v = ld(a.at(i)) + ld(b.at(i))
                st(out.at(i), v)
                st(cache.at(i), v)
            with T.else_():
                st(out.at(i), ld(cache.at(i)))
        with T.if_((T.tid.x == 0) & (done == 0)):
            T.ptx.st.global_.u32(flag.at(T.ctaid.x), 1)

    return vadd, vadd_once, vadd_cached


def suite_for(kernel, dt, **extra_inputs):
    npdt = np.float32 if dt is T.f32 else np.uint32

    def inputs(rng, n):
        if npdt is np.float32:
            a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, np.float32)
        else:
            a, b = (rng.integers(0, 1 << 20, n).astype(np.uint32) for _ in range(2))
        d = dict(a=a, b=b, out=np.empty(n, npdt), flag=np.zeros(T.cdiv(n, BLOCK), np.uint32),
                 n=n)
        d.update({k: f(n) for k, f in extra_inputs.items()})
        return d
    return T.suite(kernel, inputs=inputs, reference=lambda a, b, **_: {"out": a + b},
                   outputs=["out"], cases=[T.case("n512", n=512)],
                   tolerance=T.tolerance(rtol=1e-6))


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    d = Daemon({"boards": {"sim": {}}}, state_dir=tmp_path_factory.mktemp("guards-sim"),
               port=0).start()
    c = KCoralClient(d.address, client_name="guards")
    try:
        yield c
    finally:
        c.close()
        d.stop(2)


def bench(client, suite, timing=None, **kw):
    case = suite.cases[0]
    ck = suite.kernel.compile("sm_90a", **suite.consts(case))
    job = build_job(ck, suite, case, put=client.put_blob, timing=timing or {"warmup": 2}, **kw)
    ev = client.run(job, timeout=300)
    return ev, BenchResult(f"{suite.name}[{case.name}]", ev["state"], ev["result"])


@pytest.mark.parametrize("dt", [T.f32, T.u32], ids=["f32", "u32"])
def test_tirx_honest_vadd_passes_every_guard_on_the_sim_board(sim, dt):
    vadd, _, _ = kernels(dt)
    ev, br = bench(sim, suite_for(vadd, dt))
    res = ev["result"]
    assert ev["state"] == "done", res.get("error")
    g = res["guards"]
    assert {k: v["status"] for k, v in g.items()} == \
        {"timed_output": "passed", "perturbation": "passed", "seeds": "passed"}
    assert g["timed_output"]["timed"] is False  # the sim board repeats launches, untimed
    assert g["timed_output"]["iterations"][0]["where"].startswith("a repeated launch")
    assert g["perturbation"]["skipped"] == {"flag": "all zeros: taken for a workspace or flags"}
    assert br.verdict == "incomplete" and "never times" in br.summary  # sim: no number


@pytest.mark.parametrize("dt", [T.f32, T.u32], ids=["f32", "u32"])
def test_tirx_kernel_that_skips_after_its_first_launch_is_caught(sim, dt):
    _, vadd_once, _ = kernels(dt)
    ev, br = bench(sim, suite_for(vadd_once, dt))
    err = ev["result"]["error"]
    assert ev["state"] == "failed" and err["type"] == "correctness.timed-output", err
    assert all(r["ok"] for r in ev["result"]["correctness"])  # every seed passed ...
    assert "a repeated launch" in err["message"]  # ... the repeated launch did not
    assert br.verdict == "error"


@pytest.mark.parametrize("dt", [T.f32, T.u32], ids=["f32", "u32"])
def test_tirx_kernel_that_replays_a_cached_answer_is_caught(sim, dt):
    _, _, vadd_cached = kernels(dt)
    npdt = np.float32 if dt is T.f32 else np.uint32
    ev, _ = bench(sim, suite_for(vadd_cached, dt, cache=lambda n: np.zeros(n, npdt)))
    res = ev["result"]
    assert ev["state"] == "failed", res.get("guards")
    assert res["error"]["type"] == "correctness.perturbation"
    assert "keeps a result across launches" in res["error"]["message"]
    assert res["guards"]["perturbation"]["perturbed"] == ["a", "b"]


@T.kernel(grid=lambda n: T.cdiv(n, BLOCK), block=BLOCK)
def vadd_known(a: T.gptr[T.f32], b: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32):
    """Writes the answer for the benchmark's inputs (a = i, b = 2i) without reading them."""
    i = T.ctaid.x * BLOCK + T.tid.x
    with T.if_(i < n):
        T.ptx.st.global_.f32(out.at(i), T.ptx.cvt.rn.f32.u32(i) * 3.0)


def test_tirx_kernel_that_writes_a_precomputed_answer_is_caught(sim):
    ar = lambda n: np.arange(n, dtype=np.float32)  # noqa: E731 - the same inputs on every seed
    s = T.suite(vadd_known, inputs=lambda rng, n: dict(a=ar(n), b=2 * ar(n),
                                                       out=np.empty(n, np.float32), n=n),
                reference=lambda a, b, **_: {"out": a + b}, outputs=["out"],
                cases=[T.case("n512", n=512)], tolerance=T.tolerance(rtol=1e-6))
    ev, _ = bench(sim, s)
    err = ev["result"]["error"]
    assert ev["state"] == "failed" and err["type"] == "correctness.perturbation", err
    assert "did not change when inputs ['a', 'b'] did" in err["message"]
    assert all(r["ok"] for r in ev["result"]["correctness"])  # four seeds, all passed


@T.kernel(grid=lambda n: T.cdiv(n, BLOCK), block=BLOCK)
def vadd_no_side(a: T.gptr[T.f32], b: T.gptr[T.f32], out: T.gptr[T.f32],
                 side: T.gptr[T.f32], n: T.u32):
    """Writes `out`, never `side` (zoo kda_bwd_prep_sg at WALK=0 and its 'bt')."""
    i = T.ctaid.x * BLOCK + T.tid.x
    with T.if_(i < n):
        T.ptx.st.global_.f32(out.at(i), T.ptx.ld.global_.f32(a.at(i))
                             + T.ptx.ld.global_.f32(b.at(i)))


@pytest.mark.parametrize("outputs", [["out", "side"], ["out"]], ids=["side-declared", "out"])
def test_tirx_timing_suite_declaring_an_unwritten_output_says_so(sim, outputs):
    """A timing-only suite (no reference: the first launch is its own reference) declaring an
    output its kernel never writes fails as correctness.unwritten naming it; declaring only
    what it writes passes (session 15, H200: kda_bwd_prep_sg[po_t8192_h96] failed as
    "'bt' ... differs from the the candidate's first launch")."""
    s = T.suite(vadd_no_side, inputs=lambda rng, n: dict(
        a=rng.standard_normal(n, dtype=np.float32), b=rng.standard_normal(n, dtype=np.float32),
        out=np.empty(n, np.float32), side=np.zeros(n, np.float32), n=n),
        outputs=outputs, cases=[T.case("n512", n=512)])
    ev, _ = bench(sim, s)
    res = ev["result"]
    if "side" in outputs:
        err = res["error"]
        assert ev["state"] == "failed" and err["type"] == "correctness.unwritten", err
        assert err["message"].startswith("'side' was never written by the kernel on the timing "
                                         "inputs: all 512 elements still hold the poison")
    else:
        assert ev["state"] == "done", res.get("error")
        assert res["guards"]["timed_output"]["status"] == "passed"


def lazy_kernel(j: int, thr: float, above: bool):
    @T.kernel(grid=lambda n: T.cdiv(n, BLOCK), block=BLOCK)
    def vadd_lazy(a: T.gptr[T.f32], b: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32):
        """Does nothing when element `j` of `a` is past `thr`: right on some inputs only."""
        i = T.ctaid.x * BLOCK + T.tid.x
        key = T.ptx.ld.global_.f32(a.at(j))
        with T.if_((key < thr) if above else (key > thr)):
            with T.if_(i < n):
                T.ptx.st.global_.f32(out.at(i), T.ptx.ld.global_.f32(a.at(i))
                                     + T.ptx.ld.global_.f32(b.at(i)))
    return vadd_lazy


def test_tirx_kernel_right_on_two_seeds_is_caught_by_the_next_two(sim):
    def inputs(rng, n):
        return dict(a=rng.standard_normal(n, dtype=np.float32),
                    b=rng.standard_normal(n, dtype=np.float32), out=np.empty(n, np.float32), n=n)
    case = T.case("n512", n=512)
    draws = {s: np.random.default_rng(s) for s in (1, 2, 3, 4)}
    probe = T.suite(vadd_known, inputs=inputs, reference=None, outputs=["out"], cases=[case])
    a = {s: probe.make_inputs(case, s)["a"] for s in draws}
    # an element and a threshold with seeds 1 and 2 on the computing side, 3 or 4 not
    for j in range(512):
        lo12, hi12 = min(a[1][j], a[2][j]), max(a[1][j], a[2][j])
        if min(a[3][j], a[4][j]) < lo12:
            pick = (j, float(lo12) - 1e-6, False)  # computes while a[j] > thr
            break
        if max(a[3][j], a[4][j]) > hi12:
            pick = (j, float(hi12) + 1e-6, True)  # computes while a[j] < thr
            break
    s = T.suite(lazy_kernel(*pick), inputs=inputs, reference=lambda a, b, **_: {"out": a + b},
                outputs=["out"], cases=[case], tolerance=T.tolerance(rtol=1e-6))
    ev, _ = bench(sim, s, seeds=(1, 2))  # one seed before timing and one after: it passes
    assert ev["state"] == "done", ev["result"].get("error")
    assert ev["result"]["guards"]["seeds"]["required"] == {"before": 1, "after": 1}
    ev, _ = bench(sim, s)  # two and two (the default): the third or fourth seed catches it
    err = ev["result"]["error"]
    assert ev["state"] == "failed" and err["type"] == "correctness.mismatch", err
    assert "after timing, seed 3" in err["message"] or "after timing, seed 4" in err["message"]


@T.kernel(grid=lambda n: T.cdiv(n, BLOCK), block=BLOCK)
def positive_lazy(a: T.gptr[T.f32], mask: T.gptr[T.b8], n: T.u32):
    """mask = a > 0, but it writes only the False elements (the True ones stay poisoned)."""
    i = T.ctaid.x * BLOCK + T.tid.x
    with T.if_(i < n):
        with T.if_(T.ptx.ld.global_.f32(a.at(i)) <= 0.0):
            T.ptx.st.global_.u8(mask.at(i), 0)


def test_tirx_boolean_kernel_that_leaves_its_true_elements_unwritten_is_caught(sim):
    s = T.suite(positive_lazy, inputs=lambda rng, n: dict(
        a=rng.standard_normal(n, dtype=np.float32), mask=np.empty(n, bool), n=n),
        reference=lambda a, **_: {"mask": a > 0}, outputs=["mask"],
        cases=[T.case("n512", n=512)])
    ev, _ = bench(sim, s)
    err = ev["result"]["error"]
    assert ev["state"] == "failed" and err["type"] == "correctness.mismatch", err
    first = ev["result"]["correctness"][0]["checks"][0]["first"][0]
    assert first["actual"] == 255 and first["expected"] == 1  # the poison byte, not True
