"""Flash Linear Attention's Kimi Delta Attention (KDA) kernels as baselines, registered when
``fla`` (flash-linear-attention, with fla-core) is installed (imported on the board that runs
one; a failed import is the baseline's `available` reason):

- ``fla.chunk_kda``: the chunked forward ``fla.ops.kda.chunk_kda``;
- ``fla.chunk_kda.fwd_bwd``: the same forward and its backward through FLA's autograd
  (``torch.autograd.grad`` of (o, ht) against fixed random output gradients, for every input
  FLA differentiates), timed as one step;
- ``fla.chunk_kda.bwd``: that backward alone (the forward run once, its graph kept);
- ``fla.fused_recurrent_kda``: the decode kernel, updating the state in place (vLLM's use).

Buffer roles (FLA's layouts): ``q``, ``k``, ``v``, ``g`` (log-decay, or the raw gate with
``A_log``), ``beta``; optional ``A_log`` [H] and ``dt_bias`` [H, K] (the gate fused in the kernel:
``use_gate_in_kernel``, ``safe_gate`` with ``lower_bound``, default -5, as the zoo's kda kernels
do), ``h0`` (initial state, f32 [N, H, K, V]), ``cu_seqlens`` (int32 [N + 1]: a varlen pack;
converted to int64 once, outside the timing), ``out`` and ``ht`` (when given, the output and the
final state are copied there: usable as a reference; without them the baseline only times, with
no copy FLA itself would not make). Options: ``l2norm`` (``use_qk_l2norm_in_kernel``), ``scale``.
The decode takes ``state`` (in place) and ``out`` instead of ``h0``/``ht``.
FLA's dispatcher sends an inference-mode ``chunk_kda`` to FlashKDA when the ``flash_kda``
package is installed: the forward then measures that backend (``FLA_FLASH_KDA=0`` disables it).
"""

from __future__ import annotations

import copy

from kcoral.baselines.torch_ops import TorchBaseline, import_problem, installed, torch_available
from kcoral.plugins import hookimpl

LOWER_BOUND = -5.0


class _FlaKda(TorchBaseline):
    """Required `roles` plus the `optional` ones the job's args name."""

    optional: tuple = ()

    def available(self, device):
        return super().available(device) or import_problem("fla.ops.kda")

    def prepare(self, device, doc, args):
        view = copy.copy(self)  # TorchBaseline.prepare maps exactly `roles` to tensors
        view.roles = self.roles + tuple(r for r in self.optional if r in args)
        return TorchBaseline.prepare(view, device, doc, args)


def _kda_kwargs(t, args) -> dict:
    """chunk_kda / fused_recurrent_kda keyword arguments for the roles and options present."""
    kw = {"scale": args.get("scale")}
    if "A_log" in t:
        kw.update(use_gate_in_kernel=True, A_log=t["A_log"], safe_gate=True,
                  lower_bound=float(args.get("lower_bound", LOWER_BOUND)),
                  dt_bias=t["dt_bias"].reshape(-1) if "dt_bias" in t else None)
    if args.get("l2norm"):
        kw["use_qk_l2norm_in_kernel"] = True
    if "cu_seqlens" in t:
        kw["cu_seqlens"] = t["cu_seqlens"].long()
        kw["cu_seqlens_cpu"] = kw["cu_seqlens"].cpu()   # no device-to-host copy per call
    return kw


def _copy_out(t, o, ht):
    if "out" in t:
        t["out"].copy_(o.reshape(t["out"].shape))
    if "ht" in t and ht is not None:
        t["ht"].copy_(ht.reshape(t["ht"].shape))


class ChunkKda(_FlaKda):
    """``fla.ops.kda.chunk_kda`` forward (module docstring: roles and options)."""

    name = "fla.chunk_kda"
    roles = ("q", "k", "v", "g", "beta")
    optional = ("A_log", "dt_bias", "h0", "cu_seqlens", "out", "ht")

    def make(self, t, args):
        import torch  # optional dependency (operator-installed); imported only where it runs
        from fla.ops.kda import chunk_kda  # optional dependency (operator-installed)
        kw = dict(_kda_kwargs(t, args), initial_state=t.get("h0"),
                  output_final_state="ht" in t)

        def run():
            with torch.inference_mode():
                o, ht = chunk_kda(t["q"], t["k"], t["v"], t["g"], t["beta"], **kw)
                _copy_out(t, o, ht)
        return run


