"""The public face of tirxh for plugins, KCoral extensions and third parties.

Plugin distributions (``plugins/*``), ``examples/`` and any third-party package import tirxh
through this module only, as pytest's own plugins use ``_pytest`` while third parties see only
``pytest``. Kernel authors use ``import tirxh.lang as T``; everything here is for code that
extends or drives tirxh. A test (``tests/test_layering.py``) walks every import under
``plugins/``, ``kcoral/`` and ``examples/`` and fails on any other ``tirxh.*`` import.

Stability: names listed in `STABLE` keep their meaning and signature within a minor version;
the rest of `__all__` is public but may still change (it says so in docs/API.md).
"""

from __future__ import annotations

from tirxh import __version__
from tirxh.core import ir
from tirxh.core.bindings import (
    Binding, Effects, InstructionSet, SpellingError, operands, opt, slot,
)
from tirxh.core.compiler import CompiledKernel, compile_kernel, emit_ptx_for, get_target
from tirxh.core.config import Config, ini_value
from tirxh.core.emit_ptx import CompileError, emit_ptx
from tirxh.core.errors import ConfigError, UsageError
from tirxh.core.findings import VERDICTS, AnalyzerResult, Finding, SourceRef, worst
from tirxh.core.irjson import IRJSONError, dumps as ir_dumps, loads as ir_loads
from tirxh.core.lang.kernel import Kernel
from tirxh.core.lang.trace import Trace, TraceError, emit, tracing
from tirxh.core.main import ExitCode
from tirxh.core.pluginmanager import PluginValidationError, hookimpl
from tirxh.core.registry import default_isa, default_targets
from tirxh.core.reports import SCHEMA as REPORT_SCHEMA
from tirxh.core.suite import Case, Suite, TensorMap, Tolerance
from tirxh.core.targets import Target
from tirxh.core.toolchain import Resources, ToolchainError, cubin_to_sass, find_tool
from tirxh.core.types import DTYPES, DType, dtype, from_numpy, numpy_dtype

STABLE = (
    "hookimpl", "ir", "CompiledKernel", "compile_kernel", "Suite", "Case", "Tolerance",
    "TensorMap", "Finding", "SourceRef", "AnalyzerResult", "VERDICTS", "worst", "UsageError",
    "CompileError", "TraceError", "PluginValidationError", "ExitCode", "Binding", "Effects",
    "operands", "opt", "slot", "DType", "dtype", "numpy_dtype", "Target",
)

__all__ = [
    "__version__", "STABLE",
    # plugin contract
    "hookimpl", "PluginValidationError",
    # the IR and building it
    "ir", "Kernel", "Trace", "tracing", "emit", "ir_dumps", "ir_loads",
    # the compile pipeline
    "CompiledKernel", "compile_kernel", "emit_ptx", "emit_ptx_for", "get_target", "Resources",
    "cubin_to_sass", "find_tool", "default_isa", "default_targets", "Target",
    # instruction bindings
    "Binding", "Effects", "InstructionSet", "operands", "opt", "slot",
    # types
    "DType", "DTYPES", "dtype", "numpy_dtype", "from_numpy",
    # suites
    "Suite", "Case", "Tolerance", "TensorMap",
    # analyzer results
    "Finding", "SourceRef", "AnalyzerResult", "VERDICTS", "worst",
    # errors
    "UsageError", "ConfigError", "CompileError", "TraceError", "ToolchainError", "IRJSONError",
    "SpellingError",
    # configuration and commands
    "Config", "ini_value", "ExitCode", "REPORT_SCHEMA",
]
