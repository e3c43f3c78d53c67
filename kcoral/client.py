"""The client library: upload what the daemon lacks, submit, follow progress, read history.

    with KCoralClient("127.0.0.1:50051", token=...) as c:
        mod = c.put_blob(cubin)                       # local digest; uploaded on submit
        a = c.put_array(np.ones(4096, np.float32))
        result = c.run(job_doc, on_event=print)       # blocks until done/failed

Errors from the daemon are raised as `KCoralError` carrying the gRPC status code name, the
daemon's message (which names the offending field for a rejected job), and the typed refusal
(`kcoral.errors.Refusal`) and field the daemon sent beside it: switch on ``e.refusal``.

The client library depends on the protocol (`kcoral._proto`, `kcoral.wire`), the job model
(`kcoral.job`) and the blob helpers only, never on the daemon's modules.
"""

from __future__ import annotations

import json
import time
import uuid

import grpc

from ._proto import kcoral_pb2 as pb
from ._proto import kcoral_pb2_grpc as pbg
from .auth import channel
from .blobs import CHUNK, array_bytes, chunks, digest
from .errors import KCoralError
from .job import TERMINAL, Job
from .wire import error_from_rpc as _wrap
from .wire import state_name as _state

__all__ = ["KCoralClient", "KCoralError", "TERMINAL"]

RETRIES = 3  # a Submit refused UNAVAILABLE (no refusal code: the daemon never answered) retries


