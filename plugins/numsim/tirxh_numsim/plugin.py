"""The tirxh plugin: `tirxh check` runs each item's small cases in numsim against the reference.

For every collected item with a suite and a small case: fresh seeded inputs
(``suite.make_inputs(case, seed)``), one simulated launch (unwritten output elements are found
exactly from the bytes the kernel stored, so no poisoning is needed), then each declared
output compared with ``suite.expected(case, inputs)`` under ``suite.tolerance_for(name)``. The
result is an `AnalyzerResult("numsim", ...)` whose findings include a mismatch report per output
(first differing indices with values, max abs/rel error, RMS ratio) and every diagnostic of the
run. It also answers ``tirxh_binding_fidelity`` (the PTX reference's fidelity column) from the
semantics table. ``[numsim]`` keys in ``tirx.toml``: ``seed``, ``max_ctas``, ``max_instructions``,
``enabled``.
"""

from __future__ import annotations

from tirxh.api import AnalyzerResult, Finding, hookimpl, ini_value, SourceRef, worst

from .support import fidelity_of
from .api import run

SECTION = "numsim"


@hookimpl
def tirxh_addoption(parser):
    parser.addini(SECTION, "enabled", "bool", True, "run numsim in `tirxh check`")
    parser.addini(SECTION, "seed", "int", 0, "seed for suite.make_inputs")
    parser.addini(SECTION, "max_ctas", "int", 0,
                  "simulate at most this many CTAs per case (0: all); outputs of CTAs not run "
                  "are not compared, so a positive value makes the verdict at best 'review'")
    parser.addini(SECTION, "max_instructions", "int", 50_000_000,
                  "warp-instruction budget per case (beyond it the verdict is incomplete)")


@hookimpl
def tirxh_binding_fidelity(binding):
    return fidelity_of(binding.name)


def _opt(config, key, default):
    return ini_value(config, SECTION, key, default)


@hookimpl
def tirxh_check_item(item, compiled, config):
    suite, case = getattr(item, "suite", None), getattr(item, "case", None)
    if suite is None or case is None or not _opt(config, "enabled", True):
        return None
    if not case.small:
        return None
    return check_case(item, compiled, seed=int(_opt(config, "seed", 0)),
                      max_ctas=int(_opt(config, "max_ctas", 0)) or None,
                      max_instructions=int(_opt(config, "max_instructions", 50_000_000)))


def check_case(item, compiled=None, *, seed: int = 0, max_ctas=None,
               max_instructions: int = 50_000_000) -> AnalyzerResult:
    """Simulate one item's case and compare with its reference (usable without a session)."""
    suite, case = item.suite, item.case
    inputs = suite.make_inputs(case, seed)
    target = compiled if compiled is not None and getattr(compiled, "ir", None) is not None \
        else item
    grid = suite.grid(case)
    res = run(target, inputs, grid=grid, outputs=list(suite.outputs), max_ctas=max_ctas,
              max_instructions=max_instructions, consts=dict(getattr(item, "consts", None) or
                                                            suite.consts(case)))
    findings = list(res.diagnostics)
    verdict = res.verdict
    kloc = suite.kernel.loc
    where = SourceRef(kloc.file, kloc.line)
    for r in res.incomplete:
        findings.append(Finding("numsim.incomplete", r, "incomplete", where))
    compared = []
    if not res.incomplete:
        expected = suite.expected(case, inputs) or {}
        for name in suite.outputs:
            if name not in expected:
                findings.append(Finding("numsim.no-reference", f"the reference gives no value for "
                                        f"output {name!r}", "incomplete", where))
                verdict = worst(verdict, "incomplete")
                continue
            rep = suite.tolerance_for(name).compare(res.outputs[name], expected[name])
            compared.append((name, rep))
            if not rep["ok"]:
                if max_ctas:
                    continue
                findings.append(Finding("numsim.mismatch", mismatch_text(name, rep), "error",
                                        where, data={"output": name, **_jsonable(rep)}))
                verdict = worst(verdict, "error")
        if not suite.outputs:
            findings.append(Finding("numsim.no-outputs", "the suite declares no outputs to "
                                    "compare", "incomplete", where))
            verdict = worst(verdict, "incomplete")
        if max_ctas:
            verdict = worst(verdict, "review")
            findings.append(Finding("numsim.partial", f"only the first {max_ctas} CTAs were "
                                    "simulated ([numsim] max_ctas); outputs not compared",
                                    "review", where))
    s = res.stats
    ok = [n for n, r in compared if r["ok"]]
    summary = (f"{len(ok)}/{len(compared)} outputs match; {s['lane_instructions']} "
               f"lane-instructions in {s['wall_s']:.2f} s ({s['mode']})")
    if res.incomplete:
        summary = "; ".join(res.incomplete)
    return AnalyzerResult("numsim", verdict, findings, summary,
                          {k: v for k, v in s.items() if k != "ops"})


def mismatch_text(name: str, rep: dict) -> str:
    """A readable mismatch report: counts, max errors, RMS ratio, first differing elements."""
    if "reason" in rep and "mismatches" not in rep:
        return f"output {name!r}: {rep['reason']}"
    parts = [f"output {name!r}: {rep.get('mismatches', '?')} of {rep.get('total', '?')} elements "
             f"differ; max abs err {rep.get('max_abs', float('nan')):.4g}, max rel err "
             f"{rep.get('max_rel', float('nan')):.4g}, RMS ratio "
             f"{rep.get('rms_ratio', float('nan')):.4g}"]
    if rep.get("reason"):
        parts.append(rep["reason"])
    for f in rep.get("first", []):
        parts.append(f"  at {tuple(f['index'])}: got {f['actual']!r}, expected {f['expected']!r}")
    return "\n".join(parts)


def _jsonable(rep: dict) -> dict:
    out = {}
    for k, v in rep.items():
        if isinstance(v, float) and v != v:
            out[k] = None
        else:
            out[k] = v
    return out
