"""The daemon: configuration, boards and their workers, the store, the gRPC server.

`Daemon` wires the domain objects together and serves them; tests start one in-process on port 0
(``Daemon(config, state_dir, port=0).start()``) and always ``stop()`` it in ``finally``.

Configuration (``kcoral.toml``; every key optional)::

    [server]
    host = "127.0.0.1"        # beyond loopback a token is required
    port = 50051
    state_dir = ".kcoral"     # kcoral.sqlite (WAL), blobs/, logs/
    token_file = ""           # or the KCORAL_TOKEN environment variable
    tls_cert = ""             # with tls_key: serve TLS
    tls_key = ""
    max_workers = 64          # gRPC handler threads (each live Submit stream holds one)
    grace_s = 10              # shutdown: running jobs get this long to finish
    max_message_mb = 8

    [boards.cuda]             # local GPUs (default: all)
    devices = [0]
    [boards.sim]              # numsim on the CPU (correctness only)
    enabled = true
    [boards.fake]             # test boards
    count = 0
"""

from __future__ import annotations

import logging
import os
import pathlib
import threading
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from . import __version__
from ._proto import kcoral_pb2_grpc as pbg
from .auth import TokenInterceptor, require_token_for, server_credentials
from .blobs import BlobStore
from .plugins import PROVIDERS, registries
from .scheduler import Board, Scheduler
from .service import KCoralServicer
from .store import JobStore
from .worker import WorkerHandle, versions

try:
    import tomllib
except ImportError:  # pragma: no cover - Python 3.10: the tomli backport (a declared dependency)
    import tomli as tomllib

log = logging.getLogger("kcoral")


def load_config(path) -> dict:
    p = pathlib.Path(path)
    try:
        with open(p, "rb") as f:
            cfg = tomllib.load(f)
    except FileNotFoundError:
        raise ValueError(f"config file {str(p)!r} not found") from None
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{p}: {e}") from None
    unknown = set(cfg) - {"server", "boards", "plugins"}
    if unknown:
        raise ValueError(f"{p}: unknown table(s) {sorted(unknown)}; expected [server], "
                         f"[boards.<type>], [plugins]")
    return cfg


