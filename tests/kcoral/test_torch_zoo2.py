"""``kcoral.baselines.torch_zoo2`` without torch on this machine: a stand-in ``torch`` module (numpy
underneath) exercises the plumbing -- registration only when torch imports, eager and compiled
names, compilation inside ``prepare()``, argument errors, and ``available()`` reasons."""

import sys
import types

import numpy as np
import pytest

from kcoral.baselines import BaselineRegistry
from kcoral.baselines import torch_zoo2 as tz
from kcoral.errors import JobFailure


class FakeDevice:
    kind = "cuda"

    def __init__(self, arrays):
        self.arrays = arrays

    def torch_tensor(self, name, dtype, shape, torch):
        return self.arrays[name].reshape(shape)


@pytest.fixture
def fake_torch(monkeypatch):
    calls = {"compile": 0, "compiled_runs": 0}
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_available=lambda: True)
    torch.softmax = lambda x, dim: np.exp(x) / np.exp(x).sum(axis=dim, keepdims=True)
    torch.cumsum = lambda x, dim: np.cumsum(x, axis=dim)
    torch.sum = lambda x, dim: np.sum(x, axis=dim)
    torch.topk = lambda x, k, dim, largest, sorted: np.sort(x, axis=dim)[..., ::-1][..., :k]

    def compile_(fn, dynamic):
        calls["compile"] += 1

        def compiled(*a):
            calls["compiled_runs"] += 1
            return fn(*a)
        return compiled
    torch.compile = compile_
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "triton", types.ModuleType("triton"))
    return calls


def _doc(x):
    return {"buffers": [{"name": "x", "dtype": "f32", "shape": list(x.shape)}]}


def test_registers_eager_and_compiled_only_when_torch_imports(monkeypatch):
    reg = BaselineRegistry()
    monkeypatch.setattr(tz, "torch_available", lambda: False)
    tz.kcoral_register_baselines(reg)
    assert reg.names() == []
    monkeypatch.setattr(tz, "torch_available", lambda: True)
    tz.kcoral_register_baselines(reg)
    assert reg.names() == sorted(f"torch.{prefix}{op}" for op in ("softmax", "topk", "cumsum",
                                                                    "sum", "cross_entropy",
                                                                    "decode_sdpa")
                                 for prefix in ("", "compile."))


def test_compiled_baseline_compiles_in_prepare(fake_torch):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = {bl.name: bl for bl in tz.baselines()}["torch.compile.cumsum"]
    assert b.available(FakeDevice({})) is None
    run = b.prepare(FakeDevice({"x": x}), _doc(x), {"x": "x"})
    assert fake_torch == {"compile": 1, "compiled_runs": 1}  # compiled and warmed, untimed
    np.testing.assert_array_equal(run(), np.cumsum(x, axis=-1))
    assert fake_torch["compiled_runs"] == 2


def test_row_sum_baseline_sums_each_row(fake_torch):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = {bl.name: bl for bl in tz.baselines()}["torch.compile.sum"]
    run = b.prepare(FakeDevice({"x": x}), _doc(x), {"x": "x"})
    np.testing.assert_array_equal(run(), x.sum(axis=-1))


def test_eager_baseline_runs_the_torch_op(fake_torch):
    x = np.array([[1.0, 5.0, 3.0]], np.float32)
    b = {bl.name: bl for bl in tz.baselines()}["torch.topk"]
    run = b.prepare(FakeDevice({"x": x}), _doc(x), {"x": "x", "k": 2})
    np.testing.assert_array_equal(run(), [[5.0, 3.0]])
    assert fake_torch["compile"] == 0


@pytest.mark.parametrize("args,match", [
    ({"x": "x"}, r"baseline 'torch.topk': args.k must be a positive integer; got None"),
    ({"x": "x", "k": 0}, r"args.k must be a positive integer; got 0"),
    ({"k": 4}, r"baseline 'torch.topk': args.x \(a buffer name\) is missing"),
])
def test_bad_arguments_are_job_failures(fake_torch, args, match):
    x = np.zeros((2, 8), np.float32)
    b = {bl.name: bl for bl in tz.baselines()}["torch.topk"]
    with pytest.raises(JobFailure, match=match):
        b.prepare(FakeDevice({"x": x}), _doc(x), args)


def test_decode_needs_its_shape_arguments(fake_torch):
    b = {bl.name: bl for bl in tz.baselines()}["torch.decode_sdpa"]
    arrays = {n: np.zeros(4, np.float32) for n in b.roles}
    doc = {"buffers": [{"name": n, "dtype": "f32", "shape": [4]} for n in b.roles]}
    with pytest.raises(JobFailure, match=r"'torch.decode_sdpa': args.kv_heads must be a positive"):
        b.prepare(FakeDevice(arrays), doc, {n: n for n in b.roles})


def test_availability_reasons(fake_torch, monkeypatch):
    b = {bl.name: bl for bl in tz.baselines()}["torch.compile.softmax"]
    assert "cuda boards only" in b.available(types.SimpleNamespace(kind="sim"))
    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` raises ImportError
    assert b.available(FakeDevice({})).startswith("torch.compile needs triton on CUDA")
