"""KCoral past one GPU, in one command: ``python benchmarks/kcoral_multi_gpu.py [--smoke] [--jobs 3]``.

(on the lent ``nvidia-h200-x2``, set-up and a smoke pass first:
``bash benchmarks/kcoral_issue17_gpu.sh multi``)

Needs a host with two GPUs (the ``nvidia-h200-x2`` machine kind); with fewer it says so and exits
0 (CI proves the same scheduling on two fake boards: tests/kcoral/test_multi_board.py).

1. boards: one daemon serving every local GPU; each is a board with its own worker process.
2. solo: for each of cuda0 and cuda1 alone, `--jobs` jobs pinned to it (``board``); the median
   of each job's median. Kernels: the zoo's vadd n=16M (memory-bound) and gemm_wgmma 4096^3
   (BN=256) against torch.matmul (clock-sensitive).
3. together: two clients at once, one per board, the same jobs; each board's median against its
   solo median (goal: within 2%), and the jobs' run intervals (they must overlap).
4. remote: a daemon that serves only cuda0, and ``kcoral agent`` (in-process) offering cuda1;
   jobs submitted to the daemon for the agent's board run on GPU 1 and come back with
   ``provenance.kind == "remote"``; their median against cuda1's solo median.

Prints a table and, when ``$OUT`` is set, writes ``kcoral_multi_gpu.json`` there after every
section.
"""

import argparse
import pathlib
import statistics
import sys
import tempfile
import threading
import time
import traceback

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import kcoral_gpu  # noqa: E402  (zoo_case, job_for, median_of: the same jobs as the one-GPU run)
from gpu_out import finish, save  # noqa: E402  (the $OUT/<name>.json every script writes)

KERNELS = (("vadd", "n16M", None), ("gemm_wgmma", "m4096n4096k4096_bn256", "torch.matmul"))
# --smoke: the same path (both boards, together, the agent) on small cases, in seconds
SMOKE_KERNELS = (("vadd", "n4096", None), ("gemm_wgmma", "m128n256k192_bn256", "torch.matmul"))
EXEC_S = 120.0  # each job's execution budget on its board (a hung launch stops sooner)


def jobs_for(cl, which, board: str) -> dict:
    """The job documents per kernel, pinned to `board`."""
    out = {}
    for name, case, baseline in which:
        s, c, ck = kcoral_gpu.zoo_case(name, case)
        doc = kcoral_gpu.job_for(cl, s, c, ck, min_iters=50, budget_s=3.0)
        doc["budgets"] = {"exec_s": EXEC_S}
        if baseline and not doc["baselines"]:
            M, N, K = (c.params.get(k) for k in ("M", "N", "K"))
            doc["baselines"] = [{"name": baseline, "args": {
                "M": M, "N": N, "K": K, "dtype": "bf16", "transpose_b": True}}]
        doc["board"] = board
        out[f"{name}[{case}]"] = doc
    return out


def run_jobs(addr, board, n, which, client_name, record: list) -> None:
    from kcoral.client import KCoralClient
    with KCoralClient(addr, client_name=client_name, timeout=60) as cl:
        docs = jobs_for(cl, which, board)
        for _ in range(n):
            for kernel, doc in docs.items():
                ev = cl.run(doc, timeout=EXEC_S + 120)
                r = ev["result"] or {}
                t = r.get("timing") or {}
                info = cl.get_job(ev["job_id"])
                record.append({"kernel": kernel, "board": ev["board"], "state": ev["state"],
                               "error": (r.get("error") or {}).get("type"),
                               "median_ms": kcoral_gpu.median_of(ev),
                               "speedup": {k: v.get("speedup")
                                           for k, v in (t.get("baselines") or {}).items()},
                               "throttled": t.get("throttled"),
                               "provenance": r.get("provenance"),
                               "ordinal": (r.get("device") or {}).get("ordinal"),
                               "started": info["started"], "finished": info["finished"]})


