"""The compile pipeline: kernel -> IR -> PTX -> cubin -> SASS, in named stages.

``trace`` (the kernel body runs under the tracer, cached per constants) -> ``transform`` (IR
passes plugins registered through ``tirxh_register_transforms``: the defaults, then those the
build asks for) -> ``legalize`` (limits and instructions against the target,
`tirxh.core.legalize`) -> ``emit`` (PTX text) -> ``assemble`` (nvJitLink or ptxas; cached by
`tirxh.core.cache.artifact_key`) -> ``disassemble`` (nvdisasm, on first use of
``CompiledKernel.sass``; cached beside the cubin).

There is one copy of this sequence, `Pipeline`: ``tirxh check/build/bench/show``, scripts
(``kernel.compile()``, ``kernel.ptx()``) and plugins (iket's profiling build is this pipeline
plus iket's transform) all go through it. The result, `CompiledKernel`, carries everything a
launcher needs (parameter ABI, block/cluster/dynamic shared memory; the grid is per case) so
KCoral and numsim can run it without the Python source.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from .. import __version__
from . import ir
from .cache import ArtifactCache, artifact_key
from .emit_ptx import emit_ptx
from .errors import CompileError
from .irjson import dumps as ir_dumps
from .legalize import legalize
from .registry import default_isa, default_targets, default_transforms
from .toolchain import (Resources, cubin_to_sass, parse_resources, ptx_to_cubin, text_bytes,
                        toolchain_versions)
from .transforms import TransformContext, TransformRegistry, resolve

STAGES = ("trace", "transform", "legalize", "emit", "assemble", "disassemble")

_DEFAULT_CACHE: "ArtifactCache | None" = None


def default_cache() -> ArtifactCache:
    """The process's cache (``TIRXH_CACHE_DIR``, default ``~/.cache/tirxh``) for builds outside
    a ``tirxh`` run; a run uses ``config.cache``."""
    global _DEFAULT_CACHE
    if _DEFAULT_CACHE is None:
        _DEFAULT_CACHE = ArtifactCache()
    return _DEFAULT_CACHE


@dataclass
class CompiledKernel:
    """A kernel built for one target and one set of constants.

    key: the artifact key of the cubin (empty when not assembled); transforms: what each IR
    transform handed back (``{"iket": TraceLayout}``), by name, for every transform applied;
    timings: seconds per stage (``trace_s``, ``transform_s``, ``emit_s`` (legalize + emit),
    ``assemble_s``, and ``disassemble_s`` once the SASS was asked for).
    """

    name: str
    target: str
    consts: dict
    ir: ir.KernelIR
    ptx: str
    cubin: "bytes | None"
    log: str = ""
    resources: Resources = field(default_factory=Resources)
    timings: dict = field(default_factory=dict)
    cache_hit: bool = False
    key: str = ""
    transforms: dict = field(default_factory=dict)
    _sass: "str | None" = None
    _cache: "ArtifactCache | None" = field(default=None, repr=False, compare=False)

    @property
    def sass(self) -> str:
        """SASS disassembly (the ``disassemble`` stage), computed on first use and cached with
        the cubin."""
        if self._sass is None:
            if self.cubin is None:
                raise CompileError("no cubin to disassemble (built with assemble=False)")
            t0 = time.perf_counter()
            cache = self._cache if self.key else None
            text = cache.get_sass(self.key) if cache is not None else None
            if text is None:
                text = cubin_to_sass(self.cubin)
                if cache is not None:
                    cache.put_sass(self.key, text)
            self._sass = text
            self.timings["disassemble_s"] = time.perf_counter() - t0
        return self._sass

    def ir_json(self) -> str:
        """The traced IR as JSON (`tirxh.core.irjson`): what KCoral's ``sim`` board runs."""
        return ir_dumps(self.ir)

    @property
    def programmatic_dependent(self) -> bool:
        """Whether the kernel is launched as a programmatic dependent launch (PDL: the launch
        attribute programmatic stream serialization): exactly when it executes
        ``griddepcontrol.wait``. Without the attribute that instruction does nothing, so a
        kernel that waits on its prerequisite grid is written for PDL; with it, the kernel may
        start (its CTAs run their prologue) while the previous kernel in the stream finishes,
        and everything after the wait sees that kernel's memory."""
        return any(i.spelling == "griddepcontrol.wait" for i in self.ir.instructions())

    def launch_metadata(self) -> dict:
        """The host-side ABI and launch facts (JSON-serializable; grid is per case)."""
        k = self.ir
        return {
            "entry": k.name,
            "target": self.target,
            "params": [p.to_json() for p in k.params],
            "block": list(k.block),
            "cluster": list(k.cluster) if k.cluster else None,
            "dynamic_smem": k.dynamic_smem,
            "pdl": self.programmatic_dependent,
            "consts": {n: v for n, v in self.consts.items()},
            "transforms": list(self.transforms),
            "toolchain": toolchain_versions(),
        }


