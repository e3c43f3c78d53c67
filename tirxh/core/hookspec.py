"""Hook specifications for tirxh plugins (the plugin contract).

Declarations only, grouped by phase. Hooks are always called with keyword arguments, so an
implementation may accept any subset of a hook's arguments, in any order. A plugin implements a
hook by defining a function of the same name decorated with ``@tirxh.hookimpl`` (from
`tirxh.api`); a function named ``tirxh_*`` with no matching spec is an error at start-up
(``check_pending``).

Each docstring says when the hook is called, what each argument is, what to return, and whether
the hook is *firstresult* (the call stops at the first implementation returning something other
than None, and that value is the result) or *historic* (a plugin registered after the call is
still called, on registration, with the same arguments). Hooks that are neither call every
implementation and collect the non-None results in a list (pluggy's order: later-registered
plugins first, ``tryfirst``/``trylast`` aside).

Order of a run: ``tirxh_addoption`` -> ``tirxh_register_targets`` / ``tirxh_register_instructions``
/ ``tirxh_register_transforms`` -> ``tirxh_configure`` -> ``tirxh_sessionstart`` (then the
terminal's header: ``tirxh_report_header``) ->
``tirxh_collect_file`` per kernel file -> ``tirxh_collection_modifyitems`` ->
``tirxh_collection_finish`` -> per item: ``tirxh_compile``, then ``tirxh_check_item`` (check),
``tirxh_build_item`` (build) or ``tirxh_bench_item`` (bench) -> ``tirxh_sessionfinish`` ->
``tirxh_terminal_summary`` -> ``tirxh_unconfigure``. ``tirxh_report`` receives every event of the
report stream (`tirxh.core.reports`) as it happens; ``tirxh profile`` calls
``tirxh_profile_item`` for its one item. ``tirxh_binding_fidelity`` is asked by the PTX reference
generator, outside any run, and by ``tirxh ptx``. A command a plugin adds
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
    parsed and ``tirx.toml`` is validated. Historic: a plugin registered later is called on
    registration, but by then its options can no longer be parsed.

    :param parser: the `tirxh.core.config.Parser`; ``parser.addoption("--name", ...)`` (argparse's
        arguments; long options only) adds an option to the run commands, ``parser.addini(section,
        key, type, default, help, choices=None, check=None)`` declares a key of a plugin-owned
        ``[section]`` of ``tirx.toml`` (undeclared keys there are errors).
    :return: ignored.
    """


@hookspec(historic=True)
def tirxh_configure(config):
    """Called once the command line and ``tirx.toml`` are parsed and validated and the targets,
    bindings and transforms are collected, before the command runs (historic: a plugin
    registered later, e.g. by another plugin's ``tirxh_configure``, is called on registration).

    :param config: the run's `tirxh.core.config.Config` (options, ``getini``, ``pm``, ``isa``,
        ``targets``, ``transforms``, ``cache``, ``stash`` for per-run plugin state).
        In a worker process of ``tirxh check -n`` it is also called, with ``config.worker`` set
        (``{"id": "gw0"}``; None in the main process): a plugin that writes a report registers
        its writer only where ``config.worker`` is None (`tirxh.core.dist`).
    :return: ignored.
    """


@hookspec
def tirxh_unconfigure(config):
    """Called once at the end of every command, after the last report event (close files here).

    :param config: the run's `tirxh.core.config.Config`.
    :return: ignored.
    """


@hookspec
def tirxh_sessionstart(session):
    """Called after configuration, before collection and before the ``session_start`` report
    event.

    :param session: the `tirxh.core.nodes.Session` (``session.config``, ``session.command``:
        ``check``, ``bench``, ``build`` or ``profile``).
    :return: ignored.
    """


@hookspec
def tirxh_sessionfinish(session, exitstatus):
    """Called after the last item ran, before the ``session_finish`` report event.

    :param session: the `tirxh.core.nodes.Session` (``items``, ``collect_reports``,
        ``shouldstop``).
    :param exitstatus: the `tirxh.core.main.ExitCode` the run will return.
    :return: ignored.
    """


