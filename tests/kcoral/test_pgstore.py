"""The PostgreSQL job store (kcoral/pgstore.py) against a real server that this module starts
from ``initdb``/``pg_ctl``: claims (FOR UPDATE SKIP LOCKED) that never hand a job to two daemons,
fairness, leases that expire, blobs shared through the database; and two daemon subprocesses
sharing one queue, one of them killed with -9 mid-load: no job lost, none run twice.

Skipped, saying why, without psycopg 3 (``pip install 'tirxh[postgres]'``) or without the
PostgreSQL server binaries (``apt-get install postgresql``: found on PATH or under
/usr/lib/postgresql/*/bin). As root the server runs as the ``postgres`` user (initdb refuses
root)."""

import collections
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid

import numpy as np
import pytest

from kcoral.blobs import BlobStore
from kcoral.client import KCoralClient
from kcoral.store import DuplicateKey

from .conftest import fake_job, serve, submit_load, wait_for

psycopg = pytest.importorskip("psycopg", reason="psycopg 3 is not installed: "
                                                "pip install 'tirxh[postgres]'")
from kcoral.pgstore import PgStore  # noqa: E402  (after the skip: it needs psycopg)


def _pg_bin(name: str) -> "str | None":
    found = shutil.which(name)
    if found:
        return found
    hits = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return hits[-1] if hits else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def pg_server():
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("PostgreSQL's initdb/pg_ctl are not on PATH nor under "
                    "/usr/lib/postgresql/*/bin (apt-get install postgresql)")
    root = tempfile.mkdtemp(prefix="kcoral-pg-")
    run_as = []
    if os.geteuid() == 0:  # initdb refuses root: run the server as the postgres user
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(root, ignore_errors=True)
            pytest.skip("running as root and there is no 'postgres' user to run the server as")
        os.chown(root, pw.pw_uid, pw.pw_gid)
        run_as = ["runuser", "-u", "postgres", "--"]
    data, port = os.path.join(root, "data"), _free_port()
    try:
        subprocess.run(run_as + [initdb, "-D", data, "-U", "kcoral", "--auth=trust", "-E",
                                 "UTF8"], check=True, capture_output=True, timeout=300)
        subprocess.run(run_as + [pg_ctl, "-D", data, "-l", os.path.join(root, "log"), "-w",
                                 "-t", "120", "-o", f"-p {port} -k {root} -c "
                                 f"listen_addresses='' -c max_connections=200", "start"],
                       check=True, capture_output=True, timeout=300)
    except subprocess.CalledProcessError as e:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"could not start PostgreSQL: {e.stderr.decode()[-2000:]}")
    try:
        yield f"host={root} port={port} user=kcoral"
    finally:
        subprocess.run(run_as + [pg_ctl, "-D", data, "-m", "immediate", "stop"],
                       capture_output=True, timeout=120)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def dsn(pg_server):
    """A fresh database per test."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{pg_server} dbname=postgres", autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    return f"{pg_server} dbname={name}"


def _add(store, n, client="c", target="sm_90a", **meta):
    ids = []
    for i in range(n):
        jid = f"{client}-{i}-{uuid.uuid4().hex[:6]}"
        store.add(jid, client, f"job{i}", target, "{}", meta=meta)
        ids.append(jid)
    return ids


def test_concurrent_claims_never_hand_one_job_to_two_daemons(dsn):
    a = [PgStore(dsn, "A") for _ in range(3)]
    b = [PgStore(dsn, "B") for _ in range(3)]
    ids = _add(a[0], 150)
    got = collections.defaultdict(list)

    def claimer(store):
        while True:
            row = store.claim("fake0", "sm_90a", ["fake"])
            if row is None:
                return
            got[row["job_id"]].append(store.daemon_id)
    ts = [threading.Thread(target=claimer, args=(s,)) for s in a + b]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert sorted(got) == sorted(ids)
    assert all(len(v) == 1 for v in got.values()), {k: v for k, v in got.items() if len(v) > 1}
    assert {v[0] for v in got.values()} == {"A", "B"}  # both took part
    rows = {r["job_id"]: r for r in a[0].list(limit=1000)}
    assert {r["state"] for r in rows.values()} == {"running"}
    for s in a + b:
        s.close()


def test_claims_go_round_robin_across_clients_and_respect_the_filters(dsn):
    s = PgStore(dsn, "A")
    greedy = _add(s, 5, client="greedy")
    polite = _add(s, 1, client="polite")
    wrong = _add(s, 1, client="other", target="sm_100a")
    tagged = _add(s, 1, client="other", tags=["edge"])
    timed = _add(s, 1, client="other2", require_timing=True)
    order = []
    while True:
        row = s.claim("sim0", "sm_90a", ["fake"], timing=False)  # takes no timing job
        if row is None:
            break
        order.append(row["job_id"])
    assert order[:2] == [greedy[0], polite[0]] and set(order) == set(greedy + polite)
    assert s.get(wrong[0])["state"] == s.get(tagged[0])["state"] == "queued"
    assert s.get(timed[0])["state"] == "queued"
    assert s.claim("edge0", "sm_90a", ["edge"], remote=True)["job_id"] == tagged[0]
    assert s.claim("gpu0", "sm_90a", [])["job_id"] == timed[0]
    s.close()


def test_a_dead_daemons_running_jobs_are_interrupted_and_its_queue_moves_on(dsn):
    a, b = PgStore(dsn, "A", lease_s=0.5), PgStore(dsn, "B", lease_s=5)
    a.register()
    b.register()
    first, second = _add(a, 2)
    assert a.claim("fake0", "sm_90a", [])["job_id"] == first
    assert b.sweep() == []  # A's lease holds
    time.sleep(0.8)  # A stops renewing (kill -9)
    assert b.heartbeat() and b.sweep() == [(first, "A")]
    row = b.get(first)
    assert row["state"] == "interrupted"
    assert '"interrupted.daemon-lost"' in row["result_json"]
    assert b.claim("fake0", "sm_90a", [])["job_id"] == second  # A's queue is B's now
    assert not a.heartbeat()  # A, if it comes back, learns it was declared dead ...
    assert a.set_state(first, "done", result={"status": "ok"}) is False  # ... and cannot undo
    assert b.get(first)["state"] == "interrupted"
    assert b.set_state(second, "done", result={"status": "ok"}) is True
    assert b.set_state(second, "failed", result={}) is False  # a terminal state is written once
    for s in (a, b):
        s.close()


def test_idempotency_queue_budget_cancel_and_blobs(dsn, tmp_path):
    s = PgStore(dsn, "A")
    s.add("j1", "c", "n", "sm_90a", '{"x": 1}', idem_key="k")
    with pytest.raises(DuplicateKey) as ei:
        s.add("j2", "c", "n", "sm_90a", '{"x": 1}', idem_key="k")
    assert ei.value.job_id == "j1" and ei.value.same
    s.add("old", "c", "n", "sm_90a", "{}", meta={"queue_s": 0.01})
    time.sleep(0.05)
    assert s.expire_queued() == ["old"] and s.get("old")["state"] == "failed"
    assert s.cancel_queued("j1") and s.get("j1")["state"] == "cancelled"
    assert not s.cancel_queued("j1")
    here, there = BlobStore(tmp_path / "a"), BlobStore(tmp_path / "b")
    s.attach_blobs(here)
    data = np.arange(3 << 20, dtype=np.uint8).tobytes()  # one 4 MiB chunk
    big = os.urandom((9 << 20) + 5)  # three
    dgs = [here.put(data), here.put(big), here.put(b"")]
    for dg in dgs:
        s.own_blob(dg, "c", here.size(dg))
    other = PgStore(dsn, "B")
    other.attach_blobs(there)
    assert other.fetch_blobs(dgs + ["f" * 64]) == ["f" * 64]
    assert there.get(dgs[1]) == big and there.get(dgs[0]) == data and there.get(dgs[2]) == b""
    assert other.owned("c", dgs) == set(dgs) and other.owned_bytes("c") == len(data) + len(big)
    s.close()
    other.close()


def test_a_bad_store_config_is_named(tmp_path):
    from kcoral.server import open_store
    with pytest.raises(ValueError, match="kind = 'mysql': expected 'sqlite' or 'postgres'"):
        open_store({"kind": "mysql"}, tmp_path)
    with pytest.raises(ValueError, match="needs \\[store\\] dsn"):
        open_store({"kind": "postgres"}, tmp_path)
    with pytest.raises(ValueError, match="lease_s = 0.1: expected"):
        open_store({"kind": "postgres", "dsn": "x", "lease_s": 0.1}, tmp_path)
    with pytest.raises(ValueError, match="cannot connect to PostgreSQL"):
        open_store({"kind": "postgres", "dsn": "host=/nonexistent port=1 user=x"}, tmp_path)


JOBS = 15  # per client


@pytest.mark.slow
def test_two_daemons_share_a_queue_and_survive_a_kill_9(dsn, tmp_path):
    """Daemons A and B (two fake boards each) on one database. 8 clients submit 15 jobs each,
    alternately to A and B; a long job only A's boards may take (tag ``onA``) runs there. Once 40
    jobs are done, A is killed with SIGKILL. B declares A dead when its 2 s lease runs out, records
    the long job ``interrupted.daemon-lost``, and runs every queued job, those submitted to A
    included. No acknowledged job is lost and none ran twice (both daemons' fake boards log every
    job they start to one file)."""
    log = tmp_path / "runs.log"
    store = f'[store]\nkind = "postgres"\ndsn = "{dsn}"\nlease_s = 2\n'
    pa, addr_a = serve(tmp_path / "a" / "state", tmp_path / "a" / "port", fake_boards=2,
                       fake_extra=f'run_log = "{log}"\ntags = ["fake", "onA"]', tables=store)
    pb = None
    acked: dict = {}
    try:
        pb, addr_b = serve(tmp_path / "b" / "state", tmp_path / "b" / "port", fake_boards=2,
                           fake_extra=f'run_log = "{log}"', tables=store)
        with KCoralClient(addr_a, client_name="victim", timeout=10) as c:
            acked["victim"] = next(c.submit(fake_job(c, name="victim", uploaded=False,
                                                     tags=["onA"], fake={"sleep_s": 600}),
                                            timeout=30))["job_id"]

        acked.update(submit_load([addr_b, addr_a], 8, JOBS))
        with KCoralClient(addr_b, timeout=10) as c:
            wait_for(lambda: len(c.jobs(limit=1000, state="done")) >= 40, 120, "40 jobs done")
            assert c.get_job(acked["victim"])["state"] == "running"
    finally:
        pa.send_signal(signal.SIGKILL)
        pa.wait(10)
    try:
        with KCoralClient(addr_b, timeout=10) as c:
            def settled():
                rows = c.jobs(limit=1000)
                return rows if len(rows) == 8 * JOBS + 1 and all(
                    r["state"] in ("done", "interrupted", "failed", "cancelled")
                    for r in rows) else None
            rows = {r["name"]: r for r in wait_for(settled, 180, "every job to finish")}
            assert c.status()["queued"] == 0
    finally:
        if pb is not None:
            pb.send_signal(signal.SIGTERM)
            try:
                pb.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                pb.kill()
    assert {n: r["job_id"] for n, r in rows.items()} == acked  # none lost
    started = collections.Counter(log.read_text().split())
    assert not {n: k for n, k in started.items() if k > 1}, "a job ran twice"
    victim = rows.pop("victim")
    assert victim["state"] == "interrupted"
    assert victim["result"]["error"]["type"] == "interrupted.daemon-lost"
    states = collections.Counter(r["state"] for r in rows.values())
    interrupted = [r for r in rows.values() if r["state"] == "interrupted"]
    assert states["failed"] == states["cancelled"] == 0, states
    assert len(interrupted) <= 2  # at most what A's other board had running at the kill
    for r in rows.values():
        if r["state"] == "done":
            assert started[r["name"]] == 1, r["name"]
    assert states["done"] == 8 * JOBS - len(interrupted) >= 8 * JOBS - 2
