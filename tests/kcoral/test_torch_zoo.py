"""kcoral/baselines/torch_zoo.py: the zoo's eager and torch.compile baselines."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import tirxh.lang as T
from kcoral.baselines import BaselineRegistry
from kcoral.baselines import fla_ops, torch_zoo, torch_zoo2
from tests.zoo._zoo import ZOO, load


def test_each_op_is_registered_eager_and_compiled_when_torch_imports(monkeypatch):
    monkeypatch.setattr(torch_zoo, "torch_available", lambda: True)
    reg = BaselineRegistry()
    torch_zoo.kcoral_register_baselines(reg)
    assert len(reg.names()) == 2 * len(torch_zoo.OPS) + 1
    assert {"torch.rms_norm", "torch.compile.rms_norm", "torch.rope",
            "torch.compile.copy", "torch.copy_like"} <= set(reg.names())
    monkeypatch.setattr(torch_zoo, "torch_available", lambda: False)
    empty = BaselineRegistry()
    torch_zoo.kcoral_register_baselines(empty)
    assert empty.names() == []


def test_they_run_on_cuda_boards_only():
    for b in torch_zoo.baselines():
        assert b.available(SimpleNamespace(kind="sim")) == "torch baselines run on cuda boards only"


def _zoo_suites() -> list:
    out = []
    for path in sorted(Path(ZOO).glob("*.py")):
        mod = load(path.stem)
        out += [v for v in vars(mod).values() if isinstance(v, T.Suite)]
    return out


def test_every_zoo_baseline_names_a_registered_op_and_binds_its_roles_to_buffers():
    """A suite naming a baseline that does not exist, or a role that is not a buffer of the
    job, would only fail on the GPU host: caught here."""
    ops = {b.name: b for b in
           torch_zoo.baselines() + torch_zoo2.baselines() + fla_ops.baselines()}
    others = ("torch.matmul", "torch.sdpa", "pyptx.gemm_hopper", "torch._scaled_mm",
              "torch._scaled_mm.fast_accum")  # torch_ops and gemm_peers: tested there
    checked = 0
    for suite in _zoo_suites():
        params = {p.name for p in suite.kernel.runtime_params if p.kind == "ptr"}
        for spec in suite.baselines:
            if spec["name"] in others:
                continue
            b = ops[spec["name"]]
            for role in b.roles:
                assert spec["args"].get(role) in params, (suite.name, spec)
            checked += 1
    assert checked >= 18


@pytest.fixture(scope="module")
def torch_cpu():
    return pytest.importorskip("torch", reason="the op math is checked with torch on the CPU")


def _t(torch, a):
    a = np.asarray(a)
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


@pytest.mark.parametrize("stem,suite,case,op", [
    ("norms", "RMSNORM", "r5_c1000_b64", "rms_norm"),
    ("norms", "LAYERNORM", "r5_c1000_b64", "layer_norm"),
    ("activations", "SWIGLU", "n4099", "silu_mul"),
    ("activations", "GELU_TANH", "n4099", "gelu_tanh"),
])
def test_eager_ops_compute_what_the_zoo_references_compute(torch_cpu, stem, suite, case, op):
    """Within two bf16 ulps (torch rounds intermediate results to bf16 where the zoo does not)."""
    s = getattr(load(stem), suite)
    c = next(x for x in s.cases if x.name == case)
    inputs = s.make_inputs(c)
    spec = next(b for b in s.baselines if b["name"] == f"torch.{op}")
    roles, build = torch_zoo.OPS[op]
    got = build(spec["args"])(*[_t(torch_cpu, inputs[spec["args"][r]]) for r in roles])
    want = s.expected(c, inputs)[s.outputs[0]].astype(np.float64)
    got = got.float().numpy().astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=2 ** -6, atol=1e-5)
