"""The ``sim`` board: correctness on the CPU through numsim, never a timing.

numsim (``plugins/numsim``, ``tirxh_numsim.run``) simulates TIRx *IR*; a KCoral job is
declarative and carries a PTX or cubin module, with no IR. So the sim board needs a numsim entry
point that runs one launch of a PTX module on host buffers (``tirxh_numsim.run_job_launch(ptx,
launch, buffers, job)``). Until numsim has it the board is listed with the reason it is
unavailable and a job aimed at it is refused at submission with that reason, never silently
skipped. (``tirxh check`` runs numsim locally on the IR, which is where simulation belongs today.)
"""

from __future__ import annotations

from kcoral.boards import BoardSpec, Device
from kcoral.errors import JobFailure
from kcoral.plugins import hookimpl


def numsim_unavailable() -> str:
    """Why the sim board cannot run jobs here ('' when it can)."""
    try:
        import tirxh_numsim
    except ImportError:
        return "numsim is not installed (pip install -e plugins/numsim)"
    if not callable(getattr(tirxh_numsim, "run_job_launch", None)):
        return ("incomplete: numsim simulates TIRx IR (tirxh_numsim.run) and KCoral jobs carry "
                "PTX/cubin; numsim has no PTX-module entry point (run_job_launch) yet")
    return ""


class SimDevice(Device):
    """Host arrays + numsim launches; `can_time` is False, so results carry no timing."""

    kind = "sim"
    can_time = False

    def __init__(self, spec: BoardSpec):
        import numpy as np
        import tirxh_numsim
        self._np = np
        self._numsim = tirxh_numsim
        self.spec = spec
        self.buffers = {}
        self.module = None

    def info(self):
        return {"name": "numsim (CPU)", "kind": "sim", "driver": "none",
                "peak_flops_per_s": 0, "peak_bytes_per_s": 0}

    def load(self, module, fmt, entries):
        if fmt != "ptx":
            raise JobFailure("compile.format", "the sim board runs PTX modules only")
        self.module = module.decode()

    def alloc(self, name, nbytes):
        self.buffers[name] = self._np.zeros(nbytes, self._np.uint8)

    def write(self, name, array):
        raw = self._np.ascontiguousarray(array).reshape(-1).view(self._np.uint8)
        self.buffers[name][:raw.size] = raw

    def read(self, name, dtype, shape):
        return self.buffers[name].view(dtype).reshape(shape).copy()

    def poison(self, name, itemsize, is_float):
        self.buffers[name][:] = 0xFF

    def buffer_handle(self, name):
        return self.buffers[name]

    def launcher(self, launch, doc):
        def run():
            self._numsim.run_job_launch(self.module, launch, self.buffers, doc)
        return run

    def sync(self):
        pass

    def timed_batch(self, fns, l2_flush):  # pragma: no cover - can_time is False
        raise JobFailure("unavailable.timing", "the sim board does not time kernels")


class SimBoardType:
    name = "sim"

    def discover(self, config: dict) -> list:
        if not config.get("enabled", True):
            return []
        return [BoardSpec(name="sim0", type="sim", target=t, tags=["sim", "cpu"],
                          properties={"device": "numsim on the CPU"}, timing=False,
                          unavailable=numsim_unavailable())
                for t in config.get("targets", ["sm_90a"])]

    def open_device(self, spec):
        why = numsim_unavailable()
        if why:
            raise RuntimeError(why)
        return SimDevice(spec)


@hookimpl
def kcoral_register_board_types(registry):
    registry.add(SimBoardType())
