"""Tables from `tirxh bench` report logs of the zoo's KDA kernels (kda_fwd, kda_fwd_s0, kda_decode,
kda_bwd, kda_bwd_local, kda_bwd_reverse, kda_bwd_chain, kda_bwd_chain_prep,
kda_bwd_chain_pieces, kda_bwd_pieces_tc, kda_bwd_prep_tc, kda_bwd_local_tc; issue 18).

    python benchmarks/kda_summary.py REPORT.jsonl [...] [--json OUT.json]
    python benchmarks/kda_summary.py --smoke SMOKE.jsonl   # exit 0 iff every item verified

The smoke verdict: a correctness-only run (`bench_with.py --no-timing`) reports every item as
incomplete (not timed) and exits 1 whatever happened, so kda_bench.sh asks this instead whether
every KDA item ran and matched its reference on every seed (a hang shows as the job's error).

Prints markdown: every timed item (median, GB/s, ratio to each FLA baseline timed in the same
job, SM clock), the backward's items (ratios to FLA's backward alone and forward + backward),
then per forward shape the fastest variant with the issue's goal (>= 2.5x
fla.chunk_kda), FLA's forward + backward time from the same job (fwd+bwd goal: >= 3x it, for a
backward kernel), and two floors:

- memory floor: the declared bytes (q, k, g_raw, v, beta read, o written, h0/ht) at 4.25 TB/s,
  the H200's measured device-to-device copy bandwidth;
- serial-chain floor: every (sequence, head) is a chain of ceil(len / 64) chunk steps that
  cannot overlap; a step needs at least the state-dependent matrix products of one chunk
  (Y_k = S0^T KE^T and S0^T Diag(.) + Delta^T KLL: 2 x 64 x 128 x 128 multiply-adds, Delta =
  Z Tb^T: 64 x 64 x 128 x 10/16) on one SM at its share of the dense bf16 peak (989 TFLOP/s /
  132 SMs), so the floor is max(longest chain, all steps / 132 SMs) x that step time.
A ratio is baseline median / candidate median (> 1: the zoo kernel is faster).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from report_tables import (bench_phase, bench_result, bench_timing, cli, item_reports,
                           not_timed, plan_lines)

ROOT = Path(__file__).resolve().parents[1]
COPY_BW = 4.25e12            # B/s, measured device-to-device copy on this H200
SMS, PEAK = 132, 989e12      # SMs, dense bf16 FLOP/s
C = 64
STEP_FLOPS = 2 * (2 * C * 128 * 128 + C * C * 128 * 10 / 16)
STEP_S = STEP_FLOPS / (PEAK / SMS)
FWD_GOAL, FWD_BWD_GOAL = 2.5, 3.0
BASELINES = ("fla.chunk_kda", "fla.chunk_kda.fwd_bwd", "fla.chunk_kda.bwd",
             "fla.fused_recurrent_kda", "torch.copy_like")
COPY = "torch.copy_like"     # the decodes' same-bytes copy of the state (kcoral torch_zoo)
DECODE_GOAL = 0.90           # issue 18: decode at >= 90% of copy bandwidth
# kda_fwd_s0 is the backward's forward (it writes the chunk start states): not a shape's forward;
# kda_fwd_bwd is the forward + backward plan (one job of seven launches), not a forward either
PLAN = "kda_fwd_bwd"
NOT_FORWARD = ("kda_fwd_s0", PLAN)


def is_kda(kernel) -> bool:
    """Every KDA kernel's items are read. A hand-kept list dropped each new forward from the
    tables (kda_fwd_ahead in session 9, kda_fwd_pair in session 11) while its log had the times."""
    return isinstance(kernel, str) and kernel.startswith("kda_")


def is_plan(kernel) -> bool:
    """The forward + backward plan's items: kda_fwd_bwd (plan f32) or kda_fwd_bwd_<plan>."""
    return isinstance(kernel, str) and (kernel == PLAN or kernel.startswith(PLAN + "_"))


