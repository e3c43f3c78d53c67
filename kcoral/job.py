"""The job model: what a client asks a board to do, typed, in one place. No client Python runs on
the server.

A job travels as JSON (``SubmitRequest.job_json``; stored in SQLite; the ``JOB.json`` that
``python -m kcoral.runjob`` and the tools execute). `Job.from_json` parses it into the typed
model below and validates it on the way (`kcoral.schema`): every value is checked against its
declared kind -- names against strict patterns, numbers finite and within bounds, collections
bounded -- unknown keys are refused, and every problem is reported with its field. The
canonical JSON form (defaults filled in) is `Job.doc`; boards and baselines read that.

    {
      "name": "vadd[n4096]", "target": "sm_90a", "tags": [], "board": null,
      "module": {"format": "cubin" | "ptx" | "fake", "blob": "<sha256>",
                 "ir": "<sha256>"},                              # optional: the IR (below)
      "buffers": [
        {"name": "a", "dtype": "f32", "shape": [4096],
         "init": {"kind": "normal", "mean": 0, "std": 1}},      # normal | uniform | integers |
        {"name": "out", "dtype": "f32", "shape": [4096],          #   zeros | blob | empty
         "init": {"kind": "empty"}, "output": true}],
      "launches": [{"entry": "vadd", "grid": [16,1,1], "block": [256,1,1], "cluster": null,
                    "dynamic_smem": 0, "params": [...launch_metadata()["params"]...],
                    "args": [{"buffer": "a"}, {"scalar": 4096, "dtype": "u32"},
                             {"tensormap": {...TensorMap.describe()...}}]}],
      "checks": [{"buffer": "out", "rtol": 1e-6, "atol": 0, "rms": null}],
      "runs": [{"seed": 1, "when": "before", "inputs": {"a": "<sha>"},
                "expected": {"out": "<sha>"}, "atol": {"out": 1e-6}},   # atol: optional
               {"seed": 2, "when": "after", ...}],
      "timing": {"enabled": true, "warmup": 3, "min_iters": 10, "max_iters": 2000,
                 "budget_s": 2.0, "rel_noise": 0.01, "l2_flush": true, "l2_flush_by": "write",
                 "seed": 0, "randomize": true, "cooldown_s": 0, "launch_gate": true, "repeat": 1,
                 "split_samples": 10},
      "baselines": [{"name": "torch.matmul", "args": {"a": "A", "b": "B", "out": "C"},
                     "optional": false}],
      "tools": [{"name": "ncu", "options": {"set": "basic"}}],
      "work": {"flops": 8192, "bytes": 49152},
      "budgets": {"queue_s": 600, "exec_s": 60, "launch_s": 10},
      "guards": {"timed_output": true, "perturbation": true, "perturb": null,
                 "constant_outputs": [], "seeds_before": 2, "seeds_after": 2},
      "fake": {}                                                  # test-only board directives
    }

``module.ir`` (optional) is the digest of the kernel's IR in its JSON form
(``CompiledKernel.ir_json()``): plain data, re-validated against the server's instruction
bindings. GPU boards ignore it; the ``sim`` board (numsim distribution) runs it and refuses a job
without it (field ``module.ir``). When the IR cannot be serialized, ``module.ir_error`` says why.

``runs`` are the correctness runs: each gets fresh inputs (the generators reseeded with its seed,
or uploaded arrays for that seed) and compares the checked buffers with ``expected`` (uploaded
arrays) or with a server-side baseline's output (``checks[i].baseline``). A run with no expected
values and no baseline reference is a smoke run (the kernel must not fault).

Tool options are typed by each tool (`kcoral.tools`): the daemon parses ``tools[i].options``
with the option model the tool declares, so a client names options, never a command line.
"""

from __future__ import annotations

import json
import math
import pathlib
import re
from dataclasses import dataclass, field

