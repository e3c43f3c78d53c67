"""Boards, per-board queues and fair scheduling (no gRPC here).

Each board runs one job at a time on its own thread, which drives the board's executor (a
`kcoral.worker.WorkerHandle` for local boards, a `kcoral.boards.remote.RemoteLink` for agents).
A board's queue is round-robin across clients: the next job comes from the client after the one
served last, so one client's burst of 100 jobs does not starve another's single job. Waiting in
the queue (``budgets.queue_s``) and executing (``budgets.exec_s``) have separate budgets.

Every state change is written to the `JobStore` before it is published to watchers, so what a
client saw is never newer than what a restart will find. With a shared store (PostgreSQL,
`kcoral.pgstore`) there are no queues in memory: boards claim jobs from the table that several
daemons share (`kcoral.shared`).
"""

from __future__ import annotations

import collections
import json
import logging
import queue
import threading
import time
import uuid

from .errors import JobError, Refusal
from .job import TERMINAL, UNCHECKED, Job, check_module
from .shared import POLL_S, SharedQueue, job_meta
from .store import DuplicateKey

log = logging.getLogger("kcoral")

HEALTH_MARGIN_S = 15.0    # past a job's exec budget: time to kill and restart a worker
NETWORK_MARGIN_S = 30.0   # and for a remote board, the round trip to its agent


class JobRecord:
    """In-memory state of a live job: its event log and a condition for watchers."""

    def __init__(self, job_id, client, job: Job, board=None):
        self.job_id, self.client, self.job = job_id, client, job
        self.board = board
        self.state = "queued"
        self.enqueued = time.monotonic()
        self.events: list = []
        self.result: "dict | None" = None
        self.cancel = threading.Event()
        self.listeners: list = []  # callables told of each new event (the async servicer)
        self.missing_blobs: list = []  # shared store: blobs no daemon could provide


class Board:
    """One device: a spec, an executor, a fair queue, and its state for ``kcoral boards``."""

    def __init__(self, spec, executor):
        self.spec = spec
        self.executor = executor
        self.state = "idle" if not spec.unavailable else "unavailable"
        self.current: "JobRecord | None" = None
        self.queues: "collections.OrderedDict[str, collections.deque]" = \
            collections.OrderedDict()
        self.thread: "threading.Thread | None" = None
        self.jobs_run = 0
        self.busy_since = 0.0  # monotonic start of the current job (board health)
        self.owner = ""        # a remote board: the identity of the agent that registered it

    @property
    def name(self):
        return self.spec.name

    def queue_length(self) -> int:
        return sum(len(q) for q in self.queues.values())

    def push(self, rec: JobRecord) -> None:
        self.queues.setdefault(rec.client, collections.deque()).append(rec)

    def pop_fair(self) -> "JobRecord | None":
        """Next job, round-robin across clients (the served client moves to the back)."""
        while self.queues:
            client, q = next(iter(self.queues.items()))
            self.queues.move_to_end(client)
            if q:
                rec = q.popleft()
                if not q:
                    del self.queues[client]
                return rec
            del self.queues[client]
        return None

    def order(self) -> list:
        """The queue in the order `pop_fair` would serve it (for queue positions)."""
        qs = [list(q) for q in self.queues.values()]
        out = []
        for i in range(max((len(q) for q in qs), default=0)):
            out.extend(q[i] for q in qs if i < len(q))
        return out

    def remove(self, rec: JobRecord) -> bool:
        q = self.queues.get(rec.client)
        if q and rec in q:
            q.remove(rec)
            if not q:
                del self.queues[rec.client]
            return True
        return False


