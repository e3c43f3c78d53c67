"""iket's IR transform, and the profiling build: the normal compile pipeline plus this transform.

`TRANSFORM` is registered with tirxh through ``tirxh_register_transforms`` (`tirxh_iket.plugin`);
it is not a default transform, so only builds that ask for it are instrumented. Its option
``capacity`` is the number of trace records per warp. What it hands back
(``CompiledKernel.transforms["iket"]``) is the `TraceLayout` of the hidden trace buffer.

The artifact cache keys on the PTX text and the transforms applied, so the profiling build and
the normal build never share a cubin; `CompiledKernel.ir` is the instrumented IR (its params
include the trace buffer), so KCoral launches it with one extra pointer argument.
"""

from __future__ import annotations

from tirxh.api import CompiledKernel, Transform, compile_kernel

from .instrument import DEFAULT_CAPACITY, instrument
from .layout import TraceLayout

NAME = "iket"


def _apply(k, ctx):
    new, ctx.output = instrument(k, capacity=ctx.options.get("capacity", DEFAULT_CAPACITY),
                                 isa=ctx.isa)
    return new


TRANSFORM = Transform(NAME, _apply, doc="record T.iket annotations into a hidden trace buffer "
                                        "(the profiling build of `tirxh profile --iket`)")


def compile_profiling_build(kernel, target, consts: "dict | None" = None,
                            capacity: int = DEFAULT_CAPACITY, isa=None, cache=None,
                            assemble: bool = True) -> "tuple[CompiledKernel, TraceLayout]":
    """The instrumented `CompiledKernel` for `target` and the layout of its trace buffer.

    Raises `InstrumentError` (a `CompileError`) when the kernel cannot be instrumented.
    """
    ck = compile_kernel(kernel, target, consts, isa=isa, cache=cache, assemble=assemble,
                        transforms=[(TRANSFORM, {"capacity": capacity})])
    return ck, ck.transforms[NAME]
