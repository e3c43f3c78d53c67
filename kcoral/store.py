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
CREATE INDEX IF NOT EXISTS jobs_client ON jobs(client, seq);
-- a retried Submit with the same key returns the same job: one row per (client, key)
CREATE UNIQUE INDEX IF NOT EXISTS jobs_idem_unique ON jobs(client, idem_key) WHERE idem_key != '';
-- who uploaded (or was given, as a job's artifact) each blob: clients see only their own
CREATE TABLE IF NOT EXISTS blob_owners (
    digest TEXT NOT NULL,
    owner TEXT NOT NULL,
    size INTEGER NOT NULL,
    PRIMARY KEY (digest, owner)
);
CREATE INDEX IF NOT EXISTS blob_owner ON blob_owners(owner);
"""


class DuplicateKey(Exception):
    """An idempotency key already names a job of this client (`job_id`, and whether the stored
    request is the same job: `same`)."""

    def __init__(self, job_id: str, same: bool):
        self.job_id, self.same = job_id, same
        super().__init__(job_id)


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

    shared = False  # one daemon's store (kcoral.pgstore.PgStore is shared by several)

    def add(self, job_id: str, client: str, name: str, target: str, job_json: str,
            idem_key: str = "", meta: "dict | None" = None) -> None:
        """Insert a queued job; `DuplicateKey` when (client, idem_key) already names one (the
        check and the insert are one statement, so concurrent retries cannot both insert).
        `meta` (what a shared queue's boards filter on) is not needed here."""
        with self._lock:
            try:
                self._db.execute(
                    "INSERT INTO jobs(job_id, client, name, target, state, job_json, idem_key, "
                    "submitted) VALUES (?,?,?,?,?,?,?,?)",
                    (job_id, client, name, target, "queued", job_json, idem_key, time.time()))
            except sqlite3.IntegrityError:
                r = self._db.execute("SELECT job_id, job_json FROM jobs WHERE client=? AND "
                                     "idem_key=?", (client, idem_key)).fetchone()
                if r is None:
                    raise
                raise DuplicateKey(r["job_id"], r["job_json"] == job_json) from None

    def find_idempotent(self, client: str, key: str) -> "tuple[str, str] | None":
        """``(job_id, job_json)`` of the job `client` submitted with `key`, if any."""
        if not key:
            return None
        with self._lock:
            r = self._db.execute("SELECT job_id, job_json FROM jobs WHERE client=? AND "
                                 "idem_key=?", (client, key)).fetchone()
        return (r["job_id"], r["job_json"]) if r else None

    # --- blob ownership -----------------------------------------------------------------------
    def own_blob(self, digest: str, owner: str, size: int) -> None:
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO blob_owners(digest, owner, size) "
                             "VALUES (?,?,?)", (digest, owner, int(size)))

    def owned(self, owner: str, digests) -> set:
        """The subset of `digests` that `owner` uploaded or was given."""
        digests = list(dict.fromkeys(digests))
        out = set()
        with self._lock:
            for i in range(0, len(digests), 500):
                part = digests[i:i + 500]
                rows = self._db.execute(
                    f"SELECT digest FROM blob_owners WHERE owner=? AND digest IN "
                    f"({','.join('?' * len(part))})", (owner, *part)).fetchall()
                out.update(r["digest"] for r in rows)
        return out

    def owned_bytes(self, owner: str) -> int:
        with self._lock:
            r = self._db.execute("SELECT COALESCE(SUM(size), 0) n FROM blob_owners WHERE "
                                 "owner=?", (owner,)).fetchone()
        return int(r["n"])

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
        """The newest jobs, at most `limit` (1..1000), of `client` and in `state` when given."""
        limit = min(max(int(limit), 1), 1000) if limit and limit > 0 else 50
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
        args.append(limit)
        with self._lock:
            return [dict(r) for r in self._db.execute(q, args).fetchall()]

    def total(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) n FROM jobs").fetchone()["n"])

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
