"""The ``fake`` board: a deterministic numpy device for testing the daemon without a GPU.

Its modules are JSON (``module.format: "fake"``) naming numpy operations per entry point::

    {"kernels": {"vadd": {"op": "add", "time_ms": 0.05}}}

Ops act on the launch's arguments in order (`OPS`); ``add_bug`` is a deliberately wrong kernel
for correctness tests; ``add_half`` (leaves half of its output unwritten) and ``add_nan`` (writes
NaN and Inf) fail the guards' first-launch check when the job has no reference on its timing
inputs; ``add_once``, ``add_cached`` and ``table`` (``"values": [...]``, a
precomputed answer) game the measurement in the ways the guards catch (`kcoral.guards`). A
kernel's ``clock_sensitivity`` (0..1) makes its time grow as the fake clock falls: the board runs
at 1980 MHz until a job's ``throttle_after`` rounds ran back to back, then at ``throttled_mhz``
until it idles 50 ms. Timings are ``time_ms`` with seeded relative noise (board option
``noise``), so tests can assert on medians. A job's ``fake`` object tells the worker to misbehave:
``{"crash": true}`` (SIGKILL itself mid-launch, like a segfaulting driver), ``{"hang": true}``
(sleep forever in a launch; with ``"hang_after": n`` only after n launches succeeded),
``{"fault": true}`` (a sticky device fault at the next sync),
``{"sleep_s": x}`` (take x seconds of wall time while loading, to make queues build up).

With the board option ``run_log`` (``[boards.fake] run_log = "PATH"``) the device appends each
job's name to PATH when it starts the job, one line each (O_APPEND, written before the job runs):
how a load test proves that no job ran twice across a daemon's kill -9 and restart.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import time

import numpy as np

from kcoral.boards import BoardSpec, Device
from kcoral.boards.l2_flush import flush_mode
from kcoral.dtypes import dtype_of
from kcoral.errors import JobFailure
from kcoral.plugins import hookimpl


def _add(a, b, out, *rest):
    out[...] = a + b


def _add_bug(a, b, out, *rest):
    out[...] = a + b
    out.reshape(-1)[-1:] += 1


def _copy(x, out, *rest):
    out[...] = x


def _scale(x, out, s, *rest):
    out[...] = x * s


def _matmul(a, b, out, *rest):
    out[...] = (a.astype(np.float32) @ b.astype(np.float32)).astype(out.dtype)


def _noop(*args):
    pass


def _add_half(a, b, out, *rest):
    """Writes only the first half of `out` (a kernel whose grid misses part of an output)."""
    h = out.size // 2
    out.reshape(-1)[:h] = (a + b).reshape(-1)[:h]


def _add_nan(a, b, out, *rest):
    """Writes every element, but every 4th is NaN (the quiet NaN a GPU computes for 0/0, not
    the all-ones poison) and element 1 is +Inf: a kernel that produces non-finite values."""
    out[...] = a + b
    flat = out.reshape(-1)
    flat[::4] = np.nan
    flat[1] = np.inf


# kernels that game a measurement (for the guards' tests, kcoral/guards.py): each passes a
# correctness run on fresh inputs
def _add_once(a, b, out, state, *rest):
    """Computes on its first launch, then skips (a flag in `state`): fast when timed."""
    if state.reshape(-1)[0] == 0:
        out[...] = a + b
        state.reshape(-1)[0] = 1


def _add_cached(a, b, out, cache, state, *rest):
    """Computes once, then copies its cached answer whatever the inputs are now."""
    if state.reshape(-1)[0] == 0:
        out[...] = a + b
        cache[...] = out
        state.reshape(-1)[0] = 1
    else:
        out[...] = cache


def _table(values, a, b, out, *rest):
    """A precomputed answer (the entry's ``values``), whatever the inputs."""
    out.reshape(-1)[...] = np.asarray(values, out.dtype)


OPS = {"add": _add, "add_bug": _add_bug, "copy": _copy, "scale": _scale, "matmul": _matmul,
       "noop": _noop, "add_half": _add_half, "add_nan": _add_nan,
       "add_once": _add_once, "add_cached": _add_cached, "table": _table}
FULL_MHZ = 1980.0  # the fake board's full clock
COOL_S = 0.05      # idle this long and the fake board is back at full clock


class FakeDevice(Device):
    kind = "fake"

    def __init__(self, spec: BoardSpec):
        self.spec = spec
        self.buffers: dict[str, np.ndarray] = {}
        self.kernels: dict = {}
        self.directives: dict = {}
        self._rng = np.random.default_rng(1234)
        self._noise = float(spec.options.get("noise", 0.002))
        self._pending_fault = False
        self.launches = 0  # of the candidate's kernels in this job (``hang_after``)
        self.rounds = 0    # timed rounds since the card was last cool (``throttle_after``)
        self.last_flush = ""  # the L2 flush mode the last timed batch asked for
        self._last_round = 0.0
        self.busy_ms = 0.0  # modelled device time of every launch so far (`charge`)
        self.hot_launches = 0  # launches since the card was last cool (``throttle_after_launches``)

    def info(self) -> dict:
        return {"name": "fake numpy device", "kind": "fake", "driver": "none",
                "max_clock_mhz": FULL_MHZ,
                "peak_flops_per_s": 790e12, "peak_bytes_per_s": 4.3e12,
                "peak_fp8_flops_per_s": 1580e12,
                "peak_source": "fake board (test figures)",
                "l2_bytes": 0, "versions": {"numpy": np.__version__}}

    def begin_job(self, job_doc: dict) -> None:
        self.directives = dict(job_doc.get("fake", {}))
        self.launches = self.rounds = self.hot_launches = 0
        log = self.spec.options.get("run_log")
        if log:
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, (job_doc.get("name", "") + "\n").encode())
            finally:
                os.close(fd)
        self._rng = np.random.default_rng(int(job_doc["timing"].get("seed", 0)) + 99)

    def load(self, module: bytes, fmt: str, entries: list) -> None:
        if fmt != "fake":
            raise JobFailure("compile.format", f"the fake board runs 'fake' modules, not {fmt!r}")
        try:
            mod = json.loads(module)
            self.kernels = mod["kernels"]
        except (ValueError, KeyError, TypeError) as e:
            raise JobFailure("compile.module", f"malformed fake module: {e}") from None
        for e in entries:
            if e not in self.kernels:
                raise JobFailure("compile.entry", f"module has no kernel {e!r} (has "
                                 f"{sorted(self.kernels)})")
            if self.kernels[e].get("op") not in OPS:
                raise JobFailure("compile.op", f"kernel {e!r}: unknown fake op "
                                 f"{self.kernels[e].get('op')!r}")
        if self.directives.get("sleep_s"):
            time.sleep(float(self.directives["sleep_s"]))

    def alloc(self, name, nbytes):
        self.buffers[name] = np.zeros(nbytes, np.uint8)

    def _view(self, name, dtype, shape):
        return self.buffers[name].view(dtype).reshape(shape)

    def write(self, name, array):
        raw = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        self.buffers[name][:raw.size] = raw

    def read(self, name, dtype, shape):
        return self._view(name, np.dtype(dtype), shape).copy()

    def poison(self, name, itemsize, is_float):
        self.buffers[name][:] = 0xFF  # all-ones bits: NaN for floats, -1/max for ints

    def buffer_handle(self, name):
        return self.buffers[name]

    def launcher(self, launch: dict, doc: dict):
        k = self.kernels[launch["entry"]]
        op = OPS[k["op"]]
        if k["op"] == "table":
            op = functools.partial(op, k.get("values", []))
        bufs = {b["name"]: b for b in doc["buffers"]}

        def args():
            out = []
            for a in launch["args"]:
                if "buffer" in a:
                    b = bufs[a["buffer"]]
                    out.append(self._view(a["buffer"], dtype_of(b["dtype"]), tuple(b["shape"])))
                elif "scalar" in a:
                    out.append(a["scalar"])
                else:
                    out.append(a["tensormap"])
            return out

        def run():
            if self.directives.get("crash"):
                os.kill(os.getpid(), signal.SIGKILL)
            self.launches += 1
            if self.directives.get("hang") and self.launches > self.directives.get(
                    "hang_after", 0):
                time.sleep(1e6)
            if self.directives.get("fault"):
                self._pending_fault = True
                return
            op(*args())
            self.charge(run)
        run.time_ms = float(k.get("time_ms", 0.01))
        run.clock_sensitivity = float(k.get("clock_sensitivity", 0.0))
        return run

    def charge(self, launch) -> None:
        """Add one launch's modelled time to `busy_ms`: its ``time_ms`` scaled by
        (full / current clock) ** its ``clock_sensitivity``. Time follows the launches a
        timed function made, so a sample of several back-to-back launches costs their sum."""
        self.busy_ms += launch.time_ms * (FULL_MHZ / self._clock()) ** launch.clock_sensitivity
        self.hot_launches += 1

    def sync(self):
        if self._pending_fault:
            self._pending_fault = False
            raise JobFailure("runtime.illegal-address", "an illegal memory access was "
                             "encountered (fake fault)", fatal=True)

    def timed_batch(self, fns, l2_flush, gate=False):
        """Run each fn; its time is the modelled time of the launches it made (`charge`; a
        function that launched nothing of this board's counts as one launch of its own
        ``time_ms``), with seeded noise (the clock model: see `sm_clock_mhz`). Host launch
        overhead is not modelled, so a gate has nothing to hold."""
        self.last_gate = "unavailable: the fake board models no host launch overhead" \
            if gate else "off"
        self.last_flush = flush_mode(l2_flush)  # a bad mode fails here as on the cuda board
        now = time.monotonic()
        if now - self._last_round >= COOL_S:
            self.rounds = self.hot_launches = 0  # the card idled: it is back at full clock
        clock = self._clock()
        out = [self._run_modelled(f, clock) for f in fns]
        self.sync()
        self.rounds += 1
        self._last_round = time.monotonic()
        return out

    def timed_split(self, fns, l2_flush):
        """Each fn's modelled time as `timed_batch` gives it, all after one flush."""
        self.last_flush = flush_mode(l2_flush)
        clock = self._clock()
        out = [self._run_modelled(f, clock) for f in fns]
        self.sync()
        return out

    def _run_modelled(self, f, clock) -> float:
        """Run `f`: the modelled ms of the launches it made (or of its own ``time_ms`` when it
        launched none of this board's), with the board's seeded noise."""
        start = self.busy_ms
        f()
        base = self.busy_ms - start or getattr(f, "time_ms", 0.01) * (
            FULL_MHZ / clock) ** getattr(f, "clock_sensitivity", 0.0)
        return base * (1.0 + self._noise * float(self._rng.standard_normal()))

    def sm_clock_mhz(self):
        return self._clock()

    def _clock(self) -> float:
        """Full clock, until ``throttle_after`` timed rounds (or ``throttle_after_launches``
        launches) have run back to back (then ``throttled_mhz``, until the card idles
        `COOL_S`): a power-limited card, which a stream of launches heats faster than rounds
        of one launch a side do."""
        n = self.directives.get("throttle_after", 0)
        m = self.directives.get("throttle_after_launches", 0)
        if ((n and self.rounds >= n) or (m and self.hot_launches >= m)) \
                and time.monotonic() - self._last_round < COOL_S:
            return float(self.directives.get("throttled_mhz", 1680.0))
        return FULL_MHZ

    def free_all(self):
        self.buffers.clear()


