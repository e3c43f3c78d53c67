"""Who is calling: identities from a credentials file, roles, and what each role may do.

A credentials file (``[server] credentials_file``, TOML) maps tokens to identities::

    [[credential]]
    name = "alice"          # the client name: jobs, blobs and the fair queue key on it
    role = "client"         # client | operator | agent
    token_sha256 = "9f86d081884c7d65..."   # or token = "..." (plain; prefer the hash)

The client name always comes from the credential, never from the request. A ``client`` sees,
watches and cancels only its own jobs and downloads only blobs it uploaded (or its jobs
produced); an ``operator`` sees everything; an ``agent`` may register boards (AgentConnect) and
download the blobs of jobs sent to its boards; only agents and operators register boards.

Without a credentials file the daemon is single-user, as before: on loopback with no token, or
with one shared token (``token_file``/``KCORAL_TOKEN``), every caller is the same principal
(an operator), and the request's ``client`` field is only a label and fair-queue key.
No grpc here: the servicer passes the call's metadata in.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

from .errors import Refusal

ROLES = ("client", "operator", "agent")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,63}")
LABEL = re.compile(r"[A-Za-z0-9_.:@+-]{1,64}")   # a single-user request's client label


@dataclass(frozen=True)
class Identity:
    name: str
    role: str
    single_user: bool = False  # no credentials file: the request names the client

    @property
    def operator(self) -> bool:
        return self.role == "operator"

    def may(self, what: str) -> bool:
        """``jobs`` (submit, watch, cancel, list), ``blobs``, ``boards`` (register a board),
        ``read`` (ListBoards, Status)."""
        allowed = {"client": ("jobs", "blobs", "read"), "operator": ("jobs", "blobs", "read",
                                                                     "boards"),
                   "agent": ("read", "boards", "agent-blobs")}
        return what in allowed[self.role]


class AuthError(Exception):
    def __init__(self, refusal: Refusal, message: str):
        self.refusal = refusal
        super().__init__(message)


class Credentials:
    """Token -> `Identity`, or the single-user mode (`entries` None, optional shared token)."""

    def __init__(self, entries: "list | None" = None, shared_token: "str | None" = None):
        self._by_hash: dict = {}
        self.multi_user = entries is not None
        self.shared = shared_token.encode() if shared_token else None
        for e in entries or ():
            self._by_hash[e[0]] = Identity(e[1], e[2])

    @classmethod
    def load(cls, path, doc: dict) -> "Credentials":
        """From the parsed credentials file `doc` (ValueError naming `path` and the entry)."""
        items = doc.get("credential")
        if not isinstance(items, list) or not items:
            raise ValueError(f"{path}: expected [[credential]] entries (name, role, "
                             f"token_sha256 or token)")
        out, names = [], set()
        for i, c in enumerate(items):
            where = f"{path}: credential[{i}]"
            if not isinstance(c, dict) or set(c) - {"name", "role", "token", "token_sha256"}:
                raise ValueError(f"{where}: expected keys name, role, token_sha256 or token")
            name, role = c.get("name"), c.get("role")
            if not isinstance(name, str) or not NAME.fullmatch(name) or ".." in name:
                raise ValueError(f"{where}.name: {name!r} is not a name ({NAME.pattern})")
            if role not in ROLES:
                raise ValueError(f"{where}.role: {role!r} is not one of {ROLES}")
            if ("token" in c) == ("token_sha256" in c):
                raise ValueError(f"{where}: give exactly one of token, token_sha256")
            h = c.get("token_sha256") or _sha(c["token"])
            if not isinstance(h, str) or not re.fullmatch(r"[0-9a-f]{64}", h):
                raise ValueError(f"{where}.token_sha256: expected 64 hex digits")
            if (name, role) in names:
                raise ValueError(f"{where}: {name!r} ({role}) is listed twice")
            names.add((name, role))
            out.append((h, name, role))
        hashes = [h for h, _, _ in out]
        if len(set(hashes)) != len(hashes):
            raise ValueError(f"{path}: two credentials share a token")
        return cls(out)

    def identify(self, metadata, requested: str = "") -> Identity:
        """The caller's identity from its call metadata (``authorization: Bearer <token>``);
        `AuthError` (UNAUTHENTICATED) when the token is missing or unknown."""
        got = ""
        for k, v in metadata or ():
            if k == "authorization":
                got = v if isinstance(v, str) else v.decode(errors="replace")
        scheme, _, token = got.partition(" ")
        if not self.multi_user:
            ok = self.shared is None or (scheme.lower() == "bearer" and hmac.compare_digest(
                token.encode(), self.shared))
            if not ok:
                raise AuthError(Refusal.UNAUTHENTICATED, "kcoral: " + (
                    "missing token (metadata 'authorization: Bearer <token>')" if not got
                    else "wrong token"))
            label = requested if LABEL.fullmatch(requested or "") else "local"
            return Identity(label, "operator", single_user=True)
        if not got:
            raise AuthError(Refusal.UNAUTHENTICATED, "kcoral: missing token (metadata "
                            "'authorization: Bearer <token>')")
        who = self._by_hash.get(_sha(token)) if scheme.lower() == "bearer" else None
        if who is None:
            raise AuthError(Refusal.UNAUTHENTICATED, "kcoral: wrong token")
        return who


def _sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
