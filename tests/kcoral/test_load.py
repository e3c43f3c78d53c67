"""16 concurrent clients x 25 jobs on two fake boards: every job accounted for."""

import collections
import threading
import time

from kcoral.client import KCoralClient

from .conftest import fake_job, start_daemon

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
