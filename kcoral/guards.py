"""Guards against kernels that game the measurement (issue 17), run inside a job by
`kcoral.measure`.

KCoral's ratios are what agents optimize against, so a kernel that passes the correctness runs and
then does less work while it is timed must not win. Learned from the public harnesses (the TIRx
Harness's input-dependence and after-timing checks, SOL-ExecBench's reward-hack evaluator,
kernelbot's KernelGuard patterns for result caching): a check that runs only on fresh inputs
before timing misses a kernel that keeps state across launches. Each guard below targets one way
of cheating and reports ``passed``, ``failed`` (the job fails with the typed error named), ``n/a``
(nothing to guard) or ``incomplete`` (it could not be applied: ``tirxh bench`` then never calls the
item clean).

``timed_output`` -- the outputs of a timed iteration (``correctness.timed-output``). Before the
warm-up the candidate runs once on the timing inputs; its outputs are checked against the
uploaded expected arrays for that seed, or a baseline reference, or -- when the job has neither
-- kept as the reference themselves. Then, at a round drawn at random and after the last round,
the pure outputs are poisoned (in-place outputs get their initial contents back) and one timed
iteration runs; its outputs must match the reference within the check's tolerance. A first
launch kept as its own reference is not compared with itself: a float output of it that still
holds the poison pattern fails as ``correctness.unwritten`` (never written), one holding NaN or
Inf as ``correctness.nonfinite`` (neither could ever match itself: NaN != NaN). Catches a
kernel that computes on its first launch and skips later ones (a flag in a scratch buffer). On a
board that does not time (sim), the same sequence runs untimed: the candidate is launched
``timing.warmup`` times, then once more with its outputs checked.

``perturbation`` -- outputs follow the inputs (``correctness.perturbation``). After timing, every
input with contents (or the job's ``guards.perturb``) is perturbed: floats by 0.25 of their
standard deviation (on the input's own grid where it has one, below); integers and booleans
take the values another correctness run gave them (or their generator with another seed;
booleans otherwise flip a quarter of their elements), so an index stays a valid index. The
candidate then runs twice: *in place* (other buffers keep whatever the kernel left in them) and
*fresh* (every buffer written anew). The two must agree within tolerance (a cache kept across
launches does not), the fresh one must match a baseline reference where the check has one, and every checked output must change (one that does not is a
precomputed answer), unless named in ``guards.constant_outputs``. All-zero buffers are taken for
workspaces and flags and left alone.

Perturbed floats stay in the input's domain where the input shows one: when every value is a
multiple of one power of two q with at most ``GRID_BITS`` significant bits above it (inputs a
suite builds so that its check may be exact, e.g. multiples of 1/16 whose sums are exact in f32 in
any order, or small integers whose products are), the perturbed values are rounded to multiples
of q (the noise at least one step) and kept within the input's [min, max]. Off that domain an
exact tolerance no longer holds for a kernel whose summation order varies from launch to launch
(atomics, a look-back whose depth depends on timing): the in-place and fresh runs would round
differently and a correct kernel would fail. (2026-12-01, H200: zoo cumsum's decoupled look-back,
bit-exact on its dyadic inputs, differed in 62647324 of 67108864 elements between the two runs on
off-grid perturbed inputs.) Inputs with full-precision values (random normals) are perturbed as
before.

``seeds`` -- at least ``guards.seeds_before`` checked correctness runs before timing and
``seeds_after`` after (default 2 and 2), on distinct inputs; runs whose inputs are all the same
check one input set however many seeds they name (``incomplete``).

Integer and boolean outputs get the same checks as floating-point ones: their poison alternates
between all-ones bytes and 0x5A from one checked run to the next (so an output left unwritten
cannot match a reference that happens to be all ones), and booleans compare byte for byte
(`kcoral.tolerance`).
"""

from __future__ import annotations

import numpy as np

from .dtypes import dtype_of, finfo, is_float
from .errors import JobFailure
from .tolerance import compare

FIRST = "the candidate's first launch on these inputs"
POISON = 0xFF       # the byte `Session.poison` fills pure outputs with (all ones: NaN in floats)
NOISE = 0.25        # perturbation: this fraction of an input's standard deviation
FLIP = 0.25         # boolean inputs without other values: this fraction of elements flipped
GRID_BITS = 16      # a float input on a power-of-two grid with at most this many significant bits
GRID_SAMPLE = 65536  # grid_of: elements sampled first (inputs of 64M elements on the H200)
STD_SAMPLE = 1 << 20  # perturbed_float: elements whose standard deviation scales the noise


