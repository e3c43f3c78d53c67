"""sync_check's corpus bugs on a real GPU, through KCoral: do they misbehave, and does
compute-sanitizer see them?

    PYTHONPATH=.:plugins/numsim:plugins/sync_check:plugins/ncu_profile \
        python benchmarks/sanitizer_corpus_gpu.py [--repeat 200] [--timeout 30] [--budget 480] \
        [--entries race_rw_shared,mbar_phase_overrun,...|all] [--out DIR] [--build-only]

Everything that touches the GPU goes through KCoral (design rule); this script has no launcher
of its own. For each selected corpus entry (``plugins/sync_check/tests/corpus/<entry>.py``):

1. on the CPU: both analyses on the buggy kernel (our findings: kind and line);
2. the buggy and the fixed kernel become KCoral jobs (`entry_job`: `tirxh.api.
   build_job` over a suite built on the fly, every pointer buffer in-out: initialized from the
   module's ``inputs()``, read back as an output), written as ``DIR/<entry>/<variant>.job.json``
   with their blobs in ``DIR/blobs``;
3. on the GPU, each step one ``python -m kcoral.runjob`` child with a timeout (a hang is a
   result, not a stall): the fixed twin once with ``--save-outputs`` (the reference), then both
   twins ``--repeat`` times as correctness runs against that reference (``runjob --check``:
   fresh inputs and poisoned outputs each run). runjob stops at the first mismatch; the
   remaining runs are resubmitted, so the count of differing runs is exact up to
   `MAX_RESUBMITS` mismatches;
4. the buggy job once under ``compute-sanitizer --tool racecheck|synccheck|memcheck``, the
   command line of KCoral's compute-sanitizer tool (``tirxh_ncu_profile.tools``:
   ``profiling_job``, ``sanitizer_command``, ``runjob_command``), its output parsed by
   ``tirxh_ncu_profile.sanitizer.parse`` into findings of sync_check's kinds.

The table at the end says, per entry, what our analyses report, whether the GPU misbehaved, and
each tool's own error count (``!`` when the job itself did not run to completion under the tool,
e.g. a host API error, so the count is not about the kernel); then our findings whose kind no
tool reported. Entries whose buggy kernel hangs by design (deadlocks) are not in the default
selection: they would only measure the timeout.

``--board-type fake`` swaps each module for a no-op one on KCoral's fake board: the whole
pipeline (jobs, blobs, runjob, resubmission, the table) runs on a CPU; its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "plugins" / "sync_check" / "tests" / "corpus"
_PATHS = [REPO] + [REPO / "plugins" / p for p in ("numsim", "sync_check", "ncu_profile")]
for _p in _PATHS:
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

# kernels that finish on a GPU (the deadlock entries hang by design)
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
VARIANTS = ("buggy", "fixed")
TARGET = "sm_90a"
PRINT_LIMIT = 100  # compute-sanitizer --print-limit (KCoral's tool default)
MAX_RESUBMITS = 10  # a kernel that differs on every run is not resubmitted `--repeat` times


# --------------------------------------------------------------------------------------------
# jobs (CPU)
# --------------------------------------------------------------------------------------------

def _load(entry: str):
    import importlib.util
    path = CORPUS / f"{entry}.py"
    if not path.exists():
        known = sorted(p.stem for p in CORPUS.glob("*.py"))
        raise SystemExit(f"--entries: no corpus entry {entry!r} in {CORPUS} (have "
                         f"{', '.join(known)})")
    spec = importlib.util.spec_from_file_location(f"corpus_{entry}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def corpus_suite(mod, variant: str):
    """A `T.suite` for one twin of a corpus module: the module's ``inputs()`` (deterministic)
    and its module-level ``GRID`` (corpus kernels declare no grid of their own)."""
    import tirxh.lang as T
    from tirxh.core.suite import Suite

    class CorpusSuite(Suite):
        def grid(self, c):
            g = (mod.GRID,) if isinstance(mod.GRID, int) else tuple(mod.GRID)
            return g + (1,) * (3 - len(g))

    s = T.suite(getattr(mod, variant), inputs=lambda: mod.inputs(),
                cases=[T.case("corpus")])
    return CorpusSuite(**{k: getattr(s, k) for k in s.__dataclass_fields__})


def entry_job(mod, entry: str, variant: str, put) -> dict:
    """The validated KCoral job of one twin. `put(bytes) -> digest` stores a blob.

    Built by `build_job` (the same path as ``tirxh bench``) and then adjusted: the corpus
    declares no outputs, so every pointer buffer is made in-out (its ``inputs()`` array is the
    initial contents, its final contents are read back); no correctness runs or timing yet
    (`repeat_job` adds the runs once the reference is known)."""
    from kcoral.job import Job
    from tirxh.api import build_job
    suite = corpus_suite(mod, variant)
    compiled = suite.kernel.compile(TARGET)
    doc = build_job(compiled, suite, suite.cases[0], seeds=(1,), put=put).to_doc()
    for b in doc["buffers"]:
        b["output"] = True  # init stays the uploaded input: an in-out buffer
    doc.update(name=f"{entry}:{variant}", tags=["sanitizer-corpus", entry, variant],
               runs=[], checks=[], baselines=[], work={})
    doc["timing"] = dict(doc["timing"], enabled=False)
    return Job.from_json(doc).doc


def repeat_job(doc: dict, repeat: int, expected: dict, first_seed: int = 1) -> dict:
    """`doc` with `repeat` correctness runs, each comparing every output with `expected`
    (buffer -> blob digest) exactly."""
    d = copy.deepcopy(doc)
    d["runs"] = [{"seed": s, "when": "before", "inputs": {}, "expected": dict(expected)}
                 for s in range(first_seed, first_seed + repeat)]
    d["checks"] = [{"buffer": n, "rtol": 0.0, "atol": 0.0, "rms": None} for n in expected]
    return d


def fake_module_job(doc: dict, put) -> dict:
    """`doc` on KCoral's fake board: the module becomes a no-op per entry (plumbing only)."""
    d = copy.deepcopy(doc)
    kernels = {ln["entry"]: {"op": "noop"} for ln in d["launches"]}
    d["module"] = {"format": "fake", "blob": put(json.dumps({"kernels": kernels}).encode())}
    return d


