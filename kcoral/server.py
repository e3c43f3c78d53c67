"""The daemon: configuration, identities, boards and their workers, the store, the gRPC server.

`Daemon` wires the domain objects together and serves them (grpc.aio, on an event loop thread of
its own, so `start()`/`stop()` stay plain calls); tests start one in-process on port 0
(``Daemon(config, state_dir, port=0).start()``) and always ``stop()`` it in ``finally``.

Configuration (``kcoral.toml``; every key optional)::

    [server]
    host = "127.0.0.1"        # beyond loopback a token or a credentials file is required
    port = 50051
    state_dir = ".kcoral"     # kcoral.sqlite (WAL), blobs/, jobs/ (per-job files), logs/
    credentials_file = ""     # tokens -> client names and roles (kcoral/identity.py)
    token_file = ""           # or KCORAL_TOKEN: one shared token (single-user)
    tls_cert = ""             # with tls_key: serve TLS
    tls_key = ""
    grace_s = 10              # shutdown: running jobs get this long to finish
    max_message_mb = 8
    max_streams = 4096        # open Submit/Watch streams in all ...
    max_streams_per_client = 512   # ... and per client (RESOURCE_EXHAUSTED past either)
    blob_quota_mb = 65536     # bytes of blobs each client may own (uploads past it refused)
    upload_inflight_mb = 4096 # bytes of all uploads in progress (a cap on disk in flight)
    max_blob_mb = 16384       # one blob

    [store]                   # where jobs live (default: SQLite in state_dir, this daemon's own)
    kind = "sqlite"           # or "postgres": several daemons share one job table and queue
    dsn = ""                  # postgres: "postgresql://user@host/db" (or KCORAL_PG_DSN)
    lease_s = 10              # postgres: a daemon silent this long is dead (its jobs move on)

    [boards.cuda]             # local GPUs (default: all)
    devices = [0]
    [boards.sim]              # numsim on the CPU (correctness only; the numsim distribution)
    enabled = true
    [boards.fake]             # test boards
    count = 0
"""

from __future__ import annotations

import asyncio
import logging
import os
import pathlib
import socket
import threading
import time
import uuid
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from . import __version__
from .auth import is_loopback, server_credentials
from .blobaccess import BlobAccess
from .blobs import BlobStore, ChunkAssembler
from .identity import Credentials
from .pgstore import PgStore
from .plugins import PROVIDERS, registries
from .scheduler import Board, Scheduler
from .service import SERVICE, KCoralServicer
from .store import JobStore
from .worker import WorkerHandle, versions

try:
    import tomllib
except ImportError:  # pragma: no cover - Python 3.10: the tomli backport (a declared dependency)
    import tomli as tomllib

log = logging.getLogger("kcoral")

HEALTH_PERIOD_S = 0.5
STORE_KEYS = {"kind", "dsn", "lease_s"}
SERVER_KEYS = {"host", "port", "state_dir", "credentials_file", "token_file", "tls_cert",
               "tls_key", "grace_s", "max_message_mb", "max_streams", "max_streams_per_client",
               "blob_quota_mb", "upload_inflight_mb", "max_blob_mb", "max_workers",
               "max_concurrent_rpcs"}


def load_config(path) -> dict:
    p = pathlib.Path(path)
    try:
        with open(p, "rb") as f:
            cfg = tomllib.load(f)
    except FileNotFoundError:
        raise ValueError(f"config file {str(p)!r} not found") from None
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{p}: {e}") from None
    unknown = set(cfg) - {"server", "boards", "plugins", "store"}
    if unknown:
        raise ValueError(f"{p}: unknown table(s) {sorted(unknown)}; expected [server], "
                         f"[store], [boards.<type>], [plugins]")
    bad = set(cfg.get("store", {})) - STORE_KEYS
    if bad:
        raise ValueError(f"{p}: [store]: unknown key(s) {sorted(bad)}; expected "
                         f"{sorted(STORE_KEYS)}")
    bad = set(cfg.get("server", {})) - SERVER_KEYS
    if bad:
        raise ValueError(f"{p}: [server]: unknown key(s) {sorted(bad)}; expected "
                         f"{sorted(SERVER_KEYS)}")
    return cfg


