"""``tirxh bench``: time a compiled item on a KCoral board (the built-in ``bench`` plugin).

The job comes from `tirxh.core.benchjob.build_job` (shared with the profilers through
`tirxh.api`) and is submitted through the run's KCoral client (`client_for`): the daemon is
``--kcoral host:port`` or ``[bench] kcoral``; with neither, an embedded daemon with the local
boards is started once per run (and the run says so). A token comes from ``KCORAL_TOKEN``.
A refused job becomes a typed error by its refusal code (`bench_error`), never by its text.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from kcoral.errors import KCoralError
from kcoral.stats import regimes_differ

from tirxh.core.benchjob import bench_error, build_job, client_for, close_clients
from tirxh.core.errors import UsageError
from tirxh.core.pluginmanager import hookimpl

__all__ = ["BenchResult"]


# -------------------------------------------------------------------------------------------------
# the result
# -------------------------------------------------------------------------------------------------

@dataclass
class BenchResult:
    """What ``tirxh_bench_item`` returns: the KCoral result plus a verdict and a summary line.

    `timed` says whether a timing was taken; when not (a board that does not time, such as the
    sim board; a refusal; no daemon), `not_timed` says why, and the run reports the item as
    ``not timed (<why>)`` instead of incomplete (and fails if it timed nothing it was asked to).
    """

    item: str
    state: str
    result: dict = field(default_factory=dict)
    daemon: str = ""
    job_id: str = ""
    timing_asked: bool = True  # False under --no-timing: correctness on the board only

    @property
    def verdict(self) -> str:
        r = self.result
        if self.state != "done":
            err = (r.get("error") or {}).get("type", "")
            return "incomplete" if err.startswith(("unavailable", "interrupted", "timeout")) \
                else "error"
        if not self.timing_asked:  # correctness only: verified on the board is the whole ask
            return "clean" if r.get("verified") and not self.guards_incomplete else "incomplete"
        t = r.get("timing") or {}
        if not t or "skipped" in t or not r.get("verified") or self.guards_incomplete or \
                t.get("baselines_missing"):
            return "incomplete"  # a declared baseline not timed: the comparison is missing
        if t.get("suspect"):
            return "review"
        return "clean" if t.get("converged") else "incomplete"

    @property
    def guards_incomplete(self) -> dict:
        """The daemon's guards (`kcoral.guards`) that could not be applied: name -> why. A result
        a guard could not check is never clean (fail closed)."""
        return {k: g.get("why", "") for k, g in (self.result.get("guards") or {}).items()
                if isinstance(g, dict) and g.get("status") == "incomplete"}

    @property
    def timed(self) -> "bool | None":
        """Whether a timing was taken; None when none was asked for (``--no-timing``), so a
        correctness-only run is never "timed nothing it was asked to time"."""
        if not self.timing_asked:
            return None
        t = self.result.get("timing") or {}
        return self.state == "done" and bool(t) and "skipped" not in t

    @property
    def not_timed(self) -> str:
        """Why there is no timing ("" when there is one)."""
        if self.timed:
            return ""
        r = self.result
        if self.state != "done":
            e = r.get("error") or {}
            return f"{e.get('type', self.state)}: {e.get('message', '')}".rstrip(": ")
        t = r.get("timing") or {}
        board = r.get("board", "")
        return (f"{board}: " if board else "") + str(t.get("skipped", "timing disabled"))

    @property
    def summary(self) -> str:
        r = self.result
        if self.state != "done":
            e = r.get("error") or {}
            return f"{self.item}: {self.state} {e.get('type', '')}: {e.get('message', '')}"
        t = r.get("timing") or {}
        if not self.timing_asked:
            checked = "correct" if r.get("verified") else "unverified (no reference)"
            extra = "".join(f", guard {n} incomplete ({why})"
                            for n, why in self.guards_incomplete.items())
            return f"{self.item}: {checked}, not timed (--no-timing){extra} " \
                   f"[{r.get('board', '?')}]"
        if not t or "skipped" in t:
            return f"{self.item}: not timed ({t.get('skipped', 'timing disabled')})"
        c = t["candidate"]
        b2b = f" x {t['repeat']} back to back" if t.get("repeat", 1) > 1 else ""
        parts = [f"{self.item}: {c['median_ms'] * 1e3:.2f} us (IQR {c['iqr_ms'] * 1e3:.2f}, "
                 f"n={c['n']}{b2b}{_flush_note(t)})"]
        if t.get("tflops"):
            parts.append(f"{t['tflops']:.1f} TFLOP/s")
        if t.get("gbps"):
            parts.append(f"{t['gbps']:.0f} GB/s")
        if t.get("floor_fraction") is not None:
            parts.append(f"{t['floor_fraction']:.0%} of floor")
        for name, b in t.get("baselines", {}).items():
            parts.append(f"{b['speedup']:.2f}x vs {name}" + _regime_ratios(t, name))
        for name, why in (t.get("baselines_missing") or {}).items():
            parts.append(f"{name} not timed ({why.split(';')[0]})")
        if not t.get("converged"):
            parts.append(_noise(t))
        if t.get("suspect"):
            parts.append("SUSPECT: below the physical floor")
        if not r.get("verified"):
            parts.append("unverified (no reference)")
        for name, why in self.guards_incomplete.items():
            parts.append(f"guard {name} incomplete ({why})")
        return ", ".join(parts) + f" [{r.get('board', '?')}]"

    def to_json(self) -> dict:
        return {"item": self.item, "state": self.state, "verdict": self.verdict,
                "summary": self.summary, "timed": self.timed, "not_timed": self.not_timed,
                "daemon": self.daemon, "job_id": self.job_id, "result": self.result}


def _noise(t: dict) -> str:
    """``noise 1.04% (torch.compile.x) > 1%``: the job's relative noise, naming the series
    that kept it from converging when that is a baseline (then the candidate's figure is
    sound and only the ratio is less sure)."""
    by = {k: v for k, v in (t.get("rel_noise_by") or {}).items() if v is not None}
    worst = max(by, key=by.get) if by else None
    who = f" ({worst})" if worst and worst != "candidate" else ""
    noise = t.get("rel_noise")
    shown = "n/a" if noise is None else f"{noise:.2%}"
    target = t.get("rel_noise_target") or 0
    return f"noise {shown}{who} > {target * 100:g}%"


def _regime_ratios(t: dict, baseline: str) -> str:
    """`` (full clock 0.87x, sustained 1.02x; throttled 1980->1680 MHz)`` when the paired
    ratios of the two clock regimes differ by more than 2% (issue 17), else ``""``."""
    if not regimes_differ(t.get("regimes") or {}, baseline):
        return ""
    r = t["regimes"]
    c = t.get("sm_clock_mhz") or {}
    return (f" (full clock {r['full']['baselines'][baseline]['speedup']:.2f}x, sustained "
            f"{r['sustained']['baselines'][baseline]['speedup']:.2f}x"
            + (f"; throttled {c['max']:.0f}->{c['min']:.0f} MHz" if t.get("throttled") else "")
            + ")")


@hookimpl
def tirxh_addoption(parser):
    parser.addoption("--kcoral", default=None, metavar="HOST:PORT",
                     help="KCoral daemon for `tirxh bench` (default: [bench] kcoral, else an "
                          "embedded daemon with the local boards)")
    parser.addoption("--no-timing", action="store_true", default=False,
                     help="correctness on the board only (every seed, the guards that apply), "
                          "nothing timed: an item passes when the board verified its outputs "
                          "(a smoke pass before timing kernels only the simulator has run)")
    parser.addoption("--exec-budget", type=float, default=None, metavar="SECONDS",
                     help="execution budget of each bench job on its board (default: [bench] "
                          "exec_s, else the daemon's 120 s)")
    parser.addoption("--min-rounds", type=int, default=None, metavar="N",
                     help="time at least N paired rounds (KCoral's timing.min_iters): long "
                          "enough for the board to reach its sustained clock, so the result "
                          "reports both clock regimes (an H200 under attention or GEMM load "
                          "throttles within ~20 rounds); the rounds may take --timing-budget")
    parser.addoption("--timing-budget", type=float, default=None, metavar="SECONDS",
                     help="seconds of timed rounds per job (KCoral's timing.budget_s; default "
                          "2 s, 60 s with --min-rounds); must stay below the execution budget")
    parser.addoption("--back-to-back", type=int, default=None, metavar="N",
                     help="each timed sample is N launches in a row, timed together and "
                          "divided (KCoral's timing.repeat): a kernel much shorter than a "
                          "round's host time then keeps the board busy enough to reach its "
                          "sustained clock; with --min-rounds, both regimes for short kernels")
    parser.addoption("--l2-flush", choices=("write", "read", "none"), default=None,
                     help="how KCoral empties the L2 before each timed sample (timing."
                          "l2_flush_by): 'write' (a memset, the default; its dirty lines are "
                          "written back inside the sample's window), 'read' (a read-only sweep: no "
                          "harness traffic in the timed window, as ncu's cache control), or "
                          "'none' (inputs may stay in L2 between samples)")
    parser.addini("bench", "l2_flush", "str", None,
                  "how KCoral empties the L2 before each timed sample when --l2-flush is not "
                  "given: write, read or none (default: KCoral's, write)",
                  choices=("write", "read", "none"))
    parser.addini("bench", "exec_s", "float", None,
                  "execution budget of each bench job on its board, seconds (a hung kernel is "
                  "stopped sooner by the per-launch watchdog)", check=_positive)
    parser.addini("bench", "seeds_before", "int", 2,
                  "correctness runs on fresh seeds before timing (KCoral's seeds guard)",
                  check=_seed_count(1))
    parser.addini("bench", "seeds_after", "int", 2,
                  "correctness runs on fresh seeds after timing", check=_seed_count(0))


def _flush_note(t: dict) -> str:
    """How the L2 was emptied, when not the protocol's default (a memset before each sample):
    times taken under different flushes are not comparable, so the line says so."""
    if t.get("l2_flush") is False:
        return ", no L2 flush"
    by = t.get("l2_flush_by")
    return f", L2 flushed by {by}ing" if by and by != "write" else ""


def _seed_count(least: int):
    def check(v) -> "str | None":
        return None if least <= v <= 8 else f"expected {least} to 8 runs, got {v!r}"
    return check


def _positive(v) -> "str | None":
    return None if v is None or v > 0 else f"expected a positive number of seconds, got {v!r}"


def exec_budget(config) -> "float | None":
    """``--exec-budget``, else ``[bench] exec_s``, else None (the daemon's default)."""
    v = config.getoption("exec_budget")
    if v is None:
        v = config.getini("bench", "exec_s")
    if v is not None and not v > 0:
        raise UsageError(f"--exec-budget {v!r}: expected a positive number of seconds")
    return v


MAX_ROUNDS = 10 ** 6     # KCoral's bound on timing.min_iters / max_iters
MAX_TIMING_S = 600.0     # KCoral's bound on timing.budget_s
MAX_REPEAT = 1000        # KCoral's bound on timing.repeat


def timing_overrides(config) -> dict:
    """The job's timing fields from ``--min-rounds``, ``--timing-budget``, ``--back-to-back``
    and ``--l2-flush`` (else ``[bench] l2_flush``) ({} for none): min_iters N with max_iters
    raised to match, budget_s (60 s by default when rounds are asked for: 2 s would end them
    first), repeat, l2_flush / l2_flush_by. Refused here, not on the board: a count or
    budget outside KCoral's bounds, and a timing budget at or above the job's execution
    budget (the board would kill the job mid-timing and report nothing)."""
    rounds, budget = config.getoption("min_rounds"), config.getoption("timing_budget")
    repeat = config.getoption("back_to_back")
    flush = config.getoption("l2_flush") or config.getini("bench", "l2_flush")
    out: dict = {}
    if flush == "none":
        out["l2_flush"] = False
    elif flush is not None:
        out["l2_flush_by"] = flush
    if repeat is not None:
        if not 1 <= repeat <= MAX_REPEAT:
            raise UsageError(f"--back-to-back {repeat}: expected 1 to {MAX_REPEAT} launches "
                             "per sample")
        out["repeat"] = repeat
    if rounds is not None:
        if not 1 <= rounds <= MAX_ROUNDS:
            raise UsageError(f"--min-rounds {rounds}: expected 1 to {MAX_ROUNDS} rounds")
        out.update(min_iters=rounds, max_iters=max(rounds, 2000))
        budget = 60.0 if budget is None else budget
    if budget is not None:
        if not 0 < budget <= MAX_TIMING_S:
            raise UsageError(f"--timing-budget {budget!r}: expected 0 < seconds <= "
                             f"{MAX_TIMING_S:g}")
        exec_s = exec_budget(config) or 120.0   # the daemon's default execution budget
        if budget >= exec_s:
            raise UsageError(f"--timing-budget {budget:g} s is not below the execution budget "
                             f"of {exec_s:g} s (--exec-budget): the job would be killed while "
                             "timing")
        out["budget_s"] = budget
    return out


@hookimpl
def tirxh_configure(config):
    if config.command == "bench":
        exec_budget(config)  # a bad --exec-budget is a usage error before anything runs
        timing_overrides(config)  # and so is a bad --min-rounds / --timing-budget / --back-to-back


@hookimpl
def tirxh_bench_item(item, compiled, config):
    budget = exec_budget(config)
    client = client_for(config)
    before, after = config.getini("bench", "seeds_before"), config.getini("bench", "seeds_after")
    timing = not config.getoption("no_timing")
    started = time.monotonic()
    job = build_job(compiled, item.suite, item.case, put=client.put_blob,
                    seeds=range(1, before + after + 1), before=before,
                    budgets={"exec_s": budget} if budget else None,
                    timing=timing_overrides(config) or None if timing else {"enabled": False})
    built = time.monotonic()
    timeout = float(config.getini("bench", "timeout_s") or 600.0)
    tty = sys.stderr.isatty()
    last = None
    try:
        for ev in client.submit(job, timeout=timeout):
            last = ev
            if tty:
                pos = f" #{ev['queue_position']}" if ev["state"] == "queued" else ""
                sys.stderr.write(f"\r\x1b[K  {item.name}: {ev['state']}{pos} "
                                 f"{ev['message'][:60]}")
                sys.stderr.flush()
    except KCoralError as e:
        res = BenchResult(item.name, "failed", {"error": bench_error(e)},
                          config.stash.get("kcoral_address", ""), timing_asked=timing)
        config.stash.setdefault("kcoral_results", []).append(res)
        return res
    finally:
        if tty:
            sys.stderr.write("\r\x1b[K")
    if last is None:
        res = BenchResult(item.name, "failed", {"error": {"type": "internal.stream",
                                                          "message": "no events"}},
                          timing_asked=timing)
    else:
        result = dict(last.get("result") or {})
        # where this item's wall time went on the client: the job's inputs, host reference and
        # blob uploads (`build_job`), then the daemon's queue and run (`submit`)
        result["client_s"] = {"build_job": round(built - started, 3),
                              "submit": round(time.monotonic() - built, 3)}
        res = BenchResult(item.name, last["state"], result,
                          config.stash.get("kcoral_address", ""), last["job_id"], timing)
    config.stash.setdefault("kcoral_results", []).append(res)
    return res


@hookimpl
def tirxh_terminal_summary(reporter, exitstatus, config):
    """One line per benchmarked item: median and IQR, TFLOP/s or GB/s, fraction of the floor,
    ratio to each baseline (failures are also listed by the terminal reporter)."""
    results = config.stash.get("kcoral_results")
    if not results:
        return
    reporter.section(f"KCoral ({config.stash.get('kcoral_address', '?')})")
    for r in results:
        reporter.line(r.summary, {"clean": "", "review": "incomplete",
                                  "incomplete": "incomplete"}.get(r.verdict, "failed"))


@hookimpl
def tirxh_unconfigure(config):
    close_clients(config)