def medians(rows, board) -> dict:
    out = {}
    for r in rows:
        if r["board"] == board and r["state"] == "done" and r["median_ms"]:
            out.setdefault(r["kernel"], []).append(r["median_ms"])
    return {k: statistics.median(v) for k, v in out.items()}


def overlap_s(a: list, b: list) -> float:
    """Seconds during which a job of `a` and a job of `b` were both running."""
    tot = 0.0
    for x in a:
        for y in b:
            tot += max(0.0, min(x["finished"], y["finished"]) - max(x["started"], y["started"]))
    return tot


def local_sections(out, n, which) -> None:
    from kcoral.server import Daemon
    d = Daemon({"boards": {"cuda": {}}}, state_dir=tempfile.mkdtemp(prefix="kcoral-mgpu-"),
               port=0).start()
    try:
        out["boards"] = [{k: b[k] for k in ("name", "type", "target", "state")} | {
            "device": b["properties"].get("device"),
            "worker_pid": b["properties"].get("worker_pid")} for b in d.scheduler.board_rows()]
        solo = []
        for board in ("cuda0", "cuda1"):
            run_jobs(d.address, board, n, which, f"solo-{board}", solo)
        out["solo"] = {"rows": solo, "medians": {b: medians(solo, b) for b in ("cuda0", "cuda1")}}
        save(out, "kcoral_multi_gpu")
        rows = {"cuda0": [], "cuda1": []}
        errors = []

        def client(board):
            try:
                run_jobs(d.address, board, n, which, f"together-{board}", rows[board])
            except Exception:
                errors.append(traceback.format_exc())
        ts = [threading.Thread(target=client, args=(b,)) for b in rows]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        vs = {}
        for board, rr in rows.items():
            m = medians(rr, board)
            vs[board] = {k: (m[k] / out["solo"]["medians"][board][k] - 1) * 100
                         for k in m if k in out["solo"]["medians"][board]}
        out["together"] = {"rows": rows["cuda0"] + rows["cuda1"], "errors": errors,
                           "medians": {b: medians(rows[b], b) for b in rows},
                           "vs_solo_pct": vs, "goal_pct": 2.0,
                           "overlap_s": overlap_s(rows["cuda0"], rows["cuda1"])}
    finally:
        d.stop(5)


def remote_section(out, n, which) -> None:
    from kcoral.agent import Agent
    from kcoral.client import KCoralClient
    from kcoral.server import Daemon
    d = Daemon({"boards": {"cuda": {"devices": [0]}}},
               state_dir=tempfile.mkdtemp(prefix="kcoral-mgpu-remote-"), port=0).start()
    ag = Agent(d.address, "cuda", name="gpu1-agent", device=1, tags=["gpu1"],
               cache_dir=tempfile.mkdtemp(prefix="kcoral-agent-"))
    t = threading.Thread(target=ag.run, daemon=True)
    t.start()
    try:
        with KCoralClient(d.address, client_name="remote-probe") as cl:
            deadline = time.time() + 90
            while not any(b["name"] == "gpu1-agent" and b["state"] != "offline"
                          for b in cl.boards()):
                if time.time() > deadline:
                    raise RuntimeError("the agent did not join within 90 s")
                time.sleep(0.5)
        rows = []
        run_jobs(d.address, "gpu1-agent", n, which, "remote", rows)
        m = medians(rows, "gpu1-agent")
        solo = out.get("solo", {}).get("medians", {}).get("cuda1", {})
        out["remote"] = {"rows": rows, "medians": m,
                         "all_remote": all((r["provenance"] or {}).get("kind") == "remote"
                                           for r in rows),
                         "ordinals": sorted({r["ordinal"] for r in rows if r["ordinal"] is not
                                             None}),
                         "vs_cuda1_solo_pct": {k: (m[k] / solo[k] - 1) * 100 for k in m
                                               if k in solo}}
    finally:
        ag.stop()
        t.join(30)
        d.stop(5)




