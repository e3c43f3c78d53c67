"""`tirxh.api` is complete and documented: every name resolves, docs/API.md documents each one
with the stability `STABLE` gives it, and the names plugins rely on are there."""

import re
from pathlib import Path

import pytest

import tirxh
import tirxh.api as api

DOC = Path(__file__).resolve().parents[1] / "docs" / "API.md"


def _doc_rows() -> dict:
    """name -> stability, from the first and last cells of docs/API.md's table rows."""
    out = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[-1] not in ("stable", "provisional"):
            continue
        for name in re.findall(r"`([A-Za-z_][\w.]*)`", cells[0]):
            out[name] = cells[-1]
    return out


def test_every_name_resolves_and_stable_is_a_subset():
    assert all(hasattr(api, n) for n in api.__all__)
    assert len(set(api.__all__)) == len(api.__all__)
    assert set(api.STABLE) <= set(api.__all__)


@pytest.mark.parametrize("name", [n for n in api.__all__ if n not in ("__version__", "STABLE")])
def test_each_name_is_documented_with_its_stability(name):
    rows = _doc_rows()
    assert name in rows, f"docs/API.md does not document tirxh.api.{name}"
    want = "stable" if name in api.STABLE else "provisional"
    assert rows[name] == want, f"docs/API.md says {name} is {rows[name]}; STABLE says {want}"


def test_what_plugins_need_is_there():
    # the plugin contract, the pipeline and its transforms, suites, findings, errors, config
    for name in ("hookimpl", "KernelItem", "CompiledKernel", "Pipeline", "Transform",
                 "TransformRegistry", "Suite", "Tolerance", "AnalyzerResult", "Finding",
                 "CompileError", "UsageError", "Config", "Parser", "ini_value", "ir", "Binding",
                 "DType", "main", "ExitCode"):
        assert name in api.__all__, name


def test_the_short_names_on_tirxh_are_the_same_objects():
    for name in ("hookimpl", "ExitCode", "AnalyzerResult", "Finding", "SourceRef", "main"):
        assert getattr(tirxh, name) is getattr(api, name), name
