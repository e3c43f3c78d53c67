"""Who may see which blobs, and how much each client may upload.

Blobs are content-addressed and stored once, but ownership is per identity: a client is told a
blob is missing unless *it* uploaded it (so nobody learns what others uploaded), a job may name
only its submitter's blobs, and a download is served to the blob's owner, to an operator, or to
an agent for a job sent to one of its boards. Uploads count against a per-client quota, and the
bytes of all uploads in progress against a daemon-wide cap (both RESOURCE_EXHAUSTED).
No grpc here.
"""

from __future__ import annotations

import threading

from .errors import JobError, QuotaError


class BlobAccess:
    def __init__(self, store, blobs, quota_bytes: int, inflight_bytes: int):
        self.store, self.blobs = store, blobs
        self.quota_bytes, self.inflight_cap = int(quota_bytes), int(inflight_bytes)
        self._lock = threading.Lock()
        self.inflight = 0

    def _sees_all(self, who) -> bool:
        return who.operator  # single-user mode is an operator too

    def missing_for(self, who, digests) -> list:
        """The digests `who` must upload: absent from the store, or not `who`'s."""
        digests = list(dict.fromkeys(digests))
        for d in digests:
            self.blobs.path(d)  # BlobError names a malformed digest
        absent = set(self.blobs.missing(digests))
        if self._sees_all(who):
            return [d for d in digests if d in absent]
        mine = self.store.owned(who.name, digests)
        return [d for d in digests if d in absent or d not in mine]

    def admitter(self, who):
        """For `ChunkAssembler(admit=...)`: refuse a blob past `who`'s quota or past the cap on
        bytes in flight (`QuotaError`); return the release of its bytes in flight."""
        def admit(digest: str, size: int):
            used = self.store.owned_bytes(who.name)  # every identity, operators included
            if used + size > self.quota_bytes:
                raise QuotaError(f"blob {digest}: {size} bytes would take client "
                                 f"{who.name!r} past its quota ({used} of "
                                 f"{self.quota_bytes} bytes used)")
            with self._lock:
                if self.inflight + size > self.inflight_cap:
                    raise QuotaError(f"blob {digest}: {size} bytes would pass the daemon's cap "
                                     f"on uploads in progress ({self.inflight} of "
                                     f"{self.inflight_cap} bytes); retry later")
                self.inflight += size

            def release():
                with self._lock:
                    self.inflight -= size
            return release
        return admit

    def record(self, who, stored) -> None:
        """`who` uploaded these ``(digest, size)`` blobs."""
        for dg, size in stored:
            self.store.own_blob(dg, who.name, size)

    def give(self, owner: str, digests) -> None:
        """A job's artifacts belong to the job's client."""
        for dg in digests:
            if self.blobs.has(dg):
                self.store.own_blob(dg, owner, self.blobs.size(dg))

    def check_job(self, who, job) -> None:
        """A job names only blobs its submitter may use (`JobError` on field ``blobs``)."""
        if self._sees_all(who):
            return
        need = job.blobs()
        mine = self.store.owned(who.name, need)
        missing = sorted(need - mine)
        if missing:
            raise JobError([("blobs", f"missing blob {m} (upload it first)") for m in missing])

    def may_download(self, who, digest: str, boards) -> bool:
        if self._sees_all(who):
            return True
        if who.role == "agent":  # the blobs of jobs sent to this agent's boards
            return any(b.owner == who.name and digest in getattr(b.executor, "allowed", ())
                       for b in boards)
        return bool(self.store.owned(who.name, [digest]))
