"""The gRPC servicer: translates between the wire (kcoral.proto) and the domain objects.

No scheduling, measurement or storage logic lives here. Errors become status codes with
``context.abort(code, details)``: a job that fails validation is INVALID_ARGUMENT naming the
field, an unknown job NOT_FOUND, a daemon that is shutting down UNAVAILABLE, an incompatible agent
FAILED_PRECONDITION.
"""

from __future__ import annotations

import json
import logging
import threading

import grpc

from ._proto import kcoral_pb2 as pb
from ._proto import kcoral_pb2_grpc as pbg
from .blobs import CHUNK, BlobError, ChunkAssembler
from .job import Job, JobError

log = logging.getLogger("kcoral")

STATE_ENUM = {"queued": pb.QUEUED, "running": pb.RUNNING, "loaded": pb.LOADED,
              "correctness": pb.CORRECTNESS, "timing": pb.TIMING, "tools": pb.TOOLS,
              "done": pb.DONE, "failed": pb.FAILED, "cancelled": pb.CANCELLED,
              "interrupted": pb.INTERRUPTED}
STATE_NAME = {v: k for k, v in STATE_ENUM.items()}


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
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"digests: {e}")

    def UploadBlobs(self, request_iterator, context):
        asm = ChunkAssembler(self.d.blobs, self.d.max_blob_bytes)
        try:
            for ch in request_iterator:
                asm.feed(ch.digest, ch.size, ch.offset, ch.data, ch.last)
            return pb.UploadBlobsResponse(stored=asm.finish())
        except BlobError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"blob: {e}")

    def DownloadBlob(self, request, context):
        try:
            data = self.d.blobs.get(request.digest)
        except BlobError as e:
            context.abort(grpc.StatusCode.NOT_FOUND, str(e))
        from .blobs import chunks
        for dg, size, off, part, last in chunks(data, request.digest, CHUNK):
            yield pb.BlobChunk(digest=dg, size=size, offset=off, data=part, last=last)

    # --- jobs ---------------------------------------------------------------------------------
    def Submit(self, request, context):
        try:
            job = Job.from_json(request.job_json)
            job_id = self.d.scheduler.submit(job, request.client or context.peer(),
                                             request.idempotency_key)
        except JobError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"invalid job: {e}")
        except RuntimeError as e:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(e))
        yield from self._stream(job_id, context)

    def Watch(self, request, context):
        yield from self._stream(request.job_id, context)

    def _stream(self, job_id, context):
        try:
            for ev in self.d.scheduler.watch(job_id, alive=context.is_active):
                yield _event(ev)
        except KeyError:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no job {job_id!r}")

    def Cancel(self, request, context):
        try:
            ok, state = self.d.scheduler.cancel(request.job_id)
        except KeyError:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no job {request.job_id!r}")
        return pb.CancelResponse(cancelled=ok, state=state)

    def GetJob(self, request, context):
        row = self.d.store.get(request.job_id)
        if row is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no job {request.job_id!r}")
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
        from . import __version__
        s = self.d.scheduler.status()
        return pb.StatusResponse(version=__version__, uptime_s=s["uptime_s"],
                                 queued=s["queued"], running=s["running"],
                                 jobs_total=s["jobs_total"], address=self.d.address)

    # --- agents -------------------------------------------------------------------------------
    def AgentConnect(self, request_iterator, context):
        from .boards import BoardSpec
        from .boards.remote import RemoteLink, check_versions
        from .scheduler import Board
        try:
            first = next(request_iterator)
        except StopIteration:
            return
        if first.WhichOneof("kind") != "hello":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the first agent message must be "
                          "AgentHello")
        h = first.hello
        why = check_versions(dict(h.versions))
        if why:
            log.warning("refused agent %s: %s", h.name, why)
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, why)
        if not h.name or not h.target:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "AgentHello.name and .target are "
                          "required")
        props = json.loads(h.properties_json or "{}")
        spec = BoardSpec(name=h.name, type="remote", target=h.target, tags=list(h.tags),
                         properties=dict(props, versions=dict(h.versions),
                                         agent_board_type=h.board_type, peer=context.peer()),
                         limits=props.get("limits", {}))
        link = RemoteLink(h.name, props)
        try:
            self.d.scheduler.add_board(Board(spec, link))
        except ValueError as e:
            context.abort(grpc.StatusCode.ALREADY_EXISTS, str(e))
        log.info("agent %s joined from %s as a %s board", h.name, context.peer(), h.target)

        def pump():
            try:
                for m in request_iterator:
                    kind = m.WhichOneof("kind")
                    if kind in ("progress", "result"):
                        r = getattr(m, kind)
                        link.deliver(kind, r.job_id, STATE_NAME.get(r.state, "running"),
                                     r.message,
                                     json.loads(r.result_json) if r.result_json else None)
            except grpc.RpcError:
                pass
            finally:
                link.disconnect()

        threading.Thread(target=pump, daemon=True, name=f"kcoral-agent-{h.name}").start()
        context.add_callback(link.disconnect)
        yield pb.DaemonMessage(welcome=pb.AgentWelcome(board=h.name, protocol="1"))
        try:
            while link.connected and context.is_active():
                try:
                    item = link.outbox.get(timeout=0.5)
                except Exception:
                    continue
                if item is None:
                    break
                job_id, doc = item
                yield pb.DaemonMessage(work=pb.AgentWork(job_id=job_id,
                                                         job_json=json.dumps(doc)))
        finally:
            link.disconnect()
            self.d.scheduler.set_offline(h.name, "agent disconnected")
            log.info("agent %s left", h.name)
