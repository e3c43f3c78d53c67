"""Board types, board specs and the device interface the measurement protocol runs against.

A *board type* (plugin, ``kcoral_register_board_types``) discovers boards on this host and opens
a `Device` for one of them inside that board's worker process. A *board* is one device: it has
one worker process and runs one job at a time. `Device` is the narrow interface that
`kcoral.measure` drives (buffers, module, launches, timed batches); the ``cuda`` type implements
it with the driver API, ``fake`` with numpy for tests, ``sim`` with numsim (no timing).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class BoardSpec:
    """One board as the daemon schedules it (JSON-serializable; handed to the worker)."""

    name: str
    type: str
    target: str
    tags: list = field(default_factory=list)
    properties: dict = field(default_factory=dict)
    limits: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)  # type-specific (device ordinal, fake knobs)
    unavailable: str = ""  # non-empty: why jobs for this board are refused (e.g. no numsim)
    timing: bool = True    # False for boards that only check correctness (sim)

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in ("name", "type", "target", "tags", "properties",
                                              "limits", "options", "unavailable", "timing")}

    @classmethod
    def from_json(cls, d: dict) -> "BoardSpec":
        return cls(**d)


class BoardTypeRegistry:
    def __init__(self):
        self._types: dict[str, object] = {}

    def add(self, board_type) -> None:
        name = getattr(board_type, "name", "")
        for attr in ("discover", "open_device"):
            if not callable(getattr(board_type, attr, None)):
                raise TypeError(f"board type {name or board_type!r} has no {attr}()")
        if name in self._types:
            raise ValueError(f"board type {name!r} registered twice")
        self._types[name] = board_type

    def get(self, name: str):
        try:
            return self._types[name]
        except KeyError:
            raise KeyError(f"unknown board type {name!r}; installed: {sorted(self._types)}") \
                from None

    def names(self) -> list:
        return sorted(self._types)


class Device:
    """What the measurement protocol needs from a board (runs inside the worker process).

    Buffers are named by the job's buffer names. Launchers are callables that *enqueue* work on
    the device's stream; `timed_batch` brackets each with events after an optional L2 flush and
    returns milliseconds. `sync` raises `JobFailure` (``runtime.*``, fatal) on a device fault.
    """

    kind = "?"
    can_time = True

    @property
    def watchdog(self) -> bool:
        """Whether the candidate's launches are guarded by the per-launch watchdog
        (`kcoral.watchdog`): on boards that launch on a device (those that time). A board
        that simulates on the CPU (sim) is bounded by the execution budget and its size caps."""
        return self.can_time

    def info(self) -> dict:
        raise NotImplementedError

    def load(self, module: bytes, fmt: str, entries: list) -> None:
        raise NotImplementedError

    def alloc(self, name: str, nbytes: int) -> None:
        raise NotImplementedError

    def write(self, name: str, array) -> None:
        raise NotImplementedError

    def read(self, name: str, dtype, shape):
        raise NotImplementedError

    def poison(self, name: str, itemsize: int, is_float: bool) -> None:
        raise NotImplementedError

    def launcher(self, launch: dict, buffers: dict):
        """A callable enqueueing `launch` (the job's launch dict) with its args packed."""
        raise NotImplementedError

    def sync(self) -> None:
        raise NotImplementedError

    #: how the last `timed_batch` held its work back: ``gated`` (all of it enqueued before the
    #: device started: host launch overhead is not timed), ``late`` (the gate's watcher released
    #: it: a launcher waited for the device), ``off``, or ``unavailable: why``
    last_gate = "off"

    def timed_batch(self, fns: list, l2_flush: "str | bool", gate: bool = False) -> list:
        """Run each fn once, in order, each after a flush and between two events; ms each.
        `l2_flush` is ``""`` (none), ``"write"`` or ``"read"`` (`kcoral.boards.l2_flush`; a
        board that empties its cache one way only says which in its docs). With `gate`, a
        board that can holds the whole batch until it is enqueued."""
        raise NotImplementedError

    def timed_split(self, fns: list, l2_flush: "str | bool") -> list:
        """One sample of `fns` run back to back after one flush (a multi-launch candidate's
        launches), each timed on its own: ms per fn. A board that cannot time launches apart
        raises NotImplementedError (the result then says so)."""
        raise NotImplementedError

    def sm_clock_mhz(self) -> "float | None":
        return None

    def buffer_handle(self, name: str):
        """The device-side handle of a buffer (a pointer for cuda; an array for fake)."""
        raise NotImplementedError

    def profiler_range(self, on: bool) -> None:
        """Open (`on`) or close the capture range of a profiler attached to this process.
        Why: a baseline's call is not one known kernel (torch.compile's first call compiles,
        cuBLAS picks its kernel at run time), so ncu profiles the launches between the two
        (``--profile-from-start off``) instead of naming a kernel. A board without a profiler
        API ignores it."""

    def free_all(self) -> None:
        pass

    def close(self) -> None:
        pass
