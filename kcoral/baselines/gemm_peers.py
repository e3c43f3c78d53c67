"""Peer GEMMs timed beside the zoo's Hopper GEMMs (issue 15): ``pyptx.gemm_hopper`` (the
warp-specialized bf16 GEMM of the pyptx Python PTX DSL, PyPI ``pyptx==0.1.1``, registered when it
is installed; imported on the board that runs it) and ``torch._scaled_mm`` / ``torch._scaled_mm.fast_accum`` (cuBLASLt fp8 e4m3
with per-tensor scales and bf16 output, registered when torch has it).

All three take the shapes form of ``torch.matmul``'s baseline (args ``M``, ``N``, ``K``): they
time the peer on its own random tensors of those shapes, so a job's buffers need not fit the
peer's layout (pyptx writes C transposed, [N, M]). A shape a peer cannot take is refused in
`prepare` with the rule (``validation.baseline``), never padded into another problem.
"""

from __future__ import annotations

import importlib

from kcoral.baselines.torch_ops import TorchBaseline, import_problem, installed, torch_available
from kcoral.errors import JobFailure
from kcoral.plugins import hookimpl

PYPTX_GEMM = "pyptx.examples.hopper.gemm_highperf_hopper"


def _shape(name: str, args: dict) -> tuple:
    bad = [k for k in ("M", "N", "K") if not isinstance(args.get(k), int) or args[k] < 1]
    if bad:
        raise JobFailure("validation.baseline", f"baseline {name!r}: args needs positive "
                         f"integers {'/'.join(bad)}; got {args}")
    return args["M"], args["N"], args["K"]


def pyptx_shape_problem(M: int, N: int, K: int, bm: int = 128, bn: int = 256, bk: int = 64,
                        cluster_m: int = 2) -> "str | None":
    """Why pyptx's kernel cannot take (M, N, K), or None: it launches whole 2-CTA clusters of
    bm x bn tiles and whole bk slices, with no tail handling."""
    rules = [(M, bm * cluster_m, "M"), (N, bn, "N"), (K, bk, "K")]
    bad = [f"{d} = {v} is not a multiple of {m}" for v, m, d in rules if v % m]
    return "; ".join(bad) or None


def scaled_mm_shape_problem(M: int, N: int, K: int) -> "str | None":
    """cuBLASLt's fp8 GEMM (behind torch._scaled_mm) wants K and N multiples of 16."""
    bad = [f"{d} = {v} is not a multiple of 16" for v, d in ((K, "K"), (N, "N")) if v % 16]
    return "; ".join(bad) or None


def _device(device, torch):
    dev = f"cuda:{device.info().get('ordinal', 0)}"
    return dev, torch.Generator(device=dev).manual_seed(0)


class PyptxGemm(TorchBaseline):
    """``gemm_warp_specialized(a [M, K], b [N, K], schedule)`` with its Hilbert schedule built
    once; each run allocates its C^T as pyptx does when called from torch."""

    name = "pyptx.gemm_hopper"

    def available(self, device):
        return super().available(device) or import_problem(PYPTX_GEMM)

    def prepare(self, device, doc, args):
        M, N, K = _shape(self.name, args)
        import torch  # optional dependency: only on GPU hosts with torch
        gh = importlib.import_module(PYPTX_GEMM)
        why = pyptx_shape_problem(M, N, K, gh.BM, gh.BN, gh.BK, gh.CLUSTER_M)
        if why:
            raise JobFailure("validation.baseline", f"baseline {self.name!r}: {why}")
        dev, g = _device(device, torch)
        a = torch.randn(M, K, device=dev, dtype=torch.bfloat16, generator=g)
        b = torch.randn(N, K, device=dev, dtype=torch.bfloat16, generator=g)
        sched = torch.tensor(gh.create_hilbert_schedule(M // (gh.BM * gh.CLUSTER_M), N // gh.BN),
                             device=dev, dtype=torch.int32)

        def run():
            gh.gemm_warp_specialized(a, b, sched)
        run._keep = (a, b, sched)
        return run


class ScaledMm(TorchBaseline):
    """``torch._scaled_mm(a [M, K] e4m3, b [K, N] e4m3 column-major, scale_a, scale_b,
    out_dtype=bf16)`` on unit-variance data quantized per tensor (scale = amax / 448)."""

    name = "torch._scaled_mm"
    fast_accum = False

    def available(self, device):
        why = super().available(device)
        if why:
            return why
        import torch  # optional dependency: only on GPU hosts with torch
        if not (hasattr(torch, "_scaled_mm") and hasattr(torch, "float8_e4m3fn")):
            return f"torch {torch.__version__} has no _scaled_mm / float8_e4m3fn"
        return None

    def prepare(self, device, doc, args):
        M, N, K = _shape(self.name, args)
        why = scaled_mm_shape_problem(M, N, K)
        if why:
            raise JobFailure("validation.baseline", f"baseline {self.name!r}: {why}")
        import torch  # optional dependency: only on GPU hosts with torch
        dev, g = _device(device, torch)

        def quantized(rows):
            x = torch.randn(rows, K, device=dev, dtype=torch.float32, generator=g)
            scale = x.abs().max() / 448.0
            return (x / scale).to(torch.float8_e4m3fn), scale.reshape(()).float()
        a, sa = quantized(M)
        b, sb = quantized(N)
        out = torch.empty(M, N, device=dev, dtype=torch.bfloat16)
        kw = dict(scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=self.fast_accum)
        try:  # the .out overload writes a preallocated C, as the candidate does
            torch._scaled_mm(a, b.t(), out=out, **kw)

            def run():
                torch._scaled_mm(a, b.t(), out=out, **kw)
        except (TypeError, RuntimeError):
            def run():
                torch._scaled_mm(a, b.t(), **kw)
        run._keep = (a, b, sa, sb, out)
        return run


class ScaledMmFastAccum(ScaledMm):
    """The same with ``use_fast_accum=True``: fp8 products summed in the tensor core's own
    accumulator only (no periodic promotion), the accumulation the zoo's fp8 kernel does."""

    name = "torch._scaled_mm.fast_accum"
    fast_accum = True


def pyptx_available() -> bool:
    return torch_available() and installed("pyptx")


def scaled_mm_available() -> bool:
    """torch is installed; whether this torch has fp8 ``_scaled_mm`` is `ScaledMm.available`'s
    question, asked on the board (registration imports nothing)."""
    return torch_available()


@hookimpl
def kcoral_register_baselines(registry):
    if pyptx_available():
        registry.add(PyptxGemm(), owner="kcoral.baselines.gemm_peers")
    if scaled_mm_available():
        registry.add(ScaledMm(), owner="kcoral.baselines.gemm_peers")
        registry.add(ScaledMmFastAccum(), owner="kcoral.baselines.gemm_peers")
