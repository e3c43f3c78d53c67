"""The error taxonomy (as pytest/pluggy): who made the mistake decides the class.

Every error tirxh raises on purpose is a `TirxhError` with a stable `code` (a short string a
caller may switch on, and which the JSON reports carry; the class names may move, the codes do
not). The classes are re-exported where they were first defined (``tirxh.core.emit_ptx``,
``tirxh.core.lang.trace``, ...) and from `tirxh.api`.

| class | code | whose mistake | what the run does |
| --- | --- | --- | --- |
| `UsageError` | ``usage`` | the user's command line or project | exit 4 |
| `ConfigError` | ``config`` | ``tirx.toml`` (every problem at once) | exit 4 |
| `PluginValidationError` | ``plugin`` | a plugin author (bad hook, conflict) | exit 4 |
| `TraceError` | ``trace`` | the kernel body, at the user's file:line | the item fails |
| `SpellingError` | ``spelling`` | a ``T.ptx`` spelling or its operands | the item fails |
| `CompileError` | ``compile`` | a kernel that cannot be built for a target | the item fails |
| `SuiteError` | ``suite`` | a suite's ``inputs()``/``reference()``/grid, at the user's line | the item fails |
| `ToolchainError` | ``toolchain`` | ptxas/nvJitLink/nvdisasm refused or missing | the item fails |
| `IRJSONError` | ``ir-json`` | malformed IR JSON (KCoral's sim board input) | the job is refused |

Anything else that escapes is an internal error (exit 3). This module imports nothing from
tirxh, so every other module can import it.
"""

from __future__ import annotations

_MAX_PROBLEMS = 20


class TirxhError(Exception):
    """Base of tirxh's own errors; `code` names the kind (stable across versions)."""

    code = "tirxh"


class UsageError(TirxhError):
    """Bad command line or project configuration; the message names the file/key/option."""

    code = "usage"


class ConfigError(UsageError):
    """A ``tirx.toml`` problem (or several): names the file, the key, what was expected."""

    code = "config"

    def __init__(self, path, problems: "list[str]"):
        self.path = path
        self.problems = list(problems)
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"{path}: invalid configuration:\n{lines}")


class PluginValidationError(TirxhError):
    """A plugin author's mistake (a hook with no spec, a bad signature); carries the plugin."""

    code = "plugin"

    def __init__(self, plugin, message: str):
        self.plugin = plugin
        super().__init__(message)


class SourceError(TirxhError):
    """An error in a kernel, located at the user's source line (`loc`, an `ir.Loc`)."""

    code = "source"

    def __init__(self, message: str, loc=None, kernel: str = ""):
        self.message, self.loc, self.kernel = message, loc, kernel
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.loc}: " if self.loc else ""
        k = f"in kernel {self.kernel!r}: " if self.kernel else ""
        return f"{where}{k}{self.message}"


class TraceError(SourceError):
    """A mistake in a kernel's body, reported at the user's file:line."""

    code = "trace"


class CompileError(SourceError):
    """A kernel that traced fine but cannot be built for a target (message names file:line)."""

    code = "compile"


class SuiteError(SourceError, ValueError):
    """A mistake in a kernel's suite: ``inputs()``/``reference()``/the grid raised, or gave what
    the kernel or the suite does not declare (a missing output, a dtype that does not fit a
    parameter). `loc` is the user's line; the user's own exception is chained (``__cause__``),
    for ``--tb=long``. Also a `ValueError`, as these errors were before."""

    code = "suite"


class SpellingError(TirxhError, ValueError):
    """A `T.ptx...` spelling or its operands do not match any binding (message says why)."""

    code = "spelling"


class ToolchainError(TirxhError):
    """ptxas/nvJitLink rejected the PTX, or no tool is available. `log` holds the tool output."""

    code = "toolchain"

    def __init__(self, message: str, log: str = ""):
        self.log = log
        super().__init__(message + (f"\n{log}" if log else ""))


class IRJSONError(TirxhError, ValueError):
    """The IR JSON is malformed; `problems` lists every ``(field, message)`` found."""

    code = "ir-json"

    def __init__(self, problems, kernel: str = ""):
        self.problems = list(problems)
        self.kernel = kernel
        head = f"kernel {kernel!r}: " if kernel else ""
        shown = self.problems[:_MAX_PROBLEMS]
        more = len(self.problems) - len(shown)
        super().__init__(head + "; ".join(f"{f}: {m}" for f, m in shown)
                         + (f"; ... and {more} more" if more > 0 else ""))

    @property
    def field(self) -> str:
        return self.problems[0][0] if self.problems else ""


#: every class above, for documentation and tests
ALL = (TirxhError, UsageError, ConfigError, PluginValidationError, SourceError, TraceError,
       CompileError, SuiteError, SpellingError, ToolchainError, IRJSONError)

#: the user's mistakes in an item: the item fails (at their line), it is not a plugin's crash
USER_ERRORS = (TraceError, CompileError, SuiteError, SpellingError, UsageError)
