"""numsim versus the GPU: run the same kernels and inputs on a GPU and in numsim, compare outputs.

    PYTHONPATH=.:plugins/numsim python plugins/numsim/benchmarks/h200_compare.py [--json FILE]

Probes: every small case of every zoo kernel built for sm_90a, and numsim's own semantic probes
from its tests (wgmma for every descriptor layout/swizzle/dtype and register A, TMA tile loads
with every swizzle and OOB fill, mma.sync shapes, ldmatrix, and single instructions whose
rounding is subtle: cvt modes, fma, approximate functions). Each probe's output buffers are
compared bitwise; where they differ the table gives the number of differing elements, the
largest absolute difference and the largest difference in units in the last place.

The GPU side uses KCoral's cuda board (`kcoral.boards.cuda.CudaDevice`: cuModuleLoadData,
cuTensorMapEncodeTiled, cuLaunchKernelEx); it needs a GPU and exits with status 2 without one.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import numpy as np

import tirxh_numsim as ns
from tirxh.api import TensorMap

HERE = Path(__file__).resolve().parent
ZOO = HERE.parents[2] / "zoo" / "kernels"
TESTS = HERE.parent / "tests"


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"probe_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def zoo_probes() -> list:
    out = []
    for f in sorted(ZOO.glob("*.py")):
        mod = _load(f)
        suite = getattr(mod, "SUITE", None)
        if suite is None:
            continue
        if suite.kernel.targets and "sm_90a" not in suite.kernel.targets:
            continue
        for case in suite.cases:
            if not case.small:
                continue
            out.append(dict(name=f"zoo/{suite.name}[{case.name}]", kernel=suite.kernel,
                            consts=suite.consts(case), grid=suite.grid(case),
                            inputs=suite.make_inputs(case, 0), outputs=list(suite.outputs)))
    return out


def semantic_probes() -> list:
    mma = _load(TESTS / "test_mma.py")
    tma = _load(TESTS / "test_tma.py")
    from tirxh_numsim.testing import one_case
    out = []
    for major in ("K", "MN"):
        for S in (0, 32, 64, 128):
            k, inp, _ = mma.wgmma_case(64, 16, "bf16", major, major, S, S)
            out.append(dict(name=f"wgmma bf16 {major}-major sw{S}", kernel=k, inputs=inp,
                            outputs=["out"]))
    for ty, K in (("f16", 16), ("tf32", 8), ("e4m3", 32), ("e5m2", 32)):
        k, inp, _ = mma.wgmma_case(32, K, ty, "K", "K", 128, 128)
        out.append(dict(name=f"wgmma {ty} K-major sw128", kernel=k, inputs=inp,
                        outputs=["out"]))
    k, inp, _ = mma.wgmma_case(256, 16, "bf16", "K", "MN", 128, 64)
    out.append(dict(name="wgmma bf16 n256 A K/sw128 B MN/sw64", kernel=k, inputs=inp,
                    outputs=["out"]))
    for ty, K in (("bf16", 16), ("tf32", 8), ("e4m3", 32)):
        k, inp, _ = mma.wgmma_case(64, K, ty, "K", "K", 0, 128, rs=True)
        out.append(dict(name=f"wgmma {ty} register A", kernel=k, inputs=inp, outputs=["out"]))
    for shape, ty, acc in mma.MMA_CASES:
        k, inp, _ = mma.mma_case(shape, ty, acc)
        out.append(dict(name=f"mma.sync {shape} {ty}", kernel=k, inputs=inp, outputs=["d"]))
    for case in tma.CASES:
        for fill in ("zero", "nan"):
            dt = case[0]
            if fill == "nan" and dt is np.uint8:
                continue
            k, inp, _, _ = tma.tma_case(*case, fill)
            out.append(dict(name=f"TMA {np.dtype(dt).name} {case[1]} box {case[2]} "
                                 f"sw{case[3]} at {case[4]} {fill}", kernel=k, inputs=inp,
                            outputs=["out"]))
    pipe = _load(TESTS / "test_pipeline.py")
    x = np.arange(pipe.NCHUNK * pipe.CHUNK, dtype=np.float32)
    out.append(dict(name="mbarrier producer/consumer warps", kernel=pipe.prodcons,
                    inputs=dict(x=x, out=np.zeros(32, np.float32)), outputs=["out"]))
    out.append(dict(name="cluster DSMEM swap (mapa, barrier.cluster)", kernel=pipe.dsmem_swap,
                    inputs=dict(out=np.zeros(256, np.uint32)), grid=(4,), outputs=["out"]))
    misc = _load(TESTS / "test_async_misc.py")
    out.append(dict(name="cp.async zero-fill + groups + mbarrier arrive",
                    kernel=misc.cp_async_fill, outputs=["out"],
                    inputs=dict(src=np.arange(1, 129, dtype=np.uint32),
                                out=np.zeros(128, np.uint32))))
    out.append(dict(name="bulk copy in/out with tx bytes", kernel=misc.bulk_roundtrip,
                    inputs=dict(src=np.arange(64, dtype=np.float32),
                                dst=np.zeros(64, np.float32)), outputs=["dst"]))
    rng = np.random.default_rng(3)
    f = (rng.standard_normal(32) * 10).astype(np.float32)
    g = (rng.standard_normal(32) * 1e-3).astype(np.float32)
    h = rng.standard_normal(32).astype(np.float32)
    singles = [
        ("fma.rn.f32", "f32", [("f32", f), ("f32", g), ("f32", h)]),
        ("add.rz.f32", "f32", [("f32", f), ("f32", g)]),
        ("mul.rp.f32", "f32", [("f32", f), ("f32", g)]),
        ("div.rn.f32", "f32", [("f32", f), ("f32", h)]),
        ("sqrt.rn.f32", "f32", [("f32", np.abs(f))]),
        ("cvt.rn.bf16x2.f32", "bf16x2", [("f32", f), ("f32", g)]),
        ("cvt.rz.f16.f32", "f16", [("f32", f * 1e4)]),
        ("cvt.rn.satfinite.e4m3x2.f32", "e4m3x2", [("f32", f * 100), ("f32", g)]),
        ("cvt.rna.tf32.f32", "b32", [("f32", f)]),
        ("cvt.rni.s32.f32", "s32", [("f32", f * 1e9)]),
        ("ex2.approx.f32", "f32", [("f32", f / 4)]),
        ("tanh.approx.f32", "f32", [("f32", f / 4)]),
        ("rcp.approx.f32", "f32", [("f32", f)]),
        ("lg2.approx.f32", "f32", [("f32", np.abs(f))]),
        ("bfe.s32", "s32", [("s32", (f * 1e6).astype(np.int32)),
                            ("u32", np.arange(32, dtype=np.uint32)),
                            ("u32", np.full(32, 9, np.uint32))]),
    ]
    for sp, ot, ins in singles:
        k, inp = one_case(sp, ot, ins)
        out.append(dict(name=f"instr {sp}", kernel=k, inputs=inp, outputs=["out"]))
    return out


def gpu_run(dev, probe) -> dict:
    kernel, consts = probe["kernel"], probe.get("consts") or {}
    ck = kernel.compile("sm_90a", **consts)
    meta = ck.launch_metadata()
    dev.free_all()
    dev.load(ck.cubin, "cubin", [meta["entry"]])
    inputs = probe["inputs"]
    arrays = {k: np.ascontiguousarray(v) for k, v in inputs.items() if isinstance(v, np.ndarray)}
    for n, a in arrays.items():
        dev.alloc(n, a.nbytes)
        dev.write(n, a)
    args = []
    for p in meta["params"]:
        v = inputs[p["name"]]
        if p["kind"] == "ptr":
            args.append({"buffer": p["name"]})
        elif p["kind"] == "scalar":
            args.append({"scalar": np.asarray(v).item(), "dtype": p["dtype"]})
        else:
            assert isinstance(v, TensorMap)
            args.append({"tensormap": v.describe(arrays[v.source])})
    grid = probe.get("grid") or (1, 1, 1)
    launch = {"entry": meta["entry"], "grid": list(grid) + [1] * (3 - len(grid)),
              "block": meta["block"], "cluster": meta["cluster"],
              "dynamic_smem": meta["dynamic_smem"], "params": meta["params"], "args": args}
    run = dev.launcher(launch, {})
    run()
    dev.sync()
    return {n: dev.read(n, a.dtype, a.shape) for n, a in arrays.items()}


def compare(a: np.ndarray, b: np.ndarray) -> dict:
    ua, ub = np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8)
    if np.array_equal(ua, ub):
        return {"bitwise": True, "differ": 0}
    size = a.dtype.itemsize
    ia = ua.reshape(-1, size)
    ib = ub.reshape(-1, size)
    diff = ~(ia == ib).all(axis=1)
    out = {"bitwise": False, "differ": int(diff.sum()), "total": int(diff.size)}
    if a.dtype == np.float32 or (a.dtype == np.uint32):
        fa = a.reshape(-1).view(np.float32).astype(np.float64)
        fb = b.reshape(-1).view(np.float32).astype(np.float64)
        both_nan = np.isnan(fa) & np.isnan(fb)
        with np.errstate(invalid="ignore"):
            out["max_abs"] = float(np.nanmax(np.where(both_nan, 0, np.abs(fa - fb))))
        ia32 = a.reshape(-1).view(np.int32).astype(np.int64)
        ib32 = b.reshape(-1).view(np.int32).astype(np.int64)
        ulp = np.where(both_nan, 0, np.abs(ia32 - ib32))
        out["max_ulp"] = int(ulp.max())
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the rows to this file")
    ap.add_argument("-k", help="only probes whose name contains this")
    ap.add_argument("--dump", help="save both sides' outputs of differing probes to this .npz")
    ap.add_argument("--index", type=int, help="only the probe with this index (after -k); a "
                    "device fault poisons the context, so isolate probes in processes")
    args = ap.parse_args(argv)
    from tirxh_numsim.testing import gpu_available
    if not gpu_available():
        print("no GPU (cuInit failed): nothing to compare", file=sys.stderr)
        return 2
    from kcoral.boards import BoardSpec
    from kcoral.boards.cuda import CudaDevice
    dev = CudaDevice(BoardSpec("gpu0", "cuda", "sm_90a", options={"ordinal": 0}))
    print(f"device: {dev.info()['name']}, driver {dev.info()['driver']}")
    probes = zoo_probes() + semantic_probes()
    if args.k:
        probes = [p for p in probes if args.k in p["name"]]
    if args.index is not None:
        probes = probes[args.index: args.index + 1]
    rows, dumps = [], {}
    for p in probes:
        row = {"probe": p["name"]}
        try:
            t0 = time.perf_counter()
            sim = ns.run(p["kernel"], dict(p["inputs"]), consts=p.get("consts"),
                         grid=p.get("grid") or (1,), outputs=p["outputs"])
            row["numsim_s"] = time.perf_counter() - t0
            row["numsim_verdict"] = sim.verdict
            hw = gpu_run(dev, p)
            cmp = {o: compare(sim.outputs[o], hw[o]) for o in p["outputs"]}
            row["outputs"] = cmp
            row["bitwise"] = all(c["bitwise"] for c in cmp.values())
            if args.dump and not row["bitwise"]:
                for o in p["outputs"]:
                    dumps[f"{len(rows)}|{p['name']}|{o}|numsim"] = sim.outputs[o]
                    dumps[f"{len(rows)}|{p['name']}|{o}|gpu"] = hw[o]
        except Exception as e:  # one probe's failure must not hide the others
            row["error"] = f"{type(e).__name__}: {e}"
        rows.append(row)
        c = next(iter(row.get("outputs", {}).values()), {})
        status = row.get("error") or ("bitwise equal" if row.get("bitwise") else
                                      f"{c.get('differ')} of {c.get('total')} differ, max abs "
                                      f"{c.get('max_abs', '-')}, max ulp {c.get('max_ulp', '-')}")
        print(f"{p['name'][:60]:60} {row.get('numsim_verdict', '?'):10} {status}", flush=True)
    if args.dump:
        np.savez_compressed(args.dump, **dumps)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=str))
    n_eq = sum(1 for r in rows if r.get("bitwise"))
    print(f"\n{n_eq} of {len(rows)} probes bitwise equal; "
          f"{sum(1 for r in rows if 'error' in r)} errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