from .dtypes import NAMES as DTYPE_NAMES
from .dtypes import dtype_of, scalar_problem
from .errors import JobError, Refusal
from .boards.l2_flush import FLUSH_MODES
from .peaks import FLOPS_DTYPES
from .schema import (
    DIGEST, DISPLAY, ENTRY, IDENT, PLUGIN, TAG, TARGET, Bool, Dim3, Int, Json, ListOf, MapOf,
    Model, Num, Number, Obj, Optional, Problems, Scalar, Str, Text, spec,
)

__all__ = ["Job", "JobError", "dtype_of", "check_module", "parse_json", "Buffer", "Launch",
           "Arg", "Check", "Run", "Timing", "Guards", "Budgets", "ToolRequest",
           "BaselineRequest"]

# a job's states, in order; the last four are terminal (kcoral.proto's JobState mirrors these)
TERMINAL = ("done", "failed", "cancelled", "interrupted")
STATES = ("queued", "running", "loaded", "correctness", "timing", "tools") + TERMINAL

MAX_BUFFER_BYTES = 1 << 36       # 64 GiB: beyond any board; the board narrows it further
MAX_JSON_DEPTH = 64              # deeper job JSON is refused before it is parsed
INIT_KINDS = ("normal", "uniform", "integers", "zeros", "blob", "empty")
FORMATS = ("cubin", "ptx", "fake")
SEED = Int(0, 2 ** 32 - 1)
DAY = 86400.0
UNCHECKED = object()  # a tool's options model known only where it runs (a remote board)

Name = Str(IDENT, what="identifier")
Dtype = Str(choices=DTYPE_NAMES)
Digest = Str(DIGEST, max_len=64, what="sha256 hex digest")


# -------------------------------------------------------------------------------------------------
# the parts
# -------------------------------------------------------------------------------------------------

@dataclass
class Module(Model):
    format: str = spec(Str(choices=FORMATS))
    blob: str = spec(Digest)
    ir: "str | None" = spec(Optional(Digest), None)
    ir_error: "str | None" = spec(Optional(Text()), None)

    def check(self, path, p):
        if self.ir is not None and self.format == "fake":
            p.add(f"{path}.ir", "a 'fake' module has no IR")


@dataclass
class Init(Model):
    kind: str = spec(Str(choices=INIT_KINDS))
    mean: "float | None" = spec(Optional(Num(-1e30, 1e30)), None)
    std: "float | None" = spec(Optional(Num(0, 1e30)), None)
    low: "float | None" = spec(Optional(Num(-1e30, 1e30)), None)
    high: "float | None" = spec(Optional(Num(-1e30, 1e30)), None)
    blob: "str | None" = spec(Optional(Digest), None)

    def check(self, path, p):
        if (self.kind == "blob") != (self.blob is not None):
            p.add(f"{path}.blob", "required with kind 'blob' (a sha256 digest), and only then")
        if None not in (self.low, self.high) and self.low >= self.high:
            p.add(f"{path}.high", f"{self.high:g} is not above low {self.low:g}")


@dataclass
class Buffer(Model):
    name: str = spec(Name)
    dtype: str = spec(Dtype)
    shape: list = spec(ListOf(Int(0, 2 ** 40), 8))
    output: bool = spec(Bool(), False)
    init: "Init | None" = spec(Optional(Obj(Init)), None)

    def __post_init__(self):
        if self.init is None:
            self.init = Init("empty" if self.output else "zeros")

    @property
    def nbytes(self) -> int:
        return int(math.prod(self.shape)) * dtype_of(self.dtype).itemsize


@dataclass
class TensorMapDesc(Model):
    """``TensorMap.describe()``: what the board encodes into a CUtensorMap."""

    source: str = spec(Name)
    dtype: str = spec(Dtype)
    dims: list = spec(ListOf(Int(1, 2 ** 40), 5, 1))
    strides: list = spec(ListOf(Int(0, 2 ** 40), 4))
    box: list = spec(ListOf(Int(1, 256), 5, 1))
    elem_strides: "list | None" = spec(Optional(ListOf(Int(1, 8), 5, 1)), None)
    swizzle: int = spec(Int(0, 128, choices=(0, 32, 64, 128)), 0)
    oob_fill: str = spec(Str(choices=("zero", "nan")), "zero")
    l2_promotion: int = spec(Int(0, 256, choices=(0, 64, 128, 256)), 0)


