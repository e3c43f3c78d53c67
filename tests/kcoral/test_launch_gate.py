"""The cuda board's launch gate (`kcoral.boards.launch_gate`) against a driver double: the wait
is enqueued with the next value, `open` releases it, the watcher releases a round the host never
opened (and says so), and the cyclic comparison survives the counter's wrap. The real driver
path is exercised on the H200 (benchmarks/gpu_bench.sh: every timed job is gated)."""

import ctypes
import time

import pytest

from kcoral.boards.launch_gate import MASK32, LaunchGate
from kcoral.errors import JobFailure


class _Flags:
    CU_STREAM_WAIT_VALUE_GEQ = 0


class _Driver:
    """The four driver calls the gate makes; host memory is a ctypes word, mapped 1:1."""

    CU_MEMHOSTALLOC_DEVICEMAP = 2
    CU_MEMHOSTALLOC_PORTABLE = 1
    CUstreamWaitValue_flags = _Flags

    def __init__(self, refuse_wait=False):
        self.mem = ctypes.c_uint32(12345)
        self.waits: list = []
        self.freed = False
        self.refuse_wait = refuse_wait

    def cuMemHostAlloc(self, nbytes, flags):
        assert nbytes == 4 and flags == 3
        return 0, ctypes.addressof(self.mem)

    def cuMemHostGetDevicePointer(self, host, flags):
        return 0, host

    def cuStreamWaitValue32(self, stream, ptr, value, flag):
        if self.refuse_wait:
            return (801,)  # CUDA_ERROR_NOT_SUPPORTED
        self.waits.append((stream, ptr, value, flag))
        return (0,)

    def cuMemFreeHost(self, host):
        self.freed = True
        return (0,)


def _check(res, what):
    err, *rest = res
    if err:
        raise JobFailure("launch.not_supported", f"{what}: error {err}")
    return rest[0] if rest else None


def _released(drv, value):
    """What the device would see: the wait for `value` is satisfied (cyclic >=)."""
    return ((drv.mem.value - value) & MASK32) < (1 << 31)


def test_close_enqueues_a_wait_that_open_releases():
    drv = _Driver()
    g = LaunchGate(drv, _check, "stream0", timeout_s=5.0)
    assert drv.mem.value == 0  # reset at creation: nothing waits yet
    g.close()
    (stream, ptr, value, flag), = drv.waits
    assert (stream, ptr, value, flag) == ("stream0", ctypes.addressof(drv.mem), 1, 0)
    assert not _released(drv, value)  # the round is held until the host opens it
    g.open()
    assert _released(drv, value) and g.late is False
    g.close()
    assert drv.waits[-1][2] == 2 and not _released(drv, 2)
    g.open()
    g.free()
    assert drv.freed


def test_the_timer_releases_a_round_the_host_never_opened():
    drv = _Driver()
    g = LaunchGate(drv, _check, "s", timeout_s=0.05)
    g.close()
    deadline = time.monotonic() + 5
    while not _released(drv, 1) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _released(drv, 1) and g.late is True
    g.open()  # the host gets there afterwards: harmless, and the next round starts clean
    g.close()
    assert g.late is False and not _released(drv, 2)
    g.open()
    time.sleep(0.1)  # the cancelled timer must not mark an opened round late
    assert g.late is False


def test_the_counter_wraps_cyclically():
    drv = _Driver()
    g = LaunchGate(drv, _check, "s", timeout_s=5.0)
    g.value = MASK32
    drv.mem.value = MASK32  # the previous round (value 2^32 - 1) is open
    g.close()
    assert drv.waits[-1][2] == 0 and not _released(drv, 0)
    g.open()
    assert drv.mem.value == 0 and _released(drv, 0)


def test_a_driver_that_refuses_the_wait_raises_a_typed_failure():
    g = LaunchGate(_Driver(refuse_wait=True), _check, "s", timeout_s=5.0)
    with pytest.raises(JobFailure, match=r"cuStreamWaitValue32\(launch gate\): error 801"):
        g.close()


def test_rounds_make_no_threads():
    """Rounds are short and many (2000 per job at most): one watcher per gate, none per round."""
    import threading
    drv = _Driver()
    g = LaunchGate(drv, _check, "s", timeout_s=5.0)
    before = threading.active_count()
    for _ in range(500):
        g.close()
        g.open()
    assert threading.active_count() == before and drv.waits[-1][2] == 500
    g.free()
    g._watcher.join(2)
    assert not g._watcher.is_alive()  # free stops it
