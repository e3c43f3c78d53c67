"""The gRPC servicer: translates between the wire (kcoral.proto) and the domain objects.

No scheduling, measurement or storage logic lives here. Errors become status codes with
``context.abort(code, details)`` and a typed refusal in the trailing metadata
(`kcoral.errors.Refusal`, with the first offending field): a job that fails validation is
INVALID_ARGUMENT naming the field, an unknown job NOT_FOUND, a daemon that is shutting down
UNAVAILABLE, an incompatible agent FAILED_PRECONDITION.
"""

from __future__ import annotations

import json
import logging
import queue
import threading

import grpc

from . import PROTOCOL_VERSION, __version__
from ._proto import kcoral_pb2 as pb
from ._proto import kcoral_pb2_grpc as pbg
from .blobs import CHUNK, ChunkAssembler, chunks
from .boards.remote import AgentHello, join, leave
from .errors import FIELD_KEY, REFUSAL_KEY, AgentRefused, BlobError, JobError, Refusal
from .job import Job, parse_json
from .wire import STATE_ENUM, STATE_NAME

log = logging.getLogger("kcoral")

# the status code each refusal travels with
CODES = {Refusal.INVALID_REQUEST: grpc.StatusCode.INVALID_ARGUMENT,
         Refusal.INVALID_JOB: grpc.StatusCode.INVALID_ARGUMENT,
         Refusal.NO_BOARD: grpc.StatusCode.INVALID_ARGUMENT,
         Refusal.SHUTTING_DOWN: grpc.StatusCode.UNAVAILABLE,
         Refusal.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
         Refusal.UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
         Refusal.PERMISSION_DENIED: grpc.StatusCode.PERMISSION_DENIED,
         Refusal.QUOTA: grpc.StatusCode.RESOURCE_EXHAUSTED,
         Refusal.IDEMPOTENCY_CONFLICT: grpc.StatusCode.FAILED_PRECONDITION,
         Refusal.AGENT_INCOMPATIBLE: grpc.StatusCode.FAILED_PRECONDITION,
         Refusal.AGENT_CONFLICT: grpc.StatusCode.ALREADY_EXISTS}


def refuse(context, refusal: Refusal, message: str, field: str = ""):
    """Abort the RPC with `refusal`'s status code, `message`, and the typed trailers."""
    md = [(REFUSAL_KEY, str(refusal))] + ([(FIELD_KEY, field)] if field else [])
    context.set_trailing_metadata(md)
    context.abort(CODES[Refusal(refusal)], message)


def _event(ev: dict) -> pb.JobEvent:
    return pb.JobEvent(job_id=ev["job_id"], state=STATE_ENUM[ev["state"]],
                       queue_position=ev.get("queue_position", 0), board=ev.get("board", ""),
                       message=ev.get("message", ""),
                       result_json=json.dumps(ev["result"]) if ev.get("result") else "",
                       time=ev.get("time", 0.0))


def _info(row: dict) -> pb.JobInfo:
    return pb.JobInfo(job_id=row["job_id"], client=row["client"],
                      state=STATE_ENUM[row["state"]], board=row["board"],
                      job_json=row["job_json"], result_json=row["result_json"],
                      submitted=row["submitted"], started=row["started"],
                      finished=row["finished"], name=row["name"], target=row["target"])


