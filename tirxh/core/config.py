"""The project model: ``tirx.toml`` discovery, schema validation, and the run's `Config`.

A project is the directory holding ``tirx.toml``, found by walking up from the working directory
(pytest's rootdir rule), or named with ``--rootdir``. The file's schema is declared, not implied:
the core declares ``[project]``, ``[check]``, ``[build]`` and ``[bench]`` here, and plugins declare
keys with ``parser.addini(section, key, ...)`` from ``tirxh_addoption``. Validation collects every
problem (unknown section or key, wrong type, bad value) and raises one `ConfigError` naming the
file, the line, the key and what was expected.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from .. import __version__
from .cache import ArtifactCache
from .errors import ConfigError, PluginValidationError, UsageError
from .registry import activate, collect_toolset, collect_transforms

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

CONFIG_NAME = "tirx.toml"
# ``[check] fail_on``, from the least strict: each value also fails what the ones before it fail
FAIL_ON = ("error", "compiled", "incomplete", "review")
CONFTEST_FILE = "tirxconf.py"

_TYPES = ("str", "int", "float", "bool", "list[str]", "table", "any")


# -------------------------------------------------------------------------------------------------
# the declared schema
# -------------------------------------------------------------------------------------------------

@dataclass
class IniKey:
    """One declared ``tirx.toml`` key: `type` is one of ``str int float bool list[str] table
    any``; `choices` restricts a ``str``; `check` returns a problem text or None."""

    section: str
    key: str
    type: str = "str"
    default: Any = None
    help: str = ""
    choices: "tuple | None" = None
    check: "Callable | None" = None


class Parser:
    """What plugins see in ``tirxh_addoption``: command-line options and ``tirx.toml`` keys.

    ``addoption`` takes argparse's arguments; the options appear on every run command (check,
    bench, build, show). ``addini`` declares a key; a section is owned by whoever declares keys in
    it, and the core sections may be extended the same way.
    """

    def __init__(self):
        self.options: list = []  # (args, kwargs)
        self.ini: dict = {}  # (section, key) -> IniKey

    def addoption(self, *names: str, **kwargs) -> None:
        if not names or not all(n.startswith("--") for n in names):
            raise UsageError(f"addoption{names}: plugin options must be long options (--name)")
        self.options.append((names, kwargs))

    def addini(self, section: str, key: str, type: str = "str", default: Any = None,
               help: str = "", choices=None, check: "Callable | None" = None) -> None:
        if type not in _TYPES:
            raise UsageError(f"addini({section!r}, {key!r}): type {type!r} is not one of "
                             f"{', '.join(_TYPES)}")
        if (section, key) in self.ini:
            raise UsageError(f"addini: [{section}] {key} is declared twice")
        self.ini[(section, key)] = IniKey(section, key, type, default, help,
                                          tuple(choices) if choices else None, check)

    def sections(self) -> list:
        return sorted({s for s, _ in self.ini})


def _check_hostport(value: str) -> "str | None":
    if value == "":
        return None
    m = re.fullmatch(r"(\[[0-9a-fA-F:]+\]|[A-Za-z0-9_.\-]+):(\d+)", value)
    if not m or not 0 < int(m.group(2)) < 65536:
        return f"expected 'host:port' (port 1-65535), got {value!r}"
    return None


def _check_requires(values: list) -> "str | None":
    bad = []
    for v in values:
        try:
            Requirement(v)
        except InvalidRequirement as e:
            bad.append(f"{v!r} ({e})")
    return f"invalid requirement {', '.join(bad)}" if bad else None


def declare_core_ini(parser: Parser) -> None:
    """The core's own keys (the plugin-owned sections are declared by their plugins)."""
    a = parser.addini
    a("project", "name", "str", None, "project name (default: the directory's name)")
    a("project", "targets", "list[str]", ["sm_90a"], "default targets, e.g. ['sm_90a']")
    a("project", "kernels", "list[str]", ["kernels/*.py"], "globs of kernel modules (from root)")
    a("project", "requires", "list[str]", [],
      "plugin distributions with version specifiers, e.g. ['tirxh-numsim>=0.1']",
      check=_check_requires)
    a("check", "fail_on", "str", "error",
      "what fails an item, from the least strict: error (an error verdict), compiled (also an "
      "item no analyzer checked), incomplete (also an incomplete verdict), review (anything "
      "but clean)", choices=FAIL_ON)
    a("build", "builddir", "str", "tirx-build", "where `tirxh build` writes artifacts")
    a("bench", "kcoral", "str", "", "KCoral daemon address 'host:port' (empty: embedded daemon)",
      check=_check_hostport)
    a("bench", "timeout_s", "float", 600.0, "deadline for one bench job, seconds")