class FakeBaseline:
    """``fake.add``: out = a + b on the fake device, 0.1 ms; used to test interleaving/ratios."""

    name = "fake.add"

    def available(self, device):
        return None if getattr(device, "kind", "") == "fake" else "runs only on fake boards"

    def prepare(self, device, doc, args):
        bufs = {b["name"]: b for b in doc["buffers"]}

        def view(role):
            name = args[role]
            b = bufs.get(name) or bufs[name[len("__ref_"):]]
            return device._view(name, dtype_of(b["dtype"]), tuple(b["shape"]))

        def run():
            view("out")[...] = view("a") + view("b")
            device.charge(run)
        run.time_ms = float(args.get("time_ms", 0.1))
        run.clock_sensitivity = float(args.get("clock_sensitivity", 0.0))
        return run


class FakeBoardType:
    """Boards from ``[boards.fake] count = N`` (default none unless configured)."""

    name = "fake"

    def discover(self, config: dict) -> list:
        n = int(config.get("count", 0))
        return [BoardSpec(name=f"fake{i}", type="fake", target=config.get("target", "sm_90a"),
                          tags=list(config.get("tags", ["fake"])),
                          properties={"device": "fake numpy device"},
                          limits=dict(config.get("limits", {"memory_bytes": 1 << 30})),
                          options={"noise": config.get("noise", 0.002),
                                   **({"run_log": str(config["run_log"])}
                                      if config.get("run_log") else {})})
                for i in range(n)]

    def open_device(self, spec: BoardSpec) -> Device:
        return FakeDevice(spec)


@hookimpl
def kcoral_register_board_types(registry):
    registry.add(FakeBoardType())


@hookimpl
def kcoral_register_baselines(registry):
    registry.add(FakeBaseline(), owner="kcoral.boards.fake")