@dataclass
class Arg(Model):
    """Exactly one of ``buffer``, ``scalar`` (with ``dtype``), ``tensormap``."""

    buffer: "str | None" = spec(Optional(Name), None)
    scalar: "object" = spec(Optional(Number()), None)  # range-checked against dtype
    dtype: "str | None" = spec(Optional(Dtype), None)
    tensormap: "TensorMapDesc | None" = spec(Optional(Obj(TensorMapDesc)), None)

    def check(self, path, p):
        given = [k for k in ("buffer", "scalar", "tensormap") if getattr(self, k) is not None]
        if len(given) != 1:
            p.add(path, f"expected exactly one of 'buffer', 'scalar', 'tensormap', got "
                        f"{given or 'none'}")
        elif self.scalar is not None:
            if self.dtype is None:
                p.add(f"{path}.dtype", "required with 'scalar' (e.g. 'u32')")
            else:
                why = scalar_problem(self.dtype, self.scalar)
                if why:
                    p.add(f"{path}.scalar", why)
        elif self.dtype is not None:
            p.add(f"{path}.dtype", "only a scalar argument has a dtype")


@dataclass
class Param(Model):
    """One kernel parameter as ``launch_metadata()["params"]`` describes it."""

    name: str = spec(Name)
    kind: str = spec(Str(choices=("ptr", "scalar", "tensormap")))
    dtype: str = spec(Dtype)
    size: int = spec(Int(0, 4096))
    align: int = spec(Int(1, 256))


@dataclass
class Launch(Model):
    entry: str = spec(Str(ENTRY, what="kernel entry name"))
    grid: list = spec(Dim3())
    block: list = spec(Dim3(1024))
    cluster: "list | None" = spec(Optional(Dim3(16)), None)
    dynamic_smem: int = spec(Int(0, 1 << 24), 0)
    args: list = spec(ListOf(Obj(Arg), 256), [])
    params: "list | None" = spec(Optional(ListOf(Obj(Param), 256)), None)
    # programmatic dependent launch: the kernel may start before the previous one in the
    # stream has finished (it orders itself with griddepcontrol.wait); boards that cannot
    # launch so run it as an ordinary launch, which is always correct
    pdl: bool = spec(Bool(), False)

    def check(self, path, p):
        if self.cluster is not None and any(g % c for g, c in zip(self.grid, self.cluster)):
            p.add(f"{path}.cluster", f"grid {self.grid} is not a multiple of {self.cluster}")


@dataclass
class Check(Model):
    buffer: str = spec(Name)
    rtol: float = spec(Num(0, 1e30), 0.0)
    atol: float = spec(Num(0, 1e30), 0.0)
    rms: "float | None" = spec(Optional(Num(0, 1e30)), None)
    baseline: "str | None" = spec(Optional(Str(PLUGIN, what="baseline name")), None)
    baseline_args: dict = spec(MapOf(Scalar(), max_len=32), {})
    baseline_out: str = spec(Name, "out")


@dataclass
class Run(Model):
    """One correctness run. ``atol`` (optional, per checked buffer) replaces the check's
    absolute tolerance for this run's reference only: a rule stated relative to the reference
    ("atol = 0.5 x RMS(ref)", `tirxh.core.suite.Tolerance.atol_rms`) resolves to a different
    number for each seed's reference, and one job-wide figure (the strictest seed's) failed an
    element that the rule passes on its own seed (session 19, `kda_bwd_pieces_tc`'s
    tf_pack_80_1_30_h2 on the H200, bit-identical to numsim: seed 1's dke off by 0.00946 where
    its own rule allows 0.0113 and seed 3's atol allowed 0.0085). The check's ``atol`` stays
    what the guards compare with where no run's reference applies."""

    seed: int = spec(SEED)
    when: str = spec(Str(choices=("before", "after")))
    inputs: dict = spec(MapOf(Digest), {})
    expected: dict = spec(MapOf(Digest), {})
    atol: dict = spec(MapOf(Num(0, 1e30)), {})


