"""Same kernels, same inputs: the H200 (through KCoral's runjob) against numsim, over the zoo.

    python benchmarks/numsim_vs_gpu.py [--json OUT.json] [--board-type cuda]

For every small case of every zoo suite built for sm_90a: build the KCoral job (`build_job`, as
`tirxh bench` does), run it once on the board with ``python -m kcoral.runjob --save-outputs``
(inputs from the job's timing seed), run numsim on the same inputs, and compare the two outputs:
bitwise equality, max |difference| in ULPs of the output type, and each against the numpy
reference with the suite's tolerance. Prints one table row per case.

Expected: bitwise equality for integer and exactly-rounded float paths (vadd: one f32 add per
element); for reductions and MMAs the accumulation order inside the hardware differs from
numsim's, so those are compared with the documented tolerance and the ULP distance is reported.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "zoo" / "kernels"


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"zoo_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _ulps(a: np.ndarray, b: np.ndarray) -> int:
    """Largest distance in units in the last place between two float arrays of one dtype."""
    if a.dtype.kind not in "fV" and str(a.dtype) not in ("bfloat16",):
        return int(np.max(np.abs(a.astype(np.int64) - b.astype(np.int64)))) if a.size else 0
    width = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    ia, ib = a.view(width).astype(np.int64), b.view(width).astype(np.int64)
    # map the sign-magnitude float ordering onto a line of integers
    top = np.int64(1) << (8 * a.dtype.itemsize - 1)
    ia = np.where(ia < 0, -top - ia, ia)
    ib = np.where(ib < 0, -top - ib, ib)
    return int(np.max(np.abs(ia - ib))) if a.size else 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--board-type", default="cuda")
    ap.add_argument("--target", default="sm_90a")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from kcoral.blobs import BlobStore
    from tirxh.core.compiler import compile_kernel
    from tirxh.plugins.bench import build_job
    import tirxh_numsim

    rows = []
    with tempfile.TemporaryDirectory(prefix="numsim-vs-gpu-") as tmp:
        store = BlobStore(Path(tmp) / "blobs")
        for path in sorted(ZOO.glob("*.py")):
            mod = _load(path)
            suite = getattr(mod, "SUITE", None)
            if suite is None:
                continue
            k = suite.kernel
            if k.targets and args.target not in k.targets:
                continue
            for case in (c for c in suite.cases if c.small):
                ck = compile_kernel(k, args.target, suite.consts(case))
                job = build_job(ck, suite, case, put=store.put)
                job["timing"]["enabled"] = False
                jdir = Path(tmp) / f"{k.name}-{case.name}"
                jdir.mkdir()
                (jdir / "job.json").write_text(json.dumps(job))
                t0 = time.perf_counter()
                p = subprocess.run([sys.executable, "-m", "kcoral.runjob", str(jdir / "job.json"),
                                    "--blobs", str(store.root), "--out", str(jdir / "out"),
                                    "--save-outputs", "--board-type", args.board_type],
                                   capture_output=True, text=True, cwd=ROOT)
                gpu_s = time.perf_counter() - t0
                row = {"kernel": k.name, "case": case.name}
                if p.returncode != 0:
                    row.update(status="gpu-failed", detail=(p.stderr + p.stdout)[-800:])
                    rows.append(row)
                    continue
                inputs = suite.make_inputs(case, job["timing"]["seed"])
                t0 = time.perf_counter()
                sim = tirxh_numsim.run(k, inputs, consts=suite.consts(case), grid=suite.grid(case))
                sim_s = time.perf_counter() - t0
                expected = suite.expected(case, inputs)
                for o in suite.outputs:
                    g = np.load(jdir / "out" / f"{o}.npy")
                    s = np.asarray(sim.outputs[o]).astype(g.dtype).reshape(g.shape)
                    tol = suite.tolerance_for(o)
                    rows.append(dict(
                        row, output=o, status="ok", bitwise=bool(np.array_equal(
                            g.view(np.uint8), s.view(np.uint8))),
                        max_ulps=_ulps(g, s),
                        gpu_vs_ref=tol.compare(g, expected[o])["ok"],
                        sim_vs_ref=tol.compare(s, expected[o])["ok"],
                        sim_verdict=sim.verdict, gpu_s=round(gpu_s, 2), sim_s=round(sim_s, 2)))
    print(f"{'kernel':14s} {'case':22s} {'output':6s} {'bitwise':8s} {'max_ulps':>9s} "
          f"{'gpu~ref':8s} {'sim~ref':8s} {'sim_s':>6s}")
    for r in rows:
        if r.get("status") != "ok":
            print(f"{r['kernel']:14s} {r['case']:22s} {r.get('status')}: {r.get('detail', '')}")
            continue
        print(f"{r['kernel']:14s} {r['case']:22s} {r['output']:6s} {str(r['bitwise']):8s} "
              f"{r['max_ulps']:9d} {str(r['gpu_vs_ref']):8s} {str(r['sim_vs_ref']):8s} "
              f"{r['sim_s']:6.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    bad = [r for r in rows if r.get("status") != "ok" or not (r["gpu_vs_ref"] and r["sim_vs_ref"])]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
