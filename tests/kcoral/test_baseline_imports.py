"""Registering a baseline imports nothing heavy; the board that runs it imports, and says why not.

The daemon and each worker register every baseline at start. Importing torch, FLA and pyptx
there cost a fresh GPU machine ~40 s per device call, so registration asks only whether the
package is installed (`installed`), and `available` imports on the board that runs the job.
"""

import sys
import types

import pytest

from kcoral.baselines import fla_ops, gemm_peers, torch_ops
from kcoral.plugins import build


@pytest.fixture
def broken_package(tmp_path, monkeypatch):
    """A package that is installed (find_spec sees it) but raises on import."""
    pkg = tmp_path / "tirxh_broken_dep"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise RuntimeError('needs a GPU driver')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "tirxh_broken_dep"
    sys.modules.pop("tirxh_broken_dep", None)


def test_installed_finds_without_importing(broken_package):
    assert torch_ops.installed(broken_package)
    assert broken_package not in sys.modules
    assert not torch_ops.installed("tirxh_no_such_package")
    assert not torch_ops.installed("tirxh_no_such_package.sub")


def test_import_problem_names_the_module_and_the_error(broken_package):
    why = torch_ops.import_problem(broken_package)
    assert why.startswith(f"{broken_package} does not import: RuntimeError: needs a GPU driver")
    assert torch_ops.import_problem("json") is None


def test_building_the_registries_imports_no_optional_dependency(monkeypatch):
    # as on a GPU host: every optional dependency reported installed; none may be imported
    monkeypatch.setattr(torch_ops, "installed", lambda m: True)
    for mod in (fla_ops, gemm_peers):
        monkeypatch.setattr(mod, "installed", lambda m: True)
    for mod in (fla_ops, gemm_peers, torch_ops):
        monkeypatch.setattr(mod, "torch_available", lambda: True, raising=False)
    before = set(sys.modules)
    monkeypatch.setitem(sys.modules, "torch", None)  # an import of torch would fail loudly
    regs = build(autoload=False)
    assert "fla.chunk_kda" in regs.baselines and "pyptx.gemm_hopper" in regs.baselines
    assert "torch._scaled_mm" in regs.baselines
    new = {m.split(".")[0] for m in set(sys.modules) - before}
    assert not new & {"fla", "pyptx", "triton"}, new


def test_a_baseline_whose_import_fails_says_why_on_the_board(monkeypatch):
    cuda = types.SimpleNamespace(kind="cuda")
    monkeypatch.setitem(sys.modules, "torch", None)  # installed per find_spec, broken on import
    why = fla_ops.ChunkKda().available(cuda)
    assert why.startswith("torch does not import: ")
    assert gemm_peers.PyptxGemm().available(cuda).startswith("torch does not import: ")
    assert fla_ops.ChunkKda().available(types.SimpleNamespace(kind="sim")) == \
        "torch baselines run on cuda boards only"