class Daemon:
    def __init__(self, config: "dict | None" = None, state_dir=None, host: "str | None" = None,
                 port: "int | None" = None, token: "str | None" = None, boards=None,
                 credentials: "Credentials | None" = None):
        self.config = config or {}
        srv = self.config.get("server", {})
        self.host = host or srv.get("host", "127.0.0.1")
        self.port = srv.get("port", 50051) if port is None else port
        self.state_dir = pathlib.Path(state_dir or srv.get("state_dir", ".kcoral"))
        self.token = token if token is not None else _token(srv)
        self.credentials = credentials or _credentials(srv, self.token)
        if not self.credentials.multi_user and not self.token and not is_loopback(self.host):
            raise ValueError(f"binding to {self.host!r} (beyond loopback) requires a token: set "
                             f"[server] credentials_file or token_file in kcoral.toml, or "
                             f"KCORAL_TOKEN")
        mb = lambda key, default: int(srv.get(key, default)) << 20  # noqa: E731
        self.max_blob_bytes = mb("max_blob_mb", 16384)
        self.blob_quota = mb("blob_quota_mb", 65536)
        self.upload_inflight = mb("upload_inflight_mb", 4096)
        self.max_streams = int(srv.get("max_streams", 4096))
        self.max_streams_per_client = int(srv.get("max_streams_per_client", 512))
        self.grace_s = float(srv.get("grace_s", 10))
        if int(srv.get("max_message_mb", 8)) < 1:
            raise ValueError(f"[server] max_message_mb = {srv['max_message_mb']}: must be at "
                             f"least 1 (blob frames are 512 KiB)")
        self._explicit_boards = boards
        self.server = None
        self.address = ""
        self.loop: "asyncio.AbstractEventLoop | None" = None
        self._loop_thread: "threading.Thread | None" = None
        self._stopped = threading.Event()
        self._terminated = threading.Event()
        # blocking domain calls made for the async servicer (SQLite, files, the scheduler)
        self.pool = futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="kcoral-rpc")

    def start(self) -> "Daemon":
        t0 = time.perf_counter()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.blobs = BlobStore(self.state_dir / "blobs")
        self.store = open_store(self.config.get("store", {}), self.state_dir)
        if hasattr(self.store, "attach_blobs"):  # a shared store shares the blobs too
            self.store.attach_blobs(self.blobs)
        if self.blobs.leftovers:
            log.info("removed %d temporary file(s) of interrupted uploads", self.blobs.leftovers)
        self.access = BlobAccess(self.store, self.blobs, self.blob_quota, self.upload_inflight)
        self.registries = regs = registries()
        # where a start's seconds go (session 9: ~40 s between launch and "serving" on the
        # H200, every device call): the plugins' imports here, each board's worker below
        log.info("plugins loaded in %.1f s", time.perf_counter() - t0)
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
                                   missing_types=missing, registries=regs,
                                   on_finish=self._give_artifacts)
        handles = []
        for spec in specs:
            h = WorkerHandle(spec, self.blobs.root, self.state_dir / "logs",
                             work_root=self.state_dir / "jobs")
            handles.append((spec, h))

        def start_worker(spec, h):
            if spec.unavailable:
                return
            t = time.perf_counter()
            try:
                h.start()
                log.info("board %s: worker up in %.1f s", spec.name, time.perf_counter() - t)
                spec.properties.setdefault("device_info", h.info)
            except Exception as e:  # a board that cannot open is unavailable, not fatal
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
        if self.scheduler.shared:
            self.store.register(self.address)  # which daemon holds what, for operators
        return self

    def assembler(self, who) -> ChunkAssembler:
        """An upload of `who`'s: streamed to disk, within its quota and the in-flight cap."""
        return ChunkAssembler(self.blobs, self.max_blob_bytes, self.access.admitter(who))

    def _give_artifacts(self, rec, res: dict) -> None:
        """A finished job's tool artifacts belong to its client (it may download them)."""
        digests = [dg for t in (res.get("tools") or {}).values() if isinstance(t, dict)
                   for dg in (t.get("artifacts") or {}).values() if isinstance(dg, str)]
        try:
            self.access.give(rec.client, digests)
        except Exception as e:  # a malformed digest from a board: logged, never fatal
            log.warning("job %s: artifacts not recorded: %s", rec.job_id, e)

    # --- the gRPC server on its event loop -----------------------------------------------------
    def _serve(self) -> None:
        ready = threading.Event()
        failure: list = []
        self.loop = asyncio.new_event_loop()

        def run():
            asyncio.set_event_loop(self.loop)
            try:
                self.loop.run_until_complete(self._start_server())
            except BaseException as e:  # reported to start(), which raises it
                failure.append(e)
                ready.set()
                return
            ready.set()
            self.loop.run_forever()
            self._terminated.set()

        self._loop_thread = threading.Thread(target=run, daemon=True, name="kcoral-aio")
        self._loop_thread.start()
        ready.wait()
        if failure:
            self._loop_thread.join(5)
            raise failure[0]
        log.info("kcoral %s serving on %s (state in %s)", __version__, self.address,
                 self.state_dir)

    async def _start_server(self) -> None:
        srv = self.config.get("server", {})
        mb = int(srv.get("max_message_mb", 8))
        self.server = grpc.aio.server(
            options=[("grpc.max_receive_message_length", mb << 20),
                     ("grpc.max_send_message_length", mb << 20)],
            maximum_concurrent_rpcs=int(srv.get("max_concurrent_rpcs", 0)) or None)
        self.servicer = KCoralServicer(self)
        self.server.add_generic_rpc_handlers((self.servicer.generic_handler(),))
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        for svc in ("", SERVICE):
            await self.health.set(svc, health_pb2.HealthCheckResponse.SERVING)
        bind = f"{self.host}:{self.port}"
        try:
            if srv.get("tls_cert") and srv.get("tls_key"):
                got = self.server.add_secure_port(bind, server_credentials(srv["tls_cert"],
                                                                           srv["tls_key"]))
            else:
                got = self.server.add_insecure_port(bind)
        except RuntimeError as e:  # grpc.aio raises where the sync server returned 0
            raise OSError(f"could not bind {bind}: {e}") from None
        if not got:
            raise OSError(f"could not bind {bind}")
        self.port = got
        host = self.host if self.host not in ("0.0.0.0", "[::]", "::") else "127.0.0.1"
        self.address = f"{host}:{got}"
        await self.server.start()
        self._health_task = asyncio.ensure_future(self._board_health())

    async def _board_health(self) -> None:
        """Per-board health service names (``kcoral.board.<name>``): NOT_SERVING while a board
        is offline, unavailable, or stuck past its job's budget."""
        loop = asyncio.get_running_loop()
        last: dict = {}
        while True:
            try:
                states = await loop.run_in_executor(self.pool, self.scheduler.board_health)
                for name, why in states.items():
                    st = (health_pb2.HealthCheckResponse.SERVING if why is None
                          else health_pb2.HealthCheckResponse.NOT_SERVING)
                    if last.get(name) != st:
                        await self.health.set(f"kcoral.board.{name}", st)
                        if why:
                            log.warning("board %s is not serving: %s", name, why)
                        last[name] = st
            except Exception:  # keep reporting; a failure here must not end the loop
                log.exception("board health check failed")
            await asyncio.sleep(HEALTH_PERIOD_S)

    def stop(self, grace_s: "float | None" = None) -> None:
        """Graceful: refuse new jobs, let running ones finish (or mark them interrupted),
        stop the workers, stop serving, close the store."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        g = self.grace_s if grace_s is None else grace_s
        if self.loop is not None and self.server is not None:
            asyncio.run_coroutine_threadsafe(self.health.enter_graceful_shutdown(),
                                             self.loop).result(5)
        if hasattr(self, "scheduler"):
            self.scheduler.shutdown(g)
        if self.loop is not None:
            if self.server is not None:
                self._health_task.cancel()
                asyncio.run_coroutine_threadsafe(self.server.stop(1.0), self.loop).result(30)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._loop_thread.join(10)
        self.pool.shutdown(wait=False, cancel_futures=True)
        if hasattr(self, "store"):
            self.store.close()

    def wait(self) -> None:
        self._terminated.wait()


def open_store(cfg: dict, state_dir: pathlib.Path):
    """The job store ``[store]`` names: SQLite in the state directory (the default, one
    daemon's own), or PostgreSQL shared by several daemons (`kcoral.pgstore`)."""
    kind = cfg.get("kind", "sqlite")
    if kind == "sqlite":
        return JobStore(state_dir / "kcoral.sqlite")
    if kind != "postgres":
        raise ValueError(f"[store] kind = {kind!r}: expected 'sqlite' or 'postgres'")
    dsn = cfg.get("dsn") or os.environ.get("KCORAL_PG_DSN", "")
    if not dsn:
        raise ValueError("[store] kind = \"postgres\" needs [store] dsn (or KCORAL_PG_DSN)")
    lease = float(cfg.get("lease_s", 10))
    if not 0.5 <= lease <= 3600:
        raise ValueError(f"[store] lease_s = {lease:g}: expected 0.5 .. 3600 seconds")
    daemon_id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    return PgStore(dsn, daemon_id, lease)


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


def _credentials(srv: dict, token: "str | None") -> Credentials:
    cf = srv.get("credentials_file")
    if not cf:
        return Credentials(None, token)
    try:
        with open(cf, "rb") as f:
            doc = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ValueError(f"[server] credentials_file {cf!r}: {e}") from None
    return Credentials.load(cf, doc)
