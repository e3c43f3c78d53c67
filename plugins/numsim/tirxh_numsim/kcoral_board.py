"""KCoral's ``sim`` board: correctness on the CPU through numsim, never a timing.

A plugin of KCoral, shipped by the numsim distribution and registered through the ``kcoral``
entry-point group (``sim = "tirxh_numsim.kcoral_board"``), so the daemon imports no numsim: a
daemon without this distribution has no sim board and says so when a job asks for one. It reaches
tirxh only through `tirxh.api`.

numsim (``tirxh_numsim.run``) simulates TIRx *IR*, not PTX or SASS. So a job for this board must
carry the kernel's IR beside its module: ``module.ir`` is the sha256 of the IR's JSON form (what
``CompiledKernel.ir_json()`` returns; ``tirxh bench`` attaches it). The board loads that blob with the worker's own instruction set -- every
instruction's binding is re-resolved from its spelling and its operands re-checked, so no client
code runs here -- and runs each correctness run's launches through numsim on the run's inputs;
`kcoral.measure` then compares the outputs with the expected arrays exactly as on a GPU board.

What the verdict speaks for: the IR. For a ``ptx`` module the board re-emits PTX from the IR and
refuses the job unless it is the module's text (so IR and module are the same program); a
``cubin`` cannot be checked that cheaply, and the result says ``module_match: "not checked"``
(``build_job`` takes both from one `CompiledKernel`). Timing is always ``skipped``.

Failures are typed: no ``module.ir`` -> refused at submission (field ``module.ir``, from the
board's ``requires`` property); a malformed IR -> ``validation.module.ir``; a launch whose block,
cluster or arguments disagree with the IR -> ``launch.*``; something numsim does not model
(an instruction without semantics, aliased buffers, a tensor map over part of a buffer) ->
``unavailable.numsim`` (the bench verdict is ``incomplete``); numsim's error findings
(out-of-bounds access, deadlock, misalignment) -> ``runtime.numsim`` with the findings attached.
"""

from __future__ import annotations

from importlib import metadata

import numpy as np

from kcoral.boards import BoardSpec, Device
from kcoral.dtypes import dtype_of
from kcoral.errors import JobFailure
from kcoral.plugins import hookimpl
from tirxh.api import (
    CompileError, IRJSONError, TensorMap, default_isa, default_targets, emit_ptx, ir_loads,
)

from . import __version__
from .api import run as numsim_run

TIMING_NOTE = "the sim board never times"
REQUIRES = ["module.ir"]  # job fields this board cannot run without (checked at submission)
# Jobs bigger than this are refused at submission as unavailable here (a GPU board, if any, takes
# them): numsim runs ~1e8 lane-instructions/s batched and ~4e8 FLOP/s through wgmma (zoo
# gemm_wgmma m256n256k256: 0.08 s on 2 cores, docs/PERFORMANCE.md; 1.2 s before issue 19), so
# these keep one correctness run to seconds on a laptop.
MAX_BUFFER_BYTES = 64 << 20
MAX_WORK_FLOPS = 1e9


class _IRKernel:
    """What `tirxh_numsim.run` accepts as a compiled kernel: the IR, its name, its constants."""

    def __init__(self, kir):
        self.ir, self.name, self.consts = kir, kir.name, dict(kir.consts)