# -------------------------------------------------------------------------------------------------
# discovery and validation
# -------------------------------------------------------------------------------------------------

def find_rootdir(start: "Path | str | None" = None,
                 rootdir: "Path | str | None" = None) -> "tuple[Path, Path | None]":
    """(rootdir, inipath): `rootdir` if given, else the nearest directory upward from `start`
    holding ``tirx.toml``; with none found, `start` itself and no config file."""
    if rootdir is not None:
        root = Path(rootdir).resolve()
        if not root.is_dir():
            raise UsageError(f"--rootdir {rootdir}: not a directory")
        ini = root / CONFIG_NAME
        return root, ini if ini.is_file() else None
    start = Path(start or Path.cwd()).resolve()
    for d in (start, *start.parents):
        if (d / CONFIG_NAME).is_file():
            return d, d / CONFIG_NAME
    return start, None


def load_toml(path: Path) -> dict:
    """Parse a ``tirx.toml``; a syntax error is a `ConfigError` with the parser's position."""
    try:
        return tomllib.loads(Path(path).read_text())
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(path, [f"TOML syntax error: {e}"]) from None
    except OSError as e:
        raise ConfigError(path, [f"cannot read: {e}"]) from None


def _line_of(text: str, section: str, key: "str | None") -> "int | None":
    """Best-effort line of ``[section]`` (or of ``key =`` inside it) for messages."""
    current = None
    for n, line in enumerate(text.splitlines(), 1):
        m = re.match(r"\s*\[\s*([^\]]+?)\s*\]", line)
        if m:
            current = m.group(1)
            if key is None and current == section:
                return n
            continue
        if key is not None and current == section and re.match(
                rf"\s*\"?{re.escape(key)}\"?\s*=", line):
            return n
    return None


def _type_problem(decl: IniKey, value: Any) -> "str | None":
    t = decl.type
    ok = {
        "str": isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "list[str]": isinstance(value, list) and all(isinstance(v, str) for v in value),
        "table": isinstance(value, dict),
        "any": True,
    }[t]
    if not ok:
        want = {"list[str]": "a list of strings", "table": "a table", "int": "an integer",
                "float": "a number", "bool": "true or false", "str": "a string"}[t]
        return f"expected {want}, got {type(value).__name__} {value!r}"
    if decl.choices and value not in decl.choices:
        return f"expected one of {', '.join(map(repr, decl.choices))}, got {value!r}"
    if decl.check is not None:
        return decl.check(value)
    return None


