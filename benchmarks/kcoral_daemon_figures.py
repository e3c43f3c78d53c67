"""KCoral's daemon figures on a CPU, in one command (issue 11's proof; no GPU needed):

    python benchmarks/kcoral_daemon_figures.py [--jobs 20000] [--clients 8] [--streams 500]

1. memory: a ``kcoral serve`` subprocess with fake boards runs `--jobs` trivial jobs submitted by
   `--clients` concurrent clients; the daemon's resident memory (VmRSS of its process, workers
   not included) is sampled every 1,000 jobs. Goal: flat within 10 MB after the first 2,000.
2. idle streams: `--streams` Watch streams stay open on a job that sleeps; Status and the
   standard health Check are then timed (each call's wall time at the client). Goal: < 100 ms.
3. compare: `kcoral.tolerance.compare` on `--compare-n` float32 elements within tolerance, the
   fast path against the plain float64 path (the reference).

Prints a table and writes ``kcoral_daemon_figures.json`` under ``$OUT`` (or the current
directory). Every section records its own error instead of stopping the run.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from kcoral._proto import kcoral_pb2 as pb  # noqa: E402
from kcoral.client import KCoralClient  # noqa: E402


def serve(state: pathlib.Path, boards: int):
    """A daemon subprocess with `boards` fake boards on port 0; (process, address)."""
    port_file = state.parent / "port"
    cfg = state.parent / "kcoral.toml"
    cfg.write_text(f'[server]\nport = 0\nstate_dir = "{state}"\ngrace_s = 2\n'
                   f'[boards.fake]\ncount = {boards}\n')
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    log = open(state.parent / "daemon.log", "wb")
    p = subprocess.Popen([sys.executable, "-m", "kcoral.cli", "serve", "--config", str(cfg),
                          "--port-file", str(port_file)], env=env, stdout=log,
                         stderr=subprocess.STDOUT, cwd=str(ROOT))
    deadline = time.time() + 120
    while not port_file.exists():
        if p.poll() is not None or time.time() > deadline:
            p.kill()
            raise RuntimeError(f"daemon did not start (see {state.parent / 'daemon.log'})")
        time.sleep(0.05)
    return p, f"127.0.0.1:{port_file.read_text()}"


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def trivial_job(c: KCoralClient, sleep_s: float = 0.0) -> dict:
    mod = c.put_blob(json.dumps({"kernels": {"k": {"op": "add", "time_ms": 0.01}}}).encode())
    return {"name": "trivial", "target": "sm_90a", "module": {"format": "fake", "blob": mod},
            "buffers": [{"name": "a", "dtype": "f32", "shape": [64], "init": {"kind": "normal"}},
                        {"name": "b", "dtype": "f32", "shape": [64], "init": {"kind": "normal"}},
                        {"name": "out", "dtype": "f32", "shape": [64], "output": True}],
            "launches": [{"entry": "k", "grid": [1, 1, 1], "block": [64, 1, 1],
                          "args": [{"buffer": "a"}, {"buffer": "b"}, {"buffer": "out"}]}],
            "timing": {"enabled": False}, "fake": {"sleep_s": sleep_s}}


def memory(addr: str, pid: int, jobs: int, clients: int) -> dict:
    done = [0]
    lock = threading.Lock()
    samples = [(0, rss_mb(pid))]
    errors: list = []
    next_mark = [1000]

    def client_main(i: int, count: int):
        try:
            with KCoralClient(addr, client_name=f"m{i}", timeout=60) as c:
                doc = trivial_job(c)
                for _ in range(count):
                    ev = c.run(doc, timeout=120)
                    if ev["state"] != "done":
                        raise RuntimeError(f"job {ev['job_id']} {ev['state']}")
                    with lock:
                        done[0] += 1
                        if done[0] >= next_mark[0]:
                            samples.append((done[0], rss_mb(pid)))
                            next_mark[0] += 1000
        except Exception as e:
            errors.append(f"client {i}: {e!r}")

    t0 = time.time()
    per = [jobs // clients + (i < jobs % clients) for i in range(clients)]
    ts = [threading.Thread(target=client_main, args=(i, n)) for i, n in enumerate(per)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.time() - t0
    samples.append((done[0], rss_mb(pid)))
    after_warm = [mb for n, mb in samples if n >= 2000]
    return {"jobs": done[0], "clients": clients, "wall_s": wall, "jobs_per_s": done[0] / wall,
            "rss_mb": samples, "errors": errors[:10],
            "growth_after_2000_mb": (max(after_warm) - min(after_warm)) if after_warm else None,
            "final_minus_2000_mb": (after_warm[-1] - after_warm[0]) if after_warm else None}


def streams(addr: str, n: int) -> dict:
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    with KCoralClient(addr, client_name="streams", timeout=30) as c:
        ev = next(c.submit(trivial_job(c, sleep_s=600), timeout=60))
        calls = [c.stub.Watch(pb.JobRef(job_id=ev["job_id"]), timeout=600) for _ in range(n)]
        try:
            for s in calls:  # each stream has delivered its first event: it is open
                next(s)
            hs = health_pb2_grpc.HealthStub(c.channel)
            st, hc = [], []
            for _ in range(200):
                t0 = time.perf_counter()
                c.status()
                st.append((time.perf_counter() - t0) * 1e3)
                t0 = time.perf_counter()
                hs.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
                hc.append((time.perf_counter() - t0) * 1e3)
        finally:
            for s in calls:
                s.cancel()
            c.cancel(ev["job_id"])

    def summary(xs):
        xs = sorted(xs)
        return {"p50_ms": statistics.median(xs), "p99_ms": xs[int(len(xs) * 0.99) - 1],
                "max_ms": xs[-1], "n": len(xs)}
    return {"open_streams": n, "status": summary(st), "health": summary(hc)}


def compare_speed(n: int) -> dict:
    from kcoral.tolerance import _statistics, compare
    rng = np.random.default_rng(0)
    e = rng.standard_normal(n, dtype=np.float32)
    a = e + rng.standard_normal(n, dtype=np.float32) * np.float32(1e-4)

    def cpu():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime
    out = {"elements": n, "dtype": "f32"}
    for label, fn in (("fast", lambda: compare(a, e, 1e-3, 1e-3, 0.01)),
                      ("float64_reference", lambda: _statistics(a, e, 1e-3, 1e-3, 0.01, 5))):
        c0, t0 = cpu(), time.perf_counter()
        r = fn()
        out[label] = {"wall_s": time.perf_counter() - t0, "cpu_s": cpu() - c0, "ok": r["ok"],
                      "mismatches": r["mismatches"]}
    out["same_verdict"] = out["fast"]["ok"] == out["float64_reference"]["ok"] and \
        out["fast"]["mismatches"] == out["float64_reference"]["mismatches"]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--boards", type=int, default=2)
    ap.add_argument("--streams", type=int, default=500)
    ap.add_argument("--compare-n", type=int, default=100_000_000)
    ap.add_argument("--skip", action="append", default=[],
                    choices=("memory", "streams", "compare"))
    a = ap.parse_args(argv)
    out: dict = {}
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="kcoral-figures-"))
    p, addr = serve(tmp / "state", a.boards)
    try:
        for name, fn in (("memory", lambda: memory(addr, p.pid, a.jobs, a.clients)),
                         ("streams", lambda: streams(addr, a.streams))):
            if name in a.skip:
                continue
            try:
                out[name] = fn()
            except Exception:
                out[name] = {"error": traceback.format_exc()[-2000:]}
            print(f"{name}: {json.dumps(out[name], default=str)[:1500]}", flush=True)
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
    if "compare" not in a.skip:
        try:
            out["compare"] = compare_speed(a.compare_n)
        except Exception:
            out["compare"] = {"error": traceback.format_exc()[-2000:]}
        print(f"compare: {json.dumps(out['compare'])}", flush=True)
    dest = pathlib.Path(os.environ.get("OUT") or ".") / "kcoral_daemon_figures.json"
    dest.write_text(json.dumps(out, indent=1, default=str))
    m = out.get("memory", {})
    if "rss_mb" in m:
        print(f"\nmemory: {m['jobs']} jobs in {m['wall_s']:.0f} s; daemon RSS "
              f"{m['rss_mb'][0][1]:.1f} MB at start, "
              f"{' '.join(f'{mb:.1f}' for _, mb in m['rss_mb'][1:])} MB every 1,000 jobs; "
              f"spread after 2,000: {m['growth_after_2000_mb'] or 0:.1f} MB (goal < 10)")
    s = out.get("streams", {})
    if "status" in s:
        print(f"{s['open_streams']} idle streams: Status p50 {s['status']['p50_ms']:.2f} ms "
              f"p99 {s['status']['p99_ms']:.2f} ms max {s['status']['max_ms']:.2f} ms; health "
              f"p50 {s['health']['p50_ms']:.2f} ms p99 {s['health']['p99_ms']:.2f} ms max "
              f"{s['health']['max_ms']:.2f} ms (goal < 100 ms)")
    c = out.get("compare", {})
    if "fast" in c:
        print(f"compare {c['elements']:,} f32: fast {c['fast']['cpu_s']:.2f} s CPU, float64 "
              f"reference {c['float64_reference']['cpu_s']:.2f} s CPU, same verdict: "
              f"{c['same_verdict']}")
    print(f"written {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
