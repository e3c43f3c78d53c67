"""The ``legalize`` stage: may this IR be built for this target?

A separate pass before PTX emission (the emitter then only prints): the block, shared memory and
cluster fit the target's limits, and every instruction's binding is accepted by the target with
the modifiers used (binding set, arch-specific targets, minimum SM and PTX ISA, per-modifier
minimums). The first problem is a `CompileError` at the user's line: the kernel's ``def`` for a
launch limit, the instruction's own line for an instruction the target lacks.
"""

from __future__ import annotations

from . import ir
from .errors import CompileError


def check_limits(k: ir.KernelIR, target) -> None:
    """The block, shared memory and cluster of `k` against ``target.limits``."""
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


def check_instructions(k: ir.KernelIR, target) -> None:
    """Every instruction of `k` is accepted by `target` (in program order; the first is raised)."""
    for i in k.instructions():
        why = i.binding.accepts_target(target, i.modifiers)
        if why is not None:
            raise CompileError(why, i.loc, k.name)


def legalize(k: ir.KernelIR, target) -> None:
    """Raise `CompileError` unless `k` can be built for `target` (limits first, then
    instructions)."""
    check_limits(k, target)
    check_instructions(k, target)
