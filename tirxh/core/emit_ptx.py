"""IR -> PTX text.

A compact walk over the IR: each `Instr` prints as its spelling and operands; structured control
flow lowers to predicates, labels and ``bra``; virtual registers are declared per register class
(ptxas allocates). ``.loc`` lines point every instruction at the user's Python line, so ptxas
errors, SASS line tables and profiler source views map back to the kernel source.

Target legality is not checked here: the ``legalize`` stage (`tirxh.core.legalize`) runs first in
the compile pipeline (`tirxh.core.compiler`), so the emitter only prints.

Shared memory (`tirxh.core.lang.memory.shared`): a variable in the window is spelled
``tirx_dsmem+OFF`` (its compiler-computed offset). When the window's base is rounded up at run
time (`KernelIR.smem_base_align`), the body starts with ``mov.u32 %tirx_smem, tirx_dsmem``,
``add.u32 %tirx_smem, %tirx_smem, A-1`` and ``and.b32 %tirx_smem, %tirx_smem, -A``; a variable is
then ``%tirx_smem+OFF`` in addresses, and ``mov.u32 r, var`` prints as
``add.u32 r, %tirx_smem, OFF`` (the only form a variable's symbol takes outside an address). An
instruction that takes a generic address (``[var]`` is then the variable's generic address in
PTX: ``mbarrier.init.b64``, ``tcgen05.commit``) gets ``%tirx_gsmem+OFF``, the rounded base's
generic address (``cvt.u64.u32`` and ``cvta.shared.u64`` in the prologue, when one is needed).
"""

from __future__ import annotations

import struct
import numpy as np


from . import ir
from .errors import CompileError
from .types import DType


_PREFIX = {"pred": "p", "b16": "h", "u16": "hu", "s16": "hs", "b32": "r", "u32": "ru",
           "s32": "rs", "b64": "rd", "u64": "rdu", "s64": "rds", "f32": "f", "f64": "fd",
           "b128": "q"}


def format_imm(imm: ir.Imm) -> str:
    """Immediates: exact hex for floats (``0f3F800000``), decimal for integers."""
    dt, v = imm.dtype, imm.value
    if dt.name in ("f32", "tf32") or (dt.name in ("f16x2", "bf16x2") and isinstance(v, float)):
        return "0f%08X" % struct.unpack("<I", struct.pack("<f", float(v)))[0]
    if dt.name == "f64":
        return "0d%016X" % struct.unpack("<Q", struct.pack("<d", float(v)))[0]
    if dt.name in ("f16", "bf16", "e4m3", "e5m2") and isinstance(v, float):
        bits = np.array([v], dtype=dt.numpy).view(np.uint16 if dt.bits == 16 else np.uint8)[0]
        return "0x%04X" % int(bits)
    if isinstance(v, float):
        v = int(v)
    if dt.kind == "sint" or v >= 0:
        return str(int(v))
    return str(int(v) & ((1 << dt.bits) - 1))


class _Names:
    """Register names per class, numbered in first-use order (stable for golden tests)."""

    def __init__(self):
        self.names: dict[int, str] = {}
        self.counts: dict[str, int] = {}
        self._temps: list = []  # keep emitter temporaries alive: names are keyed by id()

    def of(self, r: ir.Reg) -> str:
        key = id(r)
        n = self.names.get(key)
        if n is None:
            cls = r.dtype.reg_class
            self.counts[cls] = self.counts.get(cls, 0) + 1
            n = self.names[key] = f"%{_PREFIX[cls]}{self.counts[cls]}"
        return n

    def temp(self, dt: DType) -> str:
        r = ir.Reg(-1, dt)
        self._temps.append(r)
        return self.of(r)


_WINDOW = "tirx_dsmem"  # the kernel's one dynamic shared window
_ROUNDED_BASE = "%tirx_smem"  # its base rounded up at run time (KernelIR.smem_base_align)
_GENERIC_BASE = "%tirx_gsmem"  # ... as a generic address, for generic-space operands


