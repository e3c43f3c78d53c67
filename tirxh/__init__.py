"""tirxh: a compiler harness for GPU kernels written in TIRx, a PTX-level language in Python.

Public API: ``import tirxh.lang as T`` for kernels; `main` (the ``tirxh`` command, returning an
`ExitCode`), `hookimpl` for plugins, and the analyzer result types for plugin authors.
"""

__version__ = "0.1.0"

from tirxh.core.findings import AnalyzerResult, Finding, SourceRef  # noqa: E402
from tirxh.core.pluginmanager import hookimpl  # noqa: E402


def main(argv=None) -> int:
    """Run ``tirxh`` with `argv` (default: the process arguments); returns the exit code."""
    from tirxh.core.cli import main as _main
    return _main(argv)


def __getattr__(name):
    if name == "ExitCode":  # imported lazily: the run machinery is not needed by kernels
        from tirxh.core.main import ExitCode
        return ExitCode
    raise AttributeError(f"module 'tirxh' has no attribute {name!r}")


__all__ = ["__version__", "hookimpl", "main", "ExitCode", "AnalyzerResult", "Finding",
           "SourceRef"]
