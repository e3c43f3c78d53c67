"""A lossless JSON form of a traced `KernelIR`, so the IR can travel as plain data.

Why: a KCoral job carries a PTX/cubin module, and numsim simulates IR, not PTX. A client that
ships this JSON beside the module lets the ``sim`` board run the very program the cubin was built
from, without running any client Python on the server. The JSON therefore holds *no* binding
objects and no code: every `Instr` is stored by its spelling (plus the binding's name, to tell
apart forms that share a spelling), and `loads` re-resolves the binding and modifiers from the
*loader's* `InstructionSet` (`InstructionSet.candidates`) and re-checks every operand against the
binding's operand specs, the way the tracer validated them.

Shape (``schema: "tirxh-ir/1"``)::

    {"schema": "tirxh-ir/1", "name": "vadd", "loc": [0, 19, "vadd"], "files": ["/x/vadd.py"],
     "block": [256, 1, 1], "cluster": null, "dynamic_smem": 0, "dynamic_align": 16,
     "smem_layout": "window",                  # absent (older documents): "split"
     "max_threads": null, "min_blocks": null, "consts": {"BN": 128},
     "params": [{"name": "a", "kind": "ptr", "dtype": "f32", "size": 8, "align": 8}, ...],
     "shared": [{"name": "sA", "nbytes": 65536, "align": 1024, "dtype": "bf16",
                 "shape": [4, 128, 64], "swizzle": 128, "dynamic": true, "offset": 0,
                 "loc": [0, 40, "gemm"]}],
     "local": [{"name": "arr", "nbytes": 64, "align": 16, "dtype": "f32", "shape": [16],
                "loc": [0, 21, "vadd"]}],      # optional (absent: no local variables)
     "regs": [[0, "u64", ""], ...],            # [id, dtype, hint]; operands refer by index
     "unlisted_regs": [],                       # indices not in KernelIR.regs (rare)
     "body": [{"op": "instr", "spelling": "ld.param.u64", "binding": "ld.param",
               "operands": [{"r": 0}, {"addr": {"sym": "a", "space": "param"}, "off": 0}],
               "guard": null, "loc": [0, 19, "vadd"]},
              {"op": "if", "cond": 5, "negate": false, "uniform": false, "then": [...],
               "else": null, "loc": [...]},
              {"op": "for", "var": 7, "start": {...}, "stop": {...}, "step": {...},
               "unroll": null, "body": [...], "loc": [...]},
              {"op": "loop", "body": [...], "loc": [...]},
              {"op": "break", "cond": 9, "negate": true, "loc": [...]},
              {"op": "annotation", "kind": "begin", "name": "load", "loc": [...]}]}

Operands are one-key objects: ``{"r": i}`` (register index), ``{"imm": v, "t": "f32"}``,
``{"sym": n, "space": s}`` (s: param, shared or local), ``{"sreg": n, "t": "u32"}``,
``{"addr": base, "off": k}`` (base a register/symbol operand or an int), ``{"vec": [...], "sep":
","}``, ``{"tref": base, "coords": [...]}``, ``{"sink": true}``, ``{"str": text}``. Constants and immediates keep their Python
type: tuples, lists and non-finite floats are tagged (``{"$tuple": [...]}``, ``{"$float":
"nan"}``) so the PTX emitted from a loaded IR is byte-identical to the original's.

Malformed input raises `IRJSONError` listing every problem with its field path
(``body[3].then[0].operands[1]``) and the kernel's name.
"""

from __future__ import annotations

import json
import math
from typing import Any

from . import ir
from .bindings import type_compatible
from .errors import IRJSONError, SpellingError
from .registry import default_isa
from .types import DTYPES

SCHEMA = "tirxh-ir/1"


# -------------------------------------------------------------------------------------------------
# dump
# -------------------------------------------------------------------------------------------------

def to_doc(k: ir.KernelIR) -> dict:
    """The JSON document (a dict) for a traced kernel."""
    return _Dumper(k).doc()


def dumps(k: ir.KernelIR) -> str:
    """Compact, deterministic JSON text for a traced kernel (what travels as a blob)."""
    return json.dumps(to_doc(k), separators=(",", ":"), allow_nan=False)


