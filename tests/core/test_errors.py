"""The error taxonomy: one module, stable codes, the old import paths still work."""

import pytest

import tirxh.api as api
from tirxh.core import errors
from tirxh.core.bindings import SpellingError
from tirxh.core.emit_ptx import CompileError
from tirxh.core.ir import Loc
from tirxh.core.irjson import IRJSONError
from tirxh.core.lang.trace import TraceError
from tirxh.core.pluginmanager import PluginValidationError
from tirxh.core.toolchain import ToolchainError


def test_codes_are_unique_and_every_class_is_a_tirxh_error():
    codes = [c.code for c in errors.ALL]
    assert len(codes) == len(set(codes))
    assert all(issubclass(c, errors.TirxhError) for c in errors.ALL)


def test_old_import_paths_and_the_api_name_the_same_classes():
    assert (CompileError, TraceError, SpellingError, ToolchainError, IRJSONError,
            PluginValidationError) == (errors.CompileError, errors.TraceError,
                                       errors.SpellingError, errors.ToolchainError,
                                       errors.IRJSONError, errors.PluginValidationError)
    for name in ("UsageError", "ConfigError", "PluginValidationError", "TraceError",
                 "CompileError", "SpellingError", "ToolchainError", "IRJSONError", "TirxhError"):
        assert getattr(api, name) is getattr(errors, name)


def test_value_errors_stay_value_errors():
    # callers written before the taxonomy catch these as ValueError
    assert issubclass(SpellingError, ValueError) and issubclass(IRJSONError, ValueError)


def test_source_errors_name_file_line_and_kernel():
    e = CompileError("block too big", Loc("k.py", 7), "vadd")
    assert str(e) == "k.py:7: in kernel 'vadd': block too big"
    assert (e.message, e.kernel, e.code) == ("block too big", "vadd", "compile")
    with pytest.raises(errors.SourceError, match=r"^k\.py:3: bad operand$"):
        raise TraceError("bad operand", Loc("k.py", 3))


def test_config_error_lists_every_problem():
    e = errors.ConfigError("tirx.toml", ["line 2: a", "line 5: b"])
    assert e.problems == ["line 2: a", "line 5: b"] and isinstance(e, errors.UsageError)
    with pytest.raises(errors.UsageError, match=r"tirx\.toml: invalid configuration:\n  line 2"):
        raise e


def test_irjson_error_caps_the_message_but_keeps_every_problem():
    e = IRJSONError([(f"f{i}", "bad") for i in range(25)], kernel="k")
    assert len(e.problems) == 25 and e.field == "f0"
    with pytest.raises(ValueError, match=r"^kernel 'k': f0: bad; .*; \.\.\. and 5 more$"):
        raise e


def test_toolchain_error_carries_the_log():
    e = ToolchainError("ptxas failed for sm_90a", "line 3: syntax error")
    assert e.log == "line 3: syntax error"
    with pytest.raises(ToolchainError, match=r"ptxas failed for sm_90a\nline 3: syntax error"):
        raise e
