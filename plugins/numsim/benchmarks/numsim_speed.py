"""numsim speed: simulated lane-instructions per second, a 1M-element vector add (goal < 2 s) and
the zoo's 256x256x256 bf16 wgmma + TMA + mbarrier GEMM (goal < 0.3 s, issue 19).

    python plugins/numsim/benchmarks/numsim_speed.py [--json] [--repeat N]

Rows: the vector add; a compute-bound fma loop three ways: plain (batched), with an ``elect.sync``
(any instruction that needs per-warp scheduling: mbarriers, elect, wgmma, TMA; before issue 19
such a kernel ran one warp at a time), traced (``trace=True``: a CTA's warps grouped, one event
per warp) and traced with ``per_warp=True`` (one warp per group, the traced schedule before
2026-12-01); and the zoo GEMM. Each figure is the median of `--repeat`
runs (default 3) of `tirxh_numsim.run` including input binding and output copies (kernels are
specialized once before timing); ``cpu s`` is the process CPU time of the same runs (less
sensitive than wall time to other work on a shared machine): the goals and the
lane-instructions per second are taken on it. Exits 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import tirxh.lang as T
import tirxh_numsim as ns

ZOO = Path(__file__).resolve().parents[3] / "zoo" / "kernels"


@T.kernel(grid=lambda n: T.cdiv(n, 256), block=256)
def vadd(a: T.gptr[T.f32], b: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32):
    i = T.ctaid.x * 256 + T.tid.x
    with T.if_(i < n):
        x = T.ptx.ld.global_.f32(a.at(i))
        y = T.ptx.ld.global_.f32(b.at(i))
        T.ptx.st.global_.f32(out.at(i), x + y)


def _fma_loop(elect: bool):
    """A compute-bound loop (4 instructions per iteration) to measure the interpreter itself;
    with `elect`, after one ``elect.sync``: an instruction that needs per-warp scheduling."""
    @T.kernel(grid=lambda n: T.cdiv(n, 128), block=128,
              name="fma_loop_elect" if elect else "fma_loop")
    def kernel(x: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32, iters: T.u32):
        i = T.ctaid.x * 128 + T.tid.x
        if elect:  # (trace time)
            T.ptx.elect.sync(0xFFFFFFFF)
        with T.if_(i < n):
            v = T.ptx.ld.global_.f32(x.at(i))
            acc = T.reg(T.f32, 0.0)
            with T.range(iters):
                acc.set(T.ptx.fma.rn.f32(v, acc, 1.0))
            T.ptx.st.global_.f32(out.at(i), acc)
    return kernel


fma_loop, fma_loop_elect = _fma_loop(False), _fma_loop(True)


def _median(fn, repeat):
    """(median wall seconds, median CPU seconds, the last result) of `repeat` calls."""
    times, cpus, res = [], [], None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        res = fn()
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return statistics.median(times), statistics.median(cpus), res


def bench(repeat: int = 3) -> list:
    rows = []
    n = 1 << 20
    a = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    b = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    vadd.specialize()
    t, c, r = _median(lambda: ns.run(vadd, dict(a=a, b=b, out=np.empty(n, np.float32), n=n),
                                     grid=(n // 256,), outputs=["out"]), repeat)
    assert r.verdict == "clean" and np.array_equal(r.outputs["out"], a + b), r.summary()
    rows.append({"benchmark": "vadd 1M f32", "wall_s": t, "cpu_s": c, "goal_s": 2.0,
                 "lane_instr": r.stats["lane_instructions"], "mode": r.stats["mode"]})

    for name, kern, trace, alone, nn in (
            ("batched", fma_loop, False, False, 1 << 17),
            ("elect.sync: per-warp scheduling", fma_loop_elect, False, False, 1 << 14),
            ("traced", fma_loop, True, False, 1 << 14),
            ("traced, per_warp", fma_loop, True, True, 1 << 14)):
        x = np.ones(nn, np.float32)
        t, c, r = _median(lambda: ns.run(kern, dict(x=x, out=np.empty(nn, np.float32), n=nn,
                                                    iters=64), grid=(nn // 128,),
                                         trace=trace, per_warp=alone, outputs=["out"]), repeat)
        assert r.verdict == "clean" and np.all(r.outputs["out"] == 64.0), r.summary()
        rows.append({"benchmark": f"fma loop ({name})", "wall_s": t, "cpu_s": c,
                     "lane_instr": r.stats["lane_instructions"],
                     "lane_instr_per_s": r.stats["lane_instructions"] / c,
                     "mode": r.stats["mode"]})

    spec = importlib.util.spec_from_file_location("zoo_gemm_wgmma", ZOO / "gemm_wgmma.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    case = next(c for c in mod.SUITE.cases if c.name == "m256n256k256")
    inputs = mod.SUITE.make_inputs(case, 0)
    item = type("Item", (), {"suite": mod.SUITE, "case": case, "consts": None})()
    t, c, r = _median(lambda: ns.run(item, dict(inputs)), repeat)
    want = mod.SUITE.expected(case, inputs)["c"]
    ok = mod.SUITE.tolerance_for("c").compare(r.outputs["c"], want)["ok"]
    assert r.verdict == "clean" and ok, r.summary()
    rows.append({"benchmark": "gemm_wgmma 256x256x256 bf16 (TMA+mbarrier+wgmma)", "wall_s": t,
                 "cpu_s": c, "goal_s": 0.3, "lane_instr": r.stats["lane_instructions"],
                 "lane_instr_per_s": r.stats["lane_instructions"] / c, "mode": r.stats["mode"]})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    rows = bench(args.repeat)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'benchmark':52} {'wall s':>8} {'cpu s':>7} {'goal s':>7} {'lane-instr':>12} "
          f"{'per cpu s':>10} mode")
    for r in rows:
        rate = r.get("lane_instr_per_s", r["lane_instr"] / r["cpu_s"])
        goal = f"{r['goal_s']:g}" if "goal_s" in r else "-"
        print(f"{r['benchmark']:52} {r['wall_s']:8.3f} {r['cpu_s']:7.3f} {goal:>7} "
              f"{r['lane_instr']:12d} {rate:10.3g} {r['mode']}")
    bad = [r for r in rows if "goal_s" in r and r["cpu_s"] > r["goal_s"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
