"""The terminal reporter: a readable summary of the report stream (as pytest's ``terminal.py``).

It is only a plugin: `TerminalReporter` consumes ``tirxh_report`` events like every other
reporter. With ``--color auto`` (the default) colour is used only on a TTY and never when
``NO_COLOR`` is set; an explicit ``--color yes`` wins over ``NO_COLOR``;
progress is shown as a percentage at the end of each module's line (``-v``: one line per item).
With ``--json`` it stays silent, because stdout carries the JSON document.
"""

from __future__ import annotations

import os
import sys

from tirxh.core.cli import format_plugin_table
from tirxh.core.pluginmanager import hookimpl

_CHARS = {"passed": ".", "failed": "F", "error": "E", "incomplete": "I", "compiled": "C",
          "skipped": "s"}
_COLORS = {"passed": "32", "failed": "31", "error": "31", "incomplete": "33", "compiled": "33",
           "skipped": "33", "bold": "1"}
_ORDER = ("failed", "error", "incomplete", "passed", "compiled", "skipped")


@hookimpl
def tirxh_configure(config):
    if config.command not in ("check", "bench", "build") or config.getoption("json") or \
            config.worker:  # a worker of -n: the main process reports
        return
    config.pm.register(TerminalReporter(config), "terminalreporter")


def _minutes(seconds: float) -> str:
    """``4m 05s`` (or ``12s``): how long an item has been running."""
    m, s = divmod(int(seconds), 60)
    return f"{m}m {s:02d}s" if m else f"{s}s"


def should_color(option_value: str, stream) -> bool:
    if option_value == "yes":
        return True
    if option_value == "no" or os.environ.get("NO_COLOR"):
        return False
    return bool(getattr(stream, "isatty", lambda: False)()) and \
        os.environ.get("TERM", "") != "dumb"


