"""Pay pyptx's first-call cost before any KCoral job runs, so it is not charged to a timed job.

Why: the first call of the ``pyptx.gemm_hopper`` baseline on a fresh machine costs ~20 s
(its launch shim built with g++, the kernel traced and compiled into pyptx's disk cache:
$PYPTX_CACHE_DIR, which gpu_bench.sh sets and carries as pyptx-cache.tgz), and a
fresh process ~6 s more; later shapes in the same process cost < 1 s. KCoral's baselines run
inside the candidate's job, in the warm-up, which the per-launch watchdog does not guard (a
baseline may compile there), so that cost lands on whichever GEMM job first has pyptx beside
it. On the H200 the first such job spent 20.2 s (session 10) and 19.5 s (session 11) in
"timing: warm-up" where every other job spent 0.1-0.7 s, and in session 13 it ran past
gemm_bench.sh's 30 s budget: ``gemm_bf16[m512n4096k4096_t64k2p]`` was reported as a hang of
the kernel (docs/TUNING.md "A timeout in the warm-up"). Run in a plain process on the same
machine and user before the daemon starts, the shim and the cubins are on disk when the jobs
ask for them.

Each shape is run through KCoral's own baseline (`kcoral.baselines.gemm_peers.PyptxGemm`:
the same tensors, so the same cache entry); a shape pyptx refuses is skipped with its rule.
This process times nothing: it prints how long each first call took.

    python benchmarks/pyptx_prewarm.py [--shapes m512n4096k4096 m8192n8192k8192 ...]
                                       [--budget S]
"""

from __future__ import annotations

import argparse
import re
import sys
import time

SHAPE = re.compile(r"m(\d+)n(\d+)k(\d+)")


def parse_shapes(names) -> list:
    """``mMnNkK`` names -> [(name, M, N, K)], in order, each once; ValueError names every one
    that does not parse."""
    out, bad, seen = [], [], set()
    for name in names:
        m = SHAPE.fullmatch(name)
        if not m:
            bad.append(name)
        elif name not in seen:
            seen.add(name)
            out.append((name, *(int(g) for g in m.groups())))
    if bad:
        raise ValueError(f"unknown shape name(s) {', '.join(map(repr, bad))}: expected "
                         f"mMnNkK, e.g. m512n4096k4096")
    return out


class _Board:
    """What `PyptxGemm` asks of a KCoral device: its kind and ordinal."""

    kind = "cuda"

    def info(self) -> dict:
        return {"ordinal": 0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="*", default=["m512n4096k4096"],
                    help="mMnNkK names (gemm_bench.sh's SHAPES), warmed in order")
    ap.add_argument("--budget", type=float, default=90.0,
                    help="seconds after which no new shape starts")
    a = ap.parse_args(argv)
    try:
        shapes = parse_shapes(a.shapes)
    except ValueError as e:
        ap.error(str(e))
    from kcoral.baselines.gemm_peers import PyptxGemm, pyptx_available
    from kcoral.errors import JobFailure
    if not pyptx_available():
        print("prewarm: SKIPPED: torch or pyptx is not installed here", flush=True)
        return 0
    board, baseline = _Board(), PyptxGemm()
    why = baseline.available(board)  # imports torch and pyptx; says why not
    if why:
        print(f"prewarm: SKIPPED: {why}", flush=True)
        return 0
    import torch  # optional dependency, present on the GPU machine only (available() imported it)
    start = time.perf_counter()
    for name, M, N, K in shapes:
        if time.perf_counter() - start > a.budget:
            print(f"prewarm: budget spent before {name}", flush=True)
            break
        t0 = time.perf_counter()
        try:
            run = baseline.prepare(board, {}, {"M": M, "N": N, "K": K})
        except JobFailure as e:       # a shape pyptx does not take: not timed beside it either
            print(f"prewarm {name}: skipped ({e.message})", flush=True)
            continue
        try:
            run()
            torch.cuda.synchronize()
            print(f"prewarm {name} pyptx.gemm_hopper: {time.perf_counter() - t0:.1f} s",
                  flush=True)
        except Exception as e:  # noqa: BLE001 - a failed prewarm only leaves the cost to the job
            print(f"prewarm {name} pyptx.gemm_hopper: FAILED after "
                  f"{time.perf_counter() - t0:.1f} s: {type(e).__name__}: {e}", flush=True)
    print(f"prewarm: done in {time.perf_counter() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
