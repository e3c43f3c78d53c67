"""The cuda board's L2 flush (`kcoral.boards.l2_flush`) against a driver double, the read sweep's
PTX through ptxas (nvJitLink) and its SASS, and the ``l2_flush_by`` field from the job through the
measurement to the board. The sweep's effect on a timed kernel is a device measurement
(benchmarks/QUEUE.md, docs/PERFORMANCE.md)."""

import ctypes
import re

import pytest

from kcoral.boards.l2_flush import (FLUSH_MODES, SWEEP_CTAS_PER_SM, SWEEP_ENTRY, SWEEP_PTX,
                                    SWEEP_THREADS, L2Flush, flush_mode)
from kcoral.errors import JobFailure
from kcoral.job import Job, JobError

from .test_launch_gate import _check  # unwraps a driver result, raises JobFailure on an error
from .test_measure import make


class _Driver:
    """The driver calls the flush makes, recorded; device memory is never touched."""

    def __init__(self, refuse_load=False):
        self.calls: list = []
        self.refuse_load = refuse_load

    def cuMemAlloc(self, nbytes):
        self.calls.append(("alloc", nbytes))
        return 0, 0x7000_0000

    def cuMemsetD32(self, ptr, value, words):
        self.calls.append(("memset", ptr, value, words))
        return (0,)

    def cuMemsetD32Async(self, ptr, value, words, stream):
        self.calls.append(("memset_async", ptr, value, words, stream))
        return (0,)

    def cuModuleLoadData(self, image):
        self.calls.append(("load", image))
        return (218,) if self.refuse_load else (0, "module")  # 218: INVALID_PTX

    def cuModuleGetFunction(self, module, name):
        self.calls.append(("function", module, name))
        return 0, "sweep"

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        # read the two parameters back through the void** array, as the driver would
        ptrs = (ctypes.c_void_p * 2).from_address(params)
        values = [ctypes.c_uint64.from_address(p).value for p in ptrs]
        self.calls.append(("launch", f, (gx, gy, gz), (bx, by, bz), smem, stream, values))
        return (0,)

    def cuModuleUnload(self, module):
        self.calls.append(("unload", module))
        return (0,)

    def cuMemFree(self, ptr):
        self.calls.append(("free", ptr))
        return (0,)


def _flush(drv, l2=50 * 2 ** 20, sms=132):
    return L2Flush(drv, _check, "stream", l2, sms)


def test_the_buffer_is_twice_the_l2_in_whole_vectors_and_zeroed():
    drv = _Driver()
    f = _flush(drv, l2=50 * 2 ** 20 + 4)
    assert f.n_vec == -(-(2 * (50 * 2 ** 20 + 4)) // 16) and f.words == 4 * f.n_vec
    assert drv.calls == [("alloc", 16 * f.n_vec), ("memset", 0x7000_0000, 0, f.words)]
    assert _flush(_Driver(), l2=4096).n_vec == 2 ** 20 // 16  # at least 1 MiB


def test_writing_fills_the_whole_buffer_with_a_new_value_each_time():
    drv = _Driver()
    f = _flush(drv)
    drv.calls.clear()
    f.sweep("write")
    f.sweep("write")
    assert drv.calls == [("memset_async", 0x7000_0000, 1, f.words, "stream"),
                         ("memset_async", 0x7000_0000, 2, f.words, "stream")]


def test_reading_loads_the_sweep_once_and_launches_it_over_every_vector():
    drv = _Driver()
    f = _flush(drv, sms=132)
    drv.calls.clear()
    f.sweep("read")
    f.sweep("read")
    load, function, launch, again = drv.calls
    assert load == ("load", SWEEP_PTX.encode() + b"\0")
    assert function == ("function", "module", SWEEP_ENTRY.encode())
    assert launch == ("launch", "sweep", (132 * SWEEP_CTAS_PER_SM, 1, 1), (SWEEP_THREADS, 1, 1),
                      0, "stream", [0x7000_0000, f.n_vec])
    assert again == launch
    f.free()
    assert drv.calls[-2:] == [("unload", "module"), ("free", 0x7000_0000)]


def test_a_sweep_the_driver_refuses_is_a_typed_failure():
    f = _flush(_Driver(refuse_load=True))
    with pytest.raises(JobFailure, match="L2 read sweep"):
        f.sweep("read")


@pytest.mark.parametrize("given, mode", [(True, "write"), (False, ""), (None, ""), ("", ""),
                                         ("write", "write"), ("read", "read")])
def test_flush_mode(given, mode):
    assert flush_mode(given) == mode


def test_an_unknown_flush_mode_is_refused():
    with pytest.raises(ValueError, match="'evict' is not one of"):
        flush_mode("evict")
    assert FLUSH_MODES == ("write", "read")


def test_the_sweep_assembles_and_only_loads():
    """ptxas is the judge of the PTX; the SASS must keep the 16-byte loads (the data decides
    the one store, so they cannot be dropped) and store at most once, behind a predicate."""
    toolchain = pytest.importorskip("tirxh.core.toolchain")
    try:
        cubin, _ = toolchain.ptx_to_cubin(SWEEP_PTX, "sm_90a")
        sass = toolchain.cubin_to_sass(cubin)
    except toolchain.ToolchainError as e:  # no nvJitLink and no ptxas on this machine
        pytest.skip(str(e))
    loads = re.findall(r"\bLDG\.E\.128\S*", sass)
    stores = re.findall(r"^.*\bST[GS]\b.*$", sass, re.M)
    assert len(loads) >= 1, sass
    assert len(stores) == 1, sass
    body = sass[:sass.index(stores[0])]
    assert re.search(r"@!?P\d+ (EXIT|BRA)", body.split("LDG.E.128")[-1]), \
        "the store is not behind the XOR's predicate"


def _timed(tmp_path, **timing):
    run, _ = make(tmp_path, timing={"min_iters": 5, "budget_s": 1.0, **timing})
    return run()["timing"]


def test_the_job_asks_the_board_for_its_flush(tmp_path, monkeypatch):
    from kcoral.boards import fake

    asked = []
    real = fake.FakeDevice.timed_batch

    def spy(self, fns, l2_flush, gate=False):
        out = real(self, fns, l2_flush, gate)
        asked.append(self.last_flush)
        return out
    monkeypatch.setattr(fake.FakeDevice, "timed_batch", spy)
    t = _timed(tmp_path, l2_flush_by="read")
    assert t["l2_flush"] and t["l2_flush_by"] == "read" and set(asked) == {"read"}
    asked.clear()
    t = _timed(tmp_path / "w")
    assert t["l2_flush_by"] == "write" and set(asked) == {"write"}
    asked.clear()
    t = _timed(tmp_path / "n", l2_flush=False, l2_flush_by="read")
    assert t["l2_flush_by"] is None and set(asked) == {""}


def test_an_unknown_flush_in_a_job_is_refused_with_its_field():
    doc = {"timing": {"l2_flush_by": "invalidate"}}
    with pytest.raises(JobError, match=r"timing\.l2_flush_by.*'invalidate' is not one of"):
        Job.from_json(doc)
