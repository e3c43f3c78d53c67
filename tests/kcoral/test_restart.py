"""kill -9 of a daemon subprocess, then a restart: queued jobs run, the interrupted one says so."""

import logging
import re
import signal
import time

from kcoral.client import KCoralClient

from .conftest import fake_job, serve, start_daemon


def test_kill_9_and_restart_loses_nothing(tmp_path):
    state, pf = tmp_path / "state", tmp_path / "port"
    p, addr = serve(state, pf)
    ids = []
    try:
        with KCoralClient(addr, client_name="c") as c:
            running = fake_job(c, fake={"sleep_s": 30})
            ev = next(c.submit(running))
            ids.append(ev["job_id"])
            for _ in range(3):
                ids.append(next(c.submit(fake_job(c)))["job_id"])
            deadline = time.time() + 10
            while {b["name"]: b for b in c.boards()}["fake0"]["current_job"] != ids[0]:
                assert time.time() < deadline
                time.sleep(0.05)
            assert [j["state"] for j in c.jobs(state="queued")] == ["queued"] * 3
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(10)
    # the dead daemon's worker may linger (it was its child); the restart must not care
    p2, addr = serve(state, pf)
    try:
        with KCoralClient(addr) as c:
            got = {}
            deadline = time.time() + 30
            while time.time() < deadline:
                got = {i: c.get_job(i) for i in ids}
                if all(j["state"] in ("done", "failed", "interrupted") for j in got.values()):
                    break
                time.sleep(0.1)
            assert got[ids[0]]["state"] == "interrupted"
            assert got[ids[0]]["result"]["error"]["type"] == "interrupted.daemon-restart"
            for i in ids[1:]:
                assert got[i]["state"] == "done", got[i]
                assert got[i]["result"]["verified"]
            assert len(c.jobs(limit=100)) == 4
    finally:
        p2.send_signal(signal.SIGTERM)
        out = p2.communicate(timeout=30)[0].decode()
    assert "re-queued 3 job(s)" in out and "recorded as interrupted" in out


def test_start_logs_where_its_seconds_go(tmp_path, caplog):
    """Every H200 call spent ~40 s between the daemon's launch and "serving" (session 9) with
    nothing in daemon.log to say whether the plugins' imports or a board's worker took it: the
    start logs both, per board."""
    caplog.set_level(logging.INFO, logger="kcoral")
    d = start_daemon(tmp_path / "state", fake_boards=2)
    try:
        msgs = [r.getMessage() for r in caplog.records]
    finally:
        d.stop(2)
    assert any(re.fullmatch(r"plugins loaded in \d+\.\d s", m) for m in msgs), msgs
    for board in ("fake0", "fake1", "sim0"):
        assert any(re.fullmatch(rf"board {board}: worker up in \d+\.\d s", m) for m in msgs), msgs