def get_target(name_or_target):
    """The `Target` named `name_or_target` (a `Target` is returned as is); unknown: CompileError."""
    if isinstance(name_or_target, str):
        try:
            return default_targets().get(name_or_target)
        except KeyError as e:
            raise CompileError(str(e.args[0])) from None
    return name_or_target


class Pipeline:
    """The compile stages for one target and one set of build options.

    target: a target name or `Target`; isa: the instruction set to trace with (default: the one
    in force); cache: the artifact cache (default: `default_cache`); transforms: IR transforms
    this build asks for beyond the registry's defaults (names, `Transform`s or ``(name,
    options)`` pairs); registry: where names are looked up (default: the transforms in force);
    line_info: ``.loc`` lines in the PTX and ``-lineinfo`` for the assembler.

    Each stage is a method, so a caller may stop anywhere (``ptx()`` stops after ``emit``) and
    a test may run one alone; `build` runs them all.
    """

    def __init__(self, target, *, isa=None, cache: "ArtifactCache | None" = None,
                 transforms=(), registry: "TransformRegistry | None" = None,
                 line_info: bool = True):
        self.target = get_target(target)
        self.isa = isa
        self.cache = cache
        self.line_info = line_info
        self.transforms = resolve(transforms, registry if registry is not None
                                  else default_transforms())

    # -- the stages --------------------------------------------------------------------------------
    def trace(self, kernel, consts: dict) -> ir.KernelIR:
        """``trace``: the kernel's IR for `consts` (cached on the kernel per constants)."""
        return kernel.specialize(isa=self.isa, **consts)

    def transform(self, k: ir.KernelIR) -> "tuple[ir.KernelIR, dict]":
        """``transform``: each IR transform in order; (new IR, {name: the transform's output})."""
        outputs = {}
        for t, opts in self.transforms:
            ctx = TransformContext(self.target, self.isa if self.isa is not None
                                   else default_isa(), opts)
            new = t.apply(k, ctx)
            if not isinstance(new, ir.KernelIR):
                raise CompileError(f"IR transform {t.name!r} returned {type(new).__name__}, "
                                   "not a KernelIR", k.loc, k.name)
            k, outputs[t.name] = new, ctx.output
        return k, outputs

    def legalize(self, k: ir.KernelIR) -> None:
        """``legalize``: `CompileError` unless `k` fits the target (`tirxh.core.legalize`)."""
        legalize(k, self.target)

    def emit(self, k: ir.KernelIR) -> str:
        """``emit``: the PTX module text."""
        return emit_ptx(k, self.target, __version__, line_info=self.line_info)

    def key(self, ptx: str) -> str:
        """The artifact key of `ptx` built by this pipeline (see `tirxh.core.cache`)."""
        return artifact_key(ptx, self.target.name, ["lineinfo"] if self.line_info else [],
                            [(t.name, t.version, opts) for t, opts in self.transforms])

    def assemble(self, ptx: str, k: ir.KernelIR) -> "tuple[bytes, str, str, bool]":
        """``assemble``: (cubin, assembler log, artifact key, cache hit). A ptxas error is a
        `CompileError` pointing at the Python line of the offending PTX line."""
        cache = self.cache if self.cache is not None else default_cache()
        key = self.key(ptx)
        got = cache.get(key)
        if got is not None:
            return got[0], got[1], key, True
        try:
            cubin, log = ptx_to_cubin(ptx, self.target.name, line_info=self.line_info)
        except Exception as e:
            raise CompileError(_map_ptxas_error(str(e), getattr(e, "log", ""), ptx), k.loc,
                               k.name) from None
        cache.put(key, cubin, log)
        return cubin, log, key, False

    # -- whole runs ----------------------------------------------------------------------------------
    def ptx(self, kernel, consts: "dict | None" = None) -> str:
        """trace -> transform -> legalize -> emit."""
        k, _ = self.transform(self.trace(kernel, kernel.resolve_consts(consts or {})))
        self.legalize(k)
        return self.emit(k)

    def build(self, kernel, consts: "dict | None" = None, assemble: bool = True) -> CompiledKernel:
        """Every stage up to ``assemble`` (``disassemble`` runs on first use of ``.sass``)."""
        consts = kernel.resolve_consts(consts or {})
        t0 = time.perf_counter()
        k = self.trace(kernel, consts)
        t1 = time.perf_counter()
        k, outputs = self.transform(k)
        t2 = time.perf_counter()
        self.legalize(k)
        ptx = self.emit(k)
        t3 = time.perf_counter()
        cubin, log, key, hit = None, "", "", False
        if assemble:
            cubin, log, key, hit = self.assemble(ptx, k)
        t4 = time.perf_counter()
        resources = parse_resources(log)
        resources.code_bytes = text_bytes(cubin, k.name) if cubin else 0
        return CompiledKernel(
            name=k.name, target=self.target.name, consts=consts, ir=k, ptx=ptx, cubin=cubin,
            log=log, resources=resources, cache_hit=hit, key=key,
            transforms=outputs,
            timings={"trace_s": t1 - t0, "transform_s": t2 - t1, "emit_s": t3 - t2,
                     "assemble_s": t4 - t3},
            _cache=(self.cache if self.cache is not None else default_cache()) if key else None)


