"""One KCoral job from several compiled kernels launched in order (a plan), for work that no
single kernel does: KDA's forward + backward is seven launches whose intermediates (scratch
buffers) pass from one to the next (zoo/kernels/kda_fwd_bwd.py).

KCoral's job model already holds such a job: ``launches`` is a list run in order on one set of
named buffers, and a buffer that no check reads is scratch (``init: zeros``). What it needs from
the client is one module carrying every launch's entry, since a job has one ``module``.
`merge_ptx` makes that module from each kernel's PTX (one ``.entry`` each): the header once, the
``.file`` indices renumbered (and the ``.loc`` lines with them), the dynamic shared-memory window
declared once (the largest alignment asked), each entry renamed to its launch's name (the same
kernel with two sets of constants is two entries). `build_plan_job` assembles it (ptxas: its
whole-program mode keeps ``setmaxnreg``, which nvJitLink drops) and lays the launches over the
buffers. `build_job` (tirxh/core/benchjob.py) remains the one-kernel path; this module adds to it
and changes nothing there.

No IR travels with a plan (``module.ir_error`` says so): KCoral's ``sim`` board runs one kernel's
IR, so a plan's small cases are checked in numsim by the plan's own driver, launch by launch.
"""

from __future__ import annotations

import re

import numpy as np

from kcoral.blobs import array_bytes
from kcoral.dtypes import dtype_of
from .benchjob import _sha256, launch_doc, parse_doc, value_arg
from .toolchain import ptx_to_cubin
from .types import from_numpy

_HEADER = (".version", ".target", ".address_size")
_ENTRY = re.compile(r"^(\.visible\s+)?\.entry\s+([A-Za-z_$][\w$]*)\s*\(", re.M)
_FILE = re.compile(r'^\.file\s+(\d+)\s+(".*")\s*$')
_LOC = re.compile(r"^(\s*\.loc\s+)(\d+)(\s.*)$")
_EXTERN = re.compile(r"^\.extern\s+\.shared\s+\.align\s+(\d+)\s+\.b8\s+(\w+)\[\];\s*$")


def merge_ptx(parts) -> str:
    """One PTX module from `parts`, a list of (entry name, PTX of one kernel), in order: each
    kernel's one ``.entry`` renamed to its entry name (module docstring). ValueError names the
    part that does not fit: no or several entries, a header unlike the first part's, an entry
    name used twice."""
    if not parts:
        raise ValueError("merge_ptx: no kernels to merge")
    names = [n for n, _ in parts]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"merge_ptx: entry names {dup} used more than once (each launch of the "
                         f"same kernel with other constants needs its own name)")
    header, files, externs, bodies = None, {}, {}, []
    for name, ptx in parts:
        entries = _ENTRY.findall(ptx)
        if len(entries) != 1:
            raise ValueError(f"merge_ptx: part {name!r} has {len(entries)} .entry directives, "
                             f"expected 1")
        head = tuple(ln.strip() for ln in ptx.splitlines() if ln.strip().startswith(_HEADER))
        if header is None:
            header = head
        elif head != header:
            raise ValueError(f"merge_ptx: part {name!r} has header {list(head)}, the first "
                             f"part {list(header)}")
        renum, body = {}, []
        for line in ptx.splitlines():
            s = line.strip()
            if s.startswith(_HEADER):
                continue
            m = _FILE.match(s)
            if m:
                renum[m.group(1)] = files.setdefault(m.group(2), str(len(files) + 1))
                continue
            m = _EXTERN.match(s)
            if m:
                externs[m.group(2)] = max(int(m.group(1)), externs.get(m.group(2), 0))
                continue
            m = _LOC.match(line)
            if m:
                line = f"{m.group(1)}{renum.get(m.group(2), m.group(2))}{m.group(3)}"
            body.append(line)
        text = "\n".join(body)
        bodies.append(_ENTRY.sub(lambda m: f"{m.group(1) or ''}.entry {name}(", text, count=1))
    out = list(header) + [""]
    out += [f".file {i} {path}" for path, i in files.items()]
    out += [f".extern .shared .align {a} .b8 {n}[];" for n, a in externs.items()]
    return "\n".join(out + [""] + bodies) + "\n"