def status(state: str, **more) -> dict:
    return dict({"status": state}, **more)


class GuardRun:
    """The guards of one job on one board (see the module docstring)."""

    def __init__(self, session):
        self.s = session
        self.job = session.job
        self.g = session.job.guards
        self.rng = session.rng
        self.ref: dict = {}      # checked buffer -> reference array for the timing inputs
        self.atol: dict = {}     # checked buffer -> its uploaded reference's run atol
        self.src: dict = {}      # checked buffer -> where its reference comes from
        self.first: dict = {}    # checked buffer -> the candidate's first output on them
        self.initial: dict = {}  # buffer -> host array of the timing inputs
        self.iterations: list = []
        self.report: dict = {}

    @property
    def active(self) -> bool:
        return bool(self.job.checks)

    # --- the reference on the timing inputs ---------------------------------------------------
    def prepare(self) -> None:
        """Fill the timing inputs, run the candidate once, take each check's reference; then
        fill the inputs anew so the warm-up starts from the declared state."""
        s, t = self.s, self.job.timing
        overrides = s.run_inputs(t.seed)
        s.fill_inputs(t.seed, overrides)
        self.initial = dict(s.initial)
        if not self.active:
            return
        s.launch("the candidate's first launch on the timing inputs")
        self.first = {c.buffer: s.read(c.buffer) for c in self.job.checks}
        expected = s.run_expected(t.seed)
        baseline_checks = [c for c in self.job.checks
                           if c.buffer not in expected and c.baseline]
        if baseline_checks:  # the reference from the inputs as declared (the kernel may write)
            s.fill_inputs(t.seed, overrides)
            for c in baseline_checks:
                self.ref[c.buffer] = s.baseline_reference(c)
                self.src[c.buffer] = f"baseline {c.baseline}"
        for c in self.job.checks:
            if c.buffer in expected:
                self.ref[c.buffer] = s.expected_array(expected[c.buffer], c.buffer)
                self.src[c.buffer] = "uploaded"
                self.atol[c.buffer] = s.run_atol(t.seed).get(c.buffer, c.atol)
            elif c.buffer not in self.ref:
                self.ref[c.buffer] = self.first[c.buffer]
                self.src[c.buffer] = FIRST
        self._check_self_referenced()
        bad = self._compare(self.first, "the first launch on the timing inputs",
                            skip_first=True)
        if bad:
            raise JobFailure("correctness.mismatch", bad["message"],
                             data={"guards": {"timed_output": bad}})
        s.fill_inputs(t.seed, overrides)

    def _check_self_referenced(self) -> None:
        """The outputs whose reference is the candidate's own first launch (`FIRST`) cannot
        be compared with it -- a buffer compared with itself differs only where NaN != NaN.
        What such an output can show is that it is unusable as a reference: elements that
        still hold the poison the pure outputs were filled with (`POISON`: the kernel never
        wrote them; ``correctness.unwritten``), or NaN/Inf it wrote (``correctness.nonfinite``).
        Integer outputs are left alone: all-ones is a valid integer (-1), and a self-reference
        of integers is always equal. (Session 15, H200: zoo kda_bwd_prep_sg's WALK=0 timing
        cases never wrote their declared output 'bt' and failed as "'bt' ... differs from the
        the candidate's first launch", /work/notes/s15/d6/calibsg/call.log.)"""
        found = []
        for c in self.job.checks:
            if self.src.get(c.buffer) != FIRST:
                continue
            b = self.job.buffer(c.buffer)
            if not is_float(b.dtype) or c.buffer in self.initial:
                continue  # integers; in-place outputs start from their inputs, not poison
            n = _nonfinite(self.first[c.buffer])
            if n["poisoned"] or n["nan"] or n["inf"]:
                found.append(dict(buffer=c.buffer, **n))
        if not found:
            return
        unwritten = [f for f in found if f["poisoned"]]
        f = (unwritten or found)[0]
        if unwritten:
            kind = "correctness.unwritten"
            count = (f"all {f['total']}" if f["poisoned"] == f["total"]
                     else f"{f['poisoned']} of {f['total']}")
            msg = (f"{f['buffer']!r} was never written by the kernel on the timing inputs: "
                   f"{count} elements still hold the poison pattern (all-ones bytes) they were "
                   f"filled with before the launch; the job has no reference on these inputs, "
                   f"so no value could be checked")
        else:
            kind = "correctness.nonfinite"
            msg = (f"{f['buffer']!r} from the first launch on the timing inputs holds "
                   f"non-finite values the kernel wrote: {f['nan']} NaN and {f['inf']} Inf of "
                   f"{f['total']} elements")
        others = [g["buffer"] for g in found if g is not f]
        if others:
            msg += f" (also: {', '.join(map(repr, others))})"
        bad = status("failed", outputs=found, reference=FIRST, message=msg)
        raise JobFailure(kind, msg, data={"guards": {"timed_output": bad}})

    def _compare(self, got: dict, where: str, skip_first: bool = False) -> "dict | None":
        """None when every checked output matches its reference, else the failure.
        `skip_first`: leave out the outputs whose reference is `got` itself (`FIRST`)."""
        checks = []
        for c in self.job.checks:
            if skip_first and self.src[c.buffer] == FIRST:
                continue
            r = compare(got[c.buffer], self.ref[c.buffer], c.rtol,
                        self.atol.get(c.buffer, c.atol), c.rms)
            r.update(buffer=c.buffer, reference=self.src[c.buffer])
            checks.append(r)
        bad = next((r for r in checks if not r["ok"]), None)
        if bad is None:
            return None
        b = self.job.buffer(bad["buffer"])
        poisoned = (_nonfinite(got[bad["buffer"]])["poisoned"]
                    if is_float(b.dtype) and bad["buffer"] not in self.initial else 0)
        return status("failed", checks=checks, message=(
            f"{bad['buffer']!r} from {where} differs from {_reference(bad['reference'])}: "
            f"{bad.get('mismatches', '?')} of {bad.get('total', '?')} elements, max abs err "
            f"{bad.get('max_abs')}" + (f"; {bad['reason']}" if bad.get("reason") else "")
            + (f"; {poisoned} of them still hold the poison pattern (never written)"
               if poisoned else "")))

    # --- timed_output -------------------------------------------------------------------------
    def mid_round(self) -> int:
        """The round whose iteration is checked besides the last (random, so a kernel cannot
        count its way around it)."""
        return int(self.rng.integers(1, max(2, self.job.timing.min_iters + 1)))

    def check_iteration(self, run_one, where: str) -> None:
        """Poison the pure outputs, give in-place outputs their initial contents, run one
        iteration (`run_one()` returns its time in ms, or None untimed) and check its outputs."""
        if not (self.active and self.g.timed_output):
            return
        s = self.s
        for b in self.job.buffers:
            if b.output:
                if b.name in self.initial:
                    s.dev.write(b.name, self.initial[b.name])
                else:
                    s.poison(b)
        ms = run_one()
        got = {c.buffer: s.read(c.buffer) for c in self.job.checks}
        bad = self._compare(got, where)
        rec = {"where": where, "ok": bad is None}
        if ms is not None:
            rec["ms"] = ms
        self.iterations.append(rec)
        if bad:
            self.report["timed_output"] = dict(bad, iterations=self.iterations)
            raise JobFailure("correctness.timed-output", f"a kernel that passed its correctness "
                             f"runs failed when timed: {bad['message']}",
                             data={"guards": self.report})

    def repeat(self) -> None:
        """On a board that does not time: `prepare`, ``timing.warmup`` launches, then one
        launch checked as `check_iteration` does."""
        self.prepare()
        if not self.active:
            return
        for i in range(max(1, self.job.timing.warmup)):
            self.s.launch(f"repeated launch {i + 1}")
        self.check_iteration(lambda: self.s.launch("the checked repeated launch"),
                             "a repeated launch (this board does not time)")

    def timed_output_report(self, timed: bool) -> dict:
        if not self.active:
            return status("n/a", why="the job has no checks")
        if not self.g.timed_output:
            return status("n/a", why="disabled by the job (guards.timed_output)")
        return status("passed", timed=timed, reference={b: self.src[b] for b in self.src},
                      iterations=self.iterations)

    # --- perturbation -------------------------------------------------------------------------
    def perturbation(self) -> None:
        if not (self.active and self.g.perturbation):
            self.report["perturbation"] = status(
                "n/a", why="the job has no checks" if not self.active else
                "disabled by the job (guards.perturbation)")
            return
        s = self.s
        plan, skipped = self._plan()
        if not plan:
            why = ("no input has contents to perturb" if not skipped else
                   "no input could be perturbed: " + "; ".join(f"{k}: {v}"
                                                               for k, v in skipped.items()))
            self.report["perturbation"] = status("n/a" if not skipped else "incomplete",
                                                 why=why, skipped=skipped)
            return
        # in place: the perturbed inputs over whatever the kernel left in every other buffer
        for name, a in plan.items():
            s.dev.write(name, a)
        for b in self.job.buffers:
            if b.output and b.name not in plan:
                if b.name in self.initial:
                    s.dev.write(b.name, self.initial[b.name])
                else:
                    s.poison(b)
        s.launch("the candidate on perturbed inputs (in place)")
        in_place = {c.buffer: s.read(c.buffer) for c in self.job.checks}
        # fresh: every buffer written anew
        fresh_ref = {}
        self._write_fresh(plan)
        for c in self.job.checks:
            if c.baseline and self.src.get(c.buffer, "").startswith("baseline"):
                fresh_ref[c.buffer] = s.baseline_reference(c)
        self._write_fresh(plan)
        s.launch("the candidate on perturbed inputs (fresh)")
        fresh = {c.buffer: s.read(c.buffer) for c in self.job.checks}
        rec = {"perturbed": sorted(plan), "skipped": skipped, "changed": {}}
        problems = []
        for c in self.job.checks:
            r = compare(*_nan_agreed(in_place[c.buffer], fresh[c.buffer]), c.rtol, c.atol,
                        c.rms)
            if not r["ok"]:
                problems.append(f"{c.buffer!r} computed in place differs from the same inputs "
                                f"written fresh ({r.get('mismatches')} of {r.get('total')} "
                                f"elements): the kernel keeps a result across launches")
            if c.buffer in fresh_ref:
                r = compare(fresh[c.buffer], fresh_ref[c.buffer], c.rtol, c.atol, c.rms)
                if not r["ok"]:
                    problems.append(f"{c.buffer!r} differs from baseline {c.baseline} on the "
                                    f"perturbed inputs ({r.get('mismatches')} of "
                                    f"{r.get('total')} elements)")
            changed = not _same_bits(fresh[c.buffer], self.first[c.buffer])
            rec["changed"][c.buffer] = changed
            if not changed and c.buffer not in self.g.constant_outputs:
                problems.append(f"{c.buffer!r} did not change when inputs {sorted(plan)} did: "
                                f"it does not depend on them (a precomputed answer?); name it "
                                f"in guards.constant_outputs if that is right")
        if problems:
            self.report["perturbation"] = status("failed", problems=problems, **rec)
            raise JobFailure("correctness.perturbation", "; ".join(problems),
                             data={"guards": self.report})
        self.report["perturbation"] = status("passed", **rec)

    def _write_fresh(self, plan: dict) -> None:
        s = self.s
        for b in self.job.buffers:
            a = plan.get(b.name, self.initial.get(b.name))
            if a is None:
                s.poison(b)
            else:
                s.dev.write(b.name, a)

    def _plan(self) -> tuple:
        """``({buffer: perturbed array}, {buffer: why not})``."""
        want = self.g.perturb
        plan, skipped = {}, {}
        for i, b in enumerate(self.job.buffers):
            a = self.initial.get(b.name)
            if a is None or (want is not None and b.name not in want):
                continue
            if want is None and not np.asarray(a).view(np.uint8).any():
                skipped[b.name] = "all zeros: taken for a workspace or flags"
                continue
            new = self._perturbed(i, b, np.asarray(a))
            if new is None:
                skipped[b.name] = ("no other valid values for an integer input (no other run's "
                                   "values, no generator)")
            else:
                plan[b.name] = new
        return plan, skipped

    def _perturbed(self, index: int, b, a: np.ndarray) -> "np.ndarray | None":
        dt = dtype_of(b.dtype)
        if is_float(b.dtype):
            new = perturbed_float(a, self.rng, dt)
            if new is not None:
                return new
        for alt in self.s.other_values(index, b):
            if alt.shape == a.shape and not _same_bits(alt, a):
                return alt.astype(dt)
        if b.dtype == "pred":
            return a ^ (self.rng.random(a.shape) < FLIP)
        return None

    # --- seeds --------------------------------------------------------------------------------
    def seeds(self, runs: list, fingerprints: list) -> dict:
        """`runs` are the correctness results, `fingerprints` what each run's inputs were."""
        if not self.active:
            return status("n/a", why="the job has no checks")
        checked = [(r, f) for r, f in zip(runs, fingerprints) if r.get("checks")]
        n = {w: sum(1 for r, _ in checked if r["when"] == w) for w in ("before", "after")}
        need = {"before": self.g.seeds_before, "after": self.g.seeds_after}
        why = [f"{n[w]} checked run(s) {w} timing, the job asks for {need[w]}"
               for w in need if n[w] < need[w]]
        distinct = len({f for _, f in checked})
        if len(checked) > 1 and distinct < len(checked):
            why.append(f"{len(checked)} checked runs on only {distinct} distinct input "
                       f"set(s): seeds {[r['seed'] for r, _ in checked]}")
        rec = {"before": n["before"], "after": n["after"], "required": need,
               "distinct_inputs": distinct}
        return status("incomplete", why="; ".join(why), **rec) if why else \
            status("passed", **rec)