def validate(data: dict, parser: Parser, path: "Path | None", ignore_sections=(),
             targets=None, loaded: "dict | None" = None) -> dict:
    """Check `data` against the declared keys; return ``{section: {key: value}}`` with defaults.

    Every problem is collected and raised together: the schema's, and, when given, the
    ``[project] targets`` that `targets` (a `TargetRegistry`) does not know and the
    ``[project] requires`` that `loaded` (distribution -> version of the loaded plugins) does not
    satisfy. Sections in `ignore_sections` (those of blocked or not-loaded plugins) are skipped
    rather than reported as unknown.
    """
    text = Path(path).read_text() if path else ""
    problems = []

    def where(section, key=None):
        line = _line_of(text, section, key)
        return f"line {line}: " if line else ""

    declared = parser.sections()
    out: dict = {s: {} for s in declared}
    for section, table in data.items():
        if section in ignore_sections:
            continue
        if section not in declared:
            problems.append(f"{where(section)}unknown section [{section}] (known: "
                            f"{', '.join(declared)}; a plugin declares its section with "
                            f"parser.addini)")
            continue
        if not isinstance(table, dict):
            problems.append(f"{where(section)}{section}: expected a table [{section}], got "
                            f"{type(table).__name__}")
            continue
        for key, value in table.items():
            decl = parser.ini.get((section, key))
            if decl is None:
                known = sorted(k for s, k in parser.ini if s == section)
                problems.append(f"{where(section, key)}[{section}] unknown key {key!r} "
                                f"(known keys: {', '.join(known)})")
                continue
            p = _type_problem(decl, value)
            if p:
                problems.append(f"{where(section, key)}[{section}] {key}: {p}")
            else:
                out[section][key] = value
    project = out.get("project", {})
    if targets is not None and "targets" in project:
        unknown = [t for t in project["targets"] if t not in targets]
        if unknown:
            known = ", ".join(sorted(t.name for t in targets))
            problems.append(f"{where('project', 'targets')}[project] targets: unknown target(s) "
                            f"{', '.join(map(repr, unknown))}; known targets: {known}")
    if loaded is not None and "requires" in project:
        problems += [f"{where('project', 'requires')}{p}"
                     for p in requires_problems(project["requires"], loaded)]
    if problems:
        raise ConfigError(path or "tirx.toml", problems)
    for (section, key), decl in parser.ini.items():
        out[section].setdefault(key, decl.default)
    return out


# -------------------------------------------------------------------------------------------------
# the run's configuration
# -------------------------------------------------------------------------------------------------

class Config:
    """Everything a run knows before collection.

    option: the parsed command line (argparse namespace); pm: the plugin manager; rootdir and
    inipath: the project; ini: validated ``tirx.toml`` values (``getini(section, key)``);
    isa / targets / transforms: the instruction set, target registry and IR transform registry
    the plugins contributed (activated for the language and the compiler); project_targets: the
    targets items are built for; cache: the artifact cache (disabled by ``--no-cache``);
    args: the command line it was made from (worker processes are configured from it);
    worker: None in the process that reports, else the worker's facts (``{"id": "gw0"}``, see
    `tirxh.core.dist`): a reporter registers only where it is None, as pytest-xdist's
    ``workerinput`` tells pytest's own reporters to stay out of workers.
    """

    def __init__(self, option, pm, rootdir: Path, inipath: "Path | None", ini: dict,
                 parser: Parser, command: str = "check"):
        self.option = option
        self.pm = pm
        self.rootdir = Path(rootdir)
        self.inipath = inipath
        self.ini = ini
        self.parser = parser
        self.command = command
        self.cache = ArtifactCache(enabled=not getattr(option, "no_cache", False))
        self.assemble = True
        self.isa = None
        self.targets = None
        self.transforms = None
        self.project_targets: list = []
        self.stash: dict = {}  # for plugins: keep per-run state here, not in module globals
        self.warnings: list = []  # what `warn` said, in order
        self.args: list = []
        self.worker: "dict | None" = None

    # -- values ----------------------------------------------------------------------------------
    def getini(self, section: str, key: str) -> Any:
        """The validated value of a declared ``tirx.toml`` key (its default when absent)."""
        try:
            return self.ini[section][key]
        except KeyError:
            raise UsageError(f"[{section}] {key} is not a declared tirx.toml key") from None

    def getoption(self, name: str, default: Any = None) -> Any:
        return getattr(self.option, name, default)

    @property
    def project_name(self) -> str:
        return self.getini("project", "name") or self.rootdir.name

    @property
    def builddir(self) -> Path:
        out = getattr(self.option, "builddir", None) or self.getini("build", "builddir")
        return (self.rootdir / out).resolve()

    # -- set-up ----------------------------------------------------------------------------------
    def setup_toolset(self, toolset: "tuple | None" = None) -> None:
        """Make the plugins' instruction set, targets and transforms (`toolset`, else collected
        now) the active set, and choose the run's targets (``--target`` over ``[project]
        targets``, whose names `validate` checked)."""
        self.isa, self.targets, self.transforms = toolset or collect_plugin_toolset(self.pm)
        activate(self.isa, self.targets, self.transforms)
        chosen = getattr(self.option, "target", None) or self.getini("project", "targets")
        unknown = [t for t in chosen if t not in self.targets]
        if unknown:
            known = ", ".join(sorted(t.name for t in self.targets))
            src = "--target" if getattr(self.option, "target", None) else \
                f"{self.inipath or 'tirx.toml'}: [project] targets"
            raise UsageError(f"{src}: unknown target(s) {', '.join(map(repr, unknown))}; "
                             f"known targets: {known}")
        self.project_targets = list(chosen)


    def kernel_files(self) -> list:
        """Files matched by ``[project] kernels`` globs, sorted, relative to rootdir; a glob that
        matches no file is a warning (a typo would otherwise collect nothing, silently)."""
        seen, out = set(), []
        for pattern in self.getini("project", "kernels"):
            got = [p for p in sorted(self.rootdir.glob(pattern))
                   if p.is_file() and p.suffix == ".py"]
            if not got:
                self.warn(f"{self.inipath or 'tirx.toml'}: [project] kernels: {pattern!r} "
                          f"matches no .py file under {self.rootdir}")
            for p in got:
                if p not in seen:
                    seen.add(p)
                    out.append(p)
        return out

    def warn(self, message: str) -> None:
        """Say `message` on stderr once per run (``WARNING: ...``), and keep it in `warnings`."""
        if message in self.warnings:
            return
        self.warnings.append(message)
        sys.stderr.write(f"WARNING: {message}\n")

    def relpath(self, path: Path) -> str:
        try:
            return Path(path).resolve().relative_to(self.rootdir).as_posix()
        except ValueError:
            return Path(path).resolve().as_posix()


