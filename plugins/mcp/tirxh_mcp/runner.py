"""Run one ``tirxh ... --json`` command for an MCP tool and return the document it printed.

Each tool call is a child process (``python -m tirxh``): a kernel module's prints cannot reach the
server's stdout, which carries the MCP protocol; a crash or a hang in a kernel's trace cannot take
the server down (a call that outlives its timeout is killed and reported); and the result is, by
construction, the same JSON the command prints for a person. The child never reads the server's
stdin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path


class TirxhCallError(Exception):
    """A tirxh command printed no JSON document (a usage error, a crash, a timeout)."""


def extract_json(text: str) -> "dict | None":
    """The document tirxh printed: all of stdout, or from the last line that is exactly ``{``
    to the end when something (a kernel module's print) came before it."""
    try:
        doc = json.loads(text)
        return doc if isinstance(doc, dict) else None
    except ValueError:
        pass
    lines = text.splitlines(keepends=True)
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].rstrip("\r\n") == "{":
            try:
                return json.loads("".join(lines[i:]))
            except ValueError:
                continue
    return None


@dataclass
class TirxhRunner:
    """How tool calls run tirxh: in `cwd`, with the server's ``--rootdir`` and ``-p`` plugins,
    each call limited to `timeout` seconds."""

    cwd: Path
    rootdir: "Path | None" = None
    plugins: list = field(default_factory=list)
    timeout: float = 1800.0
    python: str = sys.executable

    def argv(self, args: list) -> list:
        out = [self.python, "-m", "tirxh", *[str(a) for a in args], "--json"]
        if self.rootdir is not None:
            out += ["--rootdir", str(self.rootdir)]
        for p in self.plugins:
            out += ["-p", p]
        return out

    def run(self, args: list) -> dict:
        """The JSON document of ``tirxh ARGS --json``; `TirxhCallError` when there is none."""
        argv = self.argv(args)
        shown = "tirxh " + " ".join(str(a) for a in args)
        try:
            proc = subprocess.run(argv, cwd=self.cwd, stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=self.timeout,
                                  env=dict(os.environ))
        except subprocess.TimeoutExpired:
            raise TirxhCallError(f"`{shown}` did not finish within {self.timeout:g} s (the "
                                 f"server's --timeout); it was stopped") from None
        doc = extract_json(proc.stdout)
        if doc is None:
            err = proc.stderr.strip() or proc.stdout.strip() or "(no output)"
            raise TirxhCallError(f"`{shown}` exited with status {proc.returncode} and printed "
                                 f"no JSON document:\n{err[-4000:]}")
        return doc