@dataclass
class Timing(Model):
    """How the candidate and baselines are timed (`kcoral.measure`): ``randomize`` shuffles
    their order in every round so neither side always runs on the cooler card; with
    ``cooldown_s`` > 0 the board idles that long before a round whenever the previous one ran
    below its full clock (off by default; the idle time does not count against ``budget_s``).
    ``launch_gate`` holds each round's work on the device until the host has enqueued all of
    it (`kcoral.boards.launch_gate`), so a baseline's host overhead is not timed as GPU time.
    ``repeat`` > 1 makes each sample that many back-to-back launches, timed together and
    divided (`kcoral.measure.back_to_back`): a short kernel then keeps the board busy enough
    to reach its sustained clock. ``l2_flush`` empties the L2 before every timed sample;
    ``l2_flush_by`` says how (`kcoral.boards.l2_flush`): ``write`` (a memset, the protocol's
    default: the memset's dirty lines are written back inside the sample's window) or
    ``read`` (a read-only sweep: the write-back happens before the start event).
    ``split_samples``: for a candidate of several launches (a plan), that many extra samples
    after the paired rounds with an event between every two launches, each launch's median
    reported (``launch_split``); 0 turns it off."""

    enabled: bool = spec(Bool(), True)
    warmup: int = spec(Int(0, 10000), 3)
    min_iters: int = spec(Int(0, 10 ** 6), 10)
    max_iters: int = spec(Int(1, 10 ** 6), 2000)
    budget_s: float = spec(Num(0, 600, lo_open=True), 2.0)
    rel_noise: float = spec(Num(0, 1, lo_open=True), 0.01)
    l2_flush: bool = spec(Bool(), True)
    l2_flush_by: str = spec(Str(choices=FLUSH_MODES), "write")
    seed: int = spec(SEED, 0)
    randomize: bool = spec(Bool(), True)
    cooldown_s: float = spec(Num(0, 60), 0.0)
    launch_gate: bool = spec(Bool(), True)
    repeat: int = spec(Int(1, 1000), 1)
    split_samples: int = spec(Int(0, 1000), 10)


@dataclass
class Guards(Model):
    """Checks against kernels that game the measurement (`kcoral.guards`): the outputs of a
    timed iteration (``timed_output``), outputs that change when the inputs do
    (``perturbation``; ``perturb`` names the inputs that matter, default every input with
    contents; ``constant_outputs`` the checked outputs that legitimately do not depend on them),
    and at least ``seeds_before`` / ``seeds_after`` checked correctness runs on distinct
    inputs."""

    timed_output: bool = spec(Bool(), True)
    perturbation: bool = spec(Bool(), True)
    perturb: "list | None" = spec(Optional(ListOf(Name, 256)), None)
    constant_outputs: list = spec(ListOf(Name, 256), [])
    seeds_before: int = spec(Int(0, 16), 2)
    seeds_after: int = spec(Int(0, 16), 2)


@dataclass
class Budgets(Model):
    """``queue_s``: how long the job may wait for its board; ``exec_s``: how long it may run in
    all; ``launch_s``: the limit of one guarded launch or sync before anything was measured
    (after that, 50x the longest one seen; `kcoral.watchdog`), so a hung kernel frees its board
    in seconds instead of holding it for ``exec_s``."""

    queue_s: float = spec(Num(0, 7 * DAY, lo_open=True), 3600.0)
    exec_s: float = spec(Num(0, DAY, lo_open=True), 120.0)
    launch_s: float = spec(Num(0, DAY, lo_open=True), 10.0)