def is_forward(kernel) -> bool:
    """A forward competes for its shape's fastest variant: any kda_fwd* kernel but NOT_FORWARD."""
    return (is_kda(kernel) and kernel.startswith("kda_fwd") and kernel not in NOT_FORWARD
            and not is_plan(kernel))


def _cases() -> dict:
    """(suite, case name) -> params for every KDA case: every suite (a module attribute named
    SUITE*) of the zoo modules that hold forwards and decodes, imported by path."""
    sys.path.insert(0, str(ROOT / "zoo" / "kernels"))
    import kda_decode  # the zoo is a directory of kernel files on sys.path, not a package
    import kda_decode_bulk
    import kda_decode_cols
    import kda_fwd
    import kda_fwd_slim
    out = {}
    for module in (kda_fwd, kda_fwd_slim, kda_decode, kda_decode_bulk, kda_decode_cols):
        for attr in sorted(vars(module)):
            suite = getattr(module, attr)
            if not attr.startswith("SUITE") or not hasattr(suite, "cases"):
                continue
            for c in suite.cases:
                out.setdefault((suite.name, c.name), c.params)
    return out


def read_items(paths) -> list:
    """One dict per benchmarked KDA item in the report logs (later lines win for an item):
    `tirxh bench`'s item reports, and the forward + backward plan's own lines."""
    return [_item(rec) for rec in item_reports(
        paths, lambda rec: is_kda(rec.get("kernel")))] + plan_items(paths)


def plan_items(paths) -> list:
    """The lines of benchmarks/kda_fwd_bwd_bench.py (report_tables.plan_lines), one item each,
    for every plan (kda_fwd_bwd, kda_fwd_bwd_tc2, ...). Read apart from the item reports:
    session 19's fb call timed both shapes and its summary was empty, since only
    ``item_report`` records were read; session 21's, since only the f32 plan's name was."""
    return [dict(_row(ln["kernel"], ln["case"], ln["rec"].get("verdict") or ln["rec"].get(
                 "state") or "?", ln["timing"], ln["why"]),
                 verified=bool((ln["rec"].get("result") or {}).get("verified")),
                 split=ln["timing"].get("launch_split"))
            for ln in plan_lines(paths) if is_plan(ln["kernel"])]


def _item(rec: dict) -> dict:
    timing, note = bench_timing(rec)
    return _row(rec["kernel"], rec.get("case"), rec["outcome"], timing, note)


def _row(kernel, case, outcome, timing: dict, note: str) -> dict:
    """One item of the tables from its timing ({} when not timed) and why not."""
    clk = timing.get("sm_clock_mhz") or {}
    if timing and not timing.get("converged", True):
        note = f"noise {timing.get('rel_noise', 0):.1%}"
    med = timing["candidate"]["median_ms"] if timing else None
    return {"kernel": kernel, "case": case, "outcome": outcome, "median_ms": med,
            "median_us": None if med is None else med * 1e3, "gbps": timing.get("gbps"),
            "ratios": {n: b.get("speedup") for n, b in (timing.get("baselines") or {}).items()},
            "clock": (clk.get("before"), clk.get("after")) if timing else None, "note": note}


def floors(params: dict) -> dict:
    """Memory and serial-chain floors (ms) of a forward case (module docstring)."""
    B, T_, H = params["B"], params["T_"], params["H"]
    lens = params.get("lens") or (T_,) * B
    tokens = sum(lens)
    nbytes = tokens * H * (2 * 4 * 128 + 2 + 2 * 128) + 2 * len(lens) * H * 128 * 128 * 4
    steps = [math.ceil(n / C) for n in lens]
    chain = max(max(steps), math.ceil(sum(steps) * H / SMS)) * STEP_S
    return {"memory_ms": nbytes / COPY_BW * 1e3, "chain_ms": chain * 1e3,
            "chains": len(lens) * H, "steps": max(steps)}


