"""The measurement protocol (what a number from KCoral means); runs inside a board's worker.

1. Load the module; allocate every buffer.
2. Correctness *before* timing: for each ``when: before`` run, fresh inputs (generators reseeded
   with the run's seed, or that run's uploaded arrays), outputs poisoned (NaN for floats;
   integers alternate all-ones and 0x5A bytes from run to run), launch, compare each checked
   buffer with the run's expected array or a baseline's output. A job without runs gets one smoke
   run (must not fault).
3. Timing (boards that can time), on the inputs of the run whose seed is ``timing.seed`` (or the
   generators with that seed): the candidate's first launch gives the reference of the
   timed-output guard (`kcoral.guards`); warm-up; then rounds in which the candidate and each
   baseline run back to back in a random order, each after an L2 flush (a memset of a buffer
   >= 2x L2) and between CUDA events, with the SM clock read before and after every round
   (`kcoral.clocks`); rounds continue until ``min_iters`` are taken and the relative standard
   error of every median is below ``rel_noise``, or ``budget_s`` / ``max_iters`` ends them
   (then ``converged: false``). The outputs of a random round's iteration and of one after the
   last round are checked; then the inputs are perturbed (guards).
4. Correctness *after* timing (``when: after`` runs), to catch kernels that pass once and then
   corrupt state.
5. Report median, IQR and every sample with the clock of its round; the ratio to each baseline
   as the median of the paired ratios (``speedup``, with a distribution-free 95% confidence
   interval of that median, ``speedup_ci95``), also per clock regime (full clock and
   sustained) with ``throttled`` when the clock fell more than 5% (`kcoral.stats`); TFLOP/s and
   GB/s from the declared work, the physical floor of the device (`kcoral.peaks`) and a
   ``suspect`` flag when the median is below it; and each guard's verdict.

Every launch of the candidate and the sync that waits for it is a guarded section of the
per-launch watchdog (`kcoral.watchdog`). Failures raise `JobFailure`; the worker turns them into
typed errors.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .dtypes import dtype_of, is_float
from .errors import JobFailure
from .guards import GuardRun
from .job import Buffer, Job
from .peaks import flops_peak
from .stats import (clock_summary, paired_ratio, paired_ratio_ci, regime_of, regimes,
                    rel_stderr_median, summary)
from .tolerance import compare
from .watchdog import NoWatchdog

PROTOCOL = "kcoral-measure/3"  # /2: paired ratios, clock regimes, guards, random A/B order;
# /3: each round held behind a launch gate, so host launch overhead is not timed
POISON_ALT = 0x5A  # integer outputs: every other checked run is poisoned with this byte
ORDER_SALT = 0x6B636F72  # separates the order/guard random stream from the input generators


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

    def __init__(self, job: Job, dev, blobs, baselines, progress, watchdog=None):
        self.job, self.dev, self.blobs, self.baselines = job, dev, blobs, baselines
        self.progress = progress
        # every launch of the candidate and the sync that waits for it is a guarded section: a
        # hung kernel is a typed timeout.launch in seconds, not after the whole exec budget
        self.wd = watchdog or NoWatchdog()
        self.doc = job.doc  # the canonical JSON form that devices and baselines read
        self.shadow: dict = {}  # checked buffer -> shadow buffer for baseline references
        self.rng = np.random.default_rng([job.timing.seed, ORDER_SALT])  # order, guard choices
        self.initial: dict = {}  # buffer -> host array the last fill_inputs wrote
        self.fingerprints: list = []  # per correctness run: what its inputs were
        self._checked_runs = 0

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
        self._launch_fns = fns
        if len(fns) == 1:
            return fns[0]

        def all_launches():
            for f in fns:
                f()
        return all_launches

    def _timed_baselines(self) -> tuple:
        """``([(request, launcher)], {name: why})``: the job's baselines prepared for timing;
        an optional one that is not installed here or cannot run on this board is left out
        with its reason (a required one fails the job: `_baseline`)."""
        out, missing = [], {}
        for b in self.job.baselines:
            try:
                out.append((b, self._baseline(b.name, b.args)))
            except JobFailure as e:
                if not (b.optional and e.type == "unavailable.baseline"):
                    raise
                missing[b.name] = e.message
        return out, missing

    def baseline_launcher(self, name: str):
        """The launcher of the job's baseline `name` with the job's args for it (what a
        profiler runs in place of the candidate: ``kcoral.runjob --baseline``); `JobFailure`
        ``validation.baseline`` when the job names no such baseline."""
        for b in self.job.baselines:
            if b.name == name:
                return self._baseline(b.name, b.args)
        raise JobFailure("validation.baseline", f"baseline {name!r} is not one of the job's "
                         f"baselines {[b.name for b in self.job.baselines]}")

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

    def poison(self, b: Buffer, pattern: int = 0xFF, name: "str | None" = None) -> None:
        """All-ones bytes (NaN for every float type); integers may take another `pattern`, so
        that an output left unwritten cannot match a reference of all ones on every run."""
        name = name or b.name
        if pattern == 0xFF or is_float(b.dtype):
            self.dev.poison(name, dtype_of(b.dtype).itemsize, is_float(b.dtype))
        else:
            self.dev.write(name, np.full(b.nbytes, pattern, np.uint8))

    # --- device helpers -----------------------------------------------------------------------
    def launch(self, what: str) -> None:
        """One guarded launch of the candidate, synchronized."""
        with self.wd.guard(what):
            self.kernel()
            self.dev.sync()

    def read(self, buffer: str) -> np.ndarray:
        b = self.job.buffer(buffer)
        return self.dev.read(b.name, dtype_of(b.dtype), tuple(b.shape))

    def baseline_reference(self, check) -> np.ndarray:
        """Run `check`'s reference baseline into its shadow buffer on the current inputs."""
        b = self.job.buffer(check.buffer)
        sname = self.shadow[check.buffer]
        self.poison(b, name=sname)
        run = self._baseline(check.baseline, check.baseline_args,
                             {check.baseline_out: sname})
        run()
        self.dev.sync()
        exp = self.dev.read(sname, dtype_of(b.dtype), tuple(b.shape))
        if exp.size and np.all(exp.reshape(-1).view(np.uint8) == 0xFF):
            # still the poison: a reference that was never written would match a candidate
            # that writes nothing (NaN == NaN counts as equal)
            raise JobFailure("launch.baseline", f"baseline {check.baseline!r} did not write the "
                             f"reference for {check.buffer!r} (check its "
                             f"baseline_args/baseline_out)")
        return exp

    def expected_array(self, digest: str, buffer: str) -> np.ndarray:
        return _blob_array(self.blobs, digest, self.job.buffer(buffer),
                           f"runs.expected.{buffer}")

    def run_inputs(self, seed: int) -> dict:
        """The uploaded inputs of the first correctness run with `seed` ({} if none)."""
        return next((dict(r.inputs) for r in self.job.runs if r.seed == seed), {})

    def run_expected(self, seed: int) -> dict:
        return next((dict(r.expected) for r in self.job.runs if r.seed == seed), {})

    def run_atol(self, seed: int) -> dict:
        """The per-buffer atol of the run with this seed (`kcoral.job.Run.atol`), or {}."""
        return next((dict(r.atol) for r in self.job.runs if r.seed == seed), {})

    def other_values(self, index: int, b: Buffer):
        """Valid contents of buffer `b` other than the timing inputs': other runs' uploaded
        arrays, then its generator with other seeds (lazily)."""
        t = self.job.timing
        for r in self.job.runs:
            if r.seed != t.seed and b.name in r.inputs:
                yield _blob_array(self.blobs, r.inputs[b.name], b, f"runs.inputs.{b.name}")
        if b.init.kind in ("normal", "uniform", "integers"):
            for k in (1, 2, 3):
                yield generate(b, index, t.seed + 7919 * k, self.blobs)

    # --- inputs -------------------------------------------------------------------------------
    def fill_inputs(self, seed: int, overrides: "dict | None" = None,
                    pattern: int = 0xFF) -> None:
        overrides = overrides or {}
        self.initial = {}
        for i, b in enumerate(self.job.buffers):
            if b.name in overrides:
                a = _blob_array(self.blobs, overrides[b.name], b, f"runs.inputs.{b.name}")
            else:
                a = generate(b, i, seed, self.blobs)
            if a is None:  # "empty" (outputs by default): poisoned, so a kernel that skips
                self.poison(b, pattern)  # an element cannot pass by leftover contents
            else:  # an input, or an in-out buffer whose initial contents are an input
                self.dev.write(b.name, a)
                self.initial[b.name] = a

    def _fingerprint(self, seed: int, inputs: dict) -> tuple:
        """What a run's inputs were: uploaded digests, generator seeds, fixed contents."""
        out = []
        for b in self.job.buffers:
            if b.name in inputs:
                out.append(inputs[b.name])
            elif b.init.kind in ("normal", "uniform", "integers"):
                out.append(f"{b.init.kind}:{seed}")
            elif b.init.kind == "blob":
                out.append(b.init.blob)
        return tuple(out)

    # --- correctness --------------------------------------------------------------------------
    def correctness(self, when: str) -> list:
        job = self.job
        runs = [(r.seed, r.inputs, r.expected, r.atol) for r in job.runs if r.when == when]
        if not runs and when == "before":
            runs = [(job.timing.seed + 1, {}, {}, {})]
        out = []
        for seed, inputs, expected, run_atol in runs:
            self.progress("correctness", f"{when} timing, seed {seed}")
            pattern = 0xFF if self._checked_runs % 2 == 0 else POISON_ALT
            self._checked_runs += 1
            self.fill_inputs(seed, inputs, pattern)
            self.fingerprints.append(self._fingerprint(seed, inputs))
            self.launch(f"the candidate's launch ({when} timing, seed {seed})")
            refs = {c.buffer: self.baseline_reference(c) for c in job.checks
                    if c.baseline and c.buffer not in expected}
            checks = []
            for c in job.checks:
                got = self.read(c.buffer)
                if c.buffer in expected:
                    exp, src = self.expected_array(expected[c.buffer], c.buffer), "uploaded"
                elif c.buffer in refs:
                    exp, src = refs[c.buffer], f"baseline {c.baseline}"
                else:
                    continue
                atol = run_atol.get(c.buffer, c.atol)   # this run's reference's own atol
                cmp = compare(got, exp, c.rtol, atol, c.rms)
                cmp.update({"buffer": c.buffer, "reference": src, "atol": atol})
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
    def timing(self, guards: GuardRun) -> dict:
        t = self.job.timing
        self.progress("correctness", "guards: the first launch on the timing inputs, checked")
        guards.prepare()  # the timing inputs and the timed-output reference
        self.progress("timing", f"preparing {len(self.job.baselines)} baseline(s)")
        baselines, missing = self._timed_baselines()
        self.progress("timing", "warm-up: the candidate")
        names = ["candidate"] + [b.name for b, _ in baselines]
        fns = [back_to_back(f, t.repeat) for f in [self.kernel] + [fn for _, fn in baselines]]
        # at least one sample's launches in one guarded section: the watchdog's limit (50 x
        # the longest section so far) then covers a round of `repeat` launches a side
        warmup = max(t.warmup, t.repeat)
        with self.wd.guard("the candidate's warm-up launches"):
            for _ in range(warmup):
                self.kernel()
            self.dev.sync()
        for b, f in baselines:  # operator plugins, which may compile now: not guarded
            # each its own progress step: a job killed at its exec budget quotes its last
            # progress, and session 13's "hang" in "timing: warm-up" was pyptx's first compile,
            # not the kernel (docs/PERFORMANCE.md "Session 13, branch gemmhang")
            self.progress("timing", f"warm-up: baseline {b.name} (its first call may compile)")
            for _ in range(warmup):
                f()
            self.dev.sync()
        clock = self.dev.sm_clock_mhz
        full = self.dev.info().get("max_clock_mhz")
        readings = [clock()]
        samples: list = [[] for _ in fns]
        round_clocks: list = []
        candidate_first = cooldowns = 0
        gate = {"requested": bool(t.launch_gate), "gated_rounds": 0, "late_rounds": 0,
                "state": "off"}
        idle = 0.0
        flush = flush_of(t)
        mid = guards.mid_round()
        t0 = time.monotonic()
        converged = False
        batch = 5
        last_report = t0
        noise = math.inf
        while True:
            for _ in range(batch):
                n = len(samples[0]) + 1
                if t.cooldown_s and round_clocks and \
                        regime_of(round_clocks[-1], full) == "sustained":
                    time.sleep(t.cooldown_s)  # let the card return to its full clock
                    idle += t.cooldown_s
                    cooldowns += 1
                # plain ints: a numpy int64 in the result cannot cross the worker's JSON pipe
                order = ([int(i) for i in self.rng.permutation(len(fns))]
                         if t.randomize and len(fns) > 1 else list(range(len(fns))))
                candidate_first += int(order[0] == 0)
                c0 = clock()
                gated = t.launch_gate and not gate["late_rounds"]
                with self.wd.guard(f"timed round {n}"):
                    ms = self.dev.timed_batch([fns[i] for i in order], flush, gate=gated)
                    ms = [m / t.repeat for m in ms]
                c1 = clock()
                if gated:
                    self._count_gate(gate, self.dev.last_gate)
                for k, i in enumerate(order):
                    samples[i].append(ms[k])
                known = [c for c in (c0, c1) if c is not None]
                round_clocks.append(min(known) if known else None)
                readings += [c0, c1]
                if n == mid:  # its download and compare are not timing: off the budget
                    g0 = time.monotonic()
                    guards.check_iteration(self._timed_candidate, f"timed round {n}")
                    idle += time.monotonic() - g0
            n = len(samples[0])
            noise = max(rel_stderr_median(s) for s in samples)
            if n >= t.min_iters and noise < t.rel_noise:
                converged = True
                break
            if n >= t.max_iters or time.monotonic() - t0 - idle > t.budget_s:
                break
            if time.monotonic() - last_report > 0.5:
                self.progress("timing", f"{n} samples, relative noise {noise:.2%}")
                last_report = time.monotonic()
        guards.check_iteration(self._timed_candidate, "a timed iteration after the last round")
        split = self._launch_split(flush)
        readings.append(clock())
        stats = {nm: summary(s) for nm, s in zip(names, samples)}
        clocks = clock_summary(readings, full)
        throttled = clocks.pop("throttled", None)
        res = {"candidate": stats["candidate"], "converged": converged,
               "rel_noise": noise if math.isfinite(noise) else None,
               # which series kept the job from converging: the candidate or a baseline
               "rel_noise_by": {nm: (v if math.isfinite(v) else None) for nm, v in
                                ((nm, rel_stderr_median(s)) for nm, s in zip(names, samples))},
               "rel_noise_target": t.rel_noise,
               "elapsed_s": time.monotonic() - t0, "interleaved": names,
               "order": "random per round" if t.randomize and len(fns) > 1 else "fixed",
               "candidate_first_rounds": candidate_first,
               "l2_flush": t.l2_flush, "l2_flush_by": t.l2_flush_by if t.l2_flush else None,
               "launch_gate": gate, "repeat": t.repeat,
               "sm_clock_mhz": dict(clocks, before=readings[0], after=readings[-1]),
               "throttled": throttled, "clocks_mhz": round_clocks, "baselines": {}}
        if not any(c is not None for c in readings):
            res["clock_note"] = getattr(self.dev, "clock_note", "") or \
                f"board kind {self.dev.kind!r} reports no SM clock"
        if hasattr(self.dev, "clock_reasons"):
            res["clock_reasons"] = self.dev.clock_reasons()
        if t.cooldown_s:
            res["cooldown"] = {"s": t.cooldown_s, "count": cooldowns, "idle_s": idle}
        by_name = {nm: s for nm, s in zip(names, samples)}
        if missing:
            res["baselines_missing"] = missing
        for b, _ in baselines:
            st = stats[b.name]
            med_c = stats["candidate"]["median_ms"]
            res["baselines"][b.name] = dict(
                st, speedup=paired_ratio(by_name["candidate"], by_name[b.name]),
                speedup_ci95=paired_ratio_ci(by_name["candidate"], by_name[b.name]),
                speedup_of_medians=st["median_ms"] / med_c if med_c > 0 else None)
        res["regimes"] = regimes(by_name["candidate"],
                                 {b.name: by_name[b.name] for b, _ in baselines},
                                 round_clocks, full)
        res.update(throughput(self.job.work, stats["candidate"]["median_ms"], self.dev.info()))
        if split is not None:
            if "skipped" not in split:
                split["candidate_median_ms"] = stats["candidate"]["median_ms"]
            res["launch_split"] = split
        return res

    def _launch_split(self, flush: str) -> "dict | None":
        """Where a multi-launch candidate's time goes (a plan of several kernels): after the
        paired rounds, ``timing.split_samples`` extra samples of its launches back to back
        after one flush, an event between every two (`Device.timed_split`), each launch's
        median. Separate from the paired rounds, so the protocol's figures are unchanged;
        None for a single launch or split_samples 0."""
        n = self.job.timing.split_samples
        if len(self._launch_fns) < 2 or not n:
            return None
        entries = [ln["entry"] for ln in self.doc["launches"]]
        per: list = [[] for _ in entries]
        try:
            for i in range(n):
                with self.wd.guard(f"launch split sample {i + 1}"):
                    ms = self.dev.timed_split(self._launch_fns, flush)
                for k, m in enumerate(ms):
                    per[k].append(m)
        except NotImplementedError:
            return {"skipped": f"board kind {self.dev.kind!r} cannot time launches apart"}
        stats = [summary(p) for p in per]
        total = sum(st["median_ms"] for st in stats)
        return {"samples": n, "sum_ms": total,
                "launches": [{"entry": e, "median_ms": st["median_ms"], "iqr_ms": st["iqr_ms"],
                              "share": st["median_ms"] / total if total > 0 else None}
                             for e, st in zip(entries, stats)]}

    @staticmethod
    def _count_gate(gate: dict, state: str) -> None:
        """Tally how a gated round went (`kcoral.boards.launch_gate`). After one ``late``
        round (a launcher waited for the device while the gate held it) the job's later rounds
        run ungated; ``state`` keeps the reason a board could not gate at all."""
        if state == "gated":
            gate["gated_rounds"] += 1
        elif state == "late":
            gate["late_rounds"] += 1
            gate["state"] = ("late: a launcher waited for the device while the round was held; "
                             "later rounds ran ungated (host launch overhead timed)")
            return
        if gate["state"] == "off" or state != "gated":
            gate["state"] = state

    def _timed_candidate(self) -> float:
        with self.wd.guard("a checked timed iteration"):
            return self.dev.timed_batch([self.kernel], flush_of(self.job.timing))[0]


