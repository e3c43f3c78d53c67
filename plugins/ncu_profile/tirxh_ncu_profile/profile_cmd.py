"""``python -m tirxh_ncu_profile profile NODEID [--ncu ...] [--sanitizer T] [--iket ...]``

The ``tirxh profile`` command, until the core CLI has it: the project is configured exactly as
for ``tirxh build NODEID`` (tirx.toml, plugins, options; the profilers' options come from their
``tirxh_addoption``), the one item NODEID names is collected and compiled, and
``tirxh_profile_item`` is called; every installed profiler plugin answers for its part of the
request. Reports are printed, and with ``--json`` written as one JSON document; artifacts go to
``--out`` (default ``profile_out``).

To move this into ``tirxh/core/cli.py``: add ``profile`` to the commands with a ``NODEID`` and
``--out``, and call `profile_session` from ``_dispatch``.
"""

from __future__ import annotations

import json
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


def profile_session(config, nodeid: str, out: Path, json_path: "str | None") -> int:
    from tirxh.core.errors import UsageError
    from tirxh.core.main import ExitCode, find_item, wrap_session
    from tirxh.core.nodes import collect
    from tirxh.core.runner import compile_item

    def doit(config, session):
        collect(session, [nodeid])
        if not session.items:
            errs = [f"{r.nodeid}: {r.longrepr}" for r in session.collect_reports
                    if r.outcome == "failed"]
            raise UsageError(f"profile {nodeid}: nothing collected" +
                             (f" ({'; '.join(errs)})" if errs else ""))
        item = find_item(session, nodeid)
        if getattr(item, "suite", None) is None or getattr(item, "case", None) is None:
            raise UsageError(f"profile {item.nodeid}: the kernel has no T.suite case to run")
        compiled, phase = compile_item(item)
        if compiled is None:
            sys.stderr.write(f"{item.nodeid}: compile {phase.outcome}: {phase.longrepr}\n")
            return ExitCode.FAILED
        request = {"ncu": None, "sanitizer": None, "iket": None, "out": out}
        answers = config.pm.hook.tirxh_profile_item(item=item, compiled=compiled, config=config,
                                                    request=request)
        reports = [r for a in answers for r in (a if isinstance(a, list) else [a])]
        if not reports:
            raise UsageError("profile: nothing to do; give --ncu, --sanitizer TOOL or --iket "
                             "(and install tirxh-ncu-profile / tirxh-iket)")
        for r in reports:
            print(r.text)
        if json_path:
            Path(json_path).write_text(json.dumps(
                {"item": item.nodeid, "reports": [r.to_json() for r in reports]}, indent=1,
                default=str))
        bad = any(getattr(r, "verdict", None) == "error" for r in reports)
        return ExitCode.FAILED if bad else ExitCode.OK

    return wrap_session(config, doit)


def main(argv: list) -> int:
    """`argv`: ``NODEID [options]``: the node id first, then the options of ``tirxh build``
    and the profilers'."""
    from tirxh.core.cli import configure
    from tirxh.core.errors import UsageError
    from tirxh.core.main import ExitCode
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
    return profile_session(config, rest[0], Path(out), json_path)