def table(out) -> str:
    L = [f"{'section':<12}{'board':<12}{'kernel':<32}{'median ms':>11}{'vs solo':>9}"]
    for board, m in out.get("solo", {}).get("medians", {}).items():
        for k, v in m.items():
            L.append(f"{'solo':<12}{board:<12}{k:<32}{v:>11.4f}{'':>9}")
    tg = out.get("together", {})
    for board, m in tg.get("medians", {}).items():
        for k, v in m.items():
            pct = tg["vs_solo_pct"].get(board, {}).get(k)
            L.append(f"{'together':<12}{board:<12}{k:<32}{v:>11.4f}"
                     f"{'-' if pct is None else f'{pct:+.2f}%':>9}")
    if tg:
        L.append(f"  two clients ran together for {tg['overlap_s']:.1f} s (goal: each within "
                 f"2% of its solo median); errors: {len(tg['errors'])}")
    rm = out.get("remote", {})
    for k, v in rm.get("medians", {}).items():
        pct = rm["vs_cuda1_solo_pct"].get(k)
        L.append(f"{'remote':<12}{'gpu1-agent':<12}{k:<32}{v:>11.4f}"
                 f"{'-' if pct is None else f'{pct:+.2f}%':>9}")
    if rm:
        L.append(f"  remote results marked remote: {rm['all_remote']}; device ordinals "
                 f"{rm['ordinals']}")
    for k, v in out.get("errors", {}).items():
        L.append(f"ERROR in {k}: {v.strip().splitlines()[-1]}")
    return "\n".join(L)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=3, help="jobs per kernel and board")
    ap.add_argument("--only", default="", help="comma list: local, remote")
    ap.add_argument("--kernels", default="vadd,gemm_wgmma")
    ap.add_argument("--smoke", action="store_true",
                    help="small cases, one job each, a 30 s execution budget (exit 1 unless "
                         "every job is done)")
    a = ap.parse_args(argv)
    global EXEC_S
    if a.smoke:
        a.jobs, EXEC_S = 1, 30.0
    from kcoral.boards.cuda import gpu_count
    n, why = gpu_count()
    out: dict = {"gpus": n, "errors": {}, "started": time.time()}
    if n < 2:
        out["skipped"] = f"needs 2 GPUs, found {n}" + (f" ({why})" if why else "")
        print(f"kcoral_multi_gpu: {out['skipped']}; nothing measured (CI proves the scheduling "
              f"on two fake boards: tests/kcoral/test_multi_board.py)")
        save(out, "kcoral_multi_gpu")
        return 0
    which = [k for k in (SMOKE_KERNELS if a.smoke else KERNELS) if k[0] in a.kernels.split(",")]
    only = set(filter(None, a.only.split(",")))
    for name, fn in (("local", local_sections), ("remote", remote_section)):
        if only and name not in only:
            continue
        t0 = time.time()
        try:
            fn(out, a.jobs, which)
        except Exception:
            out["errors"][name] = traceback.format_exc()
        out.setdefault("section_s", {})[name] = time.time() - t0
        print(f"[{name}] {time.time() - t0:.1f} s", file=sys.stderr, flush=True)
        save(out, "kcoral_multi_gpu")
    print(table(out))
    return finish(out, "kcoral_multi_gpu", failures(out))


def failures(out: dict) -> list:
    """What makes a run with two GPUs a failure (exit 1; the wrapper then skips the full run
    after a smoke pass): a job not done, a section or client that raised, a job through the
    agent not marked remote, or no job at all."""
    rows = [r for sec in ("solo", "together", "remote") for r in out.get(sec, {}).get("rows", [])]
    bad = [f"{r['kernel']} on {r['board']}: {r['state']} {r['error']}" for r in rows
           if r["state"] != "done"]
    bad += [f"{where}: {e.strip().splitlines()[-1]}" for where, e in
            list(out.get("errors", {}).items())
            + [("together", e) for e in out.get("together", {}).get("errors", [])]]
    if out.get("remote") and not out["remote"]["all_remote"]:
        bad.append("a job through the agent came back without provenance.kind == 'remote'")
    return bad or ([] if rows else ["no job ran"])


if __name__ == "__main__":
    sys.exit(main())