class _Dumper:
    def __init__(self, k: ir.KernelIR):
        self.k = k
        self.files: dict[str, int] = {}
        self.reg_index: dict[int, int] = {}  # id(Reg) -> table index
        self.regs: list = []
        for r in k.regs:
            self._reg(r)
        self.listed = len(self.regs)

    def doc(self) -> dict:
        k = self.k
        body = self.block(k.body)  # walks first: registers and files found in operands
        return {
            "schema": SCHEMA, "name": k.name, "loc": self.loc(k.loc),
            "block": list(k.block), "cluster": list(k.cluster) if k.cluster else None,
            "dynamic_smem": k.dynamic_smem, "dynamic_align": k.dynamic_align,
            "smem_layout": k.smem_layout,
            "max_threads": k.max_threads, "min_blocks": k.min_blocks, "maxnreg": k.maxnreg,
            "consts": {str(n): _value(v, f"consts.{n}", k.name) for n, v in k.consts.items()},
            "params": [p.to_json() for p in k.params],
            "shared": [{"name": v.name, "nbytes": v.nbytes, "align": v.align,
                        "dtype": v.dtype.name, "shape": _value(v.shape, "shared.shape", k.name),
                        "swizzle": v.swizzle, "dynamic": v.dynamic, "offset": v.offset,
                        "loc": self.loc(v.loc) if v.loc is not None else None}
                       for v in k.shared],
            "local": [{"name": v.name, "nbytes": v.nbytes, "align": v.align,
                       "dtype": v.dtype.name, "shape": _value(v.shape, "local.shape", k.name),
                       "loc": self.loc(v.loc) if v.loc is not None else None}
                      for v in k.local],
            "regs": self.regs, "unlisted_regs": list(range(self.listed, len(self.regs))),
            "files": list(self.files),
            "body": body,
        }

    def loc(self, loc: ir.Loc) -> list:
        fid = self.files.setdefault(loc.file, len(self.files))
        return [fid, loc.line, loc.func]

    def _reg(self, r: ir.Reg) -> int:
        i = self.reg_index.get(id(r))
        if i is None:
            i = self.reg_index[id(r)] = len(self.regs)
            self.regs.append([r.id, r.dtype.name, r.hint])
        return i

    def block(self, b: ir.Block) -> list:
        return [self.stmt(s) for s in b.stmts]

    def stmt(self, s) -> dict:
        if isinstance(s, ir.Instr):
            return {"op": "instr", "spelling": s.spelling, "binding": s.binding.name,
                    "operands": [self.operand(o) for o in s.operands],
                    "guard": [self._reg(s.guard[0]), bool(s.guard[1])] if s.guard else None,
                    "loc": self.loc(s.loc)}
        if isinstance(s, ir.If):
            return {"op": "if", "cond": self._reg(s.cond), "negate": bool(s.negate),
                    "uniform": bool(s.uniform), "then": self.block(s.then),
                    "else": self.block(s.orelse) if s.orelse is not None else None,
                    "loc": self.loc(s.loc)}
        if isinstance(s, ir.For):
            return {"op": "for", "var": self._reg(s.var), "start": self.operand(s.start),
                    "stop": self.operand(s.stop), "step": self.operand(s.step),
                    "unroll": s.unroll, "body": self.block(s.body), "loc": self.loc(s.loc)}
        if isinstance(s, ir.Loop):
            return {"op": "loop", "body": self.block(s.body), "loc": self.loc(s.loc)}
        if isinstance(s, ir.Break):
            return {"op": "break", "cond": self._reg(s.cond) if s.cond is not None else None,
                    "negate": bool(s.negate), "loc": self.loc(s.loc)}
        if isinstance(s, ir.Annotation):
            return {"op": "annotation", "kind": s.kind, "name": s.name, "loc": self.loc(s.loc)}
        raise TypeError(f"kernel {self.k.name!r}: cannot serialize IR statement {s!r}")

    def operand(self, o) -> dict:
        if isinstance(o, ir.Reg):
            return {"r": self._reg(o)}
        if isinstance(o, ir.Imm):
            return {"imm": _value(o.value, "imm", self.k.name), "t": o.dtype.name}
        if isinstance(o, ir.Sym):
            return {"sym": o.name, "space": o.space}
        if isinstance(o, ir.SReg):
            return {"sreg": o.name, "t": o.dtype.name}
        if isinstance(o, ir.Addr):
            base = o.base if isinstance(o.base, int) else self.operand(o.base)
            return {"addr": base, "off": o.offset}
        if isinstance(o, ir.Vec):
            return {"vec": [self.operand(e) for e in o.elems], "sep": o.sep}
        if isinstance(o, ir.TensorRef):
            return {"tref": self.operand(o.base), "coords": [self.operand(c) for c in o.coords]}
        if isinstance(o, ir.Sink):
            return {"sink": True}
        if isinstance(o, str):
            return {"str": o}
        raise TypeError(f"kernel {self.k.name!r}: cannot serialize operand {o!r}")