@hookspec(historic=True)
def tirxh_register_targets(registry):
    """Add compilation targets; called while the run is configured (historic, so a plugin
    registered late still contributes).

    :param registry: a `tirxh.core.targets.TargetRegistry`; call ``registry.add(Target(...),
        owner=NAME)``. A target name registered twice is an error naming both owners.
    :return: ignored.
    """


@hookspec(historic=True)
def tirxh_register_instructions(isa):
    """Add PTX instruction bindings; called while the run is configured (historic).

    :param isa: the `tirxh.core.bindings.InstructionSet`; call ``isa.extend([...],
        owner=NAME)``. A binding name registered twice is an error naming both plugins.
    :return: ignored.
    """


@hookspec(historic=True)
def tirxh_register_transforms(registry):
    """Add IR transforms to the compile pipeline's ``transform`` stage; called while the run is
    configured (historic).

    :param registry: a `tirxh.core.transforms.TransformRegistry`; call
        ``registry.add(Transform(name, apply, doc=..., default=False), owner=NAME)``. A default
        transform is applied to every build; any other only to builds that name it
        (``compile_kernel(..., transforms=[name])``). A name registered twice is an error
        naming both owners.
    :return: ignored.
    """


@hookspec(historic=True)
def tirxh_add_commands(commands):
    """Contribute whole commands (``tirxh zoo``, ``tirxh mcp``, ...); called once at start-up,
    after ``tirxh_addoption`` and before the command line is parsed (historic: a plugin
    registered after parsing is too late for its commands to be parsed). ``tirxh --help``
    loads the plugins to list them.

    :param commands: the `tirxh.core.commands.CommandRegistry`; call ``commands.add(name, help,
        run, configure=None, description="")``. ``configure(parser)`` adds the command's own
        arguments to its `argparse.ArgumentParser` (every command also gets ``-p``,
        ``--rootdir``, ``--json`` and ``--trace-config``); ``run(config)`` runs the command after
        ``tirxh_configure`` and returns an `ExitCode`, then ``tirxh_unconfigure`` is called. A
        name that is a built-in command or is registered twice is a plugin validation error
        naming both owners.
    :return: ignored.
    """


# -------------------------------------------------------------------------------------------------
# collection
# -------------------------------------------------------------------------------------------------

@hookspec(firstresult=True)
def tirxh_collect_file(path, parent):
    """Return a collector node for a kernel file, or None to decline (firstresult: stops at the
    first non-None).

    Called once per file matched by the project's ``kernels`` globs (or named on the command
    line), in sorted order.

    :param path: the file, a `pathlib.Path`.
    :param parent: the `tirxh.core.nodes.Session` node the collector hangs under.
    :return: a `tirxh.core.nodes.Module` (or a subclass) whose ``collect()`` returns items, or
        None. The built-in ``collect`` plugin answers for ``*.py`` files (trylast, so a plugin
        may take over other file types or specific files).
    """


@hookspec
def tirxh_collection_modifyitems(session, config, items):
    """Filter or reorder collected items in place; called after node-id and ``-k`` selection.

    :param session: the `tirxh.core.nodes.Session`.
    :param config: the run's `tirxh.core.config.Config`.
    :param items: the list of `tirxh.core.nodes.KernelItem` to run; modify it in place (a
        removed item is not run and not reported).
    :return: ignored.
    """


@hookspec
def tirxh_collection_finish(session):
    """Called once collection, selection and ``tirxh_collection_modifyitems`` are done, before
    the first item runs.

    :param session: the `tirxh.core.nodes.Session`: ``items`` (selected), ``deselected``,
        ``collect_reports`` (one `tirxh.core.reports.CollectReport` per file).
    :return: ignored.
    """


# -------------------------------------------------------------------------------------------------
# compile
# -------------------------------------------------------------------------------------------------

