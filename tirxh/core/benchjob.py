"""From a compiled item to a KCoral job, and the client that submits it.

`build_job` turns a compiled kernel and its suite case into a typed `kcoral.job.Job`: one buffer
per pointer parameter (inputs uploaded as blobs from ``suite.make_inputs(case, seed)``; the
suite's ``outputs`` poisoned), scalars by value, ``T.TensorMap`` inputs described for the board
to encode, the grid from ``suite.grid(case)``, correctness runs on fresh seeds (by default two
before and two after timing, KCoral's ``guards.seeds_before``/``seeds_after``) against
``suite.expected``, tolerances from ``suite.tolerance_for``, and the
declared work for TFLOP/s, GB/s and the floor. `client_for` gives the run's `KCoralClient`, for
the configured daemon or an embedded one. `bench_error` turns a refused submission into a typed
error by its refusal code.

Shared by ``tirxh bench`` and the profilers (ncu_profile, iket) through `tirxh.api`. tirxh sits
above KCoral's client and model layer: it imports `kcoral.job` and `kcoral.blobs` here, the
client (and, for the embedded mode only, the daemon) when a run first needs one.
"""

from __future__ import annotations

import hashlib
import os
import sys

import numpy as np

from kcoral.blobs import array_bytes
from kcoral.dtypes import dtype_of
from kcoral.errors import Refusal
from kcoral.job import Job

from .suite import TensorMap
from .types import from_numpy

# runs 1 and 2 before timing (run 1's inputs are also timed), 3 and 4 after (issue 17: a kernel
# right on one seed each side can be wrong on the next)
CORRECTNESS_SEEDS = (1, 2, 3, 4)
EMBEDDED_BOARDS = {"cuda": {}, "sim": {}}  # what an embedded daemon serves: the local GPUs + sim


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def launch_doc(md: dict, entry: str, grid, args: list) -> dict:
    """One ``launches[i]`` of a KCoral job from a kernel's ``launch_metadata()`` (benchmark and
    plan jobs alike: the launch facts -- cluster, dynamic shared memory, the ABI, PDL -- are
    the kernel's, so a new one reaches both kinds of job here)."""
    grid = [int(g) for g in grid]
    return {"entry": entry, "grid": grid + [1] * (3 - len(grid)), "block": list(md["block"]),
            "cluster": md["cluster"], "dynamic_smem": int(md["dynamic_smem"]),
            "params": md["params"], "args": args, "pdl": bool(md.get("pdl"))}


