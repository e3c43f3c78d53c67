"""sync_check's corpus bugs on a real GPU: do they misbehave, and does compute-sanitizer see them?

    PYTHONPATH=.:plugins/numsim:plugins/sync_check python benchmarks/sanitizer_corpus_gpu.py \
        [--repeat 200] [--entries race_rw_shared,mbar_phase_overrun,...|all] [--out DIR]

For each selected corpus entry (``plugins/sync_check/tests/corpus/<entry>.py``):

1. on the CPU: both analyses on the buggy kernel (our findings: kind and line);
2. the buggy and the fixed kernel are compiled for sm_90a (nvJitLink) and written with their
   inputs to DIR/<entry>/;
3. on the GPU, each in a child process with a timeout (a hang is a result, not a stall): the
   kernel is launched --repeat times from fresh inputs and the outputs are compared with the
   fixed twin's (how many runs differ; whether it hung or faulted);
4. the buggy kernel once under ``compute-sanitizer --tool racecheck``, ``--tool synccheck`` and
   ``--tool memcheck``; the tool's error/hazard count is read from its summary.

The table at the end says, per entry, what our analyses report, whether the GPU misbehaved, and
which compute-sanitizer tool (if any) caught the bug. Entries whose buggy kernel hangs by design
(deadlocks) are not in the default selection: they would only measure the timeout.

The child mode (``--run DIR/<entry>/<variant>.json``) is the small launcher: cuda-bindings driver
API only (cuModuleLoadData, cuMemAlloc, cuMemcpyHtoD, cuLaunchKernelEx with the cluster attribute,
cuMemcpyDtoH); it prints one JSON line with a digest of each run's outputs.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "plugins" / "sync_check" / "tests" / "corpus"
for p in (REPO, REPO / "plugins" / "numsim", REPO / "plugins" / "sync_check"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

# kernels that finish on a GPU (the deadlock entries hang by design) and use no tensor maps
DEFAULT_ENTRIES = (
    "race_rw_shared", "race_ww_shared", "race_named_barrier", "race_alias", "mbar_phase_overrun",
    "mbar_uninitialized", "bar_divergent", "oob_shared", "oob_global", "wgmma_acc_early",
    "tma_load_race", "proxy_missing_fence", "stage_reuse", "cp_async_race",
)
MORE_ENTRIES = (  # also finish on a GPU: --entries all
    "race_rw_global", "race_atomic_plain", "mbar_reinit", "mbar_stray_arrive",
    "wgmma_missing_fence", "setmaxnreg_partial", "dsmem_race",
)
TOOLS = ("racecheck", "synccheck", "memcheck")


# --------------------------------------------------------------------------------------------
# build (CPU)
# --------------------------------------------------------------------------------------------

def _load(entry: str):
    import importlib.util
    path = CORPUS / f"{entry}.py"
    spec = importlib.util.spec_from_file_location(f"corpus_{entry}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, path


def build(entry: str, out: Path) -> dict:
    """Compile both twins, save inputs and launch descriptions; run our analyses on the CPU."""
    import numpy as np
    from tirxh_sync_check import check_kernel
    mod, path = _load(entry)
    d = out / entry
    d.mkdir(parents=True, exist_ok=True)
    inputs = mod.inputs()
    arrays = {k: v for k, v in inputs.items() if isinstance(v, np.ndarray)}
    np.savez(d / "inputs.npz", **arrays)
    info = {"entry": entry, "variants": {}}
    for variant in ("buggy", "fixed"):
        kern = getattr(mod, variant)
        ck = kern.compile("sm_90a")
        (d / f"{variant}.cubin").write_bytes(ck.cubin)
        meta = ck.launch_metadata()
        args = []
        for p in meta["params"]:
            if p["kind"] == "ptr":
                args.append({"buffer": p["name"]})
            elif p["kind"] == "scalar":
                args.append({"scalar": int(inputs[p["name"]]), "dtype": p["dtype"]})
            else:
                args.append({"tensormap": p["name"]})
        launch = {"cubin": f"{variant}.cubin", "inputs": "inputs.npz", "entry": meta["entry"],
                  "params": meta["params"], "args": args, "grid": list(_dim3(mod.GRID)),
                  "block": meta["block"], "cluster": meta["cluster"],
                  "dynamic_smem": meta["dynamic_smem"],
                  "tensormaps": {k: v.describe(np.asarray(inputs[v.source]))
                                 for k, v in inputs.items() if hasattr(v, "describe")}}
        (d / f"{variant}.json").write_text(json.dumps(launch, indent=1))
        info["variants"][variant] = str(d / f"{variant}.json")
    sync, race = check_kernel(mod.buggy, inputs, grid=mod.GRID)
    info["ours"] = sorted({(f.kind, f.where.line if f.where else 0)
                           for f in sync.findings + race.findings if f.severity == "error"})
    return info


def _dim3(g):
    g = (g,) if isinstance(g, int) else tuple(g)
    return g + (1,) * (3 - len(g))


# --------------------------------------------------------------------------------------------
# child: launch on the GPU
# --------------------------------------------------------------------------------------------

def _ok(res, what):
    err, *rest = res if isinstance(res, tuple) else (res,)
    if int(err) != 0:
        raise RuntimeError(f"{what} failed: CUresult {int(err)} ({err})")
    return rest[0] if len(rest) == 1 else (tuple(rest) if rest else None)


def run_child(desc_path: str, repeat: int) -> dict:
    """Launch a built variant `repeat` times; JSON-able digests of each run's outputs."""
    digests, _ = launch(desc_path, repeat)
    return {"runs": repeat, "digests": dict(collections.Counter(digests))}


