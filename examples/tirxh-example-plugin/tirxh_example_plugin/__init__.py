"""An example tirxh plugin: one PTX instruction binding and one analyzer.

Loaded through the ``tirxh`` entry-point group (see pyproject.toml); block it with
``tirxh -p no:example``.
"""

from __future__ import annotations

from collections import Counter

from tirxh.api import (
    AnalyzerResult, Binding, Effects, Finding, hookimpl, ir, operands, opt, SourceRef,
)

__version__ = "0.1.0"

# PTX ISA "pmevent": trigger performance-monitor event a (0..15), or with .mask the events
# whose bits are set in a 16-bit immediate mask. PTX 1.4 (.mask: PTX 3.0), all targets.
PMEVENT = Binding(
    "example.pmevent", "pmevent", (opt("mask", "mask"),), operands("a=i:u32"),
    "Trigger performance-monitor event a (0-15), or the events in a 16-bit mask (.mask).",
    min_sm=20, ptx_isa=(3, 0), effects=Effects(), example="pmevent")


@hookimpl
def tirxh_register_instructions(isa):
    isa.add(PMEVENT, owner="tirxh-example-plugin")


@hookimpl
def tirxh_addoption(parser):
    parser.addini("example", "div_in_loop", "str", "review",
                  "severity of an IEEE division inside a device loop",
                  choices=("review", "error"))


def _walk(block: ir.Block, depth: int = 0):
    """(statement, loop depth) in program order."""
    for s in block.stmts:
        yield s, depth
        if isinstance(s, ir.If):
            yield from _walk(s.then, depth)
            if s.orelse is not None:
                yield from _walk(s.orelse, depth)
        elif isinstance(s, (ir.For, ir.Loop)):
            yield from _walk(s.body, depth + 1)


def _is_ieee_div(instr: ir.Instr) -> bool:
    parts = instr.spelling.split(".")
    return parts[0] == "div" and parts[-1] in ("f32", "f64") and "approx" not in parts \
        and "full" not in parts


@hookimpl
def tirxh_check_item(item, compiled, config):
    severity = config.getini("example", "div_in_loop")
    counts, findings = Counter(), []
    for stmt, depth in _walk(compiled.ir.body):
        if not isinstance(stmt, ir.Instr):
            continue
        counts[stmt.opcode] += 1
        if depth and _is_ieee_div(stmt):
            findings.append(Finding(
                "example.div-in-loop",
                f"{stmt.spelling} inside a device loop (depth {depth}): IEEE division is a "
                f"long instruction sequence; hoist it or multiply by a reciprocal",
                severity=severity, where=SourceRef(stmt.loc.file, stmt.loc.line, "div")))
    verdict = severity if findings else "clean"
    summary = f"{len(findings)} division(s) in loops" if findings else \
        f"{sum(counts.values())} instructions"
    return AnalyzerResult("div-in-loop", verdict, findings, summary,
                          stats={"instructions": dict(sorted(counts.items()))})
