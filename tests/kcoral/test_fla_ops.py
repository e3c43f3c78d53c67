"""``kcoral.baselines.fla_ops`` without torch or FLA on this machine: stand-in ``torch`` and ``fla``
modules record what the baselines call -- registration only when FLA imports, the roles each
takes (required and optional), the fused-gate keyword arguments, copies into ``out``/``ht`` only
when named, the forward+backward step through autograd, the in-place decode."""

import sys
import types

import numpy as np
import pytest

from kcoral.baselines import BaselineRegistry
from kcoral.baselines import fla_ops
from kcoral.errors import JobFailure


class Tensor(np.ndarray):
    """numpy with the few torch tensor methods the baselines use."""

    def long(self):
        return self.astype(np.int64).view(Tensor)

    def cpu(self):
        return self

    def copy_(self, other):
        self[...] = other
        return self

    def detach(self):
        return self

    def clone(self):
        return self.copy().view(Tensor)

    def requires_grad_(self):
        return self

    @property
    def device(self):
        return "cuda:0"


class FakeDevice:
    kind = "cuda"

    def __init__(self, arrays):
        self.arrays = {n: np.asarray(a).view(Tensor) for n, a in arrays.items()}

    def torch_tensor(self, name, dtype, shape, torch):
        return self.arrays[name].reshape(shape)


@pytest.fixture
def fake(monkeypatch):
    calls = []
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_available=lambda: True)
    torch.float32 = np.float32
    class Ctx:
        def __enter__(self):
            calls.append(("inference_mode",))

        def __exit__(self, *a):
            return False
    torch.inference_mode = Ctx

    class Generator:
        def __init__(self, device):
            self.rng = np.random.default_rng(0)

        def manual_seed(self, s):
            return self
    torch.Generator = Generator
    torch.randn = lambda shape, generator, device, dtype: generator.rng.standard_normal(
        shape).astype(np.float32).view(Tensor)
    torch.autograd = types.SimpleNamespace(
        grad=lambda outs, inputs, grads, **kw: calls.append(
            ("grad", len(outs), len(inputs)) + ((kw,) if kw else ())))

    def chunk_kda(q, k, v, g, beta, **kw):
        calls.append(("chunk_kda", sorted(kw)))
        calls[-1] += (kw,)
        ht = np.full((1, 1, 2, 2), 7.0) if kw.get("output_final_state") else None
        return v * 2, ht

    def fused_recurrent_kda_fwd(q, k, v, g, beta, **kw):
        calls.append(("fused_recurrent_kda_fwd", kw))
        kw["out"][...] = v
        kw["initial_state"][...] += 1
    kda = types.ModuleType("fla.ops.kda")
    kda.chunk_kda = chunk_kda
    rec = types.ModuleType("fla.ops.kda.fused_recurrent")
    rec.fused_recurrent_kda_fwd = fused_recurrent_kda_fwd
    for name, mod in (("torch", torch), ("fla", types.ModuleType("fla")),
                      ("fla.ops", types.ModuleType("fla.ops")), ("fla.ops.kda", kda),
                      ("fla.ops.kda.fused_recurrent", rec)):
        monkeypatch.setitem(sys.modules, name, mod)
    return calls


def _arrays(names):
    shapes = {"q": (1, 4, 1, 2), "k": (1, 4, 1, 2), "v": (1, 4, 1, 2), "g": (1, 4, 1, 2),
              "beta": (1, 4, 1), "A_log": (1,), "dt_bias": (1, 2), "h0": (1, 1, 2, 2),
              "ht": (1, 1, 2, 2), "out": (1, 4, 1, 2), "cu_seqlens": (2,), "state": (1, 1, 2, 2)}
    arrays = {n: np.arange(np.prod(shapes[n]), dtype=np.float32).reshape(shapes[n]) + 1
              for n in names}
    doc = {"buffers": [{"name": n, "dtype": "f32", "shape": list(a.shape)}
                       for n, a in arrays.items()]}
    return arrays, doc


def _baseline(name):
    return {b.name: b for b in fla_ops.baselines()}[name]


