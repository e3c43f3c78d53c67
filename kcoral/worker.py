"""The per-board worker process, and the daemon-side handle that supervises it.

Each board has one worker (``python -m kcoral.worker``) that owns the device; the daemon talks to
it over pipes with JSON lines. A job that faults the device (a sticky CUDA error: illegal
address, trap), crashes the process or hangs past its execution budget takes down only this
worker: the handle reports a typed error (``runtime.*`` / ``timeout.exec``) and starts a fresh
worker before the board's next job.

Child protocol (one JSON object per line): daemon -> worker ``{"spec", "blob_root"}`` then
``{"op": "run", "job_id", "job", "workdir"}``; worker -> daemon ``{"event": "ready", "info"}``,
``{"event": "progress", "state", "message"}``, ``{"event": "result", "result", "fatal"}``.
The worker's own stdout is redirected to stderr so a library's print cannot corrupt the protocol.

Every file a job produces (tool reports, runjob outputs) is written under its ``workdir``, a
directory the daemon side creates for that job (``<state_dir>/jobs/<job_id>``) and removes once
the result is in; job names are strict identifiers (`kcoral.job`), so nothing escapes it.
"""

from __future__ import annotations

import functools
import json
import os
import pathlib
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from importlib import metadata

from . import __version__
from .blobs import BlobStore
from .boards import BoardSpec
from .errors import JobError, JobFailure
from .job import Job
from .measure import PROTOCOL, run_job
from .plugins import registries
from .tools import inside
from .watchdog import Watchdog

_ROOT = str(pathlib.Path(__file__).resolve().parents[1])
JOB_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
LIFELINE_ENV = "KCORAL_LIFELINE_FD"


# -------------------------------------------------------------------------------------------------
# child side
# -------------------------------------------------------------------------------------------------

def _watch_lifeline(fd: int) -> None:
    """Die with the daemon: `fd` is the read end of a pipe whose only write end the daemon
    holds, so a read returns EOF the moment the daemon exits -- kill -9 included -- even while a
    job hangs in a driver call. The worker then kills its whole process group (itself and any
    tool it started)."""
    def watch():
        try:
            while os.read(fd, 64):
                pass
        except OSError:
            pass
        os.killpg(os.getpgrp(), signal.SIGKILL)
    threading.Thread(target=watch, daemon=True, name="kcoral-lifeline").start()


def _plain(v):
    """`json.dumps` default: numpy scalars as Python numbers (a measurement may compute one)."""
    item = getattr(v, "item", None)
    if item is not None and getattr(v, "shape", None) == ():
        return item()
    raise TypeError(f"{type(v).__name__} is not JSON serializable")


def wire_line(obj) -> str:
    """One message for the daemon. A result that still cannot be encoded becomes a typed
    failure instead of an exception that kills the worker (2026-12-01 on the H200: a numpy
    int64 in the timing result crashed the worker on every timed job, reported only as
    `runtime.worker-crash`)."""
    try:
        return json.dumps(obj, default=_plain)
    except (TypeError, ValueError) as e:
        if obj.get("event") != "result":
            raise
        res = obj.get("result") or {}
        keep = {k: res[k] for k in ("job_id", "board", "board_type", "protocol") if k in res}
        return json.dumps({"event": "result", "fatal": bool(obj.get("fatal")), "result": dict(
            keep, status="failed", error={
                "type": "internal.unencodable-result",
                "message": f"the worker could not encode the job's result ({e}); this is a "
                           f"kcoral bug, please report it"})})


