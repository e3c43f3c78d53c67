"""``tirxh bench``: time a compiled item on a KCoral board (the built-in ``bench`` plugin).

`build_job` turns a compiled kernel and its suite case into a declarative KCoral job: one buffer
per pointer parameter (inputs uploaded as blobs from ``suite.make_inputs(case, seed)``; the
suite's ``outputs`` poisoned), scalars by value, ``T.TensorMap`` inputs described for the board
to encode, the grid from ``suite.grid(case)``, correctness runs on two fresh seeds (before and
after timing) against ``suite.expected``, tolerances from ``suite.tolerance_for``, and the
declared work for TFLOP/s, GB/s and the floor.

The daemon is ``--kcoral host:port`` or ``[bench] kcoral``; with neither, an embedded daemon with
the local boards is started once per run (and the run says so). A token comes from
``KCORAL_TOKEN``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

import numpy as np

from tirxh.core.pluginmanager import hookimpl

CORRECTNESS_SEEDS = (1, 2)  # run 1 before timing (its inputs are also timed), run 2 after


# -------------------------------------------------------------------------------------------------
# job construction (no daemon needed; tested on the CPU)
# -------------------------------------------------------------------------------------------------

def build_job(compiled, suite, case, seeds=CORRECTNESS_SEEDS, timing: "dict | None" = None,
              baselines=(), put=None) -> dict:
    """The job document for one item. `put(bytes) -> digest` registers a blob to upload
    (``KCoralClient.put_blob``); the module travels as the cubin, with the IR as JSON beside it
    (``module.ir``, for the sim board)."""
    from kcoral.blobs import array_bytes
    from tirxh.core.suite import TensorMap
    from tirxh.core.types import from_numpy
    if compiled.cubin is None:
        raise ValueError(f"{compiled.name}: no cubin to benchmark (compiled with assemble=False)")
    md = compiled.launch_metadata()
    put = put or (lambda data: __import__("hashlib").sha256(data).hexdigest())
    outputs = list(suite.outputs)
    inplace = set(getattr(suite, "inplace", ()))  # read, then overwritten: uploaded, not poisoned
    runs_inputs = [suite.make_inputs(case, s) for s in seeds]
    first = runs_inputs[0]
    buffers, args = [], []
    for p in md["params"]:
        name = p["name"]
        if name not in first:
            raise ValueError(f"{suite.name}[{case.name}]: inputs() did not provide parameter "
                             f"{name!r}")
        v = first[name]
        if p["kind"] == "ptr":
            a = np.asarray(v)
            buffers.append({"name": name, "dtype": from_numpy(a.dtype).name,
                            "shape": [int(x) for x in a.shape], "output": name in outputs,
                            "init": {"kind": "empty"} if name in outputs and name not in inplace
                            else {"kind": "blob", "blob": put(array_bytes(a))}})
            args.append({"buffer": name})
        elif p["kind"] == "scalar":
            if isinstance(v, np.ndarray) and v.size != 1:
                raise ValueError(f"{suite.name}[{case.name}]: scalar parameter {name!r} got an "
                                 f"array of shape {v.shape}")
            args.append({"scalar": v.item() if hasattr(v, "item") else v, "dtype": p["dtype"]})
        elif p["kind"] == "tensormap":
            if not isinstance(v, TensorMap):
                raise ValueError(f"{suite.name}[{case.name}]: tensormap parameter {name!r} needs "
                                 f"a T.TensorMap input, got {type(v).__name__}")
            args.append({"tensormap": v.describe(np.asarray(first[v.source]))})
        else:
            raise ValueError(f"parameter {name!r}: unknown kind {p['kind']!r}")
    for o in outputs:
        if not any(b["name"] == o for b in buffers):
            raise ValueError(f"{suite.name}: output {o!r} is not a pointer parameter")
    runs = []
    for s, inputs, when in zip(seeds, runs_inputs, ("before", "after")):
        exp = suite.expected(case, inputs) or {}
        run = {"seed": int(s), "when": when, "inputs": {}, "expected": {}}
        for b in buffers:
            if not b["output"] or b["name"] in inplace:
                run["inputs"][b["name"]] = put(array_bytes(np.asarray(inputs[b["name"]])))
            if b["output"] and b["name"] in exp:
                want = np.asarray(exp[b["name"]])
                from kcoral.job import dtype_of
                run["expected"][b["name"]] = put(array_bytes(
                    want.astype(dtype_of(b["dtype"])).reshape(b["shape"])))
        runs.append(run)
    checks = []
    for o in outputs:
        t = suite.tolerance_for(o)
        checks.append({"buffer": o, "rtol": float(t.rtol), "atol": float(t.atol),
                       "rms": t.rms})
    work = suite.work(case)
    grid = [int(g) for g in suite.grid(case)]
    bl = []
    for b in tuple(baselines) or tuple(getattr(suite, "baselines", ()) or ()):
        b = dict(b) if isinstance(b, dict) else {"name": str(b), "args": {}}
        # an arg naming a case parameter ("M": "M") takes that parameter's value
        b["args"] = {k: (case.params[v] if isinstance(v, str) and v in case.params else v)
                     for k, v in b.get("args", {}).items()}
        bl.append(b)
    return {"name": f"{suite.name}[{case.name}]", "target": compiled.target,
            "module": _module(compiled, put),
            "buffers": buffers,
            "launches": [{"entry": md["entry"], "grid": grid + [1] * (3 - len(grid)),
                          "block": list(md["block"]), "cluster": md["cluster"],
                          "dynamic_smem": int(md["dynamic_smem"]), "params": md["params"],
                          "args": args}],
            "checks": checks, "runs": runs, "baselines": bl,
            "timing": dict({"seed": int(seeds[0])}, **(timing or {})),
            "work": {k: (float(v) if v is not None else None) for k, v in work.items()}}


def _module(compiled, put) -> dict:
    """The cubin, and the IR as JSON (what KCoral's ``sim`` board runs through numsim)."""
    mod = {"format": "cubin", "blob": put(compiled.cubin)}
    try:
        mod["ir"] = put(compiled.ir_json().encode())
    except TypeError as e:  # a constant with no JSON form: GPU boards still run the cubin
        mod["ir_error"] = str(e)
    return mod


# -------------------------------------------------------------------------------------------------
# the result
# -------------------------------------------------------------------------------------------------

@dataclass
class BenchResult:
    """What ``tirxh_bench_item`` returns: the KCoral result plus a verdict and a summary line."""

    item: str
    state: str
    result: dict = field(default_factory=dict)
    daemon: str = ""
    job_id: str = ""

    @property
    def verdict(self) -> str:
        r = self.result
        if self.state != "done":
            err = (r.get("error") or {}).get("type", "")
            return "incomplete" if err.startswith(("unavailable", "interrupted", "timeout")) \
                else "error"
        t = r.get("timing") or {}
        if not t or "skipped" in t or not r.get("verified"):
            return "incomplete"
        if t.get("suspect"):
            return "review"
        return "clean" if t.get("converged") else "incomplete"

    @property
    def summary(self) -> str:
        r = self.result
        if self.state != "done":
            e = r.get("error") or {}
            return f"{self.item}: {self.state} {e.get('type', '')}: {e.get('message', '')}"
        t = r.get("timing") or {}
        if not t or "skipped" in t:
            return f"{self.item}: not timed ({t.get('skipped', 'timing disabled')})"
        c = t["candidate"]
        parts = [f"{self.item}: {c['median_ms'] * 1e3:.2f} us (IQR {c['iqr_ms'] * 1e3:.2f}, "
                 f"n={c['n']})"]
        if t.get("tflops"):
            parts.append(f"{t['tflops']:.1f} TFLOP/s")
        if t.get("gbps"):
            parts.append(f"{t['gbps']:.0f} GB/s")
        if t.get("floor_fraction") is not None:
            parts.append(f"{t['floor_fraction']:.0%} of floor")
        for name, b in t.get("baselines", {}).items():
            parts.append(f"{b['speedup']:.2f}x vs {name}")
        if not t.get("converged"):
            parts.append(f"noise {t.get('rel_noise', 0):.1%} > {t.get('rel_noise_target'):.0%}")
        if t.get("suspect"):
            parts.append("SUSPECT: below the physical floor")
        if not r.get("verified"):
            parts.append("unverified (no reference)")
        return ", ".join(parts) + f" [{r.get('board', '?')}]"

    def to_json(self) -> dict:
        return {"item": self.item, "state": self.state, "verdict": self.verdict,
                "summary": self.summary, "daemon": self.daemon, "job_id": self.job_id,
                "result": self.result}


# -------------------------------------------------------------------------------------------------
# the daemon connection
# -------------------------------------------------------------------------------------------------

def _address(config) -> str:
    return (config.getoption("kcoral") or config.getini("bench", "kcoral") or "").strip()


def client_for(config):
    """A `KCoralClient` for the configured daemon, or for an embedded one started now."""
    from kcoral.client import KCoralClient
    stash = config.stash
    if "kcoral_client" in stash:
        return stash["kcoral_client"]
    addr = _address(config)
    if not addr:
        from kcoral.server import Daemon
        state = config.rootdir / ".kcoral"
        d = Daemon({"boards": {"cuda": {}, "sim": {}}}, state_dir=state, port=0).start()
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


@hookimpl
def tirxh_addoption(parser):
    parser.addoption("--kcoral", default=None, metavar="HOST:PORT",
                     help="KCoral daemon for `tirxh bench` (default: [bench] kcoral, else an "
                          "embedded daemon with the local boards)")


@hookimpl
def tirxh_bench_item(item, compiled, config):
    from kcoral.client import KCoralError
    client = client_for(config)
    doc = build_job(compiled, item.suite, item.case, put=client.put_blob)
    timeout = float(config.getini("bench", "timeout_s") or 600.0)
    tty = sys.stderr.isatty()
    last = None
    try:
        for ev in client.submit(doc, timeout=timeout):
            last = ev
            if tty:
                pos = f" #{ev['queue_position']}" if ev["state"] == "queued" else ""
                sys.stderr.write(f"\r\x1b[K  {item.name}: {ev['state']}{pos} "
                                 f"{ev['message'][:60]}")
                sys.stderr.flush()
    except KCoralError as e:
        res = BenchResult(item.name, "failed", {"error": _refusal(e)},
                          config.stash.get("kcoral_address", ""))
        config.stash.setdefault("kcoral_results", []).append(res)
        return res
    finally:
        if tty:
            sys.stderr.write("\r\x1b[K")
    if last is None:
        res = BenchResult(item.name, "failed", {"error": {"type": "internal.stream",
                                                          "message": "no events"}})
    else:
        res = BenchResult(item.name, last["state"], last.get("result") or {},
                          config.stash.get("kcoral_address", ""), last["job_id"])
    config.stash.setdefault("kcoral_results", []).append(res)
    return res


@hookimpl
def tirxh_terminal_summary(reporter, exitstatus, config):
    """One line per benchmarked item: median and IQR, TFLOP/s or GB/s, fraction of the floor,
    ratio to each baseline (failures are also listed by the terminal reporter)."""
    results = config.stash.get("kcoral_results")
    if not results:
        return
    reporter.section(f"KCoral ({config.stash.get('kcoral_address', '?')})")
    for r in results:
        reporter.line(r.summary, {"clean": "", "review": "incomplete",
                                  "incomplete": "incomplete"}.get(r.verdict, "failed"))


def _refusal(e) -> dict:
    """A daemon's refusal as a typed error: no usable board here is ``unavailable.*`` (the
    item's verdict is incomplete: nothing could be timed), anything else is an error."""
    msg = e.message
    if e.code == "INVALID_ARGUMENT" and any(s in msg for s in (
            "unavailable", "no board for target", "do not time")):
        return {"type": "unavailable.board", "message": msg}
    if e.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
        return {"type": "unavailable.daemon", "message": f"{e.code}: {msg}"}
    return {"type": "validation.job" if e.code == "INVALID_ARGUMENT" else "internal.daemon",
            "message": f"{e.code}: {msg}"}


@hookimpl
def tirxh_unconfigure(config):
    c = config.stash.pop("kcoral_client", None)
    if c is not None:
        c.close()
    d = config.stash.pop("kcoral_daemon", None)
    if d is not None:
        d.stop()