def build_job(compiled, suite, case, seeds=CORRECTNESS_SEEDS, timing: "dict | None" = None,
              baselines=(), put=None, budgets: "dict | None" = None,
              before: "int | None" = None, guards: "dict | None" = None) -> Job:
    """The job for one item. `put(bytes) -> digest` registers a blob to upload
    (``KCoralClient.put_blob``); the module travels as the cubin, with the IR as JSON beside it
    (``module.ir``, for the sim board). The first `before` of `seeds` (default: half, rounded
    up) are correctness runs before timing, the rest after; the first is also timed, and the
    job's ``guards`` ask the daemon for as many; `guards` sets the rest of them (e.g.
    ``{"constant_outputs": ["mask"]}``, `kcoral.job.Guards`). `budgets` (``exec_s``,
    ``queue_s``, ``launch_s``) override the daemon's defaults. ValueError names what in the suite does not
    fit."""
    seeds = [int(s) for s in seeds]
    before = (len(seeds) + 1) // 2 if before is None else int(before)
    if not seeds or not 0 < before <= len(seeds):
        raise ValueError(f"seeds {seeds} with {before} before timing: expected at least one "
                         f"seed and 1..{len(seeds)} of them before timing")
    whens = ["before"] * before + ["after"] * (len(seeds) - before)
    if compiled.cubin is None:
        raise ValueError(f"{compiled.name}: no cubin to benchmark (compiled with assemble=False)")
    md = compiled.launch_metadata()
    put = put or _sha256
    where = f"{suite.name}[{case.name}]"
    outputs = list(suite.outputs)
    inplace = set(getattr(suite, "inplace", ()))  # read, then overwritten: uploaded, not poisoned
    runs_inputs = [suite.make_inputs(case, s) for s in seeds]
    first = runs_inputs[0]
    buffers, args = [], []
    for p in md["params"]:
        name = p["name"]
        if name not in first:
            raise ValueError(f"{where}: inputs() did not provide parameter {name!r}")
        v = first[name]
        if p["kind"] == "ptr":
            a = np.asarray(v)
            buffers.append({"name": name, "dtype": from_numpy(a.dtype).name,
                            "shape": [int(x) for x in a.shape], "output": name in outputs,
                            "init": {"kind": "empty"} if name in outputs and name not in inplace
                            else {"kind": "blob", "blob": put(array_bytes(a))}})
            args.append({"buffer": name})
        else:
            args.append(value_arg(where, p, v, first))
    for o in outputs:
        if not any(b["name"] == o for b in buffers):
            raise ValueError(f"{suite.name}: output {o!r} is not a pointer parameter")
    runs = []
    atols = {o: [] for o in outputs}  # per seed: an RMS-relative atol made absolute
    for s, inputs, when in zip(seeds, runs_inputs, whens):
        exp = suite.expected(case, inputs) or {}
        for o in outputs:
            atols[o].append(suite.tolerance_for(o).absolute(*([exp[o]] if o in exp else [])))
        run = {"seed": int(s), "when": when, "inputs": {}, "expected": {}}
        for b in buffers:
            if not b["output"] or b["name"] in inplace:
                run["inputs"][b["name"]] = put(array_bytes(np.asarray(inputs[b["name"]])))
            if b["output"] and b["name"] in exp:
                want = np.asarray(exp[b["name"]]).astype(dtype_of(b["dtype"]))
                run["expected"][b["name"]] = put(array_bytes(want.reshape(b["shape"])))
        # a rule relative to the reference (atol_rms) resolves per seed: each run carries
        # its own reference's atol (`kcoral.job.Run.atol`), as `Tolerance.compare` applies it
        run_atol = {o: atols[o][-1] for o in outputs
                    if o in exp and suite.tolerance_for(o).atol_rms}
        if run_atol:
            run["atol"] = run_atol
        runs.append(run)
    checks = []
    for o in outputs:
        t = suite.tolerance_for(o)   # the strictest seed's absolute atol (for the guards'
        # comparisons that no run's reference covers)
        checks.append({"buffer": o, "rtol": float(t.rtol), "atol": min(atols[o], default=t.atol),
                       "rms": t.rms})
    grid = [int(g) for g in suite.grid(case)]
    bl = []
    for b in tuple(baselines) or tuple(getattr(suite, "baselines", ()) or ()):
        b = dict(b) if isinstance(b, dict) else {"name": str(b), "args": {}}
        # measure what can be measured: a baseline the daemon lacks (FLA not installed, torch
        # absent on a board) is left out and named in the result, and the item is incomplete,
        # unless the suite declares it required ({"name": ..., "optional": False})
        b.setdefault("optional", True)
        # an arg naming a case parameter ("M": "M") takes that parameter's value
        b["args"] = {k: (case.params[v] if isinstance(v, str) and v in case.params else v)
                     for k, v in b.get("args", {}).items()}
        bl.append(b)
    work = {k: (v if k == "flops_dtype" or v is None else float(v))
            for k, v in suite.work(case).items()}
    doc = {"name": where, "target": compiled.target,
           "module": _module(compiled, put),
           "buffers": buffers,
           "launches": [launch_doc(md, md["entry"], grid, args)],
           "checks": checks, "runs": runs, "baselines": bl,
           "timing": dict({"seed": int(seeds[0])}, **(timing or {})),
           "guards": dict({"seeds_before": before, "seeds_after": len(seeds) - before},
                          **(guards or {})),
           "work": work}
    return parse_doc(where, doc, budgets)


def parse_doc(where: str, doc: dict, budgets: "dict | None" = None) -> Job:
    """`doc` with its `budgets` as a typed job; ValueError names the item (`where`) and each
    invalid field. Shared with `tirxh.core.planjob`."""
    if budgets:
        doc["budgets"] = {k: float(v) for k, v in budgets.items() if v is not None}
    try:
        return Job.parse(doc)
    except ValueError as e:  # kcoral.errors.JobError: each problem names its field
        raise ValueError(f"{where}: the KCoral job is invalid: {e}") from None


