"""tirxh: a compiler harness for GPU kernels written in TIRx, a PTX-level language in Python.

Public API: ``import tirxh.lang as T`` for kernels; `main` (the ``tirxh`` command, returning an
`ExitCode`), `hookimpl` for plugins, and the analyzer result types for plugin authors. Code that
extends or drives tirxh (plugins, KCoral extensions, third parties) imports `tirxh.api`.
"""

__version__ = "0.1.0"  # first: the modules below read it while they are imported

from tirxh.core.cli import main as _cli_main  # noqa: E402
from tirxh.core.findings import AnalyzerResult, Finding, SourceRef  # noqa: E402
from tirxh.core.main import ExitCode  # noqa: E402
from tirxh.core.pluginmanager import hookimpl  # noqa: E402


def main(argv=None) -> int:
    """Run ``tirxh`` with `argv` (default: the process arguments); returns the exit code."""
    return _cli_main(argv)


__all__ = ["__version__", "hookimpl", "main", "ExitCode", "AnalyzerResult", "Finding",
           "SourceRef"]
