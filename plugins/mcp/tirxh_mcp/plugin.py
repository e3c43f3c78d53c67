"""The tirxh plugin of tirxh-mcp: the ``tirxh mcp`` command (``tirxh_add_commands``).

``tirxh mcp`` serves the MCP protocol on stdin/stdout for an agent that starts it (the agent's MCP
configuration runs ``tirxh mcp`` in the project directory); ``tirxh mcp --list-tools [--json]``
prints the tools and their input schemas instead. Tool calls run in the project the command was
started in, with its ``-p`` plugins.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tirxh.api import SCHEMA, ExitCode, UsageError, hookimpl

from .runner import TirxhRunner

DEFAULT_TIMEOUT_S = 1800.0


@hookimpl
def tirxh_add_commands(commands):
    commands.add("mcp", "serve tirxh to coding agents over MCP (stdio)", run, configure=configure,
                 description="Serve tirxh over the Model Context Protocol on stdin/stdout: tools "
                             "check, bench, profile, show, zoo_list, zoo_search, zoo_show, "
                             "ptx_search, ptx_show, each returning the JSON of the matching "
                             "`tirxh ... --json` command.")


def configure(parser) -> None:
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help=f"stop a tool call after S seconds (default {DEFAULT_TIMEOUT_S:g}: "
                             f"bench and profile jobs can be long)")
    parser.add_argument("--list-tools", action="store_true",
                        help="print the tools (with --json: and their input schemas) and exit")


def runner_for(config) -> TirxhRunner:
    """Tool calls run where the command was started: the project if there is one."""
    rootdir = Path(config.rootdir) if config.inipath is not None else None
    return TirxhRunner(cwd=rootdir or Path.cwd(), rootdir=rootdir,
                       plugins=list(config.option.plugins or []),
                       timeout=float(config.option.timeout))


def run(config) -> int:
    opt = config.option
    if opt.timeout <= 0:
        raise UsageError(f"mcp --timeout {opt.timeout:g}: must be positive")
    if opt.json and not opt.list_tools:
        raise UsageError("mcp: --json applies to --list-tools (the server itself speaks JSON-RPC "
                         "on stdout)")
    try:
        # optional dependency and start-up cost: the SDK (pydantic, starlette, anyio) took 2.3 s
        # to import on the development machine, which every other tirxh command would pay, and
        # a tirxh without it (a GPU host installed offline) must still start
        from . import server
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] != "mcp":
            raise
        raise UsageError(f"tirxh mcp needs the MCP SDK: pip install 'mcp>=2,<3' ({e})") from None
    srv = server.build_server(runner_for(config))
    if opt.list_tools:
        tools = server.tool_listing(srv)
        if opt.json:
            sys.stdout.write(json.dumps({"schema": SCHEMA, "command": "mcp",
                                         "tools": tools}, indent=2) + "\n")
        else:
            for t in tools:
                first = " ".join(t["description"].split()).split(": `")[0].split(". ")[0]
                sys.stdout.write(f"{t['name']:<12} {first}\n")
        return ExitCode.OK
    srv.run("stdio")
    return ExitCode.OK
