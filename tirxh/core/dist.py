"""``-n N``: the items of ``tirxh check`` run in N worker processes (as pytest-xdist's ``-n``).

Design (learned from pytest-xdist, written for this harness):

- **Workers** (`tirxh.core.worker`) are fresh interpreters (*spawn*), each configured from the
  main process's command line and collecting the same items; an item is named to a worker by
  its node id, so nothing unpicklable (kernels, suites, plugin objects) crosses a process.
- **Scheduling**: one item at a time per worker, pulled as the worker finishes; items are handed
  out longest-expected first (`tirxh.core.durations`: last run's durations, else a heuristic),
  so the run is not left waiting on one long simulation started last.
- **Reports** come back as `ItemReport` JSON and are yielded in *collection order*: the main
  process alone runs the reporting hooks, so the terminal output, ``--json``, JUnit and the
  report log are those of a serial run apart from timings (and which of two items with the same
  PTX found the other's cubin in the artifact cache).
- **Progress**: while the in-order stream is held back by an item still running (the longest
  items start first, and a report waits for every item before it), ``tirxh_progress`` is
  called at most every ``--progress-every`` seconds (default 60, 0: never) with how many items
  have finished and what the stream waits on: the terminal reporter writes it to stderr, so a
  long run is seen to move and stdout stays a serial run's.
- **-x**: once an item fails, items after it in collection order are no longer handed out (those
  in flight are stopped); items before it still run, so the first failure reported is the one a
  serial run would have stopped at, and the output is the serial one.
- **A worker that dies** (a segfault, the OOM killer, ``os._exit``) makes the item it held an
  ``error`` naming the signal or exit status; a new worker takes its place if work remains.
- **Ctrl-C** (KeyboardInterrupt in the main process) terminates every worker before it
  propagates; workers ignore SIGINT themselves.

The artifact cache is safe under these concurrent writers: an entry is written into a temporary
directory and renamed into place (`tirxh.core.cache`), and a lost race leaves the winner's.
"""

from __future__ import annotations

import collections
import json
import multiprocessing
import multiprocessing.connection
import os
import signal
import time
from typing import Iterator

from . import durations
# a module object, not its names: `worker` imports `cli`, which imports `main`, which imports
# this module (see `tirxh.core.worker`)
from . import worker as _worker
from .errors import UsageError
from .reports import ItemReport, PhaseReport, from_json

# how long a worker asked to stop (or terminated) may take before it is killed, seconds
STOP_GRACE_S = 5.0


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # macOS and Windows have no affinity mask
        return os.cpu_count() or 1


def numprocesses(value: "str | int | None") -> int:
    """``-n``'s value as a number of workers: ``auto`` = `usable_cpus` (0, serial, where that
    is one: a lone worker would only add its start-up), 0 = serial."""
    if value is None:
        return 0
    if str(value) == "auto":
        n = usable_cpus()
        return n if n > 1 else 0
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 0:
        raise UsageError(f"-n {value!r}: expected a number of worker processes (0: run in this "
                         f"process) or 'auto' (one per usable CPU)")
    return n


def exit_reason(exitcode: "int | None") -> str:
    """How a worker process ended, in words (``killed by signal SIGSEGV``)."""
    if exitcode is None:
        return "stopped answering"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = str(-exitcode)
        why = " (the out-of-memory killer sends it)" if -exitcode == signal.SIGKILL else ""
        return f"killed by signal {name}{why}"
    return f"exited with status {exitcode}"


def error_report(item, command: str, text: str) -> ItemReport:
    """An ``error`` report for an item its worker could not report on itself."""
    file, line = item.location
    phase = PhaseReport(command, "error", 0.0, text)
    return ItemReport(item.nodeid, item.kernel.name, item.case.name if item.case else None,
                      item.target, [file, line], "error", 0.0, [phase])


class WorkerStartError(RuntimeError):
    """A worker could not configure itself or collect (an internal error: the main process
    did both with the same command line)."""


class _Worker:
    """One worker process, its end of the pipe, and the item it holds (an index, or None)."""

    def __init__(self, ctx, argv: list, wid: str):
        self.id = wid
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker.worker_main, args=(argv, child, wid),
                                name=f"tirxh-{wid}")
        self.proc.start()
        child.close()
        self.ready = False
        self.index: "int | None" = None
        self.since = 0.0  # time.monotonic() when `index` was handed out

    def send(self, msg) -> bool:
        try:
            self.conn.send(msg)
            return True
        except OSError:  # it died; its sentinel says so next
            return False

    def stop(self, hard: bool) -> None:
        """Ask an idle worker to stop (it runs ``tirxh_unconfigure``), terminate a busy one or
        any when `hard`; kill what is still alive after the grace period."""
        if self.proc.is_alive():
            if hard or self.index is not None or not self.send(("stop",)):
                self.proc.terminate()
            self.proc.join(STOP_GRACE_S)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join()
        self.conn.close()


