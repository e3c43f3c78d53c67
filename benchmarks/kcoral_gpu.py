"""KCoral on a real GPU, in one command: ``python benchmarks/kcoral_gpu.py [--quick]``.

What it measures (the issue's "proof and figures"):

1. solo: one client submits the zoo's vadd (n = 16M) several times; medians of each job;
2. contended: 8 clients (threads, each with its own connection) submit the same job at once;
   their medians should be within 2% of the solo median because the board serializes jobs;
3. direct: 8 processes time the same kernel at the same time straight on the GPU (no KCoral):
   their medians show what unserialized sharing does;
4. GEMM side by side: the zoo's wgmma GEMM (gemm_mma if that is unavailable) against
   ``torch.matmul`` interleaved in one job (ratio);
5. faults: a kernel that reads an illegal address and one that traps; each must come back as a
   ``runtime.*`` error while the daemon survives and the next job on the board succeeds;
6. overhead: wall time per trivial job (vadd n=256, timing disabled) seen by a client, minus
   the kernel's own time (goal < 50 ms).

Prints a compact table and writes ``kcoral_gpu.json`` under ``$OUT`` when set. Every section
records its own error instead of stopping the run.
"""

# no `from __future__ import annotations`: the fault kernels below need evaluated annotations
import argparse
import importlib.util
import json
import pathlib
import statistics
import sys
import tempfile
import threading
import time
import traceback

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from gpu_out import save  # noqa: E402  (the $OUT/kcoral_gpu.json written after every section)


def load_module(path: pathlib.Path):
    """A zoo module by path; its folder goes on sys.path first, as `tirxh` does, because zoo
    modules import their siblings (attention and the gemms import `hopper`)."""
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def find_case(name: str, case):
    """(suite, case) for a zoo module (its SUITE) or MODULE:ATTR for a module's other suites
    (gemm_sm90:SUITE_C2_PEERS), without compiling: a wrong name fails here, on the CPU, before
    a device call spends its set-up and smoke on it (session 9 lost 115 s of the H200 so).
    SystemExit names the missing suite or case and what is there."""
    module, _, attr = name.partition(":")
    m = load_module(ROOT / "zoo" / "kernels" / f"{module}.py")
    s = getattr(m, attr or "SUITE", None)
    if s is None or not hasattr(s, "cases"):
        suites = sorted(k for k, v in vars(m).items() if hasattr(v, "cases"))
        raise SystemExit(f"zoo module {module!r} has no suite {attr or 'SUITE'!r}; its suites: "
                         + ", ".join(suites))
    if not isinstance(case, str):
        return s, case
    c = next((c for c in s.cases if c.name == case), None)
    if c is None:
        raise SystemExit(f"zoo case {case!r} is not in {name} (suite {s.name}); its cases: "
                         + ", ".join(c.name for c in s.cases))
    return s, c


def zoo_case(name: str, case, target="sm_90a"):
    """`find_case`'s suite and case, and the case compiled for `target`."""
    from tirxh.core.compiler import compile_kernel
    s, c = find_case(name, case)
    return s, c, compile_kernel(s.kernel, target, s.consts(c))


_JOBS: dict = {}


def job_for(client, suite, case, compiled, **timing):
    """The job for a case, built once per (case, timing) and reused: building uploads nothing
    but hashes every input, which for 16M-element inputs costs more than running the job."""
    from tirxh.api import build_job
    key = (suite.name, case.name, tuple(sorted(timing.items())))
    if key not in _JOBS:
        blobs = {}

        def put(data):
            import hashlib
            dg = hashlib.sha256(data).hexdigest()
            blobs[dg] = data
            return dg
        _JOBS[key] = (build_job(compiled, suite, case, put=put, timing=timing or None).to_doc(),
                      blobs)
    doc, blobs = _JOBS[key]
    client.put_blobs(blobs)
    return json.loads(json.dumps(doc))


def median_of(ev) -> "float | None":
    r = ev.get("result") or {}
    t = r.get("timing") or {}
    return t.get("candidate", {}).get("median_ms")


# -------------------------------------------------------------------------------------------------
# sections
# -------------------------------------------------------------------------------------------------

