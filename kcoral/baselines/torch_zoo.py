"""Baselines for the zoo's memory-bound kernels: each op eager (``torch.<op>``) and compiled
(``torch.compile.<op>``), registered only when torch is installed.

Like `torch_ops`, they run torch on tensors that alias the job's device buffers (roles name the
buffers) on the worker's stream, timed with the same events and L2 flush as the candidate.
The compiled variant is compiled and run once in ``prepare()``, so compilation never lands in
the timed region; it needs triton (inductor's GPU code generator), and says so when it is
missing. Ops that produce new tensors (the norms, quantization, activations) leave the job's
output buffers alone: they are timing baselines. ``rope`` rotates ``x`` in place, ``transpose``
and ``copy`` write ``out``, as the zoo kernels do.

| op | roles | args | what runs |
| --- | --- | --- | --- |
| rms_norm | x [R,C], w [C] | eps | F.rms_norm(x, (C,), w, eps) |
| layer_norm | x, w, b | eps | F.layer_norm(x, (C,), w, b, eps) |
| add_rms_norm | x, residual, w | eps | h = x + residual; F.rms_norm(h, (C,), w, eps) |
| fp8_quant | x [R,C] | amax_min | per-row amax -> scale, q = e4m3(x * 448 / amax) |
| silu_mul | a, b | | F.silu(a) * b |
| gelu_tanh | x | | F.gelu(x, approximate="tanh") |
| rope | x [T,H,D], cos, sin [T,D/2] | | rotate-half RoPE of x, in place |
| transpose | x [R,C], out [C,R] | | out.copy_(x.t()) |
| copy | x, out | | out.copy_(x) |

``torch.copy_like`` (eager only, `CopyLike`) copies ``x`` into a buffer of its own: the copy
floor at a kernel's own bytes, timed in its job.
"""

from __future__ import annotations

from kcoral.baselines.torch_ops import TorchBaseline, torch_available
from kcoral.plugins import hookimpl

# torch (and triton) are imported inside the functions: optional dependencies, present only on
# GPU hosts; the daemon and its tests run without them.

E4M3_MAX = 448.0


# --- the ops: args -> a function of the role tensors (torch imported by the caller) -------------

def _rms_norm(args):
    import torch.nn.functional as F  # optional dependency: torch
    eps = float(args.get("eps", 1e-6))
    return lambda x, w: F.rms_norm(x, (x.shape[-1],), w, eps)


def _layer_norm(args):
    import torch.nn.functional as F  # optional dependency: torch
    eps = float(args.get("eps", 1e-5))
    return lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, eps)


def _add_rms_norm(args):
    import torch.nn.functional as F  # optional dependency: torch
    eps = float(args.get("eps", 1e-6))

    def f(x, residual, w):
        h = x + residual
        return h, F.rms_norm(h, (h.shape[-1],), w, eps)
    return f


def _fp8_quant(args):
    import torch  # optional dependency: torch
    amax_min = float(args.get("amax_min", 1e-12))

    def f(x):
        amax = x.abs().amax(dim=-1, keepdim=True).float().clamp_min(amax_min)
        q = (x.float() * (E4M3_MAX / amax)).to(torch.float8_e4m3fn)
        return q, (amax / E4M3_MAX).squeeze(-1)
    return f


def _silu_mul(args):
    import torch.nn.functional as F  # optional dependency: torch
    return lambda a, b: F.silu(a) * b


def _gelu_tanh(args):
    import torch.nn.functional as F  # optional dependency: torch
    return lambda x: F.gelu(x, approximate="tanh")


def _rope(args):
    def f(x, cos, sin):
        half = x.shape[-1] // 2
        c, s = cos[:, None, :], sin[:, None, :]
        x1, x2 = x[..., :half].float(), x[..., half:].float()
        x[..., :half] = (x1 * c - x2 * s).to(x.dtype)
        x[..., half:] = (x2 * c + x1 * s).to(x.dtype)
    return f


def _transpose(args):
    return lambda x, out: out.copy_(x.t())


def _copy(args):
    return lambda x, out: out.copy_(x)


OPS = {  # op -> (roles, builder)
    "rms_norm": (("x", "w"), _rms_norm),
    "layer_norm": (("x", "w", "b"), _layer_norm),
    "add_rms_norm": (("x", "residual", "w"), _add_rms_norm),
    "fp8_quant": (("x",), _fp8_quant),
    "silu_mul": (("a", "b"), _silu_mul),
    "gelu_tanh": (("x",), _gelu_tanh),
    "rope": (("x", "cos", "sin"), _rope),
    "transpose": (("x", "out"), _transpose),
    "copy": (("x", "out"), _copy),
}


class ZooOp(TorchBaseline):
    """One zoo op, eager or compiled (see the module docstring for roles and args)."""

    def __init__(self, op: str, compiled: bool):
        self.op, self.compiled = op, compiled
        self.roles, self.build = OPS[op]
        self.name = f"torch.compile.{op}" if compiled else f"torch.{op}"

    def available(self, device):
        why = super().available(device)
        if why or not self.compiled:
            return why
        try:
            import triton  # noqa: F401  (optional dependency: only torch.compile's GPU backend needs it)
        except Exception as e:
            return f"torch.compile needs triton (inductor's GPU code generator): {e}"
        return None

    def make(self, t, args):
        import torch  # optional dependency: torch
        fn = self.build(args)
        tensors = [t[r] for r in self.roles]
        if self.compiled:
            fn = torch.compile(fn, dynamic=False)
            fn(*tensors)  # compile (and autotune) now, outside the timed region
            torch.cuda.synchronize()

        def run():
            fn(*tensors)
        run._keep = tensors
        return run


class CopyLike(TorchBaseline):
    """``torch.copy_like``: a device-to-device copy of ``x``'s bytes into a buffer of its own
    (allocated before timing, never a job buffer: nothing of the job is written).

    Why: "90% of copy bandwidth" was a ratio to a remembered figure (4.25 TB/s, a large copy
    measured once). A kernel that streams a buffer in place (KDA decode's state: read and
    written once) is compared here with the copy of that same buffer under the same protocol
    (L2 flush, events, the same clock), in the same job; the copy's own start-up and tail at
    that size are then in both."""

    name = "torch.copy_like"
    roles = ("x",)

    def make(self, t, args):
        import torch  # optional dependency: torch
        x = t["x"]
        out = torch.empty_like(x)

        def run():
            out.copy_(x)
        run._keep = (x, out)
        return run


def baselines() -> list:
    """Every zoo baseline: each op eager then compiled, in OPS order, then `CopyLike`."""
    return [ZooOp(op, compiled) for op in OPS for compiled in (False, True)] + [CopyLike()]


@hookimpl
def kcoral_register_baselines(registry):
    if torch_available():
        for b in baselines():
            registry.add(b, owner="kcoral.baselines.torch_zoo")
