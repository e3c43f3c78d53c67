"""The ``tirxh`` command line: ``main(argv) -> int``.

Start-up follows pytest's order: a pre-scan of ``argv`` for ``-p`` and ``--rootdir`` -> the
project's ``tirx.toml`` is found and parsed -> plugins are loaded (built-ins, entry points,
``tirxconf.py``, ``-p``) -> plugins add options and ``tirx.toml`` keys (``tirxh_addoption``) ->
the full command line is parsed -> ``check_pending()`` -> ``tirx.toml`` is validated -> targets and
instruction bindings are collected -> ``tirxh_configure`` -> the command runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

from .. import __version__
from .config import (CONFTEST_FILE, Config, Parser, collect_plugin_toolset, declare_core_ini,
                     find_rootdir, load_toml, loaded_distributions, validate)
from .dist import numprocesses
from .errors import UsageError
from .irprint import format_kernel
from .keywords import compile_expression
from .main import ExitCode, run_items, select_one, wrap_session
from .nodes import Session
from .pluginmanager import (AUTOLOAD_ENV, PluginValidationError, build_plugin_manager,
                            installed_plugins)
from .profile import profile_session
from .reports import SCHEMA
from .runner import compile_item
from .sass_phases import format_phases, phases
from .scaffold import init_project

RUN_COMMANDS = ("check", "bench", "build")
# commands with -n; bench has it only to refuse it with the reason (see `_check_numprocesses`)
PARALLEL_COMMANDS = ("check", "bench")
COMMANDS = RUN_COMMANDS + ("show", "profile", "plugins", "init")
SHOW_KINDS = ("ir", "ptx", "sass", "resources", "phases")


class _ArgumentParser(argparse.ArgumentParser):
    """argparse that raises `UsageError` (exit 4) instead of exiting with status 2."""

    def error(self, message):
        raise UsageError(f"{self.prog}: {message}")


def _prescan(argv: list) -> dict:
    """``-p``/``--rootdir``/command, before plugins can add options (pytest does the same)."""
    out = {"plugins": [], "blocked": [], "rootdir": None, "command": None}
    it = iter(range(len(argv)))
    for i in it:
        a = argv[i]
        val = None
        if a == "-p" and i + 1 < len(argv):
            val = argv[i + 1]
            next(it, None)
        elif a.startswith("-p") and not a.startswith("--") and len(a) > 2:
            val = a[2:]
        elif a == "--rootdir" and i + 1 < len(argv):
            out["rootdir"] = argv[i + 1]
            next(it, None)
        elif a.startswith("--rootdir="):
            out["rootdir"] = a.split("=", 1)[1]
        elif out["command"] is None and not a.startswith("-") and a in COMMANDS:
            out["command"] = a
        if val is not None:
            if val.startswith("no:"):
                out["blocked"].append(val[3:])
            else:
                out["plugins"].append(val)
    return out


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-p", dest="plugins", action="append", default=[], metavar="NAME",
                   help="load plugin NAME (entry point or module); -p no:NAME blocks it")
    p.add_argument("--rootdir", metavar="DIR",
                   help="project directory (default: nearest tirx.toml upward from cwd)")
    p.add_argument("--json", action="store_true",
                   help="write one JSON document (schema tirxh.report/1) to stdout")
    p.add_argument("--trace-config", action="store_true",
                   help="list every plugin, where it came from and its hooks, before running")


def _run_options(p: argparse.ArgumentParser, parser) -> None:
    p.add_argument("--target", action="append", default=None, metavar="SM",
                   help="build for these targets instead of [project] targets (repeat or "
                        "comma-separate)")
    p.add_argument("--no-cache", action="store_true", help="ignore the artifact cache")
    p.add_argument("-q", "--quiet", action="count", default=0, help="less output")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more output")
    p.add_argument("--tb", choices=("short", "long"), default="short",
                   help="errors in your kernels and suites: short (your line and the cause, the "
                        "default) or long (the full traceback; -v implies it)")
    p.add_argument("--color", choices=("auto", "yes", "no"), default="auto",
                   help="colour terminal output (auto: only on a TTY without NO_COLOR)")
    group = p.add_argument_group("options added by plugins") if parser.options else None
    for names, kwargs in parser.options:
        try:
            group.add_argument(*names, **kwargs)
        except argparse.ArgumentError as e:
            raise UsageError(f"a plugin's option {names[0]} conflicts: {e}") from None


def build_argparser(parser, commands=()) -> argparse.ArgumentParser:
    """The full command line; `parser` carries the options plugins added, `commands` the
    commands they contributed (`tirxh.core.commands.Command`)."""
    ap = _ArgumentParser(prog="tirxh", description="A compiler harness for TIRx GPU kernels.")
    ap.add_argument("--version", action="version", version=f"tirxh {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    helps = {"check": "compile every item and run every analyzer",
             "bench": "compile and time every item with a Suite (through KCoral)",
             "build": "write PTX, cubin, SASS and resource reports into the build directory"}
    for name in RUN_COMMANDS:
        p = sub.add_parser(name, help=helps[name], description=helps[name])
        _common(p)
        _run_options(p, parser)
        p.add_argument("paths", nargs="*", metavar="PATH_OR_NODEID",
                       help="kernel files, directories or node ids (default: [project] kernels)")
        p.add_argument("-k", dest="keyword", metavar="EXPR",
                       help="select items by name expression (and/or/not, substrings)")
        p.add_argument("--collect-only", action="store_true", help="list items; run nothing")
        p.add_argument("-x", "--exitfirst", action="store_true",
                       help="stop after the first failed item")
        if name in PARALLEL_COMMANDS:
            p.add_argument("-n", "--numprocesses", default="0", metavar="N",
                           help="run items in N worker processes ('auto': one per usable CPU; "
                                "default 0: in this process); the report is a serial run's"
                           + ("" if name == "check" else "; `tirxh bench` refuses it (a "
                              "board runs one job at a time)"))
            p.add_argument("--progress-every", type=nonnegative_seconds, default=60.0,
                           metavar="S",
                           help="with -n: while the report waits on an item still running, "
                                "say on stderr how many items finished and what is running, "
                                "at most every S seconds (default 60; 0: never)")
        if name == "build":
            p.add_argument("--builddir", metavar="DIR",
                           help="output directory (default: [build] builddir)")
    p = sub.add_parser("show", help="print one artifact of one item",
                       description="print the IR, PTX, SASS, resources or SASS phases (the "
                                   "code between two waits for other threads: what each "
                                   "issues, which source lines made it) of one item")
    _common(p)
    _run_options(p, parser)
    p.add_argument("nodeid", metavar="NODEID", help="path::kernel[case]@target (or a unique "
                                                    "prefix)")
    g = p.add_mutually_exclusive_group(required=True)
    for kind in SHOW_KINDS:
        g.add_argument(f"--{kind}", dest="kind", action="store_const", const=kind)
    p = sub.add_parser("profile", help="profile one item through KCoral (profiler plugins)",
                       description="run one item under the profilers the options ask for "
                                   "(--ncu, --sanitizer TOOL, --iket: added by plugins)")
    _common(p)
    _run_options(p, parser)
    p.add_argument("nodeid", metavar="NODEID", help="path::kernel[case]@target (or a unique "
                                                    "prefix)")
    p.add_argument("--out", default="profile_out", metavar="DIR",
                   help="directory for the returned artifacts (default profile_out)")
    p.add_argument("--json-file", metavar="FILE", help="also write the reports as JSON")
    p = sub.add_parser("plugins", help="list plugins, their distributions and hooks")
    _common(p)
    p = sub.add_parser("init", help="write a starter project that checks clean")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--json", action="store_true", help="report the files written as JSON")
    p.add_argument("--force", action="store_true", help="overwrite existing files")
    for cmd in sorted(commands, key=lambda c: c.name):  # pluggy's call order is LIFO: sort
        if cmd.name in COMMANDS:
            raise PluginValidationError(cmd.owner, f"command {cmd.name!r} (from {cmd.owner}) is "
                                                   f"a built-in tirxh command")
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.description)
        _common(p)
        if cmd.configure is not None:
            cmd.configure(p)
    return ap


# -------------------------------------------------------------------------------------------------
# start-up
# -------------------------------------------------------------------------------------------------

def configure(argv: list, worker: "dict | None" = None):
    """Everything up to ``tirxh_configure``; returns the `Config` (see module docstring).

    `worker`: set in a worker process of ``-n`` (`tirxh.core.worker`), as `Config.worker`."""
    rootdir, inipath, pm = _load_plugins(argv)
    data = load_toml(inipath) if inipath else {}
    parser = Parser()
    declare_core_ini(parser)
    pm.hook.tirxh_addoption.call_historic(kwargs={"parser": parser})
    ns = build_argparser(parser, pm.commands()).parse_args(argv)
    if ns.command is None:
        raise UsageError("no command given; try `tirxh check` (or `tirxh --help`)")
    if getattr(ns, "target", None):
        ns.target = [t for arg in ns.target for t in arg.split(",") if t]
    pm.check_pending()
    toolset = collect_plugin_toolset(pm)
    ini = validate(data, parser, inipath, ignore_sections=pm.blocked_names | _unloaded(pm, data),
                   targets=toolset[1], loaded=loaded_distributions(pm))
    config = Config(ns, pm, rootdir, inipath, ini, parser, ns.command)
    config.args = list(argv)
    config.worker = worker
    config.setup_toolset(toolset)
    if getattr(ns, "keyword", None):
        compile_expression(ns.keyword)  # a syntax error is a usage error before any work
    _check_numprocesses(ns)
    pm.hook.tirxh_configure.call_historic(kwargs={"config": config})
    if getattr(ns, "trace_config", False) and getattr(ns, "json", False):
        # stdout carries the JSON document, so the plugin table goes to stderr
        sys.stderr.write("\n".join(format_plugin_table(pm.plugin_infos(), pm.blocked_names))
                         + "\n")
    return config


def nonnegative_seconds(text: str) -> float:
    """A non-negative number of seconds (argparse ``type``: its ValueError is a usage error
    naming the option)."""
    value = float(text)
    if not value >= 0 or value == float("inf"):
        raise ValueError(text)
    return value


def _check_numprocesses(ns) -> None:
    """A bad ``-n`` is a usage error before any work; ``tirxh bench -n`` is refused.

    Why bench stays serial: every bench item is a job on a KCoral board, and a board runs one
    job at a time (timing needs the card to itself), so workers would only queue on it; without
    ``[bench] kcoral`` each worker would start its own embedded daemon on the same GPU; and
    ``--no-timing`` is the same board-side verification, one job at a time. What workers can
    speed up is compiling, which ``tirxh check -n auto`` does (and leaves in the artifact cache
    for the bench run that follows)."""
    n = numprocesses(getattr(ns, "numprocesses", None))
    if n and ns.command == "bench":
        raise UsageError(f"tirxh bench -n {ns.numprocesses}: bench runs its items one at a time "
                         "(each is a job on a KCoral board, which runs one job at a time); run "
                         "`tirxh check -n auto` first to compile and check in parallel (its "
                         "cubins stay in the artifact cache), then `tirxh bench` without -n")


def _load_plugins(argv: list):
    """The project (rootdir, ``tirx.toml`` or None) and its plugins, from the pre-scan of argv."""
    pre = _prescan(argv)
    rootdir, inipath = find_rootdir(rootdir=pre["rootdir"])
    pm = build_plugin_manager(pre["plugins"], pre["blocked"],
                              autoload=not os.environ.get(AUTOLOAD_ENV),
                              conftest=rootdir / CONFTEST_FILE if inipath else None)
    return rootdir, inipath, pm


def _unloaded(pm, data: dict) -> set:
    """``tirx.toml`` sections of installed plugins that autoload did not load
    (``TIRXH_DISABLE_PLUGIN_AUTOLOAD``): ignored with a warning naming the plugin, as a blocked
    plugin's section is, instead of an "unknown section" error."""
    if not os.environ.get(AUTOLOAD_ENV):
        return set()
    installed = installed_plugins()
    modules = {getattr(p, "__name__", None) for p in pm.get_plugins()}
    out = set()
    for section in data:
        if section not in installed or pm.has_plugin(section):
            continue
        dist, module = installed[section]
        if module not in modules:  # not loaded under another name either (-p MODULE)
            sys.stderr.write(f"WARNING: tirx.toml: [{section}] belongs to plugin {section!r} "
                             f"({dist}), which is not loaded ({AUTOLOAD_ENV} is "
                             f"set; load it with -p {section}): the section is ignored\n")
            out.add(section)
    return out


