"""`run()`: execute a kernel on the CPU with concrete numpy inputs and return a `SimResult`.

    import tirxh_numsim
    res = tirxh_numsim.run(vadd, dict(a=a, b=b, out=np.empty_like(a), n=n), grid=(16,),
                           outputs=["out"])
    res.verdict, res.outputs["out"], res.diagnostics, res.stats

Accepted kernels: a `T.kernel` (traced with `consts`), a `CompiledKernel` (its IR is used; the
cubin is not needed) or a collected item (anything with ``.suite``, ``.case`` and optionally
``.consts``: the case supplies constants, grid and output names).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tirxh.api import Finding, Kernel, SourceRef, TensorMap, worst

from . import residency
from .events import Trace
from .machine import Deadlock
from .sem_async import check_tensormap
from .sim import Machine, SimLimit
from .values import Unsupported


@dataclass
class SimResult:
    """What a simulated launch produced.

    outputs: every pointer parameter's array after the run (copies; inputs are never modified);
    diagnostics: `Finding`s (out-of-bounds, misaligned, uninitialized shared reads, unwritten
    outputs, NaN origins, deadlocks, unsupported instructions); stats: lane-instructions,
    warp-instructions, wall time, per-binding counts, mode (batched or per-warp);
    verdict: ``clean``/``review``/``incomplete``/``error`` (findings' worst severity, and
    ``incomplete`` when something was not modeled); incomplete: the reasons; trace: the event
    trace when requested.
    """

    kernel: str
    outputs: dict
    diagnostics: list
    stats: dict
    verdict: str
    incomplete: list = field(default_factory=list)
    trace: "Trace | None" = None

    def summary(self) -> str:
        s = self.stats
        head = (f"{self.kernel}: {self.verdict}; {s.get('lane_instructions', 0)} lane-instructions "
                f"in {s.get('wall_s', 0):.3f} s ({s.get('mode')})")
        lines = [head] + [f"  {f.severity}: {f.kind}: {f.message}" + (f" at {f.where}"
                                                                      if f.where else "")
                          for f in self.diagnostics]
        lines += [f"  incomplete: {r}" for r in self.incomplete]
        return "\n".join(lines)


def _resolve(target, consts, grid, case, outputs):
    """(kernel IR, grid, consts, output names) from a kernel, compiled kernel or item."""
    suite = getattr(target, "suite", None)
    if suite is not None and hasattr(target, "case"):
        case = target.case if case is None else case
        kern = suite.kernel
        consts = dict(getattr(target, "consts", None) or suite.consts(case)) if consts is None \
            else consts
        grid = grid if grid is not None else suite.grid(case)
        outputs = list(suite.outputs) if outputs is None else outputs
        return kern.specialize(**consts), grid, consts, outputs
    if isinstance(target, Kernel):
        consts = target.resolve_consts(consts or {})
        if grid is None:
            vals = dict(consts)
            vals.update(case.params if case is not None else {})
            try:
                grid = target.grid_dims(vals)
            except TypeError as e:
                raise ValueError(f"kernel {target.name!r}: pass grid= to numsim.run ({e})") \
                    from None
        return target.specialize(**consts), grid, consts, outputs
    kir = getattr(target, "ir", None)
    if kir is not None and hasattr(kir, "body"):
        if grid is None:
            raise ValueError(f"numsim.run({target.name!r}): a CompiledKernel needs grid=")
        return kir, grid, dict(getattr(target, "consts", {}) or {}), outputs
    raise TypeError(f"numsim.run: expected a T.kernel, a CompiledKernel or an item with "
                    f".suite/.case; got {type(target).__name__}")


def run(target: Any, inputs: dict, *, consts: "dict | None" = None, grid=None, case=None,
        trace: bool = False, outputs: "list | None" = None, max_ctas: "int | None" = None,
        max_instructions: int = 50_000_000, per_warp: bool = False) -> SimResult:
    """Simulate one launch of `target` with `inputs` (parameter name -> array / number /
    `T.TensorMap`). `outputs` names pointer parameters whose elements must all be written by the
    kernel (taken from the suite for items).

    Unwritten outputs: instead of poisoning outputs (what a GPU run must do), numsim records
    every byte a kernel stores to global memory, which is exact and leaves in/out buffers (read,
    then written) with their input values.

    `per_warp`: run every warp alone and every CTA alone (no vectorization over warps; a traced
    run then records each warp's events until it blocks, the interleaving numsim's traces had
    before they were grouped). Same results and per-warp traces, several times slower: for
    comparing traces (`events.py`)."""
    kir, grid, consts, outputs = _resolve(target, consts, grid, case, outputs)
    t0 = time.perf_counter()
    # the compiled kernel's registers bound how many CTAs fit a GPU (residency)
    regs = getattr(getattr(target, "resources", None), "registers", None) or None
    m = Machine(kir, tuple(grid) if not isinstance(grid, int) else (grid,), trace=trace,
                max_instructions=max_instructions, max_ctas=max_ctas, regs=regs,
                per_warp=per_warp)
    arrays = {k: v for k, v in inputs.items() if not isinstance(v, TensorMap)}
    tmaps = {}
    for k, v in inputs.items():
        if isinstance(v, TensorMap):
            if v.source not in arrays:
                raise ValueError(f"kernel {kir.name!r}: tensor map {k!r} describes {v.source!r}, "
                                 "which is not among the inputs")
            d = v.describe(np.asarray(arrays[v.source]))
            tmaps[k] = d
    outputs = [o for o in (outputs or [])]
    for o in outputs:
        if o not in arrays:
            raise ValueError(f"kernel {kir.name!r}: output {o!r} is not among the inputs "
                             f"({', '.join(sorted(arrays))})")
    m.bind(arrays, tmaps)
    for name, d in tmaps.items():  # TMA addresses the source buffer through the map
        d["base"] = m.gmem.by_name[d["source"]].base
        for problem in check_tensormap(d):
            m.findings.append(Finding(
                "numsim.tensormap-invalid", f"tensor map {name!r} of {d['source']!r}: {problem} "
                "(cuTensorMapEncodeTiled refuses it)", "error",
                SourceRef(kir.loc.file, kir.loc.line), data={"tensormap": name}))
    incomplete = []
    try:
        m.launch()
    except Unsupported as e:
        incomplete.append(_where(m, e))
    except SimLimit as e:
        incomplete.append(str(e))
    except Deadlock as e:
        m.findings.append(_deadlock_finding(kir, e))
    m.flush_counts()
    m.findings += residency.check(m.residency, kir, regs, int(np.prod(m.grid)))
    outs = {b.name: b.array() for b in m.gmem.buffers}
    for o in outputs:
        left = m.gmem.by_name[o].unwritten_elements() if o in m.gmem.by_name else None
        if left is None:
            continue
        if m.max_ctas is None and left.any() and not incomplete:
            idx = [list(map(int, i)) for i in np.argwhere(left)[:5]]
            m.findings.append(Finding(
                "numsim.unwritten-output", f"output {o!r} of kernel {kir.name!r}: "
                f"{int(left.sum())} of {left.size} elements were never written (first at "
                f"{idx[0]})", "error", SourceRef(kir.loc.file, kir.loc.line), data={
                    "output": o, "unwritten": int(left.sum()), "first": idx}))
    verdict = worst(*[f.severity if f.severity in ("error", "review", "incomplete") else "review"
                      for f in m.findings])
    if incomplete:
        verdict = worst(verdict, "incomplete")
    stats = {"lane_instructions": m.lane_instructions, "warp_instructions": m.warp_instructions,
             "group_instructions": m.group_instructions, "splits": m.splits,
             "merges": m.merges,
             "wall_s": time.perf_counter() - t0, "ops": dict(m.op_counts), "mode": m.mode,
             "ctas": m.ctas_run, "grid": list(m.grid), "block": list(m.block),
             "loops": [{"loop": f"{info.kind} at {info.loc}", "warp_instructions": n}
                       for n, info in m.loop_counts()[:8]]}
    return SimResult(kir.name, outs, m.findings, stats, verdict, incomplete, m.trace)


def _deadlock_finding(kir, e: Deadlock) -> Finding:
    """`numsim.deadlock` at the first stuck warp's line, every warp's position in its data."""
    loc = e.where or kir.loc
    stuck = [p for p in e.positions if p["state"] != "finished"]
    return Finding("numsim.deadlock", str(e), "error", SourceRef(loc.file, loc.line),
                   warps=[f"cta {tuple(p['cta'])} warp {p['warp']}" for p in stuck][:16],
                   data={"kernel": kir.name, "positions": e.positions[:256],
                         "stuck_warps": len(stuck)})


def _where(m: Machine, e: Exception) -> str:
    """Name the instruction and its source line for an Unsupported raised mid-run."""
    instr = getattr(m, "current_instr", None)
    msg = str(e)
    if instr is not None:
        if instr.spelling not in msg:
            msg = f"{instr.spelling}: {msg}"
        if str(instr.loc) not in msg:
            msg = f"{instr.loc}: {msg}"
    return f"kernel {m.kir.name!r}: {msg}"
