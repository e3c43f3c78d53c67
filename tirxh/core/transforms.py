"""IR transforms: the ``transform`` stage of the compile pipeline, filled by plugins.

A plugin that needs the compiler to build something different (an instrumented profiling build,
an optimization pass, a lowering) adds a `Transform` through the ``tirxh_register_transforms``
hook instead of forking the compiler. A transform takes the traced `KernelIR` and returns a new
one; it must not edit its input (the tracer caches it per specialization).

A transform is applied to a build when the build asks for it by name
(``compile_kernel(..., transforms=["iket"])`` or ``[("iket", {"capacity": 16})]``), or to every
build when it is registered with ``default=True``. Its name, `version` and options are part of
the artifact key, so two builds that differ in their transforms never share a cubin.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from . import ir
from .errors import CompileError


@dataclass
class TransformContext:
    """What a transform sees beside the IR.

    target: the `Target` being built for; isa: the `InstructionSet` in force (for emitting new
    instructions with `tirxh.core.lang.trace.emit` under a `Trace`); options: the build's options
    for this transform (a dict, empty when none were given); output: set it to hand a result
    back to whoever asked for the build (iket: the trace buffer's layout); it lands in
    ``CompiledKernel.transforms[name]``.
    """

    target: Any
    isa: Any
    options: dict = field(default_factory=dict)
    output: Any = None


@dataclass(frozen=True)
class Transform:
    """One IR pass: ``apply(kernel_ir, ctx) -> kernel_ir``.

    name: unique among the registered transforms; doc: one line for ``tirxh plugins`` and docs;
    default: apply to every build (else only to builds that name it); version: bump it when the
    pass's output changes for the same input, so cached cubins built by the old pass are not
    reused.
    """

    name: str
    apply: Callable[[ir.KernelIR, TransformContext], ir.KernelIR]
    doc: str = ""
    default: bool = False
    version: str = "1"


class TransformRegistry:
    """Transforms by name, in registration order; a name registered twice is a plugin conflict."""

    def __init__(self):
        self.by_name: dict[str, Transform] = {}
        self.owners: dict[str, str] = {}

    def add(self, transform: Transform, owner: str = "?") -> None:
        if not isinstance(transform, Transform):
            raise TypeError(f"registry.add() takes a Transform, got {transform!r}")
        if transform.name in self.by_name:
            raise ValueError(f"transform {transform.name!r} registered twice (by "
                             f"{self.owners[transform.name]!r} and {owner!r})")
        self.by_name[transform.name] = transform
        self.owners[transform.name] = owner

    def get(self, name: str) -> Transform:
        try:
            return self.by_name[name]
        except KeyError:
            raise CompileError(f"unknown IR transform {name!r}; registered transforms: "
                               f"{', '.join(sorted(self.by_name)) or 'none'} (a plugin adds "
                               "one with the tirxh_register_transforms hook)") from None

    def defaults(self) -> list:
        return [t for t in self.by_name.values() if t.default]

    def __contains__(self, name: str) -> bool:
        return name in self.by_name

    def __iter__(self):
        return iter(self.by_name.values())


def resolve(requested, registry: TransformRegistry) -> "list[tuple[Transform, dict]]":
    """The transforms a build applies, in order: the registry's defaults, then `requested`.

    `requested` items: a name, a `Transform`, or a ``(name or Transform, options)`` pair. A
    transform named twice is an error (its options would be ambiguous).
    """
    out: list = [(t, {}) for t in registry.defaults()]
    for r in requested or ():
        what, opts = r if isinstance(r, tuple) else (r, {})
        t = what if isinstance(what, Transform) else registry.get(what)
        if not isinstance(opts, dict):
            raise CompileError(f"options of IR transform {t.name!r} must be a dict, got "
                               f"{opts!r}")
        if any(t.name == seen.name for seen, _ in out):
            if not opts and t.default:
                continue  # asking for a default transform by name is harmless
            raise CompileError(f"IR transform {t.name!r} is applied twice in one build")
        out.append((t, dict(opts)))
    return out
