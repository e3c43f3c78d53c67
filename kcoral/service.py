"""The gRPC servicer (grpc.aio): translates between the wire (kcoral.proto) and the domain.

No scheduling, measurement or storage logic lives here. Every call is authenticated first
(`kcoral.identity`: the caller's name and role come from its credential), every request message
is decoded defensively (garbage is INVALID_ARGUMENT, never INTERNAL), and every refusal is a
status code plus the typed trailers (`kcoral.errors.Refusal` and the first offending field).

Why asyncio: an open Submit or Watch stream is a coroutine waiting on a queue, not a thread, so
hundreds of idle streams cost no thread and cannot starve Status, health or other RPCs. Domain
calls that block (SQLite, files, the scheduler's lock) run on a small thread pool.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import json
import logging
import queue

import grpc
from google.protobuf.message import DecodeError

from . import PROTOCOL_VERSION, __version__
from ._proto import kcoral_pb2 as pb
from .blobs import CHUNK
from .boards.remote import AgentHello, join, leave
from .errors import (
    FIELD_KEY, REFUSAL_KEY, AgentRefused, BlobError, JobError, QuotaError, Refusal,
)
from .identity import AuthError
from .job import STATES, TERMINAL, Job, parse_json
from .wire import STATE_ENUM, STATE_NAME

log = logging.getLogger("kcoral")

SERVICE = "kcoral.v1.KCoral"
MAX_DIGESTS = 10000  # per FindMissingBlobs

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


async def refuse(context, refusal, message: str, field: str = ""):
    """Abort the RPC with `refusal`'s status code, `message`, and the typed trailers."""
    refusal = Refusal(refusal)
    md = ((REFUSAL_KEY, refusal.value),) + (((FIELD_KEY, field),) if field else ())
    await context.abort(CODES[refusal], message, trailing_metadata=md)


class Malformed:
    """A request message that would not decode (what the handler sees instead)."""

    def __init__(self, type_name: str, error: str):
        self.type_name, self.error = type_name, error


def _decoder(cls):
    def decode(data: bytes):
        try:
            return cls.FromString(data)
        except (DecodeError, ValueError, RecursionError) as e:
            return Malformed(cls.DESCRIPTOR.full_name, str(e)[:200])
    return decode


def _event(ev: dict) -> pb.JobEvent:
    prov = ev.get("provenance") or {}
    return pb.JobEvent(job_id=ev["job_id"], state=STATE_ENUM[ev["state"]],
                       queue_position=ev.get("queue_position", 0), board=ev.get("board", ""),
                       message=ev.get("message", ""),
                       result_json=json.dumps(ev["result"]) if ev.get("result") else "",
                       time=ev.get("time", 0.0) or 0.0,
                       provenance=pb.Provenance(kind=prov.get("kind", ""),
                                                board=prov.get("board", ""),
                                                agent=prov.get("agent", "")))


def _info(row: dict) -> pb.JobInfo:
    return pb.JobInfo(job_id=row["job_id"], client=row["client"],
                      state=STATE_ENUM[row["state"]], board=row["board"],
                      job_json=row["job_json"], result_json=row["result_json"],
                      submitted=row["submitted"], started=row["started"],
                      finished=row["finished"], name=row["name"], target=row["target"])