def _child_main() -> int:
    if os.environ.get(LIFELINE_ENV):
        _watch_lifeline(int(os.environ[LIFELINE_ENV]))
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints go to the log
    sys.stdout = sys.stderr
    lock = threading.Lock()  # the launch watchdog's thread also reports

    def send(obj):
        with lock:
            proto.write(wire_line(obj) + "\n")
            proto.flush()

    def hung(result):
        """The watchdog found a launch hung: report it, then die (with any tool we started);
        the daemon restarts the worker. The lock stays held, so nothing is sent after this."""
        lock.acquire()
        proto.write(json.dumps({"event": "result", "result": result, "fatal": True}) + "\n")
        proto.flush()
        os.killpg(os.getpgrp(), signal.SIGKILL)

    init = json.loads(sys.stdin.readline())
    spec = BoardSpec.from_json(init["spec"])
    blobs = BlobStore(init["blob_root"])
    regs = registries()
    try:
        dev = regs.board_types.get(spec.type).open_device(spec)
        info = dev.info()
    except Exception as e:
        send({"event": "ready", "ok": False, "error": f"{type(e).__name__}: {e}"})
        return 2
    send({"event": "ready", "ok": True, "info": info})
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("op") != "run":
            continue
        result, fatal = run_one(msg["job_id"], msg["job"], dev, blobs, regs, spec,
                                lambda st, m: send({"event": "progress", "state": st,
                                                    "message": m}),
                                pathlib.Path(msg["workdir"]), on_hang=hung)
        send({"event": "result", "result": result, "fatal": fatal})
        if fatal:
            return 3
    return 0


def run_one(job_id: str, doc: dict, dev, blobs, regs, spec, progress,
            workdir: pathlib.Path, on_hang=None) -> tuple:
    """Run one job on an open device; return ``(result, fatal)``. Files go under `workdir`.
    With `on_hang(result)`, the candidate's launches are guarded (`kcoral.watchdog`) on boards
    that launch on a device: a hung one is handed over as a ``timeout.launch`` result, which
    the caller reports before it kills the process. Used by the worker (agents run workers)."""
    base = {"job_id": job_id, "board": spec.name, "board_type": spec.type,
            "device": dev.info(), "protocol": PROTOCOL, "versions": versions()}
    wd = None
    try:
        job = Job.from_json(doc)
        if on_hang is not None and getattr(dev, "watchdog", False):
            exec_s = job.budgets.exec_s

            def expired(what, limit, elapsed):
                # a section's limit is capped at the execution budget; when that cap is what
                # ran out, the daemon's own exec timer expires at the same moment, and the
                # outcome must not depend on which of the two reports first: the budget that
                # bound is the one named (a loaded CI host saw timeout.launch here)
                if exec_s and limit >= exec_s:
                    err = {"type": "timeout.exec",
                           "message": f"{what} ran past the job's execution budget of "
                                      f"{exec_s:g} s; the worker was killed and restarted"}
                else:
                    err = {"type": "timeout.launch",
                           "message": f"{what} did not finish within {limit:.3g} s (the job's "
                                      f"budgets.launch_s or 50x its longest launch so far); "
                                      f"the kernel is taken for hung, the worker was killed "
                                      f"and restarted"}
                on_hang(dict(base, status="failed", error=err))
            wd = Watchdog(expired, job.budgets.launch_s, job.budgets.exec_s)
        if hasattr(dev, "begin_job"):
            dev.begin_job(job.doc)
        res = run_job(job, dev, blobs, regs.baselines, progress, wd)
        if job.tools:
            progress("tools", ", ".join(t.name for t in job.tools))
            res["tools"] = run_tools(job, regs.tools, spec, blobs, workdir)
        base.update(res)
        return base, False
    except JobError as e:  # the daemon validated it; a worker of another version may not agree
        base.update(status="failed", error={"type": "validation.job", "message": str(e)})
        return base, False
    except JobFailure as e:
        base.update(status="failed", error=e.to_json())
        for k in ("correctness", "guards"):  # what was checked before it failed
            if k in e.data:
                base[k] = e.data[k]
        return base, e.fatal
    except Exception as e:  # an internal error: report it, and do not trust the device
        base.update(status="failed", error={"type": "internal.worker",
                                            "message": f"{type(e).__name__}: {e}",
                                            "traceback": traceback.format_exc()[-4000:]})
        return base, True
    finally:
        if wd is not None:
            wd.close()


