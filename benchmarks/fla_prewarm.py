"""Compile and autotune FLA's KDA kernels at the benchmark's shapes before any KCoral job runs.

Why: FLA's Triton kernels autotune on first use, and their autotune keys include the head
count (``H``) and varlen-ness, so a tiny warm-up job (H = 1) does not cover the timed shapes:
on the H200 the first timed job then spent its whole execution budget autotuning (sessions 3
and 4: nothing timed). Triton (>= 3.4, ``cache_results``, which FLA turns on) keeps autotune
results and compiled kernels on disk, so running each baseline once here, in a plain process
on the same machine and user, turns the KCoral worker's autotuning into cache hits.

The tensors are random, with the dtypes and shapes the zoo's kda_fwd / kda_decode suites give
the baselines (values do not enter an autotune key). This process times nothing: it prints how
long each first call took (compile + autotune) so a run's log says where set-up time went.

    python benchmarks/fla_prewarm.py [--shapes t8192_h96,t8192_h64,...] [--budget S]
"""

from __future__ import annotations

import argparse
import sys
import time

K = V = 128
PACK6 = (1300, 547, 2048, 963, 271, 3063)      # zoo/kernels/kda_fwd.py's public varlen pack
SHAPES = {  # name -> (B, T, H, lens): kda_bench.sh's forward shapes, in its order
    "t8192_h96": (1, 8192, 96, None), "t8192_h64": (1, 8192, 64, None),
    "pack6_h96": (1, 8192, 96, PACK6), "pack6_h64": (1, 8192, 64, PACK6),
    "pack8x1024_h96": (1, 8192, 96, (1024,) * 8), "pack8x1024_h64": (1, 8192, 64, (1024,) * 8),
    "b2_t4096_h32": (2, 4096, 32, None),
}
DECODE = {"n256_h64_t1": (256, 64, 1), "n128_h96_t1": (128, 96, 1), "n64_h64_t4": (64, 64, 4),
          "n1024_h32_t2": (1024, 32, 2)}


def _tensors(torch, B, T, H, lens):
    dev, bf = "cuda", torch.bfloat16
    N = B if lens is None else len(lens)
    t = {n: torch.randn(B, T, H, K, device=dev, dtype=bf) * 0.1 for n in ("q", "k", "g")}
    t["v"] = torch.randn(B, T, H, V, device=dev, dtype=bf)
    t["beta"] = torch.rand(B, T, H, device=dev, dtype=bf)
    t["A_log"] = torch.zeros(H, device=dev, dtype=torch.float32)
    t["dt_bias"] = torch.zeros(H, K, device=dev, dtype=torch.float32)
    t["h0"] = torch.zeros(N, H, K, V, device=dev, dtype=torch.float32)
    t["ht"] = torch.empty(N, H, K, V, device=dev, dtype=torch.float32)
    t["out"] = torch.empty(B, T, H, V, device=dev, dtype=bf)
    if lens is not None:
        import itertools
        t["cu_seqlens"] = torch.tensor([0, *itertools.accumulate(lens)], device=dev,
                                       dtype=torch.int32)
    return t


BASELINES = ("fla.chunk_kda", "fla.chunk_kda.fwd_bwd", "fla.chunk_kda.bwd")


def plan(shapes, bwd=False, only=None) -> list:
    """(shape, baseline) in the order they are warmed: every shape's forward first, then the
    forward + backward (and the backward alone with ``bwd``). The forward is what the issue's
    forward goal divides by, and each first call of it costs 60-85 s where the forward +
    backward costs 130-165 s: on the H200 (session 11) shape-major order spent a 270 s budget
    on pack6's three calls and left the 8 x 1024 pack's forward to autotune inside its job.

    `only` keeps the baselines a call's jobs actually time. kda_bench.sh's group fb times
    ``fla.chunk_kda.fwd_bwd`` alone, and warming the forwards first cost it its measurement (H200,
    session 20: the two forwards took 217 s of a 240 s budget, the H96 forward + backward was
    killed half-compiled, and the plan's H96 job autotuned FLA inside its execution budget)."""
    grads = ("fla.chunk_kda.fwd_bwd",) + (("fla.chunk_kda.bwd",) if bwd else ())
    order = ([(n, "fla.chunk_kda") for n in shapes]
             + [(n, g) for n in shapes for g in grads])
    return [(n, b) for n, b in order if only is None or b in only]