class _Run:
    """The state of one parallel run (see `run_in_workers`)."""

    def __init__(self, config, items: list, n: int, exitfirst: bool):
        self.config = config
        self.items = items
        self.n = n
        self.exitfirst = exitfirst
        self.pending = collections.deque(durations.longest_first(config, items))
        self.done: dict = {}  # index -> ItemReport, until yielded
        self.stop_at = len(items)  # with -x: one past the first failed index known
        self.workers: list = []
        self.started = 0
        self.ctx = multiprocessing.get_context("spawn")
        self.argv = list(config.args)

    def needed(self) -> int:
        """Items still to hand out (below `stop_at`)."""
        return sum(1 for i in self.pending if i < self.stop_at)

    def start_workers(self) -> None:
        """Enough workers for the work left, never more than N."""
        busy = sum(1 for w in self.workers if w.index is not None)
        idle = len(self.workers) - busy
        want = min(self.n - len(self.workers), self.needed() - idle)
        for _ in range(max(want, 0)):
            self.workers.append(_Worker(self.ctx, self.argv, f"gw{self.started}"))
            self.started += 1

    def dispatch(self) -> None:
        for w in self.workers:
            if not w.ready or w.index is not None:
                continue
            while self.pending and self.pending[0] >= self.stop_at:
                self.pending.popleft()
            if not self.pending:
                return
            index = self.pending.popleft()
            w.index, w.since = index, time.monotonic()
            w.send(("run", index, self.items[index].nodeid))

    def finish(self, index: int, rep: ItemReport) -> None:
        self.done[index] = rep
        if self.exitfirst and rep.outcome in ("failed", "error") and index < self.stop_at:
            self.stop_at = index + 1
            for w in list(self.workers):  # their items will not be reported: free the slots
                if w.index is not None and w.index >= self.stop_at:
                    self.workers.remove(w)
                    w.stop(hard=True)

    def on_message(self, w: _Worker, msg) -> None:
        kind = msg[0]
        if kind == "ready":
            w.ready = True
        elif kind == "startup_error":
            raise WorkerStartError(f"worker {w.id} could not start:\n{msg[1]}")
        elif kind == "report":
            _, index, payload, counts = msg
            cache = self.config.cache
            cache.hits, cache.misses, cache.sass_hits = (
                a + b for a, b in zip((cache.hits, cache.misses, cache.sass_hits), counts))
            w.index = None
            self.finish(index, from_json(json.loads(payload)))
        elif kind in ("missing", "crash"):
            index = msg[1]
            w.index = None
            text = (f"worker {w.id} did not collect this item: its collection differs from the "
                    "main process's (does a kernel module build its cases from the time, the "
                    "environment or randomness?)") if kind == "missing" else \
                f"worker {w.id}: the item raised outside its phases:\n{msg[2]}"
            self.finish(index, error_report(self.items[index], self.config.command, text))

    def on_exit(self, w: _Worker) -> None:
        """`w`'s process ended: its item (if any) is an error; a start-up death is fatal."""
        self.workers.remove(w)
        w.proc.join()
        if not w.ready:
            w.conn.close()
            raise WorkerStartError(f"worker {w.id} {exit_reason(w.proc.exitcode)} before it "
                                   "was ready")
        if w.index is not None:
            self.finish(w.index, error_report(
                self.items[w.index], self.config.command,
                f"worker {w.id} crashed while running this item: "
                f"{exit_reason(w.proc.exitcode)}"))
        w.conn.close()

    def progress(self, nxt: int) -> dict:
        """`tirxh_progress`'s arguments while the stream waits on item `nxt`."""
        now = time.monotonic()
        running = sorted((w.id, self.items[w.index].nodeid, now - w.since)
                         for w in self.workers if w.index is not None)
        return dict(finished=nxt + len(self.done), total=len(self.items),
                    waiting_on=self.items[nxt].nodeid, running=running)

    def wait(self, timeout: "float | None" = None) -> None:
        """Block until a worker says something or ends (or `timeout` seconds pass), and handle
        it."""
        if not self.workers:  # every item is pending, in flight or done: this cannot happen
            raise RuntimeError("tirxh -n: items are left but no worker is running")
        conns = {w.conn: w for w in self.workers}
        sentinels = {w.proc.sentinel: w for w in self.workers}
        for obj in multiprocessing.connection.wait([*conns, *sentinels], timeout):
            w = conns.get(obj) or sentinels.get(obj)
            if w not in self.workers:  # already handled in this round
                continue
            try:
                while w.conn.poll():
                    self.on_message(w, w.conn.recv())
            except (EOFError, OSError):
                pass
            if obj in sentinels or not w.proc.is_alive():
                w.proc.join(STOP_GRACE_S if obj in conns else None)
                if not w.proc.is_alive():
                    self.on_exit(w)


def run_in_workers(config, items: list, n: int, exitfirst: bool = False) \
        -> Iterator[ItemReport]:
    """Run `items` in `n` worker processes; yield their reports in collection order.

    With `exitfirst`, the reports stop at the first failed or errored item (it included), as a
    serial run's do. Closing the generator early, or an exception in the caller (Ctrl-C),
    stops every worker.
    """
    run = _Run(config, items, n, exitfirst)
    every = float(config.getoption("progress_every", 0) or 0)
    hard = True
    try:
        nxt = 0
        last = time.monotonic()  # the last report yielded or progress told
        while nxt < run.stop_at:
            while nxt < run.stop_at and nxt in run.done:
                yield run.done.pop(nxt)
                nxt += 1
                last = time.monotonic()
            if nxt >= run.stop_at:
                break
            if every > 0 and time.monotonic() - last >= every:
                config.pm.hook.tirxh_progress(config=config, **run.progress(nxt))
                last = time.monotonic()
            run.start_workers()
            run.dispatch()
            run.wait(max(every - (time.monotonic() - last), 0.0) if every > 0 else None)
        hard = False
    finally:
        for w in run.workers:
            w.stop(hard=hard)
