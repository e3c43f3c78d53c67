"""``python -m tirxh_ncu_profile profile NODEID [--ncu ...] [--sanitizer T] [--iket ...]``

An alias of ``tirxh profile`` (run through the public `tirxh.main`) that also loads the profiler
plugins when they are importable but not installed as entry points (a source checkout).
``--json FILE`` writes the reports as one JSON document (``tirxh profile --json-file``); artifacts
go to ``--out`` (default ``profile_out``).
"""

from __future__ import annotations

import sys
from importlib import metadata

import tirxh
from tirxh.api import ExitCode

PLUGINS = {"ncu_profile": "tirxh_ncu_profile.plugin", "iket": "tirxh_iket.plugin"}


def _plugin_args() -> list:
    """``-p`` for profiler plugins importable here but not installed as entry points."""
    installed = {ep.name for ep in metadata.entry_points(group="tirxh")}
    out = []
    for name, module in PLUGINS.items():
        if name in installed:
            continue
        try:
            __import__(module)
        except ImportError:
            continue
        out += ["-p", module]
    return out


def _split(argv: list) -> "tuple[list, str | None, str]":
    """Take ``--json FILE`` and ``--out DIR`` out of `argv` (they are this command's own)."""
    rest, json_path, out = [], None, "profile_out"
    it = iter(argv)
    for a in it:
        if a == "--json":
            json_path = next(it, None)
        elif a == "--out":
            out = next(it, out)
        else:
            rest.append(a)
    return rest, json_path, out


def main(argv: list) -> int:
    """`argv`: ``NODEID [options]``: the node id first, then the options of ``tirxh profile``
    and the profilers'. Runs ``tirxh profile`` through the public entry point `tirxh.main`."""
    rest, json_path, out = _split(list(argv))
    if not rest or rest[0].startswith("-"):
        sys.stderr.write("usage: python -m tirxh_ncu_profile profile NODEID [--ncu [--ncu-set "
                         "basic|full] [--ncu-metrics M,..]] [--sanitizer TOOL] [--iket] "
                         "[--out DIR] [--json FILE]\n")
        return ExitCode.USAGE_ERROR
    return tirxh.main(["profile", *rest, "--out", out, *_plugin_args(),
                       *(["--json-file", json_path] if json_path else [])])