class PtxEmitter:
    """Emit one kernel's PTX module for one target."""

    def __init__(self, kernel: ir.KernelIR, target, line_info: bool = True):
        self.k, self.target, self.line_info = kernel, target, line_info
        self.window = {v.name: v.offset for v in kernel.shared if v.dynamic}
        self.base_align = kernel.smem_base_align
        self.base = _ROUNDED_BASE if self.base_align else _WINDOW
        self.generic_base = False  # whether an operand needs _GENERIC_BASE (found while printing)
        self.names = _Names()
        self.lines: list[str] = []
        self.files: dict[str, int] = {}
        self.label_n = 0
        self.last_loc: "ir.Loc | None" = None
        self.loops: list[str] = []

    # -- operands ------------------------------------------------------------------------------------
    def _in_window(self, o) -> bool:
        return isinstance(o, ir.Sym) and o.space == "shared" and o.name in self.window

    def window_ref(self, name: str, extra: int = 0) -> str:
        """``base+OFF`` for byte `extra` of window variable `name`."""
        off = self.window[name] + extra
        return f"{self.base}{'+' if off > 0 else '-'}{abs(off)}" if off else self.base

    def op(self, o) -> str:
        if isinstance(o, ir.Reg):
            return self.names.of(o)
        if isinstance(o, ir.Imm):
            return format_imm(o)
        if isinstance(o, ir.Sym):
            if self._in_window(o):
                if self.base_align:  # pragma: no cover - instr() rewrites the one legal form
                    raise CompileError(f"the address of shared variable {o.name!r} as a value "
                                       "operand", None, self.k.name)
                return self.window_ref(o.name)
            return o.name
        if isinstance(o, ir.SReg):
            return f"%{o.name}"
        if isinstance(o, ir.Addr):
            if isinstance(o.base, int):
                return f"[{o.base + o.offset}]"
            if self._in_window(o.base):
                return f"[{self.window_ref(o.base.name, o.offset)}]"
            base = self.op(o.base)
            if o.offset:
                return f"[{base}{'+' if o.offset > 0 else '-'}{abs(o.offset)}]"
            return f"[{base}]"
        if isinstance(o, ir.Vec):
            if o.sep == "|":
                return "|".join(self.op(e) for e in o.elems)
            return "{" + ", ".join(self.op(e) for e in o.elems) + "}"
        if isinstance(o, ir.TensorRef):
            return f"[{self.op(o.base)}, {{{', '.join(self.op(c) for c in o.coords)}}}]"
        if isinstance(o, ir.Sink):
            return "_"
        if isinstance(o, str):
            return o
        raise CompileError(f"cannot print operand {o!r}", None, self.k.name)

    # -- statements ------------------------------------------------------------------------------------
    def loc(self, loc: "ir.Loc | None") -> None:
        if not self.line_info or loc is None or loc.line <= 0 or loc == self.last_loc:
            return
        fid = self.files.setdefault(loc.file, len(self.files) + 1)
        self.lines.append(f"\t.loc\t{fid} {loc.line} 0")
        self.last_loc = loc

    def emit(self, text: str) -> None:
        self.lines.append("\t" + text + ";")

    def label(self, kind: str) -> str:
        self.label_n += 1
        return f"$L_{kind}{self.label_n}"

    def block(self, b: ir.Block) -> None:
        for s in b.stmts:
            self.stmt(s)

    def stmt(self, s) -> None:
        if isinstance(s, ir.Instr):
            self.instr(s)
        elif isinstance(s, ir.If):
            self.if_(s)
        elif isinstance(s, ir.For):
            self.for_(s)
        elif isinstance(s, ir.Loop):
            self.loop(s)
        elif isinstance(s, ir.Break):
            self.break_(s)
        elif isinstance(s, ir.Annotation):
            pass  # profiling annotations compile to nothing in a normal build (plugins/iket)
        else:  # pragma: no cover - the tracer only builds the nodes above
            raise CompileError(f"unknown IR statement {s!r}", None, self.k.name)

    def instr(self, i: ir.Instr) -> None:
        self.loc(i.loc)
        guard = ""
        if i.guard is not None:
            guard = f"@{'!' if i.guard[1] else ''}{self.op(i.guard[0])} "
        if self.base_align:
            if any(self._in_window(o) for o in i.operands):
                self.emit(guard + self._rounded_address_of(i))
                return
            specs = i.binding.operand_specs(i.modifiers)
            ops = ", ".join(self._rounded_operand(i, n, specs[n] if n < len(specs) else None)
                            for n, o in enumerate(i.operands))
        else:
            ops = ", ".join(self.op(o) for o in i.operands)
        self.emit(f"{guard}{i.spelling}" + (f" \t{ops}" if ops else ""))

    def _rounded_operand(self, i: ir.Instr, n: int, spec) -> str:
        """An operand when the window's base is a register: a window variable addressed in the
        shared space is ``[%tirx_smem+OFF]``, in the generic space ``[%tirx_gsmem+OFF]``; in
        any other space it is an error naming the instruction (operand `n`)."""
        o = i.operands[n]
        if not (isinstance(o, ir.Addr) and self._in_window(o.base)):
            return self.op(o)
        if spec is None:  # an operand the binding does not describe: its space is unknown
            raise CompileError(f"{i.spelling}: shared variable {o.base.name!r} as operand "
                               f"{n + 1}, which the binding does not describe",
                               i.loc, self.k.name)
        space = spec.space or "generic"
        if space.startswith("shared"):
            return self.op(o)
        if space != "generic":
            raise CompileError(f"{i.spelling}: shared variable {o.base.name!r} addressed in the "
                               f".{space} state space", i.loc, self.k.name)
        self.generic_base = True
        off = self.window[o.base.name] + o.offset
        return f"[{_GENERIC_BASE}{'+' if off > 0 else '-'}{abs(off)}]" if off else \
            f"[{_GENERIC_BASE}]"

    def _rounded_address_of(self, i: ir.Instr) -> str:
        """``mov.u32 r, var`` of a window variable when the base is a register: ``add.u32 r,
        %tirx_smem, OFF`` (module docstring); any other use of the symbol as a value is an
        error naming the instruction."""
        ops = i.operands
        if i.spelling in ("mov.u32", "mov.b32") and len(ops) == 2 and isinstance(ops[0], ir.Reg) \
                and self._in_window(ops[1]):
            off = self.window[ops[1].name]
            d = self.op(ops[0])
            return f"add.u32 \t{d}, {self.base}, {off}" if off else f"mov.u32 \t{d}, {self.base}"
        name = next(o.name for o in ops if self._in_window(o))
        raise CompileError(f"{i.spelling}: the address of shared variable {name!r} as an operand; "
                           "take it with mov.u32 (buf.ptr()) or use it in an address "
                           "(buf.at(...))", i.loc, self.k.name)

    def _pred_of(self, cond: ir.Reg, negate: bool) -> str:
        return f"@{'!' if negate else ''}{self.op(cond)}"

    def if_(self, s: ir.If) -> None:
        self.loc(s.loc)
        end = self.label("endif")
        els = self.label("else") if s.orelse is not None else end
        bra = "bra.uni" if s.uniform else "bra"
        # jump over `then` when the condition does not hold
        self.emit(f"{self._pred_of(s.cond, not s.negate)} {bra} \t{els}")
        self.block(s.then)
        if s.orelse is not None:
            self.emit(f"{bra} \t{end}")
            self.lines.append(f"{els}:")
            self.last_loc = None
            self.block(s.orelse)
        self.lines.append(f"{end}:")
        self.last_loc = None

    def for_(self, s: ir.For) -> None:
        self.loc(s.loc)
        head, end = self.label("for"), self.label("endfor")
        dt = s.var.dtype
        cmp_t = dt.name if dt.kind != "bits" else f"u{dt.bits}"
        v = self.op(s.var)
        self.emit(f"mov.{cmp_t} \t{v}, {self.op(s.start)}")
        self.lines.append(f"{head}:")
        if s.unroll == 1:
            self.lines.append('\t.pragma "nounroll";')
        p = self.names.temp(DType("pred", 1, "pred", "pred"))
        negative = isinstance(s.step, ir.Imm) and s.step.value < 0
        self.emit(f"setp.{'le' if negative else 'ge'}.{cmp_t} \t{p}, {v}, {self.op(s.stop)}")
        self.emit(f"@{p} bra \t{end}")
        self.loops.append(end)
        self.last_loc = None
        self.block(s.body)
        self.loops.pop()
        self.emit(f"add.{cmp_t} \t{v}, {v}, {self.op(s.step)}")
        self.emit(f"bra \t{head}")
        self.lines.append(f"{end}:")
        self.last_loc = None

    def loop(self, s: ir.Loop) -> None:
        self.loc(s.loc)
        head, end = self.label("loop"), self.label("endloop")
        self.lines.append(f"{head}:")
        self.loops.append(end)
        self.last_loc = None
        self.block(s.body)
        self.loops.pop()
        self.emit(f"bra \t{head}")
        self.lines.append(f"{end}:")
        self.last_loc = None

    def break_(self, s: ir.Break) -> None:
        if not self.loops:
            raise CompileError("break outside a loop", s.loc, self.k.name)
        self.loc(s.loc)
        if s.cond is None:
            self.emit(f"bra \t{self.loops[-1]}")
        else:
            self.emit(f"{self._pred_of(s.cond, s.negate)} bra \t{self.loops[-1]}")

    # -- module ------------------------------------------------------------------------------------------
    def module(self, version: str = "") -> str:
        k, t = self.k, self.target
        self.block(k.body)
        body = self.lines
        decls = []
        for cls in sorted(self.names.counts):
            decls.append(f"\t.reg .{cls} \t%{_PREFIX[cls]}<{self.names.counts[cls] + 1}>;")
        shared = [f"\t.shared .align {v.align} .b8 {v.name}[{v.nbytes}];"
                  for v in k.shared if not v.dynamic]
        if self.base_align:
            shared.append(f"\t.reg .b32 \t{_ROUNDED_BASE};")
        if self.generic_base:
            shared.append(f"\t.reg .b64 \t{_GENERIC_BASE};")
        # function-scope .local arrays: one copy per thread, in the stack frame (T.local)
        shared += [f"\t.local .align {v.align} .b8 {v.name}[{v.nbytes}];"
                   for v in getattr(k, "local", ())]
        params = []
        for p in k.params:
            if p.kind == "ptr":
                params.append(f"\t.param .u64 {p.name}")
            elif p.kind == "tensormap":
                params.append(f"\t.param .align 64 .b8 {p.name}[128]")
            else:
                ty = p.dtype.name if p.dtype.bits != 16 or not p.dtype.is_float else "b16"
                params.append(f"\t.param .{ty} {p.name}")
        # .maxntid: the declared bound when given (a kernel launched with smaller blocks),
        # else the block itself; with .minnctapersm it caps registers at entry (setmaxnreg)
        directives = [f".maxntid {k.max_threads}, 1, 1" if k.max_threads else
                      f".maxntid {', '.join(str(d) for d in k.block)}"]
        if k.maxnreg:
            directives.append(f".maxnreg {k.maxnreg}")
        if k.min_blocks:
            directives.append(f".minnctapersm {k.min_blocks}")
        if k.cluster is not None:
            directives.append(f".reqnctapercluster {', '.join(str(d) for d in k.cluster)}")
        out = [
            "//",
            f"// Generated by tirxh {version} for kernel {k.name!r} ({k.loc})",
            f"// constants: {k.consts}" if k.consts else "// constants: none",
            "//",
            f".version {t.ptx_isa[0]}.{t.ptx_isa[1]}",
            f".target {t.name}",
            ".address_size 64",
            "",
        ]
        out += self._window_map()
        for path, fid in self.files.items():
            out.append(f'.file {fid} "{path}"')
        if any(v.dynamic for v in k.shared) or k.dynamic_smem:
            out.append(f".extern .shared .align {max(16, k.dynamic_align)} .b8 {_WINDOW}[];")
        out += ["", f".visible .entry {k.name}(", ",\n".join(params), ")"]
        out += directives
        out += ["{"] + decls + shared + [""] + self._prologue() + body + ["\tret;", "}", ""]
        return "\n".join(out)

    def _window_map(self) -> list:
        """Comment lines naming each window variable's place, so that a reader of the PTX finds
        ``red`` behind ``tirx_dsmem+416``."""
        if not self.window:
            return []
        k = self.k
        head = f"// shared window {_WINDOW}: {k.dynamic_smem} bytes"
        if self.base_align:
            head += (f", base rounded up to {self.base_align} at run time ({_ROUNDED_BASE}; "
                     f"{k.smem_slack} bytes of slack)")
        lines = [head]
        for v in sorted((v for v in k.shared if v.dynamic), key=lambda v: v.offset):
            sw = f", swizzle {v.swizzle}" if v.swizzle else ""
            lines.append(f"//   {v.name}: +{v.offset} ({v.nbytes} bytes, align {v.align}{sw})")
        return lines + [""]

    def _prologue(self) -> list:
        """The window's base rounded up to `base_align` (module docstring), or nothing."""
        a = self.base_align
        if not a:
            return []
        b, g = _ROUNDED_BASE, _GENERIC_BASE
        out = [f"\tmov.u32 \t{b}, {_WINDOW};", f"\tadd.u32 \t{b}, {b}, {a - 1};",
               f"\tand.b32 \t{b}, {b}, -{a};"]
        if self.generic_base:
            out += [f"\tcvt.u64.u32 \t{g}, {b};", f"\tcvta.shared.u64 \t{g}, {g};"]
        return out


def emit_ptx(kernel: ir.KernelIR, target, version: str = "", line_info: bool = True) -> str:
    """PTX module text for one specialized, legalized kernel and one target (the ``emit``
    stage; `tirxh.core.legalize.legalize` must have accepted `kernel` for `target`)."""
    return PtxEmitter(kernel, target, line_info).module(version)