class SimDevice(Device):
    """Host arrays + numsim launches of the job's IR; `can_time` is False."""

    kind = "sim"
    can_time = False
    runs_ir = True  # measure.Session hands it the ``module.ir`` blob (`load_ir`)
    timing_note = TIMING_NOTE

    def __init__(self, spec: BoardSpec):
        self.spec = spec
        self.isa = default_isa()
        self.target = default_targets().get(spec.target)
        self.buffers: dict = {}
        self.kir = None
        self.fmt = ""
        self.module = b""
        self.notes: dict = {}

    def info(self):
        try:
            version = metadata.version("tirxh-numsim")
        except metadata.PackageNotFoundError:  # run from a source tree without an install
            version = __version__
        return {"name": "numsim (CPU)", "kind": "sim", "driver": "none",
                "peak_flops_per_s": 0, "peak_bytes_per_s": 0,
                "versions": {"tirxh-numsim": version}}

    def begin_job(self, job_doc: dict) -> None:
        self.kir, self.notes = None, {}

    # --- module -------------------------------------------------------------------------------
    def load(self, module, fmt, entries):
        if fmt not in ("cubin", "ptx"):
            raise JobFailure("compile.format", f"the sim board runs cubin/ptx jobs that carry "
                             f"module.ir, not {fmt!r} modules")
        self.fmt, self.module, self.entries = fmt, module, list(entries)

    def load_ir(self, data: "bytes | None", digest: str = "") -> None:
        """Load the job's IR blob (re-resolved against this worker's instruction set)."""
        if not data:
            raise JobFailure("validation.module.ir", "module.ir: the sim board runs the kernel's "
                             "IR; this job's module carries none (CompiledKernel.ir_json())")
        try:
            kir = ir_loads(data, self.isa)
        except IRJSONError as e:
            raise JobFailure("validation.module.ir", f"module.ir: {e}") from None
        if any(e != kir.name for e in self.entries):
            raise JobFailure("validation.module.ir", f"module.ir holds kernel {kir.name!r}; the "
                             f"launches name {self.entries}")
        try:  # the target's legality rules, as for a build (and the PTX for the check below)
            ptx = {li: emit_ptx(kir, self.target, line_info=li) for li in (True, False)}
        except CompileError as e:
            raise JobFailure("compile.target", f"module.ir: {e}") from None
        match = "not checked (cubin)"
        if self.fmt == "ptx":
            text = self.module.decode(errors="replace")
            if not any(_body(p) == _body(text) for p in ptx.values()):
                raise JobFailure("validation.module.ir", "module.ir does not produce the "
                                 "module's PTX: the IR and the module are different programs")
            match = "ptx identical"
        self.kir = kir
        self.notes = {"simulated": "ir", "ir": digest, "module_match": match, "launches": 0,
                      "lane_instructions": 0, "findings": []}

    # --- buffers ------------------------------------------------------------------------------
    def alloc(self, name, nbytes):
        self.buffers[name] = np.zeros(nbytes, np.uint8)

    def write(self, name, array):
        raw = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        self.buffers[name][:raw.size] = raw

    def read(self, name, dtype, shape):
        return self.buffers[name].view(dtype).reshape(shape).copy()

    def poison(self, name, itemsize, is_float):
        self.buffers[name][:] = 0xFF

    def buffer_handle(self, name):
        return self.buffers[name]

    def free_all(self):
        self.buffers.clear()

    def job_notes(self) -> dict:
        """What was simulated (added to the result as ``sim``)."""
        return dict(self.notes)

    # --- launches -----------------------------------------------------------------------------
    def launcher(self, launch, doc):
        if self.kir is None:  # pragma: no cover - measure calls load_ir first
            raise JobFailure("validation.module.ir", "module.ir was not loaded")
        index = doc["launches"].index(launch)
        field = f"launches[{index}]"
        kir = self.kir
        if tuple(launch["block"]) != tuple(kir.block):
            raise JobFailure("launch.block", f"{field}.block {launch['block']} differs from the "
                             f"kernel's block {list(kir.block)} (module.ir)")
        if _cluster(launch.get("cluster")) != _cluster(kir.cluster):  # numsim runs kir.cluster
            raise JobFailure("launch.cluster", f"{field}.cluster {launch.get('cluster')} differs "
                             f"from the kernel's {list(kir.cluster) if kir.cluster else None}")
        if launch.get("dynamic_smem", 0) < kir.dynamic_smem:
            raise JobFailure("launch.dynamic_smem", f"{field}.dynamic_smem "
                             f"{launch.get('dynamic_smem', 0)} is less than the "
                             f"{kir.dynamic_smem} bytes the kernel uses")
        args = launch["args"]
        if len(args) != len(kir.params):
            raise JobFailure("launch.args", f"{field}.args: {len(args)} arguments for kernel "
                             f"{kir.name!r}, which takes {len(kir.params)} "
                             f"({', '.join(p.name for p in kir.params)})")
        bufs = {b["name"]: b for b in doc["buffers"]}
        seen: dict = {}
        for j, (a, p) in enumerate(zip(args, kir.params)):
            want = {"ptr": "buffer", "scalar": "scalar", "tensormap": "tensormap"}[p.kind]
            if want not in a:
                raise JobFailure("launch.args", f"{field}.args[{j}]: parameter {p.name!r} is a "
                                 f"{p.kind}; expected a {want!r} argument, got {sorted(a)}")
            if want == "buffer":
                if a["buffer"] in seen:
                    raise JobFailure("unavailable.numsim", f"{field}.args[{j}]: buffer "
                                     f"{a['buffer']!r} is also argument {seen[a['buffer']]}; "
                                     f"numsim does not model aliased parameters")
                seen[a["buffer"]] = j
        grid = tuple(launch["grid"])

        def run():
            inputs = self._inputs(kir, args, bufs, field)
            try:
                res = numsim_run(_IRKernel(kir), inputs, grid=grid)
            except ValueError as e:  # numsim refuses the bound arguments (names the parameter)
                raise JobFailure("launch.args", f"{field}: numsim: {e}") from None
            self.notes["launches"] += 1
            self.notes["lane_instructions"] += int(res.stats.get("lane_instructions", 0))
            found = [{"kind": f.kind, "severity": f.severity, "message": f.message,
                      "where": str(f.where) if f.where else ""} for f in res.diagnostics]
            if len(self.notes["findings"]) < 20:
                self.notes["findings"].extend(found[:20 - len(self.notes["findings"])])
            if res.incomplete:
                raise JobFailure("unavailable.numsim", f"{field}: numsim does not model this "
                                 f"kernel: {'; '.join(res.incomplete)}")
            errors = [f for f in found if f["severity"] == "error"]
            if errors:
                raise JobFailure("runtime.numsim", f"{field}: " + "; ".join(
                    f"{f['kind']}: {f['message']}" + (f" at {f['where']}" if f["where"] else "")
                    for f in errors[:5]), data={"findings": errors[:20]})
            for a, p in zip(args, kir.params):
                if p.kind == "ptr":
                    self.write(a["buffer"], res.outputs[p.name])
        return run

    def _inputs(self, kir, args, bufs, field) -> dict:
        # numsim names a tensor map's source by parameter: the one the buffer is bound to
        param_of = {a["buffer"]: p.name for a, p in zip(args, kir.params) if p.kind == "ptr"}
        out = {}
        for j, (a, p) in enumerate(zip(args, kir.params)):
            if p.kind == "ptr":
                b = bufs[a["buffer"]]
                out[p.name] = self.read(b["name"], dtype_of(b["dtype"]), tuple(b["shape"]))
            elif p.kind == "scalar":
                out[p.name] = np.asarray(a["scalar"]).astype(p.dtype.numpy)
            else:
                out[p.name] = self._tensormap(a["tensormap"], bufs, param_of,
                                              f"{field}.args[{j}].tensormap")
        return out

    def _tensormap(self, d, bufs, param_of, field):
        try:
            src = d["source"]
            tm = TensorMap(src, tuple(reversed(d["box"])), swizzle=int(d.get("swizzle", 0)),
                           oob_fill=d.get("oob_fill", "zero"),
                           elem_strides=tuple(reversed(d["elem_strides"]))
                           if d.get("elem_strides") else None,
                           l2_promotion=int(d.get("l2_promotion", 0)))
        except (KeyError, TypeError, ValueError) as e:
            raise JobFailure("launch.args", f"{field}: malformed ({type(e).__name__}: {e})") \
                from None
        if src not in bufs:
            raise JobFailure("launch.args", f"{field}.source: unknown buffer {src!r}")
        if src not in param_of:
            raise JobFailure("unavailable.numsim", f"{field}.source: buffer {src!r} must also be "
                             f"passed as a pointer argument (numsim addresses the map's memory "
                             f"through that parameter)")
        # numsim encodes a map over a whole source array; the job's description must be exactly
        # that (dims and strides of the buffer), or it is not modelled here
        b = bufs[src]
        whole = tm.describe(np.zeros(tuple(b["shape"]), dtype_of(b["dtype"])))
        diff = [k for k in whole if k != "source" and k in d and whole[k] != d[k]]
        if diff:
            raise JobFailure("unavailable.numsim", f"{field}: {', '.join(diff)} differ from a "
                             f"map over the whole buffer {src!r}; numsim models whole-buffer "
                             f"tensor maps only")
        return TensorMap(param_of[src], tm.box, tm.swizzle, tm.oob_fill, tm.elem_strides,
                         tm.l2_promotion)

    def sync(self):
        pass

    def timed_batch(self, fns, l2_flush, gate=False):  # pragma: no cover - can_time is False
        raise JobFailure("unavailable.timing", TIMING_NOTE)


def _cluster(c) -> "tuple | None":
    """A cluster shape, with no cluster and a 1x1x1 cluster the same."""
    return None if not c or tuple(c) == (1, 1, 1) else tuple(c)


def _body(ptx: str) -> str:
    """PTX from the ``.version`` line on (the comment header names the tirxh version)."""
    i = ptx.find("\n.version")
    return ptx[i:] if i >= 0 else ptx


class SimBoardType:
    name = "sim"

    def discover(self, config: dict) -> list:
        if not config.get("enabled", True):
            return []
        return [BoardSpec(name=f"sim{i}", type="sim", target=t,
                          tags=["sim", "cpu"],
                          properties={"device": "numsim on the CPU", "requires": list(REQUIRES),
                                      "timing": TIMING_NOTE,
                                      "max_buffer_bytes": int(config.get(
                                          "max_buffer_bytes", MAX_BUFFER_BYTES)),
                                      "max_work_flops": float(config.get(
                                          "max_work_flops", MAX_WORK_FLOPS))},
                          timing=False)
                for i, t in enumerate(config.get("targets", ["sm_90a"]))]

    def open_device(self, spec):
        return SimDevice(spec)


@hookimpl
def kcoral_register_board_types(registry):
    registry.add(SimBoardType())
