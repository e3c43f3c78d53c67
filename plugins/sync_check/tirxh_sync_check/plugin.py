"""The tirxh plugin (entry point ``sync_check``): `tirxh check` runs synccheck and racecheck.

Both analyses run on every small case of a kernel by default (a race or a hang may appear at
one problem size only); ``cases = "smallest"`` restricts them to the small case with the fewest
elements by its integer parameters (a simulated launch with an event trace is the expensive
part: ~9x numsim's own run). ``exclude_tags`` leaves the small cases carrying one of those tags
to another run (the zoo: KDA's backward recurrence costs 2 minutes of sync_check per case on 2
cores, so `tirxh check` over the zoo checks its smallest and tests/zoo the rest). Other items
get None (not applicable). ``[sync_check]`` keys in ``tirx.toml``: ``enabled``, ``max_states``
(the explorer's bound; hitting it gives ``incomplete``), ``cases`` (``"small"`` or
``"smallest"``), ``exclude_tags``, ``seed``.
"""

from __future__ import annotations

from tirxh.api import Finding, hookimpl, ini_value

from .analyze import check_kernel
from .report import format_finding

SECTION = "sync_check"


@hookimpl
def tirxh_addoption(parser):
    parser.addini(SECTION, "enabled", "bool", True, "run synccheck and racecheck in `tirxh check`")
    parser.addini(SECTION, "max_states", "int", 200_000,
                  "bound on the interleaving explorer's states (beyond it: incomplete)")
    parser.addini(SECTION, "cases", "str", "small",
                  "which cases to check: every small case, or only each kernel's smallest",
                  choices=("small", "smallest"))
    parser.addini(SECTION, "exclude_tags", "list[str]", [],
                  "small cases with any of these tags are not analyzed (left to another run)")
    parser.addini(SECTION, "seed", "int", 0, "seed for suite.make_inputs")


def _opt(config, key, default):
    return ini_value(config, SECTION, key, default)


def smallest_case(suite):
    """The small case with the least work by its integer parameters (first on ties)."""
    small = [c for c in suite.cases if c.small] or list(suite.cases)

    def size(c):
        n = 1
        for v in c.params.values():
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                n *= v
        return n
    return min(small, key=size) if small else None


@hookimpl
def tirxh_check_item(item, compiled, config):
    suite, case = getattr(item, "suite", None), getattr(item, "case", None)
    if suite is None or case is None or not _opt(config, "enabled", True):
        return None
    if not case.small:
        return None
    if _opt(config, "cases", "small") == "smallest" and smallest_case(suite) is not case:
        return None
    if set(getattr(case, "tags", ()) or ()) & set(_opt(config, "exclude_tags", []) or ()):
        return None
    inputs = suite.make_inputs(case, int(_opt(config, "seed", 0)))
    target = compiled if compiled is not None and getattr(compiled, "ir", None) is not None \
        else suite.kernel
    consts = dict(getattr(item, "consts", None) or suite.consts(case))
    sync, race = check_kernel(target, inputs, consts=consts, grid=suite.grid(case),
                              max_states=int(_opt(config, "max_states", 200_000)))
    return [sync, race]


_SHOWN: dict = {}  # id(config) -> [(item id, Finding)] for the terminal summary
_ANALYZERS = ("synccheck", "racecheck")


@hookimpl
def tirxh_report(report, config):
    """Findings for the summary, from the reports (not from `tirxh_check_item`): with
    ``tirxh check -n`` the check runs in a worker process and only reports reach this one."""
    if report.event != "item_report":
        return
    shown = _SHOWN.setdefault(id(config), [])
    shown.extend((report.nodeid, Finding.from_json(f)) for r in report.results()
                 if r["analyzer"] in _ANALYZERS
                 for f in r["findings"] if f["severity"] != "incomplete")


@hookimpl
def tirxh_terminal_summary(reporter, exitstatus, config):
    """Each synccheck/racecheck finding with the source lines around it and its witness."""
    shown = _SHOWN.pop(id(config), [])
    if not shown:
        return
    reporter.section("sync_check findings")
    for nodeid, f in shown:
        reporter.line(nodeid)
        for text in format_finding(f).splitlines():
            reporter.line("  " + text)
