"""16 concurrent clients x 25 jobs: every job accounted for, in-process and across a kill -9 of a
daemon subprocess and its restart (none lost, none run twice, the running ones interrupted)."""

import collections
import signal
import threading
import time

import pytest

from kcoral.client import KCoralClient

from .conftest import fake_job, serve, start_daemon, submit_load, wait_for

CLIENTS, JOBS = 16, 25


def test_load_every_job_accounted_for(tmp_path):
    d = start_daemon(tmp_path / "s", fake_boards=2)
    results = collections.defaultdict(list)
    errors = []
    try:
        def client_main(i):
            try:
                with KCoralClient(d.address, client_name=f"c{i}") as c:
                    doc = fake_job(c, n=256, uploaded=(i % 2 == 0),
                                   timing={"min_iters": 3, "warmup": 1, "budget_s": 0.2})
                    for _ in range(JOBS):
                        ev = c.run(doc, timeout=120)
                        results[i].append((ev["job_id"], ev["state"]))
            except Exception as e:  # recorded, asserted below
                errors.append(f"client {i}: {e!r}")
        t0 = time.time()
        threads = [threading.Thread(target=client_main, args=(i,)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(180)
        elapsed = time.time() - t0
        assert not errors, errors
        ids = [j for v in results.values() for j, _ in v]
        assert len(ids) == len(set(ids)) == CLIENTS * JOBS
        assert all(st == "done" for v in results.values() for _, st in v)
        with KCoralClient(d.address) as c:
            rows = c.jobs(limit=1000)
            assert sorted(r["job_id"] for r in rows) == sorted(ids)
            assert {r["state"] for r in rows} == {"done"}
            boards = {b["name"]: b["properties"]["jobs_run"] for b in c.boards()
                      if b["type"] == "fake"}
        assert sum(boards.values()) == CLIENTS * JOBS and min(boards.values()) > 0
        assert elapsed < 60
    finally:
        d.stop(2)


@pytest.mark.slow
def test_load_then_kill_9_and_restart_accounts_for_every_job(tmp_path):
    """16 clients submit 25 jobs each to a daemon subprocess (two fake boards); a long job holds
    one board; once 100 jobs are done the daemon is killed with SIGKILL mid-load and restarted
    on the same state. Every acknowledged job is in the store and ends ``done`` having run
    exactly once, or ``interrupted.daemon-restart`` having run at most once (the fake board logs
    every job it starts by its unique name, so a job run twice would show up twice)."""
    state, pf, log = tmp_path / "state", tmp_path / "port", tmp_path / "runs.log"
    fake = f'run_log = "{log}"'
    acked: dict = {}  # job name -> job id, once the daemon acknowledged (stored) it
    p, addr = serve(state, pf, fake_boards=2, fake_extra=fake)
    p2 = None
    try:
        with KCoralClient(addr, client_name="victim", timeout=10) as c:
            acked["victim"] = next(c.submit(fake_job(c, name="victim", uploaded=False,
                                                     fake={"sleep_s": 600}),
                                            timeout=30))["job_id"]

        acked.update(submit_load([addr], CLIENTS, JOBS))
        with KCoralClient(addr, timeout=10) as c:
            wait_for(lambda: len(c.jobs(limit=1000, state="done")) >= 100, 60, "100 jobs done")
            busy = {b["name"]: b["current_job"] for b in c.boards() if b["type"] == "fake"}
        assert acked["victim"] in busy.values(), busy  # the long job is running: interrupted
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(10)
    try:
        p2, addr = serve(state, pf, fake_boards=2, fake_extra=fake)
        with KCoralClient(addr, timeout=10) as c:
            def settled():
                rows = c.jobs(limit=1000)
                return rows if all(r["state"] in ("done", "interrupted", "failed")
                                   for r in rows) else None
            rows = {r["job_id"]: r for r in wait_for(settled, 60, "every job to finish")}
    finally:
        if p2 is not None:
            p2.send_signal(signal.SIGTERM)
            try:
                p2.communicate(timeout=30)
            except Exception:
                p2.kill()
                p2.communicate(timeout=10)
    names = {r["name"]: r for r in rows.values()}
    assert set(acked.values()) <= set(rows), "an acknowledged job was lost"
    assert all(names[n]["job_id"] == jid for n, jid in acked.items())
    started = collections.Counter(log.read_text().split())
    twice = {n: k for n, k in started.items() if k > 1}
    assert not twice, f"jobs that ran more than once: {twice}"
    states = collections.Counter(r["state"] for r in rows.values())
    assert states["failed"] == 0, [r["result"] for r in rows.values() if r["state"] == "failed"]
    interrupted = [r for r in rows.values() if r["state"] == "interrupted"]
    assert names["victim"]["state"] == "interrupted" and 1 <= len(interrupted) <= 2
    for r in interrupted:
        assert r["result"]["error"]["type"] == "interrupted.daemon-restart"
    for r in rows.values():
        if r["state"] == "done":
            assert started[r["name"]] == 1, r["name"]
    assert states["done"] == len(rows) - len(interrupted) >= CLIENTS * JOBS - 1