class Scheduler:
    """Accepts jobs, assigns them to boards, runs them, records and publishes their states."""

    def __init__(self, store, blobs, boards=(), version_info: "dict | None" = None,
                 missing_types: "dict | None" = None, registries=None, on_finish=None):
        self.store = store
        self.on_finish = on_finish  # (record, result) after a job's terminal state is stored
        # the daemon's plugins: a job naming a baseline or tool not installed here is refused
        self.registries = registries
        # board types the configuration names but no plugin provides: type -> where it comes from
        self.missing_types = dict(missing_types or {})
        self.blobs = blobs
        self.boards: dict[str, Board] = {}
        self.records: dict[str, JobRecord] = {}  # live jobs only (finished ones: the store)
        self.finished_total = 0
        self.cv = threading.Condition()
        self.accepting = True
        self.stopping = False
        self.started = time.time()
        self.version_info = version_info or {}
        # several daemons, one job table: boards claim from it (None: queues in memory)
        self.shared = SharedQueue(self, JobRecord) if getattr(store, "shared", False) else None
        if self.shared:
            self.shared.start()
        for b in boards:
            self.add_board(b)

    # --- boards -------------------------------------------------------------------------------
    def add_board(self, board: Board) -> None:
        with self.cv:
            if board.name in self.boards and self.boards[board.name].state != "offline":
                raise ValueError(f"board {board.name!r} already exists")
            old = self.boards.get(board.name)
            if old is not None:  # a reconnecting agent takes over its queue
                board.queues = old.queues
            self.boards[board.name] = board
        board.thread = threading.Thread(target=self._board_loop, args=(board,), daemon=True,
                                        name=f"kcoral-board-{board.name}")
        board.thread.start()
        log.info("board %s (%s, %s) online%s", board.name, board.spec.type, board.spec.target,
                 f": unavailable: {board.spec.unavailable}" if board.spec.unavailable else "")

    def set_offline(self, name: str, reason: str) -> None:
        with self.cv:
            b = self.boards.get(name)
            if b is not None:
                b.state = "offline"
                b.spec.unavailable = reason
                self.cv.notify_all()

    def pick_board(self, job: Job) -> Board:
        """The board for `job`, or `JobError` (refusal ``unavailable.board``) naming why none
        here fits."""
        target, tags, want = job.target, set(job.tags), job.board
        # a remote board (an agent) runs only jobs that ask for it by name or by its tags: a
        # board someone registered never receives other clients' ordinary jobs
        cands = [b for b in self.boards.values()
                 if b.spec.target == target and tags <= set(b.spec.tags)
                 and (not want or b.name == want)
                 and (b.spec.type != "remote" or want == b.name or tags)]
        if not cands:
            known = sorted({b.spec.target for b in self.boards.values()})
            missing = "".join(f"; board type {t!r} is configured but not installed: it comes "
                              f"from {where}" for t, where in sorted(self.missing_types.items()))
            raise JobError([("target" if not want else "board",
                             f"no board for target {target!r}" + (f" with tags {sorted(tags)}"
                                                                  if tags else "")
                             + (f" named {want!r}" if want else "")
                             + f"; boards here serve {known}" + missing)], Refusal.NO_BOARD)
        usable = [b for b in cands if not b.spec.unavailable and b.state != "offline"]
        if not usable:
            raise JobError([("target", "; ".join(f"board {b.name!r} is unavailable: "
                                                 f"{b.spec.unavailable}" for b in cands))],
                           Refusal.NO_BOARD)
        # a board may need job fields others do without (the sim board runs ``module.ir``) or
        # take only jobs small enough for it (numsim's size caps)
        unfit = {b.name: _unfit(job, b.spec) for b in usable}
        if all(unfit.values()):
            raise JobError([(unfit[b.name][0], f"board {b.name!r} ({b.spec.type}) is "
                             f"unavailable for this job: {unfit[b.name][1]}") for b in usable],
                           Refusal.NO_BOARD)
        usable = [b for b in usable if not unfit[b.name]]
        if job.timing.enabled and any(b.spec.timing for b in usable):
            # a timing request goes to a board that times; only when none here does it run
            # on a correctness-only (sim) board, whose result says the timing was skipped
            usable = [b for b in usable if b.spec.timing]
        return min(usable, key=lambda b: (b.queue_length() + (b.current is not None),
                                          b.name))

    def check_plugins(self, job: Job, board: Board) -> None:
        """The baselines and tools `job` names exist where it will run: a remote board's own
        (announced in its properties), else this daemon's (`JobError` otherwise)."""
        props = board.spec.properties
        timed = job.timing.enabled and board.spec.timing
        if board.spec.type == "remote" and "baselines" in props:
            tools = self.registries.tools if self.registries is not None else {}
            own = {n: tools.get(n) for n in props.get("tools", ()) if n in tools}
            job.validate_plugins(set(props["baselines"]),
                                 _Announced(props.get("tools", ()), own), timed)
        elif self.registries is not None:
            job.validate_plugins(self.registries.baselines, self.registries.tools, timed)

    # --- submission ---------------------------------------------------------------------------
    def submit(self, job: Job, client: str, idem_key: str = "") -> str:
        """Validate against a board, check blobs, persist, enqueue; return the job id. A
        retried submission (same client and `idem_key`, same job) returns the first one's id;
        the same key for a different job is refused (`JobError`, ``idempotency-conflict``)."""
        if not self.accepting:
            raise RuntimeError("the daemon is shutting down and accepts no new jobs")
        text = job.to_json()
        old = self.store.find_idempotent(client, idem_key)
        if old:
            return self._same_job(old[0], old[1] == text, idem_key)
        with self.cv:
            board = self.pick_board(job)
        job.check_limits(board.spec.limits)
        self.check_plugins(job, board)
        missing = self.blobs.missing(job.blobs())
        if missing:
            raise JobError([("blobs", f"missing blob {m} (upload it first)") for m in missing])
        check_module(job.module.format, self.blobs.get(job.module.blob), job.entries())
        job_id = uuid.uuid4().hex[:16]
        rec = JobRecord(job_id, client, job, board.name)
        try:
            self.store.add(job_id, client, job.display_name, job.target, text, idem_key,
                           meta=job_meta(job, board))
        except DuplicateKey as e:  # a concurrent retry won the race: the same job, once
            return self._same_job(e.job_id, e.same, idem_key)
        if self.shared:  # in the shared queue: whichever daemon's board fits claims it
            rec.board = None
            with self.cv:
                self.records[job_id] = rec
                self._publish(rec, "queued", "queued in the shared queue")
                self.cv.notify_all()
            log.info("accepted job %s (%s) from %s into the shared queue", job_id,
                     job.display_name, client)
            return job_id
        self.store.set_state(job_id, "queued", board=board.name)
        with self.cv:
            self.records[job_id] = rec
            board.push(rec)
            pos = board.order().index(rec) + (board.current is not None)
            self._publish(rec, "queued", f"queued on {board.name}", position=pos)
            self._announce_positions(board)
            self.cv.notify_all()
        log.info("accepted job %s (%s) from %s for %s", job_id, job.display_name, client,
                 board.name)
        return job_id

    @staticmethod
    def _same_job(job_id: str, same: bool, key: str) -> str:
        if not same:
            raise JobError([("idempotency_key", f"{key!r} already names job {job_id}, a "
                                                f"different job; use a new key")],
                           Refusal.IDEMPOTENCY_CONFLICT)
        return job_id

    def requeue(self, row: dict) -> None:
        """After a restart: put a stored queued job back (its board may have changed)."""
        try:
            job = Job.from_json(row["job_json"])
            with self.cv:
                board = self.pick_board(job)
        except JobError as e:
            res = {"status": "failed", "error": {"type": "unavailable.board",
                                                 "message": f"after restart: {e}"}}
            self.store.set_state(row["job_id"], "failed", result=res)
            return
        rec = JobRecord(row["job_id"], row["client"], job, board.name)
        self.store.set_state(rec.job_id, "queued", board=board.name)
        with self.cv:
            self.records[rec.job_id] = rec
            board.push(rec)
            pos = board.order().index(rec) + (board.current is not None)
            self._publish(rec, "queued", f"re-queued on {board.name} after a daemon restart",
                          position=pos)
            self.cv.notify_all()

    def _publish(self, rec: JobRecord, state: str, message: str = "", result=None,
                 position: int = 0) -> None:
        """Append an event (caller holds `cv`)."""
        rec.state = state
        ev = {"job_id": rec.job_id, "state": state, "board": rec.board or "",
              "message": message, "result": result, "queue_position": position,
              "time": time.time(), "provenance": (result or {}).get("provenance")}
        rec.events.append(ev)
        for fn in list(rec.listeners):
            fn(ev)
        self.cv.notify_all()

    def _announce_positions(self, board: Board) -> None:
        busy = board.current is not None
        for i, r in enumerate(board.order()):
            pos = i + busy
            last = r.events[-1] if r.events else None
            if last is None or last["state"] != "queued" or last["queue_position"] != pos:
                self._publish(r, "queued", f"position {pos} on {board.name}", position=pos)

    # --- running ------------------------------------------------------------------------------
    def _next_local(self, board: Board) -> "JobRecord | None":
        """The next job from `board`'s own queue, now its current one (None: stop)."""
        while True:
            with self.cv:
                while not self.stopping and (board.state == "offline" or
                                             not board.queue_length()):
                    self.cv.wait(0.5)
                    if board.state == "offline":
                        if self.boards.get(board.name) is not board:
                            return None  # replaced by a reconnected agent, which took the queue
                        self._expire(board)  # jobs waiting for an agent that does not return
                if self.stopping:
                    return None
                rec = board.pop_fair()
                if rec is None:
                    continue
                waited = time.monotonic() - rec.enqueued
                qbudget = rec.job.budgets.queue_s
                if waited > qbudget:
                    res = {"status": "failed", "job_id": rec.job_id, "board": board.name,
                           "error": {"type": "timeout.queue",
                                     "message": f"waited {waited:.1f} s in the queue of "
                                                f"{board.name}, past its queue budget of "
                                                f"{qbudget:g} s; it was not run"}}
                    self._finish(rec, "failed", res)
                    continue
                self._start(board, rec)
                return rec

    def _next_shared(self, board: Board) -> "JobRecord | None":
        """The next job `board` claims from the shared table (None: stop)."""
        while True:
            with self.cv:
                if self.stopping or self.boards.get(board.name) is not board:
                    return None
                idle = board.state == "offline" or bool(board.spec.unavailable)
            rec = None if idle else self.shared.claim(board)
            with self.cv:
                if rec is not None:
                    if self.stopping:  # claimed while stopping: back to the queue for others
                        self.store.release(rec.job_id)
                        return None
                    self._start(board, rec)
                    return rec
                self.cv.wait(POLL_S)  # a submit here wakes it at once

    def _start(self, board: Board, rec: JobRecord) -> None:
        """`rec` becomes `board`'s current job (caller holds `cv`)."""
        board.current = rec
        board.state = "busy"
        board.busy_since = time.monotonic()
        self._announce_positions(board)

    def _board_loop(self, board: Board) -> None:
        while True:
            rec = self._next_shared(board) if self.shared else self._next_local(board)
            if rec is None:
                return
            waited = time.monotonic() - rec.enqueued
            self.store.set_state(rec.job_id, "running", board=board.name)
            with self.cv:
                self._publish(rec, "running", f"running on {board.name}")
            log.info("running job %s (%s, client %s) on %s after %.3f s in queue", rec.job_id,
                     rec.job.display_name, rec.client, board.name, waited)

            def progress(state, message, rec=rec):
                with self.cv:
                    self._publish(rec, state, message)

            try:
                if rec.missing_blobs:
                    raise RuntimeError(f"blobs {rec.missing_blobs} are neither here nor in the "
                                       f"shared store")
                res = board.executor.run(rec.job_id, rec.job.doc, progress,
                                         rec.job.budgets.exec_s, rec.cancel)
            except Exception as e:  # the executor itself broke (e.g. a worker cannot start)
                log.exception("board %s failed to run job %s", board.name, rec.job_id)
                res = {"status": "failed", "job_id": rec.job_id, "board": board.name,
                       "error": {"type": "internal.board", "message": f"{type(e).__name__}: {e}"}}
            res = dict(res) if isinstance(res, dict) else {"status": "failed", "error": {
                "type": "internal.board", "message": "the board returned no result document"}}
            # provenance is the daemon's word, whatever a (remote) board wrote into its result
            res["board"] = board.name
            res["provenance"] = self.provenance(board)
            if res.get("error") is not None and not isinstance(res["error"], dict):
                res["error"] = {"type": "internal.board", "message": str(res["error"])[:2000]}
            res.setdefault("queue_wait_s", waited)
            res.setdefault("daemon", self.version_info)
            state = {"ok": "done", "cancelled": "cancelled"}.get(res.get("status"), "failed")
            if self.stopping and res.get("error", {}).get("type", "").startswith(
                    ("runtime.worker-crash", "interrupted")):
                state = "interrupted"
                res["status"] = "interrupted"
            with self.cv:
                board.current = None
                board.jobs_run += 1
                if board.state == "busy":
                    board.state = "idle"
                self._finish(rec, state, res)
                self._announce_positions(board)
            log.info("job %s on %s: %s%s", rec.job_id, board.name, state,
                     f" ({res['error']['type']})" if res.get("error") else "")

    def _expire(self, board: Board) -> None:
        """Fail the queued jobs of `board` whose queue budget has run out (caller holds `cv`)."""
        now = time.monotonic()
        for rec in board.order():
            waited = now - rec.enqueued
            if waited > rec.job.budgets.queue_s:
                board.remove(rec)
                self._finish(rec, "failed", {
                    "status": "failed", "job_id": rec.job_id, "board": board.name,
                    "error": {"type": "timeout.queue",
                              "message": f"waited {waited:.1f} s for board {board.name!r} "
                                         f"({board.state}: {board.spec.unavailable or '-'}), "
                                         f"past its queue budget; it was not run"}})

    def _finish(self, rec, state, res) -> None:
        """Persist then publish a terminal state (caller holds `cv`); the first one wins (a job
        interrupted at shutdown stays interrupted when its killed worker reports back). The
        record then leaves memory: a finished job lives in the store only."""
        if rec.state in TERMINAL:
            return
        if self.store.set_state(rec.job_id, state, result=res) is False:
            # a shared store kept another verdict (this daemon was declared dead meanwhile)
            row = self.store.get(rec.job_id)
            log.warning("job %s: the shared store kept %s, not %s", rec.job_id, row["state"],
                        state)
            state = row["state"]
            res = json.loads(row["result_json"]) if row["result_json"] else res
        self._publish_terminal(rec, state, res)

    def _publish_terminal(self, rec, state, res) -> None:
        """Publish a stored terminal state and let the record go (caller holds `cv`)."""
        if rec.state in TERMINAL:
            return
        rec.result = res
        if self.on_finish is not None:
            self.on_finish(rec, res)
        msg = res.get("error", {}).get("message", "") if res.get("error") else ""
        # out of memory before the event reaches a listener: a client that has its result
        # finds the daemon's bookkeeping already done (the test that counts records raced it)
        self.records.pop(rec.job_id, None)
        self.finished_total += 1
        self._publish(rec, state, msg, result=res)

    def provenance(self, board: Board) -> dict:
        """Where a result comes from: a local board, or a remote one and the agent identity
        that registered it (clients read this before trusting a verdict)."""
        if board.spec.type == "remote":
            return {"kind": "remote", "board": board.name, "agent": board.owner or "?",
                    "agent_board_type": board.spec.properties.get("agent_board_type", "")}
        return {"kind": "local", "board": board.name, "board_type": board.spec.type}

    # --- queries and control ------------------------------------------------------------------
    def cancel(self, job_id: str) -> tuple:
        if self.shared:
            with self.cv:
                rec = self.records.get(job_id)
                if rec is not None and self._running(rec):
                    rec.cancel.set()
                    return True, "cancelling"
            return self.shared.cancel(job_id)
        with self.cv:
            rec = self.records.get(job_id)
            if rec is None:
                row = self.store.get(job_id)
                if row is None:
                    raise KeyError(job_id)
                return False, row["state"]
            if rec.state in TERMINAL:
                return False, rec.state
            board = self.boards.get(rec.board)
            if board is not None and board.remove(rec):
                self._finish(rec, "cancelled", {"status": "cancelled", "job_id": job_id,
                                                "error": {"type": "cancelled.by-client",
                                                          "message": "cancelled while queued"}})
                self._announce_positions(board)
                return True, "cancelled"
            rec.cancel.set()
            return True, "cancelling"

    def follow(self, job_id: str, listener) -> tuple:
        """``(events so far, unsubscribe)``: `listener(event)` is then called for each new
        event of the job, under the scheduler's lock (keep it cheap: hand the event over). A
        finished job gives its final state from the store and no subscription; KeyError when
        there is no such job."""
        with self.cv:
            rec = self.records.get(job_id)
            if rec is not None:
                rec.listeners.append(listener)

                def unsubscribe():
                    with self.cv:
                        if listener in rec.listeners:
                            rec.listeners.remove(listener)
                return list(rec.events), unsubscribe
        row = self.store.get(job_id)  # finished (its record left memory after the store)
        if row is None:
            raise KeyError(job_id)
        if self.shared and row["state"] not in TERMINAL:  # live, on another daemon's boards
            with self.cv:
                rec = self.records.get(job_id) or self.shared.follow(row)
            return self.follow(job_id, listener)
        return [{"job_id": job_id, "state": row["state"], "board": row["board"], "message": "",
                 "queue_position": 0, "time": row["finished"],
                 "result": json.loads(row["result_json"]) if row["result_json"] else None,
                 "provenance": (json.loads(row["result_json"]) if row["result_json"]
                                else {}).get("provenance")}], lambda: None

    def watch(self, job_id: str, timeout: "float | None" = None):
        """Yield the job's events from the first until a terminal one (blocking; for tests and
        tools in-process; the servicer uses `follow`)."""
        q: "queue.Queue" = queue.Queue()
        events, unsubscribe = self.follow(job_id, q.put)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            for ev in events:
                yield ev
                if ev["state"] in TERMINAL:
                    return
            while True:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return
                try:
                    ev = q.get(timeout=left)
                except queue.Empty:
                    return
                yield ev
                if ev["state"] in TERMINAL:
                    return
        finally:
            unsubscribe()

    def job_row(self, job_id: str, who) -> "dict | None":
        """The stored job if `who` (an `kcoral.identity.Identity`) may see it: its own, or
        any for an operator; None otherwise (a client cannot tell another's job exists)."""
        row = self.store.get(job_id)
        if row is None or (not who.operator and row["client"] != who.name):
            return None
        return row

    def board_health(self) -> dict:
        """Board name -> None when it serves, else why not: offline, unavailable, or busy with
        one job past that job's execution budget (plus a margin for killing and restarting
        its worker) -- a board that is stuck."""
        now = time.monotonic()
        out = {}
        with self.cv:
            for b in self.boards.values():
                why = None
                if b.state == "offline" or b.spec.unavailable:
                    why = b.spec.unavailable or b.state
                elif b.current is not None:
                    budget = b.current.job.budgets.exec_s + HEALTH_MARGIN_S
                    if b.spec.type == "remote":
                        budget += NETWORK_MARGIN_S
                    if now - b.busy_since > budget:
                        why = (f"stuck: job {b.current.job_id} has run {now - b.busy_since:.0f} "
                               f"s, past its budget of {b.current.job.budgets.exec_s:g} s")
                out[b.name] = why
        return out

    def _running(self, rec) -> bool:
        b = self.boards.get(rec.board)
        return b is not None and b.current is rec

    def board_rows(self) -> list:
        with self.cv:
            return [{"name": b.name, "type": b.spec.type, "target": b.spec.target,
                     "tags": list(b.spec.tags), "state": b.state,
                     "queue_length": b.queue_length(),
                     "current_job": b.current.job_id if b.current else "",
                     "properties": dict(b.spec.properties, jobs_run=b.jobs_run,
                                        worker_restarts=getattr(b.executor, "restarts", 0),
                                        worker_pid=getattr(getattr(b.executor, "proc", None),
                                                           "pid", None)),
                     "unavailable": b.spec.unavailable} for b in self.boards.values()]

    def status(self) -> dict:
        with self.cv:
            queued = sum(b.queue_length() for b in self.boards.values())
            running = sum(b.current is not None for b in self.boards.values())
        if self.shared:
            queued = self.store.count_queued()  # the shared queue, every daemon's
        return {"uptime_s": time.time() - self.started, "queued": queued, "running": running,
                "jobs_total": self.store.total()}

    def shutdown(self, grace_s: float = 10.0) -> None:
        """Stop accepting; let running jobs finish within `grace_s`; then kill the workers
        (jobs still running are recorded as interrupted); queued jobs stay queued on disk."""
        self.accepting = False
        deadline = time.monotonic() + grace_s
        with self.cv:
            self.stopping = True  # board loops take no new job
            self.cv.notify_all()
        while time.monotonic() < deadline:
            with self.cv:
                if not any(b.current for b in self.boards.values()):
                    break
            time.sleep(0.05)
        with self.cv:
            running = [(b, b.current) for b in self.boards.values() if b.current]
        for b, rec in running:
            res = {"status": "interrupted", "job_id": rec.job_id, "board": b.name,
                   "error": {"type": "interrupted.shutdown",
                             "message": f"the daemon shut down; the job ran past the "
                                        f"{grace_s:g} s grace period"}}
            with self.cv:
                self._finish(rec, "interrupted", res)
        for b in self.boards.values():
            close = getattr(b.executor, "close", None)
            if close:
                close()
        if self.shared:
            self.shared.close()


