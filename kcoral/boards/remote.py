"""Remote boards: a `kcoral agent` on another host dials in and is scheduled like a local board.

`RemoteLink` is the executor the scheduler drives for such a board: ``run()`` hands the job to
the agent's stream (outbox) and waits for its progress and result (inbox). The agent enforces the
execution budget with its own worker; the link adds a margin for the network and reports
``timeout.exec`` if nothing comes back, ``runtime.agent-disconnected`` if the stream drops.
`join` decides whether an agent may join (versions, names) and registers its board; the
servicer only translates the wire's AgentHello into `AgentHello` and the refusal back.
"""

from __future__ import annotations

import queue
import re
import threading
import time
from dataclasses import dataclass, field

import kcoral

from ..errors import AgentRefused, Refusal
from ..job import Job
from ..scheduler import NETWORK_MARGIN_S, Board
from . import BoardSpec


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,63}")  # as kcoral.schema.TAG
TARGET = re.compile(r"sm_[0-9]{2,3}[a-z]?")


@dataclass
class AgentHello:
    """What an agent announces (the domain form of the wire's AgentHello)."""

    name: str
    target: str
    tags: list = field(default_factory=list)
    properties: dict = field(default_factory=dict)
    versions: dict = field(default_factory=dict)
    board_type: str = ""
    peer: str = ""


def join(scheduler, hello: AgentHello, owner: str = "") -> "RemoteLink":
    """Check `hello` and add the agent's board to `scheduler` as `owner`'s (the agent's
    identity); return the link the servicer pumps. Raises `AgentRefused` with a `Refusal`
    (``agent.incompatible`` for versions, ``invalid.request`` for a malformed hello,
    ``agent.conflict`` for a name in use or last registered by another identity)."""
    why = check_versions(hello.versions)
    if why:
        raise AgentRefused(why, Refusal.AGENT_INCOMPATIBLE)
    problems = []
    if not NAME.fullmatch(hello.name or "") or ".." in hello.name:
        problems.append(f"AgentHello.name: {hello.name!r} is not a board name "
                        f"({NAME.pattern})")
    if not TARGET.fullmatch(hello.target or ""):
        problems.append(f"AgentHello.target: {hello.target!r} is not a target (e.g. 'sm_90a')")
    bad_tags = [t for t in hello.tags if not NAME.fullmatch(t) or ".." in t]
    if bad_tags or len(hello.tags) > 16:
        problems.append(f"AgentHello.tags: {bad_tags[:3] or len(hello.tags)} not valid tags "
                        f"(at most 16, each {NAME.pattern})")
    if problems:
        raise AgentRefused("; ".join(problems), Refusal.INVALID_REQUEST)
    props = hello.properties
    limits = props.get("limits", {})
    spec = BoardSpec(name=hello.name, type="remote", target=hello.target,
                     tags=list(hello.tags),
                     properties=dict(props, versions=dict(hello.versions),
                                     agent_board_type=hello.board_type, peer=hello.peer),
                     limits=limits if isinstance(limits, dict) else {})
    spec.tags.append("remote")
    link = RemoteLink(hello.name, props)
    board = Board(spec, link)
    board.owner = owner
    old = scheduler.boards.get(hello.name)
    if old is not None and old.spec.type == "remote" and old.owner != owner:
        raise AgentRefused(f"board {hello.name!r} was registered by agent {old.owner!r}; "
                           f"{owner!r} may not take it over", Refusal.AGENT_CONFLICT)
    if old is not None and old.spec.type != "remote":
        raise AgentRefused(f"board {hello.name!r} is a local board of this daemon",
                           Refusal.AGENT_CONFLICT)
    try:
        scheduler.add_board(board)
    except ValueError as e:
        raise AgentRefused(str(e), Refusal.AGENT_CONFLICT) from None
    return link


def leave(scheduler, link: "RemoteLink") -> None:
    """The agent's stream ended: its board goes offline (its queue waits for it to return)."""
    link.disconnect()
    scheduler.set_offline(link.name, "agent disconnected")


def check_versions(versions: dict) -> "str | None":
    """None when an agent with `versions` may join this daemon, else the reason it may not."""
    proto = versions.get("protocol", "")
    kc = versions.get("kcoral", "")
    problems = []
    if proto != kcoral.PROTOCOL_VERSION:
        problems.append(f"protocol {proto or '(none)'!r} (daemon speaks "
                        f"{kcoral.PROTOCOL_VERSION!r})")
    if kc.split(".")[:2] != kcoral.__version__.split(".")[:2]:
        problems.append(f"kcoral {kc or '(none)'!r} (daemon runs {kcoral.__version__!r}; "
                        f"major.minor must match)")
    if problems:
        return ("agent refused: incompatible " + " and ".join(problems)
                + "; install the daemon's kcoral version on the agent host")
    return None


class RemoteLink:
    def __init__(self, name: str, info: dict):
        self.name = name
        self.info = info
        self.outbox: "queue.Queue" = queue.Queue()
        self.inbox: dict[str, queue.Queue] = {}
        self.connected = True
        self.restarts = 0
        self.allowed: set = set()  # blobs of the jobs sent to the agent (it may download them)
        self._lock = threading.Lock()

    # called by the scheduler's board thread
    def run(self, job_id, doc, on_progress, exec_budget_s, cancelled=None) -> dict:
        q = queue.Queue()
        with self._lock:
            self.inbox[job_id] = q
            self.allowed = set(Job.from_json(doc).blobs())
        self.outbox.put((job_id, doc))
        deadline = time.monotonic() + exec_budget_s + NETWORK_MARGIN_S
        try:
            while True:
                if not self.connected:
                    return self._failed(job_id, "runtime.agent-disconnected",
                                        f"agent {self.name!r} disconnected during the job")
                if cancelled is not None and cancelled.is_set():
                    return self._failed(job_id, "cancelled.by-client",
                                        "cancelled while running on a remote board", "cancelled")
                if time.monotonic() > deadline:
                    return self._failed(job_id, "timeout.exec",
                                        f"no result from agent {self.name!r} within the "
                                        f"execution budget ({exec_budget_s:g} s) plus "
                                        f"{NETWORK_MARGIN_S:g} s")
                try:
                    kind, state, msg, res = q.get(timeout=0.2)
                except queue.Empty:
                    continue
                if kind == "progress":
                    on_progress(state, msg)
                else:
                    res = dict(res or {})
                    res["remote_agent"] = self.name  # the daemon's word, not the agent's
                    return res
        finally:
            with self._lock:
                self.inbox.pop(job_id, None)

    def _failed(self, job_id, type_, message, status="failed"):
        return {"job_id": job_id, "board": self.name, "board_type": "remote", "status": status,
                "device": self.info, "error": {"type": type_, "message": message}}

    # called by the service's AgentConnect handler
    def deliver(self, kind: str, job_id: str, state: str, message: str, result) -> None:
        with self._lock:
            q = self.inbox.get(job_id)
        if q is not None:
            q.put((kind, state, message, result))

    def disconnect(self) -> None:
        self.connected = False
        self.outbox.put(None)

    def close(self) -> None:
        self.disconnect()
