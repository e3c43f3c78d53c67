"""The measurement protocol (what a number from KCoral means); runs inside a board's worker.

1. Load the module; allocate every buffer.
2. Correctness *before* timing: for each ``when: before`` run, fresh inputs (generators reseeded
   with the run's seed, or that run's uploaded arrays), outputs poisoned (NaN for floats, all-ones
   bits for integers), launch, compare each checked buffer with the run's expected array or a
   baseline's output. A job without runs gets one smoke run (must not fault, outputs must change
   from poison when there are checks with a baseline reference).
3. Timing (boards that can time): inputs from ``timing.seed``; warm-up; then rounds in which the
   candidate and each baseline run interleaved (A B A B), each after an L2 flush (a memset of a
   buffer >= 2x L2) and between CUDA events; rounds continue until ``min_iters`` are taken and the
   relative standard error of every median is below ``rel_noise``, or ``budget_s`` / ``max_iters``
   ends them (then ``converged: false``).
4. Correctness *after* timing (``when: after`` runs), to catch kernels that pass once and then
   corrupt state.
5. Report median, IQR, samples, SM clock before/after, TFLOP/s and GB/s from the declared work, the
   physical floor and a ``suspect`` flag when the median is below it, and the ratio to each
   baseline (``speedup`` = baseline median / candidate median).

Failures raise `JobFailure`; the worker turns them into typed errors.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .dtypes import dtype_of, is_float
from .errors import JobFailure
from .job import Buffer, Job
from .tolerance import compare

PROTOCOL = "kcoral-measure/1"


def _rng(seed: int, index: int) -> np.random.Generator:
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, index])


def generate(buf: Buffer, index: int, seed: int, blobs) -> "np.ndarray | None":
    """The initial contents of one buffer for `seed` (None for ``empty``: left poisoned)."""
    dt = dtype_of(buf.dtype)
    shape = tuple(buf.shape)
    init = buf.init
    if init.kind == "empty":
        return None
    if init.kind == "zeros":
        return np.zeros(shape, dt)
    if init.kind == "blob":
        return _blob_array(blobs, init.blob, buf, f"buffers[{index}].init.blob")
    rng = _rng(seed, index)
    if init.kind == "normal":
        a = rng.standard_normal(shape, dtype=np.float32) * _or(init.std, 1.0) \
            + _or(init.mean, 0.0)
    elif init.kind == "uniform":
        a = rng.uniform(_or(init.low, 0.0), _or(init.high, 1.0), shape)
    else:  # integers (the kinds are validated by the job model)
        a = rng.integers(int(_or(init.low, 0)), int(_or(init.high, 100)), shape)
    return a.astype(dt)


def _or(v, default):
    return default if v is None else v


def _blob_array(blobs, dg: str, buf: Buffer, field_: str) -> np.ndarray:
    try:
        a = blobs.get_array(dg)
    except Exception as e:  # a blob that is not an array is the client's mistake, typed
        raise JobFailure("validation.blob", f"{field_}: {e}") from None
    want = (tuple(buf.shape), dtype_of(buf.dtype))
    if (a.shape, a.dtype) != want:
        raise JobFailure("validation.blob", f"{field_}: blob {dg[:12]} is {a.dtype}{list(a.shape)}"
                         f", buffer {buf.name!r} is {want[1]}{list(want[0])}")
    return a


class Session:
    """One job on one device: buffers, launchers, baselines."""

    def __init__(self, job: Job, dev, blobs, baselines, progress):
        self.job, self.dev, self.blobs, self.baselines = job, dev, blobs, baselines
        self.progress = progress
        self.doc = job.doc  # the canonical JSON form that devices and baselines read
        self.shadow: dict = {}  # checked buffer -> shadow buffer for baseline references

    # --- setup --------------------------------------------------------------------------------
    def setup(self) -> None:
        job = self.job
        self.dev.load(self.blobs.get(job.module.blob), job.module.format, job.entries())
        if getattr(self.dev, "runs_ir", False):  # the sim board runs module.ir, not the module
            dg = job.module.ir
            self.dev.load_ir(self.blobs.get(dg) if dg else None, dg or "")
        for b in job.buffers:
            self.dev.alloc(b.name, b.nbytes)
        for c in job.checks:
            if c.baseline:
                sname = f"__ref_{c.buffer}"  # job buffer names never start with '__'
                self.dev.alloc(sname, job.buffer(c.buffer).nbytes)
                self.shadow[c.buffer] = sname
        self.kernel = self._kernel_launcher()
        self.progress("loaded", f"module {job.module.format} loaded; "
                      f"{len(job.buffers)} buffers")

    def _kernel_launcher(self):
        fns = [self.dev.launcher(ln, self.doc) for ln in self.doc["launches"]]
        if len(fns) == 1:
            return fns[0]

        def all_launches():
            for f in fns:
                f()
        return all_launches

    def _baseline(self, name: str, args: dict, out_override: "dict | None" = None):
        try:
            bl = self.baselines.get(name)
        except KeyError as e:
            raise JobFailure("unavailable.baseline", str(e.args[0])) from None
        why = bl.available(self.dev) if hasattr(bl, "available") else None
        if why:
            raise JobFailure("unavailable.baseline", f"baseline {name!r}: {why}")
        args = dict(args)
        if out_override:
            args.update(out_override)
        try:
            return bl.prepare(self.dev, self.doc, args)
        except JobFailure:
            raise
        except Exception as e:  # an operator's baseline plugin failed: typed, not a crash
            raise JobFailure("launch.baseline", f"baseline {name!r} could not be "
                             f"prepared: {type(e).__name__}: {e}") from None

    def _poison(self, name: str, b: Buffer) -> None:
        self.dev.poison(name, dtype_of(b.dtype).itemsize, is_float(b.dtype))

    # --- inputs -------------------------------------------------------------------------------
    def fill_inputs(self, seed: int, overrides: "dict | None" = None) -> None:
        overrides = overrides or {}
        for i, b in enumerate(self.job.buffers):
            if b.name in overrides:
                a = _blob_array(self.blobs, overrides[b.name], b, f"runs.inputs.{b.name}")
            else:
                a = generate(b, i, seed, self.blobs)
            if a is None:  # "empty" (outputs by default): poisoned, so a kernel that skips
                self._poison(b.name, b)  # an element cannot pass by leftover contents
            else:  # an input, or an in-out buffer whose initial contents are an input
                self.dev.write(b.name, a)

    # --- correctness --------------------------------------------------------------------------
    def correctness(self, when: str) -> list:
        job = self.job
        runs = [(r.seed, r.inputs, r.expected) for r in job.runs if r.when == when]
        if not runs and when == "before":
            runs = [(job.timing.seed + 1, {}, {})]
        out = []
        for seed, inputs, expected in runs:
            self.progress("correctness", f"{when} timing, seed {seed}")
            self.fill_inputs(seed, inputs)
            for buf, sname in self.shadow.items():
                self._poison(sname, job.buffer(buf))
            self.kernel()
            self.dev.sync()
            for c in job.checks:
                if c.baseline:
                    run = self._baseline(c.baseline, c.baseline_args,
                                         {c.baseline_out: self.shadow[c.buffer]})
                    run()
                    self.dev.sync()
            checks = []
            for c in job.checks:
                b = job.buffer(c.buffer)
                got = self.dev.read(b.name, dtype_of(b.dtype), tuple(b.shape))
                if c.buffer in expected:
                    exp = _blob_array(self.blobs, expected[c.buffer], b,
                                      f"runs.expected.{c.buffer}")
                    src = "uploaded"
                elif c.baseline:
                    exp = self.dev.read(self.shadow[c.buffer], dtype_of(b.dtype), tuple(b.shape))
                    src = f"baseline {c.baseline}"
                    if exp.size and np.all(exp.reshape(-1).view(np.uint8) == 0xFF):
                        # still the poison: a reference that was never written would match a
                        # candidate that writes nothing (NaN == NaN counts as equal)
                        raise JobFailure("launch.baseline", f"baseline {c.baseline!r} did not "
                                         f"write the reference for {c.buffer!r} (check its "
                                         f"baseline_args/baseline_out)")
                else:
                    continue
                cmp = compare(got, exp, c.rtol, c.atol, c.rms)
                cmp.update({"buffer": c.buffer, "reference": src})
                checks.append(cmp)
            ok = all(c["ok"] for c in checks)
            out.append({"seed": seed, "when": when, "ok": ok, "checks": checks})
            if not ok:
                bad = next(c for c in checks if not c["ok"])
                raise JobFailure(
                    "correctness.mismatch",
                    f"{bad['buffer']!r} differs from the {bad['reference']} reference "
                    f"({when} timing, seed {seed}): {bad.get('mismatches', '?')} of "
                    f"{bad.get('total', '?')} elements, max abs err {bad.get('max_abs')}"
                    + (f"; {bad['reason']}" if bad.get("reason") else ""),
                    data={"correctness": out})
        return out

    # --- timing -------------------------------------------------------------------------------
    def timing(self) -> dict:
        t = self.job.timing
        self.progress("timing", "warm-up")
        self.fill_inputs(t.seed)
        names = ["candidate"] + [b.name for b in self.job.baselines]
        fns = [self.kernel] + [self._baseline(b.name, b.args) for b in self.job.baselines]
        for _ in range(t.warmup):
            for f in fns:
                f()
        self.dev.sync()
        clock_before = self.dev.sm_clock_mhz()
        samples = [[] for _ in fns]
        t0 = time.monotonic()
        converged = False
        batch = 5
        last_report = t0
        while True:
            for _ in range(batch):
                ms = self.dev.timed_batch(fns, t.l2_flush)
                for s, v in zip(samples, ms):
                    s.append(v)
            n = len(samples[0])
            noise = max(_rel_stderr_median(s) for s in samples)
            if n >= t.min_iters and noise < t.rel_noise:
                converged = True
                break
            if n >= t.max_iters or time.monotonic() - t0 > t.budget_s:
                break
            if time.monotonic() - last_report > 0.5:
                self.progress("timing", f"{n} samples, relative noise {noise:.2%}")
                last_report = time.monotonic()
        clock_after = self.dev.sm_clock_mhz()
        stats = {nm: _stats(s) for nm, s in zip(names, samples)}
        res = {"candidate": stats["candidate"], "converged": converged,
               "rel_noise": noise if math.isfinite(noise) else None,
               "rel_noise_target": t.rel_noise,
               "elapsed_s": time.monotonic() - t0, "interleaved": names,
               "l2_flush": t.l2_flush,
               "sm_clock_mhz": {"before": clock_before, "after": clock_after},
               "baselines": {}}
        for b in self.job.baselines:
            st = stats[b.name]
            res["baselines"][b.name] = dict(
                st, speedup=st["median_ms"] / stats["candidate"]["median_ms"]
                if stats["candidate"]["median_ms"] > 0 else None)
        res.update(throughput(self.job.work, stats["candidate"]["median_ms"], self.dev.info()))
        return res


def _rel_stderr_median(s: list) -> float:
    """Relative standard error of the median, from the IQR (robust to outliers):
    sigma ~ IQR/1.349, se(median) ~ 1.2533 * sigma / sqrt(n)."""
    if len(s) < 3:
        return math.inf
    q1, med, q3 = np.percentile(s, [25, 50, 75])
    if med <= 0:
        return math.inf
    return 1.2533 * ((q3 - q1) / 1.349) / math.sqrt(len(s)) / med


def _stats(s: list) -> dict:
    a = np.asarray(s, dtype=np.float64)
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    return {"median_ms": float(med), "iqr_ms": float(q3 - q1), "q1_ms": float(q1),
            "q3_ms": float(q3), "min_ms": float(a.min()), "max_ms": float(a.max()),
            "n": int(a.size), "samples_ms": [round(float(x), 6) for x in a]}


def throughput(work, median_ms: float, info: dict) -> dict:
    """TFLOP/s, GB/s and the physical floor from declared work (`kcoral.job.Work`);
    ``suspect`` when beaten."""
    flops, nbytes = work.flops, work.bytes
    sec = median_ms / 1e3
    out: dict = {"tflops": None, "gbps": None, "floor_ms": None, "floor_fraction": None,
                 "suspect": False}
    if sec <= 0:
        return out
    floors = []
    if flops:
        out["tflops"] = flops / sec / 1e12
        floors.append(flops / info.get("peak_flops_per_s", 790e12))
    if nbytes:
        out["gbps"] = nbytes / sec / 1e9
        floors.append(nbytes / info.get("peak_bytes_per_s", 4.3e12))
    if floors:
        floor = max(floors)
        out["floor_ms"] = floor * 1e3
        out["floor_fraction"] = floor / sec
        if sec < floor:
            out["suspect"] = True
            out["suspect_reason"] = (f"median {median_ms:.4g} ms is below the physical floor "
                                     f"{floor * 1e3:.4g} ms (declared work / board peak): the "
                                     f"declared FLOPs/bytes or the kernel's output are wrong")
    return out


def run_job(job: Job, dev, blobs, baselines, progress) -> dict:
    """Run the whole protocol; return the result document (raises `JobFailure`)."""
    s = Session(job, dev, blobs, baselines, progress)
    try:
        s.setup()
        before = s.correctness("before")
        timing = None
        if job.timing.enabled:
            if dev.can_time:
                timing = s.timing()
            else:
                timing = {"skipped": getattr(dev, "timing_note", "") or
                          f"board kind {dev.kind!r} does not time (correctness only)"}
        after = s.correctness("after")
        checked = any(c["checks"] for c in before + after)
        res = {"status": "ok", "correctness": before + after,
               "verified": checked,
               "timing": timing, "protocol": PROTOCOL}
        if hasattr(dev, "job_notes"):  # what a simulating board ran (numsim's sim board)
            res["sim"] = dev.job_notes()
        return res
    finally:
        try:
            dev.free_all()
        except Exception:  # a faulted context cannot free; the worker is restarted anyway
            pass
