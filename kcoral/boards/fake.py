"""The ``fake`` board: a deterministic numpy device for testing the daemon without a GPU.

Its modules are JSON (``module.format: "fake"``) naming numpy operations per entry point::

    {"kernels": {"vadd": {"op": "add", "time_ms": 0.05}}}

Ops act on the launch's arguments in order (`OPS`); ``add_bug`` is a deliberately wrong kernel
for correctness tests. Timings are ``time_ms`` with seeded relative noise (board option
``noise``), so tests can assert on medians. A job's ``fake`` object tells the worker to misbehave:
``{"crash": true}`` (SIGKILL itself mid-launch, like a segfaulting driver), ``{"hang": true}``
(sleep forever in a launch), ``{"fault": true}`` (a sticky device fault at the next sync),
``{"sleep_s": x}`` (take x seconds of wall time while loading, to make queues build up).
"""

from __future__ import annotations

import json
import os
import signal
import time

import numpy as np

from kcoral.boards import BoardSpec, Device
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


OPS = {"add": _add, "add_bug": _add_bug, "copy": _copy, "scale": _scale, "matmul": _matmul,
       "noop": _noop}


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

    def info(self) -> dict:
        return {"name": "fake numpy device", "kind": "fake", "driver": "none",
                "peak_flops_per_s": 790e12, "peak_bytes_per_s": 4.3e12,
                "l2_bytes": 0, "versions": {"numpy": np.__version__}}

    def begin_job(self, job_doc: dict) -> None:
        self.directives = dict(job_doc.get("fake", {}))
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
            if self.directives.get("hang"):
                time.sleep(1e6)
            if self.directives.get("fault"):
                self._pending_fault = True
                return
            op(*args())
        run.time_ms = float(k.get("time_ms", 0.01))
        return run

    def sync(self):
        if self._pending_fault:
            self._pending_fault = False
            raise JobFailure("runtime.illegal-address", "an illegal memory access was "
                             "encountered (fake fault)", fatal=True)

    def timed_batch(self, fns, l2_flush):
        out = []
        for f in fns:
            f()
            base = getattr(f, "time_ms", 0.01)
            out.append(base * (1.0 + self._noise * float(self._rng.standard_normal())))
        self.sync()
        return out

    def sm_clock_mhz(self):
        return 1980.0

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
        run.time_ms = float(args.get("time_ms", 0.1))
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
                          options={"noise": config.get("noise", 0.002)})
                for i in range(n)]

    def open_device(self, spec: BoardSpec) -> Device:
        return FakeDevice(spec)


@hookimpl
def kcoral_register_board_types(registry):
    registry.add(FakeBoardType())


@hookimpl
def kcoral_register_baselines(registry):
    registry.add(FakeBaseline(), owner="kcoral.boards.fake")
