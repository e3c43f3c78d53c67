"""The measurement protocol against the fake device, in-process (no worker, no daemon)."""

import json
import time

import numpy as np
import pytest

from kcoral.blobs import BlobStore
from kcoral.boards import BoardSpec
from kcoral.boards.fake import FakeDevice
from kcoral.errors import JobFailure
from kcoral.job import Job, JobError, Work
from kcoral.measure import run_job, throughput
from kcoral.plugins import registries


def make(tmp_path, op="add", time_ms=0.05, runs=True, messages=None, **extra):
    blobs = BlobStore(tmp_path)
    mod = blobs.put(json.dumps({"kernels": {"k": {"op": op, "time_ms": time_ms}}}).encode())
    n = 64
    rr = []
    if callable(runs):   # the caller's runs, uploaded to this store
        rr = runs(blobs)
    elif runs:
        for seed, when in ((1, "before"), (2, "after")):
            rng = np.random.default_rng(seed)
            a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(
                np.float32)
            rr.append({"seed": seed, "when": when,
                       "inputs": {"a": blobs.put_array(a), "b": blobs.put_array(b)},
                       "expected": {"out": blobs.put_array(a + b)}})
    doc = {"target": "sm_90a", "module": {"format": "fake", "blob": mod},
           "buffers": [{"name": "a", "dtype": "f32", "shape": [n], "init": {"kind": "normal"}},
                       {"name": "b", "dtype": "f32", "shape": [n], "init": {"kind": "uniform"}},
                       {"name": "out", "dtype": "f32", "shape": [n], "output": True}],
           "launches": [{"entry": "k", "grid": [1], "block": [64],
                         "args": [{"buffer": "a"}, {"buffer": "b"}, {"buffer": "out"}]}],
           "checks": [{"buffer": "out", "rtol": 1e-6}], "runs": rr,
           "timing": {"min_iters": 5, "budget_s": 1.0}, "work": {"bytes": 12 * n}}
    doc.update(extra)
    job = Job.from_json(doc)
    dev = FakeDevice(BoardSpec("f", "fake", "sm_90a", options={"noise": 0.001}))
    dev.begin_job(job.doc)
    events = []
    def progress(state, message):
        events.append(state)
        if messages is not None:
            messages.append(f"{state}: {message}")
    return lambda: run_job(job, dev, blobs, registries().baselines, progress), events


def test_ok_result_has_protocol_fields(tmp_path):
    run, events = make(tmp_path)
    r = run()
    assert r["verified"] and [c["when"] for c in r["correctness"]] == ["before", "after"]
    t = r["timing"]
    assert t["converged"] and abs(t["candidate"]["median_ms"] - 0.05) < 0.001
    assert t["candidate"]["n"] == len(t["candidate"]["samples_ms"]) >= 5
    assert t["sm_clock_mhz"]["before"] == t["sm_clock_mhz"]["after"] == 1980.0 and t["l2_flush"]
    assert t["clocks_mhz"] == [1980.0] * t["candidate"]["n"] and t["throttled"] is False
    assert t["gbps"] == pytest.approx(12 * 64 / (t["candidate"]["median_ms"] / 1e3) / 1e9)
    assert events.index("loaded") < events.index("correctness") < events.index("timing")


def test_wrong_kernel_fails_correctness(tmp_path):
    run, _ = make(tmp_path, op="add_bug")
    with pytest.raises(JobFailure) as ei:
        run()
    assert ei.value.type == "correctness.mismatch"
    assert "'out'" in ei.value.message and "seed 1" in ei.value.message


def test_poisoned_output_is_caught(tmp_path):
    # a kernel that writes nothing leaves the NaN poison: it must not pass by leftover contents
    run, _ = make(tmp_path, op="noop")
    with pytest.raises(JobFailure, match="correctness.mismatch"):
        run()


