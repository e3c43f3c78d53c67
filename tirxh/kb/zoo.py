"""The kernel zoo as data: what each zoo kernel is, which PTX it uses, what it measured.

A zoo is a ``tirx.toml`` project. The one installed with tirxh is the package data ``tirxh.zoo``
(the checkout's ``zoo/`` in an editable install); any other directory can be named. `load_zoo`
imports every kernel module its ``[project] kernels`` globs match (by path, as the collector does)
and describes each ``@T.kernel`` defined there as a `ZooKernel`:

- the module header (its docstring: formula, algorithm, techniques) and the technique tags (the
  module's ``TAGS`` tuple, else the docstring's ``Tags:`` line);
- its suites' cases (``small`` ones are what ``tirxh check`` simulates, the others are benchmark
  sizes) with their FLOPs and bytes, the tolerance and the baselines;
- the PTX instructions it uses, traced from the IR of every distinct specialization its cases ask
  for: binding names and exact spellings (a trace that fails is recorded, and the use list then
  says it is incomplete rather than pretending to be whole); kept on disk by content
  (`tirxh.kb.zooindex`);
- measured figures: the rows of the zoo README's tables that name its module.

A module that fails to import is a problem (``tirxh zoo list`` fails on it); malformed or
inconsistent tags are warnings. Both are recorded with their file, never skipped.
"""

from __future__ import annotations

import difflib
import importlib.resources
import importlib.util
import inspect
import re
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from ..core.config import CONFIG_NAME, load_toml
from ..core.errors import UsageError
from ..core.lang.kernel import Kernel
from ..core.suite import Suite, Tolerance
from .textsearch import match, terms_of
from .zooindex import IndexEntry, InstructionUse, ZooSources, lookup_or_trace, trace_use

ZOO_PACKAGE = "tirxh.zoo"
# ``Tags: a, b,`` and its continuation lines, up to a blank line or the next ``Field:`` line
_TAGS_LINE = re.compile(r"^[ \t]*Tags:[ \t]*(.+(?:\n(?![ \t]*(?:\n|[A-Z][\w ]*:)).+)*)", re.M)
_MODULE_CELL = re.compile(r"`([^`]+\.py)`")

# weights of the fields a search term can match (a name says more than a word in the header)
SEARCH_WEIGHTS = {"name": 8, "tags": 6, "instructions": 4, "header": 1}


def installed_zoo() -> Path:
    """The zoo shipped with tirxh: the directory of the package ``tirxh.zoo``."""
    try:
        files = importlib.resources.files(ZOO_PACKAGE)
    except ModuleNotFoundError:
        raise UsageError(f"this tirxh installation has no zoo (package {ZOO_PACKAGE} is missing); "
                         f"reinstall tirxh, or name a zoo with --zoo DIR") from None
    return Path(str(files))


def zoo_root(path: "str | Path | None" = None) -> Path:
    """`path` (a zoo directory) or the installed zoo; either must hold a ``tirx.toml``."""
    root = Path(path).resolve() if path else installed_zoo()
    if not (root / CONFIG_NAME).is_file():
        raise UsageError(f"--zoo {root}: not a zoo (a tirx.toml project); no {CONFIG_NAME} there")
    return root


# -------------------------------------------------------------------------------------------------
# what one kernel is
# -------------------------------------------------------------------------------------------------

@dataclass
class ZooModule:
    """One kernel module of the zoo; `error` holds the traceback of a failed import, `warnings`
    what is inconsistent in its declarations (tags)."""

    path: Path
    relpath: str
    header: str = ""
    tags: tuple = ()
    warnings: list = field(default_factory=list)
    error: str = ""
    kernels: list = field(default_factory=list)
    sources: "ZooSources | None" = None  # the zoo's sources before import (the index's keys)


