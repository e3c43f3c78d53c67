"""Fair queueing and budgets, with an in-memory executor (no worker processes, no gRPC)."""

import json
import threading
import time

import pytest

from kcoral.blobs import BlobStore
from kcoral.boards import BoardSpec
from kcoral.job import Job, JobError
from kcoral.scheduler import Board, Scheduler
from kcoral.store import JobStore

D = "b" * 64


class Recorder:
    """Runs jobs instantly once released; records the order."""

    def __init__(self):
        self.order = []
        self.release = threading.Event()

    def run(self, job_id, doc, progress, budget, cancelled=None):
        self.release.wait(10)
        self.order.append(doc["name"])
        return {"status": "ok", "job_id": job_id}


def job(name, **kw):
    d = {"name": name, "target": "sm_90a", "module": {"format": "fake", "blob": D},
         "launches": [{"entry": "k", "grid": [1], "block": [1]}]}
    d.update(kw)
    return Job.from_json(d)


@pytest.fixture
def sched(tmp_path):
    blobs = BlobStore(tmp_path / "blobs")
    s = Scheduler(JobStore(tmp_path / "k.sqlite"), blobs)
    yield s
    s.shutdown(0.5)


def add_d(sched):
    import kcoral.blobs as kb
    p = sched.blobs.path(D)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(b"fake")  # a file under D's name: existence is what submit checks
    assert kb.BlobStore.has(sched.blobs, D)


def wait_done(sched, ids, timeout=10):
    """Finished jobs leave memory (only the store keeps them)."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        if all(i not in sched.records for i in ids):
            assert all(sched.store.get(i)["state"] in ("done", "failed", "cancelled")
                       for i in ids)
            return
        time.sleep(0.01)
    raise AssertionError("jobs did not finish")


def result(sched, job_id) -> dict:
    return json.loads(sched.store.get(job_id)["result_json"])


def test_round_robin_across_clients(sched):
    add_d(sched)
    rec = Recorder()
    sched.add_board(Board(BoardSpec("b0", "fake", "sm_90a"), rec))
    ids = [sched.submit(job(f"A{i}"), "alice") for i in range(6)]
    ids += [sched.submit(job(f"B{i}"), "bob") for i in range(2)]
    rec.release.set()
    wait_done(sched, ids)
    # A0 was taken first (the board was idle); then alice and bob alternate while both wait
    assert rec.order[:5] == ["A0", "A1", "B0", "A2", "B1"] or \
        rec.order[:5] == ["A0", "B0", "A1", "B1", "A2"]
    assert rec.order.index("B1") < 6


def test_queue_positions_published(sched):
    add_d(sched)
    rec = Recorder()
    sched.add_board(Board(BoardSpec("b0", "fake", "sm_90a"), rec))
    ids = [sched.submit(job(f"A{i}"), "alice") for i in range(3)]
    time.sleep(0.1)
    recs = [sched.records[i] for i in ids]
    positions = [[e["queue_position"] for e in r.events if e["state"] == "queued"] for r in recs]
    assert positions[2][-1] == 2  # one running, one ahead
    rec.release.set()
    wait_done(sched, ids)
    assert positions[2][0] == 2


def test_queue_budget(sched):
    add_d(sched)
    rec = Recorder()
    sched.add_board(Board(BoardSpec("b0", "fake", "sm_90a"), rec))
    first = sched.submit(job("slow"), "alice")
    late = sched.submit(job("late", budgets={"queue_s": 0.05}), "bob")
    time.sleep(0.2)
    rec.release.set()
    wait_done(sched, [first, late])
    r = result(sched, late)
    assert r["error"]["type"] == "timeout.queue" and "queue budget" in r["error"]["message"]
    assert rec.order == ["slow"]


def test_submit_errors(sched):
    rec = Recorder()
    sched.add_board(Board(BoardSpec("b0", "fake", "sm_90a"), rec))
    sched.add_board(Board(BoardSpec("s0", "sim", "sm_80", timing=False,
                                    unavailable="numsim is not installed"), rec))
    with pytest.raises(JobError, match="no board for target 'sm_100a'"):
        sched.submit(job("x", target="sm_100a"), "c")
    with pytest.raises(JobError, match="numsim is not installed"):
        sched.submit(job("x", target="sm_80"), "c")
    with pytest.raises(JobError, match="missing blob " + D):
        sched.submit(job("x"), "c")
    with pytest.raises(JobError, match="tags"):
        sched.submit(job("x", tags=["h100"]), "c")


def test_cancel_queued(sched):
    add_d(sched)
    rec = Recorder()
    sched.add_board(Board(BoardSpec("b0", "fake", "sm_90a"), rec))
    a = sched.submit(job("A"), "alice")
    b = sched.submit(job("B"), "alice")
    assert sched.cancel(b) == (True, "cancelled")
    rec.release.set()
    wait_done(sched, [a, b])
    assert rec.order == ["A"]
    assert sched.store.get(b)["state"] == "cancelled"
    with pytest.raises(KeyError):
        sched.cancel("nope")


def test_an_offline_board_takes_no_new_jobs(sched):
    add_d(sched)
    sched.add_board(Board(BoardSpec("agent1", "remote", "sm_90a"), Recorder()))
    sched.set_offline("agent1", "agent disconnected")
    with pytest.raises(JobError, match="agent disconnected"):
        sched.submit(job("x", board="agent1"), "c")


def test_a_remote_board_runs_only_jobs_that_ask_for_it(sched):
    """Issue 11: a registered board never receives other clients' ordinary jobs."""
    add_d(sched)
    rec = Recorder()
    rec.release.set()
    sched.add_board(Board(BoardSpec("aaa-agent", "remote", "sm_90a", tags=["edge", "remote"]),
                          rec))
    with pytest.raises(JobError, match="no board for target 'sm_90a'"):
        sched.pick_board(job("plain"))  # the only board is remote: not chosen unasked
    local = Recorder()
    local.release.set()
    sched.add_board(Board(BoardSpec("zzz-local", "fake", "sm_90a"), local))
    assert sched.pick_board(job("plain")).name == "zzz-local"  # despite the name order
    assert sched.pick_board(job("tagged", tags=["edge"])).name == "aaa-agent"
    assert sched.pick_board(job("named", board="aaa-agent")).name == "aaa-agent"
    jid = sched.submit(job("named", board="aaa-agent"), "c")
    wait_done(sched, [jid])
    r = result(sched, jid)
    assert r["provenance"] == {"kind": "remote", "board": "aaa-agent", "agent": "?",
                               "agent_board_type": ""}