def collect_plugin_toolset(pm) -> tuple:
    """(instruction set, targets, transforms) from the plugins of `pm`; two plugins registering
    one name is a `PluginValidationError`."""
    try:
        return (*collect_toolset(pm), collect_transforms(pm))
    except ValueError as e:  # two plugins registered the same binding, target or transform
        raise PluginValidationError(None, str(e)) from None


def loaded_distributions(pm) -> dict:
    """Canonical distribution name -> version of tirxh and every loaded plugin's distribution."""
    loaded = {canonicalize_name("tirxh"): __version__}
    for dist, version in pm.dists.values():
        loaded.setdefault(canonicalize_name(dist), version)
    return loaded


def requires_problems(specs: list, loaded: dict) -> list:
    """``[project] requires``: each distribution must be loaded as a plugin (or be tirxh itself)
    at a version the specifier accepts; the problems found."""
    problems = []
    for spec in specs:
        req = Requirement(spec)
        have = loaded.get(canonicalize_name(req.name))
        if have is None:
            problems.append(f"[project] requires: {spec!r}: no loaded plugin comes from "
                            f"distribution {req.name!r} (install it, or unblock it)")
        elif req.specifier and not req.specifier.contains(have, prereleases=True):
            problems.append(f"[project] requires: {spec!r}: {req.name} {have} is installed")
    return problems


def ini_value(config, section: str, key: str, default: Any = None) -> Any:
    """A plugin's ``tirx.toml`` value that tolerates a plugin loaded without its
    ``tirxh_addoption`` having declared the key, and config-like test doubles: the declared
    value, else the raw ``[section] key``, else `default`."""
    getini = getattr(config, "getini", None)
    if getini is not None:
        try:
            return getini(section, key)
        except Exception:  # the key was not declared (plugin loaded without addoption)
            pass
    return (getattr(config, "inicfg", None) or {}).get(section, {}).get(key, default)
