"""The run skeleton: exit codes, the session wrapper, and the run commands.

`wrap_session` owns the mapping from what happened to an `ExitCode` (as pytest's ``main.py``):
a usage error, an interruption or an internal error never escapes as a traceback from `main`;
the report stream is always closed with a ``session_finish`` event.
"""

from __future__ import annotations

import enum
import platform
import sys
import time
import traceback
from pathlib import Path

from .. import __version__

from . import durations
from .dist import numprocesses, run_in_workers
from .errors import UsageError
from .nodeids import find_item
from .nodes import Session, collect
from .reports import OUTCOMES, SessionFinish, SessionStart
from .runner import run_item, untimed_status


class ExitCode(enum.IntEnum):
    OK = 0  # every item passed (compiled/incomplete ones do not fail unless [check] fail_on)
    FAILED = 1  # an item failed or errored, or a kernel module failed to import
    INTERRUPTED = 2  # Ctrl-C (a run stopped early by -x is FAILED, not this)
    INTERNAL_ERROR = 3  # a bug in tirxh or a plugin outside any item
    USAGE_ERROR = 4  # bad command line, tirx.toml, node id, or plugin set-up
    NO_ITEMS_COLLECTED = 5  # nothing was collected (or everything was deselected)


def _error(msg: str) -> None:
    sys.stderr.write(f"ERROR: {msg}\n")
    sys.stderr.flush()


def counts(session: Session) -> dict:
    reports = session.config.stash.get("item_reports", [])
    out = {o: 0 for o in OUTCOMES}
    for r in reports:
        out[r.outcome] = out.get(r.outcome, 0) + 1
    out["collected"] = len(session.items) + len(session.deselected)
    out["selected"] = len(session.items)
    out["deselected"] = len(session.deselected)
    out["collection_errors"] = sum(1 for r in session.collect_reports if r.outcome == "failed")
    return out


def wrap_session(config, doit) -> int:
    """Run ``doit(config, session) -> ExitCode`` between the start and finish events."""
    hook = config.pm.hook
    session = Session(config, config.command)
    config.stash["session"] = session
    config.stash.setdefault("item_reports", [])
    status = ExitCode.OK
    started = False
    try:
        hook.tirxh_sessionstart(session=session)
        hook.tirxh_report(report=SessionStart(
            config.command, str(config.rootdir), str(config.inipath) if config.inipath else None,
            __version__, platform.python_version(), list(config.project_targets),
            config.pm.plugin_infos(), time.time()), config=config)
        started = True
        status = doit(config, session)
    except UsageError as e:
        _error(str(e))
        status = ExitCode.USAGE_ERROR
    except KeyboardInterrupt:
        _error("interrupted")
        status = ExitCode.INTERRUPTED
    except Exception:
        sys.stderr.write("INTERNAL ERROR:\n" + traceback.format_exc())
        status = ExitCode.INTERNAL_ERROR
    try:
        hook.tirxh_sessionfinish(session=session, exitstatus=status)
        if started:
            hook.tirxh_report(report=SessionFinish(int(status), counts(session),
                                                   time.time() - session.start), config=config)
    except Exception:
        sys.stderr.write("INTERNAL ERROR (while finishing):\n" + traceback.format_exc())
        status = ExitCode.INTERNAL_ERROR
    finally:
        hook.tirxh_unconfigure(config=config)
    if session.exit_reason:  # after the summary, so it is the last thing said
        _error(session.exit_reason)
    return status


def _collect(config, session) -> None:
    collect(session, config.getoption("paths") or [])


def _collection_status(session) -> "ExitCode | None":
    """The exit code when collection alone decides it (None: go on and run)."""
    errors = any(r.outcome == "failed" for r in session.collect_reports)
    if not session.items:
        return ExitCode.FAILED if errors else ExitCode.NO_ITEMS_COLLECTED
    return None


def run_items(config, session) -> ExitCode:
    """``check``/``bench``/``build``: collect, then each item through `runner.run_item`, in this
    process or (``-n``) in worker processes (`dist.run_in_workers`); reports in collection
    order either way."""
    _collect(config, session)
    early = _collection_status(session)
    if config.getoption("collect_only"):
        if early is not None:
            return early
        errors = any(r.outcome == "failed" for r in session.collect_reports)
        return ExitCode.FAILED if errors else ExitCode.OK
    if early is not None:
        return early
    hook = config.pm.hook
    exitfirst = bool(config.getoption("exitfirst"))
    n = min(numprocesses(config.getoption("numprocesses")), len(session.items))
    reports = run_in_workers(config, session.items, n, exitfirst) if n else \
        (run_item(item, config.command) for item in session.items)
    done: list = config.stash["item_reports"]
    failures = 0
    try:
        for rep in reports:
            done.append(rep)
            hook.tirxh_report(report=rep, config=config)
            if rep.outcome in ("failed", "error"):
                failures += 1
                if exitfirst:
                    left = len(session.items) - len(done)
                    session.shouldstop = f"stopping after {failures} failure (-x)" + (
                        f": {left} item{'s' if left != 1 else ''} not run" if left else "")
                    break
    finally:
        reports.close()  # -x or Ctrl-C: stop the workers now
        durations.save(config, done)
    bad = failures or any(r.outcome == "failed" for r in session.collect_reports)
    if config.command == "bench" and not session.shouldstop:
        why = untimed_status(done)
        if why:  # an agent believes exit codes: a bench that timed nothing did not succeed
            session.exit_reason = why
            return ExitCode.FAILED
    return ExitCode.FAILED if bad else ExitCode.OK


def select_one(session, arg: str, command: str = "show"):
    """Collect what `arg` may name and return the one item it names (``show``, ``profile``):
    a node id, a unique prefix of one, or a bare kernel or item name (`nodeids.find_item`)."""
    config = session.config
    path_part, sep, rest = arg.partition("::")
    p = Path(path_part)
    if not p.is_absolute():
        cand = (Path.cwd() / p).resolve()
        p = cand if cand.exists() else (config.rootdir / p).resolve()
    if p.is_file():
        collect(session, [str(p)])
        arg = config.relpath(p) + sep + rest
    else:  # a bare name: look in every kernel file of the project
        collect(session, [])
    errs = [r.nodeid for r in session.collect_reports if r.outcome == "failed"]
    return find_item(session.items, arg, config, command, errs)