def test_baseline_reference_and_interleaving(tmp_path):
    run, _ = make(tmp_path, runs=False,
                  checks=[{"buffer": "out", "baseline": "fake.add",
                           "baseline_args": {"a": "a", "b": "b"}, "rtol": 1e-6}],
                  baselines=[{"name": "fake.add", "args": {"a": "a", "b": "b", "out": "out",
                                                           "time_ms": 0.1}}])
    r = run()
    assert r["correctness"][0]["checks"][0]["reference"] == "baseline fake.add"
    t = r["timing"]
    assert t["interleaved"] == ["candidate", "fake.add"]
    assert t["baselines"]["fake.add"]["speedup"] == pytest.approx(2.0, rel=0.02)


def test_each_baselines_warm_up_is_its_own_progress_step(tmp_path):
    """A job killed at its exec budget quotes its last progress: a baseline compiling on its
    first call (pyptx, session 13) must not read as the candidate's warm-up."""
    messages = []
    run, _ = make(tmp_path, runs=False, messages=messages,
                  checks=[{"buffer": "out", "baseline": "fake.add",
                           "baseline_args": {"a": "a", "b": "b"}, "rtol": 1e-6}],
                  baselines=[{"name": "fake.add", "args": {"a": "a", "b": "b", "out": "out",
                                                           "time_ms": 0.1}}])
    run()
    warm = [m for m in messages if m.startswith("timing: warm-up")]
    assert warm == ["timing: warm-up: the candidate",
                    "timing: warm-up: baseline fake.add (its first call may compile)"]


def test_unknown_baseline(tmp_path):
    run, _ = make(tmp_path, baselines=[{"name": "nope.op"}])
    with pytest.raises(JobFailure, match="unknown baseline 'nope.op'"):
        run()


def test_floor_flags_suspect_times():
    info = {"peak_flops_per_s": 790e12, "peak_bytes_per_s": 4.3e12}
    ok = throughput(Work(flops=2 * 4096 ** 3), 0.25, info)
    assert not ok["suspect"] and ok["tflops"] == pytest.approx(549.8, rel=1e-3)
    bad = throughput(Work(flops=2 * 4096 ** 3), 0.1, info)
    assert bad["suspect"] and "below the physical floor" in bad["suspect_reason"]
    mem = throughput(Work(bytes=4.3e9), 0.5, info)
    assert mem["suspect"] and mem["floor_ms"] == pytest.approx(1.0)


def test_a_reference_that_was_never_written_is_an_error(tmp_path):
    # the baseline writes into a buffer other than the shadow: the reference stays poisoned
    run, _ = make(tmp_path, op="noop", runs=False,
                  checks=[{"buffer": "out", "baseline": "fake.add", "baseline_out": "unused",
                           "baseline_args": {"a": "a", "b": "b", "out": "a"}, "rtol": 1e-6}])
    with pytest.raises(JobFailure) as ei:
        run()
    assert ei.value.type == "launch.baseline" and "did not write the reference" in str(ei.value)


def _fake_module(tmp_path, **entry):
    blobs = BlobStore(tmp_path)
    return blobs, blobs.put(json.dumps({"kernels": {"k": dict({"op": "add"}, **entry)}}).encode())


def _vadd_doc(mod, baselines: list, timing: dict, fake=None) -> dict:
    """The fake vadd job (64 f32 elements) with `baselines` and `timing`."""
    n = 64
    return {"target": "sm_90a", "module": {"format": "fake", "blob": mod},
            "buffers": [{"name": "a", "dtype": "f32", "shape": [n], "init": {"kind": "normal"}},
                        {"name": "b", "dtype": "f32", "shape": [n], "init": {"kind": "normal"}},
                        {"name": "out", "dtype": "f32", "shape": [n], "output": True}],
            "launches": [{"entry": "k", "grid": [1], "block": [64],
                          "args": [{"buffer": "a"}, {"buffer": "b"}, {"buffer": "out"}]}],
            "baselines": baselines, "timing": timing, "fake": fake or {}}


