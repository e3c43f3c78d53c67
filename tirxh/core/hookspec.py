"""Hook specifications for tirxh plugins (the plugin contract).

Declarations only, grouped by phase. Hooks are always called with keyword arguments. A plugin
implements a hook by defining a function of the same name decorated with ``@tirxh.hookimpl``; a
function named ``tirxh_*`` with no matching spec is an error at start-up (``check_pending``).
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("tirxh")


# -------------------------------------------------------------------------------------------------
# configuration
# -------------------------------------------------------------------------------------------------

@hookspec(historic=True)
def tirxh_addoption(parser):
    """Register command-line options and ``tirx.toml`` keys.

    Called once per plugin when it is registered (historic: late plugins are called too).

    :param parser: the `tirxh.core.config.Parser`; ``parser.addoption(...)`` adds a CLI option,
        ``parser.addini(section, key, type, default, help)`` declares a key in a plugin-owned
        ``[section]`` of ``tirx.toml`` (undeclared keys there are errors).
    """


@hookspec(historic=True)
def tirxh_configure(config):
    """Called after command-line and ``tirx.toml`` parsing, before collection (historic).

    :param config: the `tirxh.core.config.Config`.
    """


@hookspec
def tirxh_unconfigure(config):
    """Called before the process exits, after the last report."""


@hookspec(historic=True)
def tirxh_register_targets(registry):
    """Add compilation targets.

    :param registry: a `tirxh.core.targets.TargetRegistry`; call ``registry.add(Target(...))``.
    Historic, so a plugin registered late still contributes.
    """


@hookspec(historic=True)
def tirxh_register_instructions(isa):
    """Add PTX instruction bindings.

    :param isa: the `tirxh.core.bindings.InstructionSet`; call ``isa.extend([...], owner=name)``.
    A binding name registered twice is an error naming both plugins. Historic.
    """


# -------------------------------------------------------------------------------------------------
# collection
# -------------------------------------------------------------------------------------------------

@hookspec(firstresult=True)
def tirxh_collect_file(path, parent):
    """Return a collector node for a kernel file, or None to decline (stops at first non-None).

    :param path: `pathlib.Path` of a file matched by the project's ``kernels`` globs.
    :param parent: the session node.
    """


@hookspec
def tirxh_collection_modifyitems(session, config, items):
    """Filter or reorder collected items in place, after ``-k`` selection.

    :param items: list of `tirxh.core.nodes.KernelItem`.
    """


# -------------------------------------------------------------------------------------------------
# compile
# -------------------------------------------------------------------------------------------------

@hookspec(firstresult=True)
def tirxh_compile(item, target, config):
    """Compile one item for one target; return a `tirxh.core.compiler.CompiledKernel`.

    Stops at the first non-None result; the built-in compile plugin implements it with the
    tracer, the PTX emitter and nvJitLink. Raise `CompileError`/`TraceError` for user mistakes.
    """


# -------------------------------------------------------------------------------------------------
# check
# -------------------------------------------------------------------------------------------------

@hookspec
def tirxh_check_item(item, compiled, config):
    """Run an analyzer on a compiled item; return an `AnalyzerResult` or None (not applicable).

    Every registered analyzer is called (not firstresult); each returns its own verdict
    (``clean``/``review``/``incomplete``/``error``) and findings.
    """


# -------------------------------------------------------------------------------------------------
# bench
# -------------------------------------------------------------------------------------------------

@hookspec(firstresult=True)
def tirxh_bench_item(item, compiled, config):
    """Time one compiled item (through KCoral); return a `BenchResult` (first non-None wins)."""


# -------------------------------------------------------------------------------------------------
# reporting
# -------------------------------------------------------------------------------------------------

@hookspec
def tirxh_report(report, config):
    """One event of the run's report stream (a `tirxh.core.reports` event), in order.

    The terminal reporter, ``--report-log``, ``--junitxml`` and ``--sarif`` consume these.
    """


@hookspec
def tirxh_terminal_summary(reporter, exitstatus, config):
    """Add a section to the terminal summary at the end of a run."""
