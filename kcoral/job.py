"""The declarative job: what a client asks a board to do. No client Python runs on the server.

A job is plain JSON (the same document travels in the gRPC request as ``job_json``, is stored in
SQLite, and is the ``JOB.json`` that ``python -m kcoral.runjob`` and the tools execute)::

    {
      "name": "vadd[n4096]", "target": "sm_90a", "tags": [],
      "module": {"format": "cubin" | "ptx" | "fake", "blob": "<sha256>",
                 "ir": "<sha256>"},                              # optional: the IR (below)
      "buffers": [
        {"name": "a", "dtype": "f32", "shape": [4096],
         "init": {"kind": "normal", "mean": 0, "std": 1}},      # normal | uniform | integers |
        {"name": "out", "dtype": "f32", "shape": [4096],          #   zeros | blob | empty
         "init": {"kind": "empty"}, "output": true}],
      "launches": [{"entry": "vadd", "grid": [16,1,1], "block": [256,1,1], "cluster": null,
                    "dynamic_smem": 0,
                    "args": [{"buffer": "a"}, {"scalar": 4096, "dtype": "u32"},
                             {"tensormap": {...TensorMap.describe()...}}]}],
      "checks": [{"buffer": "out", "rtol": 1e-6, "atol": 0, "rms": null}],
      "runs": [{"seed": 1, "when": "before", "inputs": {"a": "<sha>"},
                "expected": {"out": "<sha>"}},
               {"seed": 2, "when": "after", ...}],
      "timing": {"enabled": true, "warmup": 3, "min_iters": 10, "max_iters": 1000,
                 "budget_s": 2.0, "rel_noise": 0.01, "l2_flush": true, "seed": 0},
      "baselines": [{"name": "torch.matmul", "args": {"a": "A", "b": "B", "out": "C"}}],
      "tools": [{"name": "ncu", "options": {}}],
      "work": {"flops": 8192, "bytes": 49152},
      "budgets": {"queue_s": 600, "exec_s": 60},
      "fake": {}                                                  # test-only board directives
    }

``module.ir`` (optional) is the digest of the kernel's IR in its JSON form
(`tirxh.core.irjson`, ``CompiledKernel.ir_json()``): plain data, re-validated against the
server's instruction bindings. GPU boards ignore it; the ``sim`` board runs it through numsim and
refuses a job without it (field ``module.ir``). ``tirxh bench`` always attaches it; when the IR
cannot be serialized, ``module.ir_error`` says why instead.

``runs`` are the correctness runs: each gets fresh inputs (the generators reseeded with its seed,
or uploaded arrays for that seed) and compares the checked buffers with ``expected`` (uploaded
arrays) or with a server-side baseline's output (``checks[i].baseline``). A run with no expected
values and no baseline reference is a smoke run (the kernel must not fault).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np

MAX_BUFFER_BYTES = 1 << 36       # 64 GiB: beyond any board; the board narrows it further
INIT_KINDS = ("normal", "uniform", "integers", "zeros", "blob", "empty")
FORMATS = ("cubin", "ptx", "fake")


class JobError(ValueError):
    """A job failed validation; `problems` lists every ``(field, message)`` found."""

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__("; ".join(f"{f}: {m}" for f, m in self.problems))

    @property
    def field(self) -> str:
        return self.problems[0][0] if self.problems else ""


def dtype_of(name: str) -> np.dtype:
    """numpy dtype for a PTX type name (bf16/fp8 through ml_dtypes)."""
    from tirxh.api import numpy_dtype
    return numpy_dtype(name)


@dataclass
class Job:
    """A validated job document with helpers; `doc` is the JSON form and the source of truth."""

    doc: dict = field(default_factory=dict)
    blob_root: "str | None" = None  # where the job's blobs live (set by the worker for tools)

    # --- construction -------------------------------------------------------------------------
    @classmethod
    def from_json(cls, text_or_doc) -> "Job":
        doc = json.loads(text_or_doc) if isinstance(text_or_doc, (str, bytes)) else text_or_doc
        if not isinstance(doc, dict):
            raise JobError([("job", f"expected a JSON object, got {type(doc).__name__}")])
        job = cls(_with_defaults(doc))
        job.validate()
        return job

    def to_json(self) -> str:
        return json.dumps(self.doc, sort_keys=True)

    def write_json(self, path) -> None:
        """Write the JOB.json that ``python -m kcoral.runjob`` runs (blobs stay as digests;
        ``runjob --blobs DIR`` resolves them)."""
        import pathlib
        doc = dict(self.doc)
        if self.blob_root:
            doc["_blob_root"] = str(self.blob_root)
        pathlib.Path(path).write_text(json.dumps(doc, indent=1, sort_keys=True))

    # --- accessors ----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.doc.get("name") or self.doc["launches"][0]["entry"]

    @property
    def target(self) -> str:
        return self.doc["target"]

    def buffer(self, name: str) -> dict:
        for b in self.doc["buffers"]:
            if b["name"] == name:
                return b
        raise KeyError(name)

    def blobs(self) -> set:
        """Every blob digest the job refers to (module, inputs, expected arrays)."""
        out = {self.doc["module"]["blob"]}
        if self.doc["module"].get("ir"):
            out.add(self.doc["module"]["ir"])
        for b in self.doc["buffers"]:
            if b["init"]["kind"] == "blob":
                out.add(b["init"]["blob"])
        for r in self.doc["runs"]:
            out.update(r.get("inputs", {}).values())
            out.update(r.get("expected", {}).values())
        return out

    def tool_options(self, name: str) -> dict:
        for t in self.doc["tools"]:
            if t["name"] == name:
                return dict(t.get("options", {}))
        return {}

    # --- validation ---------------------------------------------------------------------------
    def validate(self, limits: "dict | None" = None) -> None:
        """Raise `JobError` listing every problem, each naming its field (``launches[0].grid``).

        `limits` (from the board: ``max_grid``, ``max_threads_per_block``, ``max_smem_per_block``,
        ``max_cluster_size``, ``memory_bytes``) narrows the checks to one board.
        """
        p = []
        d = self.doc
        lim = limits or {}
        if not isinstance(d.get("target"), str) or not d.get("target"):
            p.append(("target", "missing (e.g. 'sm_90a')"))
        mod = d.get("module")
        if not isinstance(mod, dict):
            p.append(("module", "missing"))
        else:
            if mod.get("format") not in FORMATS:
                p.append(("module.format", f"{mod.get('format')!r} is not one of {FORMATS}"))
            if not _is_digest(mod.get("blob")):
                p.append(("module.blob", f"{mod.get('blob')!r} is not a sha256 hex digest"))
            if mod.get("ir") is not None and not _is_digest(mod.get("ir")):
                p.append(("module.ir", f"{mod.get('ir')!r} is not a sha256 hex digest (of the "
                          f"IR JSON blob)"))
            if mod.get("ir") is not None and mod.get("format") == "fake":
                p.append(("module.ir", "a 'fake' module has no IR"))
        names = set()
        total = 0
        for i, b in enumerate(d.get("buffers", [])):
            f = f"buffers[{i}]"
            nm = b.get("name")
            if not isinstance(nm, str) or not nm:
                p.append((f"{f}.name", "missing"))
                continue
            if nm in names:
                p.append((f"{f}.name", f"duplicate buffer name {nm!r}"))
            names.add(nm)
            try:
                dt = dtype_of(b.get("dtype", ""))
            except TypeError as e:
                p.append((f"{f}.dtype", str(e)))
                continue
            shape = b.get("shape")
            if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0
                                                      for s in shape):
                p.append((f"{f}.shape", f"expected a list of non-negative ints, got {shape!r}"))
                continue
            nbytes = int(math.prod(shape)) * dt.itemsize
            total += nbytes
            if nbytes > lim.get("memory_bytes", MAX_BUFFER_BYTES):
                p.append((f"{f}.shape", f"{nbytes} bytes exceeds the board's memory "
                          f"({lim.get('memory_bytes', MAX_BUFFER_BYTES)} bytes)"))
            init = b.get("init", {})
            kind = init.get("kind")
            if kind not in INIT_KINDS:
                p.append((f"{f}.init.kind", f"{kind!r} is not one of {INIT_KINDS}"))
            elif kind == "blob" and not _is_digest(init.get("blob")):
                p.append((f"{f}.init.blob", f"{init.get('blob')!r} is not a sha256 digest"))
        if total > lim.get("memory_bytes", MAX_BUFFER_BYTES):
            p.append(("buffers", f"{total} bytes in all exceeds the board's memory"))
        launches = d.get("launches")
        if not launches:
            p.append(("launches", "at least one launch is required"))
        for i, ln in enumerate(launches or []):
            f = f"launches[{i}]"
            if not isinstance(ln.get("entry"), str) or not ln.get("entry"):
                p.append((f"{f}.entry", "missing kernel entry name"))
            for key, maxkey, default in (("grid", "max_grid", (2**31 - 1, 65535, 65535)),
                                         ("block", "max_block", (1024, 1024, 64))):
                v = ln.get(key)
                if not _dim3(v):
                    p.append((f"{f}.{key}", f"expected 3 positive ints, got {v!r}"))
                    continue
                mx = lim.get(maxkey, default)
                if any(a > m for a, m in zip(v, mx)):
                    p.append((f"{f}.{key}", f"{v} exceeds the board's limit {list(mx)}"))
            blk = ln.get("block")
            if _dim3(blk) and math.prod(blk) > lim.get("max_threads_per_block", 1024):
                p.append((f"{f}.block", f"{math.prod(blk)} threads exceeds "
                          f"{lim.get('max_threads_per_block', 1024)}"))
            cl = ln.get("cluster")
            if cl is not None:
                if not _dim3(cl):
                    p.append((f"{f}.cluster", f"expected 3 positive ints or null, got {cl!r}"))
                elif math.prod(cl) > lim.get("max_cluster_size", 16):
                    p.append((f"{f}.cluster", f"{math.prod(cl)} CTAs exceeds "
                              f"{lim.get('max_cluster_size', 16)}"))
                elif _dim3(ln.get("grid")) and any(g % c for g, c in zip(ln["grid"], cl)):
                    p.append((f"{f}.cluster", f"grid {ln['grid']} is not a multiple of {cl}"))
            sm = ln.get("dynamic_smem", 0)
            if not isinstance(sm, int) or sm < 0:
                p.append((f"{f}.dynamic_smem", f"expected a non-negative int, got {sm!r}"))
            elif sm > lim.get("max_smem_per_block", 227 * 1024):
                p.append((f"{f}.dynamic_smem", f"{sm} bytes exceeds the board's "
                          f"{lim.get('max_smem_per_block', 227 * 1024)}"))
            for j, a in enumerate(ln.get("args", [])):
                fa = f"{f}.args[{j}]"
                if "buffer" in a:
                    if a["buffer"] not in names:
                        p.append((fa, f"unknown buffer {a['buffer']!r}"))
                elif "scalar" in a:
                    try:
                        dtype_of(a.get("dtype", ""))
                    except TypeError as e:
                        p.append((f"{fa}.dtype", str(e)))
                elif "tensormap" in a:
                    tm = a["tensormap"]
                    if tm.get("source") not in names:
                        p.append((f"{fa}.tensormap.source",
                                  f"unknown buffer {tm.get('source')!r}"))
                    for k in ("dims", "strides", "box"):
                        if not isinstance(tm.get(k), list):
                            p.append((f"{fa}.tensormap.{k}", "missing"))
                else:
                    p.append((fa, "expected one of 'buffer', 'scalar', 'tensormap'"))
        for i, c in enumerate(d.get("checks", [])):
            if c.get("buffer") not in names:
                p.append((f"checks[{i}].buffer", f"unknown buffer {c.get('buffer')!r}"))
            for k in ("rtol", "atol"):
                if not isinstance(c.get(k, 0.0), (int, float)) or c.get(k, 0.0) < 0:
                    p.append((f"checks[{i}].{k}", f"expected a non-negative number, "
                              f"got {c.get(k)!r}"))
        for i, r in enumerate(d.get("runs", [])):
            if r.get("when") not in ("before", "after"):
                p.append((f"runs[{i}].when", f"{r.get('when')!r} is not 'before' or 'after'"))
            for k in ("inputs", "expected"):
                for bn, dg in r.get(k, {}).items():
                    if bn not in names:
                        p.append((f"runs[{i}].{k}.{bn}", f"unknown buffer {bn!r}"))
                    if not _is_digest(dg):
                        p.append((f"runs[{i}].{k}.{bn}", f"{dg!r} is not a sha256 digest"))
        t = d.get("timing", {})
        for k in ("warmup", "min_iters", "max_iters"):
            if not isinstance(t.get(k), int) or t.get(k) < 0:
                p.append((f"timing.{k}", f"expected a non-negative int, got {t.get(k)!r}"))
        if not isinstance(t.get("budget_s"), (int, float)) or not 0 < t["budget_s"] <= 600:
            p.append(("timing.budget_s", f"expected 0 < budget_s <= 600, got "
                      f"{t.get('budget_s')!r}"))
        bud = d.get("budgets", {})
        for k in ("queue_s", "exec_s"):
            if not isinstance(bud.get(k), (int, float)) or bud.get(k) <= 0:
                p.append((f"budgets.{k}", f"expected a positive number, got {bud.get(k)!r}"))
        for i, b in enumerate(d.get("baselines", [])):
            if not isinstance(b.get("name"), str):
                p.append((f"baselines[{i}].name", "missing"))
        for i, tl in enumerate(d.get("tools", [])):
            if not isinstance(tl.get("name"), str):
                p.append((f"tools[{i}].name", "missing"))
        if p:
            raise JobError(p)


def check_module(fmt: str, data: bytes, entries) -> None:
    """Cheap checks of a module's bytes before the job is accepted (the board's loader has the
    last word): a cubin is an ELF image, PTX declares ``.version``/``.target``, and every launch
    entry is named in it. Raises `JobError` on field ``module.blob``."""
    p = []
    if fmt == "cubin":
        if data[:4] != b"\x7fELF":
            p.append(("module.blob", f"not a cubin: expected an ELF image, the blob starts "
                      f"with {data[:8]!r}"))
        missing = [e for e in entries if e.encode() + b"\0" not in data]
        if missing and not p:
            p.append(("module.blob", f"the cubin has no kernel named {missing}"))
    elif fmt == "ptx":
        try:
            text = data.decode()
        except UnicodeDecodeError as e:
            raise JobError([("module.blob", f"PTX is not text: {e}")]) from None
        for d in (".version", ".target"):
            if d not in text:
                p.append(("module.blob", f"malformed PTX: no {d} directive"))
        import re
        have = set(re.findall(r"\.entry\s+([A-Za-z_$][\w$]*)", text))
        missing = [e for e in entries if e not in have]
        if missing:
            p.append(("module.blob", f"the PTX has no .entry {missing} (it has "
                      f"{sorted(have)})"))
    if p:
        raise JobError(p)


def _with_defaults(doc: dict) -> dict:
    d = json.loads(json.dumps(doc))  # deep copy, and proof that it is JSON
    d.setdefault("name", "")
    d.setdefault("tags", [])
    d.setdefault("buffers", [])
    d.setdefault("launches", [])
    d.setdefault("checks", [])
    d.setdefault("runs", [])
    d.setdefault("baselines", [])
    d.setdefault("tools", [])
    d.setdefault("work", {})
    d.setdefault("fake", {})
    for b in d["buffers"]:
        b.setdefault("output", False)
        b.setdefault("init", {"kind": "empty" if b["output"] else "zeros"})
    for ln in d["launches"]:
        ln.setdefault("cluster", None)
        ln.setdefault("dynamic_smem", 0)
        ln.setdefault("args", [])
        if isinstance(ln.get("grid"), list) and len(ln["grid"]) < 3:
            ln["grid"] = ln["grid"] + [1] * (3 - len(ln["grid"]))
        if isinstance(ln.get("block"), list) and len(ln["block"]) < 3:
            ln["block"] = ln["block"] + [1] * (3 - len(ln["block"]))
    t = d.setdefault("timing", {})
    t.setdefault("enabled", True)
    t.setdefault("warmup", 3)
    t.setdefault("min_iters", 10)
    t.setdefault("max_iters", 2000)
    t.setdefault("budget_s", 2.0)
    t.setdefault("rel_noise", 0.01)
    t.setdefault("l2_flush", True)
    t.setdefault("seed", 0)
    bud = d.setdefault("budgets", {})
    bud.setdefault("queue_s", 3600.0)
    bud.setdefault("exec_s", 120.0)
    return d


def _is_digest(x) -> bool:
    return isinstance(x, str) and len(x) == 64 and all(c in "0123456789abcdef" for c in x)


def _dim3(v) -> bool:
    return (isinstance(v, list) and len(v) == 3
            and all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in v))
