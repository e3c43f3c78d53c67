"""The plugin manager: built-ins, installed distributions, ``tirxconf.py`` and ``-p`` plugins.

Modelled on pytest: built-in behaviour is registered as plugins under fixed names from two
explicit tuples (`ESSENTIAL_PLUGINS` cannot be blocked; `DEFAULT_PLUGINS` can, with ``-p no:NAME``),
installed plugins come from the ``tirxh`` entry-point group unless ``TIRXH_DISABLE_PLUGIN_AUTOLOAD``
is set, and ``check_pending()`` makes a misspelled hook implementation an error.
"""

from __future__ import annotations

import importlib
import os
from importlib import metadata

import pluggy

from . import hookspec

hookimpl = pluggy.HookimplMarker("tirxh")

ENTRY_POINT_GROUP = "tirxh"
AUTOLOAD_ENV = "TIRXH_DISABLE_PLUGIN_AUTOLOAD"

# cannot be blocked: without them nothing compiles
ESSENTIAL_PLUGINS = (
    "targets",
    "isa_base",
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
)


class PluginValidationError(Exception):
    """A plugin author's mistake (a hook with no spec, a bad signature); carries the plugin."""

    def __init__(self, plugin, message: str):
        self.plugin = plugin
        super().__init__(message)


class TirxhPluginManager(pluggy.PluginManager):
    """pluggy's manager with tirxh's loading rules and a record of where each plugin came from."""

    def __init__(self):
        super().__init__("tirxh")
        self.add_hookspecs(hookspec)
        self.dists: dict[str, tuple] = {}  # plugin name -> (distribution, version)
        self.blocked_names: set[str] = set()

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
            self.dists[name] = ("tirxh", _version())

    def load_entrypoints(self, blocked=()) -> None:
        if os.environ.get(AUTOLOAD_ENV):
            return
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
            if ep.name in blocked or self.is_blocked(ep.name) or self.has_plugin(ep.name):
                if ep.name in blocked:
                    self.set_blocked(ep.name)
                continue
            plugin = ep.load()
            self.register(plugin, name=ep.name)
            dist = getattr(ep, "dist", None)
            self.dists[ep.name] = (dist.name, dist.version) if dist else ("?", "?")

    def import_plugin(self, spec: str) -> None:
        """``-p NAME``: a module path or an entry-point name."""
        if self.has_plugin(spec) or self.is_blocked(spec):
            return
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
            if ep.name == spec:
                self.register(ep.load(), name=spec)
                dist = getattr(ep, "dist", None)
                self.dists[spec] = (dist.name, dist.version) if dist else ("?", "?")
                return
        mod = importlib.import_module(spec)
        self.register(mod, name=spec)
        self.dists[spec] = ("-p", "")

    def set_blocked(self, name: str) -> None:
        self.blocked_names.add(name)
        super().set_blocked(name)

    def check_pending(self) -> None:
        try:
            super().check_pending()
        except pluggy.PluginValidationError as e:
            raise PluginValidationError(e.plugin, str(e)) from None

    def parse_hookimpl_opts(self, plugin, name):
        # a function named tirxh_* without a marker still counts as an implementation (as pytest
        # does for pytest_*), so a misspelled one is caught by check_pending
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is None and name.startswith("tirxh_"):
            method = getattr(plugin, name, None)
            if callable(method):
                return {}
        return opts


def _version() -> str:
    from .. import __version__
    return __version__


def build_plugin_manager(plugins=(), blocked=(), autoload: bool = True) -> TirxhPluginManager:
    """A manager with built-ins, installed plugins (unless disabled) and `plugins` (``-p``)."""
    pm = TirxhPluginManager()
    blocked = set(blocked)
    for b in blocked:
        if b in ESSENTIAL_PLUGINS:
            from .errors import UsageError
            raise UsageError(f"plugin {b!r} is essential and cannot be blocked")
        pm.set_blocked(b)
    pm.load_builtin(ESSENTIAL_PLUGINS + DEFAULT_PLUGINS, blocked)
    if autoload:
        pm.load_entrypoints(blocked)
    for p in plugins:
        pm.import_plugin(p)
    return pm