@dataclass
class Work(Model):
    """Declared work of one launch plan. `flops_dtype` names the tensor-core input type the FLOPs
    run at (`kcoral.peaks.FLOPS_DTYPES`): the floor divides by that type's peak, so an fp8 GEMM
    is not held against the bf16 peak it legitimately beats; None means bf16-class."""

    flops: "float | None" = spec(Optional(Num(0, 1e24)), None)
    bytes: "float | None" = spec(Optional(Num(0, 1e21)), None)
    flops_dtype: "str | None" = spec(Optional(Str(choices=FLOPS_DTYPES)), None)


@dataclass
class BaselineRequest(Model):
    """A baseline timed beside the candidate. An ``optional`` one (an operator-installed
    library such as FLA, or torch on a board without it) that is not installed or cannot run
    where the job runs is left out: the candidate is still timed and the result says which
    baseline was missing and why (``timing.baselines_missing``) instead of the job being
    refused."""

    name: str = spec(Str(PLUGIN, what="baseline name"))
    args: dict = spec(MapOf(Scalar(), max_len=32), {})
    optional: bool = spec(Bool(), False)


@dataclass
class ToolRequest(Model):
    """A tool to run around the job; `options` are checked against the tool's own option model
    when the daemon accepts the job (`Job.validate_plugins`)."""

    name: str = spec(Str(PLUGIN, what="tool name"))
    options: dict = spec(MapOf(Json(), max_len=64), {})


@dataclass
class FakeDirectives(Model):
    """Test-only: how a ``fake`` board misbehaves (other boards ignore these)."""

    crash: bool = spec(Bool(), False)
    hang: bool = spec(Bool(), False)
    hang_after: int = spec(Int(0, 10 ** 6), 0)  # with hang: launches that succeed first
    throttle_after: int = spec(Int(0, 10 ** 6), 0)  # timed rounds at full clock (0: never slow)
    throttle_after_launches: int = spec(Int(0, 10 ** 7), 0)  # or launches back to back
    throttled_mhz: float = spec(Num(1, 10000), 1680.0)
    fault: bool = spec(Bool(), False)
    sleep_s: float = spec(Num(0, 3600), 0.0)


# -------------------------------------------------------------------------------------------------
# the job
# -------------------------------------------------------------------------------------------------

