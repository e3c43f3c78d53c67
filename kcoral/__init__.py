"""KCoral: the benchmark daemon that owns the GPUs ("boards") and serializes access to each.

See docs/KCORAL.md. The domain modules (job, scheduler, measure, store, blobs, boards, worker)
do not import grpc; `service`/`server`/`client`/`agent` translate to and from the wire.
"""

__version__ = "0.1.0"
PROTOCOL_VERSION = "1"

__all__ = ["__version__", "PROTOCOL_VERSION"]
