"""Job states and refusals between their domain form and the wire (kcoral.proto).

Shared by the servicer, the client library and the agent, so the client depends on the
generated protocol and this mapping, never on the daemon's modules.
"""

from __future__ import annotations

from ._proto import kcoral_pb2 as pb
from .errors import FIELD_KEY, REFUSAL_KEY, KCoralError

STATE_ENUM = {"queued": pb.QUEUED, "running": pb.RUNNING, "loaded": pb.LOADED,
              "correctness": pb.CORRECTNESS, "timing": pb.TIMING, "tools": pb.TOOLS,
              "done": pb.DONE, "failed": pb.FAILED, "cancelled": pb.CANCELLED,
              "interrupted": pb.INTERRUPTED}
STATE_NAME = {v: k for k, v in STATE_ENUM.items()}


def state_name(v) -> str:
    return STATE_NAME.get(v, "unknown")


def error_from_rpc(e) -> KCoralError:
    """A `KCoralError` from a grpc.RpcError: status code name, details, and the daemon's typed
    refusal and field from the trailing metadata (empty when it sent none)."""
    code = e.code().name if hasattr(e, "code") and e.code() else "UNKNOWN"
    md = {}
    try:
        md = dict(e.trailing_metadata() or ())
    except Exception:  # an error raised before any response (e.g. no connection) has none
        pass
    return KCoralError(code, e.details() if hasattr(e, "details") else str(e),
                       refusal=md.get(REFUSAL_KEY, ""), field=md.get(FIELD_KEY, ""))