def write_job(doc: dict, path: Path, blob_root: Path) -> Path:
    from kcoral.job import Job
    job = Job.from_json(doc)
    job.blob_root = str(blob_root)
    path.parent.mkdir(parents=True, exist_ok=True)
    job.write_json(path)
    return path


def build(entry: str, out: Path, board_type: str = "cuda", analyze: bool = True) -> dict:
    """Build both twins' jobs under `out` and run our analyses on the buggy twin (CPU)."""
    from kcoral.blobs import BlobStore
    mod = _load(entry)
    store = BlobStore(out / "blobs")
    info = {"entry": entry, "variants": {}, "ours": [], "block": None}
    for variant in VARIANTS:
        doc = entry_job(mod, entry, variant, store.put)
        if board_type == "fake":
            doc = fake_module_job(doc, store.put)
        info["variants"][variant] = str(write_job(doc, out / entry / f"{variant}.job.json",
                                                  store.root))
        info["block"] = doc["launches"][0]["block"]
    if analyze:
        from tirxh_sync_check import check_kernel
        sync, race = check_kernel(mod.buggy, mod.inputs(), grid=mod.GRID)
        info["ours"] = sorted({(f.kind, f.where.line if f.where else 0)
                               for f in sync.findings + race.findings
                               if f.severity == "error"})
    return info


# --------------------------------------------------------------------------------------------
# KCoral children: python -m kcoral.runjob, alone or under compute-sanitizer
# --------------------------------------------------------------------------------------------

def _env() -> dict:
    return dict(os.environ, LC_ALL="C", LANG="C", PYTHONPATH=os.pathsep.join(
        [str(p) for p in _PATHS] + [os.environ.get("PYTHONPATH", "")]))


def run_child(cmd: list, timeout: float) -> dict:
    """Run `cmd` in its own session; on timeout kill that session (compute-sanitizer's target
    is a grandchild, which would otherwise keep the pipes open) and report a hang."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=_env(), start_new_session=True)
    try:
        so, se = p.communicate(timeout=timeout)
        return {"rc": p.returncode, "hang": False, "stdout": so, "stderr": se}
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            so, se = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            so, se = "", ""
        return {"rc": None, "hang": True, "stdout": so or "", "stderr": se or ""}


def runjob(job_path: Path, out_dir: Path, timeout: float, extra=(), board_type="cuda",
           prefix=()) -> dict:
    """One ``python -m kcoral.runjob`` (optionally behind `prefix`, e.g. compute-sanitizer);
    the child's result.json is under ``result`` (None when it wrote none)."""
    from kcoral.boards import BoardSpec
    from kcoral.tools import runjob_command
    out_dir.mkdir(parents=True, exist_ok=True)
    res_file = out_dir / "result.json"
    if res_file.exists():
        res_file.unlink()
    board = BoardSpec(f"{board_type}0", board_type, TARGET)
    cmd = list(prefix) + runjob_command(job_path, out_dir, board) + list(extra)
    r = run_child(cmd, timeout)
    r["cmd"] = cmd
    r["result"] = json.loads(res_file.read_text()) if res_file.exists() else None
    return r