@hookspec(firstresult=True)
def tirxh_compile(item, target, config):
    """Compile one item for one target (firstresult: the first non-None result is used).

    Called once per item by every run command, before its check/build/bench phase. The built-in
    ``compile`` plugin (trylast) runs the compile pipeline (`tirxh.core.compiler.Pipeline`) with
    the run's instruction set, cache and transforms; a plugin that wants a different build
    should add an IR transform (``tirxh_register_transforms``) rather than answer here.

    :param item: the `tirxh.core.nodes.KernelItem` (``kernel``, ``consts``, ``suite``, ``case``).
    :param target: the target name (``"sm_90a"``), the same as ``item.target``.
    :param config: the run's `tirxh.core.config.Config`.
    :return: a `tirxh.core.compiler.CompiledKernel`, or None to let the next plugin answer.
        Raise `CompileError`/`TraceError` for the user's mistakes (the item fails at their line).
    """


# -------------------------------------------------------------------------------------------------
# check
# -------------------------------------------------------------------------------------------------

@hookspec
def tirxh_check_item(item, compiled, config):
    """Run an analyzer on a compiled item (``tirxh check``).

    Every registered analyzer is called and each answer kept. The runner calls each
    implementation separately (in pluggy's order) so that an analyzer that raises is reported as
    that plugin's ``error`` result without losing the others' results; for the same reason
    wrappers of this hook are not supported.

    :param item: the `tirxh.core.nodes.KernelItem` (``kernel``, ``suite``, ``case``, ``consts``,
        ``target``; ``suite``/``case`` are None for a compile-only kernel).
    :param compiled: the `tirxh.core.compiler.CompiledKernel` from ``tirxh_compile``.
    :param config: the run's `tirxh.core.config.Config`.
    :return: a `tirxh.core.findings.AnalyzerResult` (or a list of them) with a verdict
        (``clean``/``review``/``incomplete``/``error``) and findings, or None when the analyzer
        does not apply to this item.
    """


# -------------------------------------------------------------------------------------------------
# build
# -------------------------------------------------------------------------------------------------

@hookspec
def tirxh_build_item(item, compiled, config, outdir):
    """Add artifacts to ``tirxh build``'s directory of one item.

    Called for every built item after the core wrote ``kernel.ptx``, ``kernel.cubin``,
    ``kernel.sass``, ``resources.json`` and ``launch.json``. Every implementation is called,
    each separately: one that raises makes the item's build phase an ``error`` naming the
    plugin, without losing the other files.

    :param item: the `tirxh.core.nodes.KernelItem`.
    :param compiled: the `tirxh.core.compiler.CompiledKernel` from ``tirxh_compile``.
    :param config: the run's `tirxh.core.config.Config`.
    :param outdir: the item's build directory (a `pathlib.Path`, already created); write only
        inside it.
    :return: the names of the files written (relative to `outdir`), listed in the build
        report; or None.
    """


# -------------------------------------------------------------------------------------------------
# bench
# -------------------------------------------------------------------------------------------------

@hookspec(firstresult=True)
def tirxh_bench_item(item, compiled, config):
    """Time one compiled item through KCoral (firstresult: the first non-None result is used).

    Called by ``tirxh bench`` for items that have a `Suite`; no answer at all is reported as an
    item error.

    :param item: the `tirxh.core.nodes.KernelItem` (with ``suite`` and ``case``).
    :param compiled: the `tirxh.core.compiler.CompiledKernel` from ``tirxh_compile``.
    :param config: the run's `tirxh.core.config.Config` (``[bench]`` keys through ``getini``).
    :return: a result object with ``to_json()`` (a JSON-serializable dict, embedded in the item
        report's ``bench`` phase) and a ``verdict`` attribute (one of
        `tirxh.core.findings.VERDICTS`): ``error`` fails the item, ``incomplete`` marks it
        incomplete; an optional ``summary`` text is shown for a result that did not pass.
        ``timed = False`` says the item was not timed (a board that does not time, such as the
        sim board; a refusal; no daemon), with the reason in ``not_timed``: the item is then
        incomplete with ``not timed (<reason>)`` (listed under NOT TIMED, not as an analysis
        that could not model something), and a ``tirxh bench`` that timed none of the items it
        was asked to time exits 1 with the reasons.
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
    :param config: the run's `tirxh.core.config.Config` (the profilers' options).
    :param request: a dict: ``out`` (a `pathlib.Path` directory where artifacts are written),
        and ``ncu`` (None or ``{"set": "basic"|"full", "metrics": [...]}``), ``sanitizer`` (None
        or ``"memcheck"|"racecheck"|"synccheck"|"initcheck"``), ``iket`` (None or
        ``{"capacity": int}``), which a caller may set to ask programmatically. ``tirxh profile``
        leaves those three None: each profiler reads its own command-line options (``--ncu``,
        ``--sanitizer``, ``--iket``) from `config`, and a non-None request entry overrides them.
    :return: an object with ``to_json()`` (a JSON-serializable dict), ``text`` (the terminal
        table) and ``verdict`` (one of `tirxh.core.findings.VERDICTS`, or None for measurements
        only), or a list of them, or None when nothing in `request` is this plugin's.
    """


