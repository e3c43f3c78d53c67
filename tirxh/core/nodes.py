"""The collection tree: `Session` -> `Module` -> `KernelItem`, with ``::``-joined node ids.

A kernel module is imported by path under a unique module name, with the project root (and the
module's own directory) on ``sys.path``. Every module-level `Suite` yields one item per case and
target (``path::kernel[case]@target``); every `Kernel` defined in the module and not covered by a
Suite yields compile-only items with default constants (``path::kernel@target``). A kernel's
``targets=`` overrides the project's targets. An item knows its module, kernel, case, constants
and target, and nothing about how it will be run.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import time
import traceback
from pathlib import Path

from .errors import UsageError
from .keywords import compile_expression
from .reports import CollectReport
from .lang.kernel import Kernel
from .nodeids import closest, matches, no_match
from .suite import Suite

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class Node:
    """A collection node. `nodeid` is unique in a session and stable across runs."""

    def __init__(self, name: str, parent: "Node | None", nodeid: str):
        self.name = name
        self.parent = parent
        self.nodeid = nodeid
        self.session = parent.session if parent is not None else self
        self.config = self.session.config

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.nodeid}>"


class Session(Node):
    """The root: holds the config, the command, and what collection produced."""

    def __init__(self, config, command: str):
        self.config = config
        self.command = command
        super().__init__("", None, "")
        self.items: list = []
        self.collect_reports: list = []
        self.deselected: list = []
        self.shouldstop: "str | None" = None
        self.exit_reason: "str | None" = None  # why the run fails beyond its items' outcomes
        self.start = time.time()


class Module(Node):
    """One kernel file. `collect()` imports it and returns its items."""

    def __init__(self, path: Path, parent: Session):
        self.path = Path(path).resolve()
        rel = parent.config.relpath(self.path)
        super().__init__(self.path.name, parent, rel)
        self.module = None

    def _import(self):
        rel = self.nodeid
        modname = "_tirxh_kernels_" + re.sub(r"\W", "_", rel[:-3] if rel.endswith(".py") else rel)
        for d in (str(self.config.rootdir), str(self.path.parent)):
            if d not in sys.path:
                sys.path.insert(0, d)
        spec = importlib.util.spec_from_file_location(modname, self.path)
        if spec is None:
            raise UsageError(f"{rel}: not an importable Python file")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[modname] = mod  # dataclasses and pickling look modules up by name
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            sys.modules.pop(modname, None)
            raise
        self.module = mod
        return mod

    def collect(self) -> list:
        mod = self._import()
        namespace = vars(mod)
        covered = {id(v.kernel) for v in namespace.values() if isinstance(v, Suite)}
        items: list = []
        for var, value in namespace.items():
            if isinstance(value, Suite):
                for c in value.cases:
                    for t in self._targets(value.kernel):
                        items.append(KernelItem(self, value.kernel, value, c, t, var))
            elif isinstance(value, Kernel) and id(value) not in covered and \
                    getattr(value.fn, "__module__", None) == mod.__name__:
                for t in self._targets(value):
                    items.append(KernelItem(self, value, None, None, t, var))
        seen: dict = {}
        for it in items:
            if it.nodeid in seen:
                raise UsageError(f"{self.nodeid}: node id {it.nodeid!r} is produced twice (by "
                                 f"module variables {seen[it.nodeid]!r} and {it.variable!r}); "
                                 f"give the cases distinct names")
            seen[it.nodeid] = it.variable
        return items

    def _targets(self, kernel: Kernel) -> list:
        cfg = self.config
        if kernel.targets is None:
            return list(cfg.project_targets)
        unknown = [t for t in kernel.targets if cfg.targets is not None and t not in cfg.targets]
        if unknown:
            raise UsageError(f"{kernel.loc}: kernel {kernel.name!r}: targets= names unknown "
                             f"target(s) {', '.join(map(repr, unknown))}")
        cli = cfg.getoption("target")
        return [t for t in kernel.targets if not cli or t in cli]


class KernelItem(Node):
    """One kernel x case x target. `suite` and `case` are None for compile-only items."""

    def __init__(self, parent: Module, kernel: Kernel, suite: "Suite | None", case, target: str,
                 variable: str = ""):
        self.kernel = kernel
        self.suite = suite
        self.case = case
        self.target = target
        self.variable = variable
        self.consts = kernel.resolve_consts(case.params if case is not None else {},
                                            strict=False)
        name = kernel.name + (f"[{case.name}]" if case is not None else "") + f"@{target}"
        super().__init__(name, parent, f"{parent.nodeid}::{name}")
        self.module = parent

    @property
    def location(self) -> "tuple[str, int]":
        """(file relative to rootdir, line) of the kernel's ``def``."""
        return self.config.relpath(Path(self.kernel.loc.file)), int(self.kernel.loc.line)

    def keywords(self) -> list:
        """What ``-k`` matches: the module, kernel, target and node id, and the case's name and
        tags; an item without a case (a kernel with no Suite: compiled and analyzed, never
        simulated or timed) carries ``compile_only``, so a selection can leave such items out
        (``-k "kda_bwd and not compile_only"``)."""
        out = [self.module.name, self.module.nodeid, self.kernel.name, self.target, self.name]
        if self.case is not None:
            out.append(self.case.name)
            out.extend(self.case.tags)
        else:
            out.append("compile_only")
        return out


