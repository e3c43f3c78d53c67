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

from tirxh.api import AnalyzerResult, Finding, SourceRef, worst
import tirxh_numsim
from tirxh_numsim import events as ev
from tirxh_numsim.memory import SharedLayout

from . import (exitcheck, groupings, hbquery, model, racecheck, rootcause, synccheck,
               waituse, warpchecks, wgmmacheck)
from .report import KINDS, to_finding


def check_kernel(kernel, inputs: dict, *, consts: "dict | None" = None, grid=None,
                 max_states: int = synccheck.DEFAULT_MAX_STATES,
                 max_instructions: int = 5_000_000,
                 per_warp: bool = False) -> "tuple[AnalyzerResult, AnalyzerResult]":
    """Simulate `kernel` once on `inputs` (numsim, with a trace) and run both analyses.
    `per_warp`: numsim runs every warp alone (its traced schedule before warps were grouped;
    slower, the same verdicts and findings: for comparing)."""
    t0 = time.perf_counter()
    res = tirxh_numsim.run(kernel, inputs, consts=consts, grid=grid, trace=True,
                           max_instructions=max_instructions, per_warp=per_warp)
    sim_s = time.perf_counter() - t0
    kir = _kir(kernel, consts)
    buffers = {k: np.asarray(v).nbytes for k, v in inputs.items() if isinstance(v, np.ndarray)}
    regs = _launch_regs(kernel, consts, res.trace)
    return check_trace(res.trace, kir, buffers, incomplete=list(res.incomplete),
                       max_states=max_states, extra_stats={"numsim_s": round(sim_s, 3)},
                       diagnostics=res.diagnostics, launch_regs=regs or None)


# numsim diagnostics about synchronization misuse that leave no event to analyze (numsim skips
# the operation): reported as the matching synccheck kind
_FROM_NUMSIM = {"numsim.cluster-barrier": "cluster-barrier.mismatch",
                "numsim.mbarrier-uninitialized": "mbarrier.uninitialized"}


def _launch_regs(kernel, consts, trace) -> "int | None":
    """The per-thread register count the kernel launches with (the CTA's setmaxnreg pool): from
    a `CompiledKernel`, else by assembling a ``T.kernel`` when its trace uses setmaxnreg."""
    regs = getattr(getattr(kernel, "resources", None), "registers", None)
    if regs or trace is None or not hasattr(kernel, "compile"):
        return regs or None
    if not any(isinstance(e, ev.SetMaxNReg) for e in trace.events):
        return None
    try:
        target = (getattr(kernel, "targets", None) or ("sm_90a",))[0]
        return kernel.compile(target, **(consts or {})).resources.registers or None
    except Exception:  # no toolchain here: the rule is reported as not checked
        return None


def _kir(kernel, consts):
    if hasattr(kernel, "specialize"):  # a T.kernel: its `.ir` is the text of the default
        return kernel.specialize(**(consts or {}))  # specialization, not these constants' IR
    return kernel.ir


