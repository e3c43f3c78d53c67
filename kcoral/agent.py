"""``kcoral agent``: a board on another host (an edge device such as Jetson Thor, another GPU
server) that dials out to the daemon, so the daemon needs no route to it.

The agent opens its local board through its own worker process (a faulting job kills only that
worker, exactly as on the daemon), announces name, target, tags, device properties and software
versions in `AgentHello`, and then runs the jobs the daemon sends, fetching the blobs it lacks
with DownloadBlob into a local cache. A daemon that finds the versions incompatible refuses the
agent with FAILED_PRECONDITION and a message saying which versions differ; the agent exits then.
"""

from __future__ import annotations

import json
import logging
import pathlib
import queue
import socket
import tempfile
import threading

import grpc

from . import PROTOCOL_VERSION, __version__
from ._proto import kcoral_pb2 as pb
from ._proto import kcoral_pb2_grpc as pbg
from .auth import channel
from .blobs import BlobStore, digest
from .errors import AgentRefused, JobError
from .job import Job
from .plugins import registries
from .wire import STATE_ENUM
from .worker import WorkerHandle, versions

log = logging.getLogger("kcoral.agent")

__all__ = ["Agent", "AgentRefused", "agent_versions"]


def agent_versions() -> dict:
    v = {k: str(x) for k, x in versions().items()}
    v.update(kcoral=__version__, protocol=PROTOCOL_VERSION)
    return v


class Agent:
    def __init__(self, address: str, board_type: str = "cuda", name: "str | None" = None,
                 token: "str | None" = None, device: int = 0, tags=(), cache_dir=None,
                 board_config: "dict | None" = None, versions: "dict | None" = None,
                 ca_file: "str | None" = None):
        self.address = address
        self.token = token
        self.ca_file = ca_file
        cfg = dict(board_config or {})
        if board_type == "cuda":
            cfg.setdefault("devices", [device])
        elif board_type == "fake":
            cfg.setdefault("count", 1)
        specs = registries().board_types.get(board_type).discover(cfg)
        if not specs:
            raise RuntimeError(f"no {board_type!r} board on this host to offer")
        self.spec = specs[0]
        self.spec.name = name or f"{self.spec.name}@{_hostname()}"
        self.spec.tags = list(self.spec.tags) + list(tags)
        cache = pathlib.Path(cache_dir or tempfile.mkdtemp(prefix="kcoral-agent-"))
        self.blobs = BlobStore(cache / "blobs")
        self.worker = WorkerHandle(self.spec, self.blobs.root, cache / "logs")
        self.versions = versions or agent_versions()
        self.out: "queue.Queue" = queue.Queue()
        self.stop_event = threading.Event()
        self.jobs_run = 0

    def _messages(self):
        regs = registries()  # what this host can run: the daemon checks jobs against it
        props = dict(self.spec.properties, limits=self.spec.limits, device_info=self.worker.info,
                     baselines=regs.baselines.names(), tools=regs.tools.names())
        yield pb.AgentMessage(hello=pb.AgentHello(
            name=self.spec.name, target=self.spec.target, tags=self.spec.tags,
            properties_json=json.dumps(props, default=str), versions=self.versions,
            board_type=self.spec.type))
        while not self.stop_event.is_set():
            try:
                m = self.out.get(timeout=0.5)
            except queue.Empty:
                continue
            if m is None:
                return
            yield m

    def _fetch_blobs(self, stub, job: Job) -> None:
        for dg in job.blobs():
            if not self.blobs.has(dg):
                data = b"".join(c.data for c in stub.DownloadBlob(
                    pb.DownloadBlobRequest(digest=dg), timeout=600))
                if digest(data) != dg:
                    raise RuntimeError(f"blob {dg} arrived corrupted")
                self.blobs.put(data)

    def run(self) -> None:
        """Serve until stopped or the daemon closes the stream; raise `AgentRefused` when
        the daemon refuses this agent."""
        self.worker.start()
        ch = channel(self.address, self.token, self.ca_file)
        stub = pbg.KCoralStub(ch)
        try:
            self._call = stub.AgentConnect(self._messages())
            for msg in self._call:
                kind = msg.WhichOneof("kind")
                if kind == "welcome":
                    log.info("joined %s as board %s", self.address, msg.welcome.board)
                elif kind == "work":
                    self._run_job(stub, msg.work.job_id, json.loads(msg.work.job_json))
                if self.stop_event.is_set():
                    break
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.UNAUTHENTICATED,
                            grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.INVALID_ARGUMENT,
                            grpc.StatusCode.PERMISSION_DENIED):
                raise AgentRefused(e.details()) from None
            if not self.stop_event.is_set() and e.code() != grpc.StatusCode.CANCELLED:
                raise
        finally:
            self.out.put(None)
            self.worker.close()
            ch.close()

    def _run_job(self, stub, job_id, doc) -> None:
        def progress(state, message):
            self.out.put(pb.AgentMessage(progress=pb.AgentResult(
                job_id=job_id, state=STATE_ENUM.get(state, pb.RUNNING), message=message)))
        try:
            job = Job.from_json(doc)
            self._fetch_blobs(stub, job)
            res = self.worker.run(job_id, job.doc, progress, job.budgets.exec_s)
        except JobError as e:  # the daemon validated it; an agent of another version may not
            res = {"job_id": job_id, "status": "failed", "board": self.spec.name,
                   "error": {"type": "validation.job", "message": str(e)}}
        except Exception as e:  # a blob that would not download, a worker that would not start
            res = {"job_id": job_id, "status": "failed", "board": self.spec.name,
                   "error": {"type": "internal.agent", "message": f"{type(e).__name__}: {e}"}}
        res["agent"] = {"name": self.spec.name, "versions": self.versions}
        self.jobs_run += 1
        self.out.put(pb.AgentMessage(result=pb.AgentResult(
            job_id=job_id, state=pb.DONE if res.get("status") == "ok" else pb.FAILED,
            result_json=json.dumps(res, default=str))))

    def stop(self) -> None:
        self.stop_event.set()
        self.out.put(None)
        call = getattr(self, "_call", None)
        if call is not None:
            call.cancel()


def _hostname() -> str:
    return socket.gethostname()
