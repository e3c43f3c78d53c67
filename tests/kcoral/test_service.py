"""The daemon over gRPC, in-process on port 0 with fake boards."""

import threading
import time

import grpc
import numpy as np
import pytest

from kcoral.client import KCoralClient, KCoralError

from .conftest import fake_job, start_daemon


def test_progress_stream_and_result(client):
    events = list(client.submit(fake_job(client)))
    states = [e["state"] for e in events]
    assert states[0] == "queued" and states[-1] == "done"
    for s in ("running", "loaded", "correctness", "timing"):
        assert s in states
    order = [states.index(s) for s in ("queued", "running", "loaded", "correctness", "timing",
                                       "done")]
    assert order == sorted(order)
    r = events[-1]["result"]
    assert r["status"] == "ok" and r["verified"] and r["board"] == "fake0"
    assert r["protocol"] == "kcoral-measure/3" and "kcoral" in r["versions"]
    assert r["timing"]["candidate"]["median_ms"] == pytest.approx(0.05, rel=0.05)
    job = client.get_job(events[-1]["job_id"])
    assert job["state"] == "done" and job["result"]["status"] == "ok"
    assert job["job"]["name"] == "vadd-add"


def test_wrong_kernel_reports_correctness_error(client):
    ev = client.run(fake_job(client, op="add_bug"))
    assert ev["state"] == "failed"
    assert ev["result"]["error"]["type"] == "correctness.mismatch"


def test_blob_negotiation_uploads_only_missing(client):
    data = np.arange(3 << 20, dtype=np.uint8).tobytes()  # several frames
    dg = client.put_blob(data)
    assert client.upload() == [dg]
    client.put_blob(data)
    assert client.upload() == []
    assert client.download(dg) == data
    with pytest.raises(KCoralError, match="NOT_FOUND"):
        client.download("0" * 64)


@pytest.mark.parametrize("mutate,field", [
    (lambda d: d.update(target="sm_100a"), "target"),
    (lambda d: d["launches"][0].update(grid=[2 ** 31, 1, 1]), "launches[0].grid"),
    (lambda d: d["buffers"][0].update(shape=[1 << 40]), "buffers[0].shape"),
    (lambda d: d["module"].update(blob="f" * 64), "blobs"),
    (lambda d: d["launches"][0]["args"].append({"buffer": "zz"}), "launches[0].args[4]"),
])
def test_validation_errors_name_the_field(client, mutate, field):
    doc = fake_job(client)
    mutate(doc)
    with pytest.raises(KCoralError) as ei:
        client.run(doc)
    assert ei.value.code == "INVALID_ARGUMENT"
    assert field in ei.value.message


def test_malformed_ptx_is_refused_before_work_starts(client):
    doc = fake_job(client)
    doc["module"] = {"format": "ptx", "blob": client.put_blob(b"this is not ptx")}
    with pytest.raises(KCoralError) as ei:
        client.run(doc)
    assert ei.value.code == "INVALID_ARGUMENT"
    assert "module.blob: malformed PTX: no .version directive" in ei.value.message
    assert client.jobs() == []  # nothing was accepted


def test_malformed_module_is_a_compile_error(client):
    doc = fake_job(client)
    doc["module"]["blob"] = client.put_blob(b"{not json")
    ev = client.run(doc)
    assert ev["result"]["error"]["type"] == "compile.module"


def test_sim_board_refuses_a_job_without_ir(client):
    doc = fake_job(client)
    doc["target"] = "sm_90a"
    doc["board"] = "sim0"  # numsim runs module.ir (tests/kcoral/test_sim_board.py); none here
    with pytest.raises(KCoralError, match=r"unavailable|module\.ir"):
        client.run(doc)


@pytest.mark.parametrize("fake,etype", [({"crash": True}, "runtime.worker-crash"),
                                        ({"fault": True}, "runtime.illegal-address"),
                                        ({"hang": True}, "timeout.exec")])
def test_worker_failure_is_typed_and_the_board_recovers(daemon, client, fake, etype):
    ev = client.run(fake_job(client, fake=fake, budgets={"exec_s": 1.0}))
    assert ev["state"] == "failed"
    assert ev["result"]["error"]["type"] == etype
    assert ev["result"]["worker_restarted"] is True
    # where the job's time went: the worker's run time and its progress events, and a
    # timeout names the last phase the job reached
    assert 0 <= ev["result"]["run_s"] < 30
    if etype == "timeout.exec":
        assert "its last progress, at +" in ev["result"]["error"]["message"]
        assert [e[1] for e in ev["result"]["timeline"]][:1] == ["loaded"]
    after = client.run(fake_job(client))
    assert after["state"] == "done"
    states = [e[1] for e in after["result"]["timeline"]]
    assert states[0] == "loaded" and "correctness" in states and after["result"]["run_s"] > 0
    b = client.boards()[0]
    assert b["properties"]["worker_restarts"] == 1 and b["state"] == "idle"