def launch(desc_path: str, repeat: int = 1) -> "tuple[list, dict]":
    """(per-run output digests, the last run's arrays) of a built variant on GPU 0."""
    import numpy as np
    from cuda.bindings import driver as cu
    desc_path = Path(desc_path)
    desc = json.loads(desc_path.read_text())
    base = desc_path.parent
    _ok(cu.cuInit(0), "cuInit")
    dev = _ok(cu.cuDeviceGet(0), "cuDeviceGet")
    ctx = _ok(cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    _ok(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    module = _ok(cu.cuModuleLoadData((base / desc["cubin"]).read_bytes()), "cuModuleLoadData")
    func = _ok(cu.cuModuleGetFunction(module, desc["entry"].encode()), "cuModuleGetFunction")
    arrays = dict(np.load(base / desc["inputs"]))
    ptrs = {k: int(_ok(cu.cuMemAlloc(max(a.nbytes, 1)), f"cuMemAlloc({k})"))
            for k, a in arrays.items()}
    packed = []
    for a in desc["args"]:
        if "buffer" in a:
            packed.append(ptrs[a["buffer"]].to_bytes(8, "little"))
        elif "scalar" in a:
            from tirxh.core.types import numpy_dtype
            packed.append(np.array(a["scalar"]).astype(numpy_dtype(a["dtype"])).tobytes())
        else:
            packed.append(_tensormap(cu, desc["tensormaps"][a["tensormap"]], ptrs))
    keep, array = [], (ctypes.c_void_p * max(len(packed), 1))()
    for i, b in enumerate(packed):
        raw = ctypes.create_string_buffer(len(b) + 128)
        addr = (ctypes.addressof(raw) + 127) & ~127
        ctypes.memmove(addr, b, len(b))
        keep.append(raw)
        array[i] = addr
    cfg = cu.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = desc["grid"]
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = desc["block"]
    cfg.sharedMemBytes = int(desc["dynamic_smem"])
    cfg.hStream = cu.CUstream(0)
    cl = desc.get("cluster")
    if cl and math.prod(cl) > 1:
        attr = cu.CUlaunchAttribute()
        attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cl
        cfg.attrs = [attr]
        cfg.numAttrs = 1
    else:
        cfg.numAttrs = 0
    digests, last = [], {}
    for _ in range(repeat):
        for k, a in arrays.items():
            a = np.ascontiguousarray(a)
            _ok(cu.cuMemcpyHtoD(ptrs[k], a.ctypes.data, a.nbytes), "cuMemcpyHtoD")
        _ok(cu.cuLaunchKernelEx(cfg, func, ctypes.addressof(array), 0), "cuLaunchKernelEx")
        _ok(cu.cuCtxSynchronize(), "cuCtxSynchronize")
        h = hashlib.sha256()
        for k in sorted(arrays):
            out = np.empty_like(arrays[k])
            _ok(cu.cuMemcpyDtoH(out.ctypes.data, ptrs[k], out.nbytes), "cuMemcpyDtoH")
            h.update(out.tobytes())
            last[k] = out
        digests.append(h.hexdigest()[:16])
    for p in ptrs.values():
        _ok(cu.cuMemFree(p), "cuMemFree")
    _ok(cu.cuModuleUnload(module), "cuModuleUnload")
    return digests, last


def _tensormap(cu, d, ptrs) -> bytes:
    names = {"u32": "UINT32", "s32": "INT32", "f32": "FLOAT32", "bf16": "BFLOAT16",
             "f16": "FLOAT16", "u16": "UINT16", "u8": "UINT8"}
    dt = getattr(cu.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{names[d['dtype']]}")
    sw = getattr(cu.CUtensorMapSwizzle, "CU_TENSOR_MAP_SWIZZLE_" +
                 {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}[d["swizzle"]])
    tm = _ok(cu.cuTensorMapEncodeTiled(
        dt, len(d["dims"]), ptrs[d["source"]], [cu.cuuint64_t(x) for x in d["dims"]],
        [cu.cuuint64_t(x) for x in d["strides"]], [cu.cuuint32_t(x) for x in d["box"]],
        [cu.cuuint32_t(x) for x in d["elem_strides"]],
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, sw,
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), "cuTensorMapEncodeTiled")
    return ctypes.string_at(tm.getPtr(), 128)


# --------------------------------------------------------------------------------------------
# parent: repeated runs and compute-sanitizer
# --------------------------------------------------------------------------------------------

def _child(args: list, timeout: float, prefix=()) -> dict:
    cmd = list(prefix) + [sys.executable, os.path.abspath(__file__)] + args
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO), str(REPO / "plugins" / "numsim"), str(REPO / "plugins" / "sync_check"),
         os.environ.get("PYTHONPATH", "")]))
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        return {"hang": True, "output": (e.stdout or b"")[-2000:] if isinstance(e.stdout, bytes)
                else (e.stdout or "")[-2000:]}
    out = {"rc": p.returncode, "output": (p.stdout + p.stderr)[-6000:]}
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            try:
                out.update(json.loads(line))
            except ValueError:
                pass
    return out


