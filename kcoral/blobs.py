"""Content-addressed blob store: modules, input and expected arrays, returned artifacts.

Blobs are named by the sha256 of their bytes, so a client uploads only what the daemon lacks
(``missing()``), an upload is verified on arrival, and identical inputs from many clients are
stored once. Transfers are chunked in frames of `CHUNK` bytes, well under gRPC's 4 MiB default
message limit. Arrays travel as ``.npy`` bytes (`array_bytes` / `array_from_bytes`) so dtype and
shape are self-described.
"""

from __future__ import annotations

import hashlib
import io
import os
import pathlib
import tempfile

import ml_dtypes
import numpy as np

from .errors import BlobError

CHUNK = 512 << 10  # 512 KiB per frame: below even a 1 MiB message limit
_ML_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")  # stored through their uint view


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def array_bytes(a: np.ndarray) -> bytes:
    """``.npy`` serialization of an array (bf16/fp8 kept as raw bytes of a void dtype is avoided:
    ml_dtypes arrays are saved through their uint view and the dtype name in the header)."""
    a = np.ascontiguousarray(a)
    buf = io.BytesIO()
    if a.dtype.kind == "V" or a.dtype.name in _ML_DTYPES:
        np.save(buf, a.view(f"u{a.dtype.itemsize}"), allow_pickle=False)
        return b"MLDT" + a.dtype.name.encode().ljust(28) + buf.getvalue()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def array_from_bytes(data: bytes) -> np.ndarray:
    if data[:4] == b"MLDT":
        name = data[4:32].decode(errors="replace").strip()
        if name not in _ML_DTYPES:
            raise ValueError(f"array blob names element type {name!r}; expected one of "
                             f"{_ML_DTYPES}")
        raw = np.load(io.BytesIO(data[32:]), allow_pickle=False)
        return raw.view(np.dtype(getattr(ml_dtypes, name)))
    return np.load(io.BytesIO(data), allow_pickle=False)


class BlobStore:
    """sha256-addressed files under `root` (``ab/abcdef...``), written atomically.

    Uploads stream to a temporary file under ``root/tmp`` (`begin`), hashed as they arrive, and
    are moved into place only when complete and verified; whatever an interrupted upload left
    there is removed when the store opens."""

    def __init__(self, root):
        self.root = pathlib.Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.tmp = self.root / "tmp"
        self.leftovers = 0  # temporary files of interrupted uploads removed at open
        if self.tmp.exists():
            for p in self.tmp.iterdir():
                self.leftovers += 1
                p.unlink(missing_ok=True)
        self.tmp.mkdir(exist_ok=True)

    def path(self, dg: str) -> pathlib.Path:
        if not isinstance(dg, str) or len(dg) != 64 or any(c not in "0123456789abcdef"
                                                           for c in dg):
            raise BlobError(f"{str(dg)[:80]!r} is not a sha256 hex digest")
        return self.root / dg[:2] / dg

    def has(self, dg: str) -> bool:
        return self.path(dg).exists()

    def size(self, dg: str) -> int:
        return self.path(dg).stat().st_size

    def missing(self, digests) -> list:
        return [d for d in dict.fromkeys(digests) if not self.has(d)]

    def put(self, data: bytes, expect: "str | None" = None) -> str:
        dg = digest(data)
        if expect is not None and dg != expect:
            raise BlobError(f"blob announced as {expect} has sha256 {dg}")
        p = self.path(dg)
        if not p.exists():
            w = self.begin(dg, len(data))
            w.write(data)
            w.commit()
        return dg

    def begin(self, dg: str, size: int) -> "BlobWriter":
        """A writer for one incoming blob (to a temporary file; nothing in memory)."""
        self.path(dg)  # validates the digest text
        return BlobWriter(self, dg, size)

    def get(self, dg: str) -> bytes:
        p = self.path(dg)
        try:
            return p.read_bytes()
        except FileNotFoundError:
            raise BlobError(f"blob {dg} is not in the store") from None

    def put_array(self, a: np.ndarray) -> str:
        return self.put(array_bytes(a))

    def get_array(self, dg: str) -> np.ndarray:
        return array_from_bytes(self.get(dg))


