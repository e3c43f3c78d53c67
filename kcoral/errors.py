"""Typed job failures: ``compile.*``, ``launch.*``, ``runtime.*``, ``correctness.*``,
``timeout.*``, ``interrupted.*``, ``unavailable.*``, ``validation.*``.

A `JobFailure` raised anywhere while a job runs becomes the result's ``error`` object
(``{"type": ..., "message": ...}``); `fatal` says the worker's device state cannot be trusted any
more (a sticky CUDA error such as an illegal address or a trap), so the worker exits after
reporting and is restarted before the next job.
"""

from __future__ import annotations

CATEGORIES = ("compile", "launch", "runtime", "correctness", "timeout", "interrupted",
              "unavailable", "validation", "internal", "cancelled")


class JobFailure(Exception):
    def __init__(self, type_: str, message: str, fatal: bool = False, data: "dict | None" = None):
        if type_.split(".")[0] not in CATEGORIES:
            raise ValueError(f"error type {type_!r} is not in a known category {CATEGORIES}")
        self.type = type_
        self.message = message
        self.fatal = fatal
        self.data = data or {}
        super().__init__(f"{type_}: {message}")

    def to_json(self) -> dict:
        d = {"type": self.type, "message": self.message}
        if self.data:
            d["data"] = self.data
        return d