def find_sanitizer() -> "str | None":
    for c in [shutil.which("compute-sanitizer"), "/usr/local/cuda/bin/compute-sanitizer",
              *sorted(Path("/usr/local").glob("cuda*/bin/compute-sanitizer"), reverse=True),
              *sorted(Path("/opt").glob("**/compute-sanitizer/compute-sanitizer"))]:
        if c and Path(c).exists():
            return str(c)
    return None


def _sanitizer_count(text: str) -> "int | None":
    """Errors/hazards from a compute-sanitizer summary (None when no summary was printed)."""
    counts = [int(m.group(1)) for m in re.finditer(
        r"(?:ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK SUMMARY):\s*(\d+)", text)]
    hazards = re.findall(r"(\d+)\s+hazards? displayed", text)
    if hazards:
        counts.append(sum(int(h) for h in hazards))
    return max(counts) if counts else None


def gpu_ready() -> bool:
    try:
        from cuda.bindings import driver as cu
        return int(cu.cuInit(0)[0]) == 0
    except Exception as e:  # no driver library at all
        print(f"cuda driver: {type(e).__name__}: {e}")
        return False


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", help=argparse.SUPPRESS)
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--entries", default=",".join(DEFAULT_ENTRIES))
    ap.add_argument("--out", default=None)
    ap.add_argument("--timeout", type=float, default=30.0,
                    help="seconds per child run (a hung kernel is reported as such)")
    ap.add_argument("--budget", type=float, default=480.0,
                    help="start no new entry after this many seconds (one GPU call is 10 min)")
    ap.add_argument("--build-only", action="store_true",
                    help="compile and analyze on the CPU only (no GPU needed)")
    args = ap.parse_args(argv)
    if args.run:
        try:
            print(json.dumps(run_child(args.run, args.repeat)))
        except RuntimeError as e:
            print(json.dumps({"error": str(e)}))
            return 3
        return 0

    out = Path(args.out or tempfile.mkdtemp(prefix="sync_check_gpu_"))
    entries = [e for e in args.entries.split(",") if e]
    if entries == ["all"]:
        entries = list(DEFAULT_ENTRIES + MORE_ENTRIES)
    sanitizer = None if args.build_only else find_sanitizer()
    if not args.build_only:
        if not gpu_ready():
            print("no usable GPU (cuInit failed); use --build-only on a CPU machine")
            return 2
        print(f"compute-sanitizer: {sanitizer or 'NOT FOUND (sanitizer columns skipped)'}")
    rows = []
    t_start = time.monotonic()
    for entry in entries:
        if time.monotonic() - t_start > args.budget:
            print(f"time budget of {args.budget:.0f} s spent; not run: {entry}", flush=True)
            continue
        info = build(entry, out)
        row = {"entry": entry, "ours": info["ours"]}
        if not args.build_only:
            fixed = _child(["--run", info["variants"]["fixed"], "--repeat", str(args.repeat)],
                           args.timeout)
            buggy = _child(["--run", info["variants"]["buggy"], "--repeat", str(args.repeat)],
                           args.timeout)
            ref = max(fixed.get("digests", {"?": 0}).items(), key=lambda kv: kv[1])[0]
            if buggy.get("hang"):
                row["gpu"] = f"hung (> {args.timeout:.0f} s)"
            elif "digests" not in buggy:
                row["gpu"] = "fault: " + (buggy.get("error") or buggy.get("output", "")[-200:])
            else:
                bad = sum(n for d, n in buggy["digests"].items() if d != ref)
                row["gpu"] = (f"{bad}/{buggy['runs']} runs differ from fixed, "
                              f"{len(buggy['digests'])} distinct")
            for tool in TOOLS if sanitizer else ():
                r = _child(["--run", info["variants"]["buggy"], "--repeat", "1"],
                           args.timeout,
                           prefix=[sanitizer, "--tool", tool, "--print-limit", "20"])
                n = None if r.get("hang") else _sanitizer_count(r.get("output", ""))
                row[tool] = "hang" if r.get("hang") else ("?" if n is None else n)
                (out / entry / f"{tool}.log").write_text(r.get("output", ""))
        rows.append(row)
        print(json.dumps(row), flush=True)

    print()
    print(f"{'entry':22} {'our findings':44} {'GPU (repeated runs)':46} " +
          " ".join(f"{t:>9}" for t in TOOLS))
    missed = []
    for row in rows:
        ours = ", ".join(f"{k}@{ln}" for k, ln in row["ours"]) or "-"
        cells = [str(row.get(t, "-")) for t in TOOLS]
        print(f"{row['entry']:22} {ours[:44]:44} {row.get('gpu', '-')[:46]:46} " +
              " ".join(f"{c:>9}" for c in cells))
        if sanitizer and not any(isinstance(row.get(t), int) and row[t] > 0 for t in TOOLS):
            missed.append(row["entry"])
    if sanitizer:
        print("\nfound by sync_check but by no compute-sanitizer tool: " +
              (", ".join(missed) or "none"))
    print(f"artifacts and sanitizer logs: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