@dataclass(eq=False)
class ZooKernel:
    """One ``@T.kernel`` of a zoo module, with the suites (``(variable, Suite)``) that cover it
    and the module variables bound to it (the ``def``'s name, or ``k = make_kernel("k")``)."""

    name: str
    module: ZooModule
    kernel: Kernel
    suites: list
    figures: list = field(default_factory=list)
    variables: tuple = ()
    _uses: "InstructionUse | None" = None

    @property
    def line(self) -> int:
        return int(self.kernel.loc.line)

    @property
    def ident(self) -> str:
        """``kernels/vadd.py::vadd``: unique in the zoo even when two modules share a name."""
        return f"{self.module.relpath}::{self.name}"

    @property
    def doc(self) -> str:
        return (self.kernel.__doc__ or "").strip()

    @property
    def summary(self) -> str:
        """The first line of the kernel's docstring, else of its module's header."""
        for text in (self.doc, self.module.header):
            if text.strip():
                return text.strip().splitlines()[0].strip()
        return ""

    def targets(self, default: list) -> list:
        return list(self.kernel.targets) if self.kernel.targets else list(default)

    def cases(self) -> list:
        """Every case of every suite: name, parameters, small/large, tags, FLOPs and bytes."""
        out = []
        for var, suite in self.suites:
            for c in suite.cases:
                row = {"suite": var, "name": c.name, "params": _jsonable(c.params),
                       "small": bool(c.small), "tags": list(c.tags)}
                try:
                    work = suite.work(c)
                except Exception as e:  # a FLOP/byte formula that raises is the zoo's bug
                    row["work_error"] = f"{type(e).__name__}: {e}"
                else:
                    row.update(flops=_jsonable(work["flops"]), bytes=_jsonable(work["bytes"]))
                out.append(row)
        return out

    def checking(self) -> list:
        """Per suite: the outputs compared, the tolerance rule and the baselines timed beside."""
        return [{"suite": var, "outputs": list(s.outputs), "tolerance": _tolerance(s.tolerance),
                 "baselines": _jsonable(list(s.baselines))} for var, s in self.suites]

    def instructions(self, isa) -> InstructionUse:
        """Trace every distinct specialization the cases ask for (the defaults without a suite)
        with the instruction set `isa`; kept per kernel, in memory and on disk
        (`tirxh.kb.zooindex`: tracing the whole zoo takes minutes, and every `tirxh zoo search`
        and `tirxh ptx show` needs it)."""
        if self._uses is None:
            entry = IndexEntry(self.module.sources, self.module.path, self.module.relpath,
                               self.name, isa)
            self._uses = lookup_or_trace(entry, lambda: self._trace(isa))
        return self._uses

    def _trace(self, isa) -> InstructionUse:
        params = [(c.name, c.params) for _, s in self.suites for c in s.cases] or [(None, {})]
        return trace_use(self.kernel, params, self.ident, isa)

    def summary_json(self, default_targets: list) -> dict:
        return {"name": self.name, "id": self.ident, "module": self.module.relpath,
                "line": self.line, "summary": self.summary, "tags": list(self.module.tags),
                "targets": self.targets(default_targets),
                "cases": sum(len(s.cases) for _, s in self.suites)}

    def to_json(self, isa, default_targets: list) -> dict:
        doc = self.summary_json(default_targets)
        doc.update(path=str(self.module.path), header=self.module.header, doc=self.doc,
                   params=[{"name": p.name, "kind": p.kind,
                            "dtype": p.dtype.name if p.dtype is not None else None,
                            **({"default": _jsonable(p.default)} if p.kind == "const" and
                               p.default is not inspect.Parameter.empty else {})}
                           for p in self.kernel.params],
                   cases=self.cases(), checking=self.checking(),
                   instructions=self.instructions(isa).to_json(), figures=self.figures,
                   warnings=list(self.module.warnings))
        return doc


def _tolerance(t) -> dict:
    if isinstance(t, Tolerance):
        out = {"rtol": t.rtol, "atol": t.atol, "rms": t.rms}
        return dict(out, atol_rms=t.atol_rms) if t.atol_rms else out
    if isinstance(t, dict):
        return {k: _tolerance(v) for k, v in t.items()}
    return {"value": repr(t)}


