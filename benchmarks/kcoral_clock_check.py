"""Clocks and ratios on a sustained GEMM, in one GPU command (issue 17):

    python benchmarks/kcoral_clock_check.py [--smoke] [--case m8192n8192k8192_bn256] [--rounds 1500]
    python benchmarks/kcoral_clock_check.py --suite attention --case b4h32s8192_lazy8 --rounds 600
    python benchmarks/kcoral_clock_check.py --suite gemm_sm90:SUITE_C2_PEERS --case m8192n8192k8192_t256

(on the lent H200, set-up and a smoke pass first: ``bash benchmarks/kcoral_issue17_gpu.sh clock``)

On 2026-12-01 the H200's SM clock fell from 1980 to 1680 MHz during one 8192^3 job (power
limit): cuBLAS's samples went from 1.38 ms to ~1.7 ms while the candidate's stayed ~1.6-1.7 ms, so
one median ratio (0.99x) hid a 13% gap at full clock. This runs the zoo's gemm_wgmma 8192^3 against
torch.matmul (or any zoo case against its suite's first baseline: `--suite`, `--case`; issues
15 and 16 ask for both regimes too) in one KCoral job long enough to heat the card (`--rounds`
timed rounds), then again
with a cool-down before every round that ran below full clock (`--cooldown`), and prints:

* every `--every`-th round: its SM clock, the candidate's and torch.matmul's sample, their ratio;
* the job's clock summary (first/last/min/max, drop, ``throttled``, NVML's clock event reasons);
* the paired ratio (median of per-round ratios) overall and per regime (full clock, sustained),
  the ratio of medians, and the line ``tirxh bench`` prints for the result.

Needs a GPU; per-sample clocks need nvidia-ml-py (``pip install nvidia-ml-py``: the script says so
when it is missing and still runs, without the regime split). Writes ``kcoral_clock_check.json``
(every sample and clock) under ``$OUT`` when set.
"""

import argparse
import json
import pathlib
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import kcoral_gpu  # noqa: E402  (zoo_case, job_for: the jobs the one-GPU run builds)
from gpu_out import finish, run_recorded, save  # noqa: E402  ($OUT/<name>.json)
from tirxh.plugins.bench import BenchResult  # noqa: E402  (the line tirxh bench prints)


def case_job(cl, case: str, rounds: int, exec_s: float,
             suite: str = "gemm_wgmma") -> "tuple[dict, str]":
    """The case's job and its kernel's name: `rounds` timed rounds against its suite's baselines (gemm_wgmma's have
    none: torch.matmul then), built once (the correctness runs' expected arrays are host
    references of that size), within `exec_s` seconds on the board (a hung launch is stopped
    sooner by the per-launch watchdog)."""
    s, c, ck = kcoral_gpu.zoo_case(suite, case)
    doc = kcoral_gpu.job_for(cl, s, c, ck, min_iters=rounds, max_iters=rounds,
                             budget_s=600.0, rel_noise=1e-6)
    if not doc["baselines"]:
        M, N, K = (c.params.get(k) for k in ("M", "N", "K"))
        doc["baselines"] = [{"name": "torch.matmul", "args": {
            "M": M, "N": N, "K": K, "dtype": "bf16", "transpose_b": True}}]
    doc["budgets"] = {"exec_s": exec_s}
    return doc, s.name


def with_cooldown(doc: dict, rounds: int, cooldown_s: float) -> dict:
    d = json.loads(json.dumps(doc))
    d["timing"].update(min_iters=rounds, max_iters=rounds, cooldown_s=cooldown_s)
    return d


