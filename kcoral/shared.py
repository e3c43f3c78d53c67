"""The scheduler's shared-queue mode: several daemons, one job table (`kcoral.pgstore`).

With a shared store a daemon does not keep per-board queues in memory. A job it accepts goes into
the shared table as ``queued``; each of its idle boards claims the next job it can run from the
table (whoever accepted it), fetches the job's blobs from the database when they are not here,
and runs it as a local job. A `Poller` thread renews this daemon's lease, declares daemons whose
lease ran out dead (their running jobs are recorded interrupted, their queued ones are claimed by
whoever is alive), fails queued jobs past their queue budget, passes cancel requests to the jobs
this daemon runs, and publishes to this daemon's watchers what happens to the jobs it does not run
(queued, running on another daemon, finished). No gRPC here.
"""

from __future__ import annotations

import json
import logging
import threading
import time

from .errors import JobError
from .job import TERMINAL, Job

log = logging.getLogger("kcoral")

POLL_S = 0.25  # how often the poller looks at the shared table


def job_meta(job: Job, board) -> dict:
    """What a board's claim filters on (`kcoral.pgstore.PgStore.claim`): the job's tags and
    board, whether it needs a board that times (the board picked here times), its IR, sizes and
    queue budget."""
    return {"tags": list(job.tags), "want_board": job.board or "",
            "require_timing": bool(job.timing.enabled and board.spec.timing),
            "has_ir": bool(job.module.ir),
            "buffer_bytes": sum(b.nbytes for b in job.buffers),
            "work_flops": job.work.flops or 0, "queue_s": job.budgets.queue_s}


def claim_filter(board) -> dict:
    """A board's claim arguments from its spec (target, tags, what it requires and takes)."""
    props = board.spec.properties
    return {"remote": board.spec.type == "remote", "timing": bool(board.spec.timing),
            "requires_ir": "module.ir" in props.get("requires", ()),
            "max_bytes": props.get("max_buffer_bytes"), "max_flops": props.get("max_work_flops")}


class SharedQueue:
    """The shared-queue half of a `kcoral.scheduler.Scheduler` (which owns `records`, `cv`
    and publishing); `store` is a `kcoral.pgstore.PgStore`."""

    def __init__(self, sched, record_cls):
        self.s = sched
        self.store = sched.store
        self.record_cls = record_cls
        self.stop = threading.Event()
        self.thread: "threading.Thread | None" = None

    def start(self) -> None:
        self.store.register()
        self.thread = threading.Thread(target=self._poll_loop, daemon=True,
                                       name="kcoral-shared-poller")
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(5)
        try:
            self.store.retire()
        except Exception:  # a database already gone: our lease runs out by itself
            log.exception("could not retire from the shared store")

    # --- claiming -----------------------------------------------------------------------------
    def claim(self, board):
        """The next job for `board` from the shared table as a record (caller holds no lock),
        or None. Jobs submitted here keep their record (and its watchers)."""
        try:
            row = self.store.claim(board.name, board.spec.target, board.spec.tags,
                                   **claim_filter(board))
        except Exception:
            log.exception("board %s: claim from the shared store failed", board.name)
            return None
        if row is None:
            return None
        with self.s.cv:
            rec = self.s.records.get(row["job_id"])
        if rec is None:
            try:
                job = Job.from_json(row["job_json"])
            except JobError as e:  # stored by a daemon of another version
                self.store.set_state(row["job_id"], "failed", result={
                    "status": "failed", "error": {"type": "validation.job",
                                                  "message": f"not runnable here: {e}"}})
                return None
            rec = self.record_cls(row["job_id"], row["client"], job, board.name)
            rec.enqueued = time.monotonic() - max(0.0, row["started"] - row["submitted"])
            with self.s.cv:
                self.s.records[rec.job_id] = rec
        rec.board = board.name
        missing = self.store.fetch_blobs(rec.job.blobs())
        if missing:
            rec.missing_blobs = missing
        return rec

    # --- cancel and follow --------------------------------------------------------------------
    def cancel(self, job_id: str) -> tuple:
        """Cancel a job this daemon does not run: queued (anyone may), or running elsewhere
        (a request its daemon's poller acts on)."""
        if self.store.cancel_queued(job_id):
            with self.s.cv:
                rec = self.s.records.get(job_id)
                if rec is not None:
                    self.s._publish_terminal(rec, "cancelled", json.loads(
                        self.store.get(job_id)["result_json"]))
            return True, "cancelled"
        row = self.store.get(job_id)
        if row is None:
            raise KeyError(job_id)
        if row["state"] in TERMINAL:
            return False, row["state"]
        self.store.request_cancel(job_id)
        return True, "cancelling"

    def follow(self, row: dict):
        """A record that watches a live job of another daemon (the poller feeds it)."""
        job = Job.from_json(row["job_json"])
        rec = self.record_cls(row["job_id"], row["client"], job, row["board"] or None)
        self.s._publish(rec, row["state"], "followed from the shared store")
        self.s.records[rec.job_id] = rec
        return rec

    # --- the poller ---------------------------------------------------------------------------
    def _poll_loop(self) -> None:
        last_beat = 0.0
        while not self.stop.wait(POLL_S):
            try:
                if time.monotonic() - last_beat > self.store.lease_s / 4:
                    if not self.store.heartbeat():
                        log.error("this daemon was declared dead by another (its lease ran out):"
                                  " registering again")
                        self.store.register()
                    last_beat = time.monotonic()
                for job_id, daemon in self.store.sweep():
                    log.warning("job %s was running on daemon %s, whose lease ran out: recorded "
                                "interrupted", job_id, daemon)
                expired = self.store.expire_queued()
                if expired:
                    log.warning("%d queued job(s) waited past their queue budget",
                                len(expired))
                self.poll()
            except Exception:  # keep polling; the database may come back
                log.exception("shared store poll failed")

    def poll(self) -> None:
        """Publish what happened to the jobs this daemon watches but does not run, and pass
        cancel requests to the jobs it runs."""
        with self.s.cv:
            local = {b.current.job_id: b.current for b in self.s.boards.values() if b.current}
            watched = [r for r in self.s.records.values() if r.job_id not in local]
        for jid in self.store.cancel_requested(list(local)):
            local[jid].cancel.set()
        if not watched:
            return
        rows = self.store.states([r.job_id for r in watched])
        with self.s.cv:
            for rec in watched:
                row = rows.get(rec.job_id)
                if row is None or self.s.records.get(rec.job_id) is not rec or \
                        self.s._running(rec):
                    continue
                st = row["state"]
                if st in TERMINAL:
                    res = json.loads(row["result_json"]) if row["result_json"] else {
                        "status": st}
                    rec.board = row["board"] or rec.board
                    self.s._publish_terminal(rec, st, res)
                elif st == "queued":
                    last = rec.events[-1] if rec.events else None
                    if last is None or last["state"] != "queued" or \
                            last["queue_position"] != row["position"]:
                        self.s._publish(rec, "queued", f"position {row['position']} in the "
                                        f"shared queue", position=int(row["position"]))
                elif rec.state == "queued" or rec.board != row["board"]:
                    rec.board = row["board"]
                    self.s._publish(rec, "running", f"running on {row['board']} (daemon "
                                    f"{row['daemon']})")