def test_registers_all_four_only_when_fla_is_installed(monkeypatch):
    reg = BaselineRegistry()
    monkeypatch.setattr(fla_ops, "fla_available", lambda: False)
    fla_ops.kcoral_register_baselines(reg)
    assert reg.names() == []
    monkeypatch.setattr(fla_ops, "fla_available", lambda: True)
    fla_ops.kcoral_register_baselines(reg)
    assert sorted(reg.names()) == ["fla.chunk_kda", "fla.chunk_kda.bwd", "fla.chunk_kda.fwd_bwd",
                                   "fla.fused_recurrent_kda"]


def test_forward_with_fused_gate_copies_out_and_final_state(fake):
    names = ("q", "k", "v", "g", "beta", "A_log", "dt_bias", "h0", "cu_seqlens", "out", "ht")
    arrays, doc = _arrays(names)
    dev = FakeDevice(arrays)
    run = _baseline("fla.chunk_kda").prepare(dev, doc, dict({n: n for n in names}, l2norm=True))
    run()
    kw = fake[-1][2]
    assert kw["use_gate_in_kernel"] and kw["safe_gate"] and kw["lower_bound"] == -5.0
    assert kw["use_qk_l2norm_in_kernel"] and kw["output_final_state"]
    assert kw["dt_bias"].shape == (2,) and kw["cu_seqlens"].dtype == np.int64
    assert kw["initial_state"] is not None
    np.testing.assert_array_equal(dev.arrays["out"], arrays["v"] * 2)
    np.testing.assert_array_equal(dev.arrays["ht"], np.full((1, 1, 2, 2), 7.0))
    assert ("inference_mode",) in fake


def test_forward_without_out_only_times(fake):
    names = ("q", "k", "v", "g", "beta")
    arrays, doc = _arrays(names)
    run = _baseline("fla.chunk_kda").prepare(FakeDevice(arrays), doc, {n: n for n in names})
    run()
    kw = fake[-1][2]
    assert "use_gate_in_kernel" not in kw and kw["initial_state"] is None
    assert not kw["output_final_state"]


def test_forward_backward_takes_gradients_of_every_input(fake):
    names = ("q", "k", "v", "g", "beta", "A_log", "dt_bias", "h0")
    arrays, doc = _arrays(names)
    run = _baseline("fla.chunk_kda.fwd_bwd").prepare(FakeDevice(arrays), doc,
                                                     {n: n for n in names})
    run()
    assert fake[-2][0] == "chunk_kda" and fake[-2][2]["output_final_state"]
    assert fake[-1] == ("grad", 2, 8)        # (o, ht) against q, k, v, g, beta, A_log, dt, h0


def test_backward_alone_runs_the_forward_once_and_keeps_its_graph(fake):
    names = ("q", "k", "v", "g", "beta", "A_log", "dt_bias", "h0", "cu_seqlens")
    arrays, doc = _arrays(names)
    run = _baseline("fla.chunk_kda.bwd").prepare(FakeDevice(arrays), doc,
                                                 dict({n: n for n in names}, l2norm=True))
    assert [c[0] for c in fake] == ["chunk_kda"]            # the forward, while preparing
    run()
    run()
    assert [c[0] for c in fake] == ["chunk_kda", "grad", "grad"]
    assert fake[-1] == ("grad", 2, 8, {"retain_graph": True})


def test_decode_updates_the_state_in_place(fake):
    names = ("q", "k", "v", "g", "beta", "A_log", "dt_bias", "state", "out")
    arrays, doc = _arrays(names)
    before = arrays["state"].copy()
    dev = FakeDevice(arrays)
    run = _baseline("fla.fused_recurrent_kda").prepare(dev, doc, {n: n for n in names})
    run()
    kw = fake[-1][1]
    assert kw["inplace_final_state"] and kw["use_gate_in_kernel"] and "safe_gate" not in kw
    np.testing.assert_array_equal(dev.arrays["state"], before + 1)
    np.testing.assert_array_equal(dev.arrays["out"], arrays["v"])


def test_a_missing_required_role_is_a_job_failure(fake):
    arrays, doc = _arrays(("q", "k", "v", "g"))
    with pytest.raises(JobFailure, match=r"baseline 'fla.chunk_kda': args.beta \(a buffer name\) "
                                         r"is missing"):
        _baseline("fla.chunk_kda").prepare(FakeDevice(arrays), doc,
                                           {n: n for n in ("q", "k", "v", "g")})