class _Announced:
    """A remote board's tools: their names, and this daemon's option models where it has the
    same tool installed (the rest are checked where they run)."""

    def __init__(self, names, models: dict):
        self._names, self._models = sorted(names), models

    def names(self) -> list:
        return self._names

    def __contains__(self, name) -> bool:
        return name in self._names

    def get(self, name):
        return self._models.get(name) or _NoModel


class _NoModel:
    options = UNCHECKED  # a tool this daemon lacks: its options are checked where it runs


def _unfit(job: Job, spec) -> "tuple[str, str] | None":
    """``(field, why)`` when the board's properties rule the job out, else None: a field named in
    ``requires`` is empty (``module.ir`` for the sim board), or the buffers / declared FLOPs
    exceed ``max_buffer_bytes`` / ``max_work_flops`` (what the sim board can simulate in time)."""
    props = spec.properties
    doc = job.doc
    for path in props.get("requires", ()):
        v = doc
        for key in path.split("."):
            v = v.get(key) if isinstance(v, dict) else None
        if not v:
            if path != "module.ir":
                return path, f"{path} is missing"
            why = job.module.ir_error
            return path, ("module.ir is missing; this board runs the kernel's IR "
                          "(CompiledKernel.ir_json(), uploaded as a blob)"
                          + (f"; the client could not serialize it: {why}" if why else ""))
    cap = props.get("max_buffer_bytes")
    total = sum(b.nbytes for b in job.buffers)
    if cap and total > cap:
        return "buffers", (f"{total} bytes of buffers exceed the {int(cap)} this board "
                           f"takes (max_buffer_bytes)")
    cap = props.get("max_work_flops")
    flops = job.work.flops
    if cap and flops is not None and flops > cap:
        return "work.flops", (f"{flops:.3g} declared FLOPs exceed the {cap:.3g} this board takes "
                              f"(max_work_flops)")
    return None