def flush_of(t) -> str:
    """The L2 flush a board's `timed_batch` is asked for: ``""`` (none), ``write`` or
    ``read`` (`kcoral.boards.l2_flush`)."""
    return t.l2_flush_by if t.l2_flush else ""


def back_to_back(fn, repeat: int):
    """`fn` enqueued `repeat` times in a row: one timed sample of several launches (their mean
    is the sample), between one pair of events after one L2 flush. A stream of back-to-back
    launches keeps the board as busy as a model's stream does, so a short kernel reaches the
    sustained clock that its rounds of single launches, mostly host time, never do (attention
    at S2048, 600 rounds: the H200 stayed at 1980 MHz, session 8). The launches after the
    first may find their inputs in L2: inputs well above L2's size are what this is for."""
    if repeat == 1:
        return fn

    def run():
        for _ in range(repeat):
            fn()
    return run


def throughput(work, median_ms: float, info: dict) -> dict:
    """TFLOP/s, GB/s and the physical floor from declared work (`kcoral.job.Work`) and the
    board's peaks (`kcoral.peaks`); ``suspect`` when beaten. A board without peak figures (a
    device not in the table) gets no floor, and ``floor_note`` says why."""
    flops, nbytes = work.flops, work.bytes
    sec = median_ms / 1e3
    out: dict = {"tflops": None, "gbps": None, "floor_ms": None, "floor_fraction": None,
                 "suspect": False}
    if sec <= 0:
        return out
    floors = []
    if flops:
        out["tflops"] = flops / sec / 1e12
        peak = flops_peak(info, getattr(work, "flops_dtype", None))
        if peak:
            floors.append(flops / peak)
    if nbytes:
        out["gbps"] = nbytes / sec / 1e9
        if info.get("peak_bytes_per_s"):
            floors.append(nbytes / info["peak_bytes_per_s"])
    if (flops or nbytes) and not floors:
        out["floor_note"] = info.get("peak_unknown") or (
            f"no floor: board {info.get('name', '?')!r} declares no peak figures")
    if info.get("peak_source"):
        out["peak_source"] = info["peak_source"]
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