class TerminalReporter:
    """Writes to ``sys.stdout`` as it is at write time (so callers may redirect it)."""

    def __init__(self, config):
        self.config = config
        self.verbosity = config.getoption("verbose", 0) - config.getoption("quiet", 0)
        self.color = should_color(config.getoption("color", "auto"), sys.stdout)
        self.total = 0
        self.done = 0
        self.current_module = None
        self.col = 0
        self._prev_pct = ""
        self.items: list = []
        self.collect_errors: list = []

    # -- output primitives -----------------------------------------------------------------------
    def paint(self, text: str, what: str) -> str:
        if not self.color or what not in _COLORS:
            return text
        return f"\x1b[{_COLORS[what]}m{text}\x1b[0m"

    def write(self, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()
        nl = text.rfind("\n")
        self.col = len(text) - nl - 1 if nl >= 0 else self.col + len(text)

    def line(self, text: str = "", what: str = "") -> None:
        if self.col:
            self.write("\n")
        self.write(self.paint(text, what) + "\n")

    def section(self, title: str, sep: str = "=", what: str = "") -> None:
        width = 100
        fill = max(width - len(title) - 2, 4)
        left = fill // 2
        self.line(f"{sep * left} {title} {sep * (fill - left)}", what)

    # -- events ----------------------------------------------------------------------------------
    @hookimpl
    def tirxh_report(self, report, config):
        getattr(self, "_on_" + report.event)(report)

    @hookimpl
    def tirxh_progress(self, config, finished, total, waiting_on, running):
        """A line on stderr (stdout stays a serial run's output): how far a parallel run is
        while its in-order report waits; shown unless ``-qq``."""
        if self.verbosity < -1:
            return
        longest = max(running, key=lambda r: r[2], default=None)
        held = next((r for r in running if r[1] == waiting_on), None)
        text = f"tirxh: {finished} of {total} items finished; the report waits on {waiting_on}"
        if held is not None:
            text += f" ({held[0]}, {_minutes(held[2])})"
        if longest is not None and longest is not held:
            text += f"; longest running: {longest[1]} ({longest[0]}, {_minutes(longest[2])})"
        # stdout is flushed at every write (`write`); mid-line on a terminal (a module's dots),
        # start the line on a line of its own
        sys.stderr.write(("\n" if self.col and sys.stderr.isatty() else "") + text + "\n")
        sys.stderr.flush()

    def _on_session_start(self, rep):
        if self.verbosity < 0:
            if self.config.getoption("trace_config"):  # asked for explicitly: shown even with -q
                self._trace_config(rep)
            return
        self.section(f"tirxh {rep.command} session starts", what="bold")
        self.line(f"tirxh {rep.tirxh_version}, python {rep.python}")
        cfg = os.path.basename(rep.configfile) if rep.configfile else "none"
        self.line(f"project: {self.config.project_name}, rootdir: {rep.rootdir}, "
                  f"configfile: {cfg}")
        self.line(f"targets: {', '.join(rep.targets)}")
        extra = [f"{p['name']}-{p['version']}" if p["version"] else p["name"]
                 for p in rep.plugins if p["origin"] != "builtin"]
        if extra:
            self.line(f"plugins: {', '.join(extra)}")
        for lines in self.config.pm.hook.tirxh_report_header(config=self.config,
                                                             start_path=self.config.rootdir):
            for ln in [lines] if isinstance(lines, str) else lines:
                self.line(str(ln))
        if self.config.getoption("trace_config"):
            self._trace_config(rep)

    def _trace_config(self, rep):
        self.section("plugins", "-")
        for ln in format_plugin_table(rep.plugins, self.config.pm.blocked_names):
            self.line(ln)

    def _on_collect_report(self, rep):
        if rep.outcome == "failed":
            self.collect_errors.append(rep)

    def _on_item_report(self, rep):
        self.items.append(rep)
        self.done += 1
        pct = f"[{100 * self.done // max(self.total, 1):3d}%]"
        if self.verbosity > 0:
            extra = ""
            check = next((p for p in rep.phases if p.phase == "check"), None)
            if check is not None and check.results:
                extra = " (" + ", ".join(
                    r["analyzer"] + ("" if r["verdict"] == "clean" else f": {r['verdict']}")
                    for r in check.results) + ")"
            self.line(f"{rep.nodeid} {self.paint(rep.outcome.upper(), rep.outcome)}{extra} "
                      f"{pct}")
            return
        module = rep.nodeid.split("::")[0]
        if module != self.current_module:
            if self.current_module is not None:
                self.write(f" {self._prev_pct}\n")
            self.current_module = module
            self.write(f"{module} ")
        self.write(self.paint(_CHARS.get(rep.outcome, "?"), rep.outcome))
        self._prev_pct = pct

    def _on_session_finish(self, rep):
        if self.current_module is not None and self.verbosity <= 0:
            self.write(f" {self._prev_pct}\n")
        if self.collect_errors:
            self.section("ERRORS", what="failed")
            for c in self.collect_errors:
                self.section(f"ERROR collecting {c.nodeid}", "_", "failed")
                self.line(c.longrepr.rstrip())
        bad = [r for r in self.items if r.outcome in ("failed", "error")]
        if bad:
            self.section("FAILURES", what="failed")
            for r in bad:
                self.section(r.nodeid, "_", "failed")
                file, line = r.location
                self.line(f"kernel {r.kernel!r} defined at {file}:{line}")
                for p in r.phases:
                    if p.longrepr:
                        self.line(f"[{p.phase}] {p.outcome}")
                        self.line(p.longrepr.rstrip())
        incomplete = [r for r in self.items if r.outcome == "incomplete" and  # not timed: below
                      not any(p.data.get("timed") is False for p in r.phases)]
        if incomplete and self.verbosity >= 0:
            why = {"bench": "timed, but not cleanly: noisy, unverified or refused",
                   "build": "an artifact could not be written"}.get(
                self.config.command, "an analysis could not model everything")
            self.section(f"INCOMPLETE ({why})", what="incomplete")
            for r in incomplete:
                self.line(f"{r.nodeid}:")
                self.line("  " + r.longrepr.rstrip().replace("\n", "\n  "))
        untimed = [(r, p) for r in self.items for p in r.phases
                   if p.phase == "bench" and p.data.get("timed") is False]
        if untimed and self.verbosity >= 0:
            self.section("NOT TIMED", what="incomplete")
            for r, p in untimed:
                self.line(f"{r.nodeid}: {p.longrepr}")
        compiled = [r for r in self.items if r.outcome == "compiled"]
        if compiled and self.verbosity >= 0:
            self.section("COMPILED, NOT CHECKED (no analyzer applied)", what="incomplete")
            reasons = {p.longrepr for r in compiled for p in r.phases if p.phase == "check"}
            for r in compiled:
                self.line(r.nodeid)
            if self.config.pm.hook.tirxh_check_item.get_hookimpls():  # else: the note below
                for why in sorted(reasons):
                    self.line(f"  {why}")
        review = [r for r in self.items if r.outcome == "passed" and
                  any(x["verdict"] == "review" for x in r.results())]
        if review and self.verbosity >= 0:
            self.section("REVIEW (advisory findings)", what="incomplete")
            for r in review:
                self.line(f"{r.nodeid}:")
                for p in r.phases:
                    if p.phase == "check" and p.longrepr:
                        self.line("  " + p.longrepr.rstrip().replace("\n", "\n  "))
        checks = [p for r in self.items for p in r.phases if p.phase == "check"]
        if checks and not self.config.pm.hook.tirxh_check_item.get_hookimpls() and \
                self.verbosity >= 0:
            self.line("note: no analyzer plugin is installed (items were compiled only); "
                      "install analyzer plugins such as tirxh-numsim or tirxh-sync-check",
                      "incomplete")
        self.config.pm.hook.tirxh_terminal_summary(reporter=self, exitstatus=rep.exitstatus,
                                                    config=self.config)
        self._summary_line(rep)

    def _summary_line(self, rep):
        c = rep.counts
        parts = [f"{c[o]} {o}{'s' if o == 'error' and c[o] != 1 else ''}" for o in _ORDER
                 if c.get(o)]
        if c.get("deselected"):
            parts.append(f"{c['deselected']} deselected")
        if c.get("collection_errors"):
            n = c["collection_errors"]
            parts.append(f"{n} collection error{'s' if n != 1 else ''}")
        session = self.config.stash.get("session")
        if session is not None and session.shouldstop:
            parts.append(session.shouldstop)
        if self.config.getoption("collect_only"):
            n = c.get("selected", 0)
            parts = [f"{n} item{'s' if n != 1 else ''} collected"] + parts
        text = ", ".join(parts) or "no items ran"
        what = "failed" if rep.exitstatus not in (0, 5) else \
            "incomplete" if c.get("incomplete") or c.get("compiled") or rep.exitstatus == 5 \
            else "passed"
        cache = self.config.cache
        if self.verbosity > 0 and (cache.hits or cache.misses):
            self.line(f"artifact cache: {cache.hits} hits, {cache.misses} misses ({cache.root})")
        self.section(f"{text} in {rep.duration:.2f}s", what=what)

    @hookimpl
    def tirxh_collection_finish(self, session):
        self.total = len(session.items)
        n, d = len(session.items) + len(session.deselected), len(session.deselected)
        errs = sum(1 for r in session.collect_reports if r.outcome == "failed")
        if self.verbosity >= 0 or self.config.getoption("collect_only"):
            msg = f"collected {n} item{'s' if n != 1 else ''}"
            if d:
                msg += f" / {d} deselected / {n - d} selected"
            if errs:
                msg += f" / {errs} error{'s' if errs != 1 else ''}"
            self.line(msg, "bold")
        if self.config.getoption("collect_only"):
            for it in session.items:
                self.line(it.nodeid)
        elif self.total:
            self.line("")