def test_a_stuck_board_is_reported_not_serving(sched, monkeypatch):
    import kcoral.scheduler as ks
    monkeypatch.setattr(ks, "HEALTH_MARGIN_S", 0.0)
    add_d(sched)
    rec = Recorder()  # blocks until released: a board that ignores its budget
    sched.add_board(Board(BoardSpec("b0", "fake", "sm_90a"), rec))
    assert sched.board_health() == {"b0": None}
    jid = sched.submit(job("hang", budgets={"exec_s": 0.2}), "c")
    deadline = time.time() + 5
    while not sched.board_health()["b0"] and time.time() < deadline:
        time.sleep(0.05)
    assert sched.board_health()["b0"].startswith(f"stuck: job {jid} has run")
    rec.release.set()
    wait_done(sched, [jid])
    assert sched.board_health() == {"b0": None}


def test_queued_jobs_expire_while_their_board_is_offline(sched):
    add_d(sched)
    rec = Recorder()
    sched.add_board(Board(BoardSpec("agent1", "remote", "sm_90a"), rec))
    first = sched.submit(job("first", board="agent1"), "c")
    while sched.records[first].state != "running":  # the board is busy (rec blocks)
        time.sleep(0.01)
    late = sched.submit(job("late", board="agent1", budgets={"queue_s": 0.3}), "c")
    sched.set_offline("agent1", "agent disconnected")  # the agent drops mid-job
    rec.release.set()
    wait_done(sched, [first, late])
    r = result(sched, late)
    assert sched.store.get(late)["state"] == "failed" and r["error"]["type"] == "timeout.queue"
    assert "agent disconnected" in r["error"]["message"]
    assert rec.order == ["first"]
