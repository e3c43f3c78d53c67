"""The instruction set, targets and IR transforms in force.

Inside a `tirxh` run the session's plugin manager fills them (``activate``). A script that uses the
language directly (``kernel.ptx("sm_90a")``) gets the default: built-in plugins plus installed
entry-point plugins, built once on first use.
"""

from __future__ import annotations

from .bindings import InstructionSet
from .pluginmanager import build_plugin_manager
from .targets import TargetRegistry
from .transforms import TransformRegistry

_ACTIVE: "tuple[InstructionSet, TargetRegistry, TransformRegistry] | None" = None


def collect_toolset(pm) -> "tuple[InstructionSet, TargetRegistry]":
    """Ask every plugin of `pm` for its targets and instruction bindings."""
    isa, targets = InstructionSet(), TargetRegistry()
    pm.hook.tirxh_register_targets.call_historic(kwargs={"registry": targets})
    pm.hook.tirxh_register_instructions.call_historic(kwargs={"isa": isa})
    return isa, targets


def collect_transforms(pm) -> TransformRegistry:
    """Ask every plugin of `pm` for its IR transforms."""
    transforms = TransformRegistry()
    pm.hook.tirxh_register_transforms.call_historic(kwargs={"registry": transforms})
    return transforms


def activate(isa: InstructionSet, targets: TargetRegistry,
             transforms: "TransformRegistry | None" = None) -> None:
    global _ACTIVE
    _ACTIVE = (isa, targets, transforms if transforms is not None else TransformRegistry())


def _default() -> "tuple[InstructionSet, TargetRegistry, TransformRegistry]":
    global _ACTIVE
    if _ACTIVE is None:
        pm = build_plugin_manager()
        _ACTIVE = (*collect_toolset(pm), collect_transforms(pm))
    return _ACTIVE


def default_isa() -> InstructionSet:
    return _default()[0]


def default_targets() -> TargetRegistry:
    return _default()[1]


def default_transforms() -> TransformRegistry:
    return _default()[2]
