"""The zoo's instruction index: which PTX instructions each zoo kernel uses, traced once per
content and kept on disk.

`tirxh zoo search` and `tirxh ptx show` ("the zoo kernels that use it") need every kernel's
instructions: the union over every distinct specialization its cases ask for. Tracing the whole
zoo took ~150 s on one core (~860 specializations, 149 of them topk_warp's), and each test process
with its own cache paid it again (CI: ~250 s for each of two tests on 2 busy cores). So:

- each kernel's use is stored under the artifact cache's directory (`INDEX_DIR`), keyed by what
  determines it (`IndexEntry`): the kernel's name and module path, the content of its module and
  of the zoo-local modules it imports (`ZooSources.closure`: its import statements, followed
  transitively, so editing one kernel retraces only it and what imports it), the tirxh sources
  and the instruction set's bindings (`tracer_fingerprint`);
- a trace is stored only when the code that ran is the content the key names
  (`ZooSources.trustworthy`): not when a file was edited during the run, nor when a helper
  module this process imported earlier may be older than its file, nor when ``import helpers``
  found a namesake elsewhere; so an entry is never stale;
- while one process traces a kernel, another that wants it waits on a lock, then reads it
  (xdist workers and concurrent commands trace each kernel once);
- the trace keeps no IR and lets Python's cycle collector run less often (`trace_use`): both
  made the collector rescan live IR, half of topk_warp's tracing time. With the tracer's own
  saving (`InstructionSet.candidates`), a cold zoo took 114 s instead of 168 s (2 busy cores).

A kernel's trace is assumed to depend on its module, what that imports and tirxh alone: a zoo
module that rewrites another module's globals, or reads a data file, is not tracked.
"""

from __future__ import annotations

import ast
import gc
import hashlib
import json
import os
import re
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..core.cache import cache_key, default_cache_dir

try:
    import fcntl
except ImportError:  # no flock (Windows): two processes may trace one kernel, nothing worse
    fcntl = None

INDEX_DIR = "zoo-instructions"
_SCHEMA = "zoo-instructions/2"
_TIRXH_DIR = Path(__file__).resolve().parents[1]
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
# the cycle collector's first threshold while tracing (CPython's default is 700): a trace builds
# ~10k live objects per specialization, which every young collection rescanned
_TRACE_GC_THRESHOLD = 50_000


@dataclass
class InstructionUse:
    """The instructions a kernel's traced IR holds: binding name -> exact spellings, and the
    specializations that could not be traced (then the list is incomplete)."""

    bindings: dict = field(default_factory=dict)
    errors: list = field(default_factory=list)
    specializations: int = 0

    @property
    def complete(self) -> bool:
        return not self.errors

    def spellings(self) -> list:
        return sorted({s for ss in self.bindings.values() for s in ss})

    def to_json(self) -> dict:
        return {"complete": self.complete, "specializations": self.specializations,
                "bindings": [{"binding": b, "spellings": ss}
                             for b, ss in sorted(self.bindings.items())],
                "errors": list(self.errors)}


def trace_use(kernel, params: list, ident: str, isa) -> InstructionUse:
    """Trace `kernel` (a `T.kernel`) once per distinct constants among `params` (``[(case name
    or None, values)]``) and collect the instructions; a specialization that fails is recorded
    under `ident` (``module::kernel[case]``), not skipped."""
    use = InstructionUse()
    seen = set()
    with _fewer_collections():
        for case, values in params:
            where = ident + (f"[{case}]" if case else "")
            try:
                consts = kernel.resolve_consts(values)
                key = tuple(sorted((k, repr(v)) for k, v in consts.items()))
                if key in seen:
                    continue
                seen.add(key)
                k_ir = kernel.specialize_once(isa=isa, **consts)
            except Exception as e:  # a kernel that does not trace is reported, not skipped
                use.errors.append(f"{where}: {type(e).__name__}: {e}")
                continue
            use.specializations += 1
            for ins in k_ir.instructions():
                use.bindings.setdefault(ins.binding.name, set()).add(ins.spelling)
    use.bindings = {b: sorted(ss) for b, ss in use.bindings.items()}
    return use


@contextmanager
def _fewer_collections():
    """Raise the cycle collector's first threshold for the duration (the trace's IR is alive
    until it ends, so collecting sooner finds nothing); the old thresholds come back after."""
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], _TRACE_GC_THRESHOLD), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


# -------------------------------------------------------------------------------------------------
# what an entry is keyed by
# -------------------------------------------------------------------------------------------------

def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "?"