def check_trace(trace, kir=None, buffers: "dict | None" = None, *, incomplete=(),
                max_states: int = synccheck.DEFAULT_MAX_STATES,
                extra_stats: "dict | None" = None,
                diagnostics=(), launch_regs: "int | None" = None,
                ) -> "tuple[AnalyzerResult, AnalyzerResult]":
    """Both analyses over a recorded numsim `Trace` (see the module docstring); numsim's
    `diagnostics` of synchronization misuse it skipped are carried over. `launch_regs`, the
    compiled per-thread register count, lets the register-pool rule of `warpchecks` run."""
    stats = dict(extra_stats or {})
    kloc = kir.loc if kir is not None else None
    where = SourceRef(kloc.file, kloc.line) if kloc is not None else None
    not_run = [Finding("sync_check.incomplete", f"numsim did not run the kernel to its end: {r}",
                       "incomplete", where) for r in incomplete]
    if trace is not None:
        not_run += _unknown_engines(trace)
    if kir is not None:
        not_run += _unknown_roles(kir)
    if trace is None:
        msg = "numsim produced no event trace"
        return (AnalyzerResult("synccheck", "incomplete", not_run, msg),
                AnalyzerResult("racecheck", "incomplete", list(not_run), msg))

    # -- racecheck (first: its clocks tell synccheck whether waits can be taken eagerly) -------
    t0 = time.perf_counter()
    probes, ignored = waituse.classify(kir)
    race_issues, checker = racecheck.check(trace, kir, buffers, ignored)
    race_findings = _dedupe([to_finding(i) for i in race_issues])
    rstats = {"racecheck_s": round(time.perf_counter() - t0, 3), "events": len(trace.events)}
    race_incomplete = list(not_run)
    if checker.replay_stuck:
        e = trace.events[checker.replay_stuck[0]]
        race_incomplete.append(Finding(
            "sync_check.not-modelled", "racecheck's replay could not give this mbarrier "
            "arrival the phase it counted in numsim's run (the phases' clocks are not known)",
            "incomplete", SourceRef(e.loc.file, e.loc.line) if e.loc is not None else where))
    race = _result("racecheck", race_findings, race_incomplete, rstats,
                   f"{len(trace.events)} events checked")

    # -- synccheck -------------------------------------------------------------------------------
    t0 = time.perf_counter()
    issues = []
    notes = []
    states = 0
    bounded = False
    names = _shared_names(kir)
    models = _distinct(model.build(trace, ignored, probes))
    eager_waits = hbquery.waits_ordered(checker, models)
    ordered_bars = hbquery.bars_ordered(checker)
    results = []
    for cm in models:
        r = synccheck.explore(cm, max_states, names, eager_waits=eager_waits,
                              ordered_bars=ordered_bars)
        results.append(r)
        issues.extend(r.issues)
        notes.extend(cm.notes + r.notes)
        states += r.states
        bounded |= not r.complete
    # named-barrier generations formed otherwise than in numsim's run: racecheck again
    shared_id, skipped = groupings.check(trace, kir, buffers, ignored, results, race_issues)
    issues.extend(shared_id)
    notes.extend(skipped)
    issues.extend(hbquery.reinit_races(checker))
    issues = rootcause.relocate(issues, trace, kir)
    issues.extend(warpchecks.check(trace, kir, launch_regs))
    t1 = time.perf_counter()
    if not incomplete and not any(d.kind == "numsim.deadlock" for d in diagnostics):
        # exit hazards need every CTA to have exited (`exitcheck`'s docstring)
        exit_issues, exit_notes = exitcheck.check(trace, ignored, names)
        issues.extend(exit_issues)
        notes.extend(exit_notes)
    exit_s = time.perf_counter() - t1
    if kir is not None:
        issues.extend(_attach_warps(wgmmacheck.check(kir), trace))
    from_numsim = [Finding(_FROM_NUMSIM[d.kind], d.message + " (reported by numsim, which "
                           "skipped the operation)", "error", d.where,
                           warps=[{"where": str(w)} for w in d.warps],
                           lanes=list(d.lanes), addresses=list(d.addresses),
                           witness=[f"numsim: {d.message}"], data=dict(d.data))
                   for d in diagnostics if d.kind in _FROM_NUMSIM]
    sync_findings = _dedupe([to_finding(i) for i in issues] + from_numsim)
    sync_incomplete = list(not_run)
    if launch_regs is None and any(isinstance(e, ev.SetMaxNReg) for e in trace.events):
        sync_incomplete.append(Finding(
            "sync_check.not-modelled", "setmaxnreg: the CTA register pool was not checked (the "
            "compiled register count is unknown: pass a compiled kernel)", "incomplete", where))
    if bounded:
        sync_incomplete.append(Finding(
            "sync_check.state-bound", f"the interleaving explorer stopped at {max_states} states "
            "(max_states); interleavings beyond were not checked", "incomplete", where))
    for e, why in _unique_notes(notes):
        sync_incomplete.append(Finding("sync_check.not-modelled", why, "incomplete",
                                       SourceRef(e.loc.file, e.loc.line) if e is not None and
                                       e.loc is not None else where))
    stats.update(states=states, synccheck_s=round(time.perf_counter() - t0, 3),
                 exitcheck_s=round(exit_s, 3),
                 events=len(trace.events), eager_waits=eager_waits,
                 ordered_bars=len(ordered_bars))
    sync = _result("synccheck", sync_findings, sync_incomplete, stats,
                   f"{states} states explored")
    return sync, race


KNOWN_ENGINES = ("tma", "bulk", "cp.async", "wgmma", "st.async", "red.async")
# binding sync roles (Effects.sync) whose ordering both analyses model; any other role in a
# kernel makes the results incomplete (fail closed), naming the instruction
MODELLED_ROLES = {
    "bar.sync", "bar.arrive", "bar.warp.sync", "warp", "fence", "fence.proxy.async",
    "fence.mbarrier_init", "fence.proxy.tensormap", "griddepcontrol", "mbarrier.init",
    "mbarrier.inval", "mbarrier.arrive", "mbarrier.arrive.expect_tx", "mbarrier.arrive_drop",
    "mbarrier.expect_tx", "mbarrier.complete_tx", "mbarrier.wait", "cluster.arrive",
    "cluster.wait", "cp.async", "cp.async.commit", "cp.async.wait", "cp.async.mbarrier.arrive",
    "bulk.copy", "bulk.commit", "bulk.wait", "setmaxnreg", "wgmma.mma", "wgmma.fence",
    "wgmma.commit", "wgmma.wait",
}


