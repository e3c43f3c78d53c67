"""The per-launch watchdog: a kernel that hangs must not hold its board for the whole execution
budget.

Found on the H200: a kernel that deadlocks (a racy mbarrier, a wait nobody arrives at) kept its
board for the job's whole ``budgets.exec_s`` (120 s by default) and every other client's job
waited behind it. The measurement protocol (`kcoral.measure`) therefore runs each launch of the
candidate and each sync that waits for it inside a *guarded section*: a section that does not
finish within

    limit = min(budgets.exec_s, max(budgets.launch_s, 50 x the longest guarded section so far))

is a typed ``timeout.launch`` failure, and the worker is killed and restarted. ``launch_s``
(default 10 s) is the limit before anything was measured (the first correctness launch); once the
warm-up has run, a launch may take fifty times as long as the longest one seen before it is
called hung. Baselines (operator plugins, which may compile on their first call) are not guarded:
the execution budget bounds them.

A hung driver call cannot be interrupted from the thread that made it, so a separate thread
watches the clock and calls ``on_expire(what, limit_s, elapsed_s)``, which in the worker reports
the typed result and kills the worker's process group (`kcoral.worker`). cuda-bindings and torch
release the GIL while they wait on the device, so the watching thread runs; a C extension that
holds the GIL while hanging is still stopped by the daemon's execution budget.
"""

from __future__ import annotations

import contextlib
import threading
import time

FACTOR = 50.0            # a launch may take this many times the longest one seen so far
DEFAULT_LAUNCH_S = 10.0  # the limit before anything was measured
TICK_S = 0.05            # how often the watching thread looks at the clock


class Watchdog:
    """Guarded sections for one job. `on_expire(what, limit_s, elapsed_s)` is called from the
    watching thread when a section overruns (once; the section's thread is presumed stuck)."""

    def __init__(self, on_expire, launch_s: float = DEFAULT_LAUNCH_S,
                 exec_s: "float | None" = None, factor: float = FACTOR):
        self.on_expire = on_expire
        self.launch_s = float(launch_s)
        self.exec_s = exec_s
        self.factor = factor
        self.longest = 0.0  # the longest guarded section that finished, seconds
        self._cv = threading.Condition()
        self._armed: "tuple[str, float, float] | None" = None  # (what, start, limit)
        self._fired = False
        self._closed = False
        self._thread = threading.Thread(target=self._watch, daemon=True,
                                        name="kcoral-launch-watchdog")
        self._thread.start()

    def limit(self) -> float:
        """The limit a section armed now gets (see the module docstring)."""
        lim = max(self.launch_s, self.factor * self.longest)
        return min(lim, self.exec_s) if self.exec_s else lim

    @contextlib.contextmanager
    def guard(self, what: str):
        """Run the body as a guarded section named `what` (it appears in the failure)."""
        start = time.monotonic()
        with self._cv:
            self._armed = (what, start, self.limit())
            self._cv.notify_all()
        try:
            yield
        finally:
            elapsed = time.monotonic() - start
            with self._cv:
                self._armed = None
                if not self._fired:
                    self.longest = max(self.longest, elapsed)

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        self._thread.join(1.0)

    def _watch(self) -> None:
        with self._cv:
            while not self._closed:
                armed = self._armed
                if armed is None:
                    self._cv.wait()
                    continue
                what, start, limit = armed
                elapsed = time.monotonic() - start
                if elapsed >= limit:
                    self._fired = True
                    self._closed = True
                    break
                self._cv.wait(min(TICK_S, limit - elapsed))
            else:
                return
        self.on_expire(what, limit, elapsed)


class NoWatchdog:
    """Guarded sections that are never enforced (boards that do not launch on a device)."""

    longest = 0.0

    @contextlib.contextmanager
    def guard(self, what: str):
        yield

    def limit(self) -> float:
        return float("inf")

    def close(self) -> None:
        pass
