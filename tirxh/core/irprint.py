"""A readable text form of `KernelIR` (``kernel.ir``, ``tirxh show --ir``)."""

from __future__ import annotations

import os

from . import ir


def format_kernel(k: ir.KernelIR) -> str:
    lines = []
    params = ", ".join(f"{p.name}: {p.kind}<{p.dtype}>" if p.kind == "ptr" else
                       f"{p.name}: {p.kind if p.kind == 'tensormap' else p.dtype}"
                       for p in k.params)
    lines.append(f"kernel {k.name}({params})")
    lines.append(f"  block={k.block} cluster={k.cluster} dynamic_smem={k.dynamic_smem} "
                 f"consts={k.consts}")
    for v in k.shared:
        where = f"window+{v.offset}" if v.dynamic else "static"
        sw = f" swizzle={v.swizzle}" if v.swizzle else ""
        lines.append(f"  shared {v.name}: {v.dtype}{list(v.shape)} ({v.nbytes} B, align "
                     f"{v.align}, {where}{sw})")
    for v in k.local:
        lines.append(f"  local {v.name}: {v.dtype}{list(v.shape)} ({v.nbytes} B per thread, align "
                     f"{v.align})")
    _block(k.body, 1, lines)
    return "\n".join(lines)


def _where(loc: "ir.Loc | None") -> str:
    return f"  # {os.path.basename(loc.file)}:{loc.line}" if loc else ""


def _block(b: ir.Block, depth: int, out: list) -> None:
    pad = "  " * depth
    for s in b.stmts:
        if isinstance(s, ir.Instr):
            out.append(f"{pad}{s!r}{_where(s.loc)}")
        elif isinstance(s, ir.If):
            out.append(f"{pad}if {'!' if s.negate else ''}{s.cond!r}"
                       f"{' (uniform)' if s.uniform else ''}:{_where(s.loc)}")
            _block(s.then, depth + 1, out)
            if s.orelse is not None:
                out.append(f"{pad}else:")
                _block(s.orelse, depth + 1, out)
        elif isinstance(s, ir.For):
            out.append(f"{pad}for {s.var!r} in range({s.start!r}, {s.stop!r}, {s.step!r}):"
                       f"{_where(s.loc)}")
            _block(s.body, depth + 1, out)
        elif isinstance(s, ir.Loop):
            out.append(f"{pad}loop:{_where(s.loc)}")
            _block(s.body, depth + 1, out)
        elif isinstance(s, ir.Break):
            cond = "" if s.cond is None else f" if {'!' if s.negate else ''}{s.cond!r}"
            out.append(f"{pad}break{cond}{_where(s.loc)}")
        elif isinstance(s, ir.Annotation):
            out.append(f"{pad}@iket.{s.kind} {s.name!r}{_where(s.loc)}")
