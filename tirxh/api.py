"""The public face of tirxh for plugins, KCoral extensions and third parties.

Plugin distributions (``plugins/*``), ``examples/`` and any third-party package import tirxh
through this module only (and ``tirxh.lang`` for kernels, ``tirxh.testing`` in tests), as
pytest's own plugins use ``_pytest`` while third parties see only ``pytest``. A test
(``tests/test_layering.py``) walks every import under ``plugins/``, ``kcoral/`` and ``examples/``
and fails on any other ``tirxh.*`` import. docs/API.md says what each name is and how to use it.

Stability: names in `STABLE` keep their meaning and signature within a minor version (a change
is announced a minor version ahead); the rest of `__all__` is public but provisional: it may
still change, and docs/API.md says so for each.
"""

from __future__ import annotations

from tirxh import __version__, main
from tirxh.core import ir
from tirxh.core.benchjob import bench_error, build_job, client_for
from tirxh.core.bindings import (
    SYNC_ROLES, Binding, Effects, InstructionSet, OperandSpec, Slot, operands, opt, slot,
)
from tirxh.core.cache import ArtifactCache
from tirxh.core.compiler import (
    STAGES, CompiledKernel, Pipeline, compile_kernel, default_cache, emit_ptx_for, get_target,
)
from tirxh.core.config import Config, Parser, ini_value
from tirxh.core.emit_ptx import emit_ptx
from tirxh.core.errors import (
    CompileError, ConfigError, IRJSONError, PluginValidationError, SpellingError, SuiteError,
    ToolchainError, TirxhError, TraceError, UsageError,
)
from tirxh.core.findings import VERDICTS, AnalyzerResult, Finding, SourceRef, worst
from tirxh.core.irjson import dumps as ir_dumps, loads as ir_loads
from tirxh.core.lang.kernel import Kernel
from tirxh.core.lang.trace import Register, Trace, emit, tracing
from tirxh.core.legalize import legalize
from tirxh.core.main import ExitCode
from tirxh.core.nodes import KernelItem, Module, Node, Session
from tirxh.core.pluginmanager import hookimpl
from tirxh.core.registry import default_isa, default_targets, default_transforms
from tirxh.core.reports import (
    OUTCOMES, SCHEMA, CollectReport, ItemReport, PhaseReport, SessionFinish, SessionStart,
    from_json as report_from_json,
)
from tirxh.core.suite import Case, Suite, TensorMap, Tolerance
from tirxh.core.targets import Target, TargetRegistry
from tirxh.core.toolchain import Resources, cubin_to_sass, find_tool, toolchain_versions
from tirxh.core.transforms import Transform, TransformContext, TransformRegistry
from tirxh.core.types import DTYPES, DType, dtype, from_numpy, numpy_dtype

STABLE = (
    # the plugin contract and the command
    "hookimpl", "main", "ExitCode",
    # errors
    "TirxhError", "UsageError", "ConfigError", "PluginValidationError", "TraceError",
    "CompileError", "SpellingError", "ToolchainError",
    # configuration, items, reports
    "Config", "Parser", "KernelItem", "SCHEMA", "OUTCOMES", "ItemReport", "PhaseReport",
    # IR, kernels, compiled artifacts
    "ir", "Kernel", "CompiledKernel", "compile_kernel", "Resources",
    # suites, analyzer results
    "Suite", "Case", "Tolerance", "TensorMap", "Finding", "SourceRef", "AnalyzerResult",
    "VERDICTS", "worst",
    # bindings, targets, types
    "Binding", "Effects", "operands", "opt", "slot", "Target", "DType", "DTYPES", "dtype",
    "numpy_dtype",
)

__all__ = [
    "__version__", "STABLE",
    # plugin contract and the command
    "hookimpl", "main", "ExitCode",
    # errors
    "TirxhError", "UsageError", "ConfigError", "PluginValidationError", "TraceError",
    "CompileError", "SuiteError", "SpellingError", "ToolchainError", "IRJSONError",
    # configuration
    "Config", "Parser", "ini_value",
    # collection nodes
    "Node", "Session", "Module", "KernelItem",
    # the IR and building it
    "ir", "Kernel", "Trace", "Register", "tracing", "emit", "ir_dumps", "ir_loads",
    # the compile pipeline
    "STAGES", "Pipeline", "CompiledKernel", "compile_kernel", "emit_ptx_for", "legalize",
    "emit_ptx", "get_target", "Transform", "TransformContext", "TransformRegistry",
    "default_transforms", "ArtifactCache", "default_cache", "Resources", "cubin_to_sass",
    "find_tool", "toolchain_versions",
    # instruction bindings and targets
    "Binding", "Effects", "InstructionSet", "OperandSpec", "Slot", "operands", "opt", "slot",
    "SYNC_ROLES", "default_isa", "Target", "TargetRegistry", "default_targets",
    # types
    "DType", "DTYPES", "dtype", "numpy_dtype", "from_numpy",
    # suites
    "Suite", "Case", "Tolerance", "TensorMap",
    # analyzer results
    "Finding", "SourceRef", "AnalyzerResult", "VERDICTS", "worst",
    # reports
    "SCHEMA", "OUTCOMES", "SessionStart", "CollectReport", "PhaseReport", "ItemReport",
    "SessionFinish", "report_from_json",
    # KCoral jobs from compiled items, and the run's client
    "build_job", "client_for", "bench_error",
]