class ZooSources:
    """The zoo's Python sources as `load_zoo` found them before importing any module: the
    content an entry is keyed by, and the check that a trace came from that content.

    `dirs` are the directories the zoo's modules import from (the zoo root and each module's
    directory, as `load_zoo` puts them on ``sys.path``)."""

    def __init__(self, root: Path, dirs):
        self.root = Path(root).resolve()
        self.dirs = tuple(dict.fromkeys(Path(d).resolve() for d in dirs))
        self._digests = {p.resolve(): _digest(p) for d in self.dirs for p in sorted(d.glob("*.py"))}
        # the modules this process imported before: their code may be older than their file
        self.preloaded = dict(sys.modules)
        self._closures: dict = {}
        self._statements_of: dict = {}  # file -> its import statements
        self._imports_of: dict = {}  # file -> the zoo-local files they name
        self._fingerprints: dict = {}

    def digest(self, path: Path) -> str:
        """The content of `path` when first asked (before any import, for the dirs' files)."""
        got = self._digests.get(path)
        if got is None:
            got = self._digests[path] = _digest(path)
        return got

    def closure(self, path: Path) -> "tuple[tuple, dict]":
        """`path` and the zoo-local modules it may import, transitively (`_local_imports`),
        and for each module name the files it may be (a name found both in the module's
        directory and in the zoo root counts both: one file too many in a key only retraces).
        A name found in neither is an installed package's."""
        path = Path(path).resolve()
        if path not in self._closures:
            files, names, todo = {path}, {}, [path]
            while todo:
                f = todo.pop()
                if f not in self._imports_of:
                    self._imports_of[f] = _local_imports(f, self.root, self._statements(f))
                for name, dep in self._imports_of[f]:
                    if name is not None:
                        names.setdefault(name, set()).add(dep)
                    if dep not in files:
                        files.add(dep)
                        todo.append(dep)
            self._closures[path] = (tuple(sorted(files)), names)
        return self._closures[path]

    def _statements(self, path: Path) -> list:
        """`_import_statements` of `path`, kept on disk by its content (`INDEX_DIR`/imports):
        parsing the zoo's sources again took ~0.4 s of every warm command."""
        if path not in self._statements_of:
            digest = self.digest(path)
            name = cache_key(_SCHEMA, digest)
            memo = default_cache_dir() / INDEX_DIR / "imports" / f"{name}.json"
            try:
                found = json.loads(memo.read_text())
            except (OSError, ValueError):
                try:
                    found = _import_statements(path.read_bytes(), str(path))
                except OSError:
                    found = []
                if _digest(path) == digest:  # what was parsed is what the key names
                    _write_atomically(memo, json.dumps(found))
            self._statements_of[path] = found
        return self._statements_of[path]

    def key_parts(self, path: Path) -> list:
        out = []
        for f in self.closure(path)[0]:
            out += [_relative(f, self.root), self.digest(f)]
        return out

    def trustworthy(self, path: Path) -> bool:
        """Whether a trace of `path`'s kernels ran the code `key_parts` names: no file of its
        closure changed since `load_zoo` looked (`load_zoo` executes `path` itself afresh), and
        each zoo-local name it may import is, in ``sys.modules``, one of the files keyed (not a
        namesake from another directory), imported after `load_zoo` looked or from a file
        older than this process."""
        path = Path(path).resolve()
        files, names = self.closure(path)
        if any(_digest(f) != self.digest(f) for f in files):
            return False
        started = _process_started()
        for name, candidates in names.items():
            module = sys.modules.get(name)
            loaded = _module_file(module)
            if loaded is None:
                continue  # not imported: none of its code ran
            if loaded not in candidates:
                return False
            if self.preloaded.get(name) is module and not _older_than(loaded, started):
                return False
        return True

    def tracer(self, isa) -> str:
        """`tracer_fingerprint(isa)`, once per instruction set (kept alive here, so its id
        names it)."""
        key = (id(isa), len(isa))
        if key not in self._fingerprints:
            self._fingerprints[key] = (isa, tracer_fingerprint(isa))
        return self._fingerprints[key][1]


def _module_file(module) -> "Path | None":
    f = getattr(module, "__file__", None)
    if not isinstance(f, str) or not f.endswith(".py"):
        return None
    try:
        return Path(f).resolve()
    except OSError:
        return None


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.name