class BlobWriter:
    """One blob arriving in frames: appended to a temporary file and hashed as it comes;
    `commit` verifies size and digest and moves it into place; `abort` removes it."""

    def __init__(self, store: BlobStore, dg: str, size: int):
        self.store, self.digest, self.size = store, dg, size
        fd, self.tmp = tempfile.mkstemp(dir=store.tmp, prefix=dg[:12] + ".")
        self.f = os.fdopen(fd, "wb")
        self.h = hashlib.sha256()
        self.got = 0

    def write(self, data: bytes) -> None:
        self.got += len(data)
        if self.got > self.size:
            raise BlobError(f"blob {self.digest}: {self.got} bytes received, announced "
                            f"{self.size}")
        self.h.update(data)
        self.f.write(data)

    def commit(self) -> None:
        self.f.close()
        try:
            if self.got != self.size:
                raise BlobError(f"blob {self.digest}: {self.got} bytes received, announced "
                                f"{self.size}")
            if self.h.hexdigest() != self.digest:
                raise BlobError(f"blob announced as {self.digest} has sha256 "
                                f"{self.h.hexdigest()}")
            p = self.store.path(self.digest)
            p.parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.tmp, p)
        finally:
            pathlib.Path(self.tmp).unlink(missing_ok=True)

    def abort(self) -> None:
        if not self.f.closed:
            self.f.close()
        pathlib.Path(self.tmp).unlink(missing_ok=True)


class ChunkAssembler:
    """Reassembles a stream of `BlobChunk`-like frames (digest/size/offset/data/last) into blobs
    on disk, verifying order, size and digest; used by the server's UploadBlobs. `admit(digest,
    size)` (optional) is asked before each blob starts: it raises to refuse (a quota) and
    returns a release callable (bytes in flight)."""

    def __init__(self, store: BlobStore, max_blob: int = 1 << 34, admit=None):
        self.store = store
        self.max_blob = max_blob
        self.admit = admit
        self._w: "BlobWriter | None" = None
        self._release = None
        self.stored: list = []  # (digest, size)

    def feed(self, digest_: str, size: int, offset: int, data: bytes, last: bool) -> None:
        if self._w is None:
            if size > self.max_blob:
                raise BlobError(f"blob {digest_[:80]}: size {size} exceeds the limit "
                                f"{self.max_blob}")
            self.store.path(digest_)  # validates the digest text
            self._release = self.admit(digest_, size) if self.admit else None
            self._w = self.store.begin(digest_, size)
        elif digest_ and digest_ != self._w.digest:
            raise BlobError(f"blob {self._w.digest}: frame for {digest_[:80]} before the last "
                            f"frame")
        if offset != self._w.got:
            raise BlobError(f"blob {self._w.digest}: frame at offset {offset}, expected "
                            f"{self._w.got}")
        self._w.write(data)
        if last:
            w, self._w = self._w, None
            try:
                w.commit()
            finally:
                self._done()
            self.stored.append((w.digest, w.size))

    def _done(self) -> None:
        if self._release is not None:
            self._release()
            self._release = None

    def finish(self) -> list:
        if self._w is not None:
            raise BlobError(f"blob {self._w.digest}: stream ended after {self._w.got} of "
                            f"{self._w.size} bytes")
        return [d for d, _ in self.stored]

    def abort(self) -> None:
        """The stream broke: remove the partial blob, release its bytes in flight."""
        if self._w is not None:
            self._w.abort()
            self._w = None
        self._done()


def chunks(data: bytes, dg: "str | None" = None, size: int = CHUNK):
    """Yield ``(digest, size, offset, data, last)`` frames for one blob."""
    dg = dg or digest(data)
    if not data:
        yield dg, 0, 0, b"", True
        return
    for off in range(0, len(data), size):
        part = data[off:off + size]
        yield dg, len(data), off, part, off + len(part) >= len(data)
