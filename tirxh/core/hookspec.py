"""Hook specifications for tirxh plugins (the plugin contract).

Declarations only, grouped by phase. Hooks are always called with keyword arguments. A plugin
implements a hook by defining a function of the same name decorated with ``@tirxh.hookimpl``; a
function named ``tirxh_*`` with no matching spec is an error at start-up (``check_pending``).

Order of a run: ``tirxh_addoption`` -> ``tirxh_register_targets`` / ``tirxh_register_instructions``
-> ``tirxh_configure`` -> ``tirxh_sessionstart`` -> ``tirxh_collect_file`` per kernel file ->
``tirxh_collection_modifyitems`` -> ``tirxh_collection_finish`` -> per item: ``tirxh_compile``, then
``tirxh_check_item`` (check) or ``tirxh_bench_item`` (bench) -> ``tirxh_sessionfinish`` ->
``tirxh_terminal_summary`` -> ``tirxh_unconfigure``. ``tirxh_report`` receives every event of the
report stream (`tirxh.core.reports`) as it happens. A command a plugin adds
(``tirxh_add_commands``, collected after ``tirxh_addoption``) runs after ``tirxh_configure`` in
place of the session, then ``tirxh_unconfigure``.
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

    Called once at start-up, after the plugins are registered and before the command line is
    parsed and ``tirx.toml`` is validated (historic: a plugin registered later is called on
    registration, but by then its options can no longer be parsed).

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
    """Called once at the end of every command, after the last report event (close files here).
    """


@hookspec
def tirxh_sessionstart(session):
    """Called after configuration, before collection.

    :param session: the `tirxh.core.nodes.Session` (``session.config``, ``session.command``).
    """


@hookspec
def tirxh_sessionfinish(session, exitstatus):
    """Called after the last item ran, before the final report event is sent.

    :param exitstatus: the `tirxh.core.main.ExitCode` the run will return.
    """


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


@hookspec(historic=True)
def tirxh_add_commands(commands):
    """Contribute whole commands (``tirxh zoo``, ``tirxh mcp``, ...).

    Called once at start-up, after ``tirxh_addoption`` and before the command line is parsed
    (historic, like ``tirxh_addoption``: a plugin registered after parsing is too late for its
    commands to be parsed).

    :param commands: the `tirxh.core.commands.CommandRegistry`; call ``commands.add(name, help,
        run, configure=None, description="")``. ``configure(parser)`` adds the command's own
        arguments to its `argparse.ArgumentParser` (every command also gets ``-p``,
        ``--rootdir``, ``--json`` and ``--trace-config``); ``run(config)`` runs it after
        ``tirxh_configure`` and returns an exit code. A name that is a built-in command or is
        registered twice is a plugin validation error naming both owners.
    """


# -------------------------------------------------------------------------------------------------
# collection
# -------------------------------------------------------------------------------------------------

@hookspec(firstresult=True)
def tirxh_collect_file(path, parent):
    """Return a collector node for a kernel file, or None to decline (stops at first non-None).

    :param path: `pathlib.Path` of a file matched by the project's ``kernels`` globs.
    :param parent: the session node.
    :return: a `tirxh.core.nodes.Module` (or subclass) whose ``collect()`` returns items. The
        built-in ``collect`` plugin answers for ``*.py`` files (trylast, so a plugin may take over
        other file types or specific files).
    """


@hookspec
def tirxh_collection_modifyitems(session, config, items):
    """Filter or reorder collected items in place, after ``-k`` selection.

    :param items: list of `tirxh.core.nodes.KernelItem`.
    """


@hookspec
def tirxh_collection_finish(session):
    """Called once collection, ``-k`` selection and ``tirxh_collection_modifyitems`` are done.

    :param session: ``session.items`` (selected), ``session.deselected``,
        ``session.collect_reports``.
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
    (``clean``/``review``/``incomplete``/``error``) and findings. The runner calls each
    implementation separately (in pluggy's order) so that an analyzer that raises is reported as
    that plugin's ``error`` result without losing the others' results; for the same reason
    wrappers of this hook are not supported.

    :param item: the `tirxh.core.nodes.KernelItem` (``.kernel``, ``.suite``, ``.case``,
        ``.consts``, ``.target``).
    :param compiled: the `tirxh.core.compiler.CompiledKernel` from ``tirxh_compile``.
    :return: a `tirxh.core.findings.AnalyzerResult`, or None when the analyzer does not apply.
    """


# -------------------------------------------------------------------------------------------------
# bench
# -------------------------------------------------------------------------------------------------

@hookspec(firstresult=True)
def tirxh_bench_item(item, compiled, config):
    """Time one compiled item (through KCoral); return a `BenchResult` (first non-None wins).

    Called by ``tirxh bench`` for items that have a `Suite`. The result must have ``to_json()``
    (a JSON-serializable dict, embedded in the item report's ``bench`` phase) and should have a
    ``verdict`` attribute (one of `tirxh.core.findings.VERDICTS`): ``error`` fails the item,
    ``incomplete`` marks it incomplete. No answer at all is reported as an item error.
    """


# -------------------------------------------------------------------------------------------------
# profile
# -------------------------------------------------------------------------------------------------

@hookspec
def tirxh_profile_item(item, compiled, config, request):
    """Profile one compiled item through KCoral (``tirxh profile NODEID ...``).

    Every implementation is called; each handles the parts of `request` it owns and returns None
    for the rest (the ncu_profile plugin: ``ncu`` and ``sanitizer``; the iket plugin: ``iket``).

    :param item: the `tirxh.core.nodes.KernelItem` (needs a suite and case, as for bench).
    :param compiled: the normal build's `tirxh.core.compiler.CompiledKernel`.
    :param request: a dict: ``out`` (a `pathlib.Path` directory where artifacts are written),
        and ``ncu`` (None or ``{"set": "basic"|"full", "metrics": [...]}``), ``sanitizer`` (None
        or ``"memcheck"|"racecheck"|"synccheck"|"initcheck"``), ``iket`` (None or
        ``{"capacity": int}``), which a caller may set to ask programmatically. ``tirxh profile``
        leaves those three None: each profiler reads its own command-line options (``--ncu``,
        ``--sanitizer``, ``--iket``) from `config`, and a non-None request entry overrides them.
    :return: an object with ``to_json()`` (a JSON-serializable dict), ``text`` (the terminal
        table) and ``verdict`` (one of `tirxh.core.findings.VERDICTS`, or None for measurements
        only), or None when nothing in `request` is this plugin's.
    """


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
    """Add a section to the terminal summary at the end of a run.

    :param reporter: the terminal reporter plugin (``reporter.section(title)``,
        ``reporter.line(text)``); not called when the terminal reporter is blocked or quiet.
    """


# -------------------------------------------------------------------------------------------------
# documentation
# -------------------------------------------------------------------------------------------------

@hookspec(firstresult=True)
def tirxh_binding_fidelity(binding):
    """How faithfully a simulator models one instruction binding, for the PTX reference
    (firstresult: the first non-None answer is used).

    Asked by ``python -m tirxh.core.reference`` for every binding while it writes
    docs/PTX_REFERENCE.md; the numsim plugin answers from its semantics table (the one source
    of truth for numsim's fidelity).

    :param binding: a `tirxh.core.bindings.Binding`.
    :return: ``(fidelity_class, note)`` (``"modeled"``, ``"representative"``,
        ``"ordering_only"`` or ``"rejected"``, and a short text), or None when this plugin has
        no opinion.
    """
