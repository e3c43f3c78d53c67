"""Remote boards: an agent dials in and is scheduled like a local board; an incompatible agent
is refused with a message naming the versions."""

import threading
import time

import pytest

from kcoral.agent import Agent, AgentRefused, agent_versions
from kcoral.client import KCoralClient

from .conftest import fake_job, start_daemon


@pytest.fixture
def bare_daemon(tmp_path):
    d = start_daemon(tmp_path / "s", fake_boards=0)  # no local board that could run sm_90a
    try:
        yield d
    finally:
        d.stop(1)


def test_agent_runs_jobs(bare_daemon, tmp_path):
    ag = Agent(bare_daemon.address, "fake", name="thor", tags=["edge"],
               cache_dir=tmp_path / "agent")
    t = threading.Thread(target=ag.run, daemon=True)
    t.start()
    try:
        with KCoralClient(bare_daemon.address) as c:
            deadline = time.time() + 20
            while not any(b["name"] == "thor" for b in c.boards()):
                assert time.time() < deadline, "agent did not join"
                time.sleep(0.05)
            b = {b["name"]: b for b in c.boards()}["thor"]
            assert b["type"] == "remote" and "edge" in b["tags"]
            assert b["properties"]["versions"]["protocol"] == "1"
            doc = fake_job(c, tags=["edge"])
            ev = c.run(doc, timeout=60)
            assert ev["state"] == "done", ev
            assert ev["result"]["remote_agent"] == "thor" and ev["result"]["verified"]
            states = [e["state"] for e in c.watch(ev["job_id"])]
            assert states[-1] == "done"
            assert ev["provenance"] == {"kind": "remote", "board": "thor", "agent": "local"}
            assert ev["result"]["provenance"]["kind"] == "remote"
            crash = c.run(fake_job(c, fake={"crash": True}, board="thor"), timeout=60)
            assert crash["result"]["error"]["type"] == "runtime.worker-crash"
            assert c.run(fake_job(c, board="thor"), timeout=60)["state"] == "done"
    finally:
        ag.stop()
        t.join(10)
    with KCoralClient(bare_daemon.address) as c:
        deadline = time.time() + 10
        while {b["name"]: b for b in c.boards()}["thor"]["state"] != "offline":
            assert time.time() < deadline
            time.sleep(0.05)


def test_incompatible_agent_is_refused(bare_daemon, tmp_path):
    v = dict(agent_versions(), kcoral="9.9.0", protocol="7")
    ag = Agent(bare_daemon.address, "fake", name="old", versions=v, cache_dir=tmp_path / "a")
    with pytest.raises(AgentRefused) as ei:
        ag.run()
    msg = str(ei.value)
    assert "incompatible" in msg and "'9.9.0'" in msg and "protocol '7'" in msg
    with KCoralClient(bare_daemon.address) as c:
        assert "old" not in {b["name"] for b in c.boards()}


def test_kcoral_agent_command(bare_daemon, tmp_path):
    import os
    import pathlib
    import signal
    import subprocess
    import sys
    root = pathlib.Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    p = subprocess.Popen([sys.executable, "-m", "kcoral.cli", "agent", "--board-type", "fake",
                          "--name", "edge1", "--daemon", bare_daemon.address, "--cache-dir",
                          str(tmp_path / "cache")], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    try:
        with KCoralClient(bare_daemon.address) as c:
            deadline = time.time() + 30
            while "edge1" not in {b["name"] for b in c.boards()}:
                assert p.poll() is None, p.stdout.read().decode()
                assert time.time() < deadline, "agent did not join"
                time.sleep(0.1)
            ev = c.run(fake_job(c, tags=["remote"]), timeout=60)
            assert ev["state"] == "done" and ev["result"]["remote_agent"] == "edge1"
    finally:
        p.send_signal(signal.SIGTERM)
        out = p.communicate(timeout=20)[0].decode()
    assert p.returncode == 0, out
    assert "joined" in out
