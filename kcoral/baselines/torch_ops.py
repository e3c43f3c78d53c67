"""``torch.matmul`` and ``torch.sdpa`` baselines, registered only when torch is installed.

They run on the worker's device through torch tensors that alias the job's buffers (the cuda
board uses the primary context, which torch shares), on torch's current stream; the cuda device
times them with the same events and L2 flush as the candidate.
"""

from __future__ import annotations

import importlib
import importlib.util

from kcoral.dtypes import dtype_of
from kcoral.errors import JobFailure
from kcoral.plugins import hookimpl


def installed(module: str) -> bool:
    """Whether `module` is installed, found without importing it.

    Registration asks only this. The daemon and every board's worker register the baselines when
    they start, and importing torch, FLA (triton and all its ops) and pyptx there cost a fresh GPU
    machine ~40 s of each device call (session 9); the import happens in `available` instead, on
    the one board that runs the baseline, and a failed import is its stated reason."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def torch_available() -> bool:
    return installed("torch")


def import_problem(module: str) -> "str | None":
    """None once `module` imports, else why not (a baseline's `available` reason)."""
    try:
        importlib.import_module(module)
        return None
    except Exception as e:  # any failure of an optional dependency is a reason, not a crash
        return f"{module} does not import: {type(e).__name__}: {e}"


class TorchBaseline:
    """Common plumbing: map role -> buffer name -> torch tensor over the device buffer."""

    name = ""
    roles: tuple = ()
    optional_roles: tuple = ()   # bound when args name them

    def available(self, device):
        if getattr(device, "kind", "") != "cuda":
            return "torch baselines run on cuda boards only"
        why = import_problem("torch")
        if why:
            return why
        import torch  # optional dependency (operator-installed): imported only where it runs
        if not torch.cuda.is_available():
            return "torch reports no CUDA device"
        return None

    def prepare(self, device, doc, args):
        import torch  # optional dependency (operator-installed): imported only where it runs
        bufs = {b["name"]: b for b in doc["buffers"]}
        t = {}
        for role in self.roles + tuple(r for r in self.optional_roles if r in args):
            name = args.get(role)
            if name is None:
                raise JobFailure("validation.baseline", f"baseline {self.name!r}: args.{role} "
                                 f"(a buffer name) is missing")
            b = bufs.get(name) or bufs.get(name[len("__ref_"):])
            if b is None:
                raise JobFailure("validation.baseline", f"baseline {self.name!r}: args.{role} "
                                 f"names unknown buffer {name!r}")
            t[role] = device.torch_tensor(name, dtype_of(b["dtype"]), tuple(b["shape"]), torch)
        return self.make(t, args)

    def make(self, t, args):  # pragma: no cover - interface
        raise NotImplementedError


class Matmul(TorchBaseline):
    """Two forms of args:

    - buffers: ``a`` [M,K], ``b`` [K,N] (or [N,K] with ``"transpose_b": true``), ``out`` [M,N]
      name job buffers; usable as a correctness reference;
    - shapes: ``M``, ``N``, ``K`` (ints), ``dtype`` (``bf16``/``f16``/``f32``) and
      ``transpose_b``: the baseline times ``torch.matmul`` on its own random tensors of those
      shapes (output in ``dtype``, as cuBLAS would be called for it); timing only.
    """

    name = "torch.matmul"
    roles = ("a", "b", "out")

    def prepare(self, device, doc, args):
        if "a" in args:
            return super().prepare(device, doc, args)
        import torch  # optional dependency (operator-installed); imported only where it runs
        missing = [k for k in ("M", "N", "K") if not isinstance(args.get(k), int)]
        if missing:
            raise JobFailure("validation.baseline", f"baseline 'torch.matmul': args needs "
                             f"buffer roles a/b/out or integer {'/'.join(missing)}; got {args}")
        dt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}.get(
            args.get("dtype", "bf16"))
        if dt is None:
            raise JobFailure("validation.baseline", f"baseline 'torch.matmul': dtype "
                             f"{args.get('dtype')!r} is not bf16, f16 or f32")
        dev = f"cuda:{device.info().get('ordinal', 0)}"
        g = torch.Generator(device=dev).manual_seed(0)
        M, N, K = args["M"], args["N"], args["K"]
        a = torch.randn(M, K, device=dev, dtype=dt, generator=g)
        b = torch.randn(N, K, device=dev, dtype=dt, generator=g) if args.get("transpose_b") \
            else torch.randn(K, N, device=dev, dtype=dt, generator=g)
        out = torch.empty(M, N, device=dev, dtype=dt)
        bb = b.t() if args.get("transpose_b") else b

        def run():
            torch.matmul(a, bb, out=out)
        run._keep = (a, b, out)
        return run

    def make(self, t, args):
        import torch  # optional dependency (operator-installed); imported only where it runs
        a, b, out = t["a"], t["b"], t["out"]
        if args.get("transpose_b") or args.get("b_layout") == "nk":
            b = b.t()
        if out.dtype != a.dtype:
            # e.g. bf16 inputs, f32 output: a reference computed in the output's precision
            # (not a fair timing of cuBLAS's bf16 GEMM; use the shapes form for that)
            def run():
                torch.matmul(a.to(out.dtype), b.to(out.dtype), out=out)
            return run

        def run():
            torch.matmul(a, b, out=out)
        return run


class Sdpa(TorchBaseline):
    """``torch.nn.functional.scaled_dot_product_attention`` on the job's buffers.

    args: buffers ``q``, ``k``, ``v`` and optionally ``out``; ``layout`` "bhsd" ([B, H, S, D],
    the default) or "bshd" ([B, S, H, D], the zoo attention kernel's: passed to SDPA as
    transposed views, nothing copied); ``causal`` (bool); ``scale``. K and V with fewer heads
    than Q (a divisor of Q's) run as grouped-query attention (``enable_gqa``). With ``out`` the
    result is copied there (a correctness reference); without it the result is dropped, so a
    timing is SDPA's alone (copying B4 H32 S2048's output would add ~6%).
    """

    name = "torch.sdpa"
    roles = ("q", "k", "v")
    optional_roles = ("out",)

    def make(self, t, args):
        import torch.nn.functional as F  # optional dependency (operator-installed)
        layout = args.get("layout", "bhsd")
        if layout not in ("bhsd", "bshd"):
            raise JobFailure("validation.baseline", f"baseline {self.name!r}: args.layout "
                             f"{layout!r} is not 'bhsd' or 'bshd'")
        view = (lambda x: x) if layout == "bhsd" else (lambda x: x.transpose(1, 2))
        q, k, v = (view(t[r]) for r in ("q", "k", "v"))
        hq, hkv = q.shape[1], k.shape[1]
        if tuple(k.shape) != tuple(v.shape) or hkv < 1 or hq % hkv:
            raise JobFailure("validation.baseline", f"baseline {self.name!r}: q {tuple(q.shape)}"
                             f", k {tuple(k.shape)}, v {tuple(v.shape)} ({layout}): K and V "
                             "must match and have a divisor of Q's heads")
        kw = {"is_causal": bool(args.get("causal", False)), "scale": args.get("scale")}
        if hq != hkv:
            kw["enable_gqa"] = True
        out = view(t["out"]) if "out" in t else None

        def run():
            r = F.scaled_dot_product_attention(q, k, v, **kw)
            if out is not None:
                out.copy_(r)
        return run


@hookimpl
def kcoral_register_baselines(registry):
    if torch_available():
        registry.add(Matmul(), owner="kcoral.baselines.torch_ops")
        registry.add(Sdpa(), owner="kcoral.baselines.torch_ops")