def _jsonable(v):
    """Case parameters and work figures as JSON values (numpy scalars -> Python numbers)."""
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    item = getattr(v, "item", None)
    if callable(item):
        try:
            return item()
        except (TypeError, ValueError):
            pass
    return repr(v)


# -------------------------------------------------------------------------------------------------
# the whole zoo
# -------------------------------------------------------------------------------------------------

@dataclass
class SearchHit:
    """A kernel that matched every term of a query; `matched` maps a field to what matched."""

    kernel: ZooKernel
    score: int
    matched: dict

    def to_json(self, default_targets: list) -> dict:
        doc = self.kernel.summary_json(default_targets)
        doc.update(score=self.score, matched=self.matched)
        return doc


@dataclass
class Zoo:
    """Every module and kernel of one zoo directory, and its default targets."""

    root: Path
    modules: list
    targets: list

    @property
    def kernels(self) -> list:
        return [k for m in self.modules for k in m.kernels]

    @property
    def problems(self) -> list:
        """Modules that failed to import, one text each naming the file: their kernels are
        missing from the zoo."""
        return [f"{m.relpath}: failed to import:\n{m.error}" for m in self.modules if m.error]

    @property
    def warnings(self) -> list:
        """Inconsistent declarations (tags), one text each naming the file."""
        return [f"{m.relpath}: {w}" for m in self.modules for w in m.warnings]

    def find(self, name: str) -> ZooKernel:
        """A kernel by name, by ``module::kernel``, or by module (file name, stem or path) when
        the module holds one kernel; a clear `UsageError` (with near names) otherwise."""
        kernels = self.kernels
        if "::" in name:
            found = [k for k in kernels if k.ident == name or
                     f"{Path(k.module.relpath).name}::{k.name}" == name]
        else:
            found = [k for k in kernels if k.name == name]
            if not found:
                found = [k for k in kernels if name in (
                    k.module.relpath, Path(k.module.relpath).name, Path(k.module.relpath).stem)]
        if len(found) == 1:
            return found[0]
        if found:
            raise UsageError(f"zoo: {name!r} is ambiguous: " +
                             ", ".join(k.ident for k in found) + "; name one as module::kernel")
        names = sorted({k.name for k in kernels} | {Path(m.relpath).stem for m in self.modules})
        near = difflib.get_close_matches(name, names, n=4, cutoff=0.5)
        hint = f"; did you mean {', '.join(near)}?" if near else "; `tirxh zoo list` lists them"
        broken = [m.relpath for m in self.modules if m.error]
        note = f" ({', '.join(broken)} failed to import)" if broken else ""
        raise UsageError(f"zoo {self.root}: no kernel named {name!r}{hint}{note}")

    def search(self, query: str, isa) -> list:
        """Kernels matching every term of `query` (`tirxh.kb.textsearch`: the name, a tag, an
        instruction's binding or spelling, the header), best first."""
        terms = terms_of(query, "zoo search")
        hits = []
        for k in self.kernels:
            use = k.instructions(isa)
            fields = {"name": [k.name, Path(k.module.relpath).stem], "tags": list(k.module.tags),
                      "instructions": sorted(use.bindings) + use.spellings(),
                      "header": [k.module.header, k.doc]}
            got = match(terms, fields, SEARCH_WEIGHTS, prose=("header",))
            if got is not None:
                hits.append(SearchHit(k, got[0], got[1]))
        return sorted(hits, key=lambda h: (-h.score, h.kernel.name, h.kernel.module.relpath))

    def users_of(self, binding_names, isa) -> list:
        """``[(kernel, spellings)]``: the kernels whose traced IR uses any of `binding_names`."""
        names = set(binding_names)
        out = []
        for k in self.kernels:
            use = k.instructions(isa)
            spellings = sorted({s for b in names for s in use.bindings.get(b, ())})
            if spellings:
                out.append((k, spellings))
        return out


