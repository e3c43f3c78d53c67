"""The MCP server of ``tirxh mcp``, on the official ``mcp`` SDK (`MCPServer`).

Every tool runs one ``tirxh`` command with ``--json`` (`tirxh_mcp.runner`) and returns the document
it printed, so an agent gets exactly what ``--json`` gives a script: ``check``, ``bench``,
``profile``, ``show`` (IR, PTX, SASS, resources, SASS phases), ``zoo_list``/``zoo_search``/
``zoo_show`` and ``ptx_search``/``ptx_show``. A command that prints no document (a usage error: a
bad node id, an unknown instruction) becomes a tool error carrying tirxh's message. Run-command
documents carry ``exitstatus``: failed items are a result to read, not a tool error.
"""

from __future__ import annotations

from typing import Any, Literal

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from .runner import TirxhCallError, TirxhRunner

INSTRUCTIONS = """\
tirxh develops GPU kernels written in TIRx, a PTX-level Python language: one call, one PTX
instruction. Work in this order: find the nearest measured kernel (zoo_search, zoo_show), look up
instructions (ptx_search, ptx_show), write the kernel and its suite (numpy reference, small cases
that numsim simulates, large benchmark cases, a tolerance), run check until every analyzer is
clean (an 'incomplete' verdict is not a pass), then bench (KCoral times it beside its baselines in
the same job) and profile (iket timelines, Nsight Compute counters, compute-sanitizer). Never
weaken a check to make it pass, and never quote profiler time as a benchmark."""

JSONDoc = dict[str, Any]


def build_server(runner: TirxhRunner) -> MCPServer:
    """The server with its tools; each tool runs ``tirxh ... --json`` through `runner`."""
    server = MCPServer(name="tirxh", instructions=INSTRUCTIONS)

    def call(args: list) -> JSONDoc:
        try:
            return runner.run(args)
        except TirxhCallError as e:
            raise ToolError(str(e)) from None

    def selection(paths, keyword, targets) -> list:
        args = list(paths or [])
        if keyword:
            args += ["-k", keyword]
        for t in targets or []:
            args += ["--target", t]
        return args

    @server.tool()
    def check(paths: "list[str] | None" = None, keyword: str = "",
              targets: "list[str] | None" = None) -> JSONDoc:
        """Compile kernels and run every analyzer (numsim against the reference on the small
        cases, synccheck, racecheck): `tirxh check [PATHS] [-k KEYWORD] [--target T] --json`.
        paths: kernel files, directories or node ids (path::kernel[case]@target); keyword: a -k
        expression (and/or/not over names). Returns the run report: summary, items with each
        analyzer's verdict (clean/review/incomplete/error) and findings."""
        return call(["check", *selection(paths, keyword, targets)])

    @server.tool()
    def bench(paths: "list[str] | None" = None, keyword: str = "",
              targets: "list[str] | None" = None, kcoral: str = "") -> JSONDoc:
        """Time items with a suite on a GPU through KCoral (correctness before and after timing,
        baselines in the same job): `tirxh bench ... --json`. kcoral: the daemon host:port (empty:
        the project's [bench] kcoral, else an embedded daemon)."""
        args = ["bench", *selection(paths, keyword, targets)]
        return call(args + (["--kcoral", kcoral] if kcoral else []))

    @server.tool()
    def profile(nodeid: str, ncu: bool = False, ncu_set: Literal["basic", "full"] = "basic",
                ncu_metrics: "list[str] | None" = None,
                sanitizer: Literal["", "memcheck", "racecheck", "synccheck", "initcheck"] = "",
                iket: bool = False, iket_capacity: int = 0,
                out: str = "profile_out") -> JSONDoc:
        """Profile one item on a KCoral board: Nsight Compute counters and hot spots by Python
        line (ncu), compute-sanitizer findings (sanitizer), an iket per-warp timeline (iket):
        `tirxh profile NODEID ... --json`. `iket_capacity`: events a warp; 0 is `auto` (one
        rerun at the measured need when events were lost). Artifacts go to `out`. Profiler
        times are not benchmarks: quote bench medians."""
        args = ["profile", nodeid, "--out", out]
        if ncu:
            args += ["--ncu", "--ncu-set", ncu_set]
            if ncu_metrics:
                args += ["--ncu-metrics", ",".join(ncu_metrics)]
        if sanitizer:
            args += ["--sanitizer", sanitizer]
        if iket:
            args += ["--iket"] + (["--iket-capacity", str(iket_capacity)] if iket_capacity
                                  else [])
        return call(args)

    @server.tool()
    def show(nodeid: str, kind: Literal["ir", "ptx", "sass", "resources", "phases"]) -> JSONDoc:
        """One artifact of one item: the traced IR with source lines, the PTX, the SASS, the
        ptxas resources and launch facts, or the SASS phases (the code between two waits for
        other threads: instructions by class, loops, source lines): `tirxh show NODEID --KIND
        --json` (NODEID may be a unique prefix)."""
        return call(["show", nodeid, f"--{kind}"])

    @server.tool()
    def zoo_list() -> JSONDoc:
        """Every kernel of the zoo (measured kernels to start from): `tirxh zoo list --json`."""
        return call(["zoo", "list"])

    @server.tool()
    def zoo_search(query: str) -> JSONDoc:
        """Zoo kernels matching every word of `query` in their name, tags, the PTX instructions
        they use, or their header: `tirxh zoo search QUERY --json`."""
        return call(["zoo", "search", *query.split()])

    @server.tool()
    def zoo_show(name: str) -> JSONDoc:
        """One zoo kernel: header (formula, algorithm, techniques), tags, cases with FLOPs and
        bytes, tolerance, baselines, the PTX it uses, measured figures: `tirxh zoo show NAME
        --json`."""
        return call(["zoo", "show", name])

    @server.tool()
    def ptx_search(query: str) -> JSONDoc:
        """Instruction bindings matching every word of `query` (name, modifiers, effects, doc):
        `tirxh ptx search QUERY --json`."""
        return call(["ptx", "search", *query.split()])

    @server.tool()
    def ptx_show(spelling: str) -> JSONDoc:
        """Everything about one PTX instruction: modifiers, operands and types, targets and PTX
        ISA version, effects, numsim fidelity, examples, the zoo kernels using it. spelling: a
        binding name, a PTX spelling (ld.global.v4.f32), its T.ptx form, or an opcode:
        `tirxh ptx show SPELLING --json`."""
        return call(["ptx", "show", spelling])

    return server


def tool_listing(server: MCPServer) -> list:
    """``[{"name", "description", "input_schema"}]`` of the server's tools (``--list-tools``)."""
    tools = anyio.run(server.list_tools)
    return [{"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in tools]
