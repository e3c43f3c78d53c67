"""Hold a timed round's GPU work until the host has enqueued all of it (the cuda board).

CUDA events time the stream, not the kernel. When a launcher spends host time before its kernel
reaches the GPU (a baseline's Python, torch.compile's guard checks, the caching allocator), the
stream idles between the start event and the kernel, and that idle time is counted as the
kernel's. On the H200 (2026-12-01, protocol kcoral-measure/2) torch.compile's SwiGLU over 64M
elements had a median of 98 us but an IQR of 28-84 us and samples up to 437 us, while the same
job's candidate and eager baseline had IQRs of 1-4 us: those jobs never reached the 1% noise
target and ran their 2000-round cap.

The gate enqueues a ``cuStreamWaitValue32`` on a word of pinned, device-mapped host memory before
the round, then the round's work behind it (flushes, events, launches), then writes the word
from the host: the GPU runs the whole round back to back and the events measure GPU time only.
This is nvbench's "blocking kernel" idea done with a stream memory operation instead of a spin
kernel, so it needs no module of its own.

A launcher that waits for the GPU while the gate is closed (a baseline that synchronizes) would
deadlock; a timer opens the gate after ``timeout_s`` and the round is reported as ``late``, and
the measurement stops gating the job's later rounds (`kcoral.measure` says so in the result).
"""

from __future__ import annotations

import ctypes
import threading

MASK32 = 0xFFFFFFFF


class LaunchGate:
    """One gate per device: `close` before enqueuing a round, `open` after.

    `driver` is ``cuda.bindings.driver`` (or a test double with the same four calls);
    `check(result, what)` unwraps a driver result tuple and raises on an error. The word is
    compared cyclically (``GEQ`` on the 32-bit difference), so the counter may wrap."""

    def __init__(self, driver, check, stream, timeout_s: float = 2.0):
        self.cu, self._check, self.stream = driver, check, stream
        self.timeout_s = timeout_s
        self.value = 0
        self.late = False  # the last round was opened by the timer, not by `open`
        self._timer: "threading.Timer | None" = None
        flags = driver.CU_MEMHOSTALLOC_DEVICEMAP | driver.CU_MEMHOSTALLOC_PORTABLE
        self.host = int(check(driver.cuMemHostAlloc(4, flags), "cuMemHostAlloc(launch gate)"))
        self.word = ctypes.c_uint32.from_address(self.host)
        self.word.value = 0
        self.device_ptr = int(check(driver.cuMemHostGetDevicePointer(self.host, 0),
                                    "cuMemHostGetDevicePointer(launch gate)"))

    def close(self) -> None:
        """Enqueue the wait: work enqueued after this runs only once `open` (or the timer) has
        written the next value."""
        self.value = (self.value + 1) & MASK32
        self.late = False
        geq = self.cu.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ
        self._check(self.cu.cuStreamWaitValue32(self.stream, self.device_ptr, self.value, geq),
                    "cuStreamWaitValue32(launch gate)")
        self._timer = threading.Timer(self.timeout_s, self._release, args=(True,))
        self._timer.daemon = True
        self._timer.start()

    def open(self) -> None:
        """Release the round (the host has enqueued all of it)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._release(False)

    def _release(self, by_timer: bool) -> None:
        if by_timer and ((self.word.value - self.value) & MASK32) < (1 << 31):
            return  # already open
        if by_timer:
            self.late = True
        self.word.value = self.value

    def free(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.word.value = self.value  # never leave a stream waiting on freed memory
        try:
            self.cu.cuMemFreeHost(self.host)
        except Exception:  # the context may be gone already (a worker shutting down)
            pass