class KCoralClient:
    def __init__(self, address: str, token: "str | None" = None, ca_file: "str | None" = None,
                 client_name: "str | None" = None, timeout: float = 30.0):
        self.address = address
        self.channel = channel(address, token, ca_file)
        self.stub = pbg.KCoralStub(self.channel)
        self.client_name = client_name or f"client-{uuid.uuid4().hex[:8]}"
        self.timeout = timeout
        self._pending: dict[str, bytes] = {}

    def close(self) -> None:
        self.channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- blobs --------------------------------------------------------------------------------
    def put_blob(self, data: bytes) -> str:
        """Register bytes to upload before the next submit (only if the daemon lacks them)."""
        dg = digest(data)
        self._pending[dg] = data
        return dg

    def put_blobs(self, blobs: dict) -> None:
        """Register several blobs (digest -> bytes) to upload before the next submit."""
        self._pending.update(blobs)

    def put_array(self, a) -> str:
        return self.put_blob(array_bytes(a))

    def upload(self, blobs: "dict | None" = None) -> list:
        """Upload the daemon's missing blobs among `blobs` (default: everything put so far)."""
        blobs = self._pending if blobs is None else blobs
        if not blobs:
            return []
        try:
            missing = list(self.stub.FindMissingBlobs(
                pb.FindMissingBlobsRequest(digests=list(blobs)), timeout=self.timeout).missing)
            if missing:
                def frames():
                    for dg in missing:
                        for d, size, off, part, last in chunks(blobs[dg], dg, CHUNK):
                            yield pb.BlobChunk(digest=d, size=size, offset=off, data=part,
                                               last=last)
                self.stub.UploadBlobs(frames(), timeout=max(self.timeout, 300))
        except grpc.RpcError as e:
            raise _wrap(e) from None
        if blobs is self._pending:
            self._pending = {}
        return missing

    def download(self, dg: str) -> bytes:
        try:
            parts = [c.data for c in self.stub.DownloadBlob(pb.DownloadBlobRequest(digest=dg),
                                                            timeout=max(self.timeout, 300))]
        except grpc.RpcError as e:
            raise _wrap(e) from None
        data = b"".join(parts)
        if digest(data) != dg:
            raise KCoralError("DATA_LOSS", f"blob {dg}: received bytes hash to {digest(data)}")
        return data

    # --- jobs ---------------------------------------------------------------------------------
    def submit(self, job, idempotency_key: str = "", timeout: "float | None" = None,
               retries: int = RETRIES):
        """Upload pending blobs, submit `job` (a `kcoral.job.Job` or its JSON document), and
        yield progress events as dicts until terminal.

        Every submission carries an idempotency key (a fresh one unless given), and a Submit
        that fails with UNAVAILABLE before its first event is retried with the same key: the
        daemon returns the job it already accepted, never a duplicate. A stream that breaks
        after the job was accepted is resumed with Watch."""
        self.upload()
        doc = job.to_doc() if isinstance(job, Job) else job
        key = idempotency_key or uuid.uuid4().hex
        req = pb.SubmitRequest(job_json=json.dumps(doc), client=self.client_name,
                               idempotency_key=key)
        job_id, attempt = None, 0
        while True:
            try:
                call = self.stub.Submit(req, timeout=timeout) if job_id is None else \
                    self.stub.Watch(pb.JobRef(job_id=job_id), timeout=timeout)
                for ev in call:
                    e = _ev(ev)
                    if job_id is not None and e["state"] == "queued" and attempt:
                        continue  # resumed: the client saw the queue already
                    job_id = e["job_id"]
                    yield e
                    if e["state"] in TERMINAL:
                        return
                return
            except grpc.RpcError as e:
                err = _wrap(e)
                if err.code != "UNAVAILABLE" or err.refusal or attempt >= retries:
                    raise err from None
                attempt += 1
                time.sleep(min(0.2 * 2 ** attempt, 2.0))

    def run(self, job, on_event=None, timeout: "float | None" = None) -> dict:
        """Submit and block until the job ends; return the final event (``result`` inside)."""
        last = None
        for ev in self.submit(job, timeout=timeout):
            last = ev
            if on_event:
                on_event(ev)
        if last is None or last["state"] not in TERMINAL:
            raise KCoralError("UNAVAILABLE", f"the stream ended before the job finished "
                              f"(last state {last and last['state']!r}); "
                              f"follow it with watch({last and last['job_id']!r})")
        return last

    def watch(self, job_id: str, timeout: "float | None" = None):
        try:
            for ev in self.stub.Watch(pb.JobRef(job_id=job_id), timeout=timeout):
                yield _ev(ev)
        except grpc.RpcError as e:
            raise _wrap(e) from None

    def cancel(self, job_id: str) -> dict:
        r = self._call(self.stub.Cancel, pb.JobRef(job_id=job_id))
        return {"cancelled": r.cancelled, "state": r.state}

    def get_job(self, job_id: str) -> dict:
        return _job(self._call(self.stub.GetJob, pb.JobRef(job_id=job_id)))

    def jobs(self, limit: int = 50, client: str = "", state: str = "") -> list:
        r = self._call(self.stub.ListJobs, pb.ListJobsRequest(limit=limit, client=client,
                                                             state=state))
        return [_job(j) for j in r.jobs]

    def boards(self) -> list:
        r = self._call(self.stub.ListBoards, pb.ListBoardsRequest())
        return [{"name": b.name, "type": b.type, "target": b.target, "tags": list(b.tags),
                 "state": b.state, "queue_length": b.queue_length,
                 "current_job": b.current_job,
                 "properties": json.loads(b.properties_json or "{}"),
                 "unavailable": b.unavailable_reason} for b in r.boards]

    def status(self) -> dict:
        r = self._call(self.stub.Status, pb.StatusRequest())
        return {"version": r.version, "uptime_s": r.uptime_s, "queued": r.queued,
                "running": r.running, "jobs_total": r.jobs_total, "address": r.address}

    def _call(self, fn, req):
        try:
            return fn(req, timeout=self.timeout)
        except grpc.RpcError as e:
            raise _wrap(e) from None


def _ev(ev) -> dict:
    p = ev.provenance
    return {"job_id": ev.job_id, "state": _state(ev.state), "queue_position": ev.queue_position,
            "board": ev.board, "message": ev.message, "time": ev.time,
            "provenance": {"kind": p.kind, "board": p.board, "agent": p.agent} if p.kind
            else None,
            "result": json.loads(ev.result_json) if ev.result_json else None}


def _job(j) -> dict:
    return {"job_id": j.job_id, "client": j.client, "state": _state(j.state), "board": j.board,
            "name": j.name, "target": j.target, "submitted": j.submitted, "started": j.started,
            "finished": j.finished, "job": json.loads(j.job_json) if j.job_json else None,
            "result": json.loads(j.result_json) if j.result_json else None}
