"""Persistent job history: every accepted job and its result, in SQLite (WAL) beside the daemon.

A job is written before Submit acknowledges it, and each state change is written before it is
announced, so after a kill -9 the daemon's restart (`recover()`) finds queued jobs to requeue and
running ones to mark ``interrupted``. Nothing here knows about gRPC.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time

from .job import STATES, TERMINAL

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT UNIQUE NOT NULL,
    client TEXT NOT NULL,
    name TEXT NOT NULL,
    target TEXT NOT NULL,
    state TEXT NOT NULL,
    board TEXT NOT NULL DEFAULT '',
    job_json TEXT NOT NULL,
    result_json TEXT NOT NULL DEFAULT '',
    idem_key TEXT NOT NULL DEFAULT '',
    submitted REAL NOT NULL,
    started REAL NOT NULL DEFAULT 0,
    finished REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
CREATE INDEX IF NOT EXISTS jobs_idem ON jobs(client, idem_key);
"""


class JobStore:
    """Thread-safe SQLite store (one connection guarded by a lock; WAL, synchronous=NORMAL
    is enough because WAL survives process death; FULL would only add power-loss safety)."""

    def __init__(self, path):
        self.path = str(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def add(self, job_id: str, client: str, name: str, target: str, job_json: str,
            idem_key: str = "") -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO jobs(job_id, client, name, target, state, job_json, idem_key, "
                "submitted) VALUES (?,?,?,?,?,?,?,?)",
                (job_id, client, name, target, "queued", job_json, idem_key, time.time()))

    def find_idempotent(self, client: str, key: str) -> "str | None":
        if not key:
            return None
        with self._lock:
            r = self._db.execute("SELECT job_id FROM jobs WHERE client=? AND idem_key=?",
                                 (client, key)).fetchone()
        return r["job_id"] if r else None

    def set_state(self, job_id: str, state: str, board: "str | None" = None,
                  result: "dict | None" = None) -> None:
        if state not in STATES:
            raise ValueError(f"unknown job state {state!r}")
        sets, args = ["state=?"], [state]
        if board is not None:
            sets.append("board=?")
            args.append(board)
        if state == "running":
            sets.append("started=?")
            args.append(time.time())
        if state in TERMINAL:
            sets.append("finished=?")
            args.append(time.time())
        if result is not None:
            sets.append("result_json=?")
            args.append(json.dumps(result, sort_keys=True))
        with self._lock:
            self._db.execute(f"UPDATE jobs SET {', '.join(sets)} WHERE job_id=?",
                             (*args, job_id))

    def get(self, job_id: str) -> "dict | None":
        with self._lock:
            r = self._db.execute("SELECT * FROM jobs WHERE job_id=?", (job_id,)).fetchone()
        return dict(r) if r else None

    def list(self, limit: int = 50, client: str = "", state: str = "") -> list:
        q, args = "SELECT * FROM jobs", []
        conds = []
        if client:
            conds.append("client=?")
            args.append(client)
        if state:
            conds.append("state=?")
            args.append(state)
        if conds:
            q += " WHERE " + " AND ".join(conds)
        q += " ORDER BY seq DESC LIMIT ?"
        args.append(limit if limit > 0 else 50)
        with self._lock:
            return [dict(r) for r in self._db.execute(q, args).fetchall()]

    def counts(self) -> dict:
        with self._lock:
            rows = self._db.execute("SELECT state, COUNT(*) n FROM jobs GROUP BY state").fetchall()
        return {r["state"]: r["n"] for r in rows}

    def recover(self) -> tuple:
        """After a restart: mark jobs that were running as interrupted; return
        ``(queued_rows_in_submission_order, interrupted_job_ids)``."""
        with self._lock:
            running = [r["job_id"] for r in self._db.execute(
                "SELECT job_id FROM jobs WHERE state IN ('running','loaded','correctness',"
                "'timing','tools')").fetchall()]
            now = time.time()
            for jid in running:
                res = {"status": "interrupted", "error": {
                    "type": "interrupted.daemon-restart",
                    "message": "the daemon stopped while this job ran; it was not re-run "
                               "because a partial run may have changed the board's state"}}
                self._db.execute("UPDATE jobs SET state='interrupted', finished=?, "
                                 "result_json=? WHERE job_id=?",
                                 (now, json.dumps(res), jid))
            queued = [dict(r) for r in self._db.execute(
                "SELECT * FROM jobs WHERE state='queued' ORDER BY seq").fetchall()]
        return queued, running
