"""Whole commands contributed by plugins (``tirxh zoo``, ``tirxh ptx``, ``tirxh mcp``, ...).

A plugin implements the historic hook ``tirxh_add_commands(commands)`` and calls
``commands.add(name, help, run, configure=...)``. The CLI gives every registered command a
subcommand (``tirxh --help`` lists it) with the options every command has (``-p``, ``--rootdir``,
``--json``, ``--trace-config``) plus those its `configure` adds to its argparse parser; after the
usual start-up (``tirx.toml``, plugins, ``tirxh_configure``) it calls ``run(config)``, which returns
an exit code. So a plugin contributes a command without the core knowing its name, as a pytest
plugin contributes options.

`CommandRegistry.add` raises `ValueError` for a plugin author's mistake (a bad or taken name, a
runner that is not callable); the plugin manager turns it into a `PluginValidationError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterator

_NAME = re.compile(r"[a-z][a-z0-9-]*\Z")


@dataclass(frozen=True)
class Command:
    """One plugin command: `run(config) -> int` after `configure(argparse_parser)` added its
    options; `owner` is the module of the runner (named in conflicts and ``--help``)."""

    name: str
    help: str
    run: Callable
    configure: "Callable | None" = None
    description: str = ""
    owner: str = ""


class CommandRegistry:
    """The commands plugins registered, in registration order (the CLI refuses one named like a
    built-in command when it builds the command line)."""

    def __init__(self):
        self._commands: dict = {}

    def add(self, name: str, help: str, run: Callable, configure: "Callable | None" = None,
            description: str = "") -> Command:
        """Register command `name` (lower case, digits and ``-``).

        :param help: one line for ``tirxh --help``.
        :param run: ``run(config) -> int``: the command itself; returns an `ExitCode`.
        :param configure: ``configure(parser)``: adds the command's own arguments to its
            `argparse.ArgumentParser` (positionals, options, nested subcommands).
        :param description: the longer text of ``tirxh NAME --help`` (default: `help`).
        """
        owner = getattr(run, "__module__", None) or "?"
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"command name {name!r} (from {owner}) must be lower case letters, "
                             f"digits and '-', starting with a letter")
        if name in self._commands:
            raise ValueError(f"command {name!r} is registered twice (by "
                             f"{self._commands[name].owner} and {owner})")
        if not callable(run):
            raise ValueError(f"command {name!r} (from {owner}): run must be callable, got "
                             f"{run!r}")
        if configure is not None and not callable(configure):
            raise ValueError(f"command {name!r} (from {owner}): configure must be callable or "
                             f"None, got {configure!r}")
        cmd = Command(name, help, run, configure, description or help, owner)
        self._commands[name] = cmd
        return cmd

    def get(self, name: str) -> "Command | None":
        return self._commands.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._commands

    def __iter__(self) -> Iterator[Command]:
        return iter(self._commands.values())

    def __len__(self) -> int:
        return len(self._commands)
