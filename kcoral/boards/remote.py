"""Remote boards: a `kcoral agent` on another host dials in and is scheduled like a local board.

`RemoteLink` is the executor the scheduler drives for such a board: ``run()`` hands the job to
the agent's stream (outbox) and waits for its progress and result (inbox). The agent enforces the
execution budget with its own worker; the link adds a margin for the network and reports
``timeout.exec`` if nothing comes back, ``runtime.agent-disconnected`` if the stream drops.
`check_versions` decides whether an agent may join.
"""

from __future__ import annotations

import queue
import threading
import time

import kcoral

NETWORK_MARGIN_S = 30.0


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
        self._lock = threading.Lock()

    # called by the scheduler's board thread
    def run(self, job_id, doc, on_progress, exec_budget_s, cancelled=None) -> dict:
        q = queue.Queue()
        with self._lock:
            self.inbox[job_id] = q
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
                    res.setdefault("remote_agent", self.name)
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