def _first_call(label, make):
    import torch
    t0 = time.perf_counter()
    try:
        make()()
        torch.cuda.synchronize()
        print(f"prewarm {label}: {time.perf_counter() - t0:.1f} s", flush=True)
    except Exception as e:  # noqa: BLE001 - a failed prewarm only means the job autotunes itself
        print(f"prewarm {label}: FAILED after {time.perf_counter() - t0:.1f} s: "
              f"{type(e).__name__}: {e}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=",".join(SHAPES), help="forward shapes, in order")
    ap.add_argument("--decode", default=",".join(DECODE), help="decode shapes ('' for none)")
    ap.add_argument("--bwd", action="store_true", help="also FLA's backward alone (group bwd)")
    ap.add_argument("--only", default="",
                    help=f"comma-separated baselines to warm (default: all; of {', '.join(BASELINES)})")
    ap.add_argument("--budget", type=float, default=300.0,
                    help="seconds after which no new shape starts")
    a = ap.parse_args(argv)
    shapes = [n for n in a.shapes.split(",") if n]
    decode = [n for n in a.decode.split(",") if n]
    unknown = [n for n in shapes if n not in SHAPES] + [n for n in decode if n not in DECODE]
    only = [b for b in a.only.split(",") if b] or None
    unknown_baselines = [b for b in only or () if b not in BASELINES]
    if unknown_baselines:
        ap.error(f"unknown baseline(s) {', '.join(unknown_baselines)}: one of "
                 f"{', '.join(BASELINES)}")
    if unknown:
        ap.error(f"unknown shape(s) {', '.join(unknown)}: forward {', '.join(SHAPES)}; "
                 f"decode {', '.join(DECODE)}")
    import torch  # optional dependency, present on the GPU machine only
    from kcoral.baselines import fla_ops  # imports torch: after the arguments are checked
    start = time.perf_counter()
    args = dict(q="q", k="k", v="v", g="g", beta="beta", A_log="A_log", dt_bias="dt_bias",
                h0="h0", ht="ht", out="out", l2norm=True)
    makers = {"fla.chunk_kda": (fla_ops.ChunkKda, False),
              "fla.chunk_kda.fwd_bwd": (fla_ops.ChunkKdaFwdBwd, True),
              "fla.chunk_kda.bwd": (fla_ops.ChunkKdaBwd, True)}
    tensors = {}
    for name, baseline in plan(shapes, a.bwd, only):
        if time.perf_counter() - start > a.budget:
            print(f"prewarm: budget spent before {name} {baseline}", flush=True)
            break
        B, T, H, lens = SHAPES[name]
        if name not in tensors:
            tensors[name] = _tensors(torch, B, T, H, lens)
        t = tensors[name]
        jargs = dict(args, cu_seqlens="cu_seqlens") if lens else args
        cls, grads = makers[baseline]
        inputs = {n: v for n, v in t.items() if n not in ("ht", "out")} if grads else t
        _first_call(f"{name} {baseline}", lambda: cls().make(inputs, jargs))

    for name in decode:
        N, H, TT = DECODE[name]
        t = _tensors(torch, N, TT, H, None)
        t["state"] = t.pop("h0")
        dargs = dict(q="q", k="k", v="v", g="g", beta="beta", state="state", out="out",
                     A_log="A_log", dt_bias="dt_bias", l2norm=True)
        _first_call(f"{name} fla.fused_recurrent_kda",
                    lambda: fla_ops.FusedRecurrentKda().make(t, dargs))
    print(f"prewarm: done in {time.perf_counter() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
