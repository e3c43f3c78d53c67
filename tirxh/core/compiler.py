"""Kernel -> IR -> PTX -> cubin, with the launch metadata that travels with the artifact.

`compile_kernel` is what the built-in ``compile`` plugin calls for ``tirxh_compile``; scripts use
``kernel.compile(target)``. The result, `CompiledKernel`, carries everything a launcher needs
(parameter ABI, block/cluster/dynamic shared memory; the grid is per case) so KCoral and numsim
can run it without the Python source.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from . import ir
from .cache import ArtifactCache, cache_key
from .emit_ptx import CompileError, emit_ptx
from .toolchain import (Resources, cubin_to_sass, parse_resources, ptx_to_cubin,
                        toolchain_versions)

_DEFAULT_CACHE: "ArtifactCache | None" = None


def default_cache() -> ArtifactCache:
    global _DEFAULT_CACHE
    if _DEFAULT_CACHE is None:
        _DEFAULT_CACHE = ArtifactCache()
    return _DEFAULT_CACHE


@dataclass
class CompiledKernel:
    """A kernel built for one target and one set of constants."""

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
    _sass: "str | None" = None

    @property
    def sass(self) -> str:
        """SASS disassembly (nvdisasm), computed on first use."""
        if self._sass is None:
            if self.cubin is None:
                raise CompileError("no cubin to disassemble (built with assemble=False)")
            self._sass = cubin_to_sass(self.cubin)
        return self._sass

    def ir_json(self) -> str:
        """The traced IR as JSON (`tirxh.core.irjson`): what KCoral's ``sim`` board runs."""
        from .irjson import dumps
        return dumps(self.ir)

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
            "consts": {n: v for n, v in self.consts.items()},
            "toolchain": toolchain_versions(),
        }


def get_target(name_or_target):
    """The `Target` named `name_or_target` (a `Target` is returned as is); unknown: CompileError."""
    from .registry import default_targets
    if isinstance(name_or_target, str):
        try:
            return default_targets().get(name_or_target)
        except KeyError as e:
            raise CompileError(str(e.args[0])) from None
    return name_or_target


def _validate_limits(k: ir.KernelIR, target) -> None:
    lim = target.limits
    threads = k.threads_per_block
    if threads > lim.get("max_threads_per_block", 1 << 30):
        raise CompileError(f"block {k.block} has {threads} threads; {target.name} allows "
                           f"{lim['max_threads_per_block']}", k.loc, k.name)
    if k.max_threads is not None and k.max_threads < threads:
        raise CompileError(f"max_threads={k.max_threads} is below the block's {threads} threads",
                           k.loc, k.name)
    smem = sum(v.nbytes for v in k.shared if not v.dynamic) + k.dynamic_smem
    if smem > lim.get("max_smem_per_block", 1 << 40):
        raise CompileError(f"{smem} bytes of shared memory per block; {target.name} allows "
                           f"{lim['max_smem_per_block']}", k.loc, k.name)
    if k.cluster is not None:
        n = k.cluster[0] * k.cluster[1] * k.cluster[2]
        if n > lim.get("max_cluster_size", 1):
            raise CompileError(f"cluster {k.cluster} has {n} CTAs; {target.name} allows "
                               f"{lim.get('max_cluster_size', 1)}", k.loc, k.name)


def emit_ptx_for(kernel, target, consts: dict, isa=None) -> str:
    from .. import __version__
    t = get_target(target)
    k = kernel.specialize(isa=isa, **consts)
    _validate_limits(k, t)
    return emit_ptx(k, t, __version__)


def compile_kernel(kernel, target, consts: "dict | None" = None, isa=None,
                   cache: "ArtifactCache | None" = None, assemble: bool = True,
                   line_info: bool = True) -> CompiledKernel:
    """Trace (cached per constants), emit PTX, and assemble it to a cubin (cached by content)."""
    from .. import __version__
    consts = kernel.resolve_consts(consts or {})
    t = get_target(target)
    t0 = time.perf_counter()
    k = kernel.specialize(isa=isa, **consts)
    t1 = time.perf_counter()
    _validate_limits(k, t)
    ptx = emit_ptx(k, t, __version__, line_info=line_info)
    t2 = time.perf_counter()
    cubin, log, hit = None, "", False
    if assemble:
        cache = cache or default_cache()
        key = cache_key(ptx, t.name, "lineinfo" if line_info else "",
                        json.dumps(toolchain_versions(), sort_keys=True))
        got = cache.get(key)
        if got is not None:
            cubin, log = got
            hit = True
        else:
            try:
                cubin, log = ptx_to_cubin(ptx, t.name, line_info=line_info)
            except Exception as e:
                log_text = getattr(e, "log", "")
                raise CompileError(_map_ptxas_error(str(e), log_text, ptx), k.loc,
                                   k.name) from None
            cache.put(key, cubin, log)
    t3 = time.perf_counter()
    return CompiledKernel(
        name=k.name, target=t.name, consts=consts, ir=k, ptx=ptx, cubin=cubin, log=log,
        resources=parse_resources(log), cache_hit=hit,
        timings={"trace_s": t1 - t0, "emit_s": t2 - t1, "assemble_s": t3 - t2})


def _map_ptxas_error(message: str, log: str, ptx: str) -> str:
    """Point ptxas errors (``kernel.ptx, line N``) back at the Python line through ``.loc``."""
    import re
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
