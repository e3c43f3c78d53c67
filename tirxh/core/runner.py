"""The per-item protocol: compile, then check, bench or build; each phase becomes a report.

Who made a mistake decides the outcome (see `tirxh.core.errors`): a trace/compile error in the
kernel is a ``failed`` item pointing at the user's line; an analyzer's ``error`` verdict fails the
item (``[check] fail_on`` can make ``incomplete`` or ``review`` fail too); an analyzer, bench
plugin or host-side function that raises is an ``error`` with its traceback. Nothing here raises
for an item's sake: the session goes on with the next item.
"""

from __future__ import annotations

import json
import time
import traceback
from pathlib import Path

from .errors import USER_ERRORS
from .findings import AnalyzerResult, VERDICTS, worst
from .reports import ItemReport, PhaseReport, worst_outcome
from .written import never_written


def _tb(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def user_error_text(exc: BaseException, config) -> str:
    """A user's mistake as the other trace errors read: ``Kind: file:line: in kernel 'k': ...``
    in one line; the full traceback (with the user's own exception chained) with ``-v`` or
    ``--tb=long``."""
    text = f"{type(exc).__name__}: {exc}"
    long = getattr(config, "getoption", lambda *a: None)("tb") == "long" or \
        (getattr(config, "getoption", lambda *a: 0)("verbose") or 0) > 0
    return text + ("\n" + _tb(exc) if long else "")


def _loc(exc) -> "list | None":
    loc = getattr(exc, "loc", None)
    return [str(loc.file), int(loc.line)] if loc is not None else None


def compile_item(item) -> "tuple[object | None, PhaseReport]":
    """``tirxh_compile`` for one item; (compiled or None, the compile phase report)."""
    config = item.config
    t0 = time.perf_counter()
    try:
        compiled = config.pm.hook.tirxh_compile(item=item, target=item.target, config=config)
    except USER_ERRORS as e:
        return None, PhaseReport("compile", "failed", time.perf_counter() - t0,
                                 user_error_text(e, config), _loc(e))
    except Exception as e:
        return None, PhaseReport("compile", "error", time.perf_counter() - t0, _tb(e))
    dt = time.perf_counter() - t0
    if compiled is None:
        return None, PhaseReport("compile", "error", dt,
                                 "no plugin answered tirxh_compile (is a compile plugin loaded?)")
    data = {"cache_hit": bool(getattr(compiled, "cache_hit", False)),
            "timings": dict(getattr(compiled, "timings", {}) or {})}
    res = getattr(compiled, "resources", None)
    if res is not None and hasattr(res, "to_json"):
        data["resources"] = res.to_json()
    _say_assembler_warnings(config, compiled, res)
    return compiled, PhaseReport("compile", "passed", dt, data=data)


def _say_assembler_warnings(config, compiled, res) -> None:
    """The assembler's warnings on stderr, once per compiled variant (a cached build's too: its
    report is kept with the cubin). They lived only in the JSON report before session 19,
    where nobody reads them: a warp-specialized kernel built without ptxas loses setmaxnreg
    (`toolchain.SETMAXNREG_LOST`), and ptxas's "Potential Performance Loss" lines name
    serialized wgmma; both change what a benchmark measures. Notes (``note:``) stay in the
    report."""
    lines = [w for w in (getattr(res, "warnings", None) or ()) if not w.startswith("note:")]
    if not lines:
        return
    consts = getattr(compiled, "consts", None) or {}
    what = getattr(compiled, "name", "?") + (
        "[" + ", ".join(f"{k}={v}" for k, v in sorted(consts.items())) + "]" if consts else "")
    for w in lines:
        config.warn(f"{what} ({getattr(compiled, 'target', '?')}): {w}")


def _verdict_outcome(verdict: str, fail_on: str) -> str:
    """The outcome of a verdict under ``[check] fail_on`` (`config.FAIL_ON`)."""
    fails = {"error": ("error",), "compiled": ("error",), "incomplete": ("error", "incomplete"),
             "review": ("error", "incomplete", "review")}[fail_on]
    if verdict in fails:
        return "failed"
    return "incomplete" if verdict == "incomplete" else "passed"


def _unchecked(config, fail_on: str) -> "tuple[str, str]":
    """(outcome, text) of an item no analyzer returned a result for: ``compiled``, never
    ``passed``; it fails under ``fail_on`` ``compiled`` or stricter."""
    names = [i.plugin_name for i in config.pm.hook.tirxh_check_item.get_hookimpls()]
    why = ("no analyzer checked this item (installed analyzers: "
           f"{', '.join(names)}; numsim and sync_check simulate small cases only)" if names else
           "no analyzer checked this item: no analyzer plugin is installed (tirxh-numsim, "
           "tirxh-sync-check)")
    if fail_on == "error":
        return "compiled", why
    return "failed", f"{why}; [check] fail_on = {fail_on!r} fails it"


def call_each(hookcaller, kwargs: dict, role: str) -> "tuple[list, list, list]":
    """Call every implementation of a hook separately, in pluggy's order, so that one that
    raises is reported by its plugin's name and the others still answer.

    Returns ``([(plugin name, result)], [error text], [user error])``: a plugin that raised one
    of `USER_ERRORS` (the user's suite or kernel is wrong, e.g. ``reference()`` raised) is not a
    plugin crash; those exceptions are returned as they are. None results are left out;
    wrappers are not called (this is why ``tirxh_check_item`` and ``tirxh_build_item`` do not
    support them).
    """
    answers, errors, user = [], [], []
    for impl in reversed(hookcaller.get_hookimpls()):  # pluggy's call order
        if impl.hookwrapper or getattr(impl, "wrapper", False):
            continue
        try:
            got = impl.function(*[kwargs[a] for a in impl.argnames])
        except USER_ERRORS as e:
            user.append(e)
            continue
        except Exception as e:
            errors.append(f"{role} plugin {impl.plugin_name!r} raised:\n{_tb(e)}")
            continue
        if got is not None:
            answers.append((impl.plugin_name, got))
    return answers, errors, user


_NEVER_WRITTEN: dict = {}  # (compiled kernel's key, outputs) -> never-written outputs


def _unwritten_outputs(item, compiled) -> str:
    """For an item no analyzer simulated (a timing case, too large for numsim): the suite's
    declared outputs its compiled IR can never write (`tirxh.core.written`), as one line naming
    kernel, case and buffers; "" when there are none or the IR is not at hand. KCoral poisons
    declared outputs, so such a case can only fail on the device (session 15, H200:
    kda_bwd_prep_sg[po_t8192_h96] and 'bt', /work/notes/s15/d6/calibsg/call.log)."""
    suite, case = item.suite, item.case
    ir_json = getattr(compiled, "ir_json", None)
    if suite is None or case is None or not callable(ir_json) or not suite.outputs:
        return ""
    memo = (getattr(compiled, "key", None), tuple(suite.outputs))
    missing = _NEVER_WRITTEN.get(memo) if memo[0] is not None else None
    if missing is None:  # cases of one build (same constants) share its IR: judged once
        missing = never_written(ir_json(), suite.outputs)
        if memo[0] is not None:
            _NEVER_WRITTEN[memo] = missing
    if not missing:
        return ""
    consts = ", ".join(f"{k}={v}" for k, v in sorted(suite.consts(case).items()))
    names = ", ".join(map(repr, missing))
    return (f"{item.kernel.name}[{case.name}]: declared output(s) {names} never written by "
            f"this build ({consts or 'no constants'}): no store, atomic or copy addresses "
            f"them, so KCoral's poison (NaN) would stay there and the job fail on the device; "
            f"declare only the outputs this case writes (a suite of its own)")


def check_item(item, compiled) -> PhaseReport:
    """Every ``tirxh_check_item`` implementation, one at a time (so a crash names its plugin)."""
    config = item.config
    fail_on = config.getini("check", "fail_on")
    kwargs = {"item": item, "compiled": compiled, "config": config}
    results = []
    t0 = time.perf_counter()
    answers, errors, user = call_each(config.pm.hook.tirxh_check_item, kwargs, "analyzer")
    for plugin_name, got in answers:
        got = [got] if isinstance(got, AnalyzerResult) else got
        if not isinstance(got, (list, tuple)) or \
                not all(isinstance(r, AnalyzerResult) for r in got):
            errors.append(f"analyzer plugin {plugin_name!r} returned {got!r}; "
                          f"tirxh_check_item must return an AnalyzerResult or None")
            continue
        results.extend(got)
    dt = time.perf_counter() - t0
    verdict = worst(*(r.verdict for r in results))
    lines = list(dict.fromkeys(user_error_text(e, config) for e in user))  # once per mistake
    lines += errors
    if errors:
        outcome = "error"
    elif user:  # the user's suite or kernel is wrong: the item fails at their line
        outcome = "failed"
    elif not results:
        try:
            unwritten = _unwritten_outputs(item, compiled)
        except Exception as e:  # a bug of tirxh's own check: an error, with its traceback
            unwritten, outcome = None, "error"
            lines.append(f"the check for never-written outputs raised:\n{_tb(e)}")
        if unwritten:  # the device would only find NaN there: fail it now, on the CPU
            outcome = "failed"
            lines.append(unwritten)
        elif unwritten is not None:
            outcome, why = _unchecked(config, fail_on)
            lines.append(why)
    else:
        outcome = _verdict_outcome(verdict, fail_on)
    for r in results:
        if r.verdict != "clean":
            lines.append(f"[{r.analyzer}] {r.verdict}: {r.summary}".rstrip(": "))
            for f in r.findings:
                where = ""
                if f.where:
                    label = f" ({f.where.label})" if f.where.label else ""
                    where = f"{config.relpath(Path(f.where.file))}:{f.where.line}{label}: "
                lines.append(f"  {where}{f.severity} {f.kind}: {f.message}")
    where = _loc(user[0]) if user else None
    return PhaseReport("check", outcome, dt, "\n".join(lines), where,
                       [r.to_json() for r in results],
                       {"analyzers": [r.analyzer for r in results], "verdict": verdict})


def bench_item(item, compiled) -> PhaseReport:
    """``tirxh_bench_item`` (firstresult): the bench plugin times the item through KCoral."""
    config = item.config
    if item.suite is None:
        return PhaseReport("bench", "skipped", 0.0,
                           "compile-only kernel (no Suite): nothing to time")
    t0 = time.perf_counter()
    try:
        res = config.pm.hook.tirxh_bench_item(item=item, compiled=compiled, config=config)
    except USER_ERRORS as e:
        return PhaseReport("bench", "failed", time.perf_counter() - t0,
                           user_error_text(e, config), _loc(e))
    except Exception as e:
        return PhaseReport("bench", "error", time.perf_counter() - t0, _tb(e))
    dt = time.perf_counter() - t0
    if res is None:
        return PhaseReport("bench", "error", dt,
                           "no plugin answered tirxh_bench_item: the bench plugin is blocked or "
                           "not installed (see `tirxh plugins`)")
    try:
        data = res.to_json()
        json.dumps(data)
    except Exception as e:
        return PhaseReport("bench", "error", dt, f"bench result {res!r} is not serializable "
                                                 f"with to_json(): {e}")
    verdict = getattr(res, "verdict", None) or data.get("verdict") or "clean"
    if verdict not in VERDICTS:
        return PhaseReport("bench", "error", dt, f"bench result verdict {verdict!r} is not one "
                                                 f"of {VERDICTS}", data=data)
    timed = getattr(res, "timed", data.get("timed", True))
    if timed is False and verdict != "error":  # asked for a timing, got none: says why
        why = getattr(res, "not_timed", None) or data.get("not_timed") or "no reason given"
        return PhaseReport("bench", "incomplete", dt, f"not timed ({why})",
                           data=dict(data, timed=False, not_timed=why))
    outcome = _verdict_outcome(verdict, "error")
    text = getattr(res, "summary", None) or data.get("summary") or ""
    return PhaseReport("bench", outcome, dt, "" if outcome == "passed" else str(text), data=data)


def untimed_status(reports: list) -> "str | None":
    """Why ``tirxh bench`` failed when it timed none of the items it was asked to time (an
    item with a Suite), or None when it timed one, or had none to time. Under ``--no-timing``
    (every result's ``timed`` is None) the same for verification: it fails when no item was
    verified on a board."""
    phases = [p for r in reports for p in r.phases if p.phase == "bench"
              and not p.longrepr.startswith("compile-only kernel")]
    if phases and all(p.data.get("timed", False) is None for p in phases):
        # `--no-timing` asked for correctness only: the same rule, on verification
        if any(p.outcome == "passed" for p in phases):
            return None
        reasons = sorted({(p.longrepr or p.outcome).splitlines()[0] for p in phases})
        return (f"tirxh bench --no-timing verified none of the {len(phases)} item(s): "
                + "; ".join(reasons))
    if not phases or any(p.data.get("timed") is not False for p in phases):
        return None
    reasons = sorted({p.data.get("not_timed") or p.longrepr for p in phases})
    return (f"tirxh bench timed none of the {len(phases)} item(s) it was asked to time: "
            + "; ".join(reasons))


def build_dirname(item) -> str:
    """``kernel[case]@target``: the item's own name (no path separators can occur in it)."""
    return item.name


def build_item(item, compiled) -> PhaseReport:
    """Write ``kernel.ptx``, ``kernel.cubin``, ``kernel.sass``, ``resources.json`` and
    ``launch.json`` into ``<builddir>/<kernel>[case]@target/``, then let ``tirxh_build_item``
    plugins add theirs."""
    config = item.config
    t0 = time.perf_counter()
    out = config.builddir / build_dirname(item)
    owners = config.stash.setdefault("build_dirs", {})
    if str(out) in owners:
        return PhaseReport("build", "failed", 0.0, f"build directory {out} is already used by "
                           f"{owners[str(out)]}; rename one of the kernels")
    owners[str(out)] = item.nodeid
    written, problems = [], []
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "kernel.ptx").write_text(compiled.ptx)
        written.append("kernel.ptx")
        if compiled.cubin is not None:
            (out / "kernel.cubin").write_bytes(compiled.cubin)
            written.append("kernel.cubin")
            try:
                (out / "kernel.sass").write_text(compiled.sass)
                written.append("kernel.sass")
            except Exception as e:  # nvdisasm missing or failing: say so, keep the rest
                problems.append(f"kernel.sass not written: {type(e).__name__}: {e}")
        else:
            problems.append("kernel.cubin not written: the compile step produced no cubin")
        res = compiled.resources.to_json() if hasattr(compiled.resources, "to_json") else {}
        (out / "resources.json").write_text(json.dumps(
            dict(res, log=compiled.log), indent=2) + "\n")
        written.append("resources.json")
        launch = compiled.launch_metadata()
        if item.suite is not None and item.case is not None:
            try:
                launch["grid"] = list(item.suite.grid(item.case))
            except Exception as e:
                problems.append(f"grid for case {item.case.name!r}: {type(e).__name__}: {e}")
        (out / "launch.json").write_text(json.dumps(launch, indent=2, default=str) + "\n")
        written.append("launch.json")
    except OSError as e:
        return PhaseReport("build", "error", time.perf_counter() - t0, f"writing {out}: {e}",
                           data={"dir": str(out), "files": written})
    answers, errors, user = call_each(config.pm.hook.tirxh_build_item,
                                {"item": item, "compiled": compiled, "config": config,
                                 "outdir": out}, "build")
    for plugin_name, files in answers:
        if isinstance(files, (str, Path)) or not all(isinstance(f, (str, Path)) for f in files):
            errors.append(f"build plugin {plugin_name!r} returned {files!r}; tirxh_build_item "
                          "must return a list of file names or None")
            continue
        written.extend(str(f) for f in files)
    errors += [user_error_text(e, config) for e in user]
    outcome = "error" if errors else "incomplete" if problems else "passed"
    return PhaseReport("build", outcome, time.perf_counter() - t0, "\n".join(errors + problems),
                       data={"dir": str(out), "files": written})


def run_item(item, command: str) -> ItemReport:
    """One item through its phases for `command` (``check``, ``bench`` or ``build``)."""
    t0 = time.perf_counter()
    compiled, phase = compile_item(item)
    phases = [phase]
    if compiled is not None:
        step = {"check": check_item, "bench": bench_item, "build": build_item}[command]
        phases.append(step(item, compiled))
    outcome = worst_outcome(p.outcome for p in phases)  # a skipped bench skips the item
    file, line = item.location
    return ItemReport(item.nodeid, item.kernel.name, item.case.name if item.case else None,
                      item.target, [file, line], outcome, time.perf_counter() - t0, phases)
