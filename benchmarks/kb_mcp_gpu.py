"""`tirxh mcp` on the GPU host: an agent's view of check, bench and profile, end to end.

An MCP client (the official SDK, over stdio, as a coding agent runs it) starts ``tirxh mcp`` in
the zoo and calls its tools; the bench tool's document is compared with ``tirxh bench --json`` of
the same item run by hand (same items, outcomes and correctness; medians close: they are two
timings of one kernel). On the CPU the tests prove the tools' JSON is the commands'; this is the
proof that the GPU path (KCoral's embedded daemon, Nsight Compute) works through MCP too.

    (device, carry .carry/mcp and .whl) python3 benchmarks/kb_mcp_gpu.py

Set-up: the SDK from carried wheels. Prepare them here once (no index is reachable there):
``pip download 'mcp>=2,<3' -d .carry/mcp --only-binary=:all: --implementation cp
--platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --python-version 3.X``
for each likely 3.X (23 MB for 3.10-3.13). The project and its plugins are installed editable
(``--no-deps``) as benchmarks/gpu_session.sh does, so the KCoral tools' entry points exist.

Steps, cheapest first, each under its own limit and all under BUDGET seconds (default 250), so a
hang costs seconds: 1 tools + zoo_show (CPU), 2 check on a small case (numsim, sync_check: CPU),
3 bench on one large case through MCP and by hand (GPU), 4 profile --ncu on it (GPU). Without a
GPU (``nvidia-smi -L`` fails) steps 3 and 4 print SKIPPED. Everything is printed and written to
$OUT/kb_mcp_gpu.json. Exit status: 0 when every step that ran passed.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "zoo"
SITE = Path("/tmp/kb_mcp_site")
BENCH_K = os.environ.get("KB_BENCH_K", "vadd and n16M")
PROFILE_NODE = os.environ.get("KB_PROFILE_NODE", "kernels/vadd.py::vadd[n16M]@sm_90a")
BUDGET = float(os.environ.get("BUDGET", "250"))
START = time.monotonic()


def log(msg: str) -> None:
    print(f"[+{time.monotonic() - START:6.1f}s] {msg}", flush=True)


def left() -> float:
    return BUDGET - (time.monotonic() - START)


def have_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


def setup() -> "str | None":
    """Make the SDK importable (carried wheels) and the project installed; the reason it cannot
    be, or None."""
    wheels = sorted(glob.glob(str(ROOT / ".whl" / "*.whl")))
    if wheels:  # gpu_session.sh's carried extras (grpcio-health-checking for KCoral)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                        "--target", str(SITE / "whl"), *wheels], check=False)
        sys.path.insert(0, str(SITE / "whl"))
    try:
        import mcp  # noqa: F401  (optional: present here, carried to the GPU host)
    except ModuleNotFoundError:
        carried = ROOT / ".carry" / "mcp"
        if not carried.is_dir():
            return "the mcp SDK is not installed and .carry/mcp is missing (see the docstring)"
        p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index",
                            "--find-links", str(carried), "--target", str(SITE / "mcp"),
                            "mcp>=2,<3"], capture_output=True, text=True)
        if p.returncode != 0:
            return f"installing the carried mcp wheels failed:\n{p.stderr[-2000:]}"
        sys.path.insert(0, str(SITE / "mcp"))
    paths = [p for p in sys.path if p.startswith(str(SITE))]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")])
    try:
        import tirxh_mcp  # noqa: F401  (installed editable, or from a checkout's venv)
    except ModuleNotFoundError:
        specs = ["-e", str(ROOT)] + [x for d in sorted((ROOT / "plugins").glob("*/"))
                                     for x in ("-e", str(d))]
        p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index",
                            "--no-deps", "--no-build-isolation", *specs],
                           capture_output=True, text=True)
        if p.returncode != 0:
            return f"installing tirxh and its plugins failed:\n{p.stderr[-2000:]}"
    return None


def by_hand(args: list, timeout: float) -> dict:
    p = subprocess.run([sys.executable, "-m", "tirxh", *args, "--json"], cwd=ZOO,
                       capture_output=True, text=True, timeout=timeout)
    return json.loads(p.stdout)


def timing_of(item: dict) -> dict:
    """What the bench phase measured of one item (median, correctness, baselines)."""
    for ph in item.get("phases", []):
        if ph.get("phase") == "bench":
            res = (ph.get("data") or {}).get("result") or {}
            t = res.get("timing") or {}
            cand = t.get("candidate") or {}
            return {"outcome": ph.get("outcome"), "median_ms": cand.get("median_ms"),
                    "baselines": {k: v.get("speedup") for k, v in (t.get("baselines") or {})
                                  .items()},
                    "error": res.get("error"), "not_timed": t.get("skipped")}
    return {"outcome": item.get("outcome"), "median_ms": None}


async def steps(gpu: bool, results: dict) -> None:
    import anyio  # comes with the SDK (optional: carried)
    from mcp import Client, StdioServerParameters  # optional: carried

    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "tirxh", "mcp", "--timeout", "200"],
                                   env=dict(os.environ), cwd=str(ZOO))

    async def call(client, name, args, limit):
        t0 = time.monotonic()
        with anyio.fail_after(max(1.0, min(limit, left()))):
            got = await client.call_tool(name, args)
        if got.is_error:
            raise RuntimeError(f"{name}: tool error: {got.content[0].text[:2000]}")
        log(f"{name} {args}: {time.monotonic() - t0:.1f} s")
        return got.structured_content

    async with Client(params) as client:
        # 1. CPU: the server answers
        tools = {t.name for t in (await client.list_tools()).tools}
        doc = await call(client, "zoo_show", {"name": "vadd"}, 30)
        ok = {"check", "bench", "profile"} <= tools and doc["kernel"]["name"] == "vadd"
        results["1_tools_zoo_show"] = {"ok": ok, "tools": sorted(tools)}
        # 2. CPU: check a small case (numsim, sync_check)
        doc = await call(client, "check", {"keyword": "vadd and n1000"}, 60)
        verdicts = {r["analyzer"]: r["verdict"] for it in doc["items"] for ph in it["phases"]
                    for r in ph.get("results", [])}
        results["2_check"] = {"ok": doc["exitstatus"] == 0, "summary": doc["summary"],
                              "verdicts": verdicts}
        if not gpu:
            results["3_bench"] = results["4_profile"] = {"ok": None, "skipped": "no GPU"}
            log("3 bench, 4 profile: SKIPPED (no NVIDIA GPU here)")
            return
        # 3. GPU: bench through MCP, then by hand
        doc = await call(client, "bench", {"keyword": BENCH_K}, 120)
        mine = [timing_of(it) | {"nodeid": it["nodeid"]} for it in doc["items"]]
        hand = by_hand(["bench", "-k", BENCH_K], max(1.0, min(120, left())))
        theirs = [timing_of(it) | {"nodeid": it["nodeid"]} for it in hand["items"]]
        same = ([(m["nodeid"], m["outcome"]) for m in mine]
                == [(t["nodeid"], t["outcome"]) for t in theirs])
        ratios = [m["median_ms"] / t["median_ms"] for m, t in zip(mine, theirs)
                  if m.get("median_ms") and t.get("median_ms")]
        results["3_bench"] = {"ok": doc["exitstatus"] == 0 and same and bool(ratios)
                              and all(0.8 < r < 1.25 for r in ratios),
                              "mcp": mine, "by_hand": theirs, "median_ratio": ratios}
        # 4. GPU: Nsight Compute through MCP
        doc = await call(client, "profile", {"nodeid": PROFILE_NODE, "ncu": True,
                                             "out": "/tmp/kb_mcp_profile"}, 120)
        reports = [{"tool": r.get("tool"), "verdict": r.get("verdict"),
                    "summary": json.dumps(r.get("summary"))[:1500],
                    "artifacts": sorted(r.get("artifacts") or {})} for r in doc["reports"]]
        results["4_profile"] = {"ok": bool(reports) and all(r["verdict"] != "error"
                                                            for r in reports),
                                "reports": reports}


def main() -> int:
    # KB_ASSUME_GPU=1 runs steps 3-4 without a GPU (the sim board: a rehearsal of the code path)
    gpu = have_gpu() or os.environ.get("KB_ASSUME_GPU") == "1"
    log(f"GPU: {'yes' if gpu else 'no (steps 3-4 will be SKIPPED)'}; budget {BUDGET:g} s")
    results: dict = {"gpu": gpu, "bench_k": BENCH_K, "profile_node": PROFILE_NODE}
    reason = setup()
    if reason:
        log(f"SKIPPED: {reason}")
        results["skipped"] = reason
        rc = 1
    else:
        import anyio  # optional: carried with the SDK
        try:
            anyio.run(steps, gpu, results)
        except Exception as e:  # the report must come back whatever failed
            results["error"] = f"{type(e).__name__}: {e}"
            log(f"FAILED: {results['error'][:3000]}")
        rc = 0 if "error" not in results and all(
            v.get("ok") in (True, None) for k, v in results.items() if k[:1].isdigit()) else 1
    for k, v in results.items():
        if k[:1].isdigit():
            log(f"{k}: {'SKIPPED' if v.get('ok') is None else 'ok' if v['ok'] else 'FAILED'} "
                f"{json.dumps({x: y for x, y in v.items() if x != 'ok'})[:1500]}")
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    (out / "kb_mcp_gpu.json").write_text(json.dumps(results, indent=2) + "\n")
    log(f"rc={rc}; wrote {out / 'kb_mcp_gpu.json'}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