class KCoralServicer(pbg.KCoralServicer):
    def __init__(self, daemon):
        self.d = daemon

    # --- blobs --------------------------------------------------------------------------------
    def FindMissingBlobs(self, request, context):
        try:
            return pb.FindMissingBlobsResponse(missing=self.d.blobs.missing(request.digests))
        except BlobError as e:
            refuse(context, Refusal.INVALID_REQUEST, f"digests: {e}", "digests")

    def UploadBlobs(self, request_iterator, context):
        asm = ChunkAssembler(self.d.blobs, self.d.max_blob_bytes)
        try:
            for ch in request_iterator:
                asm.feed(ch.digest, ch.size, ch.offset, ch.data, ch.last)
            return pb.UploadBlobsResponse(stored=asm.finish())
        except BlobError as e:
            refuse(context, Refusal.INVALID_REQUEST, f"blob: {e}", "blob")

    def DownloadBlob(self, request, context):
        try:
            data = self.d.blobs.get(request.digest)
        except BlobError as e:
            refuse(context, Refusal.NOT_FOUND, str(e), "digest")
        for dg, size, off, part, last in chunks(data, request.digest, CHUNK):
            yield pb.BlobChunk(digest=dg, size=size, offset=off, data=part, last=last)

    # --- jobs ---------------------------------------------------------------------------------
    def Submit(self, request, context):
        try:
            job = Job.from_json(parse_json(request.job_json, "job_json"))
            job_id = self.d.scheduler.submit(job, request.client or context.peer(),
                                             request.idempotency_key)
        except JobError as e:
            refuse(context, e.refusal, f"invalid job: {e}", e.field)
        except RuntimeError as e:
            refuse(context, Refusal.SHUTTING_DOWN, str(e))
        yield from self._stream(job_id, context)

    def Watch(self, request, context):
        yield from self._stream(request.job_id, context)

    def _stream(self, job_id, context):
        try:
            for ev in self.d.scheduler.watch(job_id, alive=context.is_active):
                yield _event(ev)
        except KeyError:
            refuse(context, Refusal.NOT_FOUND, f"no job {job_id!r}", "job_id")

    def Cancel(self, request, context):
        try:
            ok, state = self.d.scheduler.cancel(request.job_id)
        except KeyError:
            refuse(context, Refusal.NOT_FOUND, f"no job {request.job_id!r}", "job_id")
        return pb.CancelResponse(cancelled=ok, state=state)

    def GetJob(self, request, context):
        row = self.d.store.get(request.job_id)
        if row is None:
            refuse(context, Refusal.NOT_FOUND, f"no job {request.job_id!r}", "job_id")
        return _info(row)

    def ListJobs(self, request, context):
        rows = self.d.store.list(request.limit or 50, request.client, request.state)
        return pb.ListJobsResponse(jobs=[_info(r) for r in rows])

    def ListBoards(self, request, context):
        out = []
        for b in self.d.scheduler.board_rows():
            out.append(pb.BoardInfo(name=b["name"], type=b["type"], target=b["target"],
                                    tags=b["tags"], state=b["state"],
                                    queue_length=b["queue_length"],
                                    current_job=b["current_job"],
                                    properties_json=json.dumps(b["properties"], default=str),
                                    unavailable_reason=b["unavailable"]))
        return pb.ListBoardsResponse(boards=out)

    def Status(self, request, context):
        s = self.d.scheduler.status()
        return pb.StatusResponse(version=__version__, uptime_s=s["uptime_s"],
                                 queued=s["queued"], running=s["running"],
                                 jobs_total=s["jobs_total"], address=self.d.address)

    # --- agents -------------------------------------------------------------------------------
    def AgentConnect(self, request_iterator, context):
        try:
            first = next(request_iterator)
        except StopIteration:
            return
        if first.WhichOneof("kind") != "hello":
            refuse(context, Refusal.INVALID_REQUEST, "the first agent message must be "
                   "AgentHello", "hello")
        h = first.hello
        try:
            props = json.loads(h.properties_json or "{}")
            if not isinstance(props, dict):
                raise ValueError(f"expected a JSON object, got {type(props).__name__}")
        except (ValueError, RecursionError) as e:
            refuse(context, Refusal.INVALID_REQUEST, f"AgentHello.properties_json: {e}",
                   "AgentHello.properties_json")
        hello = AgentHello(h.name, h.target, list(h.tags), props, dict(h.versions),
                           h.board_type, context.peer())
        try:
            link = join(self.d.scheduler, hello)
        except AgentRefused as e:
            log.warning("refused agent %r: %s", h.name, e)
            refuse(context, Refusal(e.refusal), str(e))
        log.info("agent %s joined from %s as a %s board", h.name, context.peer(), h.target)

        def pump():
            try:
                for m in request_iterator:
                    kind = m.WhichOneof("kind")
                    if kind in ("progress", "result"):
                        r = getattr(m, kind)
                        try:
                            res = json.loads(r.result_json) if r.result_json else None
                        except ValueError as e:
                            res = {"status": "failed", "error": {
                                "type": "internal.agent", "message": f"result_json: {e}"}}
                        link.deliver(kind, r.job_id, STATE_NAME.get(r.state, "running"),
                                     r.message, res)
            except grpc.RpcError:
                pass
            finally:
                link.disconnect()

        threading.Thread(target=pump, daemon=True, name=f"kcoral-agent-{h.name}").start()
        context.add_callback(link.disconnect)
        yield pb.DaemonMessage(welcome=pb.AgentWelcome(board=h.name, protocol=PROTOCOL_VERSION))
        try:
            while link.connected and context.is_active():
                try:
                    item = link.outbox.get(timeout=0.5)
                except queue.Empty:
                    continue
                if item is None:
                    break
                job_id, doc = item
                yield pb.DaemonMessage(work=pb.AgentWork(job_id=job_id,
                                                         job_json=json.dumps(doc)))
        finally:
            leave(self.d.scheduler, link)
            log.info("agent %s left", h.name)