class KCoralServicer:
    """The KCoral service's handlers; `generic_handler()` wires them with authentication and
    defensive decoding. Each handler gets ``(request, context, who)``."""

    def __init__(self, daemon):
        self.d = daemon
        self.open_streams: "collections.Counter[str]" = collections.Counter()

    async def _run(self, fn, *args):
        """A blocking domain call, off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(
            self.d.pool, functools.partial(fn, *args))

    # --- blobs --------------------------------------------------------------------------------
    async def FindMissingBlobs(self, request, context, who):
        await self._need(context, who, "blobs")
        if len(request.digests) > MAX_DIGESTS:
            await refuse(context, Refusal.INVALID_REQUEST, f"digests: more than {MAX_DIGESTS}",
                         "digests")
        try:
            missing = await self._run(self.d.access.missing_for, who, list(request.digests))
        except BlobError as e:
            await refuse(context, Refusal.INVALID_REQUEST, f"digests: {e}", "digests")
        return pb.FindMissingBlobsResponse(missing=missing)

    async def UploadBlobs(self, request_iterator, context, who):
        await self._need(context, who, "blobs")
        asm = self.d.assembler(who)
        try:
            async for ch in request_iterator:
                if isinstance(ch, Malformed):
                    await refuse(context, Refusal.INVALID_REQUEST, f"BlobChunk: not a valid "
                                 f"{ch.type_name}: {ch.error}", "BlobChunk")
                await self._run(asm.feed, ch.digest, ch.size, ch.offset, ch.data, ch.last)
            stored = asm.finish()
        except QuotaError as e:
            asm.abort()
            await refuse(context, Refusal.QUOTA, f"blob: {e}", "blob")
        except BlobError as e:
            asm.abort()
            await refuse(context, Refusal.INVALID_REQUEST, f"blob: {e}", "blob")
        except BaseException:  # cancelled or broken stream: nothing half-written stays
            asm.abort()
            raise
        await self._run(self.d.access.record, who, asm.stored)
        return pb.UploadBlobsResponse(stored=stored)

    async def DownloadBlob(self, request, context, who):
        dg = request.digest
        ok = await self._run(self._may_download, who, dg)
        if not ok:
            await refuse(context, Refusal.NOT_FOUND, f"blob {dg[:80]!r} is not in the store",
                         "digest")
        size = await self._run(self.d.blobs.size, dg)
        with open(self.d.blobs.path(dg), "rb") as f:
            off = 0
            while True:
                part = await self._run(f.read, CHUNK)
                last = off + len(part) >= size
                yield pb.BlobChunk(digest=dg, size=size, offset=off, data=part, last=last)
                off += len(part)
                if last or not part:
                    return

    def _may_download(self, who, dg) -> bool:
        try:
            if not self.d.blobs.has(dg):
                return False
        except BlobError:
            return False
        return self.d.access.may_download(who, dg, list(self.d.scheduler.boards.values()))

    # --- jobs ---------------------------------------------------------------------------------
    async def Submit(self, request, context, who):
        await self._need(context, who, "jobs")
        if len(request.idempotency_key) > 128:
            await refuse(context, Refusal.INVALID_REQUEST, "idempotency_key: longer than 128 "
                         "characters", "idempotency_key")
        if not request.job_json:
            await refuse(context, Refusal.INVALID_REQUEST, "job_json: empty (a SubmitRequest "
                         "carries the job as JSON)", "job_json")
        async with self._stream_slot(context, who):
            try:
                job = await self._run(_parse_job, request.job_json)
                await self._run(self.d.access.check_job, who, job)
                job_id = await self._run(self.d.scheduler.submit, job, who.name,
                                         request.idempotency_key)
            except JobError as e:
                await refuse(context, e.refusal, f"invalid job: {e}", e.field)
            except RuntimeError as e:
                await refuse(context, Refusal.SHUTTING_DOWN, str(e))
            async for ev in self._stream(job_id, context):
                yield ev

    async def Watch(self, request, context, who):
        await self._visible_job(context, who, request.job_id)
        async with self._stream_slot(context, who):
            async for ev in self._stream(request.job_id, context):
                yield ev

    async def _visible_job(self, context, who, job_id: str):
        """The job's row when `who` may see it (its own job, or any job for an operator);
        otherwise NOT_FOUND, so a client cannot learn that another client's job exists."""
        await self._need(context, who, "jobs")
        row = await self._run(self.d.scheduler.job_row, job_id, who)
        if row is None:
            await refuse(context, Refusal.NOT_FOUND, f"no job {job_id[:80]!r}", "job_id")
        return row

    async def _stream(self, job_id, context):
        loop = asyncio.get_running_loop()
        q: asyncio.Queue = asyncio.Queue()
        try:
            events, unsubscribe = await self._run(
                self.d.scheduler.follow, job_id,
                lambda ev: loop.call_soon_threadsafe(q.put_nowait, ev))
        except KeyError:
            await refuse(context, Refusal.NOT_FOUND, f"no job {job_id!r}", "job_id")
        try:
            for ev in events:
                yield _event(ev)
                if ev["state"] in TERMINAL:
                    return
            while True:
                ev = await q.get()
                yield _event(ev)
                if ev["state"] in TERMINAL:
                    return
        finally:
            await self._run(unsubscribe)

    def _stream_slot(self, context, who):
        return _StreamSlot(self, context, who)

    async def Cancel(self, request, context, who):
        await self._visible_job(context, who, request.job_id)
        ok, state = await self._run(self.d.scheduler.cancel, request.job_id)
        return pb.CancelResponse(cancelled=ok, state=state)

    async def GetJob(self, request, context, who):
        row = await self._visible_job(context, who, request.job_id)
        return _info(row)

    async def ListJobs(self, request, context, who):
        await self._need(context, who, "jobs")
        if request.state and request.state not in STATES:
            await refuse(context, Refusal.INVALID_REQUEST, f"state: {request.state[:40]!r} is "
                         f"not one of {list(STATES)}", "state")
        if request.limit < 0 or request.limit > 1000:
            await refuse(context, Refusal.INVALID_REQUEST, f"limit: {request.limit} is outside "
                         f"0..1000", "limit")
        client = request.client if who.operator else who.name  # a client sees its own only
        rows = await self._run(self.d.store.list, request.limit or 50, client, request.state)
        return pb.ListJobsResponse(jobs=[_info(r) for r in rows])

    async def ListBoards(self, request, context, who):
        await self._need(context, who, "read")
        out = []
        for b in await self._run(self.d.scheduler.board_rows):
            out.append(pb.BoardInfo(name=b["name"], type=b["type"], target=b["target"],
                                    tags=b["tags"], state=b["state"],
                                    queue_length=b["queue_length"],
                                    current_job=b["current_job"],
                                    properties_json=json.dumps(b["properties"], default=str),
                                    unavailable_reason=b["unavailable"]))
        return pb.ListBoardsResponse(boards=out)

    async def Status(self, request, context, who):
        await self._need(context, who, "read")
        s = await self._run(self.d.scheduler.status)
        return pb.StatusResponse(version=__version__, uptime_s=s["uptime_s"],
                                 queued=s["queued"], running=s["running"],
                                 jobs_total=s["jobs_total"], address=self.d.address)

    # --- agents -------------------------------------------------------------------------------
    async def AgentConnect(self, request_iterator, context, who):
        if not who.may("boards"):
            await refuse(context, Refusal.PERMISSION_DENIED, f"{who.name!r} ({who.role}) may not "
                         f"register boards: that needs an agent or operator credential")
        it = request_iterator.__aiter__()
        try:
            first = await it.__anext__()
        except StopAsyncIteration:
            return
        if isinstance(first, Malformed) or first.WhichOneof("kind") != "hello":
            await refuse(context, Refusal.INVALID_REQUEST, "the first agent message must be "
                         "AgentHello", "hello")
        h = first.hello
        try:
            props = parse_json(h.properties_json or "{}", "AgentHello.properties_json")
            if not isinstance(props, dict):
                raise JobError([("AgentHello.properties_json", "expected a JSON object")])
        except JobError as e:
            await refuse(context, Refusal.INVALID_REQUEST, str(e), "AgentHello.properties_json")
        hello = AgentHello(h.name, h.target, list(h.tags), props, dict(h.versions),
                           h.board_type, context.peer())
        try:
            link = await self._run(join, self.d.scheduler, hello, who.name)
        except AgentRefused as e:
            log.warning("refused agent %r (%s): %s", h.name[:64], who.name, e)
            await refuse(context, e.refusal, str(e))
        log.info("agent %s (%s) joined from %s as a %s board", h.name, who.name, context.peer(),
                 h.target)

        async def pump():
            try:
                async for m in it:
                    kind = None if isinstance(m, Malformed) else m.WhichOneof("kind")
                    if kind in ("progress", "result"):
                        r = getattr(m, kind)
                        try:
                            res = parse_json(r.result_json, "result_json") if r.result_json \
                                else None
                        except JobError as e:
                            res = {"status": "failed", "error": {
                                "type": "internal.agent", "message": str(e)}}
                        link.deliver(kind, r.job_id, STATE_NAME.get(r.state, "running"),
                                     r.message[:2000], res)
            except (grpc.RpcError, asyncio.CancelledError):
                pass
            finally:
                link.disconnect()

        reader = asyncio.ensure_future(pump())
        try:
            yield pb.DaemonMessage(welcome=pb.AgentWelcome(board=h.name,
                                                           protocol=PROTOCOL_VERSION))
            while link.connected:
                try:
                    item = await self._run(link.outbox.get, True, 0.5)
                except queue.Empty:
                    continue
                if item is None:
                    break
                job_id, doc = item
                yield pb.DaemonMessage(work=pb.AgentWork(job_id=job_id,
                                                         job_json=json.dumps(doc)))
        finally:
            reader.cancel()
            await self._run(leave, self.d.scheduler, link)
            log.info("agent %s left", h.name)

    # --- plumbing -----------------------------------------------------------------------------
    async def _need(self, context, who, what: str) -> None:
        if not who.may(what):
            await refuse(context, Refusal.PERMISSION_DENIED, f"{who.name!r} ({who.role}) may not "
                         f"do this (needs the {what!r} permission)")

    def generic_handler(self) -> grpc.GenericRpcHandler:
        """Every method of the KCoral service, authenticated and decoded defensively."""
        handlers = {}
        for m in pb.DESCRIPTOR.services_by_name["KCoral"].methods:
            req, resp = getattr(pb, m.input_type.name), getattr(pb, m.output_type.name)
            fn = getattr(self, m.name)
            kw = dict(request_deserializer=_decoder(req),
                      response_serializer=resp.SerializeToString)
            if m.client_streaming and m.server_streaming:
                h = grpc.stream_stream_rpc_method_handler(self._wrap_gen(fn), **kw)
            elif m.client_streaming:
                h = grpc.stream_unary_rpc_method_handler(self._wrap(fn), **kw)
            elif m.server_streaming:
                h = grpc.unary_stream_rpc_method_handler(self._wrap_gen(fn), **kw)
            else:
                h = grpc.unary_unary_rpc_method_handler(self._wrap(fn), **kw)
            handlers[m.name] = h
        return grpc.method_handlers_generic_handler(SERVICE, handlers)

    async def _identify(self, request, context):
        label = getattr(request, "client", "") if isinstance(request, pb.SubmitRequest) else ""
        try:
            return self.d.credentials.identify(context.invocation_metadata(), label)
        except AuthError as e:
            await refuse(context, e.refusal, str(e))

    async def _check_request(self, request, context) -> None:
        if isinstance(request, Malformed):
            await refuse(context, Refusal.INVALID_REQUEST, f"request: not a valid "
                         f"{request.type_name}: {request.error}", "request")

    def _wrap(self, fn):
        async def behavior(request, context):
            who = await self._identify(request, context)
            await self._check_request(request, context)
            return await fn(request, context, who)
        return behavior

    def _wrap_gen(self, fn):
        async def behavior(request, context):
            who = await self._identify(request, context)
            await self._check_request(request, context)
            async for x in fn(request, context, who):
                yield x
        return behavior


class _StreamSlot:
    """One open Submit/Watch stream of `who`: refused past the per-client or total limit, so no
    client can hold an unbounded number (RESOURCE_EXHAUSTED, ``quota``)."""

    def __init__(self, svc, context, who):
        self.svc, self.context, self.who = svc, context, who

    async def __aenter__(self):
        n = self.svc.open_streams
        if n[self.who.name] >= self.svc.d.max_streams_per_client or \
                sum(n.values()) >= self.svc.d.max_streams:
            await refuse(self.context, Refusal.QUOTA, f"too many open streams (client "
                         f"{self.who.name!r} has {n[self.who.name]}, at most "
                         f"{self.svc.d.max_streams_per_client}; {sum(n.values())} in all, at "
                         f"most {self.svc.d.max_streams})")
        n[self.who.name] += 1
        return self

    async def __aexit__(self, *exc):
        n = self.svc.open_streams
        n[self.who.name] -= 1
        if n[self.who.name] <= 0:
            del n[self.who.name]
        return False


def _parse_job(text: str) -> Job:
    return Job.from_json(parse_json(text, "job_json"))
