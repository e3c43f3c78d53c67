"""The plugin manager: built-ins, installed distributions, ``tirxconf.py`` and ``-p`` plugins.

Modelled on pytest: built-in behaviour is registered as plugins under fixed names from two
explicit tuples (`ESSENTIAL_PLUGINS` cannot be blocked; `DEFAULT_PLUGINS` can, with ``-p no:NAME``),
installed plugins come from the ``tirxh`` entry-point group unless ``TIRXH_DISABLE_PLUGIN_AUTOLOAD``
is set, a project's ``tirxconf.py`` (beside ``tirx.toml``) is registered as the plugin
``tirxconf``, and ``check_pending()`` makes a misspelled hook implementation an error.

Registration order (later plugins' hooks run first, as in pluggy): essential built-ins, default
built-ins, entry-point plugins, ``tirxconf``, ``-p`` plugins.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from importlib import metadata
from pathlib import Path

import pluggy

from .. import __version__
from . import hookspec
from .commands import CommandRegistry
from .errors import PluginValidationError, UsageError

hookimpl = pluggy.HookimplMarker("tirxh")

ENTRY_POINT_GROUP = "tirxh"
AUTOLOAD_ENV = "TIRXH_DISABLE_PLUGIN_AUTOLOAD"
CONFTEST_NAME = "tirxconf"

# cannot be blocked: without them nothing is collected or compiled
ESSENTIAL_PLUGINS = (
    "targets",
    "isa_base",
    "collect",
    "compile",
)
# may be blocked with -p no:NAME
DEFAULT_PLUGINS = (
    "isa_sm80",
    "isa_sm90a",
    "isa_sm100a",
    "terminal",
    "report_log",
    "jsonreport",
    "junitxml",
    "sarif",
    "bench",
    "kb_zoo",
    "kb_ptx",
    "skills",
)


class TirxhPluginManager(pluggy.PluginManager):
    """pluggy's manager with tirxh's loading rules and a record of where each plugin came from."""

    def __init__(self):
        super().__init__("tirxh")
        self.add_hookspecs(hookspec)
        self.dists: dict[str, tuple] = {}  # plugin name -> (distribution, version)
        self.origins: dict[str, str] = {}  # plugin name -> builtin | entrypoint | tirxconf | -p
        self.blocked_names: set[str] = set()
        self._commands: "CommandRegistry | None" = None

    def _record(self, name: str, dist: str, version: str, origin: str) -> None:
        self.dists[name] = (dist, version)
        self.origins[name] = origin

    def register(self, plugin, name=None):
        try:
            return super().register(plugin, name=name)
        except pluggy.PluginValidationError as e:
            raise PluginValidationError(e.plugin, str(e)) from None

    def load_builtin(self, names, blocked=()) -> None:
        for name in names:
            if name in blocked and name not in ESSENTIAL_PLUGINS:
                self.set_blocked(name)
                continue
            if self.has_plugin(name) or self.is_blocked(name):
                continue
            try:
                mod = importlib.import_module(f"tirxh.plugins.{name}")
            except ModuleNotFoundError as e:
                if e.name == f"tirxh.plugins.{name}":
                    continue  # a built-in not present in this build
                raise
            self.register(mod, name=name)
            self._record(name, "tirxh", __version__, "builtin")

    def load_entrypoints(self, blocked=()) -> None:
        if os.environ.get(AUTOLOAD_ENV):
            return
        for ep in _entry_points():
            if ep.name in blocked or self.is_blocked(ep.name) or self.has_plugin(ep.name):
                if ep.name in blocked:
                    self.set_blocked(ep.name)
                continue
            self._register_ep(ep)

    def load_entrypoint(self, name: str) -> bool:
        """Register the installed entry-point plugin `name` (even with autoload off); False
        when no distribution installs one by that name."""
        if self.has_plugin(name) or self.is_blocked(name):
            return self.has_plugin(name)
        for ep in _entry_points():
            if ep.name == name:
                self._register_ep(ep)
                return True
        return False

    def _register_ep(self, ep) -> None:
        try:
            plugin = ep.load()
        except Exception as e:
            raise PluginValidationError(ep, f"plugin {ep.name!r} (entry point {ep.value!r}) "
                                            f"failed to import: {type(e).__name__}: {e}") from e
        self.register(plugin, name=ep.name)
        dist = getattr(ep, "dist", None)
        self._record(ep.name, dist.name if dist else "?", dist.version if dist else "?",
                     "entrypoint")

    def load_conftest(self, path: "Path | str") -> None:
        """Register a project's ``tirxconf.py`` as the plugin ``tirxconf`` (unless blocked)."""
        path = Path(path)
        if self.is_blocked(CONFTEST_NAME) or self.has_plugin(CONFTEST_NAME):
            return
        modname = f"_tirxh_conf_{abs(hash(str(path.resolve())))}"
        spec = importlib.util.spec_from_file_location(modname, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[modname] = mod
        try:
            spec.loader.exec_module(mod)
        except Exception as e:
            del sys.modules[modname]
            tb = "".join(traceback.format_exception(type(e), e, e.__traceback__.tb_next))
            raise UsageError(f"{path}: importing tirxconf.py failed:\n{tb}") from None
        self.register(mod, name=CONFTEST_NAME)
        self._record(CONFTEST_NAME, "(project)", "", "tirxconf")

    def import_plugin(self, spec: str) -> None:
        """``-p NAME``: an entry-point name, a built-in name, or an importable module path."""
        if self.has_plugin(spec) or self.is_blocked(spec) or self.load_entrypoint(spec):
            return
        if spec in ESSENTIAL_PLUGINS + DEFAULT_PLUGINS:
            self.load_builtin((spec,))
            if self.has_plugin(spec):
                return
        try:
            mod = importlib.import_module(spec)
        except ImportError as e:
            raise UsageError(f"-p {spec}: no plugin, entry point or module named {spec!r} "
                             f"({type(e).__name__}: {e})") from None
        if self.is_registered(mod):  # already loaded (an installed plugin's module): nothing to do
            return
        self.register(mod, name=spec)
        dist = _dist_of_module(spec)
        self._record(spec, *(dist or ("(module)", "")), "-p")

    def set_blocked(self, name: str) -> None:
        self.blocked_names.add(name)
        super().set_blocked(name)

    def check_pending(self) -> None:
        try:
            super().check_pending()
        except pluggy.PluginValidationError as e:
            raise PluginValidationError(e.plugin, str(e)) from None

    def commands(self) -> CommandRegistry:
        """The commands plugins contribute (``tirxh_add_commands``), collected on first use; a
        plugin's mistake there (a bad or duplicate name) is a `PluginValidationError`."""
        if self._commands is None:
            self._commands = CommandRegistry()
            try:
                self.hook.tirxh_add_commands.call_historic(kwargs={"commands": self._commands})
            except ValueError as e:
                raise PluginValidationError(None, str(e)) from None
        return self._commands

    def parse_hookimpl_opts(self, plugin, name):
        # a function named tirxh_* without a marker still counts as an implementation (as pytest
        # does for pytest_*), so a misspelled one is caught by check_pending
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is None and name.startswith("tirxh_"):
            method = getattr(plugin, name, None)
            if callable(method):
                return {}
        return opts

    def _record_runtime(self, name: str, plugin) -> None:
        modname = getattr(plugin, "__name__", None) if isinstance(plugin, type(sys)) else \
            type(plugin).__module__
        modname = modname or ""
        if modname == "tirxh" or modname.startswith("tirxh."):
            self._record(name, "tirxh", __version__, "builtin")
        else:
            dist = _dist_of_module(modname) if modname else None
            self._record(name, *(dist or ("?", "")), "runtime")

    def plugin_infos(self) -> list:
        """Every registered plugin: name, distribution, version, file, origin, hooks (sorted)."""
        out = []
        for name, plugin in self.list_name_plugin():
            if plugin is None:
                continue
            if name not in self.dists:  # registered at run time by another plugin
                self._record_runtime(name, plugin)
            dist, version = self.dists[name]
            hooks = sorted(h.name for h in (self.get_hookcallers(plugin) or []))
            out.append({"name": name, "distribution": dist, "version": version,
                        "file": _plugin_file(plugin), "origin": self.origins.get(name, "?"),
                        "hooks": hooks})
        return out


def _entry_points():
    return metadata.entry_points(group=ENTRY_POINT_GROUP)


def installed_plugins() -> dict:
    """Entry-point plugin name -> (distribution, module), for every installed plugin (loaded or
    not)."""
    return {ep.name: (ep.dist.name if getattr(ep, "dist", None) else "?", ep.module)
            for ep in _entry_points()}


def _plugin_file(plugin) -> str:
    f = getattr(plugin, "__file__", None)
    if f is None:
        mod = sys.modules.get(getattr(type(plugin), "__module__", ""), None)
        f = getattr(mod, "__file__", None)
    return str(f) if f else ""


def _dist_of_module(modname: str) -> "tuple[str, str] | None":
    top = modname.split(".")[0]
    try:
        names = metadata.packages_distributions().get(top) or []
        if names:
            return names[0], metadata.version(names[0])
    except Exception:  # metadata is best effort; the plugin itself is loaded
        pass
    return None


def build_plugin_manager(plugins=(), blocked=(), autoload: bool = True,
                         conftest: "Path | None" = None) -> TirxhPluginManager:
    """A manager with built-ins, installed plugins (unless disabled), the project's
    ``tirxconf.py`` and `plugins` (``-p``), in that order; `blocked` names are never loaded."""
    pm = TirxhPluginManager()
    blocked = set(blocked)
    for b in blocked:
        if b in ESSENTIAL_PLUGINS:
            raise UsageError(f"-p no:{b}: plugin {b!r} is essential and cannot be blocked")
        pm.set_blocked(b)
    pm.load_builtin(ESSENTIAL_PLUGINS + DEFAULT_PLUGINS, blocked)
    if autoload:
        pm.load_entrypoints(blocked)
    if conftest is not None and Path(conftest).is_file():
        pm.load_conftest(conftest)
    for p in plugins:
        pm.import_plugin(p)
    return pm