def main(argv: "list | None" = None) -> int:
    """Entry point of the ``tirxh`` console script; returns an `ExitCode`."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if argv[:1] == ["init"] or (argv and argv[0] in ("-h", "--help", "--version")) \
                or not argv:
            return _no_project(argv)
        config = configure(argv)
        return _dispatch(config)
    except UsageError as e:
        sys.stderr.write(f"ERROR: {e}\n")
        return ExitCode.USAGE_ERROR
    except PluginValidationError as e:
        sys.stderr.write(f"ERROR: plugin error: {e}\n")
        return ExitCode.USAGE_ERROR
    except KeyboardInterrupt:
        sys.stderr.write("ERROR: interrupted\n")
        return ExitCode.INTERRUPTED
    except SystemExit as e:  # --help / --version
        return int(e.code or 0)
    except Exception:
        sys.stderr.write("INTERNAL ERROR:\n" + traceback.format_exc())
        return ExitCode.INTERNAL_ERROR


def _no_project(argv: list) -> int:
    """``init``, ``--help``, ``--version``: no configuration; ``--help`` loads the plugins only to
    list the commands they add."""
    wants_plugins = argv[:1] != ["init"] and "--version" not in argv[:1]
    ap = build_argparser(Parser(), _load_plugins(argv)[2].commands() if wants_plugins else ())
    if not argv:
        ap.print_help(sys.stderr)
        sys.stderr.write("ERROR: no command given; try `tirxh check`\n")
        return ExitCode.USAGE_ERROR
    ns = ap.parse_args(argv)
    written = init_project(Path(ns.dir), force=ns.force)
    if ns.json:
        _print_json({"schema": SCHEMA, "command": "init", "dir": str(Path(ns.dir).resolve()),
                     "files": [str(p) for p in written]})
    else:
        for p in written:
            print(f"wrote {p}")
        print(f"next: cd {ns.dir} && tirxh check")
    return ExitCode.OK


def _dispatch(config) -> int:
    cmd = config.command
    if cmd in RUN_COMMANDS:
        return wrap_session(config, run_items)
    if cmd == "plugins":
        return _plugins(config)
    if cmd == "show":
        return _show(config)
    if cmd == "profile":
        o = config.option
        return profile_session(config, o.nodeid, Path(o.out), o.json_file, o.json)
    plugin_cmd = config.pm.commands().get(cmd)
    if plugin_cmd is not None:
        return _run_plugin_command(config, plugin_cmd)
    raise UsageError(f"unknown command {cmd!r}")  # argparse rejects it first


def _run_plugin_command(config, cmd) -> int:
    """A command a plugin added (`tirxh.core.commands`): its runner, then ``tirxh_unconfigure``."""
    if config.option.trace_config and not config.option.json:  # with --json: done by configure
        sys.stderr.write("\n".join(format_plugin_table(config.pm.plugin_infos(),
                                                        config.pm.blocked_names)) + "\n")
    try:
        return cmd.run(config)
    finally:
        config.pm.hook.tirxh_unconfigure(config=config)


def _print_json(doc: dict) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
    sys.stdout.flush()


# -------------------------------------------------------------------------------------------------
# plugins / show
# -------------------------------------------------------------------------------------------------

def format_plugin_table(infos: list, blocked=()) -> list:
    """Readable lines for ``tirxh plugins`` and ``--trace-config``."""
    lines = []
    for i in infos:
        ver = f" {i['version']}" if i["version"] else ""
        lines.append(f"{i['name']:<14} {i['distribution']}{ver} ({i['origin']})")
        lines.append(f"    file:  {i['file'] or '-'}")
        lines.append(f"    hooks: {', '.join(i['hooks']) or '-'}")
    if blocked:
        lines.append(f"blocked: {', '.join(sorted(blocked))}")
    return lines


def _plugins(config) -> int:
    infos = config.pm.plugin_infos()
    if config.option.json:
        _print_json({"schema": SCHEMA, "command": "plugins", "rootdir": str(config.rootdir),
                     "plugins": infos, "blocked": sorted(config.pm.blocked_names)})
    else:
        print(f"{len(infos)} plugins (rootdir: {config.rootdir})")
        print("\n".join(format_plugin_table(infos, config.pm.blocked_names)))
    config.pm.hook.tirxh_unconfigure(config=config)
    return ExitCode.OK


def _show(config) -> int:
    """Compile one item (no analyzers) and print the chosen artifact."""
    opt = config.option
    item = select_one(Session(config, "show"), opt.nodeid, "show")
    if opt.trace_config:
        sys.stderr.write("\n".join(format_plugin_table(config.pm.plugin_infos(),
                                                        config.pm.blocked_names)) + "\n")
    compiled, phase = compile_item(item)
    if compiled is None:
        sys.stderr.write(f"{item.nodeid}: compile {phase.outcome}:\n{phase.longrepr}\n")
        return ExitCode.FAILED
    kind = opt.kind
    if kind == "ir":
        text = format_kernel(compiled.ir)
    elif kind == "ptx":
        text = compiled.ptx
    elif kind == "sass":
        text = compiled.sass
    elif kind == "phases":
        ps = phases(compiled.sass)
        text = "" if opt.json else format_phases(ps, f"{item.nodeid}: SASS between waits")
    else:
        text = json.dumps({"resources": compiled.resources.to_json(),
                           "launch": compiled.launch_metadata()}, indent=2, default=str)
    if opt.json:
        doc = {"schema": SCHEMA, "command": "show", "nodeid": item.nodeid, "kind": kind}
        doc["content"] = (json.loads(text) if kind == "resources"
                          else [p.to_json() for p in ps] if kind == "phases" else text)
        _print_json(doc)
    else:
        sys.stdout.write(text.rstrip("\n") + "\n")
    config.pm.hook.tirxh_unconfigure(config=config)
    return ExitCode.OK