def _unknown_roles(kir) -> list:
    out, seen = [], set()
    for i in kir.instructions():
        try:
            role = i.binding.effects_for(i.modifiers).sync
        except Exception:
            continue
        if role and role not in MODELLED_ROLES and role not in seen:
            seen.add(role)
            out.append(Finding(
                "sync_check.not-modelled", f"{i.spelling}: synchronization role {role!r} is "
                "not modelled by synccheck/racecheck", "incomplete",
                SourceRef(i.loc.file, i.loc.line)))
    return out


def _unknown_engines(trace) -> list:
    """Async engines whose completion rules neither analysis models (e.g. tcgen05), and async
    stores whose shared-memory reads the trace does not record (racecheck cannot see them)."""
    out, seen = [], set()
    recorded = {e.async_id for e in trace.events if isinstance(e, ev.MemAccess)}
    for e in trace.events:
        if isinstance(e, ev.AsyncOp) and e.stage == "issue" and e.direction == "store" and \
                e.op_id not in recorded and ("store", e.loc) not in seen:
            seen.add(("store", e.loc))
            out.append(Finding(
                "sync_check.not-modelled", f"the {e.engine} store's reads of shared memory are "
                "not in numsim's trace: races and proxy fences on its source are not checked",
                "incomplete", SourceRef(e.loc.file, e.loc.line) if e.loc is not None else None))
        if isinstance(e, ev.AsyncOp) and e.engine not in KNOWN_ENGINES and e.engine not in seen:
            seen.add(e.engine)
            out.append(Finding(
                "sync_check.not-modelled", f"asynchronous engine {e.engine!r} (its completion "
                "and ordering rules are not modelled by synccheck/racecheck)", "incomplete",
                SourceRef(e.loc.file, e.loc.line) if e.loc is not None else None))
    return out


def _shared_names(kir) -> dict:
    """Shared address -> ``var[i]`` for the 8-byte words of every shared variable."""
    if kir is None:
        return {}
    out = {}
    for start, end, name in SharedLayout.of(kir).regions:
        for a in range(start, min(end, start + 8 * 64), 8):
            out[a] = f"{name}[{(a - start) // 8}]" if end - start > 8 else name
    return out


def _distinct(models: list) -> list:
    """CTAs (clusters) whose synchronization programs are the same up to their CTA index
    explore the same interleavings: keep the first of each kind."""
    out, seen = [], set()
    for cm in models:
        ctas = sorted(cm.cta_threads)
        rel = {c: i for i, c in enumerate(ctas)}

        def norm(obj):
            return obj[:1] + (rel.get(obj[1], obj[1]),) + obj[2:] if len(obj) > 2 else obj[:1]
        sig = tuple((w.key[1], tuple((op.kind, norm(op.obj), op.count, op.tx, op.parity,
                                      op.ref_gen, op.expected) for op in w.ops))
                    for w in cm.warps)
        if sig not in seen:
            seen.add(sig)
            out.append(cm)
    return out


def _attach_warps(issues: list, trace) -> list:
    """Static (IR) findings name the warps that issued the wgmma involved in the trace."""
    for issue in issues:
        lines = {(loc.file, loc.line) for loc, _ in issue.related_locs}
        if issue.loc is not None:
            lines.add((issue.loc.file, issue.loc.line))
        seen, evs = set(), []
        for e in trace.events:
            if isinstance(e, ev.AsyncOp) and e.engine == "wgmma" and e.stage == "issue" and \
                    e.loc is not None and (e.loc.file, e.loc.line) in lines and \
                    (e.cta, e.warp) not in seen:
                seen.add((e.cta, e.warp))
                evs.append(e)
        if evs:
            issue.event = None
            issue.related = evs
            issue.related_locs = [(loc, label) for loc, label in issue.related_locs
                                  if (loc.file, loc.line) not in {(e.loc.file, e.loc.line)
                                                                  for e in evs}]
            issue.witness = issue.witness + [f"issued by cta {e.cta} warp {e.warp}" for e in evs]
    return issues


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