def _run(tmp_path, timing, fake=None, kernel=None, baseline=None, device=FakeDevice):
    """The fake vadd timed against fake.add; `kernel`/`baseline` add fields (time_ms,
    clock_sensitivity) to the candidate's entry and the baseline's args."""
    blobs, mod = _fake_module(tmp_path, **dict({"time_ms": 1.6}, **(kernel or {})))
    doc = _vadd_doc(mod, [{"name": "fake.add", "args": dict(
        {"a": "a", "b": "b", "out": "out", "time_ms": 1.38}, **(baseline or {}))}],
        dict({"min_iters": 40, "max_iters": 40, "budget_s": 30}, **timing), fake)
    return _timing_of(doc, blobs, device)


def _timing_of(doc, blobs, device):
    """Run the job `doc` on a fresh `device` (noise 0.1%): its result's timing."""
    job = Job.from_json(doc)
    dev = device(BoardSpec("f", "fake", "sm_90a", options={"noise": 0.001}))
    dev.begin_job(job.doc)
    res = run_job(job, dev, blobs, registries().baselines, lambda s, m: None)
    # the worker sends results as JSON: a numpy scalar anywhere killed the worker on the H200
    # (2026-12-01: candidate_first_rounds was an int64 whenever the order was random)
    assert json.loads(json.dumps(res)) is not None
    return res["timing"]


def test_paired_ratios_split_by_clock_regime(tmp_path):
    """The H200 at 8192^3 (issue 17): the clock falls from 1980 to 1680 MHz after a while;
    cuBLAS slows with it, the candidate (memory-bound in this model) does not."""
    t = _run(tmp_path, {}, fake={"throttle_after": 15, "throttled_mhz": 1680},
             baseline={"clock_sensitivity": 1.0})
    assert t["throttled"] is True and t["sm_clock_mhz"]["min"] == 1680
    assert t["sm_clock_mhz"]["drop_pct"] == pytest.approx(15.15, abs=0.01)
    assert len(t["clocks_mhz"]) == t["candidate"]["n"] == 40
    full, sus = t["regimes"]["full"], t["regimes"]["sustained"]
    assert full["rounds"] + sus["rounds"] == 40 and full["rounds"] >= 10 and sus["rounds"] >= 10
    assert full["baselines"]["fake.add"]["speedup"] == pytest.approx(1.38 / 1.6, rel=0.01)
    assert sus["baselines"]["fake.add"]["speedup"] == pytest.approx(
        1.38 * 1980 / 1680 / 1.6, rel=0.01)
    b = t["baselines"]["fake.add"]
    assert b["speedup"] == pytest.approx(b["speedup_of_medians"], rel=0.1)


def test_a_steady_clock_is_one_regime(tmp_path):
    t = _run(tmp_path, {}, baseline={"clock_sensitivity": 1.0})
    assert t["throttled"] is False and t["regimes"]["sustained"]["rounds"] == 0
    assert t["regimes"]["full"]["baselines"]["fake.add"]["speedup"] == pytest.approx(
        1.38 / 1.6, rel=0.01)


def test_the_order_is_random_per_round(tmp_path):
    t = _run(tmp_path, {})
    assert t["order"] == "random per round" and 8 <= t["candidate_first_rounds"] <= 32
    fixed = _run(tmp_path, {"randomize": False})
    assert fixed["order"] == "fixed" and fixed["candidate_first_rounds"] == 40


def test_cooldown_brings_rounds_back_to_full_clock(tmp_path):
    hot = _run(tmp_path, {}, fake={"throttle_after": 5}, baseline={"clock_sensitivity": 1.0})
    cool = _run(tmp_path, {"cooldown_s": 0.06}, fake={"throttle_after": 5},
                baseline={"clock_sensitivity": 1.0})
    assert hot["regimes"]["sustained"]["rounds"] >= 30
    assert cool["cooldown"]["count"] >= 1 and cool["cooldown"]["idle_s"] > 0
    assert cool["regimes"]["sustained"]["rounds"] <= 10
    assert cool["regimes"]["full"]["rounds"] >= 30


