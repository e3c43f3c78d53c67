"""KCoral's errors, in one module: what fails a job, what refuses a request, what a client sees.

* `JobFailure` -- a job that was accepted and then failed while it ran: a typed error
  (``compile.*``, ``launch.*``, ``runtime.*``, ``correctness.*``, ``timeout.*``,
  ``interrupted.*``, ``unavailable.*``, ``validation.*``) that becomes the result's ``error``
  object. `fatal` says the worker's device state cannot be trusted any more (a sticky CUDA error
  such as an illegal address or a trap), so the worker exits after reporting and is restarted.
* `JobError` -- a job document that fails validation: every problem, each naming its field.
* `BlobError` -- a blob that is missing, malformed or over a limit; names the digest.
* `Refusal` -- the stable code of a refused request. The daemon sends it beside the gRPC status
  (trailing metadata `REFUSAL_KEY`, with the first offending field in `FIELD_KEY`), and
  `KCoralError.refusal` carries it on the client, so callers switch on a code, never on text.
* `KCoralError` -- what the client library raises for any refused or failed RPC.
* `AgentRefused` -- the daemon would not take a remote board.

Nothing here imports grpc: the daemon's domain, the client and the tools all share it.
"""

from __future__ import annotations

import enum

CATEGORIES = ("compile", "launch", "runtime", "correctness", "timeout", "interrupted",
              "unavailable", "validation", "internal", "cancelled")

REFUSAL_KEY = "kcoral-refusal"   # trailing metadata: a `Refusal` value
FIELD_KEY = "kcoral-field"       # trailing metadata: the first offending field, when there is one


class JobFailure(Exception):
    def __init__(self, type_: str, message: str, fatal: bool = False, data: "dict | None" = None):
        if type_.split(".")[0] not in CATEGORIES:
            raise ValueError(f"error type {type_!r} is not in a known category {CATEGORIES}")
        self.type = type_
        self.message = message
        self.fatal = fatal
        self.data = data or {}
        super().__init__(f"{type_}: {message}")

    def to_json(self) -> dict:
        d = {"type": self.type, "message": self.message}
        if self.data:
            d["data"] = self.data
        return d


class JobError(ValueError):
    """A job failed validation; `problems` lists every ``(field, message)`` found, and
    `refusal` says whether the job is malformed (``invalid.job``) or fits no board here
    (``unavailable.board``)."""

    def __init__(self, problems, refusal: "Refusal | None" = None):
        self.problems = list(problems)
        self.refusal = refusal or Refusal.INVALID_JOB
        super().__init__("; ".join(f"{f}: {m}" for f, m in self.problems))

    @property
    def field(self) -> str:
        return self.problems[0][0] if self.problems else ""


class BlobError(ValueError):
    """A blob failed verification, is missing or exceeds a limit; names the digest."""


class QuotaError(BlobError):
    """An upload would pass the client's quota or the daemon's cap on bytes in flight."""


class Refusal(str, enum.Enum):
    """Why the daemon refused a request (stable strings; clients switch on them)."""

    INVALID_REQUEST = "invalid.request"      # not a well-formed request (bad protobuf, JSON)
    INVALID_JOB = "invalid.job"              # a job that fails validation (the field is named)
    NO_BOARD = "unavailable.board"           # well-formed, but no board here can run it
    SHUTTING_DOWN = "unavailable.daemon"     # the daemon accepts no new work
    NOT_FOUND = "not-found"                  # no such job or blob (or not the caller's)
    UNAUTHENTICATED = "unauthenticated"      # no or an unknown credential
    PERMISSION_DENIED = "permission-denied"  # the caller's role may not do this
    QUOTA = "quota"                          # an upload past a quota, too many open streams
    IDEMPOTENCY_CONFLICT = "idempotency-conflict"  # a key reused for a different job
    AGENT_INCOMPATIBLE = "agent.incompatible"      # an agent of another kcoral version
    AGENT_CONFLICT = "agent.conflict"        # a board name already served by someone else

    def __str__(self) -> str:
        return self.value


class KCoralError(Exception):
    """A refused or failed RPC: `code` is the gRPC status name, `refusal` the `Refusal` value
    (``""`` when the daemon sent none, e.g. a connection failure), `field` the first field the
    daemon named."""

    def __init__(self, code: str, message: str, refusal: str = "", field: str = ""):
        self.code = code
        self.message = message
        self.refusal = refusal
        self.field = field
        super().__init__(f"{code}: {message}")


class AgentRefused(Exception):
    """The daemon refused this agent (incompatible versions, a name in use, no agent role);
    `refusal` says which (a `Refusal`)."""

    def __init__(self, message: str, refusal: "Refusal | str" = ""):
        self.refusal = str(refusal)
        super().__init__(message)