def _process_started() -> "float | None":
    """When this process started, in seconds since the epoch (Linux's /proc), else None."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration, AttributeError):
        return None


def _older_than(path: Path, when: "float | None") -> bool:
    """Whether `path` was last written a second or more before `when` (so a module this process
    imported from it has its current content)."""
    try:
        return when is not None and path.stat().st_mtime < when - 1.0
    except OSError:
        return False


def _local_imports(path: Path, root: Path, statements: list) -> list:
    """``[(module name or None, file)]``: the zoo-local files that the import `statements` of
    `path` (`_import_statements`) name, each dotted prefix with its package ``__init__``, looked
    up as ``import`` would: from the module's directory and the zoo root, a relative import from
    its package; a relative import gives no name."""
    out = []
    for level, module, names in statements:
        if level:
            bases = (path.parents[level - 1],) if level <= len(path.parents) else ()
        else:
            bases = (path.parent, root)
        dotted = [module] + [f"{module}.{n}" if module else n for n in names]
        for base in bases:
            for d in dotted:
                parts = [p for p in d.split(".") if p]
                for i in range(1, len(parts) + 1):
                    stem = base.joinpath(*parts[:i])
                    name = ".".join(parts[:i]) if not level else None
                    out += [(name, f.resolve()) for f in (stem.with_suffix(".py"),
                                                          stem / "__init__.py") if f.is_file()]
                    if not stem.is_dir():
                        break
    return out


def _import_statements(source: bytes, filename: str) -> list:
    """``[[level, module, [names]]]``: every ``import`` statement of `source`, anywhere in it
    (one inside a function runs at trace time): ``import a.b`` is ``[0, "a.b", []]``, ``from
    ..m import x`` is ``[2, "m", ["x"]]`` (``x`` may be a submodule). Only statements are
    visited (the expressions, most of a module's nodes, cannot hold one)."""
    try:
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError):
        return []
    out, todo = [], list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import):
            out += [[0, a.name, []] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append([node.level, node.module or "", [a.name for a in node.names]])
        for block in ("body", "orelse", "finalbody", "handlers", "cases"):
            nested = getattr(node, block, None)
            if isinstance(nested, list):
                todo += nested
    return out


def tracer_fingerprint(isa) -> str:
    """What the tracer is: tirxh's own sources (the language, the tracer and the built-in
    binding tables) and every binding of `isa` (its owner, its fields, and the source of the
    module of each function it holds, so a third-party binding set counts too)."""
    parts = [_SCHEMA, __version__, _tirxh_sources()]
    files = set()
    for b in isa:
        parts.append(f"{isa.owners.get(b.name, '?')}|{_ADDRESS.sub('', repr(b))}")
        for fn in (b.operands, b.check):
            module = sys.modules.get(getattr(fn, "__module__", None) or "")
            f = _module_file(module) if callable(fn) and module is not None else None
            if f is not None:
                files.add(f)
    for f in sorted(files):
        parts += [str(f), _digest(f)]
    return cache_key(*parts)


_TIRXH_SOURCES: list = []


def _tirxh_sources() -> str:
    """The digest of every ``.py`` file of the tirxh package but the zoo (package data),
    computed once per process."""
    if not _TIRXH_SOURCES:
        h = hashlib.sha256()
        zoo = _TIRXH_DIR / "zoo"
        for p in sorted(_TIRXH_DIR.rglob("*.py")):
            if zoo not in p.parents:
                h.update(p.relative_to(_TIRXH_DIR).as_posix().encode() + b"\0")
                h.update(_digest(p).encode())
        _TIRXH_SOURCES.append(h.hexdigest())
    return _TIRXH_SOURCES[0]


# -------------------------------------------------------------------------------------------------
# one entry on disk
# -------------------------------------------------------------------------------------------------

class IndexEntry:
    """One kernel's instruction use under ``<cache dir>/zoo-instructions/<key>.json``. A file
    that cannot be read or written is skipped, never an error: the trace is the truth, the file
    only saves its time."""

    def __init__(self, sources: ZooSources, module_path: Path, relpath: str, name: str, isa):
        self.sources = sources
        self.module_path = Path(module_path).resolve()
        key = cache_key(_SCHEMA, sources.tracer(isa), relpath, name,
                        *sources.key_parts(self.module_path))
        directory = default_cache_dir() / INDEX_DIR
        self.path = directory / f"{key}.json"
        # a few lock files, not one per entry: two kernels sharing one only wait for each other
        self.lock_path = directory / "locks" / f"{key[:2]}.lock"

    def load(self) -> "InstructionUse | None":
        try:
            d = json.loads(self.path.read_text())
            return InstructionUse({b["binding"]: list(b["spellings"]) for b in d["bindings"]},
                                  [], int(d["specializations"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def store(self, use: InstructionUse) -> bool:
        """Write `use` (complete ones only: a failed trace is retried next time) when its
        sources are still those of the key; whether it was written."""
        if not use.complete or not self.sources.trustworthy(self.module_path):
            return False
        return _write_atomically(self.path, json.dumps(use.to_json()))

    @contextmanager
    def locked(self):
        """Hold this entry's lock (flock: the system drops it if the process dies); without
        locks (no fcntl, a file system that refuses) the body runs unlocked."""
        fd = None
        if fcntl is not None:
            try:
                self.lock_path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o666)
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:
                pass
        try:
            yield
        finally:
            if fd is not None:
                os.close(fd)  # and with it the lock


def _write_atomically(path: Path, text: str) -> bool:
    """Write `path` through a temporary file and a rename (a reader sees all or nothing);
    whether it was written (a cache that cannot be written is only slower)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError:
        return False
    return True


def lookup_or_trace(entry: IndexEntry, trace) -> InstructionUse:
    """The stored use, else `trace()` under the entry's lock (stored when complete). A process
    that waited on the lock finds what the holder stored and does not trace again."""
    use = entry.load()
    if use is not None:
        return use
    with entry.locked():
        use = entry.load()
        if use is None:
            use = trace()
            entry.store(use)
    return use