def solo_and_contended(addr, out, quick):
    from kcoral.client import KCoralClient
    s, c, ck = zoo_case("vadd", "n16M")
    timing = {"min_iters": 50, "budget_s": 3.0}
    solo = []
    with KCoralClient(addr, client_name="solo") as cl:
        for _ in range(2 if quick else 5):
            ev = cl.run(job_for(cl, s, c, ck, **timing), timeout=600)
            if ev["state"] != "done":
                raise RuntimeError(f"solo job {ev['state']}: {ev['result'].get('error')}")
            solo.append(median_of(ev))
            example = ev["result"]
    t = dict(example.get("timing") or {})
    t["candidate"] = {k: v for k, v in t.get("candidate", {}).items() if k != "samples_ms"}
    out["solo"] = {"kernel": "vadd[n16M]", "medians_ms": solo,
                   "median_ms": statistics.median(solo),
                   "example_result": dict(example, timing=t)}
    per_client = 2 if quick else 3
    results, errors = {}, []

    def client_main(i):
        try:
            with KCoralClient(addr, client_name=f"c{i}") as cl:
                for _ in range(per_client):
                    ev = cl.run(job_for(cl, s, c, ck, **timing), timeout=900)
                    results.setdefault(i, []).append(
                        (ev["state"], median_of(ev), (ev["result"] or {}).get("queue_wait_s")))
        except Exception as e:
            errors.append(f"client {i}: {e}")

    t0 = time.time()
    ts = [threading.Thread(target=client_main, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    meds = [m for v in results.values() for st, m, _ in v if st == "done"]
    all_states = [st for v in results.values() for st, _, _ in v]
    cm = statistics.median(meds) if meds else None
    out["contended"] = {"clients": 8, "jobs_per_client": per_client, "wall_s": time.time() - t0,
                        "states": {s_: all_states.count(s_) for s_ in set(all_states)},
                        "medians_ms": meds, "median_ms": cm,
                        "spread_pct": (max(meds) / min(meds) - 1) * 100 if meds else None,
                        "vs_solo_pct": (cm / out["solo"]["median_ms"] - 1) * 100 if cm else None,
                        "errors": errors}
    return s, c, ck


def _direct_worker(job_doc, blob_root, barrier, q, iters):
    """One process timing the kernel on the GPU with no daemon (section 3)."""
    try:
        from kcoral.blobs import BlobStore
        from kcoral.boards import BoardSpec
        from kcoral.boards.cuda import CudaDevice
        from kcoral.job import Job
        from kcoral.measure import Session
        from kcoral.plugins import registries
        job = Job.from_json(job_doc)
        job.timing.min_iters = job.timing.max_iters = iters
        job.timing.budget_s = 600
        dev = CudaDevice(BoardSpec("direct", "cuda", job.target))
        s = Session(job, dev, BlobStore(blob_root), registries().baselines, lambda *a: None)
        s.setup()
        barrier.wait(timeout=120)
        t0 = time.time()
        t = s.timing()
        q.put(("ok", t["candidate"]["median_ms"], t["candidate"]["iqr_ms"], t0, time.time()))
    except Exception as e:
        q.put(("error", f"{type(e).__name__}: {e}", None, 0, 0))


def direct(addr, daemon, out, s, c, ck, quick):
    import multiprocessing as mp
    from kcoral.client import KCoralClient
    with KCoralClient(addr, client_name="direct-setup") as cl:
        doc = job_for(cl, s, c, ck)
        cl.upload()
    ctx = mp.get_context("spawn")
    iters = 1500 if quick else 3000  # long enough that the 8 timing loops overlap

    def launch(n):
        barrier = ctx.Barrier(n)
        q = ctx.Queue()
        ps = [ctx.Process(target=_direct_worker, args=(doc, str(daemon.blobs.root), barrier, q,
                                                       iters)) for _ in range(n)]
        for p in ps:
            p.start()
        got = [q.get(timeout=600) for _ in ps]
        for p in ps:
            p.join(timeout=60)
        return got
    alone = launch(1)[0]  # the same loop with the GPU to itself: the reference wall time
    got = launch(8)
    meds = [g[1] for g in got if g[0] == "ok"]
    ok = [g for g in got if g[0] == "ok"]
    overlap = (min(g[4] for g in ok) - max(g[3] for g in ok)) if ok else None
    out["direct"] = {"processes": 8, "iterations": iters, "medians_ms": meds,
                     "alone": {"median_ms": alone[1], "loop_s": alone[4] - alone[3]},
                     "iqrs_ms": [g[2] for g in ok], "overlap_s": overlap,
                     "loop_s": [g[4] - g[3] for g in ok],
                     "median_ms": statistics.median(meds) if meds else None,
                     "spread_pct": (max(meds) / min(meds) - 1) * 100 if meds else None,
                     "vs_solo_pct": (statistics.median(meds) / out["solo"]["median_ms"] - 1)
                     * 100 if meds and out.get("solo") else None,
                     "errors": [g[1] for g in got if g[0] != "ok"]}


def gemm(addr, out, quick):
    from kcoral.client import KCoralClient
    errs = []
    for name in ("gemm_wgmma", "gemm_mma"):
        try:
            m = load_module(ROOT / "zoo" / "kernels" / f"{name}.py")
            big = [c for c in m.SUITE.cases if not c.small]
            case = big[0] if big else m.SUITE.cases[-1]  # 4096^3: a GEMM worth comparing
            s, c, ck = zoo_case(name, case)
            break
        except Exception as e:
            errs.append(f"{name}: {type(e).__name__}: {str(e)[:300]}")
    else:
        out["gemm"] = {"error": "; ".join(errs)}
        return
    with KCoralClient(addr, client_name="gemm") as cl:
        doc = job_for(cl, s, c, ck, min_iters=30, budget_s=5.0)
        if not doc["baselines"]:
            M, N, K = (c.params.get(k) for k in ("M", "N", "K"))
            doc["baselines"] = [{"name": "torch.matmul", "args": {
                "M": M, "N": N, "K": K, "dtype": "bf16", "transpose_b": True}}]
        ev = cl.run(doc, timeout=900)
    r = ev["result"] or {}
    t = r.get("timing") or {}
    out["gemm"] = {"kernel": f"{s.name}[{c.name}]", "state": ev["state"],
                   "error": r.get("error"), "skipped_kernels": errs,
                   "median_ms": t.get("candidate", {}).get("median_ms"),
                   "tflops": t.get("tflops"), "suspect": t.get("suspect"),
                   "correctness": [x.get("ok") for x in r.get("correctness", [])],
                   "baselines": {k: {"median_ms": v["median_ms"], "speedup": v["speedup"]}
                                 for k, v in t.get("baselines", {}).items()}}


def faults(addr, out, s, c, ck):
    import tirxh.lang as T
    from kcoral.client import KCoralClient
    from tirxh.core.compiler import compile_kernel

    @T.kernel(grid=1, block=32)
    def fault_load(p: T.gptr[T.f32], n: T.u32):
        i = T.tid.x
        x = T.ptx.ld.global_.f32(p.at(i))
        T.ptx.st.global_.f32(p.at(i), x)

    @T.kernel(grid=1, block=32)
    def trap_kernel(n: T.u32):
        T.ptx.trap()

    rows = []
    with KCoralClient(addr, client_name="faults") as cl:
        for k, args in ((fault_load, [{"scalar": 0x10, "dtype": "u64"},
                                      {"scalar": 32, "dtype": "u32"}]),
                        (trap_kernel, [{"scalar": 1, "dtype": "u32"}])):
            kc = compile_kernel(k, "sm_90a")
            doc = {"name": k.name, "target": "sm_90a",
                   "module": {"format": "cubin", "blob": cl.put_blob(kc.cubin)},
                   "launches": [{"entry": k.name, "grid": [1, 1, 1], "block": [32, 1, 1],
                                 "args": args}],
                   "timing": {"enabled": False}, "budgets": {"exec_s": 60}}
            t0 = time.time()
            ev = cl.run(doc, timeout=300)
            r = ev["result"] or {}
            after = cl.run(job_for(cl, s, c, ck, min_iters=10, budget_s=1.0), timeout=300)
            rows.append({"kernel": k.name, "state": ev["state"],
                         "error": (r.get("error") or {}).get("type"),
                         "worker_restarted": r.get("worker_restarted"),
                         "wall_s": time.time() - t0,
                         "next_job": after["state"]})
        boards = cl.boards()
    out["faults"] = {"rows": rows, "worker_restarts": {b["name"]: b["properties"].get(
        "worker_restarts") for b in boards}}


def overhead(addr, out, quick):
    from kcoral.client import KCoralClient
    s, c, ck = zoo_case("vadd", "n4096")
    walls, kernel = [], []
    with KCoralClient(addr, client_name="overhead") as cl:
        doc = job_for(cl, s, c, ck)
        doc["timing"]["enabled"] = False
        doc["runs"] = doc["runs"][:1]
        cl.run(doc, timeout=120)  # warm: blobs uploaded, module cached by the driver
        for _ in range(5 if quick else 20):
            t0 = time.perf_counter()
            ev = cl.run(doc, timeout=120)
            walls.append((time.perf_counter() - t0) * 1e3)
        doc2 = job_for(cl, s, c, ck, min_iters=10, warmup=1)
        ev = cl.run(doc2, timeout=120)
        kernel.append(median_of(ev))
    km = kernel[0] or 0.0
    out["overhead"] = {"job": "vadd[n4096], one correctness run, no timing",
                       "wall_ms_median": statistics.median(walls), "wall_ms_all": walls,
                       "kernel_ms": km, "overhead_ms": statistics.median(walls) - km,
                       "goal_ms": 50}


# -------------------------------------------------------------------------------------------------

def table(out) -> str:
    L = []

    def f(x, spec=".4f"):
        return "-" if x is None else format(x, spec)
    so, co, di = out.get("solo", {}), out.get("contended", {}), out.get("direct", {})
    L.append(f"{'section':<28}{'median ms':>12}{'vs solo':>10}{'spread':>9}  notes")
    L.append(f"{'solo (1 client)':<28}{f(so.get('median_ms')):>12}{'':>10}{'':>9}  "
             f"{len(so.get('medians_ms', []))} jobs")
    L.append(f"{'KCoral, 8 clients':<28}{f(co.get('median_ms')):>12}"
             f"{f(co.get('vs_solo_pct'), '+.2f') + '%':>10}"
             f"{f(co.get('spread_pct'), '.1f') + '%':>9}"
             f"  states {co.get('states')} (goal: within 2%)")
    L.append(f"{'direct, 8 processes':<28}{f(di.get('median_ms')):>12}"
             f"{f(di.get('vs_solo_pct'), '+.2f') + '%':>10}"
             f"{f(di.get('spread_pct'), '.1f') + '%':>9}"
             f"  {len(di.get('errors', []))} errors; loops overlapped "
             f"{f(di.get('overlap_s'), '.2f')} s; each loop took "
             f"{f(max(di.get('loop_s') or [0]), '.2f')} s vs "
             f"{f((di.get('alone') or {}).get('loop_s'), '.2f')} s alone")
    g = out.get("gemm", {})
    bl = "; ".join(f"{k} {f(v['median_ms'])} ms -> {f(v['speedup'], '.3f')}x"
                   for k, v in (g.get("baselines") or {}).items())
    L.append(f"{'GEMM ' + str(g.get('kernel', '')):<28}{f(g.get('median_ms')):>12}"
             f"{'':>10}{'':>9}  {f(g.get('tflops'), '.1f')} TFLOP/s; {bl or g.get('error')}")
    for r in out.get("faults", {}).get("rows", []):
        L.append(f"{'fault ' + r['kernel']:<28}{'':>12}{'':>10}{'':>9}  {r['state']} "
                 f"{r['error']}, worker restarted={r['worker_restarted']}, next job "
                 f"{r['next_job']}")
    o = out.get("overhead", {})
    L.append(f"{'per-job overhead':<28}{f(o.get('overhead_ms'), '.1f'):>12}{'':>10}{'':>9}  "
             f"ms beyond the kernel (goal < 50); wall {f(o.get('wall_ms_median'), '.1f')} ms")
    for k, v in out.get("errors", {}).items():
        L.append(f"ERROR in {k}: {v.splitlines()[-1] if v else v}")
    return "\n".join(L)




def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="fewer jobs and iterations (about 60 s on an H200)")
    ap.add_argument("--only", default="", help="comma list of sections to run")
    a = ap.parse_args(argv)
    import logging
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    from kcoral.boards.cuda import gpu_count
    from kcoral.server import Daemon
    n, why = gpu_count()
    if not n:
        print(f"no GPU: {why}", file=sys.stderr)
        return 2
    state = pathlib.Path(tempfile.mkdtemp(prefix="kcoral-gpu-"))
    out: dict = {"errors": {}, "started": time.time()}
    t0 = time.time()
    d = Daemon({"boards": {"cuda": {"devices": [0]}}}, state_dir=state, port=0).start()
    out["daemon_start_s"] = time.time() - t0
    out["boards"] = d.scheduler.board_rows()
    only = set(filter(None, a.only.split(",")))
    vadd = None
    try:
        for name, fn in (("solo", lambda: solo_and_contended(d.address, out, a.quick)),
                         ("direct", lambda: direct(d.address, d, out, *vadd, a.quick)),
                         ("gemm", lambda: gemm(d.address, out, a.quick)),
                         ("faults", lambda: faults(d.address, out, *vadd)),
                         ("overhead", lambda: overhead(d.address, out, a.quick))):
            if only and name not in only and not (name == "solo" and vadd is None):
                continue
            t1 = time.time()
            try:
                r = fn()
                if name == "solo":
                    vadd = r
            except Exception:
                out["errors"][name] = traceback.format_exc()
                if name == "solo":
                    vadd = zoo_case("vadd", "n16M")
            out.setdefault("section_s", {})[name] = time.time() - t1
            print(f"[{name}] {time.time() - t1:.1f} s", file=sys.stderr, flush=True)
            save(out, "kcoral_gpu")  # after every section: a run cut short by a time limit keeps its figures
    finally:
        d.stop(5)
    print(table(out))
    p = save(out, "kcoral_gpu")
    if p:
        print(f"wrote {p}")
    for k, v in out["errors"].items():
        print(f"--- {k} ---\n{v}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