# -------------------------------------------------------------------------------------------------
# reporting
# -------------------------------------------------------------------------------------------------

@hookspec
def tirxh_report(report, config):
    """Called for each event of the run's report stream, in order, as it happens.

    The terminal reporter, ``--report-log``, ``--json``, ``--junitxml`` and ``--sarif`` are all
    implementations of this hook.

    :param report: a `tirxh.core.reports` event: `SessionStart`, `CollectReport` (one per file),
        `ItemReport` (one per item run) or `SessionFinish`; ``report.event`` names which, and
        ``report.to_json()`` gives the ``tirxh.report/1`` object.
    :param config: the run's `tirxh.core.config.Config`.
    :return: ignored.
    """


@hookspec
def tirxh_progress(config, finished, total, waiting_on, running):
    """Called by ``-n`` while the report stream is held back: reports come in collection order,
    so an item that is still running holds back every report after it; at most every
    ``--progress-every`` seconds.

    :param config: the run's `tirxh.core.config.Config`.
    :param finished: items finished so far, reported or held back (an int).
    :param total: items in the run.
    :param waiting_on: the node id of the item the stream waits on.
    :param running: ``(worker id, node id, seconds running)`` for each item in flight.
    :return: ignored.
    """


@hookspec
def tirxh_report_header(config, start_path):
    """Add lines to the terminal's session header (as ``pytest_report_header``); called once,
    after tirxh's own header lines, when the terminal reporter writes the header (not with
    ``-q`` or ``--json``).

    :param config: the run's `tirxh.core.config.Config`.
    :param start_path: the project's root directory (a `pathlib.Path`).
    :return: a string or a list of strings, one line each (earlier-registered plugins' lines
        come last, as pytest orders them), or None.
    """


@hookspec
def tirxh_terminal_summary(reporter, exitstatus, config):
    """Add a section to the terminal summary at the end of a run, before the final summary
    line; not called when the terminal reporter is blocked or with ``--json``.

    :param reporter: the terminal reporter plugin: ``reporter.section(title)``,
        ``reporter.line(text)``, ``reporter.verbosity``.
    :param exitstatus: the `tirxh.core.main.ExitCode` the run will return.
    :param config: the run's `tirxh.core.config.Config`.
    :return: ignored.
    """


# -------------------------------------------------------------------------------------------------
# documentation
# -------------------------------------------------------------------------------------------------

@hookspec(firstresult=True)
def tirxh_binding_fidelity(binding):
    """How faithfully a simulator models one instruction binding, for the PTX reference
    (firstresult: the first non-None answer is used).

    Asked by ``python -m tirxh.core.reference`` for every binding while it writes
    docs/PTX_REFERENCE.md, and by ``tirxh ptx`` for the bindings it describes; the numsim plugin
    answers from its semantics table (the one source of truth for numsim's fidelity).

    :param binding: a `tirxh.core.bindings.Binding`.
    :return: ``(fidelity_class, note)`` (``"modeled"``, ``"representative"``,
        ``"ordering_only"`` or ``"rejected"``, and a short text), or None when this plugin has
        no opinion.
    """
