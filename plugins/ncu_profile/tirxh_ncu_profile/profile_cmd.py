"""``python -m tirxh_ncu_profile profile NODEID [--ncu ...] [--sanitizer T] [--iket ...]``

An alias of ``tirxh profile`` (`tirxh.core.profile`) that also loads the profiler plugins when
they are importable but not installed as entry points (a source checkout). ``--json FILE`` writes
the reports as one JSON document; artifacts go to ``--out`` (default ``profile_out``).
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

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
    """`argv`: ``NODEID [options]``: the node id first, then the options of ``tirxh build``
    and the profilers'."""
    from tirxh.core.cli import configure
    from tirxh.api import UsageError
    from tirxh.api import ExitCode
    rest, json_path, out = _split(list(argv))
    if not rest or rest[0].startswith("-"):
        sys.stderr.write("usage: python -m tirxh_ncu_profile profile NODEID [--ncu [--ncu-set "
                         "basic|full] [--ncu-metrics M,..]] [--sanitizer TOOL] [--iket] "
                         "[--out DIR] [--json FILE]\n")
        return ExitCode.USAGE_ERROR
    try:
        config = configure(["build", *rest, *_plugin_args()])
    except UsageError as e:
        sys.stderr.write(f"ERROR: {e}\n")
        return ExitCode.USAGE_ERROR
    from tirxh.core.profile import profile_session
    return profile_session(config, rest[0], Path(out), json_path)
