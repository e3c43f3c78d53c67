"""``kcoral.baselines.torch_ops``'s ``torch.sdpa`` without torch on this machine: a stand-in
``torch`` (numpy underneath) checks what SDPA is called with -- the [B, S, H, D] layout as
transposed views, grouped-query heads, causal, the optional ``out`` -- and the argument errors;
and that the zoo attention suite's baseline arguments bind to its job's buffers."""

import sys
import types

import numpy as np
import pytest

import tirxh.lang as T
from kcoral.baselines import torch_ops
from kcoral.errors import JobFailure

from tests.zoo._zoo import load


class FakeTensor:
    """The little of torch.Tensor the baseline uses: shape, transpose(1, 2), copy_."""

    def __init__(self, a):
        self.a = a

    @property
    def shape(self):
        return self.a.shape

    def transpose(self, i, j):
        return FakeTensor(np.swapaxes(self.a, i, j))

    def copy_(self, other):
        self.a[...] = other.a


class FakeDevice:
    kind = "cuda"

    def __init__(self, arrays):
        self.arrays = arrays

    def torch_tensor(self, name, dtype, shape, torch):
        return FakeTensor(self.arrays[name].reshape(shape))


@pytest.fixture
def calls(monkeypatch):
    """SDPA by numpy (float64), recording each call's keyword arguments."""
    seen = []

    def sdpa(q, k, v, is_causal=False, scale=None, enable_gqa=False):
        seen.append({"is_causal": is_causal, "scale": scale, "enable_gqa": enable_gqa,
                     "q_shape": q.shape})
        g = q.shape[1] // k.shape[1]
        kk, vv = np.repeat(k.a, g, axis=1), np.repeat(v.a, g, axis=1)
        s = q.a @ np.swapaxes(kk, -1, -2) * (scale or q.shape[-1] ** -0.5)
        if is_causal:
            s = np.where(np.tri(s.shape[-2], s.shape[-1], dtype=bool), s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        return FakeTensor(p / p.sum(-1, keepdims=True) @ vv)
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_available=lambda: True)
    nn = types.ModuleType("torch.nn")
    functional = types.ModuleType("torch.nn.functional")
    functional.scaled_dot_product_attention = sdpa
    torch.nn, nn.functional = nn, functional
    for name, mod in (("torch", torch), ("torch.nn", nn), ("torch.nn.functional", functional)):
        monkeypatch.setitem(sys.modules, name, mod)
    return seen


def _job(arrays):
    return {"buffers": [{"name": n, "dtype": "f32", "shape": list(a.shape)}
                        for n, a in arrays.items()]}


def _attention(q, k, v, causal):
    """Exact attention on [B, S, H, D] arrays (grouped heads repeated)."""
    g = q.shape[2] // k.shape[2]
    kk, vv = np.repeat(k, g, axis=2), np.repeat(v, g, axis=2)
    s = np.einsum("bihd,bjhd->bhij", q, kk) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tri(s.shape[-2], s.shape[-1], dtype=bool), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhij,bjhd->bihd", p / p.sum(-1, keepdims=True), vv)


@pytest.mark.parametrize("causal", [False, True])
def test_bshd_buffers_run_as_transposed_views_with_grouped_heads(calls, causal):
    rng = np.random.default_rng(0)
    arrays = {"q": rng.standard_normal((2, 5, 4, 8)), "k": rng.standard_normal((2, 5, 2, 8)),
              "v": rng.standard_normal((2, 5, 2, 8)), "o": np.zeros((2, 5, 4, 8))}
    run = torch_ops.Sdpa().prepare(FakeDevice(arrays), _job(arrays), {
        "q": "q", "k": "k", "v": "v", "out": "o", "layout": "bshd", "causal": causal})
    run()
    assert calls == [{"is_causal": causal, "scale": None, "enable_gqa": True,
                      "q_shape": (2, 4, 5, 8)}]             # [B, H, S, D] views, GQA on
    np.testing.assert_allclose(arrays["o"], _attention(arrays["q"], arrays["k"], arrays["v"],
                                                       causal), rtol=1e-12)


def test_without_out_the_result_is_dropped_and_mha_has_no_gqa_flag(calls):
    """The timing form: SDPA runs, nothing is copied into a job buffer."""
    arrays = {n: np.ones((1, 2, 3, 4)) for n in ("q", "k", "v")}
    run = torch_ops.Sdpa().prepare(FakeDevice(arrays), _job(arrays),
                                   {"q": "q", "k": "k", "v": "v"})
    assert run() is None
    assert calls[0]["enable_gqa"] is False and calls[0]["q_shape"] == (1, 2, 3, 4)


@pytest.mark.parametrize("shapes,args,match", [
    ({"q": (1, 4, 3, 8), "k": (1, 3, 3, 8), "v": (1, 3, 3, 8)}, {},
     r"'torch.sdpa': q \(1, 4, 3, 8\), k \(1, 3, 3, 8\).*divisor of Q's heads"),
    ({"q": (1, 4, 3, 8), "k": (1, 2, 3, 8), "v": (1, 2, 4, 8)}, {}, r"K and V must match"),
    ({"q": (1, 2, 3, 8), "k": (1, 2, 3, 8), "v": (1, 2, 3, 8)}, {"layout": "sbhd"},
     r"args.layout 'sbhd' is not 'bhsd' or 'bshd'"),
])
def test_bad_shapes_and_layouts_are_job_failures(calls, shapes, args, match):
    arrays = {n: np.zeros(s) for n, s in shapes.items()}
    with pytest.raises(JobFailure, match=match):
        torch_ops.Sdpa().prepare(FakeDevice(arrays), _job(arrays),
                                 dict({"q": "q", "k": "k", "v": "v"}, **args))


def test_a_missing_required_role_is_named(calls):
    arrays = {"q": np.zeros((1, 1, 1, 8)), "k": np.zeros((1, 1, 1, 8))}
    with pytest.raises(JobFailure, match=r"'torch.sdpa': args.v \(a buffer name\) is missing"):
        torch_ops.Sdpa().prepare(FakeDevice(arrays), _job(arrays), {"q": "q", "k": "k"})


def test_zoo_attention_baseline_binds_to_its_buffers():
    """What zoo/kernels/attention.py asks of torch.sdpa: its roles name pointer parameters and
    its causal flag is a case parameter, so build_job substitutes each case's value."""
    suite = load("attention").SUITE
    params = {p.name for p in suite.kernel.runtime_params if p.kind == "ptr"}
    (spec,) = [b for b in suite.baselines if b["name"] == "torch.sdpa"]
    for role in torch_ops.Sdpa.roles + tuple(r for r in torch_ops.Sdpa.optional_roles
                                             if r in spec["args"]):
        assert spec["args"][role] in params
    assert spec["args"]["layout"] == "bshd" and spec["args"]["causal"] == "CAUSAL"
    assert all(isinstance(c.params.get("CAUSAL"), bool) for c in suite.cases)
    assert isinstance(suite, T.Suite)