def run_job(job: Job, dev, blobs, baselines, progress, watchdog=None) -> dict:
    """Run the whole protocol; return the result document (raises `JobFailure`). `watchdog`
    (`kcoral.watchdog.Watchdog`) guards the candidate's launches; None guards nothing."""
    s = Session(job, dev, blobs, baselines, progress, watchdog)
    g = GuardRun(s)
    try:
        s.setup()
        before = s.correctness("before")
        timing = None
        timed = False
        try:
            if job.timing.enabled:
                if dev.can_time:
                    timing, timed = s.timing(g), True
                else:
                    timing = {"skipped": getattr(dev, "timing_note", "") or
                              f"board kind {dev.kind!r} does not time (correctness only)"}
                    g.repeat()  # the timed-output guard, untimed
                s.progress("correctness", "guards: the candidate on perturbed inputs, in "
                           "place and fresh")
                g.perturbation()
        except JobFailure as e:  # a guard caught it: the runs it passed are part of the story
            e.data.setdefault("correctness", before)
            raise
        after = s.correctness("after")
        checked = any(c["checks"] for c in before + after)
        res = {"status": "ok", "correctness": before + after,
               "verified": checked,
               "timing": timing, "protocol": PROTOCOL}
        res["guards"] = _guard_report(job, g, timed, before + after, s.fingerprints)
        if hasattr(dev, "job_notes"):  # what a simulating board ran (numsim's sim board)
            res["sim"] = dev.job_notes()
        return res
    finally:
        try:
            dev.free_all()
        except Exception:  # a faulted context cannot free; the worker is restarted anyway
            pass


def _guard_report(job: Job, g: GuardRun, timed: bool, runs: list, fingerprints: list) -> dict:
    out = {"seeds": g.seeds(runs, fingerprints)}
    if job.timing.enabled:
        out["timed_output"] = g.timed_output_report(timed)
        out["perturbation"] = g.report["perturbation"]
    else:
        why = "timing disabled: nothing was measured"
        out["timed_output"] = {"status": "n/a", "why": why}
        out["perturbation"] = {"status": "n/a", "why": why}
    return out
