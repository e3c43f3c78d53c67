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
    """sha256-addressed files under `root` (``ab/abcdef...``), written atomically."""

    def __init__(self, root):
        self.root = pathlib.Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, dg: str) -> pathlib.Path:
        if len(dg) != 64 or any(c not in "0123456789abcdef" for c in dg):
            raise BlobError(f"{dg!r} is not a sha256 hex digest")
        return self.root / dg[:2] / dg

    def has(self, dg: str) -> bool:
        return self.path(dg).exists()

    def missing(self, digests) -> list:
        return [d for d in dict.fromkeys(digests) if not self.has(d)]

    def put(self, data: bytes, expect: "str | None" = None) -> str:
        dg = digest(data)
        if expect is not None and dg != expect:
            raise BlobError(f"blob announced as {expect} has sha256 {dg}")
        p = self.path(dg)
        if not p.exists():
            p.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=p.parent)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, p)
        return dg

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


class ChunkAssembler:
    """Reassembles a stream of `BlobChunk`-like frames (digest/size/offset/data/last) into blobs,
    verifying order, size and digest; used by the server's UploadBlobs."""

    def __init__(self, store: BlobStore, max_blob: int = 1 << 34):
        self.store = store
        self.max_blob = max_blob
        self._cur: "str | None" = None
        self._size = 0
        self._parts: list = []
        self._got = 0
        self.stored: list = []

    def feed(self, digest_: str, size: int, offset: int, data: bytes, last: bool) -> None:
        if self._cur is None:
            if size > self.max_blob:
                raise BlobError(f"blob {digest_}: size {size} exceeds the limit {self.max_blob}")
            self.store.path(digest_)  # validates the digest text
            self._cur, self._size, self._parts, self._got = digest_, size, [], 0
        elif digest_ and digest_ != self._cur:
            raise BlobError(f"blob {self._cur}: frame for {digest_} before the last frame")
        if offset != self._got:
            raise BlobError(f"blob {self._cur}: frame at offset {offset}, expected {self._got}")
        self._parts.append(data)
        self._got += len(data)
        if self._got > self._size:
            raise BlobError(f"blob {self._cur}: {self._got} bytes received, announced {self._size}")
        if last:
            if self._got != self._size:
                raise BlobError(f"blob {self._cur}: {self._got} bytes received, "
                                f"announced {self._size}")
            self.store.put(b"".join(self._parts), expect=self._cur)
            self.stored.append(self._cur)
            self._cur = None

    def finish(self) -> list:
        if self._cur is not None:
            raise BlobError(f"blob {self._cur}: stream ended after {self._got} of "
                            f"{self._size} bytes")
        return self.stored


def chunks(data: bytes, dg: "str | None" = None, size: int = CHUNK):
    """Yield ``(digest, size, offset, data, last)`` frames for one blob."""
    dg = dg or digest(data)
    if not data:
        yield dg, 0, 0, b"", True
        return
    for off in range(0, len(data), size):
        part = data[off:off + size]
        yield dg, len(data), off, part, off + len(part) >= len(data)
