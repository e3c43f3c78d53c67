"""Baselines: operator-installed reference implementations timed side by side with a candidate.

A baseline is registered by a plugin through ``kcoral_register_baselines(registry)`` and runs
inside the board's worker. Interface (duck-typed)::

    name: str                                   # "torch.matmul"
    available(device) -> str | None             # None, or why it cannot run on this device
    prepare(device, buffers, args) -> callable  # buffers: name -> DeviceBuffer; args: the job's
                                                # mapping of roles ("a", "b", "out") to buffer
                                                # names and options; the callable enqueues one run
                                                # on the device's stream

The shipped baselines (`torch.matmul`, `torch.sdpa`, `fla.chunk_kda`) are registered only when
their package imports. Jobs name them in ``baselines: [{"name": ..., "args": {...}}]`` to be timed
interleaved with the candidate, or in ``checks[i].baseline`` to serve as the reference.
"""

from __future__ import annotations


class BaselineRegistry:
    def __init__(self):
        self._items: dict[str, object] = {}
        self._owners: dict[str, str] = {}

    def add(self, baseline, owner: str = "?") -> None:
        name = getattr(baseline, "name", "")
        if not name or not callable(getattr(baseline, "prepare", None)):
            raise TypeError(f"baseline {baseline!r} from {owner!r} needs a name and prepare()")
        if name in self._items:
            raise ValueError(f"baseline {name!r} registered twice: by {self._owners[name]!r} "
                             f"and {owner!r}")
        self._items[name] = baseline
        self._owners[name] = owner

    def get(self, name: str):
        try:
            return self._items[name]
        except KeyError:
            raise KeyError(f"unknown baseline {name!r}; installed: {sorted(self._items)}") \
                from None

    def names(self) -> list:
        return sorted(self._items)

    def __contains__(self, name) -> bool:
        return name in self._items
