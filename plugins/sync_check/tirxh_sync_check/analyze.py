"""Run both analyses on one launch: numsim with a trace, then synccheck and racecheck.

`check_kernel` is the library entry point (a kernel or compiled kernel, its inputs, constants and
grid); `check_trace` takes a trace already recorded (tests build small ones by hand). Each returns
two `tirxh.core.findings.AnalyzerResult`s, ``synccheck`` and ``racecheck``.

Verdicts: ``error`` when a finding is a bug; ``incomplete`` when numsim could not run the kernel
to its end (an unsupported instruction, the instruction budget), when the state space bound was
hit, or when something in the trace is not modelled (each named in the summary and as an
``incomplete`` finding); ``clean`` otherwise. A numsim deadlock does not make the result
incomplete: the trace up to the deadlock is what synccheck explains.
"""

from __future__ import annotations

import time

import numpy as np

from tirxh.core.findings import AnalyzerResult, Finding, SourceRef, worst

from . import model, racecheck, synccheck, warpchecks, wgmmacheck
from .report import KINDS, to_finding


def check_kernel(kernel, inputs: dict, *, consts: "dict | None" = None, grid=None,
                 max_states: int = synccheck.DEFAULT_MAX_STATES,
                 max_instructions: int = 5_000_000) -> "tuple[AnalyzerResult, AnalyzerResult]":
    """Simulate `kernel` once on `inputs` (numsim, with a trace) and run both analyses."""
    import tirxh_numsim
    t0 = time.perf_counter()
    res = tirxh_numsim.run(kernel, inputs, consts=consts, grid=grid, trace=True,
                           max_instructions=max_instructions)
    sim_s = time.perf_counter() - t0
    kir = _kir(kernel, consts)
    buffers = {k: np.asarray(v).nbytes for k, v in inputs.items() if isinstance(v, np.ndarray)}
    return check_trace(res.trace, kir, buffers, incomplete=list(res.incomplete),
                       max_states=max_states, extra_stats={"numsim_s": round(sim_s, 3)})


def _kir(kernel, consts):
    kir = getattr(kernel, "ir", None)
    if kir is not None and hasattr(kir, "body"):
        return kir
    return kernel.specialize(**(consts or {}))


def check_trace(trace, kir=None, buffers: "dict | None" = None, *, incomplete=(),
                max_states: int = synccheck.DEFAULT_MAX_STATES,
                extra_stats: "dict | None" = None) -> "tuple[AnalyzerResult, AnalyzerResult]":
    """Both analyses over a recorded numsim `Trace` (see the module docstring)."""
    stats = dict(extra_stats or {})
    kloc = kir.loc if kir is not None else None
    where = SourceRef(kloc.file, kloc.line) if kloc is not None else None
    not_run = [Finding("sync_check.incomplete", f"numsim did not run the kernel to its end: {r}",
                       "incomplete", where) for r in incomplete]
    if trace is None:
        msg = "numsim produced no event trace"
        return (AnalyzerResult("synccheck", "incomplete", not_run, msg),
                AnalyzerResult("racecheck", "incomplete", list(not_run), msg))

    # -- synccheck -------------------------------------------------------------------------------
    t0 = time.perf_counter()
    issues = []
    notes = []
    states = 0
    bounded = False
    for cm in model.build(trace):
        r = synccheck.explore(cm, max_states)
        issues.extend(r.issues)
        notes.extend(cm.notes + r.notes)
        states += r.states
        bounded |= not r.complete
    issues.extend(warpchecks.check(trace))
    if kir is not None:
        issues.extend(wgmmacheck.check(kir))
    sync_findings = _dedupe([to_finding(i) for i in issues])
    sync_incomplete = list(not_run)
    if bounded:
        sync_incomplete.append(Finding(
            "sync_check.state-bound", f"the interleaving explorer stopped at {max_states} states "
            "(max_states); interleavings beyond were not checked", "incomplete", where))
    for e, why in _unique_notes(notes):
        sync_incomplete.append(Finding("sync_check.not-modelled", why, "incomplete",
                                       SourceRef(e.loc.file, e.loc.line) if e is not None and
                                       e.loc is not None else where))
    stats.update(states=states, synccheck_s=round(time.perf_counter() - t0, 3),
                 events=len(trace.events))
    sync = _result("synccheck", sync_findings, sync_incomplete, stats,
                   f"{states} states explored")

    # -- racecheck -------------------------------------------------------------------------------
    t0 = time.perf_counter()
    race_issues = racecheck.check(trace, kir, buffers)
    race_findings = _dedupe([to_finding(i) for i in race_issues])
    rstats = {"racecheck_s": round(time.perf_counter() - t0, 3), "events": len(trace.events)}
    race = _result("racecheck", race_findings, list(not_run), rstats,
                   f"{len(trace.events)} events checked")
    return sync, race


def _result(name, findings, incomplete, stats, what) -> AnalyzerResult:
    verdict = worst(*[KINDS.get(f.kind, f.severity) for f in findings],
                    *["incomplete" for _ in incomplete])
    if findings:
        kinds = sorted({f.kind for f in findings})
        summary = f"{len(findings)} finding(s): {', '.join(kinds)}; {what}"
    else:
        summary = what
    if incomplete:
        summary += "; incomplete: " + "; ".join(f.message.splitlines()[0] for f in incomplete[:3])
    return AnalyzerResult(name, verdict, findings + incomplete, summary, stats)


def _dedupe(findings: list) -> list:
    out, seen = [], set()
    for f in findings:
        key = (f.kind, f.where.file if f.where else None, f.where.line if f.where else None)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _unique_notes(notes):
    seen = set()
    for e, why in notes:
        if why not in seen:
            seen.add(why)
            yield e, why
