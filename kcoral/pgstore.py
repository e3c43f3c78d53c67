"""The job store on PostgreSQL: several daemons share one job table and one queue (issue 17).

SQLite (`kcoral.store.JobStore`) stays the default for one daemon. With ``[store] kind =
"postgres"`` every daemon that names the same database:

* writes the jobs it accepts into one table (``kcoral_jobs``) as ``queued``;
* lets each of its idle boards *claim* the next queued job it can run, in one statement
  (``SELECT ... FOR UPDATE SKIP LOCKED`` inside an ``UPDATE``): two daemons never claim the same
  job, and neither waits for the other's locks. Across clients the claim is round-robin (the
  client served longest ago first, ``kcoral_client_turns``), as a board's own queue is;
* holds a lease (``kcoral_daemons.lease_until``) that it renews every ``lease_s / 4``. When a
  daemon dies (kill -9, a lost host), any live one finds its lease expired, marks it dead and
  records the jobs it was running ``interrupted`` (``interrupted.daemon-lost``: not re-run, a
  partial run may have changed its board); the jobs it had accepted but not started are in the
  shared queue already, and live daemons run them;
* shares its blobs through the database (``kcoral_blob_chunks``, 4 MiB rows), so a daemon that
  claims a job submitted to another fetches the module and inputs it lacks.

All times are the database's clock (``clock_timestamp()``), so the hosts' clocks need not agree.
A terminal state is written only by the daemon that holds the job (or, for a queued job, by
anyone) and only once: a daemon that was declared dead and comes back cannot overwrite the
``interrupted`` record. psycopg 3 is an optional dependency (``pip install tirxh[postgres]``).
"""

from __future__ import annotations

import json
import threading

from .job import STATES, TERMINAL
from .store import DuplicateKey