def test_back_to_back_samples_are_per_launch_and_heat_the_board(tmp_path):
    """``repeat``: each sample is that many launches a side, divided; the stream of launches
    reaches the sustained clock where rounds of one launch a side do not (attention at S2048
    on the H200: 600 such rounds stayed at 1980 MHz, session 8)."""
    fake = {"throttle_after_launches": 200, "throttled_mhz": 1680}
    single = _run(tmp_path, {}, fake=fake, baseline={"clock_sensitivity": 1.0})
    assert single["repeat"] == 1 and single["throttled"] is False  # 80 timed launches
    b2b = _run(tmp_path, {"repeat": 10}, fake=fake, baseline={"clock_sensitivity": 1.0})
    assert b2b["repeat"] == 10 and b2b["candidate"]["n"] == 40
    assert b2b["candidate"]["median_ms"] == pytest.approx(1.6, rel=0.01)  # per launch
    assert b2b["throttled"] is True and b2b["regimes"]["sustained"]["rounds"] >= 25
    assert b2b["regimes"]["sustained"]["baselines"]["fake.add"]["speedup"] == pytest.approx(
        1.38 * 1980 / 1680 / 1.6, rel=0.01)


@pytest.mark.parametrize("repeat", [0, 1001, 2.5])
def test_back_to_back_count_is_bounded(tmp_path, repeat):
    _, mod = _fake_module(tmp_path)
    with pytest.raises(JobError, match="repeat"):
        Job.from_json(_vadd_doc(mod, [], {"repeat": repeat}))


class _NoClock(FakeDevice):
    clock_note = "nvidia-ml-py is not installed (test)"

    def sm_clock_mhz(self):
        return None


def test_without_clock_readings_the_result_says_so(tmp_path):
    t = _run(tmp_path, {}, device=_NoClock)
    assert t["clock_note"] == "nvidia-ml-py is not installed (test)"
    assert t["throttled"] is None and set(t["clocks_mhz"]) == {None}
    assert t["regimes"] == {"full": {"rounds": 0}, "sustained": {"rounds": 0}}
    assert t["baselines"]["fake.add"]["speedup"] == pytest.approx(1.38 / 1.6, rel=0.01)


def test_the_mid_timing_guard_check_is_not_charged_to_the_timing_budget(tmp_path, monkeypatch):
    """The H200, 2026-12-01: checking a 268 MB attention output in the middle of timing took
    longer than the 2 s budget, so every large job stopped at 5 samples (`converged: false`)."""
    from kcoral import guards

    real = guards.GuardRun.check_iteration

    def slow_check(self, *a, **kw):
        time.sleep(0.7)  # longer than the job's whole timing budget
        return real(self, *a, **kw)

    monkeypatch.setattr(guards.GuardRun, "check_iteration", slow_check)
    monkeypatch.setattr(guards.GuardRun, "mid_round", lambda self: 2)  # in the first batch
    t = _run(tmp_path, {"budget_s": 0.5, "min_iters": 10, "max_iters": 30})
    assert t["converged"] and t["candidate"]["n"] >= 10 and t["elapsed_s"] > 0.7


class _GatedOnce(FakeDevice):
    """A board whose third gated round had to be released by the gate's timer (a launcher
    that waited for the device): later rounds must run ungated, and the result must say so."""

    calls: list

    def timed_batch(self, fns, l2_flush, gate=False):
        out = super().timed_batch(fns, l2_flush)
        if len(fns) == 1:  # a guard's checked iteration of the candidate alone, not a round
            return out
        self.calls = getattr(self, "calls", [])
        self.calls.append(gate)
        self.last_gate = ("late" if len(self.calls) == 3 else "gated") if gate else "off"
        return out