@dataclass
class Job(Model):
    """A validated job. Build one with `Job.from_json` (or the constructor, then `validate`);
    `doc` is its canonical JSON form."""

    target: str = spec(Str(TARGET, what="target (e.g. 'sm_90a')"))
    module: Module = spec(Obj(Module))
    launches: list = spec(ListOf(Obj(Launch), 64, 1))
    name: str = spec(Str(DISPLAY, what="job name"), "")
    tags: list = spec(ListOf(Str(TAG, what="tag"), 16), [])
    board: "str | None" = spec(Optional(Str(TAG, what="board name")), None)
    buffers: list = spec(ListOf(Obj(Buffer), 256), [])
    checks: list = spec(ListOf(Obj(Check), 256), [])
    runs: list = spec(ListOf(Obj(Run), 16), [])
    timing: Timing = spec(Obj(Timing), Timing())
    baselines: list = spec(ListOf(Obj(BaselineRequest), 16), [])
    tools: list = spec(ListOf(Obj(ToolRequest), 8), [])
    work: Work = spec(Obj(Work), Work())
    budgets: Budgets = spec(Obj(Budgets), Budgets())
    guards: Guards = spec(Obj(Guards), Guards())
    fake: FakeDirectives = spec(Obj(FakeDirectives), FakeDirectives())

    blob_root: "str | None" = field(default=None, compare=False)  # set by the worker for tools

    # --- construction -------------------------------------------------------------------------
    @classmethod
    def from_json(cls, text_or_doc) -> "Job":
        """Parse and validate a job (a JSON string or an already-decoded object)."""
        doc = parse_json(text_or_doc, "job") if isinstance(text_or_doc, (str, bytes)) \
            else text_or_doc
        if not isinstance(doc, dict):
            raise JobError([("job", f"expected a JSON object, got {type(doc).__name__}")])
        return cls.parse(doc)

    def validate(self, limits: "dict | None" = None) -> None:
        """Re-check the whole job (after building it in code), narrowed to a board's `limits`
        (``memory_bytes``, ``max_grid``, ``max_block``, ``max_threads_per_block``,
        ``max_smem_per_block``, ``max_cluster_size``); `JobError` lists every problem."""
        Job.parse(self.to_doc()).check_limits(limits or {})

    def check_limits(self, limits: dict) -> None:
        """`JobError` naming every field past a board's `limits` (see `validate`)."""
        p = Problems()
        self._board_limits(limits, p)
        if p:
            raise JobError(p)

    def check(self, path, p):
        names = set()
        for i, b in enumerate(self.buffers):
            if b.name in names:
                p.add(f"buffers[{i}].name", f"duplicate buffer name {b.name!r}")
            names.add(b.name)
            if b.name.startswith("__"):
                p.add(f"buffers[{i}].name", "names starting with '__' are the daemon's")
        for i, ln in enumerate(self.launches):
            for j, a in enumerate(ln.args):
                if a.buffer is not None and a.buffer not in names:
                    p.add(f"launches[{i}].args[{j}]", f"unknown buffer {a.buffer!r}")
                if a.tensormap is not None and a.tensormap.source not in names:
                    p.add(f"launches[{i}].args[{j}].tensormap.source",
                          f"unknown buffer {a.tensormap.source!r}")
            if ln.params is not None and len(ln.params) != len(ln.args):
                p.add(f"launches[{i}].params", f"{len(ln.params)} parameters for "
                                               f"{len(ln.args)} arguments")
        for i, c in enumerate(self.checks):
            if c.buffer not in names:
                p.add(f"checks[{i}].buffer", f"unknown buffer {c.buffer!r}")
        checked = {c.buffer for c in self.checks}
        for i, r in enumerate(self.runs):
            for k in ("inputs", "expected"):
                for bn in getattr(r, k):
                    if bn not in names:
                        p.add(f"runs[{i}].{k}.{bn}", f"unknown buffer {bn!r}")
            for bn in r.atol:
                if bn not in checked:
                    p.add(f"runs[{i}].atol.{bn}", f"{bn!r} is not a checked buffer")
        pure = {b.name for b in self.buffers if b.output and b.init.kind == "empty"}
        for i, bn in enumerate(self.guards.perturb or ()):
            if bn not in names or bn in pure:
                p.add(f"guards.perturb[{i}]", f"{bn!r} is not an input buffer")
        for i, bn in enumerate(self.guards.constant_outputs):
            if bn not in checked:
                p.add(f"guards.constant_outputs[{i}]", f"{bn!r} is not a checked buffer")
        self._board_limits({}, p)

    def _board_limits(self, lim: dict, p: Problems) -> None:
        total = 0
        mem = lim.get("memory_bytes", MAX_BUFFER_BYTES)
        for i, b in enumerate(self.buffers):
            total += b.nbytes
            if b.nbytes > mem:
                p.add(f"buffers[{i}].shape", f"{b.nbytes} bytes exceeds the board's memory "
                                             f"({mem} bytes)")
        if total > mem:
            p.add("buffers", f"{total} bytes in all exceeds the board's memory ({mem} bytes)")
        for i, ln in enumerate(self.launches):
            f = f"launches[{i}]"
            for key, maxkey, default in (("grid", "max_grid", (2 ** 31 - 1, 65535, 65535)),
                                         ("block", "max_block", (1024, 1024, 64))):
                v, mx = getattr(ln, key), lim.get(maxkey, default)
                if any(a > m for a, m in zip(v, mx)):
                    p.add(f"{f}.{key}", f"{v} exceeds the board's limit {list(mx)}")
            threads = lim.get("max_threads_per_block", 1024)
            if math.prod(ln.block) > threads:
                p.add(f"{f}.block", f"{math.prod(ln.block)} threads exceeds {threads}")
            csize = lim.get("max_cluster_size", 16)
            if ln.cluster is not None and math.prod(ln.cluster) > csize:
                p.add(f"{f}.cluster", f"{math.prod(ln.cluster)} CTAs exceeds {csize}")
            smem = lim.get("max_smem_per_block", 227 * 1024)
            if ln.dynamic_smem > smem:
                p.add(f"{f}.dynamic_smem", f"{ln.dynamic_smem} bytes exceeds the board's "
                                           f"{smem}")

    def validate_plugins(self, baselines, tools, timed: bool = True) -> None:
        """Every baseline and tool the job needs is installed, and each tool's options parse
        with the option model it declares (`kcoral.tools.Tool.options`); `JobError` otherwise
        (refusal ``unavailable.board`` for a plugin that is not installed here, ``invalid.job``
        for options the model refuses). `baselines`/`tools` are registries (``names()``, ``in``,
        ``get``) or plain collections of names (a remote board's announced plugins: its options
        are then checked where it runs). Baselines timed beside the candidate are needed only
        when the board will time the job (`timed`); a check's reference baseline always."""
        missing, bad = Problems(), Problems()
        names = sorted(baselines.names() if hasattr(baselines, "names") else baselines)
        if timed:
            for i, b in enumerate(self.baselines):
                if b.name not in baselines and not b.optional:
                    missing.add(f"baselines[{i}].name", f"unknown baseline {b.name!r}; "
                                                        f"installed: {names}")
        for i, c in enumerate(self.checks):
            if c.baseline is not None and c.baseline not in baselines:
                missing.add(f"checks[{i}].baseline", f"unknown baseline {c.baseline!r}; "
                                                     f"installed: {names}")
        tnames = sorted(tools.names() if hasattr(tools, "names") else tools)
        seen = set()
        for i, t in enumerate(self.tools):
            if t.name in seen:
                bad.add(f"tools[{i}].name", f"tool {t.name!r} named twice")
            seen.add(t.name)
            if t.name not in tools:
                missing.add(f"tools[{i}].name", f"unknown tool {t.name!r}; installed: {tnames}")
                continue
            model = getattr(tools.get(t.name), "options", None) if hasattr(tools, "get") \
                else UNCHECKED
            if model is None:
                if t.options:
                    bad.add(f"tools[{i}].options", f"tool {t.name!r} takes no options")
            elif model is not UNCHECKED:
                parsed = model._parse(t.options, f"tools[{i}].options", bad)
                self._check_tool_baseline(getattr(parsed, "baseline", None), i, baselines,
                                          names, bad, missing)
        if bad:
            raise JobError(bad + missing)
        if missing:
            raise JobError(missing, Refusal.NO_BOARD)

    def _check_tool_baseline(self, name, i, baselines, names, bad, missing) -> None:
        """A tool that runs one of the job's baselines (ncu's ``baseline`` option) names one
        the job declares and the board has installed."""
        if not name:
            return
        mine = [b.name for b in self.baselines]
        if name not in mine:
            bad.add(f"tools[{i}].options.baseline", f"{name!r} is not one of the job's "
                                                    f"baselines {mine}")
        elif name not in baselines:
            missing.add(f"tools[{i}].options.baseline", f"unknown baseline {name!r}; "
                                                        f"installed: {names}")

    # --- serialization ------------------------------------------------------------------------
    @property
    def doc(self) -> dict:
        """The canonical JSON form (what boards, baselines and runjob read)."""
        return self.to_doc()

    def to_json(self) -> str:
        return json.dumps(self.to_doc(), sort_keys=True)

    def write_json(self, path) -> None:
        """Write the JOB.json that ``python -m kcoral.runjob`` runs (blobs stay as digests;
        ``runjob --blobs DIR`` resolves them, or the ``_blob_root`` written here)."""
        doc = self.to_doc()
        if self.blob_root:
            doc["_blob_root"] = str(self.blob_root)
        pathlib.Path(path).write_text(json.dumps(doc, indent=1, sort_keys=True))

    # --- accessors ----------------------------------------------------------------------------
    @property
    def display_name(self) -> str:
        return self.name or self.launches[0].entry

    def buffer(self, name: str) -> Buffer:
        for b in self.buffers:
            if b.name == name:
                return b
        raise KeyError(name)

    def blobs(self) -> set:
        """Every blob digest the job refers to (module, IR, inputs, expected arrays)."""
        out = {self.module.blob}
        if self.module.ir:
            out.add(self.module.ir)
        for b in self.buffers:
            if b.init.kind == "blob":
                out.add(b.init.blob)
        for r in self.runs:
            out.update(r.inputs.values())
            out.update(r.expected.values())
        return out

    def tool_options(self, name: str, model: "type | None" = None):
        """The options the job gives tool `name`: parsed with `model` (the tool's option model)
        when given, else the plain dict ({} when the job does not name the tool)."""
        for t in self.tools:
            if t.name == name:
                return model.parse(t.options, f"tools.{name}.options") if model else \
                    dict(t.options)
        return model.parse({}, f"tools.{name}.options") if model else {}

    def entries(self) -> list:
        return sorted({ln.entry for ln in self.launches})