def _autograd(t, args):
    """(forward, inputs, grads) for a ``chunk_kda`` step under autograd: leaf copies of q, k, v,
    g, beta and, when present, A_log, dt_bias and h0 (`inputs`); `forward()` returns the outputs
    (o, and ht when h0 is given); `grads`, fixed N(0, 1) output gradients for them (seed 0)."""
    import torch  # optional dependency (operator-installed); imported only where it runs
    from fla.ops.kda import chunk_kda  # optional dependency (operator-installed)
    kw = _kda_kwargs(t, args)
    leaves = {n: t[n].detach().clone().requires_grad_() for n in
              ("q", "k", "v", "g", "beta", "A_log", "dt_bias", "h0") if n in t}
    if "A_log" in leaves:
        kw.update(A_log=leaves["A_log"], dt_bias=leaves.get("dt_bias"))
        if kw["dt_bias"] is not None:
            kw["dt_bias"] = kw["dt_bias"].reshape(-1)
    gen = torch.Generator(device=t["v"].device).manual_seed(0)
    do = torch.randn(t["v"].shape, generator=gen, device=t["v"].device, dtype=t["v"].dtype)
    dht = (torch.randn(t["h0"].shape, generator=gen, device=t["v"].device,
                       dtype=torch.float32) if "h0" in t else None)

    def forward():
        o, ht = chunk_kda(leaves["q"], leaves["k"], leaves["v"], leaves["g"], leaves["beta"],
                          initial_state=leaves.get("h0"), output_final_state=dht is not None,
                          **kw)
        return [o, ht] if dht is not None else [o]
    return forward, list(leaves.values()), [do, dht] if dht is not None else [do]


class ChunkKdaFwdBwd(_FlaKda):
    """``chunk_kda`` forward then backward (FLA's autograd): the gradients of (o, ht) against
    fixed N(0, 1) output gradients, with respect to q, k, v, g, beta and, when present, A_log,
    dt_bias and h0. Timing only (the gradients are not written to job buffers)."""

    name = "fla.chunk_kda.fwd_bwd"
    roles = ("q", "k", "v", "g", "beta")
    optional = ("A_log", "dt_bias", "h0", "cu_seqlens")

    def make(self, t, args):
        import torch  # optional dependency (operator-installed); imported only where it runs
        forward, inputs, grads = _autograd(t, args)

        def run():
            return torch.autograd.grad(forward(), inputs, grads)
        run._keep = (inputs, grads)
        return run


class ChunkKdaBwd(ChunkKdaFwdBwd):
    """FLA's backward alone: the forward runs once while the baseline is prepared (its graph
    kept), then each timed call is ``torch.autograd.grad(..., retain_graph=True)`` of the same
    outputs: the backward kernels (FLA's recomputation of the forward's intermediates
    included), no forward. Timing only."""

    name = "fla.chunk_kda.bwd"

    def make(self, t, args):
        import torch  # optional dependency (operator-installed); imported only where it runs
        forward, inputs, grads = _autograd(t, args)
        outs = forward()

        def run():
            return torch.autograd.grad(outs, inputs, grads, retain_graph=True)
        run._keep = (outs, inputs, grads)
        return run


class FusedRecurrentKda(_FlaKda):
    """``fla.ops.kda.fused_recurrent.fused_recurrent_kda_fwd`` decode: q, k, v, g, beta of TT
    tokens per sequence ([N, TT, H, .]), the state [N, H, K, V] f32 updated in place, o into
    ``out``."""

    name = "fla.fused_recurrent_kda"
    roles = ("q", "k", "v", "g", "beta", "state", "out")
    optional = ("A_log", "dt_bias")

    def make(self, t, args):
        import torch  # optional dependency (operator-installed); imported only where it runs
        from fla.ops.kda.fused_recurrent import fused_recurrent_kda_fwd  # optional dependency
        kw = _kda_kwargs(t, args)
        kw.pop("safe_gate", None)    # the recurrent kernel has no M = 16 path to select

        def run():
            with torch.inference_mode():
                fused_recurrent_kda_fwd(t["q"], t["k"], t["v"], t["g"], t["beta"],
                                        initial_state=t["state"], inplace_final_state=True,
                                        out=t["out"], **kw)
        return run


def fla_available() -> bool:
    return torch_available() and installed("fla")


def baselines() -> list:
    return [ChunkKda(), ChunkKdaFwdBwd(), ChunkKdaBwd(), FusedRecurrentKda()]


@hookimpl
def kcoral_register_baselines(registry):
    if fla_available():
        for b in baselines():
            registry.add(b, owner="kcoral.baselines.fla_ops")
