"""Same verdicts and findings from sync_check before and after a change to numsim's trace.

Used as a pytest plugin, it records every `tirxh_sync_check.check_kernel` call of a test run
(test id, kernel, verdicts, findings, seconds) as JSON lines in $SYNC_PARITY_OUT:

    SYNC_PARITY_OUT=/tmp/after.jsonl TIRXH_TESTS=all python -m pytest -q -n 2 \
        -p benchmarks.sync_trace_parity plugins/sync_check plugins/numsim tests/zoo -k sync

and, run as a script, compares two such records (exit status 1 on any difference):

    python benchmarks/sync_trace_parity.py /tmp/before.jsonl /tmp/after.jsonl

Two levels are compared: the verdicts and each finding's kind, severity and source line (what a
test asserts: must be equal), and the witness (the warps and lanes a finding names, its message
without scheduler step numbers), which depends on the interleaving numsim ran (a different
witness of the same finding is listed, not an error). CPU only.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

_STEP = re.compile(r"\(step \d+\)")


def _finding(f) -> dict:
    where = f"{f.where.file.rsplit('/', 1)[-1]}:{f.where.line}" if f.where is not None else None
    return {"kind": f.kind, "severity": f.severity, "where": where,
            "warps": sorted(str(w) for w in (f.warps or [])),
            "lanes": list(f.lanes or []), "message": _STEP.sub("(step)", f.message)}


def _wrap(fn):
    def check_kernel(kernel, *args, **kwargs):
        t0 = time.perf_counter()
        sync, race = fn(kernel, *args, **kwargs)
        rec = {"test": os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0],
               "kernel": getattr(kernel, "name", getattr(kernel, "__name__", str(kernel))),
               "verdicts": [sync.verdict, race.verdict],
               "findings": sorted((_finding(f) for f in sync.findings + race.findings),
                                  key=json.dumps),
               "seconds": round(time.perf_counter() - t0, 2)}
        with open(os.environ["SYNC_PARITY_OUT"], "a") as fh:
            fh.write(json.dumps(rec) + "\n")
        return sync, race
    return check_kernel


def pytest_configure(config):
    """Wrap check_kernel before any test module imports it."""
    if not os.environ.get("SYNC_PARITY_OUT"):
        return
    import tirxh_sync_check  # the plugin is only useful with sync_check installed
    from tirxh_sync_check import analyze
    wrapped = _wrap(analyze.check_kernel)
    analyze.check_kernel = wrapped
    tirxh_sync_check.check_kernel = wrapped


def _load(path: str) -> dict:
    out: dict = {}
    with open(path) as fh:
        for line in fh:
            r = json.loads(line)
            out.setdefault((r["test"], r["kernel"]), []).append(r)
    return out


def compare(before: str, after: str) -> int:
    a, b = _load(before), _load(after)
    bad = witness = only = 0
    for key in sorted(set(a) | set(b)):
        ra, rb = a.get(key), b.get(key)
        if ra is None or rb is None:
            print(f"only in {'after' if ra is None else 'before'}: {key}")
            only += 1
            continue
        sa = [(r["verdicts"], r["findings"]) for r in ra]
        sb = [(r["verdicts"], r["findings"]) for r in rb]
        if [_identity(x) for x in sa] != [_identity(x) for x in sb]:
            bad += 1
            print(f"DIFFERENT: {key}\n  before: {json.dumps(sa)[:2000]}\n  after:  "
                  f"{json.dumps(sb)[:2000]}")
        elif sa != sb:
            witness += 1
            print(f"other witness: {key}\n  before: {json.dumps(sa)[:1500]}\n  after:  "
                  f"{json.dumps(sb)[:1500]}")
    both = set(a) & set(b)
    ta = sum(r["seconds"] for k in both for r in a[k])
    tb = sum(r["seconds"] for k in both for r in b[k])
    print(f"{len(both)} check_kernel calls in both ({only} in one only): {bad} with other "
          f"verdicts or findings, {witness} with another witness; check_kernel time "
          f"{ta:.1f} s before, {tb:.1f} s after")
    return 1 if bad or only else 0


def _identity(run) -> tuple:
    verdicts, findings = run
    return verdicts, sorted((f["kind"], f["severity"], f["where"]) for f in findings)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: sync_trace_parity.py BEFORE.jsonl AFTER.jsonl")
    sys.exit(compare(sys.argv[1], sys.argv[2]))
