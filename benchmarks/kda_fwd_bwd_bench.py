"""KDA forward + backward as ONE KCoral job per case (zoo/kernels/kda_fwd_bwd.py's plan of seven
launches in one module, `tirxh.core.planjob`), against FLA's forward + backward through its
autograd (`fla.chunk_kda.fwd_bwd`) in the same job: `bash benchmarks/kda_bench.sh fb` runs it.

    python benchmarks/kda_fwd_bwd_bench.py --kcoral HOST:PORT --no-timing   # the small cases
    python benchmarks/kda_fwd_bwd_bench.py --kcoral HOST:PORT --cases t8192_h96 t8192_h64
    python benchmarks/kda_fwd_bwd_bench.py --kcoral HOST:PORT --plan tc ...  # 2a, 2c on tensor cores

Small cases carry the float64 reference of every output (o, ht: the forward's public rule;
the gradients: atol = rtol = 0.01), seeds 1 and 2 before timing; large cases synthetic inputs
(no float64 forward on the host: the plan's time does not depend on the values) and no
reference: the small cases, run first, are the check. Each result is one JSON line in --report
(`tirxh.plugins.bench.BenchResult.to_json`) and one summary line on stdout. The merged module
is assembled by ptxas once per distinct PTX (cached under --cache, ~80 s on one CPU core: the
small cases and T8192 H96 share the forward variant, so two assemblies in all); `--build-only`
builds and validates the jobs without a daemon (the CPU's check of this script).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "zoo" / "kernels"))

import kda_fwd_bwd as M  # noqa: E402 - the zoo directory on the path first
import kda_ref as R  # noqa: E402

from tirxh.core.planjob import build_plan_job  # noqa: E402
from tirxh.core.toolchain import ptx_to_cubin  # noqa: E402
from tirxh.plugins.bench import BenchResult  # noqa: E402

REF_ARGS = ("q", "k", "v", "g_raw", "beta", "A_log", "dt_bias", "h0", "do", "dht",
            "cu_seqlens")
PERTURB = ["q", "k", "v", "g_raw", "beta", "do", "dht", "h0"]   # the values, not the maps


def timing_inputs(rng, B, T_, H, lens=None, gate="mixed"):
    """Raw inputs of the shape (kda_ref.raw_inputs, unscaled), dO ~ N(0, 1) bf16 and dht ~
    N(0, 1), as the plan's buffers; no reference."""
    cu, chunk_off = M.BW._offsets(B, T_, lens)
    N = len(cu) - 1
    x = R.raw_inputs(rng, B, T_, H, N=N, gate=gate)
    x["do"] = rng.standard_normal((B, T_, H, 128), np.float32).astype(x["v"].dtype)
    x["dht"] = rng.standard_normal((N, H, 128, 128), np.float32)
    order = np.argsort(-np.diff(cu), kind="stable").astype(np.int32)
    return M.arrays_from(dict(x, cu_seqlens=cu, chunk_off=chunk_off, order=order), B, T_, H,
                         lens)


def _assemble(cache: Path):
    """ptx_to_cubin with an on-disk cache keyed by the PTX's sha256."""
    def assemble(ptx, target, prefer="ptxas"):
        key = hashlib.sha256(f"{target}\n{ptx}".encode()).hexdigest()
        path = cache / f"{key}.cubin"
        if path.exists():
            return path.read_bytes(), ""
        cubin, log = ptx_to_cubin(ptx, target, prefer=prefer)
        cache.mkdir(parents=True, exist_ok=True)
        path.write_bytes(cubin)
        return cubin, log
    return assemble


def item(plan_name):
    """The job's item name: kda_fwd_bwd for the f32 plan, kda_fwd_bwd_<plan> for another."""
    return "kda_fwd_bwd" if plan_name == "f32" else f"kda_fwd_bwd_{plan_name}"


