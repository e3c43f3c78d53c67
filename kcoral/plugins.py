"""KCoral's plugin manager: built-in board types and baselines, then the ``kcoral`` entry-point
group (unless ``KCORAL_DISABLE_PLUGIN_AUTOLOAD`` is set), then ``check_pending()``.

`registries()` fills the three registries once per process; the daemon and each worker call it,
so a board type or baseline installed by a plugin is available on both sides.

Built in: the ``cuda`` and ``fake`` board types and the torch/FLA baselines (operator-installed:
each registers only when its package is installed, and imports it only where it runs).
Everything else arrives through the entry-point group: the ``sim`` board from the numsim
distribution (``tirxh-numsim``), the ``ncu`` and
``compute-sanitizer`` tools from ``tirxh-ncu-profile``, the ``iket`` tool from ``tirxh-iket``.
The daemon imports none of them by name; `PROVIDERS` only says where a missing one comes from.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from importlib import metadata

import pluggy

from . import hookspec
from .baselines import BaselineRegistry
from .boards import BoardTypeRegistry
from .tools import ToolRegistry

hookimpl = pluggy.HookimplMarker("kcoral")

ENTRY_POINT_GROUP = "kcoral"
AUTOLOAD_ENV = "KCORAL_DISABLE_PLUGIN_AUTOLOAD"

BUILTIN_PLUGINS = (
    "kcoral.boards.fake",
    "kcoral.boards.cuda",
    "kcoral.baselines.torch_ops",
    "kcoral.baselines.torch_zoo",
    "kcoral.baselines.torch_zoo2",
    "kcoral.baselines.fla_ops",
    "kcoral.baselines.gemm_peers",
)
# where a board type, tool or baseline that is not built in comes from (for messages only)
PROVIDERS = {"sim": "the numsim distribution (pip install tirxh-numsim, or -e plugins/numsim)",
             "ncu": "tirxh-ncu-profile", "compute-sanitizer": "tirxh-ncu-profile",
             "iket": "tirxh-iket"}


class KCoralPluginManager(pluggy.PluginManager):
    def __init__(self):
        super().__init__("kcoral")
        self.add_hookspecs(hookspec)

    def parse_hookimpl_opts(self, plugin, name):
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is None and name.startswith("kcoral_"):
            if callable(getattr(plugin, name, None)):
                return {}
        return opts


@dataclass
class Registries:
    board_types: object
    baselines: object
    tools: object
    pm: KCoralPluginManager


_CACHED: "Registries | None" = None


def build(extra_plugins=(), autoload: bool = True) -> Registries:
    pm = KCoralPluginManager()
    for name in BUILTIN_PLUGINS:
        pm.register(importlib.import_module(name), name=name)
    if autoload and not os.environ.get(AUTOLOAD_ENV):
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
            if not pm.has_plugin(ep.name):
                pm.register(ep.load(), name=ep.name)
    for p in extra_plugins:
        pm.register(importlib.import_module(p) if isinstance(p, str) else p)
    for p in os.environ.get("KCORAL_PLUGINS", "").split(","):
        if p.strip() and not pm.has_plugin(p.strip()):
            pm.register(importlib.import_module(p.strip()), name=p.strip())
    pm.check_pending()
    regs = Registries(BoardTypeRegistry(), BaselineRegistry(), ToolRegistry(), pm)
    pm.hook.kcoral_register_board_types.call_historic(kwargs={"registry": regs.board_types})
    pm.hook.kcoral_register_baselines.call_historic(kwargs={"registry": regs.baselines})
    pm.hook.kcoral_register_tools.call_historic(kwargs={"registry": regs.tools})
    return regs


def registries() -> Registries:
    """The process-wide registries (built on first use)."""
    global _CACHED
    if _CACHED is None:
        _CACHED = build()
    return _CACHED