def test_cancel_running_and_queued(client):
    slow = fake_job(client, fake={"sleep_s": 30})
    got = {}

    def run(key, doc):
        got[key] = client.run(doc)
    t1 = threading.Thread(target=run, args=("slow", slow))
    t1.start()
    deadline = time.time() + 10
    while not client.boards()[0]["current_job"] and time.time() < deadline:
        time.sleep(0.05)
    running = client.boards()[0]["current_job"]
    t2 = threading.Thread(target=run, args=("queued", fake_job(client)))
    t2.start()
    while len(client.jobs(state="queued")) < 1 and time.time() < deadline:
        time.sleep(0.05)
    qid = client.jobs(state="queued")[0]["job_id"]
    assert client.cancel(qid) == {"cancelled": True, "state": "cancelled"}
    assert client.cancel(running)["cancelled"] is True
    t1.join(15)
    t2.join(15)
    assert got["slow"]["state"] == "cancelled" and got["queued"]["state"] == "cancelled"


def test_fairness_two_clients_interleave(daemon):
    a = KCoralClient(daemon.address, client_name="alice")
    b = KCoralClient(daemon.address, client_name="bob")
    try:
        blocker = threading.Thread(target=a.run, args=(fake_job(a, fake={"sleep_s": 1.5}),))
        blocker.start()
        while not daemon.scheduler.board_rows()[0]["current_job"]:
            time.sleep(0.02)
        # alice's burst of 6 is queued before bob's 3; all wait behind the blocker
        threads = [threading.Thread(target=a.run, args=(fake_job(a),)) for _ in range(6)]
        for t in threads:
            t.start()
        while daemon.scheduler.board_rows()[0]["queue_length"] < 6:
            time.sleep(0.02)
        bt = [threading.Thread(target=b.run, args=(fake_job(b),)) for _ in range(3)]
        for t in bt:
            t.start()
        while daemon.scheduler.board_rows()[0]["queue_length"] < 9:
            time.sleep(0.02)
        for t in [blocker] + threads + bt:
            t.join(30)
        rows = sorted(a.jobs(limit=20), key=lambda r: r["started"])
        order = [r["client"] for r in rows][1:]  # after the blocker
        assert len(order) == 9 and all(r["state"] == "done" for r in rows)
        # round-robin: alice and bob alternate while both have jobs waiting
        assert order == ["alice", "bob"] * 3 + ["alice"] * 3, order
    finally:
        a.close()
        b.close()


def test_health_service(daemon):
    hp = pytest.importorskip("grpc_health.v1.health_pb2")
    from grpc_health.v1 import health_pb2_grpc
    with grpc.insecure_channel(daemon.address) as ch:
        r = health_pb2_grpc.HealthStub(ch).Check(hp.HealthCheckRequest(service="kcoral.v1.KCoral"),
                                                 timeout=5)
    assert r.status == hp.HealthCheckResponse.SERVING


def test_unknown_job(client):
    with pytest.raises(KCoralError, match="NOT_FOUND"):
        client.get_job("nope")
    with pytest.raises(KCoralError, match="NOT_FOUND"):
        list(client.watch("nope"))


def test_status_and_boards(client):
    client.run(fake_job(client))
    s = client.status()
    assert s["jobs_total"] == 1 and s["queued"] == 0
    names = {b["name"]: b for b in client.boards()}
    assert names["fake0"]["type"] == "fake"
    # the sim board comes from the numsim distribution's kcoral entry point
    assert names["sim0"]["type"] == "sim" and names["sim0"]["state"] == "idle"


def test_auth(tmp_path):
    d = start_daemon(tmp_path / "s", token="s3cret")
    try:
        for token, ok in ((None, False), ("wrong", False), ("s3cret", True)):
            with KCoralClient(d.address, token=token) as c:
                if ok:
                    assert c.status()["version"]
                    assert c.run(fake_job(c))["state"] == "done"
                else:
                    with pytest.raises(KCoralError) as ei:
                        c.status()
                    assert ei.value.code == "UNAUTHENTICATED"
                    assert ("missing" if token is None else "wrong") in ei.value.message
                    with pytest.raises(KCoralError, match="UNAUTHENTICATED"):
                        list(c.submit(fake_job(c)))
    finally:
        d.stop(1)


def test_beyond_loopback_requires_a_token(tmp_path):
    from kcoral.server import Daemon
    with pytest.raises(ValueError, match="requires a token"):
        Daemon({}, state_dir=tmp_path, host="0.0.0.0", port=0)


def test_deadline_leaves_the_job_running(client):
    doc = fake_job(client, fake={"sleep_s": 1.0})
    with pytest.raises(KCoralError, match="DEADLINE_EXCEEDED"):
        list(client.submit(doc, timeout=0.3))
    rows = client.jobs()
    evs = list(client.watch(rows[0]["job_id"], timeout=10))
    assert evs[-1]["state"] == "done"


def test_graceful_shutdown_marks_running_interrupted(tmp_path):
    d = start_daemon(tmp_path / "s")
    c = KCoralClient(d.address)
    try:
        ids = []

        def go():
            try:
                for ev in c.submit(fake_job(c, fake={"sleep_s": 30})):
                    ids.append(ev["job_id"])
            except KCoralError:
                pass
        t = threading.Thread(target=go)
        t.start()
        deadline = time.time() + 10
        while not (ids and d.scheduler.board_rows()[0]["current_job"]) and \
                time.time() < deadline:
            time.sleep(0.05)
    finally:
        d.stop(0.2)
        c.close()
    t.join(10)
    from kcoral.store import JobStore
    row = JobStore(tmp_path / "s" / "kcoral.sqlite").get(ids[0])
    assert row["state"] == "interrupted"