def parse_json(text, what: str = "job"):
    """`json.loads` for a client's document: nesting bounded, every failure a `JobError`
    naming `what` (never a raw Python exception). NaN and Infinity literals are read as floats
    so that the model refuses them naming their field (every number in a job is finite)."""
    if isinstance(text, bytes):
        try:
            text = text.decode()
        except UnicodeDecodeError as e:
            raise JobError([(what, f"not UTF-8 text: {e}")]) from None
    depth = _max_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise JobError([(what, f"JSON nested {depth} levels deep (at most {MAX_JSON_DEPTH})")])
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise JobError([(what, f"not valid JSON: {e}")]) from None


def _max_depth(text: str) -> int:
    """Bracket depth of JSON text, ignoring strings (a cheap bound before json.loads)."""
    depth = best = 0
    for m in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', text):
        c = m.group()
        if c in "[{":
            depth += 1
            best = max(best, depth)
        elif c in "]}":
            depth -= 1
    return best


def check_module(fmt: str, data: bytes, entries) -> None:
    """Cheap checks of a module's bytes before the job is accepted (the board's loader has the
    last word): a cubin is an ELF image, PTX declares ``.version``/``.target``, and every launch
    entry is named in it. Raises `JobError` on field ``module.blob``."""
    p = []
    if fmt == "cubin":
        if data[:4] != b"\x7fELF":
            p.append(("module.blob", f"not a cubin: expected an ELF image, the blob starts "
                      f"with {data[:8]!r}"))
        missing = [e for e in entries if e.encode() + b"\0" not in data]
        if missing and not p:
            p.append(("module.blob", f"the cubin has no kernel named {missing}"))
    elif fmt == "ptx":
        try:
            text = data.decode()
        except UnicodeDecodeError as e:
            raise JobError([("module.blob", f"PTX is not text: {e}")]) from None
        for d in (".version", ".target"):
            if d not in text:
                p.append(("module.blob", f"malformed PTX: no {d} directive"))
        have = set(re.findall(r"\.entry\s+([A-Za-z_$][\w$]*)", text))
        missing = [e for e in entries if e not in have]
        if missing:
            p.append(("module.blob", f"the PTX has no .entry {missing} (it has "
                      f"{sorted(have)})"))
    if p:
        raise JobError(p)