def build(case, put=None, seeds=(1, 2), timing=None, exec_s=None, cache=Path("/tmp/kda_fb"),
          plan_name="f32"):
    """The plan job of `case` (a kda_fwd_bwd.Case) with plan `plan_name` (kda_fwd_bwd.PLANS;
    the job is named kda_fwd_bwd[case], or kda_fwd_bwd_<plan>[case] for another plan)."""
    plan = M.steps(**case.params(), plan=plan_name)
    runs = []
    for i, seed in enumerate(seeds if case.small else seeds[:1]):
        rng = np.random.default_rng(seed)
        if case.small:
            arrays = M.inputs(rng, **case.params(), gate=case.gate)
            expected = M.reference(**{n: arrays[n] for n in REF_ARGS}, lens=case.lens)
        else:
            arrays, expected = timing_inputs(rng, **case.params(), gate=case.gate), {}
        runs.append({"seed": seed, "when": "before", "arrays": arrays, "expected": expected})
    steps = [(f"kda_fb_{st.name}", st.kernel.compile("sm_90a", **st.consts), st.grid, st.bind)
             for st in plan]
    return build_plan_job(
        f"{item(plan_name)}[{case.name}]", steps, runs, M.OUTPUTS, M.TOLERANCE,
        scratch=M.scratch(plan_name), put=put, baselines=M._baselines(case.lens is not None),
        work={"flops": M._flops(**case.params(), plan=plan_name),
              "bytes": M._bytes(**case.params(), plan=plan_name)},
        timing=timing, budgets={"exec_s": exec_s} if exec_s else None,
        guards={"perturb": PERTURB}, assemble=_assemble(cache))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kcoral", help="the daemon's HOST:PORT")
    ap.add_argument("--cases", nargs="*", help="case names (default: every small case)")
    ap.add_argument("--no-timing", action="store_true", help="correctness on the board only")
    ap.add_argument("--exec-s", type=float, default=None, help="each job's execution budget")
    ap.add_argument("--report", type=Path, default=None, help="JSON lines of the results")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/kda_fb"), help="cubin cache")
    ap.add_argument("--build-only", action="store_true", help="build and validate, no daemon")
    ap.add_argument("--plan", choices=sorted(M.PLANS), default="f32",
                    help="pieces 2a and 2c's kernels (kda_fwd_bwd.PLANS; default f32)")
    a = ap.parse_args(argv)
    by_name = {c.name: c for c in M.CASES}
    names = a.cases or [c.name for c in M.CASES if c.small]
    unknown = [n for n in names if n not in by_name]
    if unknown:
        ap.error(f"unknown case(s) {unknown}; known: {sorted(by_name)}")
    if not a.build_only and not a.kcoral:
        ap.error("--kcoral HOST:PORT is required (or --build-only)")
    client = None
    if not a.build_only:
        # start-up cost: grpc loads only where a daemon is used (not for --build-only)
        from kcoral.client import KCoralClient
        client = KCoralClient(a.kcoral)
    failed = 0
    for n in names:
        t0 = time.monotonic()
        job = build(by_name[n], put=client.put_blob if client else None,
                    timing={"enabled": False} if a.no_timing else None, exec_s=a.exec_s,
                    cache=a.cache, plan_name=a.plan)
        if client is None:
            print(f"{item(a.plan)}[{n}]: job valid, {len(job.launches)} launches, "
                  f"{len(job.buffers)} buffers, built in {time.monotonic() - t0:.1f} s")
            continue
        last = None
        for ev in client.submit(job, timeout=1200):
            last = ev
        res = BenchResult(f"{item(a.plan)}[{n}]", last["state"] if last else "failed",
                          dict((last or {}).get("result") or {}), a.kcoral,
                          (last or {}).get("job_id", ""), not a.no_timing)
        print(res.summary, flush=True)
        failed += res.verdict == "error"
        if a.report:
            with open(a.report, "a") as f:
                f.write(json.dumps(res.to_json()) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