# -------------------------------------------------------------------------------------------------
# collection
# -------------------------------------------------------------------------------------------------

def format_user_traceback(exc: BaseException) -> str:
    """A traceback without tirxh's and importlib's own frames: what the user needs to fix."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith(_PKG_DIR) and not f.filename.startswith("<frozen")]
    text = "".join(traceback.format_list(frames))
    text += "".join(traceback.format_exception_only(type(exc), exc))
    return ("Traceback (most recent call last):\n" + text) if frames else text


def _select_files(config, args: list) -> "tuple[list, list, list]":
    """Kernel files to collect, node-id filters, and the ``path::rest`` arguments among them
    (as ``(argument, filter)``), from the positional arguments.

    A path is taken relative to the working directory (else to the root); a directory selects
    the project's kernel files under it; ``path::rest`` also filters items by node id.
    """
    files = config.kernel_files()
    if not args:
        return files, [], []
    chosen, filters, node_ids = [], [], []
    for arg in args:
        path_part, sep, rest = arg.partition("::")
        p = Path(path_part)
        if not p.is_absolute():
            cand = (Path.cwd() / p).resolve()
            p = cand if cand.exists() else (config.rootdir / p).resolve()
        if not p.exists():
            near = closest(path_part, [config.relpath(f) for f in files])
            raise UsageError(f"{arg}: no such file or directory" +
                             (f"; closest: {', '.join(near)}" if near else ""))
        if p.is_dir():
            under = [f for f in files if p in f.parents]
            chosen.extend(f for f in under if f not in chosen)
            filters.extend(config.relpath(f) for f in under)  # every item of these files
        else:
            if p not in chosen:
                chosen.append(p)
            filters.append(config.relpath(p) + sep + rest)
            if sep:
                node_ids.append((arg, filters[-1]))
    return chosen, filters if node_ids else [], node_ids


def collect(session: Session, args: "list | None" = None) -> None:
    """Fill ``session.items`` and ``session.collect_reports``; apply node ids, ``-k``, and
    ``tirxh_collection_modifyitems``. A module that fails to import becomes a failed collect
    report with its traceback, and collection goes on."""
    config = session.config
    hook = config.pm.hook
    files, filters, node_ids = _select_files(config, list(args or []))
    items: list = []
    for path in files:
        t0 = time.perf_counter()
        node = hook.tirxh_collect_file(path=path, parent=session)
        if node is None:
            continue
        try:
            got = node.collect()
        except KeyboardInterrupt:
            raise
        except (Exception, SystemExit) as e:  # a module calling sys.exit() is its own error
            rep = CollectReport(node.nodeid, "failed", format_user_traceback(e), [],
                                time.perf_counter() - t0)
        else:
            rep = CollectReport(node.nodeid, "passed", "", [i.nodeid for i in got],
                                time.perf_counter() - t0)
            items.extend(got)
        session.collect_reports.append(rep)
        hook.tirxh_report(report=rep, config=config)
    failed = {r.nodeid for r in session.collect_reports if r.outcome == "failed"}
    for arg, flt in node_ids:  # a node id that selects nothing is a usage error (exit 4)
        if flt.split("::")[0] not in failed and not any(matches(i.nodeid, flt) for i in items):
            raise no_match(flt, items, config, session.command)
    if filters:
        items = [i for i in items if any(matches(i.nodeid, f) for f in filters)]
    kexpr = config.getoption("keyword")
    if kexpr:
        match = compile_expression(kexpr)
        keep = [i for i in items if match(i.keywords())]
        session.deselected.extend(i for i in items if i not in keep)
        items = keep
    hook.tirxh_collection_modifyitems(session=session, config=config, items=items)
    session.items = items
    hook.tirxh_collection_finish(session=session)
