"""A content-addressed artifact cache: an unchanged kernel costs nothing on the next run.

`artifact_key` is the one place the key is computed (the compile pipeline's ``assemble`` stage
is its only caller): the sha256 of the PTX text, the target, the assembler options, the IR
transforms applied (name, version, options) and the toolchain versions (nvJitLink, ptxas,
nvdisasm). Any change to the kernel, its constants, the emitter, the binding tables, a transform
or a tool therefore changes the key.

Entries are one directory per key: ``cubin`` and ``log`` (written together, atomically: temp dir
+ rename) and, once something asked for it, ``sass`` (the nvdisasm text of that cubin, written
atomically beside them), so a warm ``tirxh build`` does not run nvdisasm again.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from .toolchain import toolchain_versions


def default_cache_dir() -> Path:
    env = os.environ.get("TIRXH_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tirxh"


def cache_key(*parts: "str | bytes") -> str:
    """sha256 over `parts`, each terminated by a NUL (so ``("ab", "c") != ("a", "bc")``)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()


def artifact_key(ptx: str, target: str, options: "list | tuple" = (),
                 transforms: "list | tuple" = ()) -> str:
    """The key of the cubin (and SASS) built from `ptx` for `target`.

    options: assembler options (``["lineinfo"]``); transforms: ``[(name, version, options)]`` of
    the IR transforms the PTX went through, in order.
    """
    return cache_key(ptx, target, json.dumps(list(options)),
                     json.dumps([list(t) for t in transforms], sort_keys=True, default=str),
                     json.dumps(toolchain_versions(), sort_keys=True))


class ArtifactCache:
    """Cubins, assembler logs and SASS by content key. `enabled=False` makes every lookup miss."""

    def __init__(self, root: "Path | None" = None, enabled: bool = True):
        self.root = Path(root) if root else default_cache_dir()
        self.enabled = enabled
        self.hits = 0
        self.misses = 0
        self.sass_hits = 0

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
        try:
            # The entry's mtime is its last use: a cache carried between machines with a size
            # cap (benchmarks/compile_cache.sh) keeps the most recently used entries.
            os.utime(d)
        except OSError:
            pass  # a read-only cache still serves hits
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

    def get_sass(self, key: str) -> "str | None":
        """The SASS stored beside the cubin of `key`, or None."""
        if not self.enabled:
            return None
        try:
            text = (self._dir(key) / "sass").read_text()
        except OSError:
            return None
        self.sass_hits += 1
        return text

    def put_sass(self, key: str, sass: str) -> None:
        """Store the SASS of the cubin of `key` (only beside a cubin already stored)."""
        d = self._dir(key)
        if not self.enabled or not d.is_dir():
            return
        try:
            fd, tmp = tempfile.mkstemp(prefix=".sass-", dir=d)
            with os.fdopen(fd, "w") as f:
                f.write(sass)
            os.replace(tmp, d / "sass")
        except OSError:
            pass  # as for put: the cache is an optimization, never a failure
