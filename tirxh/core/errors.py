"""The error taxonomy (as pytest/pluggy): who made the mistake decides the class.

- `UsageError`: the user's project or command line (``tirx.toml``, options, node ids) -> exit 4.
- `PluginValidationError` (in `pluginmanager`): a plugin author's mistake.
- `TraceError` / `CompileError`: the kernel source, reported at file:line -> an item failure.
- anything else: an internal error -> exit 3.
"""

from __future__ import annotations


class UsageError(Exception):
    """Bad command line or project configuration; the message names the file/key/option."""


class ConfigError(UsageError):
    """A ``tirx.toml`` problem (or several): names the file, the key, what was expected."""

    def __init__(self, path, problems: "list[str]"):
        self.path = path
        self.problems = list(problems)
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"{path}: invalid configuration:\n{lines}")
