"""The instruction set and targets in force.

Inside a `tirxh` run the session's plugin manager fills them (``activate``). A script that uses the
language directly (``kernel.ptx("sm_90a")``) gets the default: built-in plugins plus installed
entry-point plugins, built once on first use.
"""

from __future__ import annotations

from .bindings import InstructionSet
from .targets import TargetRegistry

_ACTIVE: "tuple[InstructionSet, TargetRegistry] | None" = None


def collect_toolset(pm) -> "tuple[InstructionSet, TargetRegistry]":
    """Ask every plugin of `pm` for its targets and instruction bindings."""
    isa, targets = InstructionSet(), TargetRegistry()
    pm.hook.tirxh_register_targets.call_historic(kwargs={"registry": targets})
    pm.hook.tirxh_register_instructions.call_historic(kwargs={"isa": isa})
    return isa, targets


def activate(isa: InstructionSet, targets: TargetRegistry) -> None:
    global _ACTIVE
    _ACTIVE = (isa, targets)


def _default() -> "tuple[InstructionSet, TargetRegistry]":
    global _ACTIVE
    if _ACTIVE is None:
        from .pluginmanager import build_plugin_manager
        _ACTIVE = collect_toolset(build_plugin_manager())
    return _ACTIVE


def default_isa() -> InstructionSet:
    return _default()[0]


def default_targets() -> TargetRegistry:
    return _default()[1]