def load_zoo(path: "str | Path | None" = None) -> Zoo:
    """Read the zoo at `path` (default: the installed one); see the module docstring."""
    root = zoo_root(path)
    project = load_toml(root / CONFIG_NAME).get("project", {})
    globs = project.get("kernels", ["kernels/*.py"])
    targets = project.get("targets", ["sm_90a"])
    readme = root / "README.md"
    figures = readme_figures(readme.read_text(encoding="utf-8")) if readme.is_file() else {}
    files, seen = [], set()
    for pattern in globs:
        for p in sorted(root.glob(pattern)):
            if p.is_file() and p.suffix == ".py" and p not in seen:
                seen.add(p)
                files.append(p)
    # read before any import: the instruction index keys on what the modules were loaded from
    sources = ZooSources(root, [root] + [p.parent for p in files])
    modules = [_load_module(root, p) for p in files]
    for m in modules:
        m.sources = sources
        for k in m.kernels:
            k.figures = figures.get(m.relpath, [])
    return Zoo(root, modules, list(targets))


def _load_module(root: Path, path: Path) -> ZooModule:
    rel = path.relative_to(root).as_posix()
    mod = ZooModule(path, rel)
    name = "_tirxh_zoo_" + re.sub(r"\W", "_", rel[:-3])
    # the zoo's root and the module's directory are importable, as when `tirxh check` collects it
    for d in (str(root), str(path.parent)):
        if d not in sys.path:
            sys.path.insert(0, d)
    try:
        module = import_path(path, name)
    except Exception as e:
        mod.error = "".join(traceback.format_exception_only(type(e), e)).strip()
        return mod
    mod.header = (module.__doc__ or "").strip()
    mod.tags = _tags(module, mod)
    namespace = vars(module)
    suites = [(var, v) for var, v in namespace.items() if isinstance(v, Suite)]
    variables: dict = {}  # a kernel -> the module variables bound to it (a def, or a factory's)
    for var, value in namespace.items():
        if isinstance(value, Kernel) and getattr(value.fn, "__module__", None) == name:
            variables.setdefault(id(value), (value, []))[1].append(var)
    for value, names in variables.values():
        mod.kernels.append(ZooKernel(value.name, mod, value,
                                     [(sv, s) for sv, s in suites if s.kernel is value],
                                     variables=tuple(names)))
    return mod


def import_path(path: Path, modname: str):
    """Execute the file at `path` as the module `modname`. It is in ``sys.modules`` while it
    runs (dataclasses and pickling look modules up by name) and taken out again if it raises."""
    spec = importlib.util.spec_from_file_location(modname, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(modname, None)
        raise
    return module


def _tags(module, mod: ZooModule) -> tuple:
    """The module's ``TAGS`` tuple, else its docstring's ``Tags:`` line; a disagreement between
    the two or a malformed ``TAGS`` is recorded as a warning."""
    line = _TAGS_LINE.search(mod.header)
    from_doc = tuple(t.strip() for t in line.group(1).replace("\n", " ").split(",")
                     if t.strip()) if line else ()
    declared = getattr(module, "TAGS", None)
    if declared is None:
        return from_doc
    if not isinstance(declared, (tuple, list)) or not all(isinstance(t, str) for t in declared):
        mod.warnings.append(f"TAGS must be a tuple of strings, got {declared!r}")
        return from_doc
    if from_doc and set(from_doc) != set(declared):
        mod.warnings.append(f"TAGS {tuple(declared)!r} and the docstring's Tags: line "
                            f"{from_doc!r} differ")
    return tuple(declared)


def readme_figures(text: str) -> dict:
    """Rows of the Markdown tables in a zoo README, by the module path a cell names
    (```kernels/vadd.py```): ``{path: [{column: cell}, ...]}`` without the naming cell."""
    out: dict = {}
    header = None
    for line in text.splitlines():
        s = line.strip()
        if not s.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", s.strip("|"))]
        if header is None:
            header = cells
            continue
        if all(c and set(c) <= set("-: ") for c in cells):
            continue  # the |---|---| rule under the header
        for i, c in enumerate(cells):
            m = _MODULE_CELL.fullmatch(c)
            if m:
                row = {h: v for j, (h, v) in enumerate(zip(header, cells)) if j != i}
                out.setdefault(m.group(1), []).append(row)
                break
    return out
