"""sync_check on the zoo cases whose numsim traced run used to dominate CI: before/after timings.

    PYTHONPATH=.:plugins/numsim:plugins/sync_check python benchmarks/sync_check_trace_speed.py \
        [--repeat N] [CASE ...]

Cases (default: all): ``kda_bwd`` (tests/zoo/test_kda_bwd.py's sync case), ``attn_*`` (the
attention ping-pong cases of tests/zoo/test_attention.py), ``gemm_*`` (tests/zoo/
test_gemm_sm90.py's persistent / split-K / cluster sync cases). For each: the wall time of
`check_kernel` (best of --repeat), its numsim traced run, synccheck and racecheck seconds, events
and states, and the verdicts. Run it with PYTHONPATH on a checkout of main for the "before"
figures. CPU only.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ZOO = REPO / "zoo" / "kernels"
if str(ZOO) not in sys.path:
    sys.path.insert(0, str(ZOO))

import tirxh.lang as T  # noqa: E402  (after the zoo path: zoo modules import their helpers)

CASES = {
    "kda_bwd": ("kda_bwd", "SUITE", dict(B=1, T_=3, H=1, gate="deep")),
    "attn_s256_arrive_p1": ("attention", "SUITE",
                            dict(B=1, S=256, H=1, HKV=1, HG=1, CAUSAL=False, SMS=1)),
    "attn_s400_causal_arrive_p1": ("attention", "SUITE",
                                   dict(B=1, S=400, H=1, HKV=1, HG=1, CAUSAL=True, SMS=1)),
    "attn_s400_causal_nopp_p1": ("attention", "SUITE", dict(B=1, S=400, H=1, HKV=1, HG=1,
                                                            CAUSAL=True, SMS=1, PINGPONG=False)),
    "gemm_m256n256k64_persistent": ("gemm_sm90", "SUITE", "m256n256k64_persistent"),
    "gemm_c2_m256n256k64_persistent": ("gemm_sm90", "SUITE_C2", "m256n256k64_persistent"),
    "gemm_m200n136k296_streamk": ("gemm_sm90", "SUITE", "m200n136k296_streamk"),
    "gemm_m256n128k384_splitk3_p4": ("gemm_sm90", "SUITE", dict(
        M=256, N=128, K=384, BN=128, STAGES=2, SPLITK=3, SMS=4)),
    "gemm_c2_m200n136k200_splitk2": ("gemm_sm90", "SUITE_C2", dict(
        M=200, N=136, K=200, BN=64, STAGES=3, EPI_BUFS=1, SPLITK=2)),
}


def _suite(modname: str, attr: str):
    spec = importlib.util.spec_from_file_location(f"zoo_{modname}_speed", ZOO / f"{modname}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, attr)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", help=f"of {', '.join(CASES)}")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args(argv)
    from tirxh_sync_check import check_kernel
    names = args.cases or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}")
    print(f"{'case':34} {'wall s':>7} {'numsim s':>8} {'sync s':>7} {'race s':>7} "
          f"{'events':>7} {'states':>7}  verdicts")
    rc = 0
    for name in names:
        modname, attr, spec = CASES[name]
        suite = _suite(modname, attr)
        case = next(c for c in suite.cases if c.name == spec) if isinstance(spec, str) \
            else T.case("sync", **spec)
        best = None
        for _ in range(max(1, args.repeat)):
            t0 = time.perf_counter()
            sync, race = check_kernel(suite.kernel, suite.make_inputs(case, 0),
                                      consts=suite.consts(case), grid=suite.grid(case))
            wall = time.perf_counter() - t0
            if best is None or wall < best[0]:
                best = (wall, sync, race)
        wall, sync, race = best
        s, r = sync.stats, race.stats
        print(f"{name:34} {wall:7.1f} {s.get('numsim_s', 0):8.1f} {s.get('synccheck_s', 0):7.1f} "
              f"{r.get('racecheck_s', 0):7.1f} {r.get('events', 0):7d} {s.get('states', 0):7d}  "
              f"{sync.verdict}/{race.verdict}", flush=True)
        rc |= sync.verdict != "clean" or race.verdict != "clean"
    return int(rc)


if __name__ == "__main__":
    sys.exit(main())
