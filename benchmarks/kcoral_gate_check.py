"""Does the launch gate take host overhead out of the timings? One GPU command (issue 17):

    python benchmarks/kcoral_gate_check.py [--smoke] [--rounds 400]

(on the lent H200 with set-up first: ``bash benchmarks/kcoral_issue17_gpu.sh gate``)

On 2026-12-01 torch.compile's SwiGLU (64M elements) had a median of 98 us but an IQR of 28-84 us
with samples up to 437 us, beside a candidate and an eager baseline with IQRs of 1-4 us: the
host time torch.compile spends before its kernel reaches the GPU was timed as GPU time, and
those jobs never converged. Protocol kcoral-measure/3 holds every round behind a launch gate
(`kcoral.boards.launch_gate`). This runs the same zoo jobs gated, ungated, gated again (A-B-A,
a fixed number of rounds each, so the three see the same card) and prints, per series, the
median, IQR, 90th percentile and maximum, the paired ratios, and the gate's own report. The
claim holds when the gated runs' torch.compile IQR is a small fraction of the ungated one's
and the medians agree within noise.

Writes ``kcoral_gate_check.json`` under ``$OUT`` when set. Exits 0 without a GPU, saying so.
"""

import argparse
import json
import pathlib
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import kcoral_gpu  # noqa: E402  (load_module, job building helpers)
from gpu_out import finish, run_recorded, save  # noqa: E402  ($OUT/<name>.json)

# (module, suite, case): memory-bound kernels with eager and torch.compile baselines
CASES = [("activations", "SWIGLU", "n64M"), ("norms", "RMSNORM", "r16384_c8192")]
SMOKE_CASES = [("activations", "SWIGLU", "n4099")]


def suite_case(module: str, suite: str, case: str):
    from tirxh.core.compiler import compile_kernel
    m = kcoral_gpu.load_module(kcoral_gpu.ROOT / "zoo" / "kernels" / f"{module}.py")
    s = getattr(m, suite)
    c = next(c for c in s.cases if c.name == case)
    return s, c, compile_kernel(s.kernel, "sm_90a", s.consts(c))


def stats(samples: list) -> dict:
    a = np.asarray(samples, dtype=np.float64) * 1e3
    q1, med, q3, p90 = np.percentile(a, [25, 50, 75, 90])
    return {"median_us": float(med), "iqr_us": float(q3 - q1), "p90_us": float(p90),
            "max_us": float(a.max()), "n": int(a.size)}


def describe(label: str, ev: dict) -> dict:
    r = ev.get("result") or {}
    t = r.get("timing") or {}
    rec = {"label": label, "state": ev.get("state"), "error": r.get("error")}
    if not t.get("candidate"):
        print(f"== {label}: {ev.get('state')} {r.get('error')}")
        return rec
    rec["series"] = {"candidate": stats(t["candidate"]["samples_ms"])}
    rec["speedup"] = {}
    for name, b in t["baselines"].items():
        rec["series"][name] = stats(b["samples_ms"])
        rec["speedup"][name] = b["speedup"]
    rec["launch_gate"] = t.get("launch_gate")
    rec["rel_noise_by"] = t.get("rel_noise_by")
    rec["clock"] = t.get("sm_clock_mhz")
    print(f"== {label}: gate {rec['launch_gate']}")
    for name, s in rec["series"].items():
        sp = rec["speedup"].get(name)
        print(f"   {name:<28} median {s['median_us']:8.2f} us  IQR {s['iqr_us']:7.2f}  "
              f"p90 {s['p90_us']:8.2f}  max {s['max_us']:8.2f}  n {s['n']}"
              + (f"  paired {sp:.3f}x" if sp else ""))
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=400)
    ap.add_argument("--smoke", action="store_true", help="a small case, 20 rounds")
    a = ap.parse_args(argv)
    cases = SMOKE_CASES if a.smoke else CASES
    rounds = 20 if a.smoke else a.rounds
    from kcoral.boards.cuda import gpu_count
    n, why = gpu_count()
    if not n:
        print(f"kcoral_gate_check: no GPU ({why}): nothing measured")
        return 0
    from kcoral.client import KCoralClient
    from kcoral.server import Daemon
    from tirxh.api import build_job
    out: dict = {"rounds": rounds, "runs": [], "errors": []}
    d = Daemon({"boards": {"cuda": {"devices": [0]}}},
               state_dir=tempfile.mkdtemp(prefix="kcoral-gate-"), port=0).start()
    try:
        with KCoralClient(d.address, client_name="gate-check") as cl:
            for module, suite, case in cases:
                t0 = time.time()
                s, c, ck = suite_case(module, suite, case)
                blobs: dict = {}

                def put(data, blobs=blobs):
                    import hashlib
                    dg = hashlib.sha256(data).hexdigest()
                    blobs[dg] = data
                    return dg
                doc = build_job(ck, s, c, seeds=[1], put=put, timing={
                    "min_iters": rounds, "max_iters": rounds, "budget_s": 120.0,
                    "rel_noise": 1e-9}).to_doc()
                cl.put_blobs(blobs)
                print(f"-- {suite}[{case}]: job built in {time.time() - t0:.1f} s", flush=True)
                for label, gate in (("gated", True), ("ungated", False), ("gated again", True)):
                    job = json.loads(json.dumps(doc))
                    job["timing"]["launch_gate"] = gate
                    run_recorded(out, lambda j=job, lb=label: describe(
                        f"{suite}[{case}] {lb}", cl.run(j, timeout=600)))
                    save(out, "kcoral_gate_check")
    finally:
        d.stop(5)
    bad = [f"{r['label']}: {r['state']}" for r in out["runs"] if r["state"] != "done"]
    bad += [e.strip().splitlines()[-1] for e in out["errors"]]
    return finish(out, "kcoral_gate_check", bad or ([] if out["runs"] else ["no job finished"]))


if __name__ == "__main__":
    sys.exit(main())