def describe(label: str, ev: dict, every: int, baseline: str = "torch.matmul",
             kernel: str = "gemm_wgmma") -> dict:
    """Prints one job's rounds, clocks and ratios against `baseline`; returns its record."""
    r = ev["result"] or {}
    t = r.get("timing") or {}
    out = {"label": label, "state": ev["state"], "error": r.get("error"),
           "guards": {k: v.get("status") for k, v in (r.get("guards") or {}).items()}}
    if not t.get("candidate"):
        print(f"\n== {label}: {ev['state']} {r.get('error')}")
        return out
    cand = t["candidate"]["samples_ms"]
    base = t["baselines"][baseline]["samples_ms"]
    clocks = t.get("clocks_mhz") or [None] * len(cand)
    print(f"\n== {label}: {len(cand)} rounds, order {t.get('order')}, candidate first in "
          f"{t.get('candidate_first_rounds')}")
    print(f"{'round':>6}{'clock MHz':>11}{'kernel ms':>11}{'base ms':>10}{'ratio':>8}")
    for i in range(0, len(cand), every):
        ck = clocks[i]
        print(f"{i + 1:>6}{'-' if ck is None else f'{ck:.0f}':>11}{cand[i]:>11.4f}"
              f"{base[i]:>10.4f}{base[i] / cand[i]:>8.3f}")
    c = t.get("sm_clock_mhz") or {}
    print(f"clock: {c.get('first')} -> {c.get('last')} MHz, min {c.get('min')} max "
          f"{c.get('max')} (full {c.get('full')}), drop {c.get('drop_pct')}%, throttled "
          f"{t.get('throttled')}; reasons {t.get('clock_reasons')}"
          + (f"; {t['clock_note']}" if t.get("clock_note") else ""))
    b = t["baselines"][baseline]
    print(f"paired ratio (median of per-round {baseline}/{kernel}) {b['speedup']:.3f}x; ratio of "
          f"medians {b['speedup_of_medians']:.3f}x; {kernel} {t['candidate']['median_ms']:.4f} ms, "
          f"{baseline} {b['median_ms']:.4f} ms")
    for name, g in (t.get("regimes") or {}).items():
        if g.get("rounds"):
            gb = g["baselines"][baseline]
            print(f"  {name:<10} {g['rounds']:>5} rounds at {g['clock_mhz']:.0f} MHz: {kernel} "
                  f"{g['candidate_median_ms']:.4f} ms, {baseline} {gb['median_ms']:.4f} ms, "
                  f"{gb['speedup']:.3f}x")
        else:
            print(f"  {name:<10}     0 rounds")
    print("tirxh bench: " + BenchResult(f"{kernel}[{label}]", ev["state"], r).summary)
    out.update(timing={k: v for k, v in t.items()}, summary=BenchResult(
        kernel, ev["state"], r).summary)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", default="gemm_wgmma",
                    help="zoo module (its SUITE) or MODULE:ATTR, e.g. gemm_sm90:SUITE_C2_PEERS")
    ap.add_argument("--case", default="m8192n8192k8192_bn256")
    ap.add_argument("--rounds", type=int, default=1500)
    ap.add_argument("--cooldown", type=float, default=0.5,
                    help="seconds of idle before a round that follows a throttled one "
                         "(second job; 0 skips it)")
    ap.add_argument("--every", type=int, default=50, help="print every n-th round")
    ap.add_argument("--cooldown-rounds", type=int, default=200,
                    help="rounds of the cool-down job (each may idle --cooldown seconds first)")
    ap.add_argument("--budget", type=float, default=240.0,
                    help="seconds for the whole run: the cool-down job starts only if at least "
                         "a quarter of it is left")
    ap.add_argument("--smoke", action="store_true",
                    help="a seconds-long pass first: the small BN=256 case, 20 rounds, a 30 s "
                         "execution budget, no cool-down (exit 1 unless it is done and correct)")
    ap.add_argument("--resolve", action="store_true",
                    help="only check that --suite and --case name a zoo case (no GPU, no "
                         "compile): exit 0, or 2 with what the suite holds")
    a = ap.parse_args(argv)
    if a.resolve:
        try:
            kcoral_gpu.find_case(a.suite, a.case)
        except SystemExit as e:
            print(f"kcoral_clock_check: {e}", file=sys.stderr)
            return 2
        print(f"kcoral_clock_check: {a.suite} has case {a.case}")
        return 0
    if a.smoke:
        a.suite, a.case, a.rounds, a.cooldown, a.every = (
            "gemm_wgmma", "m128n256k192_bn256", 20, 0.0, 5)
    start = time.time()
    from kcoral.boards.cuda import gpu_count
    n, why = gpu_count()
    if not n:
        print(f"kcoral_clock_check: no GPU ({why}): nothing measured")
        return 0
    try:
        import pynvml  # noqa: F401  optional: the check only says whether it is there
        nvml = "nvidia-ml-py present: per-sample SM clocks"
    except ImportError:
        nvml = ("nvidia-ml-py is NOT installed: no clock readings, no regime split "
                "(pip install nvidia-ml-py, pure Python, to get them)")
    print(nvml, flush=True)
    from kcoral.client import KCoralClient
    from kcoral.server import Daemon
    out: dict = {"nvml": nvml, "suite": a.suite, "case": a.case, "rounds": a.rounds, "runs": [],
                 "errors": []}
    d = Daemon({"boards": {"cuda": {"devices": [0]}}},
               state_dir=tempfile.mkdtemp(prefix="kcoral-clock-"), port=0).start()
    try:
        with KCoralClient(d.address, client_name="clock-check") as cl:
            base, kernel = case_job(cl, a.case, a.rounds, 30.0 if a.smoke else a.budget,
                                    a.suite)
            baseline = base["baselines"][0]["name"]
            # the cool-down run idles before every round that follows a throttled one: fewer
            # rounds bound it (200 x 0.5 s = 100 s of idling if every round cools)
            jobs = [("sustained", base)] + ([("cool-down", with_cooldown(
                base, min(a.rounds, a.cooldown_rounds), a.cooldown))] if a.cooldown else [])
            for label, doc in jobs:
                t0 = time.time()
                if label == "cool-down" and t0 - start > 0.75 * a.budget:
                    out["errors"].append(f"cool-down job not started: {t0 - start:.0f} s of "
                                         f"the {a.budget:.0f} s budget used")
                    print(out["errors"][-1], file=sys.stderr)
                    continue
                rec = run_recorded(out, lambda d=doc, lb=label: describe(
                    f"{a.case}, {lb}", cl.run(d, timeout=3600), a.every, baseline, kernel))
                if rec is not None:
                    rec["wall_s"] = time.time() - t0
                save(out, "kcoral_clock_check")
    finally:
        d.stop(5)
    return finish(out, "kcoral_clock_check", failures(out))


def failures(out: dict) -> list:
    """What makes the run a failure (exit 1; the wrapper then skips the full run after a smoke
    pass): a job not done or with an error, an exception, or no job at all. A cool-down job not
    started for lack of time is not one."""
    bad = [f"{r['label']}: {r['state']} {(r.get('error') or {}).get('type', '')}".rstrip()
           for r in out["runs"] if r["state"] != "done" or r.get("error")]
    bad += [e.strip().splitlines()[-1] for e in out["errors"] if e.startswith("Traceback")]
    return bad or ([] if out["runs"] else ["no job finished"])




if __name__ == "__main__":
    sys.exit(main())