def _value(v, where: str, kernel: str):
    """A constant/immediate as JSON, keeping its Python type (the PTX header prints repr)."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else {"$float": repr(v)}
    if isinstance(v, tuple):
        return {"$tuple": [_value(x, where, kernel) for x in v]}
    if isinstance(v, list):
        return {"$list": [_value(x, where, kernel) for x in v]}
    if hasattr(v, "item") and not hasattr(v, "__len__"):  # a numpy scalar
        return _value(v.item(), where, kernel)
    raise TypeError(f"kernel {kernel!r}: {where}: {v!r} ({type(v).__name__}) has no JSON form")


# -------------------------------------------------------------------------------------------------
# load
# -------------------------------------------------------------------------------------------------

def loads(text: "str | bytes", isa=None) -> ir.KernelIR:
    """A `KernelIR` from `dumps` text; bindings re-resolved from `isa` (default: the active
    instruction set). Raises `IRJSONError` naming every malformed field."""
    try:
        doc = json.loads(text)
    except (ValueError, UnicodeDecodeError) as e:
        raise IRJSONError([("ir", f"not JSON: {e}")]) from None
    return from_doc(doc, isa)


def from_doc(doc: Any, isa=None) -> ir.KernelIR:
    if isa is None:
        isa = default_isa()
    return _Loader(isa).kernel(doc)


class _Bad(Exception):
    """Internal: abandon one field (its problem is already recorded)."""


class _Loader:
    def __init__(self, isa):
        self.isa = isa
        self.problems: list = []
        self.files: list = []
        self.regs: list = []

    def bad(self, field: str, message: str) -> _Bad:
        self.problems.append((field, message))
        return _Bad()

    # -- the kernel ---------------------------------------------------------------------------
    def kernel(self, d) -> ir.KernelIR:
        if not isinstance(d, dict):
            raise IRJSONError([("ir", f"expected a JSON object, got {type(d).__name__}")])
        name = d.get("name") if isinstance(d.get("name"), str) else ""
        if d.get("schema") != SCHEMA:
            raise IRJSONError([("schema", f"expected {SCHEMA!r}, got {d.get('schema')!r}")], name)
        if not name:
            self.problems.append(("name", f"expected a kernel name, got {d.get('name')!r}"))
        files = d.get("files")
        if isinstance(files, list) and all(isinstance(f, str) for f in files):
            self.files = files
        else:
            self.problems.append(("files", f"expected a list of file names, got {files!r}"))
        regs = d.get("regs")
        if not isinstance(regs, list):
            self.problems.append(("regs", f"expected a list, got {type(regs).__name__}"))
            regs = []
        for i, r in enumerate(regs):
            self.regs.append(self._try(lambda: self.reg_entry(r, f"regs[{i}]")))
        unlisted = d.get("unlisted_regs", [])
        if not isinstance(unlisted, list) or not all(isinstance(i, int) and 0 <= i < len(regs)
                                                     for i in unlisted):
            self.problems.append(("unlisted_regs", f"expected register indices, got {unlisted!r}"))
            unlisted = []
        unlisted = set(unlisted)
        k = ir.KernelIR(
            name=name,
            params=self._list(d, "params", self.param),
            body=ir.Block(self.block(d.get("body"), "body")),
            shared=self._list(d, "shared", self.shared),
            block=self.dims(d.get("block"), "block"),
            cluster=self.dims(d.get("cluster"), "cluster") if d.get("cluster") is not None
            else None,
            dynamic_smem=self.int_(d.get("dynamic_smem"), "dynamic_smem"),
            max_threads=self.opt_int(d.get("max_threads"), "max_threads"),
            min_blocks=self.opt_int(d.get("min_blocks"), "min_blocks"),
            consts=self.consts(d.get("consts", {})),
            loc=self._try(lambda: self.loc(d.get("loc"), "loc")) or ir.Loc("<unknown>", 0),
            regs=[r for i, r in enumerate(self.regs) if i not in unlisted],
            dynamic_align=self.int_(d.get("dynamic_align", 16), "dynamic_align"),
            maxnreg=self.opt_int(d.get("maxnreg"), "maxnreg"),
            local=self._list(d, "local", self.local_var) if "local" in d else [],
            smem_layout=self.smem_layout(d.get("smem_layout", "split")))
        if self.problems:
            raise IRJSONError(self.problems, name)
        return k

    def _try(self, fn):
        try:
            return fn()
        except _Bad:
            return None

    def _list(self, d, key, fn) -> list:
        v = d.get(key)
        if not isinstance(v, list):
            self.problems.append((key, f"expected a list, got {type(v).__name__}"))
            return []
        return [x for x in (self._try(lambda i=i, e=e: fn(e, f"{key}[{i}]"))
                            for i, e in enumerate(v)) if x is not None]

    # -- scalars ------------------------------------------------------------------------------
    def dtype(self, name, field: str):
        if not isinstance(name, str) or name not in DTYPES:
            raise self.bad(field, f"unknown PTX type {name!r}")
        return DTYPES[name]

    def int_(self, v, field: str, minimum: int = 0) -> int:
        if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
            self.problems.append((field, f"expected an int >= {minimum}, got {v!r}"))
            return minimum
        return v

    def opt_int(self, v, field: str):
        return None if v is None else self.int_(v, field)

    def dims(self, v, field: str) -> tuple:
        if not (isinstance(v, list) and len(v) == 3 and all(
                isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in v)):
            self.problems.append((field, f"expected 3 positive ints, got {v!r}"))
            return (1, 1, 1)
        return tuple(v)

    def loc(self, v, field: str) -> ir.Loc:
        if not (isinstance(v, list) and len(v) == 3 and isinstance(v[0], int)
                and isinstance(v[1], int) and isinstance(v[2], str)
                and 0 <= v[0] < len(self.files)):
            raise self.bad(field, f"expected [file index, line, function], got {v!r}")
        return ir.Loc(self.files[v[0]], v[1], v[2])

    def value(self, v, field: str):
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, dict) and len(v) == 1:
            (tag, x), = v.items()
            if tag == "$tuple" and isinstance(x, list):
                return tuple(self.value(e, field) for e in x)
            if tag == "$list" and isinstance(x, list):
                return [self.value(e, field) for e in x]
            if tag == "$float" and x in ("nan", "inf", "-inf"):
                return float(x)
        raise self.bad(field, f"not a constant value: {v!r}")

    def consts(self, v) -> dict:
        if not isinstance(v, dict):
            self.problems.append(("consts", f"expected an object, got {type(v).__name__}"))
            return {}
        out = {}
        for n, x in v.items():
            got = self._try(lambda: self.value(x, f"consts.{n}"))
            if got is not None or x is None:
                out[n] = got
        return out

    # -- declarations -------------------------------------------------------------------------
    def reg_entry(self, r, field: str) -> ir.Reg:
        if not (isinstance(r, list) and len(r) == 3 and isinstance(r[0], int)
                and isinstance(r[2], str)):
            raise self.bad(field, f"expected [id, dtype, hint], got {r!r}")
        return ir.Reg(r[0], self.dtype(r[1], f"{field}.dtype"), r[2])

    def param(self, p, field: str) -> ir.ParamInfo:
        if not isinstance(p, dict) or not isinstance(p.get("name"), str):
            raise self.bad(field, f"expected a parameter object with a name, got {p!r}")
        if p.get("kind") not in ("ptr", "scalar", "tensormap"):
            raise self.bad(f"{field}.kind", f"{p.get('kind')!r} is not ptr, scalar or tensormap")
        return ir.ParamInfo(p["name"], p["kind"], self.dtype(p.get("dtype"), f"{field}.dtype"),
                            self.int_(p.get("size"), f"{field}.size", 1),
                            self.int_(p.get("align"), f"{field}.align", 1))

    def smem_layout(self, v) -> str:
        """A document written before the single window has no ``smem_layout``: its static
        variables were separate declarations (layout "split")."""
        if v not in ir.SMEM_LAYOUTS:
            self.problems.append(("smem_layout", f"expected one of "
                                  f"{', '.join(map(repr, ir.SMEM_LAYOUTS))}, got {v!r}"))
            return "window"
        return v

    def shared(self, v, field: str) -> ir.SharedVar:
        if not isinstance(v, dict) or not isinstance(v.get("name"), str):
            raise self.bad(field, f"expected a shared variable object with a name, got {v!r}")
        shape = self.value(v.get("shape"), f"{field}.shape")
        return ir.SharedVar(
            v["name"], self.int_(v.get("nbytes"), f"{field}.nbytes"),
            self.int_(v.get("align"), f"{field}.align", 1),
            self.dtype(v.get("dtype"), f"{field}.dtype"), shape,
            swizzle=self.int_(v.get("swizzle", 0), f"{field}.swizzle"),
            dynamic=bool(v.get("dynamic", False)),
            offset=self.int_(v.get("offset", 0), f"{field}.offset"),
            loc=self.loc(v["loc"], f"{field}.loc") if v.get("loc") is not None else None)

    def local_var(self, v, field: str) -> ir.LocalVar:
        if not isinstance(v, dict) or not isinstance(v.get("name"), str):
            raise self.bad(field, f"expected a local variable object with a name, got {v!r}")
        shape = self.value(v.get("shape"), f"{field}.shape")
        if not (isinstance(shape, tuple) and shape and all(
                isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in shape)):
            raise self.bad(f"{field}.shape", f"expected a tuple of positive ints, got {shape!r}")
        return ir.LocalVar(
            v["name"], self.int_(v.get("nbytes"), f"{field}.nbytes", 1),
            self.int_(v.get("align"), f"{field}.align", 1),
            self.dtype(v.get("dtype"), f"{field}.dtype"), shape,
            loc=self.loc(v["loc"], f"{field}.loc") if v.get("loc") is not None else None)

    # -- statements ---------------------------------------------------------------------------
    def block(self, v, field: str) -> list:
        if not isinstance(v, list):
            self.problems.append((field, f"expected a list of statements, got {v!r}"[:200]))
            return []
        out = []
        for i, s in enumerate(v):
            got = self._try(lambda: self.stmt(s, f"{field}[{i}]"))
            if got is not None:
                out.append(got)
        return out

    def reg_ref(self, v, field: str, kind: "str | None" = None) -> ir.Reg:
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < len(self.regs):
            raise self.bad(field, f"expected a register index below {len(self.regs)}, got {v!r}")
        r = self.regs[v]
        if r is None:
            raise self.bad(field, f"register {v} is malformed (see regs[{v}])")
        if kind is not None and r.dtype.kind != kind:
            raise self.bad(field, f"expected a .{kind} register, got register {v} of type "
                           f".{r.dtype}")
        return r

    def stmt(self, s, field: str):
        if not isinstance(s, dict):
            raise self.bad(field, f"expected a statement object, got {type(s).__name__}")
        op = s.get("op")
        loc = self.loc(s.get("loc"), f"{field}.loc")
        if op == "instr":
            return self.instr(s, field, loc)
        if op == "if":
            orelse = s.get("else")
            return ir.If(self.reg_ref(s.get("cond"), f"{field}.cond", "pred"),
                         bool(s.get("negate", False)), ir.Block(self.block(s.get("then"),
                                                                           f"{field}.then")),
                         ir.Block(self.block(orelse, f"{field}.else"))
                         if orelse is not None else None, loc, bool(s.get("uniform", False)))
        if op == "for":
            unroll = s.get("unroll")
            if unroll is not None and (not isinstance(unroll, int) or isinstance(unroll, bool)):
                raise self.bad(f"{field}.unroll", f"expected an int or null, got {unroll!r}")
            var = self.reg_ref(s.get("var"), f"{field}.var")
            bounds = [self.bound(s.get(b), f"{field}.{b}", var) for b in ("start", "stop", "step")]
            return ir.For(var, *bounds, ir.Block(self.block(s.get("body"), f"{field}.body")),
                          loc, unroll)
        if op == "loop":
            return ir.Loop(ir.Block(self.block(s.get("body"), f"{field}.body")), loc)
        if op == "break":
            cond = s.get("cond")
            return ir.Break(self.reg_ref(cond, f"{field}.cond", "pred") if cond is not None
                            else None, bool(s.get("negate", False)), loc)
        if op == "annotation":
            if s.get("kind") not in ir.ANNOTATION_KINDS or not isinstance(s.get("name"), str):
                raise self.bad(field, f"annotation needs kind in {ir.ANNOTATION_KINDS} and a "
                               f"name, got kind={s.get('kind')!r} name={s.get('name')!r}")
            return ir.Annotation(s["kind"], s["name"], loc)
        raise self.bad(f"{field}.op", f"unknown statement {op!r} (expected instr, if, for, "
                       "loop, break or annotation)")

    def bound(self, v, field: str, var: ir.Reg):
        o = self.operand(v, field)
        if not isinstance(o, (ir.Reg, ir.Imm)):
            raise self.bad(field, f"a loop bound must be a register or an immediate, got {o!r}")
        return o

    def instr(self, s: dict, field: str, loc: ir.Loc) -> ir.Instr:
        spelling = s.get("spelling")
        if not isinstance(spelling, str) or not spelling:
            raise self.bad(f"{field}.spelling", f"expected an instruction spelling, got "
                           f"{spelling!r}")
        try:
            cands = self.isa.candidates(spelling)
        except SpellingError as e:
            raise self.bad(f"{field}.spelling", str(e).replace("\n", " ")) from None
        raw = s.get("operands")
        if not isinstance(raw, list):
            raise self.bad(f"{field}.operands", f"expected a list, got {type(raw).__name__}")
        ops = tuple(self.operand(o, f"{field}.operands[{j}]") for j, o in enumerate(raw))
        guard = s.get("guard")
        if guard is not None:
            if not (isinstance(guard, list) and len(guard) == 2 and isinstance(guard[1], bool)):
                raise self.bad(f"{field}.guard", f"expected [register, negated], got {guard!r}")
            guard = (self.reg_ref(guard[0], f"{field}.guard", "pred"), guard[1])
        want = s.get("binding")
        if want is not None:  # the form the tracer took; it must still accept the operands
            cands = [(b, m) for b, m in cands if b.name == want]
            if not cands:
                raise self.bad(f"{field}.binding", f"binding {want!r} does not accept "
                               f"{spelling!r} in this instruction set")
        reasons = []
        for binding, mods in cands:
            why = check_operands(binding, mods, ops)
            if why is None:
                return ir.Instr(spelling, ops, binding, mods, loc, guard)
            reasons.append(f"{binding.name}: {why}")
        raise self.bad(f"{field}.operands", f"{spelling}: " + "; ".join(reasons))

    # -- operands -----------------------------------------------------------------------------
    def operand(self, v, field: str):
        if not isinstance(v, dict) or not v:
            raise self.bad(field, f"expected an operand object, got {v!r}")
        if "r" in v:
            return self.reg_ref(v["r"], f"{field}.r")
        if "imm" in v:
            val = self.value(v["imm"], f"{field}.imm")
            if not isinstance(val, (bool, int, float)):
                raise self.bad(f"{field}.imm", f"expected a number, got {v['imm']!r}")
            return ir.Imm(val, self.dtype(v.get("t"), f"{field}.t"))
        if "sym" in v:
            if not isinstance(v["sym"], str) or v.get("space") not in ("param", "shared",
                                                                        "local"):
                raise self.bad(field, f"expected a symbol name and space param|shared|local, got "
                               f"{v!r}")
            return ir.Sym(v["sym"], v["space"])
        if "sreg" in v:
            if not isinstance(v["sreg"], str):
                raise self.bad(f"{field}.sreg", f"expected a name, got {v['sreg']!r}")
            return ir.SReg(v["sreg"], self.dtype(v.get("t"), f"{field}.t"))
        if "addr" in v:
            base = v["addr"]
            if not (isinstance(base, int) and not isinstance(base, bool)):
                base = self.operand(base, f"{field}.addr")
                if not isinstance(base, (ir.Reg, ir.Sym)):
                    raise self.bad(f"{field}.addr", f"an address base is a register, a symbol "
                                   f"or an int; got {base!r}")
            off = v.get("off", 0)
            if not isinstance(off, int) or isinstance(off, bool):
                raise self.bad(f"{field}.off", f"expected an int offset, got {off!r}")
            return ir.Addr(base, off)
        if "vec" in v:
            if not isinstance(v["vec"], list) or v.get("sep", ",") not in (",", "|"):
                raise self.bad(field, f"expected a vector (list) with sep ',' or '|', got {v!r}")
            return ir.Vec(tuple(self.operand(e, f"{field}.vec[{i}]")
                                for i, e in enumerate(v["vec"])), v.get("sep", ","))
        if "tref" in v:
            base = self.operand(v["tref"], f"{field}.tref")
            coords = v.get("coords")
            if not isinstance(coords, list):
                raise self.bad(f"{field}.coords", f"expected a list, got {coords!r}")
            return ir.TensorRef(base, tuple(self.operand(c, f"{field}.coords[{i}]")
                                            for i, c in enumerate(coords)))
        if "sink" in v:
            return ir.Sink()
        if "str" in v and isinstance(v["str"], str):
            return v["str"]
        raise self.bad(field, f"unknown operand {v!r} (expected one of r, imm, sym, sreg, addr, "
                       "vec, tref, sink, str)")


def check_operands(binding, mods: dict, ops: tuple) -> "str | None":
    """None when `ops` fit `binding`'s operand specs (the tracer's rules), else why not."""
    specs = binding.operand_specs(mods)
    required = [s for s in specs if not s.optional]
    if not len(required) <= len(ops) <= len(specs):
        return f"takes {len(required)}-{len(specs)} operands, got {len(ops)}"
    for j, (spec, o) in enumerate(zip(specs, ops)):
        why = _check_operand(spec, o)
        if why:
            return f"operand {j} ({spec.name!r}, kind {spec.kind}): {why}"
    return None


def _typed(reg, spec_type) -> "str | None":
    if spec_type is None or "|" in spec_type:
        return None
    want = DTYPES.get(spec_type)
    if want is not None and not type_compatible(reg.dtype, want):
        return f"expects type .{want}, got a register of type .{reg.dtype}"
    return None


def _check_operand(spec, o) -> "str | None":
    kind = spec.kind
    if kind in ("d", "inout"):
        if isinstance(o, ir.Sink) and kind == "d":
            return None
        if not isinstance(o, ir.Reg):
            return f"expects a register, got {o!r}"
        return _typed(o, spec.type)
    if kind == "a":
        if isinstance(o, ir.Reg):
            return _typed(o, spec.type)
        if isinstance(o, (ir.Imm, ir.SReg, ir.Sym)):
            return None
        return f"expects a register, special register, symbol or immediate, got {o!r}"
    if kind == "i":
        return None if isinstance(o, ir.Imm) else f"expects an immediate, got {o!r}"
    if kind == "m":
        return None if isinstance(o, ir.Addr) else f"expects a memory address, got {o!r}"
    if kind in ("dv", "av", "inoutv"):
        if not isinstance(o, ir.Vec) or o.sep != ",":
            return f"expects a brace vector, got {o!r}"
        if spec.count is not None and len(o.elems) != spec.count:
            return f"expects {spec.count} elements, got {len(o.elems)}"
        for e in o.elems:
            if isinstance(e, ir.Reg):
                why = _typed(e, spec.type)
                if why:
                    return why
            elif not ((kind == "av" and isinstance(e, ir.Imm))
                      or (kind == "dv" and isinstance(e, ir.Sink))):
                return f"unexpected vector element {e!r}"
        return None
    if kind == "dpair":
        if not isinstance(o, ir.Vec) or o.sep != "|" or len(o.elems) != 2:
            return f"expects a pair a|b, got {o!r}"
        types = (spec.type or "|").split("|")
        for e, ty in zip(o.elems, types):
            if isinstance(e, ir.Reg):
                why = _typed(e, ty or None)
                if why:
                    return why
            elif not isinstance(e, ir.Sink):
                return f"expects registers or _, got {e!r}"
        return None
    if kind == "sym":
        return None if isinstance(o, (ir.Sym, str)) else f"expects a symbol, got {o!r}"
    if kind == "tref":
        return None if isinstance(o, ir.TensorRef) else f"expects a tensor reference, got {o!r}"
    return f"unsupported operand kind {kind!r} in the binding"