def _failure(r: dict) -> str:
    """A one-line reason for a runjob that did not finish ok ('' when it did)."""
    if r["hang"]:
        return "hang"
    res = r["result"]
    if res is None:
        tail = (r["stderr"] or r["stdout"]).strip().splitlines()[-1:] or [f"exit {r['rc']}"]
        return f"no result (exit {r['rc']}): {tail[0][:160]}"
    if res.get("status") != "ok":
        e = res.get("error") or {}
        return f"{e.get('type', 'failed')}: {e.get('message', '')}"[:200]
    return ""


def reference_outputs(job_path: Path, work: Path, timeout: float, board_type: str) -> dict:
    """Run a job once with ``--save-outputs``: {"outputs": {buffer: array}} or {"error": ...}."""
    import numpy as np
    r = runjob(job_path, work, timeout, ["--save-outputs"], board_type)
    why = _failure(r)
    if why:
        return {"error": why, "hang": r["hang"]}
    doc = json.loads(Path(job_path).read_text())
    return {"outputs": {b["name"]: np.load(work / f"{b['name']}.npy")
                        for b in doc["buffers"] if b.get("output")}}


def repeated_runs(doc: dict, expected: dict, repeat: int, work: Path, blob_root: Path,
                  timeout: float, board_type: str) -> dict:
    """`repeat` correctness runs of `doc` against `expected` through ``runjob --check``.

    Returns {"runs", "differ", "first_differ", "max_elements", "stopped", "hang", "error"}:
    ``runs`` is how many runs completed. runjob stops at a mismatch; the rest are resubmitted
    (at most `MAX_RESUBMITS` times, then ``stopped``)."""
    out = {"runs": 0, "differ": 0, "first_differ": None, "max_elements": 0, "stopped": False,
           "hang": False, "error": ""}
    seed, left, part = 1, repeat, 0
    while left > 0:
        path = write_job(repeat_job(doc, left, expected, seed), work / f"check{part}.job.json",
                         blob_root)
        r = runjob(path, work / f"check{part}", timeout, ["--check"], board_type)
        part += 1
        res = r["result"] or {}
        runs = res.get("correctness") or []
        done = [x for x in runs if x.get("ok")]
        out["runs"] += len(done)
        if r["hang"]:
            out["hang"] = True
            return out
        err = (res.get("error") or {})
        if res.get("status") == "ok":
            return out
        if not err.get("type", "").startswith("correctness") or not runs:
            out["error"] = _failure(r)
            return out
        bad = runs[-1]
        out["runs"] += 1
        out["differ"] += 1
        out["first_differ"] = out["first_differ"] or bad["seed"]
        out["max_elements"] = max([out["max_elements"]] + [c.get("mismatches", 0)
                                                             for c in bad.get("checks", [])])
        left -= len(runs)
        seed = bad["seed"] + 1
        if out["differ"] > MAX_RESUBMITS and left > 0:
            out["stopped"] = True
            return out
    return out


def gpu_cell(buggy: dict, fixed: dict, timeout: float) -> str:
    """The GPU column: how the buggy twin's repeated runs compare with the fixed twin's."""
    if fixed.get("hang"):
        return f"fixed twin hung (> {timeout:.0f} s)"
    if fixed.get("error"):
        return f"fixed twin: {fixed['error']}"
    if fixed.get("differ"):
        return (f"fixed twin not deterministic: {fixed['differ']}/{fixed['runs']} runs differ "
                f"from its first")
    if buggy.get("hang"):  # runs of earlier (resubmitted) children finished before it
        return f"hung (> {timeout:.0f} s)" + (f" after {buggy['runs']} finished runs"
                                              if buggy["runs"] else "")
    if buggy.get("error"):
        return f"fault: {buggy['error']}"
    s = f"{buggy['differ']}/{buggy['runs']} runs differ from fixed"
    if buggy["differ"]:
        s += f" (first: run {buggy['first_differ']}, up to {buggy['max_elements']} elements)"
    if buggy["stopped"]:
        s = ">=" + s + ", stopped"
    return s