def test_a_late_gate_turns_the_gate_off_for_the_rest_of_the_job(tmp_path):
    dev = {}

    class Dev(_GatedOnce):
        def __init__(self, spec):
            super().__init__(spec)
            dev["d"] = self

    t = _run(tmp_path, {}, device=Dev)
    g = t["launch_gate"]
    calls = dev["d"].calls
    assert calls[:3] == [True, True, True] and not any(calls[3:]) and len(calls) >= 40
    assert g["requested"] and g["gated_rounds"] == 2 and g["late_rounds"] == 1
    assert g["state"].startswith("late: a launcher waited for the device")


def test_a_board_without_a_gate_says_why_and_gate_off_is_honoured(tmp_path):
    t = _run(tmp_path, {})
    assert t["launch_gate"]["gated_rounds"] == 0 and t["launch_gate"]["requested"]
    assert t["launch_gate"]["state"] == \
        "unavailable: the fake board models no host launch overhead"
    off = _run(tmp_path, {"launch_gate": False})
    assert off["launch_gate"] == {"requested": False, "gated_rounds": 0, "late_rounds": 0,
                                  "state": "off"}


def test_an_optional_baseline_that_is_not_installed_is_left_out_and_named(tmp_path):
    """FLA on a daemon without it (H200, 2026-12-01: every KDA job was refused, nothing timed):
    an optional baseline is left out, the candidate is timed against the others, and the
    result names the missing one; a required one still fails the job."""
    blobs, mod = _fake_module(tmp_path, time_ms=1.6)
    doc = _vadd_doc(mod, [{"name": "fla.chunk_kda", "optional": True},
                          {"name": "fake.add", "args": {"a": "a", "b": "b", "out": "out",
                                                         "time_ms": 1.38}}],
                    {"min_iters": 10, "max_iters": 10, "budget_s": 30})
    job = Job.from_json(doc)
    reg = registries()
    job.validate_plugins(reg.baselines, reg.tools)  # accepted: the missing one is optional
    dev = FakeDevice(BoardSpec("f", "fake", "sm_90a", options={"noise": 0.001}))
    dev.begin_job(job.doc)
    t = run_job(job, dev, blobs, reg.baselines, lambda s, m: None)["timing"]
    assert list(t["baselines"]) == ["fake.add"] and t["interleaved"] == ["candidate", "fake.add"]
    assert t["baselines_missing"]["fla.chunk_kda"].startswith("unknown baseline 'fla.chunk_kda'")
    doc["baselines"][0]["optional"] = False
    required = Job.from_json(doc)
    with pytest.raises(JobError, match=r"baselines\[0\]\.name: unknown baseline 'fla\.chunk_kda'"):
        required.validate_plugins(reg.baselines, reg.tools)
    dev.begin_job(required.doc)
    with pytest.raises(JobFailure, match="unavailable.baseline: unknown baseline"):
        run_job(required, dev, blobs, reg.baselines, lambda s, m: None)


def _offset_runs(blobs, offset, run_atol):
    """Two runs whose uploaded references sit `offset` away from a + b; the first carries
    `run_atol` (a per-run atol, `kcoral.job.Run.atol`) when given."""
    rr = []
    for seed, when in ((1, "before"), (2, "after")):
        rng = np.random.default_rng(seed)
        a, b = rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(
            np.float32)
        rr.append({"seed": seed, "when": when,
                   "inputs": {"a": blobs.put_array(a), "b": blobs.put_array(b)},
                   "expected": {"out": blobs.put_array(a + b + np.float32(offset[seed]))}})
    if run_atol is not None:
        rr[0]["atol"] = {"out": run_atol}
    return rr


