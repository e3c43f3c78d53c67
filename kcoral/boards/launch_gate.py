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
deadlock; a watcher opens the gate after ``timeout_s`` and the round is reported as ``late``, and
the measurement stops gating the job's later rounds (`kcoral.measure` says so in the result).
"""

from __future__ import annotations

import ctypes
import threading
import time

MASK32 = 0xFFFFFFFF


class LaunchGate:
    """One gate per device: `close` before enqueuing a round, `open` after.

    `driver` is ``cuda.bindings.driver`` (or a test double with the same four calls);
    `check(result, what)` unwraps a driver result tuple and raises on an error. The word is
    compared cyclically (``GEQ`` on the 32-bit difference), so the counter may wrap. One watcher
    thread per gate (started with it) releases a round left closed for ``timeout_s``: rounds
    are short and many, so no thread is made per round."""

    def __init__(self, driver, check, stream, timeout_s: float = 2.0):
        self.cu, self._check, self.stream = driver, check, stream
        self.timeout_s = timeout_s
        self.value = 0
        self.late = False  # the last round was opened by the watcher, not by `open`
        self._cv = threading.Condition()
        self._deadline: "float | None" = None  # when the held round is released regardless
        self._stopped = False
        flags = driver.CU_MEMHOSTALLOC_DEVICEMAP | driver.CU_MEMHOSTALLOC_PORTABLE
        self.host = int(check(driver.cuMemHostAlloc(4, flags), "cuMemHostAlloc(launch gate)"))
        self.word = ctypes.c_uint32.from_address(self.host)
        self.word.value = 0
        self.device_ptr = int(check(driver.cuMemHostGetDevicePointer(self.host, 0),
                                    "cuMemHostGetDevicePointer(launch gate)"))
        self._watcher = threading.Thread(target=self._watch, name="kcoral-launch-gate",
                                         daemon=True)
        self._watcher.start()

    def close(self) -> None:
        """Enqueue the wait: work enqueued after this runs only once `open` (or the watcher)
        has written the next value."""
        geq = self.cu.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ
        with self._cv:
            self.value = (self.value + 1) & MASK32
            self.late = False
            self._check(self.cu.cuStreamWaitValue32(self.stream, self.device_ptr, self.value,
                                                    geq), "cuStreamWaitValue32(launch gate)")
            self._deadline = time.monotonic() + self.timeout_s
            self._cv.notify()

    def open(self) -> None:
        """Release the round (the host has enqueued all of it)."""
        with self._cv:
            self._deadline = None
            self.word.value = self.value

    def _watch(self) -> None:
        with self._cv:
            while not self._stopped:
                if self._deadline is None:
                    self._cv.wait()
                    continue
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._cv.wait(left)
                    continue
                self._deadline = None  # a launcher waited for the device while held
                self.late = True
                self.word.value = self.value

    def free(self) -> None:
        with self._cv:
            self._stopped = True
            self._deadline = None
            self.word.value = self.value  # never leave a stream waiting on freed memory
            self._cv.notify()
        try:
            self.cu.cuMemFreeHost(self.host)
        except Exception:  # the context may be gone already (a worker shutting down)
            pass