def sanitize(info: dict, tool: str, binary: str, work: Path, timeout: float,
             board_type: str) -> dict:
    """The buggy job once under ``compute-sanitizer --tool TOOL`` (KCoral's tool command line);
    the log is kept as ``<work>/<tool>.log``."""
    from tirxh_ncu_profile.tools import profiling_job, sanitizer_command
    doc = json.loads(Path(info["variants"]["buggy"]).read_text())
    blob_root = Path(doc.pop("_blob_root"))
    job = write_job(profiling_job(doc), work / f"{tool}.job.json", blob_root)
    r = runjob(job, work / f"{tool}_run", timeout, (), board_type,
               prefix=sanitizer_command(binary, tool, [], PRINT_LIMIT))
    text = r["stdout"] + "\n" + r["stderr"]
    log = work / f"{tool}.log"
    log.write_text(text)
    return sanitizer_cell(text, tool, info["block"], log, _failure(r), r["hang"])


def sanitizer_cell(text: str, tool: str, block, log, job_failure: str = "",
                   hang: bool = False) -> dict:
    """One tool's column from its output, parsed by ``tirxh_ncu_profile.sanitizer``: the tool's
    own error count (None when it printed no summary), our-kind findings as (kind, line), and
    why the job itself did not complete under the tool ('' when it did)."""
    from tirxh_ncu_profile import sanitizer
    cell = {"tool": tool, "log": str(log), "hang": hang, "count": None, "findings": [],
            "job": job_failure}
    if hang:
        return cell
    try:
        rep = sanitizer.parse(text, tool, block_dim=block, source=str(log))
    except sanitizer.SanitizerParseError as e:
        cell["job"] = cell["job"] or str(e)
        return cell
    cell["count"] = rep.error_summary
    cell["findings"] = sorted({(f.kind, f.where.line if f.where else 0) for f in rep.findings})
    return cell


def tool_cell(c: "dict | None") -> str:
    if not c:
        return "-"
    if c["hang"]:
        return "hang"
    n = "?" if c["count"] is None else str(c["count"])
    return n + ("!" if c["job"] else "")


def missed_findings(row: dict) -> "list | None":
    """Our findings whose kind no tool reported (None when a tool did not finish)."""
    cells = [row.get(t) for t in TOOLS]
    if any(c is None or c["hang"] or c["count"] is None for c in cells):
        return None
    seen = {k for c in cells for k, _ in c["findings"]}
    return [f"{k}@{ln}" for k, ln in row["ours"] if k not in seen]


# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------

def launch(job_path, repeat: int = 1, timeout: float = 120.0, board_type: str = "cuda"):
    """(per-run output digests, the last run's outputs) of a built job, each run one
    ``kcoral.runjob --save-outputs`` child (used by the GPU tests)."""
    job_path = Path(job_path)
    digests, last = [], {}
    for i in range(repeat):
        ref = reference_outputs(job_path, job_path.parent / "launch" / str(i), timeout,
                                board_type)
        if "error" in ref:
            raise RuntimeError(f"{job_path}: {ref['error']}")
        last = ref["outputs"]
        h = hashlib.sha256()
        for k in sorted(last):
            h.update(last[k].tobytes())
        digests.append(h.hexdigest()[:16])
    return digests, last


def find_sanitizer() -> "str | None":
    from tirxh_ncu_profile.tools import find_binary
    return find_binary("compute-sanitizer", "KCORAL_COMPUTE_SANITIZER")


