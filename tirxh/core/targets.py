"""Compilation targets as data (contributed by plugins through ``tirxh_register_targets``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Target:
    """One GPU target.

    name: the PTX ``.target`` (``sm_90a``); sm: the numeric SM (90); ptx_isa: the ``.version`` the
    emitter writes; isets: binding sets accepted; limits: per-block and per-SM resource limits used
    by validation (threads, shared memory bytes, registers, cluster size); description: one line.
    """

    name: str
    sm: int
    ptx_isa: tuple
    isets: tuple
    limits: dict = field(default_factory=dict, hash=False, compare=False)
    description: str = ""


class TargetRegistry:
    """Targets by name; registering the same name twice is a plugin conflict."""

    def __init__(self):
        self.by_name: dict[str, Target] = {}
        self.owners: dict[str, str] = {}

    def add(self, target: Target, owner: str = "?") -> None:
        if target.name in self.by_name:
            raise ValueError(f"target {target.name!r} registered twice (by "
                             f"{self.owners[target.name]!r} and {owner!r})")
        self.by_name[target.name] = target
        self.owners[target.name] = owner

    def get(self, name: str) -> Target:
        try:
            return self.by_name[name]
        except KeyError:
            raise KeyError(f"unknown target {name!r}; known targets: "
                           f"{', '.join(sorted(self.by_name)) or 'none'}") from None

    def __contains__(self, name: str) -> bool:
        return name in self.by_name

    def __iter__(self):
        return iter(self.by_name.values())