def shape_of(case: str) -> str:
    return case.rsplit("_", 1)[0]


def summarize(items: list, cases: dict) -> dict:
    """Per forward shape: the fastest timed variant, the ratios, FLA's times, the floors."""
    best: dict = {}
    for it in items:
        if not is_forward(it["kernel"]) or it["median_ms"] is None:
            continue
        s = shape_of(it["case"])
        if s not in best or it["median_ms"] < best[s]["median_ms"]:
            best[s] = it
    rows = []
    for s, it in sorted(best.items()):
        params = next(p for (k, c), p in cases.items() if k == it["kernel"] and c == it["case"])
        r_fwd = it["ratios"].get("fla.chunk_kda")
        r_fb = it["ratios"].get("fla.chunk_kda.fwd_bwd")
        rows.append(dict(shape=s, case=it["case"], median_ms=it["median_ms"], ratio=r_fwd,
                         goal_met=None if r_fwd is None else r_fwd >= FWD_GOAL,
                         fla_fwd_ms=None if r_fwd is None else r_fwd * it["median_ms"],
                         fla_fwd_bwd_ms=None if r_fb is None else r_fb * it["median_ms"],
                         **floors(params)))
    return {"items": items, "shapes": rows}


def _f(x, fmt="{:.3f}") -> str:
    return fmt.format(x) if isinstance(x, (int, float)) else "-"