def run_tools(job: Job, tools, spec, blobs, workdir: pathlib.Path) -> dict:
    """Run the job's tools, each in ``workdir/<tool>``; store their artifacts as blobs."""
    out = {}
    job.blob_root = str(blobs.root)
    for t in job.tools:
        name = t.name
        if name not in tools:
            out[name] = {"status": "unavailable", "reason": f"no tool {name!r} installed on "
                         f"board {spec.name!r} (installed: {tools.names()})"}
            continue
        tool = tools.get(name)
        why = tool.available(spec)
        if why:
            out[name] = {"status": "unavailable", "reason": why}
            continue
        wd = pathlib.Path(workdir) / name  # tool names are strict (kcoral.schema.PLUGIN)
        wd.mkdir(parents=True, exist_ok=True)
        try:
            r = tool.run(job, wd, spec)
            d = r.to_json()
            d["artifacts"] = {k: blobs.put(inside(wd, p).read_bytes())
                              for k, p in r.artifacts.items()}
        except Exception as e:  # a tool plugin failed: typed in the result, the job stands
            out[name] = {"status": "error", "reason": f"{type(e).__name__}: {e}"}
            continue
        d["status"] = "ok"
        out[name] = d
    return out


@functools.lru_cache(maxsize=None)
def _versions() -> tuple:
    return tuple(sorted(_query_versions().items()))


def versions() -> dict:
    """Package versions that make two results comparable (cached per process)."""
    return dict(_versions())