def run_entry(info: dict, out: Path, args) -> dict:
    """Steps 3 and 4 of the module docstring for one built entry."""
    from kcoral.blobs import BlobStore, array_bytes
    entry = info["entry"]
    work = out / entry / "runs"
    store = BlobStore(out / "blobs")
    row = {"entry": entry, "ours": info["ours"]}
    ref = reference_outputs(Path(info["variants"]["fixed"]), work / "fixed_ref", args.timeout,
                            args.board_type)
    if "error" in ref:
        fixed = {"error": ref["error"] if not ref["hang"] else "", "hang": ref["hang"]}
        row["gpu"] = gpu_cell({}, fixed, args.timeout)
    else:
        expected = {k: store.put(array_bytes(a)) for k, a in ref["outputs"].items()}
        res = {}
        for variant in ("fixed", "buggy"):
            doc = json.loads(Path(info["variants"][variant]).read_text())
            doc.pop("_blob_root", None)
            res[variant] = repeated_runs(doc, expected, args.repeat, work / variant,
                                         store.root, args.timeout, args.board_type)
        row["gpu"] = gpu_cell(res["buggy"], res["fixed"], args.timeout)
        row["gpu_runs"] = res
    if args.sanitizer:
        for tool in TOOLS:
            row[tool] = sanitize(info, tool, args.sanitizer, out / entry, args.timeout,
                                 args.board_type)
    return row


def print_table(rows: list, sanitizer: bool) -> None:
    print()
    print(f"{'entry':22} {'our findings':44} {'GPU (repeated runs)':46} " +
          " ".join(f"{t:>9}" for t in TOOLS))
    for row in rows:
        ours = ", ".join(f"{k}@{ln}" for k, ln in row["ours"]) or "-"
        print(f"{row['entry']:22} {ours[:44]:44} {row.get('gpu', '-')[:46]:46} " +
              " ".join(f"{tool_cell(row.get(t)):>9}" for t in TOOLS))
    flagged = [(row["entry"], t, row[t]["job"]) for row in rows for t in TOOLS
               if row.get(t) and row[t]["job"]]
    for entry, t, why in flagged:
        print(f"  ! {entry} under {t}: the job did not complete ({why[:120]})")
    if not sanitizer:
        return
    missed, unknown = [], []
    for row in rows:
        m = missed_findings(row)
        if m is None:
            unknown.append(row["entry"])
        else:
            missed += [f"{row['entry']}: {x}" for x in m]
    print("\nour findings that no compute-sanitizer tool reports (same kind): " +
          ("; ".join(missed) or "none"))
    if unknown:
        print("not determined (a tool hung or printed no summary): " + ", ".join(unknown))


def _row_json(row: dict) -> str:
    slim = {k: v for k, v in row.items() if k != "gpu_runs"}
    for t in TOOLS:
        if isinstance(slim.get(t), dict):
            slim[t] = {k: v for k, v in slim[t].items() if k not in ("tool", "log")}
    return json.dumps(slim, default=str)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--entries", default=",".join(DEFAULT_ENTRIES))
    ap.add_argument("--out", default=None)
    ap.add_argument("--timeout", type=float, default=30.0,
                    help="seconds per kcoral.runjob child (a hung kernel is reported as such)")
    ap.add_argument("--budget", type=float, default=480.0,
                    help="start no new entry after this many seconds (one GPU call is 10 min)")
    ap.add_argument("--build-only", action="store_true",
                    help="build and validate the jobs, run our analyses; no GPU needed")
    ap.add_argument("--board-type", default="cuda", choices=("cuda", "fake"),
                    help="fake: no-op modules on KCoral's fake board (plumbing test on a CPU)")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error(f"--repeat must be at least 1, got {args.repeat}")

    out = Path(args.out or tempfile.mkdtemp(prefix="sync_check_gpu_"))
    entries = [e for e in args.entries.split(",") if e]
    if entries == ["all"]:
        entries = list(DEFAULT_ENTRIES + MORE_ENTRIES)
    args.sanitizer = None
    if not args.build_only and args.board_type == "cuda":
        from kcoral.boards.cuda import gpu_count
        n, why = gpu_count()
        if n == 0:
            print(f"no usable GPU ({why}); use --build-only or --board-type fake on a CPU")
            return 2
        args.sanitizer = find_sanitizer()
        print(f"compute-sanitizer: {args.sanitizer or 'NOT FOUND (sanitizer columns skipped)'}")
    rows = []
    t_start = time.monotonic()
    for entry in entries:
        if time.monotonic() - t_start > args.budget:
            print(f"time budget of {args.budget:.0f} s spent; not run: {entry}", flush=True)
            continue
        info = build(entry, out, args.board_type)
        row = {"entry": entry, "ours": info["ours"], "jobs": info["variants"]}
        if not args.build_only:
            row.update(run_entry(info, out, args))
        rows.append(row)
        print(_row_json(row), flush=True)
    print_table(rows, bool(args.sanitizer))
    print(f"jobs, blobs, runjob results and sanitizer logs: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