def grid_of(f: np.ndarray) -> "int | None":
    """The exponent e of the coarsest power of two 2^e that every finite value of `f` (float64)
    is a multiple of, when the values need at most ``GRID_BITS`` significant bits above it; None
    for full-precision values, or no finite nonzero value (module docstring)."""
    flat = f.reshape(-1)
    sample = flat[:: max(1, flat.size // GRID_SAMPLE)]
    if sample.size == flat.size or not (np.isfinite(sample) & (sample != 0)).any():
        return _grid(flat)
    q = _grid(sample)  # a subset's grid is no finer, its range no wider: None holds for all
    if q is None:
        return None
    s = np.ldexp(flat, -q)  # exact: a power-of-two scaling (NaN stays NaN)
    if np.array_equal(s, np.round(s), equal_nan=True) and \
            max(np.nanmax(s), -np.nanmin(s)) < 2.0 ** GRID_BITS:
        return q  # every value on the sample's grid (so no coarser one), within GRID_BITS
    return _grid(flat)  # (an infinity lands here too: exact, slower)


def _grid(f: np.ndarray) -> "int | None":
    v = np.abs(f[np.isfinite(f) & (f != 0)])
    if not v.size:
        return None
    m, e = np.frexp(v)  # v = m 2^e, m in [0.5, 1): m 2^53 is an integer
    mi = np.ldexp(m, 53).astype(np.int64)
    low = np.frexp((mi & -mi).astype(np.float64))[1] - 1  # the lowest set bit of each
    q = int(np.min(e - 53 + low))
    return q if int(np.max(e)) - q <= GRID_BITS else None


def perturbed_float(a: np.ndarray, rng, dt: np.dtype) -> "np.ndarray | None":
    """`a` (of dtype `dt`) plus uniform noise of NOISE times its standard deviation, non-finite
    elements kept; on `a`'s grid and within its range where it has one (`grid_of`). None when
    nothing changed.

    Why the arithmetic is float32 for every type of at most 4 bytes (float64 only for float64):
    float32 holds bf16, f16, fp8 and f32 values exactly, and on the H200's attention inputs
    (3 x 134M bf16) the float64 form took ~25 s an input of a job whose timing took 7 s. The
    standard deviation comes from a strided sample (STD_SAMPLE elements): it only scales the
    noise."""
    wide = np.float64 if np.dtype(dt).itemsize > 4 else np.float32
    f = np.asarray(a).astype(wide)
    finite = np.isfinite(f)
    all_finite = bool(finite.all())
    if not all_finite and not finite.any():
        return None
    flat = f.reshape(-1)
    sample = flat[:: max(1, flat.size // STD_SAMPLE)]
    sample = sample[np.isfinite(sample)]
    if not sample.size:
        sample = flat[finite.reshape(-1)]
    sd = float(np.std(sample, dtype=np.float64)) or float(np.max(np.abs(sample))) or 1.0
    q = grid_of(f)
    # uniform noise of unit standard deviation: 4x cheaper to draw than normal noise, and any
    # change of every element serves the guard
    noise = rng.random(f.size, dtype=wide).reshape(f.shape)
    noise -= wide(0.5)
    noise *= wide(np.sqrt(12.0))
    if q is None:
        # within the type's finite range: an e4m3 input scaled to its maximum (448, the zoo's
        # fp8 GEMMs) would otherwise gain NaNs where the noise crosses it (float8_e4m3fn has no
        # infinity), and NaN rows are no test of whether the output follows the input
        top = float(finfo(dt).max)
        noise *= wide(NOISE * sd)
        new_f = noise   # in place (here and below): each fresh 0.5 GB array costs page faults
        new_f += f
        np.clip(new_f, -top, top, out=new_f)
    else:
        lo, hi = (f.min(), f.max()) if all_finite else (f[finite].min(), f[finite].max())
        noise *= wide(max(NOISE * sd, float(np.ldexp(1.0, q))))
        new_f = noise
        new_f += f
        new_f = np.clip(np.ldexp(np.round(np.ldexp(new_f, -q)), q), lo, hi)
    new = new_f.astype(dt)
    if not all_finite:   # non-finite elements kept bit for bit (NaN payloads and signs too)
        new[~finite] = np.asarray(a)[~finite]
    return None if _same_bits(new, a) else new


def _nan_agreed(x: np.ndarray, y: np.ndarray) -> tuple:
    """`x`, `y` with the NaNs they share (same element) set to 0: two runs of a kernel on the
    same inputs agree there; a NaN in one only is still a difference."""
    fx, fy = np.asarray(x), np.asarray(y)
    if fx.dtype.kind in "biu":  # integers and booleans have no NaN
        return fx, fy
    both = np.isnan(fx.astype(np.float32)) & np.isnan(fy.astype(np.float32))
    if not both.any():
        return fx, fy
    fx, fy = fx.copy(), fy.copy()
    fx[both] = 0
    fy[both] = 0
    return fx, fy


def _same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    x, y = np.ascontiguousarray(x), np.ascontiguousarray(y)
    return x.shape == y.shape and x.nbytes == y.nbytes and \
        np.array_equal(x.reshape(-1).view(np.uint8), y.reshape(-1).view(np.uint8))


_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_CHUNK = 1 << 22  # _nonfinite: elements per pass (outputs of 201M elements on the H200)


def _nonfinite(a: np.ndarray) -> dict:
    """``{"total", "poisoned", "nan", "inf"}`` of a float array: ``poisoned`` counts elements
    whose bytes are all `POISON` (what `Session.poison` wrote, bit for bit: the boards fill
    with 0xFF bytes), ``nan`` every NaN (the poisoned ones included), ``inf`` +-Inf. A GPU's
    computed NaN (CUDA's canonical 0x7FFFFFFF in f32, 0x7FFF in bf16) has its sign bit clear,
    so it is not taken for poison. In chunks, so a 201M-element output costs no float64 copy."""
    flat = np.ascontiguousarray(a).reshape(-1)
    u = _UINT.get(flat.dtype.itemsize)
    if u is None:
        raise ValueError(f"no poison pattern for a {flat.dtype} element of "
                         f"{flat.dtype.itemsize} bytes")
    ones = u(int.from_bytes(bytes([POISON]) * flat.dtype.itemsize, "little"))
    bits = flat.view(u)
    out = {"total": int(flat.size), "poisoned": 0, "nan": 0, "inf": 0}
    for i in range(0, flat.size, _CHUNK):
        x = flat[i:i + _CHUNK].astype(np.float32 if flat.dtype.itemsize <= 4 else np.float64)
        out["poisoned"] += int(np.count_nonzero(bits[i:i + _CHUNK] == ones))
        out["nan"] += int(np.count_nonzero(np.isnan(x)))
        out["inf"] += int(np.count_nonzero(np.isinf(x)))
    return out


def _reference(src: str) -> str:
    """A check's reference source as a phrase: `FIRST` names itself ("the candidate's first
    launch ..."); ``uploaded`` and ``baseline X`` become "the uploaded reference"."""
    return src if src.startswith("the ") else f"the {src} reference"
