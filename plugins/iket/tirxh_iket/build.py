"""Compile the profiling build of a kernel: instrumented IR -> PTX -> cubin (with line info).

Kept apart from the normal build on purpose: the artifact cache keys on the PTX text, so the two
builds never share a cubin, and `CompiledKernel.ir` is the instrumented IR (its params include the
hidden trace buffer), so KCoral launches it with one extra pointer argument.
"""

from __future__ import annotations

import time

from tirxh.core.compiler import CompiledKernel, get_target, _validate_limits, default_cache
from tirxh.core.cache import cache_key
from tirxh.core.emit_ptx import CompileError, emit_ptx
from tirxh.core.toolchain import parse_resources, ptx_to_cubin

from .instrument import DEFAULT_CAPACITY, instrument
from .layout import TraceLayout


def compile_profiling_build(kernel, target, consts: "dict | None" = None,
                            capacity: int = DEFAULT_CAPACITY, isa=None,
                            assemble: bool = True) -> "tuple[CompiledKernel, TraceLayout]":
    """The instrumented `CompiledKernel` for `target` and the layout of its trace buffer."""
    from tirxh import __version__
    consts = kernel.resolve_consts(consts or {})
    t = get_target(target)
    t0 = time.perf_counter()
    base = kernel.specialize(isa=isa, **consts)
    k, layout = instrument(base, capacity=capacity, isa=isa)
    _validate_limits(k, t)
    ptx = emit_ptx(k, t, __version__, line_info=True)
    t1 = time.perf_counter()
    cubin, log, hit = None, "", False
    if assemble:
        cache = default_cache()
        key = cache_key(ptx, t.name, "lineinfo")
        got = cache.get(key)
        if got is not None:
            (cubin, log), hit = got, True
        else:
            try:
                cubin, log = ptx_to_cubin(ptx, t.name, line_info=True)
            except Exception as e:
                raise CompileError(f"profiling build failed to assemble: {e}", k.loc,
                                   k.name) from None
            cache.put(key, cubin, log)
    t2 = time.perf_counter()
    ck = CompiledKernel(name=k.name, target=t.name, consts=consts, ir=k, ptx=ptx, cubin=cubin,
                        log=log, resources=parse_resources(log), cache_hit=hit,
                        timings={"emit_s": t1 - t0, "assemble_s": t2 - t1})
    return ck, layout
