"""A content-addressed artifact cache: an unchanged kernel costs nothing on the next run.

The key is the sha256 of the PTX text plus the target and assembler options, so any change to the
kernel, its constants, the emitter or the binding tables changes the key. Entries are one
directory per key (``cubin``, ``log``), written atomically (temp dir + rename).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


def default_cache_dir() -> Path:
    env = os.environ.get("TIRXH_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tirxh"


def cache_key(*parts: "str | bytes") -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()


class ArtifactCache:
    """Cubins and assembler logs by content key. `enabled=False` makes every lookup miss."""

    def __init__(self, root: "Path | None" = None, enabled: bool = True):
        self.root = Path(root) if root else default_cache_dir()
        self.enabled = enabled
        self.hits = 0
        self.misses = 0

    def _dir(self, key: str) -> Path:
        return self.root / key[:2] / key

    def get(self, key: str) -> "tuple[bytes, str] | None":
        if not self.enabled:
            self.misses += 1
            return None
        d = self._dir(key)
        try:
            cubin = (d / "cubin").read_bytes()
            log = (d / "log").read_text()
        except OSError:
            self.misses += 1
            return None
        self.hits += 1
        return cubin, log

    def put(self, key: str, cubin: bytes, log: str) -> None:
        if not self.enabled:
            return
        d = self._dir(key)
        if d.exists():
            return
        try:
            d.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=d.parent))
            (tmp / "cubin").write_bytes(cubin)
            (tmp / "log").write_text(log)
            os.replace(tmp, d)
        except OSError:
            pass  # a read-only or racing cache never fails a build