class Daemon:
    def __init__(self, config: "dict | None" = None, state_dir=None, host: "str | None" = None,
                 port: "int | None" = None, token: "str | None" = None, boards=None):
        self.config = config or {}
        srv = self.config.get("server", {})
        self.host = host or srv.get("host", "127.0.0.1")
        self.port = srv.get("port", 50051) if port is None else port
        self.state_dir = pathlib.Path(state_dir or srv.get("state_dir", ".kcoral"))
        self.token = token if token is not None else _token(srv)
        require_token_for(self.host, self.token)
        self.max_blob_bytes = int(srv.get("max_blob_mb", 16384)) << 20
        self.grace_s = float(srv.get("grace_s", 10))
        if int(srv.get("max_message_mb", 8)) < 1:
            raise ValueError(f"[server] max_message_mb = {srv['max_message_mb']}: must be at "
                             f"least 1 (blob frames are 512 KiB)")
        self._explicit_boards = boards
        self.server: "grpc.Server | None" = None
        self.address = ""
        self._stopped = threading.Event()

    def start(self) -> "Daemon":
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.store = JobStore(self.state_dir / "kcoral.sqlite")
        self.blobs = BlobStore(self.state_dir / "blobs")
        self.registries = regs = registries()
        specs = self._explicit_boards
        missing = {}
        if specs is None:
            specs = []
            bcfg = self.config.get("boards", {"cuda": {}, "sim": {}})
            for tname, tcfg in bcfg.items():
                if tname not in regs.board_types.names():
                    # e.g. [boards.sim] without the numsim distribution: no such boards, and
                    # a job that asks for one is told where the type comes from
                    missing[tname] = PROVIDERS.get(tname, "a kcoral plugin that is not "
                                                          "installed")
                    log.warning("board type %r is configured but not installed (%s); "
                                "installed: %s", tname, missing[tname],
                                regs.board_types.names())
                    continue
                specs.extend(regs.board_types.get(tname).discover(tcfg or {}))
        self.scheduler = Scheduler(self.store, self.blobs,
                                   version_info={"kcoral": __version__, **versions()},
                                   missing_types=missing, registries=regs)
        handles = []
        for spec in specs:
            h = WorkerHandle(spec, self.blobs.root, self.state_dir / "logs")
            handles.append((spec, h))

        def start_worker(spec, h):
            if spec.unavailable:
                return
            try:
                h.start()
                spec.properties.setdefault("device_info", h.info)
            except Exception as e:
                spec.unavailable = str(e)
                log.error("board %s unavailable: %s", spec.name, e)

        ts = [threading.Thread(target=start_worker, args=sh) for sh in handles]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for spec, h in handles:
            self.scheduler.add_board(Board(spec, h))
        queued, interrupted = self.store.recover()
        for jid in interrupted:
            log.warning("job %s was running when the daemon stopped: recorded as interrupted",
                        jid)
        for row in queued:
            self.scheduler.requeue(row)
        if queued:
            log.info("re-queued %d job(s) accepted before the restart", len(queued))
        try:
            self._serve()
        except Exception:
            self.scheduler.shutdown(0)  # do not leave the board workers behind
            self.store.close()
            raise
        return self

    def _serve(self) -> None:
        srv = self.config.get("server", {})
        mb = int(srv.get("max_message_mb", 8))
        interceptors = [TokenInterceptor(self.token)] if self.token else []
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=int(srv.get("max_workers", 64)),
                                       thread_name_prefix="kcoral-rpc"),
            interceptors=interceptors,
            options=[("grpc.max_receive_message_length", mb << 20),
                     ("grpc.max_send_message_length", mb << 20)],
            maximum_concurrent_rpcs=int(srv.get("max_concurrent_rpcs", 512)))
        pbg.add_KCoralServicer_to_server(KCoralServicer(self), self.server)
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        for svc in ("", "kcoral.v1.KCoral"):
            self.health.set(svc, health_pb2.HealthCheckResponse.SERVING)
        bind = f"{self.host}:{self.port}"
        if srv.get("tls_cert") and srv.get("tls_key"):
            got = self.server.add_secure_port(bind, server_credentials(srv["tls_cert"],
                                                                       srv["tls_key"]))
        else:
            got = self.server.add_insecure_port(bind)
        if not got:
            raise OSError(f"could not bind {bind}")
        self.port = got
        host = self.host if self.host not in ("0.0.0.0", "[::]", "::") else "127.0.0.1"
        self.address = f"{host}:{got}"
        self.server.start()
        log.info("kcoral %s serving on %s (state in %s)", __version__, self.address,
                 self.state_dir)

    def stop(self, grace_s: "float | None" = None) -> None:
        """Graceful: refuse new jobs, let running ones finish (or mark them interrupted),
        stop the workers, close the store."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        g = self.grace_s if grace_s is None else grace_s
        if getattr(self, "health", None) is not None:
            self.health.enter_graceful_shutdown()
        if hasattr(self, "scheduler"):
            self.scheduler.shutdown(g)
        if self.server is not None:
            self.server.stop(1.0).wait()
        if hasattr(self, "store"):
            self.store.close()

    def wait(self) -> None:
        if self.server is not None:
            self.server.wait_for_termination()


def _token(srv: dict) -> "str | None":
    if os.environ.get("KCORAL_TOKEN"):
        return os.environ["KCORAL_TOKEN"]
    tf = srv.get("token_file")
    if tf:
        try:
            return pathlib.Path(tf).read_text().strip()
        except OSError as e:
            raise ValueError(f"[server] token_file {tf!r}: {e}") from None
    return None