def compile_kernel(kernel, target, consts: "dict | None" = None, isa=None,
                   cache: "ArtifactCache | None" = None, assemble: bool = True,
                   line_info: bool = True, transforms=(),
                   registry: "TransformRegistry | None" = None) -> CompiledKernel:
    """Build `kernel` for `target` through the `Pipeline` (see the module docstring).

    `transforms`: IR transforms to apply beyond the defaults (``["iket"]``, ``[("iket",
    {"capacity": 16})]``), looked up in `registry` (default: the transforms in force); what
    each hands back is in ``CompiledKernel.transforms``.
    """
    return Pipeline(target, isa=isa, cache=cache, transforms=transforms, registry=registry,
                    line_info=line_info).build(kernel, consts, assemble=assemble)


def emit_ptx_for(kernel, target, consts: "dict | None" = None, isa=None, transforms=()) -> str:
    """The PTX `compile_kernel` would assemble (trace, transform, legalize, emit)."""
    return Pipeline(target, isa=isa, transforms=transforms).ptx(kernel, consts)


def _map_ptxas_error(message: str, log: str, ptx: str) -> str:
    """Point ptxas errors (``kernel.ptx, line N``) back at the Python line through ``.loc``."""
    lines = ptx.splitlines()
    files = dict(re.findall(r'^\.file (\d+) "(.*)"$', ptx, re.M))
    out = [message]
    for m in re.finditer(r"line (\d+)", log):
        n = int(m.group(1))
        for j in range(min(n, len(lines)) - 1, -1, -1):
            lm = re.match(r"\s*\.loc\s+(\d+) (\d+)", lines[j])
            if lm:
                out.append(f"  PTX line {n} ({lines[n - 1].strip() if n <= len(lines) else ''}) "
                           f"comes from {files.get(lm.group(1), '?')}:{lm.group(2)}")
                break
    return "\n".join(out)