@pytest.mark.parametrize("offset, run_atol, failing_seed", [
    ({1: 0.01, 2: 0.0}, 0.02, None),     # seed 1's own atol covers its error
    ({1: 0.01, 2: 0.0}, None, 1),        # without it, the check's (strict) atol applies
    ({1: 0.01, 2: 0.0}, 0.005, 1),       # a run atol tighter than the error still fails
    ({1: 0.0, 2: 0.01}, 0.02, 2),        # another run's atol does not leak to seed 2
])
def test_a_runs_own_atol_applies_to_its_reference_only(tmp_path, offset, run_atol,
                                                       failing_seed):
    run, _ = make(tmp_path, runs=lambda blobs: _offset_runs(blobs, offset, run_atol),
                  checks=[{"buffer": "out", "rtol": 0.0, "atol": 1e-3}])
    if failing_seed is None:
        r = run()
        assert r["verified"]
        assert [c["checks"][0]["atol"] for c in r["correctness"]] == [0.02, 1e-3]
    else:
        with pytest.raises(JobFailure, match=f"seed {failing_seed}"):
            run()


@pytest.mark.parametrize("atol, field, message", [
    ({"x": 0.1}, "runs[0].atol.x", "'x' is not a checked buffer"),
    ({"out": -1}, "runs[0].atol.out", ""),
    ({"out": float("inf")}, "runs[0].atol.out", ""),
])
def test_a_run_atol_names_a_checked_buffer_and_a_bounded_number(atol, field, message):
    doc = {"target": "sm_90a", "module": {"format": "fake", "blob": "0" * 64},
           "buffers": [{"name": "out", "dtype": "f32", "shape": [4], "output": True},
                       {"name": "x", "dtype": "f32", "shape": [4]}],
           "launches": [{"entry": "k", "grid": [1], "block": [4], "args": [{"buffer": "out"}]}],
           "checks": [{"buffer": "out"}],
           "runs": [{"seed": 1, "when": "before", "atol": atol}]}
    with pytest.raises(JobError) as ei:
        Job.from_json(doc)
    assert [(f, m) for f, m in ei.value.problems if f == field and message in m], \
        ei.value.problems


def _two_launch_job(tmp_path, timing, device=FakeDevice):
    """The fake vadd as a plan of two launches (``k`` 0.05 ms then ``k2`` 0.2 ms, both
    writing out = a + b), on `device`."""
    blobs = BlobStore(tmp_path)
    mod = blobs.put(json.dumps({"kernels": {"k": {"op": "add", "time_ms": 0.05},
                                            "k2": {"op": "add", "time_ms": 0.2}}}).encode())
    doc = _vadd_doc(mod, [], dict({"min_iters": 10, "budget_s": 1.0}, **timing))
    doc["launches"] = doc["launches"] + [dict(doc["launches"][0], entry="k2")]
    return _timing_of(doc, blobs, device)


def test_a_plans_time_is_split_by_launch(tmp_path):
    """A candidate of several launches gets `split_samples` extra samples with an event
    between launches: each launch's median and share, beside the paired rounds' median."""
    t = _two_launch_job(tmp_path, {"split_samples": 12})
    split = t["launch_split"]
    assert split["samples"] == 12 and [ln["entry"] for ln in split["launches"]] == ["k", "k2"]
    k, k2 = split["launches"]
    assert k["median_ms"] == pytest.approx(0.05, rel=0.01)
    assert k2["median_ms"] == pytest.approx(0.2, rel=0.01)
    assert k["share"] == pytest.approx(0.2, rel=0.02) and split["sum_ms"] == pytest.approx(
        split["candidate_median_ms"], rel=0.01)
    assert "launch_split" not in _two_launch_job(tmp_path / "off", {"split_samples": 0})


def test_a_single_launch_has_no_split_and_a_board_without_one_says_so(tmp_path):
    assert "launch_split" not in _run(tmp_path, {})

    class NoSplit(FakeDevice):
        def timed_split(self, fns, l2_flush):
            raise NotImplementedError

    t = _two_launch_job(tmp_path / "b", {}, device=NoSplit)
    assert t["launch_split"] == {"skipped": "board kind 'fake' cannot time launches apart"}