_NOW = "EXTRACT(EPOCH FROM clock_timestamp())"
_RUNNING = ("running", "loaded", "correctness", "timing", "tools")
CHUNK = 4 << 20

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kcoral_jobs (
    seq BIGSERIAL PRIMARY KEY,
    job_id TEXT UNIQUE NOT NULL,
    client TEXT NOT NULL,
    name TEXT NOT NULL,
    target TEXT NOT NULL,
    state TEXT NOT NULL,
    board TEXT NOT NULL DEFAULT '',
    job_json TEXT NOT NULL,
    result_json TEXT NOT NULL DEFAULT '',
    idem_key TEXT NOT NULL DEFAULT '',
    submitted DOUBLE PRECISION NOT NULL,
    started DOUBLE PRECISION NOT NULL DEFAULT 0,
    finished DOUBLE PRECISION NOT NULL DEFAULT 0,
    origin TEXT NOT NULL DEFAULT '',
    daemon TEXT NOT NULL DEFAULT '',
    tags TEXT[] NOT NULL DEFAULT '{}',
    want_board TEXT NOT NULL DEFAULT '',
    require_timing BOOLEAN NOT NULL DEFAULT FALSE,
    has_ir BOOLEAN NOT NULL DEFAULT FALSE,
    buffer_bytes DOUBLE PRECISION NOT NULL DEFAULT 0,
    work_flops DOUBLE PRECISION NOT NULL DEFAULT 0,
    queue_s DOUBLE PRECISION NOT NULL DEFAULT 3600,
    cancel_requested BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX IF NOT EXISTS kcoral_jobs_queue ON kcoral_jobs(state, target, seq);
CREATE INDEX IF NOT EXISTS kcoral_jobs_client ON kcoral_jobs(client, seq);
CREATE INDEX IF NOT EXISTS kcoral_jobs_daemon ON kcoral_jobs(daemon, state);
CREATE UNIQUE INDEX IF NOT EXISTS kcoral_jobs_idem ON kcoral_jobs(client, idem_key)
    WHERE idem_key <> '';
CREATE TABLE IF NOT EXISTS kcoral_daemons (
    daemon_id TEXT PRIMARY KEY,
    address TEXT NOT NULL DEFAULT '',
    started DOUBLE PRECISION NOT NULL,
    lease_until DOUBLE PRECISION NOT NULL,
    alive BOOLEAN NOT NULL DEFAULT TRUE
);
CREATE TABLE IF NOT EXISTS kcoral_client_turns (
    client TEXT PRIMARY KEY,
    served DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS kcoral_blob_owners (
    digest TEXT NOT NULL,
    owner TEXT NOT NULL,
    size BIGINT NOT NULL,
    PRIMARY KEY (digest, owner)
);
CREATE TABLE IF NOT EXISTS kcoral_blob_chunks (
    digest TEXT NOT NULL,
    idx INTEGER NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (digest, idx)
);
"""
_SCHEMA_LOCK = 0x6B636F72  # pg_advisory_xact_lock: daemons starting together create it once


def _psycopg():
    try:
        import psycopg  # optional dependency: only a daemon with [store] kind = "postgres"
    except ImportError:
        raise ValueError("[store] kind = \"postgres\" needs psycopg 3: pip install "
                         "'tirxh[postgres]' (or psycopg[binary])") from None
    return psycopg


class PgStore:
    """`kcoral.store.JobStore`'s interface on PostgreSQL, plus the shared queue (``claim``),
    leases (``heartbeat``, ``sweep``) and blob sharing. `daemon_id` names this daemon."""

    shared = True

    def __init__(self, dsn: str, daemon_id: str, lease_s: float = 10.0):
        pg = _psycopg()
        self.dsn, self.daemon_id, self.lease_s = dsn, daemon_id, float(lease_s)
        try:
            self._db = pg.connect(dsn, autocommit=True)
            self._blob_db = pg.connect(dsn, autocommit=True)
        except pg.Error as e:
            raise ValueError(f"[store] dsn: cannot connect to PostgreSQL: {e}") from None
        self._lock = threading.Lock()
        self._blob_lock = threading.Lock()
        self.blobs = None  # the daemon's BlobStore (attach_blobs): pushed to and fetched from
        with self._db.transaction():
            self._db.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            self._db.execute(_SCHEMA)

    def _q(self, sql: str, args=(), fetch: str = "none"):
        with self._lock:
            cur = self._db.execute(sql, args)
            if fetch == "one":
                return cur.fetchone()
            if fetch == "all":
                return cur.fetchall()
            return cur.rowcount

    def _row(self, cur_row, cols) -> dict:
        return dict(zip(cols, cur_row))

    def close(self) -> None:
        for c in (self._db, self._blob_db):
            try:
                c.close()
            except Exception:
                pass

    # --- this daemon --------------------------------------------------------------------------
    def register(self, address: str = "") -> None:
        self._q(f"INSERT INTO kcoral_daemons(daemon_id, address, started, lease_until, alive) "
                f"VALUES (%s, %s, {_NOW}, {_NOW} + %s, TRUE) ON CONFLICT (daemon_id) DO UPDATE "
                f"SET address = EXCLUDED.address, lease_until = EXCLUDED.lease_until, "
                f"alive = TRUE", (self.daemon_id, address, self.lease_s))

    def heartbeat(self) -> bool:
        """Renew this daemon's lease; False when another daemon has declared it dead."""
        return self._q(f"UPDATE kcoral_daemons SET lease_until = {_NOW} + %s WHERE "
                       f"daemon_id = %s AND alive", (self.lease_s, self.daemon_id)) > 0

    def retire(self) -> None:
        """A graceful stop: this daemon holds nothing any more (no one waits for its lease)."""
        self._q("UPDATE kcoral_daemons SET alive = FALSE, lease_until = 0 WHERE daemon_id = %s",
                (self.daemon_id,))

    def sweep(self) -> list:
        """Declare every daemon whose lease ran out dead and record the jobs it was running
        interrupted; return ``[(job_id, daemon_id)]`` of those jobs. Safe to run from every
        live daemon at once (one statement; the second finds nothing)."""
        res = json.dumps({"status": "interrupted", "error": {
            "type": "interrupted.daemon-lost",
            "message": "the daemon running this job stopped renewing its lease (it died or "
                       "lost the database); the job was not re-run because a partial run may "
                       "have changed its board's state"}})
        rows = self._q(
            f"WITH dead AS (UPDATE kcoral_daemons SET alive = FALSE WHERE alive AND "
            f"lease_until < {_NOW} RETURNING daemon_id) "
            f"UPDATE kcoral_jobs SET state = 'interrupted', finished = {_NOW}, result_json = %s "
            f"WHERE daemon IN (SELECT daemon_id FROM dead) AND state = ANY(%s) "
            f"RETURNING job_id, daemon", (res, list(_RUNNING)), fetch="all")
        return [(r[0], r[1]) for r in rows]

    def expire_queued(self) -> list:
        """Fail the queued jobs that waited past their queue budget; return their ids."""
        res = json.dumps({"status": "failed", "error": {
            "type": "timeout.queue", "message": "waited in the shared queue past its queue "
                                                "budget; it was not run"}})
        rows = self._q(f"UPDATE kcoral_jobs SET state = 'failed', finished = {_NOW}, "
                       f"result_json = %s WHERE state = 'queued' AND {_NOW} - submitted > "
                       f"queue_s RETURNING job_id", (res,), fetch="all")
        return [r[0] for r in rows]

    # --- jobs ---------------------------------------------------------------------------------
    def add(self, job_id: str, client: str, name: str, target: str, job_json: str,
            idem_key: str = "", meta: "dict | None" = None) -> None:
        """Insert a queued job (`meta`: what a board's claim filters on, `Scheduler.submit`);
        `DuplicateKey` when (client, idem_key) already names one."""
        m = meta or {}
        pg = _psycopg()
        try:
            self._q(f"INSERT INTO kcoral_jobs(job_id, client, name, target, state, job_json, "
                    f"idem_key, submitted, origin, tags, want_board, require_timing, has_ir, "
                    f"buffer_bytes, work_flops, queue_s) VALUES (%s,%s,%s,%s,'queued',%s,%s,"
                    f"{_NOW},%s,%s,%s,%s,%s,%s,%s,%s)",
                    (job_id, client, name, target, job_json, idem_key, self.daemon_id,
                     list(m.get("tags", [])), m.get("want_board") or "",
                     bool(m.get("require_timing")), bool(m.get("has_ir")),
                     float(m.get("buffer_bytes", 0)), float(m.get("work_flops") or 0),
                     float(m.get("queue_s", 3600))))
        except pg.errors.UniqueViolation:
            old = self.find_idempotent(client, idem_key)
            if old is None:
                raise
            raise DuplicateKey(old[0], old[1] == job_json) from None

    def find_idempotent(self, client: str, key: str) -> "tuple[str, str] | None":
        if not key:
            return None
        r = self._q("SELECT job_id, job_json FROM kcoral_jobs WHERE client = %s AND "
                    "idem_key = %s", (client, key), fetch="one")
        return (r[0], r[1]) if r else None

    def claim(self, board: str, target: str, tags, *, remote: bool = False,
              timing: bool = True, requires_ir: bool = False,
              max_bytes: "float | None" = None, max_flops: "float | None" = None
              ) -> "dict | None":
        """The next queued job this board can run, now ``running`` on it and held by this
        daemon; None when there is none. Round-robin across clients, in submission order."""
        args = {"target": target, "tags": list(tags), "board": board, "remote": remote,
                "timing": timing, "ir": requires_ir, "max_bytes": max_bytes,
                "max_flops": max_flops, "me": self.daemon_id}
        with self._lock:
            cur = self._db.execute(
                "WITH next AS (SELECT j.job_id FROM kcoral_jobs j LEFT JOIN kcoral_client_turns "
                "t ON t.client = j.client WHERE j.state = 'queued' AND j.target = %(target)s "
                "AND j.tags <@ %(tags)s::text[] AND (j.want_board = '' OR j.want_board = "
                "%(board)s) AND (NOT %(remote)s OR j.want_board = %(board)s OR "
                "cardinality(j.tags) > 0) AND (NOT j.require_timing OR %(timing)s) AND "
                "(NOT %(ir)s OR j.has_ir) AND (%(max_bytes)s::float8 IS NULL OR "
                "j.buffer_bytes <= %(max_bytes)s::float8) AND (%(max_flops)s::float8 IS NULL OR "
                "j.work_flops <= %(max_flops)s::float8) ORDER BY COALESCE(t.served, 0), j.seq "
                "LIMIT 1 FOR UPDATE OF j SKIP LOCKED) "
                f"UPDATE kcoral_jobs k SET state = 'running', board = %(board)s, daemon = "
                f"%(me)s, started = {_NOW} FROM next WHERE k.job_id = next.job_id RETURNING k.*",
                args)
            r = cur.fetchone()
            if r is None:
                return None
            row = self._row(r, [d.name for d in cur.description])
            self._db.execute(f"INSERT INTO kcoral_client_turns(client, served) VALUES (%s, "
                             f"{_NOW}) ON CONFLICT (client) DO UPDATE SET served = "
                             f"EXCLUDED.served", (row["client"],))
        return row

    def set_state(self, job_id: str, state: str, board: "str | None" = None,
                  result: "dict | None" = None) -> bool:
        """Write a state; a terminal one only once, and only by the daemon holding the job
        (or anyone, while it is queued). False when the write did not apply."""
        if state not in STATES:
            raise ValueError(f"unknown job state {state!r}")
        sets, args = ["state = %s"], [state]
        if board is not None:
            sets.append("board = %s")
            args.append(board)
        if state in TERMINAL:
            sets.append(f"finished = {_NOW}")
        if result is not None:
            sets.append("result_json = %s")
            args.append(json.dumps(result, sort_keys=True))
        cond = "job_id = %s AND NOT (state = ANY(%s)) AND (state = 'queued' OR daemon = %s)"
        return self._q(f"UPDATE kcoral_jobs SET {', '.join(sets)} WHERE {cond}",
                       (*args, job_id, list(TERMINAL), self.daemon_id)) > 0

    def release(self, job_id: str) -> None:
        """Put a job this daemon claimed but did not start back into the queue."""
        self._q("UPDATE kcoral_jobs SET state = 'queued', daemon = '', board = '', started = 0 "
                "WHERE job_id = %s AND daemon = %s AND state = 'running'",
                (job_id, self.daemon_id))

    def cancel_queued(self, job_id: str) -> bool:
        res = json.dumps({"status": "cancelled", "job_id": job_id, "error": {
            "type": "cancelled.by-client", "message": "cancelled while queued"}})
        return self._q(f"UPDATE kcoral_jobs SET state = 'cancelled', finished = {_NOW}, "
                       f"result_json = %s WHERE job_id = %s AND state = 'queued'",
                       (res, job_id)) > 0

    def request_cancel(self, job_id: str) -> None:
        self._q("UPDATE kcoral_jobs SET cancel_requested = TRUE WHERE job_id = %s", (job_id,))

    def cancel_requested(self, job_ids) -> set:
        if not job_ids:
            return set()
        rows = self._q("SELECT job_id FROM kcoral_jobs WHERE job_id = ANY(%s) AND "
                       "cancel_requested", (list(job_ids),), fetch="all")
        return {r[0] for r in rows}

    def states(self, job_ids) -> dict:
        """job_id -> row (state, board, daemon, result_json, queue position for queued)."""
        if not job_ids:
            return {}
        with self._lock:
            cur = self._db.execute(
                "SELECT j.job_id, j.state, j.board, j.daemon, j.result_json, j.finished, "
                "CASE WHEN j.state = 'queued' THEN (SELECT count(*) FROM kcoral_jobs q WHERE "
                "q.state = 'queued' AND q.target = j.target AND q.seq < j.seq) ELSE 0 END "
                "AS position FROM kcoral_jobs j WHERE j.job_id = ANY(%s)", (list(job_ids),))
            cols = [d.name for d in cur.description]
            return {r[0]: self._row(r, cols) for r in cur.fetchall()}

    def count_queued(self) -> int:
        return int(self._q("SELECT count(*) FROM kcoral_jobs WHERE state = 'queued'",
                           fetch="one")[0])

    _COLS = ("seq", "job_id", "client", "name", "target", "state", "board", "job_json",
             "result_json", "idem_key", "submitted", "started", "finished")

    def get(self, job_id: str) -> "dict | None":
        r = self._q(f"SELECT {', '.join(self._COLS)} FROM kcoral_jobs WHERE job_id = %s",
                    (job_id,), fetch="one")
        return self._row(r, self._COLS) if r else None

    def list(self, limit: int = 50, client: str = "", state: str = "") -> list:
        limit = min(max(int(limit), 1), 1000) if limit and limit > 0 else 50
        conds, args = [], []
        if client:
            conds.append("client = %s")
            args.append(client)
        if state:
            conds.append("state = %s")
            args.append(state)
        where = f" WHERE {' AND '.join(conds)}" if conds else ""
        rows = self._q(f"SELECT {', '.join(self._COLS)} FROM kcoral_jobs{where} ORDER BY seq "
                       f"DESC LIMIT %s", (*args, limit), fetch="all")
        return [self._row(r, self._COLS) for r in rows]

    def total(self) -> int:
        return int(self._q("SELECT count(*) FROM kcoral_jobs", fetch="one")[0])

    def counts(self) -> dict:
        return {r[0]: int(r[1]) for r in self._q(
            "SELECT state, count(*) FROM kcoral_jobs GROUP BY state", fetch="all")}

    def recover(self) -> tuple:
        """Nothing to recover on this daemon's own: its queued jobs are in the shared queue,
        and a previous run of it (another daemon id) is swept when its lease expires."""
        return [], []

    # --- blob ownership and sharing -----------------------------------------------------------
    def attach_blobs(self, blobs) -> None:
        self.blobs = blobs

    def own_blob(self, digest: str, owner: str, size: int) -> None:
        self._q("INSERT INTO kcoral_blob_owners(digest, owner, size) VALUES (%s,%s,%s) "
                "ON CONFLICT DO NOTHING", (digest, owner, int(size)))
        self.push_blob(digest)

    def owned(self, owner: str, digests) -> set:
        digests = list(dict.fromkeys(digests))
        if not digests:
            return set()
        rows = self._q("SELECT digest FROM kcoral_blob_owners WHERE owner = %s AND digest = "
                       "ANY(%s)", (owner, digests), fetch="all")
        return {r[0] for r in rows}

    def owned_bytes(self, owner: str) -> int:
        return int(self._q("SELECT COALESCE(SUM(size), 0) FROM kcoral_blob_owners WHERE "
                           "owner = %s", (owner,), fetch="one")[0])

    def push_blob(self, digest: str) -> None:
        """Copy a local blob into the database (once) so other daemons can fetch it."""
        if self.blobs is None or not self.blobs.has(digest):
            return
        with self._blob_lock:
            if self._blob_db.execute("SELECT 1 FROM kcoral_blob_chunks WHERE digest = %s AND "
                                     "idx = 0", (digest,)).fetchone():
                return
            with self._blob_db.transaction(), open(self.blobs.path(digest), "rb") as f:
                idx = 0
                while True:
                    part = f.read(CHUNK)
                    if not part and idx:
                        break
                    self._blob_db.execute("INSERT INTO kcoral_blob_chunks(digest, idx, data) "
                                          "VALUES (%s,%s,%s) ON CONFLICT DO NOTHING",
                                          (digest, idx, part))
                    idx += 1
                    if not part:
                        break

    def fetch_blobs(self, digests) -> list:
        """Bring the blobs this daemon lacks from the database into its store; return those
        the database does not have either."""
        missing = []
        for dg in digests:
            if self.blobs.has(dg):
                continue
            with self._blob_lock:
                rows = self._blob_db.execute("SELECT data FROM kcoral_blob_chunks WHERE "
                                             "digest = %s ORDER BY idx", (dg,)).fetchall()
            if not rows:
                missing.append(dg)
                continue
            got = self.blobs.put(b"".join(bytes(r[0]) for r in rows))
            if got != dg:
                missing.append(dg)
        return missing
