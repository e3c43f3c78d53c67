"""Issue 11: one client must not stall a board or the daemon -- open streams, uploads, memory,
retries, and workers that outlive their daemon."""

import os
import signal
import threading
import time

import grpc
import pytest

from kcoral._proto import kcoral_pb2 as pb
from kcoral.client import KCoralClient
from kcoral.errors import KCoralError

from .conftest import fake_job, serve, start_daemon


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def test_500_idle_streams_do_not_starve_status_or_health(daemon, client):
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    ev = next(client.submit(fake_job(client, fake={"sleep_s": 30})))
    streams = [client.stub.Watch(pb.JobRef(job_id=ev["job_id"]), timeout=60)
               for _ in range(500)]
    try:
        deadline = time.time() + 20
        while sum(daemon.servicer.open_streams.values()) < 500:
            assert time.time() < deadline, daemon.servicer.open_streams
            time.sleep(0.05)
        hs = health_pb2_grpc.HealthStub(client.channel)
        worst = 0.0
        for _ in range(10):
            t0 = time.perf_counter()
            client.status()
            hs.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
            worst = max(worst, time.perf_counter() - t0)
        assert worst < 0.1, f"status + health took {worst * 1e3:.1f} ms with 500 streams"
    finally:
        for s in streams:
            s.cancel()
        client.cancel(ev["job_id"])


def test_streams_per_client_are_limited(tmp_path):
    d = start_daemon(tmp_path / "s", config_server={"max_streams_per_client": 1})
    try:
        with KCoralClient(d.address, client_name="greedy") as c:
            ev = next(c.submit(fake_job(c, fake={"sleep_s": 30})))
            s1 = c.stub.Watch(pb.JobRef(job_id=ev["job_id"]))
            next(s1)
            with pytest.raises(grpc.RpcError) as ei:
                next(c.stub.Watch(pb.JobRef(job_id=ev["job_id"])))
            assert ei.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            with KCoralClient(d.address, client_name="polite") as p:
                deadline = time.time() + 20  # others are served regardless (the board may
                while p.status()["running"] != 1:  # take a moment to start the job)
                    assert time.time() < deadline, p.status()
                    time.sleep(0.05)
            s1.cancel()
            c.cancel(ev["job_id"])
    finally:
        d.stop(1)


def test_uploads_go_to_disk_with_quotas_and_leave_nothing_behind(tmp_path):
    (tmp_path / "s" / "blobs" / "tmp").mkdir(parents=True)
    (tmp_path / "s" / "blobs" / "tmp" / "leftover.part").write_bytes(b"x" * 1000)
    d = start_daemon(tmp_path / "s", config_server={"blob_quota_mb": 4,
                                                     "upload_inflight_mb": 8})
    try:
        assert not (tmp_path / "s" / "blobs" / "tmp" / "leftover.part").exists()
        with KCoralClient(d.address, client_name="u") as c:
            three = os.urandom(3 << 20)
            c.put_blob(three)
            c.upload()
            c.put_blob(os.urandom(2 << 20))  # 3 + 2 MiB: past the 4 MiB quota
            with pytest.raises(KCoralError) as ei:
                c.upload()
            assert ei.value.code == "RESOURCE_EXHAUSTED" and "quota" in ei.value.message

            claim = pb.BlobChunk(digest="f" * 64, size=3 << 30, offset=0, data=b"z" * 1024)
            with pytest.raises(grpc.RpcError) as ei:  # claims 3 GiB: past the cap in flight
                c.stub.UploadBlobs(iter([claim]), timeout=10)
            assert ei.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED

            def frames():  # 2 MiB announced, one frame sent, then the client breaks off
                yield pb.BlobChunk(digest="e" * 64, size=2 << 20, offset=0, data=b"z" * 1024)
                time.sleep(0.5)
                raise RuntimeError("client gone")
            with KCoralClient(d.address, client_name="v") as v:
                with pytest.raises(grpc.RpcError):
                    v.stub.UploadBlobs(frames(), timeout=10)
        time.sleep(0.3)
        assert list((tmp_path / "s" / "blobs" / "tmp").iterdir()) == []
        assert d.access.inflight == 0
    finally:
        d.stop(1)


def test_finished_jobs_leave_memory(daemon, client):
    doc = fake_job(client, n=64, uploaded=False, timing={"enabled": False})
    for _ in range(50):  # warm-up: caches, pools, SQLite pages
        client.run(doc)
    before = _rss_mb()
    for _ in range(400):
        client.run(doc)
    grown = _rss_mb() - before
    assert daemon.scheduler.records == {}
    assert daemon.store.total() == 450
    assert grown < 8, f"{grown:.1f} MB over 400 jobs"  # 24 MB per 1,000 before the fix


def test_a_retried_submit_never_duplicates(client, daemon, monkeypatch):
    real = client.stub.Submit
    calls = []

    class Lost(grpc.RpcError):
        def code(self):
            return grpc.StatusCode.UNAVAILABLE

        def details(self):
            return "connection reset"

        def trailing_metadata(self):
            return ()

    def flaky(req, timeout=None):
        calls.append(req.idempotency_key)
        stream = real(req, timeout=timeout)
        if len(calls) == 1:
            next(stream)  # the daemon accepted (stored) the job ...
            raise Lost()  # ... and the answer was lost
        return stream
    monkeypatch.setattr(client.stub, "Submit", flaky)
    ev = client.run(fake_job(client))
    assert ev["state"] == "done" and len(calls) == 2 and calls[0] == calls[1] != ""
    assert daemon.store.total() == 1


def test_the_same_key_for_another_job_is_refused(client):
    list(client.submit(fake_job(client), idempotency_key="k-1"))
    with pytest.raises(KCoralError) as ei:
        list(client.submit(fake_job(client, n=10), idempotency_key="k-1"))
    assert ei.value.code == "FAILED_PRECONDITION" and ei.value.field == "idempotency_key"


def test_concurrent_retries_store_one_job(client, daemon):
    doc = fake_job(client)
    client.upload()
    ids = []

    def go():
        ids.append(next(client.submit(doc, idempotency_key="same"))["job_id"])
    ts = [threading.Thread(target=go) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert len(set(ids)) == 1 and daemon.store.total() == 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie waiting for its (dead) parent is gone
        return f.read().split()[2] != "Z"


def test_workers_die_with_their_daemon_even_mid_hang(tmp_path):
    p, addr = serve(tmp_path / "state", tmp_path / "port")
    try:
        with KCoralClient(addr) as c:
            next(c.submit(fake_job(c, fake={"hang": True}, budgets={"exec_s": 600})))
            deadline = time.time() + 10
            while not c.boards()[0]["current_job"]:
                assert time.time() < deadline
                time.sleep(0.05)
            pids = [b["properties"]["worker_pid"] for b in c.boards()]
            assert pids and all(pids)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(10)
    deadline = time.time() + 10
    while any(_alive(x) for x in pids):
        assert time.time() < deadline, f"workers {pids} outlived their daemon"
        time.sleep(0.05)