def value_arg(where: str, p: dict, v, arrays: dict) -> dict:
    """The launch arg of a scalar or tensormap parameter `p` (launch metadata) with value `v`
    (a tensormap's source array looked up in `arrays`); ValueError names what does not fit.
    Shared with `tirxh.core.planjob`."""
    name = p["name"]
    if p["kind"] == "scalar":
        if isinstance(v, np.ndarray) and v.size != 1:
            raise ValueError(f"{where}: scalar parameter {name!r} got an array of shape "
                             f"{v.shape}")
        return {"scalar": v.item() if hasattr(v, "item") else v, "dtype": p["dtype"]}
    if p["kind"] == "tensormap":
        if not isinstance(v, TensorMap):
            raise ValueError(f"{where}: tensormap parameter {name!r} needs a T.TensorMap "
                             f"input, got {type(v).__name__}")
        return {"tensormap": v.describe(np.asarray(arrays[v.source]))}
    raise ValueError(f"parameter {name!r}: unknown kind {p['kind']!r}")


def _module(compiled, put) -> dict:
    """The cubin, and the IR as JSON (what KCoral's ``sim`` board runs through numsim)."""
    mod = {"format": "cubin", "blob": put(compiled.cubin)}
    try:
        mod["ir"] = put(compiled.ir_json().encode())
    except TypeError as e:  # a constant with no JSON form: GPU boards still run the cubin
        mod["ir_error"] = str(e)
    return mod


def bench_error(e) -> dict:
    """A refused submission (`kcoral.errors.KCoralError`) as a typed error, by its refusal code:
    no usable board here is ``unavailable.board`` (the item is incomplete: nothing could be
    timed), an unreachable or stopping daemon ``unavailable.daemon``, a job the daemon found
    invalid ``validation.job``, anything else ``internal.daemon``."""
    if e.refusal == Refusal.NO_BOARD:
        return {"type": "unavailable.board", "message": e.message}
    if e.refusal == Refusal.SHUTTING_DOWN or (not e.refusal and e.code in (
            "UNAVAILABLE", "DEADLINE_EXCEEDED")):
        return {"type": "unavailable.daemon", "message": f"{e.code}: {e.message}"}
    if e.refusal in (Refusal.INVALID_JOB, Refusal.INVALID_REQUEST):
        return {"type": "validation.job", "message": f"{e.code}: {e.message}"}
    return {"type": "internal.daemon", "message": f"{e.code}: {e.message}"}


def _address(config) -> str:
    return (config.getoption("kcoral") or config.getini("bench", "kcoral") or "").strip()


def client_for(config):
    """The run's `KCoralClient` (kept in ``config.stash``): for ``--kcoral``/``[bench] kcoral``,
    else for an embedded daemon with the local boards, started now under
    ``<rootdir>/.kcoral`` (and announced on stderr)."""
    # measured start-up cost: grpc and the generated protocol add ~0.2 s to every tirxh command;
    # only bench and profile reach this line
    from kcoral.client import KCoralClient
    stash = config.stash
    if "kcoral_client" in stash:
        return stash["kcoral_client"]
    addr = _address(config)
    if not addr:
        # the daemon's modules, only for the embedded mode (a configured daemon needs the
        # client alone): measured ~0.07 s more on top of the client
        from kcoral.server import Daemon  # start-up cost: grpc.aio server and store, embedded mode only
        d = Daemon({"boards": dict(EMBEDDED_BOARDS)}, state_dir=config.rootdir / ".kcoral",
                   port=0).start()
        stash["kcoral_daemon"] = d
        boards = ", ".join(f"{b['name']} ({b['type']} {b['target']}"
                           + (f", unavailable: {b['unavailable']}" if b["unavailable"] else "")
                           + ")" for b in d.scheduler.board_rows()) or "none"
        sys.stderr.write(f"tirxh bench: no [bench] kcoral configured: started an embedded KCoral "
                         f"daemon on {d.address} with boards: {boards}\n")
        addr = d.address
    c = KCoralClient(addr, token=os.environ.get("KCORAL_TOKEN"),
                     client_name=f"tirxh-{os.getpid()}")
    stash["kcoral_client"] = c
    stash["kcoral_address"] = addr
    return c


def close_clients(config) -> None:
    """Close the run's client and stop its embedded daemon (at unconfigure)."""
    c = config.stash.pop("kcoral_client", None)
    if c is not None:
        c.close()
    d = config.stash.pop("kcoral_daemon", None)
    if d is not None:
        d.stop()
