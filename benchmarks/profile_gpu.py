"""The profilers on a real GPU, in one command: ``python benchmarks/profile_gpu.py [--quick]``.

Needs an NVIDIA GPU with ncu and compute-sanitizer (CUDA toolkit) and matplotlib; runs the KCoral
tools in-process on board ``cuda0`` (the same code the daemon runs for a job's ``tools``):

1. ncu: the zoo's vadd (memory bound, n = 16M; 4M with ``--quick``; ``--set basic``, to which
   the tool adds SourceCounters and WarpStateStats for the warp samples) and the zoo's pipelined
   GEMM at a realistic size, case ``m4096n4096k4096_bn256`` of zoo/kernels/gemm_wgmma.py
   (``--set basic`` with ``--quick``, ``--set full`` without); summary tables with hot spots
   mapped to the Python lines.
2. iket: timelines of the same two kernels (the GEMM at m1024n1024k512, 2048x2048x1024 without
   ``--quick``, to keep the trace and its rendering short), from the zoo's own ``T.iket``
   annotations. The profiling build's job takes its launch metadata from the instrumented kernel
   (`tirxh_iket.job.profiling_job`). Overhead: the normal and the profiling build timed with
   KCoral's measurement protocol (`kcoral.measure.run_job`) on the same board, plus registers of
   both builds.
3. compute-sanitizer memcheck on a vadd with a planted out-of-bounds write (`vadd_oob` below):
   the finding must be ``memory.out-of-bounds`` (a global write) at the planted line.

``--dry-run`` compiles, annotates and builds every job and packs its kernel parameters as the
CUDA board would (`kcoral.boards.cuda.pack_params`, fake pointers) without running anything (a
CPU machine is enough: check it before spending GPU time). Writes into ``$OUT`` (default
./profile_gpu_out), at most 8 files, no subfolders:
``profile_gpu.json`` (all summaries, overheads, checks), ``vadd.ncu-rep``, ``gemm.ncu-rep``,
``gemm_timeline.png``, ``vadd_timeline.png``, ``gemm_trace.json.gz`` (Perfetto, first 16 SMs) and
``artifacts.tar.gz`` (ncu CSV exports, SASS, raw traces and layouts, the sanitizer log: fixtures
for the CPU tests of plugins/ncu_profile and plugins/iket). Each section records its own error
instead of stopping the run; a compact summary is printed at the end.

Missing tools are reported per section, not fatal: without ncu the ncu sections say where they
looked; ``pip install nvidia-cuda-sanitizer-api`` (a 14 MB wheel; its ``nvidia/cu13/bin``) provides
compute-sanitizer; without matplotlib the timelines come back as raw traces in
``artifacts.tar.gz``, and ``python -m tirxh_iket render NAME_trace.bin NAME_trace.layout.json``
draws them on any machine.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import io
import json
import os
import pathlib
import shutil
import sys
import tarfile
import tempfile
import time
import traceback

ROOT = pathlib.Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "plugins" / "ncu_profile", ROOT / "plugins" / "iket"):
    sys.path.insert(0, str(p))

import numpy as np  # noqa: E402

import tirxh.lang as T  # noqa: E402

DRY_RUN = False
RESULTS: dict = {"sections": {}, "cases": {},
                 "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
NCU_GEMM_CASE = "m4096n4096k4096_bn256"  # a case of zoo/kernels/gemm_wgmma.py


# -- helpers --------------------------------------------------------------------------------------

def load_module(path: pathlib.Path, name: "str | None" = None):
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def annotated_module(zoo_file: pathlib.Path, workdir: pathlib.Path):
    """The zoo module (its kernels carry ``T.iket`` annotations); returns (module, notes)."""
    if "T.iket." not in zoo_file.read_text():
        raise ValueError(f"{zoo_file.name} has no T.iket annotations to time")
    return load_module(zoo_file), {"annotated_copy": False}


def section(name):
    def deco(fn):
        def run(*a, **k):
            t0 = time.time()
            try:
                RESULTS["sections"][name] = dict(fn(*a, **k) or {}, status="ok")
            except Exception as e:
                RESULTS["sections"][name] = {"status": "error", "error": f"{type(e).__name__}: "
                                             f"{e}", "traceback": traceback.format_exc()[-3000:]}
            RESULTS["sections"][name]["wall_s"] = round(time.time() - t0, 2)
        return run
    return deco


class Ctx:
    """Blob store, board and registries shared by the sections."""

    def __init__(self, work: pathlib.Path, out: pathlib.Path):
        from kcoral.blobs import BlobStore
        from kcoral.boards import BoardSpec
        from kcoral.plugins import registries
        self.work, self.out = work, out
        self.blobs = BlobStore(work / "blobs")
        self.regs = registries()
        self.spec = BoardSpec(name="cuda0", type="cuda", target="sm_90a", options={"ordinal": 0})
        self.dev = None
        self.files: dict = {}  # name -> path for artifacts.tar.gz

    def device(self):
        if self.dev is None:
            self.dev = self.regs.board_types.get("cuda").open_device(self.spec)
        return self.dev

    def job(self, compiled, suite, case, tools=(), timing=True):
        from kcoral.job import Job
        from tirxh.api import build_job
        doc = build_job(compiled, suite, case, put=lambda data: self.blobs.put(data)).to_doc()
        doc["timing"]["enabled"] = timing
        doc["tools"] = list(tools)
        job = Job.from_json(doc)
        job.blob_root = str(self.blobs.root)
        return job

    def run_protocol(self, job) -> dict:
        from kcoral.measure import run_job
        return run_job(job, self.device(), self.blobs, self.regs.baselines, lambda s, m: None)

    def keep(self, name: str, path: pathlib.Path) -> None:
        if path.exists():
            self.files[name] = path


def packed_params(job) -> int:
    """Pack each launch's arguments as the CUDA board does (fake pointers, zero tensor maps):
    a job whose params and args disagree fails here, on the CPU, not on the board."""
    from kcoral.boards.cuda import pack_params
    n = 0
    for ln in job.doc["launches"]:
        n += len(pack_params(ln.get("params"), ln["args"], lambda name: 1 << 40,
                             lambda desc: bytes(128)))
    return n


def median_ms(res: dict):
    return ((res.get("timing") or {}).get("candidate") or {}).get("median_ms")


# -- 1. ncu ---------------------------------------------------------------------------------------

def ncu_one(ctx: Ctx, label: str, kernel, suite, case, section_set: str) -> dict:
    from tirxh_ncu_profile.report import format_ncu
    from tirxh_ncu_profile.source_map import line_table, map_hotspots
    from tirxh_ncu_profile.tools import NcuTool
    tool = NcuTool()
    ck = kernel.compile("sm_90a", **suite.consts(case))
    job = ctx.job(ck, suite, case, [{"name": "ncu", "options": {"set": section_set}}], False)
    if DRY_RUN:
        return {"dry_run": True, "grid": job.doc["launches"][0]["grid"], "case": case.name,
                "set": section_set, "params_packed": packed_params(job)}
    why = tool.available(ctx.spec)
    if why:
        raise RuntimeError(why)
    wd = ctx.work / f"ncu_{label}"
    wd.mkdir()
    r = tool.run(job, wd, ctx.spec)
    s = r.summary
    if s.get("sass_samples"):
        spots, cov = map_hotspots(s["sass_samples"], line_table(ck.sass))
        s["hotspots"], s["hotspot_coverage"] = [h.__dict__ for h in spots], cov
    (wd / f"{label}.sass").write_text(ck.sass)
    shutil.copy(r.artifacts["profile.ncu-rep"], ctx.out / f"{label}.ncu-rep")
    for name in ("ncu_details.csv", "ncu_source.csv"):
        if name in r.artifacts:
            ctx.keep(f"ncu_{label}_{name.split('_')[1]}", pathlib.Path(r.artifacts[name]))
    ctx.keep(f"{label}_sm90a.sass", wd / f"{label}.sass")
    text = format_ncu(s)
    print(text)
    s.pop("sass_samples", None)
    s.pop("metrics", None)
    return {"summary": s, "text": text, "case": case.name, "set": section_set}


# -- 2. iket --------------------------------------------------------------------------------------

def iket_one(ctx: Ctx, label: str, mod, kernel_name: str, case, capacity: int) -> dict:
    from tirxh_iket.transform import compile_profiling_build
    from tirxh_iket.chrome import to_chrome
    from tirxh_iket.decode import decode
    from tirxh_iket.job import profiling_job
    from tirxh_iket.kcoral_tool import IketTool
    kernel, suite = getattr(mod, kernel_name), mod.SUITE
    consts = suite.consts(case)
    plain = kernel.compile("sm_90a", **consts)
    prof, layout = compile_profiling_build(kernel, "sm_90a", consts, capacity=capacity)
    base_job = ctx.job(plain, suite, case)
    # the profiling build's module *and* launch metadata (its params end with the trace buffer)
    doc = profiling_job(base_job.doc, prof, layout, ctx.blobs.put(prof.cubin))
    from kcoral.job import Job
    job = Job.from_json(doc)
    job.blob_root = str(ctx.blobs.root)
    if DRY_RUN:
        return {"dry_run": True, "grid": doc["launches"][0]["grid"], "cost": layout.cost,
                "params_packed": [packed_params(base_job), packed_params(job)],
                "trace_bytes": doc["buffers"][-1]["shape"][0],
                "sites": [f"{x.kind} {x.name} :{x.line}" for x in layout.sites],
                "registers": [plain.resources.registers, prof.resources.registers]}
    base = ctx.run_protocol(base_job)
    inst = ctx.run_protocol(job)  # the profiling build must stay correct, and is timed
    wd = ctx.work / f"iket_{label}"
    wd.mkdir()
    r = IketTool().run(job, wd, ctx.spec)
    clock = ((inst.get("timing") or {}).get("sm_clock_mhz") or {}).get("before")
    s = r.summary
    if "iket_timeline.png" in r.artifacts:
        shutil.copy(r.artifacts["iket_timeline.png"], ctx.out / f"{label}_timeline.png")
    for name in ("iket_trace.bin", "iket_trace.layout.json", "iket_summary.txt"):
        ctx.keep(f"{label}_{name.replace('iket_', '')}", pathlib.Path(r.artifacts[name]))
    if label == "gemm":
        data = np.fromfile(r.artifacts["iket_trace.bin"], dtype=np.uint8)
        tl = decode(data, layout, clock_ghz=clock / 1e3 if clock else None)
        keep = set(tl.sms[:16])
        tl.warps = [w for w in tl.warps if w.sm in keep]
        with gzip.open(ctx.out / "gemm_trace.json.gz", "wt") as f:
            json.dump(to_chrome(tl), f, separators=(",", ":"))
    over = {"plain_median_ms": median_ms(base), "instrumented_median_ms": median_ms(inst),
            "registers": {"plain": plain.resources.registers,
                          "instrumented": prof.resources.registers},
            "plain_correct": base.get("verified"), "instrumented_correct": inst.get("verified"),
            "instrumented_status": inst.get("status"), "cost": layout.cost}
    if over["plain_median_ms"] and over["instrumented_median_ms"]:
        over["ratio"] = over["instrumented_median_ms"] / over["plain_median_ms"]
    text = (wd / "iket_summary.txt").read_text()
    print(text)
    print(f"  overhead: {over}")
    s.pop("issues", None)
    return {"summary": s, "overhead": over, "text": text}


# -- 3. sanitizer ---------------------------------------------------------------------------------

OOB_SLACK = 64  # the planted bug: the grid covers n + OOB_SLACK threads and nothing checks i < n


@T.kernel(grid=lambda n: T.cdiv(n + OOB_SLACK, 256), block=256)
def vadd_oob(a: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32):
    i = T.ctaid.x * 256 + T.tid.x
    with T.if_(i < n + OOB_SLACK):  # BUG (planted): should be i < n
        x = T.ptx.ld.global_.f32(a.at(T.ptx.min.u32(i, n - 1)))
        T.ptx.st.global_.f32(out.at(i), x)  # PLANTED OUT-OF-BOUNDS WRITE


def _oob_inputs(rng, n):
    return dict(a=rng.standard_normal(n, dtype=np.float32), out=np.empty(n, np.float32), n=n)


OOB_SUITE = T.suite(vadd_oob, inputs=_oob_inputs, reference=lambda a: {"out": a},
                    outputs=["out"], cases=[T.case("n4000", n=4000)])


def sanitizer_oob(ctx: Ctx) -> dict:
    import inspect
    from tirxh_ncu_profile.tools import SanitizerTool
    tool = SanitizerTool()
    case = OOB_SUITE.cases[0]
    ck = vadd_oob.compile("sm_90a")
    job = ctx.job(ck, OOB_SUITE, case, [{"name": "compute-sanitizer",
                                         "options": {"tool": "memcheck"}}], False)
    src, first = inspect.getsourcelines(vadd_oob.fn)
    planted = first + next(n for n, ln in enumerate(src) if "PLANTED" in ln)
    if DRY_RUN:
        return {"dry_run": True, "grid": job.doc["launches"][0]["grid"], "planted_line": planted,
                "params_packed": packed_params(job)}
    why = tool.available(ctx.spec)
    if why:
        raise RuntimeError(why)
    wd = ctx.work / "sanitizer"
    wd.mkdir()
    r = tool.run(job, wd, ctx.spec)
    ctx.keep("sanitizer_memcheck_oob.log", wd / "sanitizer_memcheck.log")
    # the planted bug is a global write past the end of `out`: every finding must be that, at
    # the planted line of this file (memcheck prints the line table's file:line)
    hits = [f for f in r.findings if f.kind == "memory.out-of-bounds"
            and f.data.get("access") == "write" and f.data.get("space") == "global"]
    at = [f for f in hits if f.where is not None and f.where.line == planted
          and pathlib.Path(f.where.file).name == pathlib.Path(__file__).name]
    ok = bool(hits) and len(at) == len(r.findings)
    kinds: dict = {}
    for f in r.findings:
        key = f"{f.kind} {f.data.get('space')} {f.data.get('access')} at {f.where}"
        kinds[key] = kinds.get(key, 0) + 1
    print(f"sanitizer memcheck: verdict {r.verdict}, {len(r.findings)} findings "
          f"(tool counted {r.summary.get('error_summary')}), {len(at)} out-of-bounds global "
          f"writes at {pathlib.Path(__file__).name}:{planted}: {'FOUND' if ok else 'NOT FOUND'}")
    for key, n in kinds.items():
        print(f"  {n:>4} x {key}")
    return {"verdict": r.verdict, "findings": [f.to_json() for f in r.findings[:5]],
            "finding_kinds": kinds, "planted_line": planted, "found_at_planted_line": ok,
            "summary": r.summary}


# -- main -----------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller cases")
    ap.add_argument("--only", default="ncu,iket,sanitizer")
    ap.add_argument("--dry-run", action="store_true",
                    help="compile, annotate and build every job, run nothing (works on a CPU)")
    a = ap.parse_args(argv)
    global DRY_RUN
    DRY_RUN = a.dry_run
    out = pathlib.Path(os.environ.get("OUT") or "profile_gpu_out")
    out.mkdir(parents=True, exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="profile_gpu_"))
    ctx = Ctx(work, out)
    zoo = ROOT / "zoo" / "kernels"
    vadd_n = (1 << 22) if a.quick else (1 << 24)
    gemm_mnk = (1024, 1024, 512) if a.quick else (2048, 2048, 1024)
    vcase = T.case(f"n{vadd_n}", n=vadd_n)
    icase = T.case("n4194304", n=1 << 22)  # iket: 4096 CTAs x 8 warps x 6 records = 6 MB trace
    gcase = T.case("m%dn%dk%d" % gemm_mnk, M=gemm_mnk[0], N=gemm_mnk[1], K=gemm_mnk[2])
    only = set(a.only.split(","))
    gemm_set = "basic" if a.quick else "full"

    if "ncu" in only:
        vz, gz = load_module(zoo / "vadd.py"), load_module(zoo / "gemm_wgmma.py")
        # the figure for docs/PROFILING.md: the pipelined GEMM at a realistic size (BN = 256)
        ncase = next(c for c in gz.SUITE.cases if c.name == NCU_GEMM_CASE)
        RESULTS["cases"].update(vadd=vcase.name, ncu_gemm=ncase.name)
        section("ncu_vadd")(ncu_one)(ctx, "vadd", vz.vadd, vz.SUITE, vcase, "basic")
        section("ncu_gemm")(ncu_one)(ctx, "gemm", gz.gemm_wgmma, gz.SUITE, ncase, gemm_set)
    RESULTS["cases"].update(vadd_iket=icase.name, gemm_iket=gcase.name)
    if "iket" in only:
        for label, fname, kname, case, cap in (
                ("vadd", "vadd.py", "vadd", icase, 6),
                ("gemm", "gemm_wgmma.py", "gemm_wgmma", gcase, 4 * (gemm_mnk[2] // 64) + 16)):
            try:
                mod, how = annotated_module(zoo / fname, work)
            except Exception as e:
                RESULTS["sections"][f"iket_{label}"] = {"status": "error", "wall_s": 0,
                                                        "error": f"annotating {fname}: {e}"}
                continue
            RESULTS.setdefault("annotation", {})[fname] = how
            section(f"iket_{label}")(iket_one)(ctx, label, mod, kname, case, cap)
    if "sanitizer" in only:
        section("sanitizer_oob")(sanitizer_oob)(ctx)

    files = dict(ctx.files)
    while True:  # what comes back is limited to 16 MiB a file: drop the largest raw traces first
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for name, path in sorted(files.items()):
                tar.add(path, arcname=name)
        bins = sorted((p.stat().st_size, n) for n, p in files.items() if n.endswith(".bin"))
        if buf.tell() < 15 << 20 or not bins:
            break
        RESULTS.setdefault("left_out_of_tar", []).append(bins[-1][1])
        del files[bins[-1][1]]
    (out / "artifacts.tar.gz").write_bytes(buf.getvalue())
    (out / "profile_gpu.json").write_text(json.dumps(RESULTS, indent=1, default=str))
    print("\n== profile_gpu summary ==")
    for name, s in RESULTS["sections"].items():
        extra = ""
        if s.get("dry_run"):
            extra = f"dry run: grid {s.get('grid')}"
        elif name.startswith("ncu_") and s["status"] == "ok":
            sm = s["summary"]
            cov = sm.get("hotspot_coverage") or {}
            spots = f"{cov.get('samples')} samples" if cov else \
                (sm.get("hotspots_note") or "no hot spots")[:40]
            extra = (f"{s.get('case')} --set {s.get('set')}: duration {sm.get('duration_ns')} "
                     f"ns, SM {sm.get('sm_throughput_pct')}%, mem "
                     f"{sm.get('memory_throughput_pct')}%, {spots}")
        elif name.startswith("iket_") and s["status"] == "ok":
            extra = f"overhead ratio {s['overhead'].get('ratio')}"
        elif name == "sanitizer_oob" and s["status"] == "ok":
            extra = f"planted OOB found: {s['found_at_planted_line']}"
        print(f"  {name:<16} {s['status']:<6} {s['wall_s']:>7}s  {extra or s.get('error', '')}")
    print(f"wrote {sorted(p.name for p in out.iterdir())} to {out}")
    return 0 if all(s["status"] == "ok" for s in RESULTS["sections"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
