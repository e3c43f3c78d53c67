"""Compile-speed benchmark (CPU): trace + PTX emission of the zoo's wgmma GEMM, the nvJitLink
(ptxas) step, and a cold vs warm cache over a 20-kernel project.

    python benchmarks/compile_speed.py [--json OUT]

The 20 kernels are specializations of the zoo's kernels (distinct PTX each, so distinct cache
entries). "Warm" re-traces and re-emits every kernel (a new process would) and takes cubins from
the content-addressed cache, which is what an unchanged `tirxh check` pays.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tirxh.core.cache import ArtifactCache  # noqa: E402
from tirxh.core.compiler import compile_kernel  # noqa: E402
import tirxh.lang as T  # noqa: E402


def _load(name: str):
    path = ROOT / "zoo" / "kernels" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"zoo_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@T.kernel(grid=lambda n: T.cdiv(n, 128), block=128)
def saxpy_unrolled(x: T.gptr[T.f32], y: T.gptr[T.f32], alpha: T.f32, n: T.u32,
                   UNROLL: T.const = 1):
    base = (T.ctaid.x * 128 + T.tid.x) * UNROLL
    for u in range(UNROLL):
        i = base + u
        with T.if_(i < n):
            T.ptx.st.global_.f32(y.at(i), T.ptx.fma.rn.f32(alpha, T.ptx.ld.global_.f32(x.at(i)),
                                                            T.ptx.ld.global_.f32(y.at(i))))


def _fresh(kernel):
    """Drop the kernel's trace cache so every measurement re-traces."""
    kernel._cache.clear()
    return kernel


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    gemm = _load("gemm_wgmma").gemm_wgmma
    results = {}

    trace_emit = []
    for _ in range(20):
        ck = compile_kernel(_fresh(gemm), "sm_90a", assemble=False)
        trace_emit.append(ck.timings["trace_s"] + ck.timings["emit_s"])
    results["gemm_wgmma_trace_emit_ms"] = statistics.median(trace_emit) * 1e3
    results["gemm_wgmma_ptx_lines"] = len(ck.ptx.splitlines())

    with tempfile.TemporaryDirectory() as d:
        asm = []
        for _ in range(5):
            ck = compile_kernel(_fresh(gemm), "sm_90a", cache=ArtifactCache(Path(d), False))
            asm.append(ck.timings["assemble_s"])
        results["gemm_wgmma_assemble_ms"] = statistics.median(asm) * 1e3

    mods = {n: _load(n) for n in ("vadd", "reduce_rows", "gemm_mma", "gemm_wgmma")}
    project = []  # 20 distinct (kernel, target) builds
    for n, mod in mods.items():
        k = mod.SUITE.kernel
        targets = ["sm_90a"] if n == "gemm_wgmma" else ["sm_80", "sm_90a", "sm_100a"]
        for t in targets:
            if k.targets and t not in k.targets:
                continue
            project.append((k, t, {}))
    unroll = 1
    while len(project) < 20:  # the rest: specializations of an unrolled saxpy (distinct PTX)
        project.append((saxpy_unrolled, "sm_90a", {"UNROLL": unroll}))
        unroll += 1
    with tempfile.TemporaryDirectory() as d:
        for phase in ("cold", "warm"):
            cache = ArtifactCache(Path(d))
            t0 = time.perf_counter()
            for k, t, consts in project:
                compile_kernel(_fresh(k), t, consts, cache=cache)
            results[f"project20_{phase}_s"] = time.perf_counter() - t0
            results[f"project20_{phase}_cache_hits"] = cache.hits

    for k, v in results.items():
        print(f"{k:32s} {v:10.3f}" if isinstance(v, float) else f"{k:32s} {v:10d}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