def _query_versions() -> dict:
    v = {"python": sys.version.split()[0]}
    for dist in ("numpy", "cuda-bindings", "tirxh", "grpcio"):
        try:
            v[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    v["kcoral"] = __version__
    return v


# -------------------------------------------------------------------------------------------------
# daemon side
# -------------------------------------------------------------------------------------------------

class WorkerHandle:
    """Starts, feeds and restarts one board's worker process (no gRPC here)."""

    def __init__(self, spec, blob_root, log_dir, start_timeout: float = 120.0,
                 work_root=None):
        self.spec = spec
        self.blob_root = str(blob_root)
        self.log_dir = pathlib.Path(log_dir)
        self.work_root = pathlib.Path(work_root or self.log_dir.parent / "jobs")
        self.start_timeout = start_timeout
        self.proc: "subprocess.Popen | None" = None
        self.info: dict = {}
        self.restarts = 0
        self._q: "queue.Queue | None" = None
        self._lock = threading.Lock()
        self.closed = False

    def close(self) -> None:
        """Kill the worker for good (daemon shutdown): no restart after this."""
        self.closed = True
        self.kill()

    def start(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([_ROOT] + [p for p in
                                                       env.get("PYTHONPATH", "").split(os.pathsep)
                                                       if p])
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_dir / f"worker-{self.spec.name}.log", "ab")
        # the lifeline: the worker holds the read end, only this process the write end
        r, self._lifeline = os.pipe()
        env[LIFELINE_ENV] = str(r)
        try:
            # its own process group, so that killing it takes the tools it started too
            self.proc = subprocess.Popen([sys.executable, "-m", "kcoral.worker"],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=log, env=env, cwd=_ROOT, pass_fds=(r,),
                                         start_new_session=True)
        finally:
            os.close(r)
            log.close()
        self._q = queue.Queue()
        threading.Thread(target=self._reader, args=(self.proc, self._q), daemon=True,
                         name=f"kcoral-worker-{self.spec.name}").start()
        self._send({"spec": self.spec.to_json(), "blob_root": self.blob_root})
        try:
            msg = self._q.get(timeout=self.start_timeout)
        except queue.Empty:
            self.kill()
            raise RuntimeError(f"worker for board {self.spec.name!r} did not start within "
                               f"{self.start_timeout} s") from None
        if msg is None or not msg.get("ok"):
            self.kill()
            err = msg.get("error") if msg else "exited during start-up (see its log)"
            raise RuntimeError(f"worker for board {self.spec.name!r} could not open the "
                               f"device: {err}")
        self.info = msg["info"]

    @staticmethod
    def _reader(proc, q):
        for line in proc.stdout:
            try:
                q.put(json.loads(line))
            except ValueError:
                continue
        q.put(None)  # EOF: the process died or exited

    def _send(self, obj) -> None:
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the worker and its tools
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not wait long
                pass
            if getattr(self, "_lifeline", None) is not None:
                os.close(self._lifeline)
                self._lifeline = None
            for f in (self.proc.stdin, self.proc.stdout):
                try:
                    f.close()
                except Exception:
                    pass

    def restart(self) -> None:
        self.kill()
        self.restarts += 1
        self.start()

    def run(self, job_id: str, doc: dict, on_progress, exec_budget_s: float,
            cancelled: "threading.Event | None" = None) -> dict:
        """Run one job; always returns a result document (typed error on failure) and leaves a
        live worker behind (restarted when the job killed it)."""
        if not JOB_ID.fullmatch(job_id):  # it names the job's directory
            raise ValueError(f"job id {job_id!r} is not {JOB_ID.pattern}")
        workdir = self.work_root / job_id
        with self._lock:
            shutil.rmtree(workdir, ignore_errors=True)
            workdir.mkdir(parents=True)
            try:
                return self._run(job_id, doc, on_progress, exec_budget_s, cancelled, workdir)
            finally:
                shutil.rmtree(workdir, ignore_errors=True)

    def _run(self, job_id, doc, on_progress, exec_budget_s, cancelled, workdir) -> dict:
        msg = {"op": "run", "job_id": job_id, "job": doc, "workdir": str(workdir)}
        if not self.alive():
            self.restart()
        try:
            self._send(msg)
        except (BrokenPipeError, OSError):
            self.restart()
            self._send(msg)
        start = time.monotonic()
        deadline = start + exec_budget_s
        timeline = Timeline(start)
        while True:
            left = deadline - time.monotonic()
            if cancelled is not None and cancelled.is_set():
                return timeline.onto(self._failed(
                    job_id, "cancelled.by-client",
                    "cancelled while running; the worker was restarted", "cancelled"))
            if left <= 0:
                return timeline.onto(self._failed(
                    job_id, "timeout.exec",
                    f"the job ran past its execution budget of {exec_budget_s:g} s "
                    f"({timeline.last()}); the worker was killed and restarted"))
            try:
                msg = self._q.get(timeout=min(left, 0.2))
            except queue.Empty:
                continue
            if msg is None:
                code = self.proc.wait()
                return timeline.onto(self._failed(
                    job_id, "runtime.worker-crash",
                    f"the worker process died (exit status {code}) while running the job "
                    f"({timeline.last()}); it was restarted"))
            if msg["event"] == "progress":
                timeline.add(msg["state"], msg.get("message", ""))
                on_progress(msg["state"], msg.get("message", ""))
            elif msg["event"] == "result":
                res = msg["result"]
                if msg.get("fatal"):
                    self.proc.wait(timeout=30)
                    self._restart_quietly(res)
                    err = res.get("error") if isinstance(res, dict) else None
                    if isinstance(err, dict) and err.get("type") == "timeout.exec":
                        # the worker's watchdog ran out at the budget: say where, as the
                        # daemon's own exec timer does
                        err["message"] = f"{err.get('message', '')} ({timeline.last()})"
                return timeline.onto(res) if isinstance(res, dict) else res

    def _failed(self, job_id, type_, message, status="failed") -> dict:
        res = {"job_id": job_id, "board": self.spec.name, "board_type": self.spec.type,
               "device": self.info, "status": status,
               "error": {"type": type_, "message": message}}
        self._restart_quietly(res)
        return res

    def _restart_quietly(self, res: dict) -> None:
        if self.closed:
            res["worker_restarted"] = False
            return
        try:
            self.restart()
            res["worker_restarted"] = True
        except Exception as e:
            res["worker_restarted"] = False
            res["worker_error"] = str(e)


class Timeline:
    """When each of a job's progress events came, seconds from the start of its run: kept in
    the result (``run_s``, ``timeline``) so a slow or killed job says where its time went (a
    timeout names the last phase reached). Of the timing loop's reports (one per batch of
    samples) only the latest of a run of them is kept, and at most MAX events."""

    MAX = 32

    def __init__(self, start: float):
        self.start = start
        self.events: list = []

    def add(self, state: str, message: str) -> None:
        event = [round(time.monotonic() - self.start, 3), str(state)[:40], str(message)[:200]]
        if self.events and " samples, " in event[2] and " samples, " in self.events[-1][2]:
            self.events[-1] = event
        elif len(self.events) < self.MAX:
            self.events.append(event)

    def last(self) -> str:
        if not self.events:
            return "no progress reported"
        t, state, message = self.events[-1]
        return f"its last progress, at +{t:.1f} s: {state}" + (f": {message}" if message else "")

    def onto(self, res: dict) -> dict:
        res.setdefault("run_s", round(time.monotonic() - self.start, 3))
        res.setdefault("timeline", list(self.events))
        return res


if __name__ == "__main__":
    sys.exit(_child_main())