def markdown(summary: dict) -> str:
    lines = ["## Every item", "", "| item | median ms | GB/s | " + " | ".join(BASELINES)
             + " | SM MHz before/after | note |",
             "| --- | --- | --- | " + " | ".join("---" for _ in BASELINES) + " | --- | --- |"]
    for it in sorted(summary["items"], key=lambda i: (i["kernel"], i["case"] or "")):
        clk = "/".join(_f(c, "{:.0f}") for c in it["clock"]) if it["clock"] else "-"
        med = _f(it["median_ms"], "{:.4f}") if it["median_ms"] else it["outcome"]
        lines.append(f"| {it['kernel']}[{it['case']}] | {med} | {_f(it['gbps'], '{:.0f}')} | "
                     + " | ".join(_f(it["ratios"].get(b), "{:.2f}x") for b in BASELINES)
                     + f" | {clk} | {it['note']} |")
    lines += ["", f"## Forward: fastest variant per shape (goal >= {FWD_GOAL}x fla.chunk_kda)", "",
              "| shape | variant | ms | FLA fwd ms | ratio | met | FLA fwd+bwd ms | memory floor "
              "ms | chain floor ms (chains x steps) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in summary["shapes"]:
        met = {True: "yes", False: "NO", None: "-"}[r["goal_met"]]
        lines.append(f"| {r['shape']} | {r['case']} | {_f(r['median_ms'], '{:.4f}')} | "
                     f"{_f(r['fla_fwd_ms'])} | {_f(r['ratio'], '{:.2f}x')} | {met} | "
                     f"{_f(r['fla_fwd_bwd_ms'])} | {_f(r['memory_ms'])} | "
                     f"{_f(r['chain_ms'])} ({r['chains']} x {r['steps']}) |")
    lines += _decode(summary["items"], summary.get("cases") or {})
    lines += _backward(summary["items"])
    lines += _fwd_bwd(summary["items"], summary.get("plan_cases") or {})
    lines += not_timed(summary["items"])
    return "\n".join(lines) + "\n"


def _backward(items: list) -> list:
    """The backward's timed items: its time, FLA's backward alone and forward + backward from
    the same job (their medians: ratio x ours), and the ratios (> 1: kda_bwd is faster)."""
    rows = [it for it in items if it["kernel"] == "kda_bwd" and it["median_ms"] is not None]
    if not rows:
        return []
    out = ["", "## Backward (kda_bwd; FLA's figures from the same job)", "",
           "| case | ms | FLA bwd ms | ratio | FLA fwd+bwd ms | ratio |",
           "| --- | --- | --- | --- | --- | --- |"]
    for it in sorted(rows, key=lambda i: (i["kernel"], i["case"] or "")):
        r_b, r_fb = (it["ratios"].get(n) for n in ("fla.chunk_kda.bwd", "fla.chunk_kda.fwd_bwd"))
        ms = it["median_ms"]
        plan = it["kernel"][len(PLAN) + 1:]
        label = f"{it['case']} ({plan})" if plan else it["case"]
        out.append(f"| {label} | {_f(ms, '{:.3f}')} | "
                   f"{_f(None if r_b is None else r_b * ms)} | {_f(r_b, '{:.2f}x')} | "
                   f"{_f(None if r_fb is None else r_fb * ms)} | {_f(r_fb, '{:.2f}x')} |")
    return out


def _decode(items: list, cases: dict) -> list:
    """The decodes against both readings of "copy bandwidth": the H200's large-copy 4.25 TB/s,
    and the copy of the same state in the same job (`COPY`: its bytes read and written once, as
    the decode does, under the same protocol and clock), whose rate is the state's 2 N H K V x 4
    bytes over its time (the ratio x the decode's median). The decode's rate counts its declared
    bytes (the state and the tokens); N and H are the case's (`_cases`)."""
    rows = [it for it in items if it["kernel"].startswith("kda_decode")
            and it["median_ms"] is not None and it["gbps"]]
    if not rows:
        return []
    lines = ["", f"## Decode against copy bandwidth (goal >= {DECODE_GOAL:.0%})", "",
             "| item | median us | GB/s | of 4.25 TB/s | same-bytes copy in the job GB/s "
             "| of that copy | met (4.25 / same-bytes) |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for it in sorted(rows, key=lambda i: (i["case"] or "", i["kernel"])):
        big = it["gbps"] * 1e9 / COPY_BW
        p, r = cases.get((it["kernel"], it["case"])), it["ratios"].get(COPY)
        copy_gbps = same = None
        if p and r:
            copy_gbps = 2 * p["N"] * p["H"] * 128 * 128 * 4 / (r * it["median_ms"] * 1e-3) / 1e9
            same = it["gbps"] / copy_gbps
        met = "/".join("-" if f is None else ("yes" if f >= DECODE_GOAL else "no")
                       for f in (big, same))
        lines.append(f"| {it['kernel']}[{it['case']}] | {_f(it['median_us'], '{:.1f}')} | "
                     f"{_f(it['gbps'], '{:.0f}')} | {_f(big, '{:.1%}')} | "
                     f"{_f(copy_gbps, '{:.0f}')} | {_f(same, '{:.1%}')} | {met} |")
    return lines


def _fwd_bwd(items: list, cases: dict) -> list:
    """The forward + backward plan's timed cases against FLA's forward + backward (autograd)
    in the same job, the issue's goal (>= 3x), whether KCoral verified the case's outputs, and
    the forward's serial-chain floor (the backward walks the same chains in reverse)."""
    rows = [it for it in items if is_plan(it["kernel"]) and it["median_ms"] is not None]
    if not rows:
        return []
    out = ["", f"## Forward + backward ({PLAN}, one job; goal >= {FWD_BWD_GOAL}x "
               "fla.chunk_kda.fwd_bwd)", "",
           "| case | ms | FLA fwd+bwd ms | ratio | met | verified | forward's chain floor ms "
           "(chains x steps) |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for it in sorted(rows, key=lambda i: (i["kernel"], i["case"] or "")):
        r = it["ratios"].get("fla.chunk_kda.fwd_bwd")
        ms = it["median_ms"]
        met = "-" if r is None else ("yes" if r >= FWD_BWD_GOAL else "NO")
        params = cases.get(it["case"])
        fl = floors(params) if params else None
        floor = "-" if fl is None else f"{_f(fl['chain_ms'])} ({fl['chains']} x {fl['steps']})"
        plan = it["kernel"][len(PLAN) + 1:]
        label = f"{it['case']} ({plan})" if plan else it["case"]
        out.append(f"| {label} | {_f(ms, '{:.3f}')} | "
                   f"{_f(None if r is None else r * ms)} | {_f(r, '{:.2f}x')} | {met} | "
                   f"{'yes' if it.get('verified') else 'no'} | "
                   f"{floor} |")
    return out + _launch_splits(rows)


def _launch_splits(rows: list) -> list:
    """Each timed plan's launches (KCoral's ``launch_split``: extra samples after the paired
    rounds, an event between every two launches): each launch's median and share, and their
    sum against the paired rounds' median."""
    out = []
    for it in sorted(rows, key=lambda i: (i["kernel"], i["case"] or "")):
        split = it.get("split") or {}
        plan = it["kernel"][len(PLAN) + 1:]
        name = f"{it['case']}{f' ({plan})' if plan else ''}"
        if "skipped" in split:
            out += ["", f"Launches of {name}: not split ({split['skipped']})"]
        if "launches" not in split:
            continue
        out += ["", f"Launches of {name}: {split['samples']} split samples, sum "
                f"{_f(split['sum_ms'])} ms against the rounds' median "
                f"{_f(split.get('candidate_median_ms'))} ms", "",
                "| launch | median ms | IQR ms | share |", "| --- | --- | --- | --- |"]
        out += [f"| {ln['entry']} | {_f(ln['median_ms'])} | {_f(ln['iqr_ms'])} | "
                f"{_f(ln['share'], '{:.1%}')} |" for ln in split["launches"]]
    return out


def _plan_cases() -> dict:
    """case name -> params of the forward + backward plan (zoo/kernels/kda_fwd_bwd.py)."""
    sys.path.insert(0, str(ROOT / "zoo" / "kernels"))
    import kda_fwd_bwd
    return {c.name: c.params() for c in kda_fwd_bwd.CASES}


def render(items: list) -> str:
    cases = _cases()
    summary = summarize(items, cases)
    summary["cases"] = cases
    summary["plan_cases"] = _plan_cases() if any(is_plan(i["kernel"]) for i in items) else {}
    return markdown(summary)


def _json_option(ap):
    ap.add_argument("--json", help="also write the items and the per-shape table here")

    def after(args, items):
        if args.json:
            Path(args.json).write_text(json.dumps(summarize(items, _cases()), indent=1))
    return after


def smoke_verdict(paths) -> tuple:
    """(ok, lines): ok when the logs hold KDA items and KCoral verified every one of them (each
    correctness seed ok); a line per item, FAILED with the reason where not."""
    recs = item_reports(
        paths, lambda rec: is_kda(rec.get("kernel")))
    lines, ok = [], bool(recs)
    for rec in recs:
        bench, result = bench_phase(rec), bench_result(rec)
        seeds = result.get("correctness") or []
        good = bool(result.get("verified")) and bool(seeds) and all(c.get("ok") for c in seeds)
        why = ((result.get("error") or {}).get("message") or (bench or {}).get("longrepr")
               or ("no bench phase" if bench is None else "not verified"))
        lines.append(f"ok      {rec['kernel']}[{rec.get('case')}]" if good else
                     f"FAILED  {rec['kernel']}[{rec.get('case')}]: {why[:300]}")
        ok = ok and good
    if not recs:
        lines.append("FAILED  no KDA item in " + ", ".join(map(str, paths)))
    return ok, lines


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--smoke"]:
        try:
            ok, lines = smoke_verdict(argv[1:])
        except (OSError, ValueError) as e:
            print(f"kda_summary: {e}", file=sys.stderr)
            return 2
        print("\n".join(lines))
        return 0 if ok else 1
    return cli(argv, __doc__, "kda_summary", read_items, render, "KDA items", _json_option)

if __name__ == "__main__":
    sys.exit(main())