def _launch_args(where, md, bind, arrays, buffers):
    """The launch's args (each parameter through `bind` to a buffer, a scalar or a tensormap),
    adding each buffer it names to `buffers` (name -> its first array)."""
    args = []
    for p in md["params"]:
        src = bind.get(p["name"], p["name"])
        if src not in arrays:
            raise ValueError(f"{where}: parameter {p['name']!r} binds {src!r}, which the plan's "
                             f"arrays do not hold")
        v = arrays[src]
        if p["kind"] == "ptr":
            a = np.asarray(v)
            if from_numpy(a.dtype).name != p["dtype"]:
                raise ValueError(f"{where}: parameter {p['name']!r} is {p['dtype']}, buffer "
                                 f"{src!r} holds {from_numpy(a.dtype).name}")
            buffers.setdefault(src, a)
            args.append({"buffer": src})
        else:
            args.append(value_arg(where, p, v, arrays))
    return args


def build_plan_job(name, steps, runs, outputs, tolerances, scratch=(), put=None, baselines=(),
                   work=None, timing=None, budgets=None, guards=None, target="sm_90a",
                   assemble=ptx_to_cubin):
    """The job for a plan. `steps`: (entry, compiled kernel, grid, bind) in launch order (bind:
    parameter -> buffer, a parameter not named binding the buffer of its name); `runs`: per
    correctness run a dict (seed, when, arrays, expected), arrays holding every bound buffer,
    scalar and tensormap of that seed (the first run's also fix the buffers' shapes and are
    timed); `outputs`: the checked buffers (poisoned before each run), each with its
    `tolerances[name]` (a `T.tolerance`; an RMS-relative atol is made absolute with the
    strictest run's reference, as `build_job` does); `scratch`: buffers zeroed before each run
    and never uploaded. ValueError names what does not fit."""
    put = put or _sha256
    if not runs:
        raise ValueError(f"{name}: a plan job needs at least one run")
    first = runs[0]["arrays"]
    buffers, launches, ptx = {}, [], []
    for entry, compiled, grid, bind in steps:
        md = compiled.launch_metadata()
        where = f"{name} launch {entry!r} ({md['entry']})"
        args = _launch_args(where, md, bind, first, buffers)
        launches.append(launch_doc(md, entry, grid, args))
        ptx.append((entry, compiled.ptx))
    missing = [o for o in list(outputs) + list(scratch) if o not in buffers]
    if missing:
        raise ValueError(f"{name}: outputs or scratch {missing} are bound by no launch")
    cubin, _ = assemble(merge_ptx(ptx), target, prefer="ptxas")
    bufs = []
    for bname, a in buffers.items():
        if bname in outputs or bname in scratch:
            init = {"kind": "empty" if bname in outputs else "zeros"}
        else:
            init = {"kind": "blob", "blob": put(array_bytes(a))}
        bufs.append({"name": bname, "dtype": from_numpy(a.dtype).name,
                     "shape": [int(x) for x in a.shape], "output": bname in outputs,
                     "init": init})
    doc_runs, atols = [], {o: [] for o in outputs}
    for r in runs:
        exp = r.get("expected") or {}
        run = {"seed": int(r["seed"]), "when": r["when"], "inputs": {}, "expected": {}}
        for b in bufs:
            if b["init"]["kind"] == "blob":
                run["inputs"][b["name"]] = put(array_bytes(np.asarray(r["arrays"][b["name"]])))
            elif b["output"] and b["name"] in exp:
                want = np.asarray(exp[b["name"]]).astype(dtype_of(b["dtype"]))
                run["expected"][b["name"]] = put(array_bytes(want.reshape(b["shape"])))
        for o in outputs:
            atols[o].append(tolerances[o].absolute(*([exp[o]] if o in exp else [])))
        doc_runs.append(run)
    before = sum(r["when"] == "before" for r in runs)
    doc = {"name": name, "target": target,
           "module": {"format": "cubin", "blob": put(cubin),
                      "ir_error": "a plan of several kernels: the sim board runs one kernel's "
                                  "IR (the plan's driver checks it in numsim)"},
           "buffers": bufs, "launches": launches,
           "checks": [{"buffer": o, "rtol": float(tolerances[o].rtol), "atol": min(atols[o]),
                       "rms": tolerances[o].rms} for o in outputs],
           "runs": doc_runs,
           "baselines": [dict(b, optional=b.get("optional", True)) for b in baselines],
           "timing": dict({"seed": int(runs[0]["seed"])}, **(timing or {})),
           "guards": dict({"seeds_before": before, "seeds_after": len(runs) - before},
                          **(guards or {})),
           "work": {k: (v if k == "flops_dtype" or v is None else float(v))
                    for k, v in (work or {}).items()}}
    return parse_doc(name, doc, budgets)
