"""Base PTX bindings (every target): memory, arithmetic, comparison, conversion, movement,
control, barriers, fences, atomics and warp-level collectives.

One table entry per line. Sources: PTX ISA 8.x/9.0, chapter 9.7 ("Instructions"); the section is
noted per group. Spellings not listed here are rejected at trace time with a suggestion.

Notes on what is deliberately *not* a callable instruction:

- ``bra`` is emitted only by structured control flow (`T.if_`, `T.range`, `T.while_`, `T.loop`,
  `T.break_`): an unstructured branch would break the structure numsim and sync_check rely on. The
  ``bra`` binding below exists so that ``T.ptx.bra`` fails with that explanation.
- Special registers are read through ``mov`` (``mov.u32 r, %tid.x``; the language's `T.tid.x`,
  `T.sreg("clock64")` do exactly that); they are operands, not instructions. Reads of ``%clock``,
  ``%clock64`` and ``%globaltimer`` are `representative` for numsim.

Forms told apart only by operands share a spelling and are separate bindings (``mov`` /
``mov.pack`` / ``mov.unpack``): the tracer takes the first whose operands fit.
"""

from tirxh.core.bindings import Binding, Effects, operands as ops, opt, slot
from tirxh.core.pluginmanager import hookimpl

B = Binding
INT = "u16 u32 u64 s16 s32 s64"
INT32_64 = "u32 u64 s32 s64"
BITS = "b16 b32 b64"
FLT = "f32 f64"
HALF = "f16 f16x2 bf16 bf16x2"
# ld/st have no .f16/.bf16 types: halves move as .b16 (PTX ISA 9.7.9.8)
LDST_T = "b8 b16 b32 b64 b128 u8 u16 u32 u64 s8 s16 s32 s64 f32 f64"
SPACES = "global shared shared::cta shared::cluster local param const"
SCOPE = "cta cluster gpu sys"
RND_F = "rn rz rm rp"
RND_I = "rni rzi rmi rpi"
CMP = "eq ne lt le gt ge lo ls hi hs equ neu ltu leu gtu geu num nan"
CVT_T = "u8 u16 u32 u64 s8 s16 s32 s64 f16 bf16 f32 f64 e4m3 e5m2 tf32"
ATOM_T = "b16 b32 b64 u32 u64 s32 s64 f32 f64 f16 bf16 f16x2 bf16x2"
_BF16_SM90 = {"bf16": 90, "bf16x2": 90}  # add/sub/mul on bf16 arrived with sm_90 (fma: sm_80)
_WIDE = {"u16": "u32", "u32": "u64", "s16": "s32", "s32": "s64"}


def _wide(m) -> str:
    """The destination type of mul/mad: double width for .wide, else the operand type."""
    return _WIDE.get(m["type"], m["type"]) if m["mode"] == "wide" else "$type"


def _atom_operands(m):
    # atom{...}.cas.type d, [a], b, c; other ops d, [a], b; + cache-policy with .L2::cache_hint
    words = "d:$type m@$ss b:$type" + (" c:$type" if m["op"] == "cas" else "")
    return ops(words + (" cache_policy=a:b64" if m.get("hint") else ""))


def _vec_or_scalar(dest: bool):
    """ld: ``d, [a]{, cache-policy}``; st: ``[a], b{, cache-policy}``; .vN takes a brace vector.

    The cache-policy operand (a b64 from ``createpolicy``) is present exactly when
    ``.L2::cache_hint`` is spelled (PTX ISA 9.7.9.8).
    """
    def f(m):
        val = ("dv:$type:$vec" if dest else "av:$type:$vec") if m.get("vec") else \
            ("d:$type" if dest else "a:$type")
        words = [val, "m@$ss"] if dest else ["m@$ss", val]
        if m.get("hint"):
            words.append("cache_policy=a:b64")
        return ops(" ".join(words))
    return f


_L1_EVICT = "L1::evict_normal L1::evict_unchanged L1::evict_first L1::evict_last L1::no_allocate"


def _ldst_slots(op):
    # ld{.sem}{.scope}{.ss}{.cop}{.nc}{.L1::*}{.L2::*}{.L2::cache_hint}{.L2::NB}{.vec}.type
    if op == "ld":
        return (
            opt("sem", "weak volatile relaxed acquire"), opt("scope", SCOPE), opt("ss", SPACES),
            opt("cop", "ca cg cs lu cv"), opt("nc", "nc"), opt("evict", _L1_EVICT),
            opt("l2evict", "L2::evict_first L2::evict_last L2::evict_normal"),
            opt("hint", "L2::cache_hint"), opt("prefetch", "L2::64B L2::128B L2::256B"),
            opt("vec", "v2 v4 v8"), slot("type", LDST_T),
        )
    return (
        opt("sem", "weak volatile relaxed release"), opt("scope", SCOPE), opt("ss", SPACES),
        opt("cop", "wb cg cs wt"), opt("evict", _L1_EVICT),
        opt("l2evict", "L2::evict_first L2::evict_last L2::evict_normal"),
        opt("hint", "L2::cache_hint"), opt("vec", "v2 v4 v8"), slot("type", LDST_T),
    )


def _check_redux(m):
    if m["op"] in ("and", "or", "xor") and m["type"] != "b32":
        return f"redux.sync.{m['op']} takes .b32 (found .{m['type']})"
    if m["op"] in ("add", "min", "max") and m["type"] == "b32":
        return f"redux.sync.{m['op']} takes .u32 or .s32 (found .b32)"
    return None


def _mov_pack(n: int):
    """``mov.bN d, {a, b(, c, d)}``: pack n equal parts into one wide register (and unpack)."""
    def f(m, dest=False):
        part = f"b{int(m['type'][1:]) // n}"
        return ops(f"dv:{part}:{n} a:$type" if dest else f"d:$type av:{part}:{n}")
    return f


_BRA_MSG = ("bra is emitted only by structured control flow: use T.if_/T.else_, T.range, T.while_, "
            "T.loop and T.break_ (an unstructured branch would hide the control flow from numsim "
            "and sync_check)")


def _cvt_operands(m):
    # packed conversions take two sources (hi, lo): cvt.rn.bf16x2.f32 d, a, b
    if m["dtype"] in ("f16x2", "bf16x2", "e4m3x2", "e5m2x2") and m["atype"] == "f32":
        return ops("d:$dtype a:f32 b:f32")
    if m["atype"] in ("e4m3x2", "e5m2x2") and m["dtype"] in ("f16x2",):
        return ops("d:$dtype a:b16")
    return ops("d:$dtype a:$atype")


BINDINGS = [
    # 9.7.9.8-9 ld / st ----------------------------------------------------------------------------
    B("ld", "ld", _ldst_slots("ld"), _vec_or_scalar(True),
      "Load from a state space into registers (vector forms .v2/.v4/.v8).",
      effects=Effects(read="$ss"), example="ld.global.f32",
      examples=("ld.shared::cta.v4.b32", "ld.global.nc.L1::no_allocate.v2.f32", "ld.local.u32",
                "ld.param.u64", "ld.relaxed.gpu.global.s32", "ld.acquire.sys.global.u64",
                "ld.volatile.shared.u16", "ld.global.cg.L2::128B.b64",
                "ld.global.L2::cache_hint.f32", "ld.global.b128", "ld.global.L1::evict_last.u8",
                "ld.const.f32", "ld.f32"),
      modifier_min_sm={"v8": 100}, modifier_ptx_isa={"b128": (8, 3)}),
    B("st", "st", _ldst_slots("st"), _vec_or_scalar(False),
      "Store registers to a state space (vector forms .v2/.v4/.v8).",
      effects=Effects(write="$ss"), example="st.global.f32",
      examples=("st.shared::cta.v4.f32", "st.global.cs.v2.u32", "st.local.b64",
                "st.release.gpu.global.u32", "st.relaxed.cta.shared.s32",
                "st.global.L1::no_allocate.b16", "st.global.L2::cache_hint.b32", "st.b16",
                "st.volatile.global.u8", "st.shared::cluster.u32"),
      modifier_min_sm={"v8": 100, "shared::cluster": 90}, modifier_ptx_isa={"b128": (8, 3)}),
    B("prefetch", "prefetch", (opt("ss", "global local"),
                               slot("level", "L1 L2 L2::evict_last L2::evict_normal")),
      ops("m@$ss"), "Prefetch a line into a cache level (a hint; no architectural effect).",
      example="prefetch.global.L2",
      examples=("prefetch.L1", "prefetch.global.L2::evict_last")),
    B("cvta", "cvta", (opt("to", "to"), slot("ss", "global shared shared::cta shared::cluster "
                                                  "local const param"),
                       slot("size", "u32 u64")), ops("d:$size a:$size"),
      "Convert between a state-space address and a generic address.", example="cvta.to.global.u64",
      examples=("cvta.shared.u64", "cvta.to.shared.u64")),
    B("mov", "mov", (slot("type", "pred b16 b32 b64 b128 u16 u32 u64 s16 s32 s64 f32 f64"),),
      ops("d:$type a:$type"),
      "Copy a register, immediate, special register (``%tid.x``) or symbol address.",
      example="mov.u32", examples=("mov.u32 a=%tid.x", "mov.u32 a=%laneid", "mov.u32 a=%warpid",
                                   "mov.u64 a=%clock64", "mov.u64 a=%globaltimer",
                                   "mov.u32 a=%ctaid.y", "mov.b32 a=%lanemask_lt", "mov.pred",
                                   "mov.f32 a=1.5", "mov.b64", "mov.b16"),
      modifier_ptx_isa={"b128": (8, 3)}),
    B("mov.pack", "mov", (slot("type", "b32 b64 b128"),), _mov_pack(2),
      "Pack two halves into one register: ``mov.b64 d, {lo, hi}`` (lo is the low half).",
      example="mov.b64", examples=("mov.b32", "mov.b128"), modifier_ptx_isa={"b128": (8, 3)}),
    B("mov.pack4", "mov", (slot("type", "b64 b128"),), _mov_pack(4),
      "Pack four quarters into one register: ``mov.b64 d, {q0, q1, q2, q3}``.",
      example="mov.b64", examples=("mov.b128",), modifier_ptx_isa={"b128": (8, 3)}),
    B("mov.unpack", "mov", (slot("type", "b32 b64 b128"),),
      lambda m: _mov_pack(2)(m, dest=True),
      "Split a register into two halves: ``mov.b64 {lo, hi}, a``.", example="mov.b64",
      examples=("mov.b32", "mov.b128"), modifier_ptx_isa={"b128": (8, 3)}),
    # 9.7.1 integer arithmetic ---------------------------------------------------------------------
    B("add.int", "add", (opt("sat", "sat"), slot("type", INT)), ops("d:$type a:$type b:$type"),
      "Integer add (.sat only for .s32).", example="add.u32", examples=("add.sat.s32", "add.s64")),
    B("sub.int", "sub", (opt("sat", "sat"), slot("type", INT)), ops("d:$type a:$type b:$type"),
      "Integer subtract.", example="sub.s32", examples=("sub.u64",)),
    B("mul.int", "mul", (slot("mode", "hi lo wide"), slot("type", INT)),
      lambda m: ops("d:{} a:$type b:$type".format(_wide(m))),
      "Integer multiply: .lo/.hi half of the product, or .wide (double width).",
      example="mul.lo.u32", examples=("mul.wide.s32", "mul.hi.u64")),
    B("mad.int", "mad", (slot("mode", "hi lo wide"), opt("sat", "sat"), slot("type", INT)),
      lambda m: ops("d:{0} a:$type b:$type c:{0}".format(_wide(m))),
      "Integer multiply-add (d = a*b + c); .wide takes and returns double width c/d.",
      example="mad.lo.u32", examples=("mad.wide.u32", "mad.hi.sat.s32")),
    B("div.int", "div", (slot("type", INT),), ops("d:$type a:$type b:$type"),
      "Integer divide (truncating).", example="div.u32", examples=("div.s64",)),
    B("rem.int", "rem", (slot("type", INT),), ops("d:$type a:$type b:$type"),
      "Integer remainder.", example="rem.u32"),
    B("min.int", "min", (opt("relu", "relu"), slot("type", INT)), ops("d:$type a:$type b:$type"),
      "Integer minimum (.relu: clamp at 0, .s32 only, sm_90).", example="min.u32",
      examples=("min.relu.s32",), modifier_min_sm={"relu": 90}),
    B("max.int", "max", (opt("relu", "relu"), slot("type", INT)), ops("d:$type a:$type b:$type"),
      "Integer maximum.", example="max.s32", examples=("max.u64",),
      modifier_min_sm={"relu": 90}),
    B("abs.int", "abs", (slot("type", "s16 s32 s64"),), ops("d:$type a:$type"),
      "Integer absolute value.", example="abs.s32"),
    B("neg.int", "neg", (slot("type", "s16 s32 s64"),), ops("d:$type a:$type"),
      "Integer negate.", example="neg.s32"),
    B("dp4a", "dp4a", (slot("atype", "u32 s32"), slot("btype", "u32 s32")),
      lambda m: ops("d:{0} a:$atype b:$btype c:{0}".format(
          "u32" if m["atype"] == m["btype"] == "u32" else "s32")),
      "Four-way byte dot product accumulate: d = c + sum(a.byte[i] * b.byte[i]).",
      min_sm=61, ptx_isa=(5, 0), example="dp4a.s32.s32", examples=("dp4a.u32.u32",
                                                                  "dp4a.u32.s32")),
    B("popc", "popc", (slot("type", "b32 b64"),), ops("d:u32 a:$type"),
      "Population count.", example="popc.b32", examples=("popc.b64",)),
    B("clz", "clz", (slot("type", "b32 b64"),), ops("d:u32 a:$type"),
      "Count leading zeros.", example="clz.b32"),
    B("brev", "brev", (slot("type", "b32 b64"),), ops("d:$type a:$type"),
      "Bit reverse.", example="brev.b32"),
    B("bfind", "bfind", (opt("shiftamt", "shiftamt"), slot("type", INT32_64)), ops("d:u32 a:$type"),
      "Find the most significant non-sign bit.", example="bfind.u32",
      examples=("bfind.shiftamt.s64",)),
    B("bfe", "bfe", (slot("type", INT32_64),), ops("d:$type a:$type b:u32 c:u32"),
      "Bit-field extract: c bits of a starting at bit b (sign-extended for .sN).",
      example="bfe.u32", examples=("bfe.s64",)),
    B("bfi", "bfi", (slot("type", "b32 b64"),), ops("d:$type f:$type a:$type b:u32 c:u32"),
      "Bit-field insert: c bits of f into a at bit b.", example="bfi.b32", examples=("bfi.b64",)),
    # 9.7.3 floating point -------------------------------------------------------------------------
    B("add.f", "add", (opt("rnd", RND_F), opt("ftz", "ftz"), opt("sat", "sat"), slot("type", FLT)),
      ops("d:$type a:$type b:$type"), "Floating-point add.", example="add.f32",
      examples=("add.rz.ftz.f32", "add.rn.f64")),
    B("sub.f", "sub", (opt("rnd", RND_F), opt("ftz", "ftz"), opt("sat", "sat"), slot("type", FLT)),
      ops("d:$type a:$type b:$type"), "Floating-point subtract.", example="sub.f32"),
    B("mul.f", "mul", (opt("rnd", RND_F), opt("ftz", "ftz"), opt("sat", "sat"), slot("type", FLT)),
      ops("d:$type a:$type b:$type"), "Floating-point multiply.", example="mul.f32",
      examples=("mul.rn.sat.f32",)),
    B("fma.f", "fma", (slot("rnd", RND_F), opt("ftz", "ftz"), opt("sat", "sat"), slot("type", FLT)),
      ops("d:$type a:$type b:$type c:$type"), "Fused multiply-add, one rounding.",
      example="fma.rn.f32", examples=("fma.rz.ftz.sat.f32", "fma.rn.f64")),
    B("mad.f", "mad", (slot("rnd", RND_F), opt("ftz", "ftz"), opt("sat", "sat"), slot("type", FLT)),
      ops("d:$type a:$type b:$type c:$type"), "Multiply-add (same as fma with a rounding mode).",
      example="mad.rn.f32"),
    B("div.f", "div", (slot("rnd", "rn rz rm rp"), opt("ftz", "ftz"), slot("type", FLT)),
      ops("d:$type a:$type b:$type"), "IEEE-rounded floating-point divide.",
      example="div.rn.f32", examples=("div.rz.f64",)),
    B("div.approx", "div", (slot("rnd", "approx full"), opt("ftz", "ftz"), slot("type", "f32")),
      ops("d:$type a:$type b:$type"), "Fast f32 divide (.approx, or .full at 2 ulp).",
      example="div.approx.f32", examples=("div.full.ftz.f32",)),
    B("min.f", "min", (opt("ftz", "ftz"), opt("nan", "NaN"), opt("xorsign", "xorsign"),
                       opt("abs", "abs"), slot("type", FLT)), ops("d:$type a:$type b:$type"),
      "Floating-point minimum (.NaN propagates NaN; .xorsign.abs: |min| with the XOR of the "
      "signs).", example="min.f32",
      examples=("min.NaN.f32", "min.f64", "min.xorsign.abs.f32"),
      modifier_min_sm={"NaN": 80, "xorsign": 86}),
    B("max.f", "max", (opt("ftz", "ftz"), opt("nan", "NaN"), opt("xorsign", "xorsign"),
                       opt("abs", "abs"), slot("type", FLT)), ops("d:$type a:$type b:$type"),
      "Floating-point maximum.", example="max.f32", examples=("max.ftz.NaN.f32",),
      modifier_min_sm={"NaN": 80, "xorsign": 86}),
    B("abs.f", "abs", (opt("ftz", "ftz"), slot("type", FLT)), ops("d:$type a:$type"),
      "Floating-point absolute value.", example="abs.f32", examples=("abs.f64",)),
    B("neg.f", "neg", (opt("ftz", "ftz"), slot("type", FLT)), ops("d:$type a:$type"),
      "Floating-point negate.", example="neg.f32", examples=("neg.ftz.f32",)),
    B("rcp", "rcp", (slot("rnd", "rn rz rm rp"), opt("ftz", "ftz"), slot("type", FLT)),
      ops("d:$type a:$type"), "Reciprocal, IEEE-rounded.", example="rcp.rn.f32",
      examples=("rcp.rz.f64",)),
    B("rcp.approx", "rcp", (slot("rnd", "approx"), opt("ftz", "ftz"), slot("type", FLT)),
      ops("d:$type a:$type"), "Reciprocal, approximate (.f64 needs .ftz).",
      example="rcp.approx.f32", examples=("rcp.approx.ftz.f64",)),
    B("sqrt", "sqrt", (slot("rnd", "rn rz rm rp"), opt("ftz", "ftz"), slot("type", FLT)),
      ops("d:$type a:$type"), "Square root, IEEE-rounded.", example="sqrt.rn.f32",
      examples=("sqrt.rn.f64",)),
    B("sqrt.approx", "sqrt", (slot("rnd", "approx"), opt("ftz", "ftz"), slot("type", "f32")),
      ops("d:$type a:$type"), "Square root, approximate.",
      example="sqrt.approx.f32", examples=("sqrt.approx.ftz.f32",)),
    B("rsqrt", "rsqrt", (slot("rnd", "approx"), opt("ftz", "ftz"), slot("type", FLT)),
      ops("d:$type a:$type"), "Reciprocal square root, approximate (.f64 needs .ftz on sm_80).",
      example="rsqrt.approx.f32", examples=("rsqrt.approx.ftz.f64",)),
    B("ex2", "ex2", (slot("rnd", "approx"), opt("ftz", "ftz"), slot("type", "f32 f16 bf16 f16x2 "
                                                                    "bf16x2")),
      ops("d:$type a:$type"),
      "2^a, approximate (.f16/.f16x2 without .ftz; .bf16/.bf16x2 with .ftz, sm_90).",
      example="ex2.approx.f32",
      examples=("ex2.approx.ftz.f32", "ex2.approx.f16", "ex2.approx.f16x2"),
      modifier_min_sm={"f16": 75, "f16x2": 75, "bf16": 90, "bf16x2": 90}),
    B("lg2", "lg2", (slot("rnd", "approx"), opt("ftz", "ftz"), slot("type", "f32")),
      ops("d:$type a:$type"), "log2(a), approximate.",
      example="lg2.approx.f32", examples=("lg2.approx.ftz.f32",)),
    B("sin", "sin", (slot("rnd", "approx"), opt("ftz", "ftz"), slot("type", "f32")),
      ops("d:$type a:$type"), "sin(a), approximate.",
      example="sin.approx.f32"),
    B("cos", "cos", (slot("rnd", "approx"), opt("ftz", "ftz"), slot("type", "f32")),
      ops("d:$type a:$type"), "cos(a), approximate.",
      example="cos.approx.ftz.f32"),
    B("tanh", "tanh", (slot("rnd", "approx"), slot("type", "f32 f16 bf16 f16x2 bf16x2")),
      ops("d:$type a:$type"), "tanh(a), approximate (sm_75+; bf16 forms sm_90).", min_sm=75,
      ptx_isa=(7, 0), example="tanh.approx.f32",
      examples=("tanh.approx.f16x2",), modifier_min_sm={"bf16": 90, "bf16x2": 90}),
    # 9.7.4 half precision -------------------------------------------------------------------------
    B("add.h", "add", (opt("rnd", "rn"), opt("ftz", "ftz"), opt("sat", "sat"), slot("type", HALF)),
      ops("d:$type a:$type b:$type"), "Half-precision add (scalar or packed x2; bf16 sm_90).",
      example="add.rn.f16x2", examples=("add.f16",), modifier_min_sm=_BF16_SM90),
    B("sub.h", "sub", (opt("rnd", "rn"), opt("ftz", "ftz"), opt("sat", "sat"), slot("type", HALF)),
      ops("d:$type a:$type b:$type"), "Half-precision subtract (bf16 sm_90).",
      example="sub.rn.f16", modifier_min_sm=_BF16_SM90),
    B("mul.h", "mul", (opt("rnd", "rn"), opt("ftz", "ftz"), opt("sat", "sat"), slot("type", HALF)),
      ops("d:$type a:$type b:$type"), "Half-precision multiply (bf16 sm_90).",
      example="mul.rn.f16", examples=("mul.ftz.sat.f16x2",), modifier_min_sm=_BF16_SM90),
    B("fma.h", "fma", (slot("rnd", "rn"), opt("ftz", "ftz"), opt("sat", "sat relu"),
                       slot("type", HALF)),
      ops("d:$type a:$type b:$type c:$type"), "Half-precision fused multiply-add.",
      example="fma.rn.bf16x2", examples=("fma.rn.f16", "fma.rn.relu.bf16", "fma.rn.sat.f16x2")),
    B("min.h", "min", (opt("ftz", "ftz"), opt("nan", "NaN"), slot("type", HALF)),
      ops("d:$type a:$type b:$type"), "Half-precision minimum.", min_sm=80, ptx_isa=(7, 0),
      example="min.bf16x2", examples=("min.NaN.f16",)),
    B("max.h", "max", (opt("ftz", "ftz"), opt("nan", "NaN"), slot("type", HALF)),
      ops("d:$type a:$type b:$type"), "Half-precision maximum.", min_sm=80, ptx_isa=(7, 0),
      example="max.f16x2", examples=("max.bf16",)),
    B("abs.h", "abs", (opt("ftz", "ftz"), slot("type", HALF)), ops("d:$type a:$type"),
      "Half-precision absolute value.", min_sm=80, ptx_isa=(7, 0), example="abs.f16",
      examples=("abs.bf16x2",)),
    B("neg.h", "neg", (opt("ftz", "ftz"), slot("type", HALF)), ops("d:$type a:$type"),
      "Half-precision negate.", min_sm=80, ptx_isa=(7, 0), example="neg.f16x2",
      examples=("neg.bf16",)),
    # 9.7.5 comparison and selection ---------------------------------------------------------------
    B("setp", "setp", (slot("cmp", CMP), opt("ftz", "ftz"),
                       slot("type", "b16 b32 b64 u16 u32 u64 s16 s32 s64 f32 f64 f16 bf16")),
      ops("d:pred a:$type b:$type"), "Compare and set a predicate (.f16/.bf16: sm_53/sm_90).",
      example="setp.lt.u32", examples=("setp.geu.ftz.f32", "setp.ne.b64", "setp.eq.f16"),
      modifier_min_sm={"bf16": 90}),
    B("selp", "selp", (slot("type", "b16 b32 b64 u16 u32 u64 s16 s32 s64 f32 f64"),),
      ops("d:$type a:$type b:$type c:pred"), "Select a or b by predicate c.", example="selp.u32",
      examples=("selp.f32", "selp.b64")),
    # 9.7.7 logic and shift ------------------------------------------------------------------------
    B("and", "and", (slot("type", "pred " + BITS),), ops("d:$type a:$type b:$type"),
      "Bitwise AND.", example="and.b32", examples=("and.pred",)),
    B("or", "or", (slot("type", "pred " + BITS),), ops("d:$type a:$type b:$type"),
      "Bitwise OR.", example="or.b32", examples=("or.b64",)),
    B("xor", "xor", (slot("type", "pred " + BITS),), ops("d:$type a:$type b:$type"),
      "Bitwise XOR.", example="xor.b32", examples=("xor.pred",)),
    B("not", "not", (slot("type", "pred " + BITS),), ops("d:$type a:$type"),
      "Bitwise NOT.", example="not.b32", examples=("not.pred",)),
    B("cnot", "cnot", (slot("type", BITS),), ops("d:$type a:$type"),
      "C-style logical not (1 if a == 0).", example="cnot.b32"),
    B("lop3", "lop3", (slot("type", "b32"),), ops("d:b32 a:b32 b:b32 c:b32 lut=i:b32"),
      "Arbitrary 3-input logic by an 8-bit truth table (lut: F(0xF0, 0xCC, 0xAA)).",
      example="lop3.b32 lut=150"),
    B("shl", "shl", (slot("type", BITS),), ops("d:$type a:$type b:u32"),
      "Shift left.", example="shl.b32", examples=("shl.b64",)),
    B("shr", "shr", (slot("type", BITS + " u16 u32 u64 s16 s32 s64"),),
      ops("d:$type a:$type b:u32"),
      "Shift right (arithmetic for .sN).", example="shr.u32", examples=("shr.s64",)),
    B("shf", "shf", (slot("dir", "l r"), slot("mode", "wrap clamp"), slot("type", "b32")),
      ops("d:b32 a:b32 b:b32 c:u32"), "Funnel shift.", example="shf.l.wrap.b32",
      examples=("shf.r.clamp.b32",)),
    B("prmt", "prmt", (slot("type", "b32"), opt("mode", "f4e b4e rc8 ecl ecr rc16")),
      ops("d:b32 a:b32 b:b32 c:b32"), "Byte permute (c selects bytes of {b, a}).",
      example="prmt.b32", examples=("prmt.b32.f4e",)),
    # 9.7.9.21 cvt ---------------------------------------------------------------------------------
    B("cvt", "cvt", (opt("rnd", RND_F + " " + RND_I + " rna"), opt("ftz", "ftz"),
                     opt("relu", "relu"), opt("sat", "sat satfinite"), opt("relu2", "relu"),
                     slot("dtype", CVT_T + " f16x2 bf16x2 e4m3x2 e5m2x2"),
                     slot("atype", CVT_T + " f16x2 e4m3x2 e5m2x2")), _cvt_operands,
      "Convert between types with rounding/saturation; packed .bf16x2/.f16x2 (from two f32) and "
      "fp8 .e4m3x2/.e5m2x2 (from two f32 or one f16x2, .satfinite; to f16x2) forms. .relu sits "
      "before .satfinite for f16x2/bf16x2 and after it for fp8 (slot relu2), as the ISA spells it.",
      example="cvt.rn.f32.s32",
      examples=("cvt.rzi.s32.f32", "cvt.f32.f16", "cvt.rn.f16.f32", "cvt.rn.bf16.f32",
                "cvt.u64.u32", "cvt.s32.s8", "cvt.rn.bf16x2.f32", "cvt.rn.relu.f16x2.f32",
                "cvt.rn.satfinite.bf16x2.f32", "cvt.rna.tf32.f32", "cvt.f64.f32",
                "cvt.sat.u8.s32", "cvt.rn.satfinite.e4m3x2.f32", "cvt.rn.satfinite.relu.e5m2x2.f32",
                "cvt.rn.f16x2.e4m3x2", "cvt.rn.satfinite.e4m3x2.f16x2"),
      modifier_min_sm={"e4m3x2": 89, "e5m2x2": 89, "e4m3": 89, "e5m2": 89, "tf32": 80},
      modifier_ptx_isa={"satfinite": (8, 1)}),
    # 9.7.12 control flow --------------------------------------------------------------------------
    B("bra", "bra", (opt("uni", "uni"),), ops("target=sym"), _BRA_MSG, check=lambda m: _BRA_MSG),
    B("ret", "ret", (opt("uni", "uni"),), (), "Return from the kernel.", example="ret"),
    B("exit", "exit", (), (), "Terminate the thread.", example="exit"),
    B("trap", "trap", (), (), "Abort the kernel with an error.", example="trap"),
    B("nanosleep", "nanosleep", (slot("type", "u32"),), ops("t:u32"),
      "Suspend the thread for about t ns.", min_sm=70, ptx_isa=(6, 3),
      example="nanosleep.u32"),
    # 9.7.13 parallel synchronization --------------------------------------------------------------
    B("bar.sync", "bar", (opt("cta", "cta"), slot("op", "sync"),), ops("a:u32 b:u32?"),
      "CTA barrier a (with b threads, a multiple of 32): wait for all participants.",
      effects=Effects(sync="bar.sync"), example="bar.sync a=0",
      examples=("bar.sync a=1 b=128", "bar.cta.sync")),
    B("bar.arrive", "bar", (opt("cta", "cta"), slot("op", "arrive"),), ops("a:u32 b:u32"),
      "Arrive at CTA barrier a (b threads) without waiting.",
      effects=Effects(sync="bar.arrive"), example="bar.arrive a=1 b=64"),
    B("bar.warp.sync", "bar", (slot("op", "warp"), slot("sync", "sync")), ops("membermask:b32"),
      "Synchronize the lanes of a warp in membermask.", effects=Effects(sync="warp"),
      example="bar.warp.sync membermask=-1"),
    B("barrier.sync", "barrier", (opt("cta", "cta"), slot("op", "sync"), opt("aligned", "aligned")),
      ops("a:u32 b:u32?"), "Named barrier a (with b threads): wait (.aligned: warp-uniform).",
      effects=Effects(sync="bar.sync"), example="barrier.sync",
      examples=("barrier.sync.aligned a=2 b=256", "barrier.cta.sync.aligned")),
    B("barrier.arrive", "barrier", (opt("cta", "cta"), slot("op", "arrive"),
                                    opt("aligned", "aligned")),
      ops("a:u32 b:u32"), "Named barrier a (b threads): arrive without waiting.",
      effects=Effects(sync="bar.arrive"), example="barrier.arrive a=3 b=256",
      examples=("barrier.arrive.aligned a=3 b=256",)),
    B("membar", "membar", (slot("level", "cta gl sys"),), (),
      "Memory barrier (orders this thread's accesses at a scope).",
      effects=Effects(sync="fence"), example="membar.gl",
      examples=("membar.cta", "membar.sys")),
    B("fence", "fence", (opt("sem", "sc acq_rel"), slot("scope", SCOPE)), (),
      "Memory fence with a scope.", effects=Effects(sync="fence"), min_sm=70, ptx_isa=(6, 0),
      example="fence.acq_rel.gpu",
      examples=("fence.sc.cta", "fence.sys", "fence.acq_rel.cluster"),
      modifier_min_sm={"cluster": 90}),
    B("atom", "atom", (opt("sem", "relaxed acquire release acq_rel"), opt("scope", SCOPE),
                       opt("ss", "global shared shared::cta shared::cluster"),
                       slot("op", "and or xor cas exch add inc dec min max"),
                       opt("noftz", "noftz"), opt("hint", "L2::cache_hint"),
                       slot("type", ATOM_T)), _atom_operands,
      "Atomic read-modify-write; returns the old value (.cas: d = old, stores c when old == b; "
      ".f16/.bf16 add need .noftz).",
      effects=Effects(read="$ss", write="$ss", atomic=True), example="atom.global.add.u32",
      examples=("atom.shared.cas.b32", "atom.global.cas.b64", "atom.relaxed.gpu.global.max.s32",
                "atom.acq_rel.cta.shared::cta.exch.b32", "atom.global.add.f32",
                "atom.global.add.noftz.f16", "atom.global.add.noftz.f16x2",
                "atom.global.add.noftz.bf16x2", "atom.add.u64", "atom.global.inc.u32",
                "atom.global.add.L2::cache_hint.u32"),
      modifier_min_sm={"cluster": 90, "shared::cluster": 90, "bf16": 90, "bf16x2": 90}),
    B("red", "red", (opt("sem", "relaxed release"), opt("scope", SCOPE),
                     opt("ss", "global shared shared::cta shared::cluster"),
                     slot("op", "and or xor add inc dec min max"), opt("noftz", "noftz"),
                     opt("hint", "L2::cache_hint"), slot("type", ATOM_T)),
      lambda m: ops("m@$ss b:$type" + (" cache_policy=a:b64" if m.get("hint") else "")),
      "Atomic reduction without a result.",
      effects=Effects(read="$ss", write="$ss", atomic=True), example="red.global.add.f32",
      examples=("red.shared.add.u32", "red.release.gpu.global.add.u64",
                "red.global.add.noftz.bf16x2", "red.global.max.s32", "red.global.or.b32"),
      modifier_min_sm={"cluster": 90, "shared::cluster": 90, "bf16": 90, "bf16x2": 90}),
    # 9.7.8 warp-level data movement ---------------------------------------------------------------
    B("shfl.sync", "shfl", (slot("sync", "sync"), slot("mode", "up down bfly idx"),
                            slot("type", "b32")),
      ops("d:b32 a:b32 b:u32 c:u32 membermask:b32"),
      "Exchange a register between lanes of a warp (b: lane/offset, c: clamp|segment mask).",
      min_sm=70, ptx_isa=(6, 0), effects=Effects(sync="warp"),
      example="shfl.sync.bfly.b32 c=31 membermask=-1",
      examples=("shfl.sync.idx.b32 c=31", "shfl.sync.up.b32 c=0", "shfl.sync.down.b32 c=31")),
    B("shfl.sync.pred", "shfl", (slot("sync", "sync"), slot("mode", "up down bfly idx"),
                                 slot("type", "b32")),
      ops("d=dpair:b32|pred a:b32 b:u32 c:u32 membermask:b32"),
      "shfl.sync also returning p: whether the source lane was in range (``d|p``).",
      min_sm=70, ptx_isa=(6, 0), effects=Effects(sync="warp"),
      example="shfl.sync.down.b32 c=31 membermask=-1"),
    B("vote.sync", "vote", (slot("mode", "all any uni"), slot("sync", "sync"),
                            slot("type", "pred")),
      ops("d:pred a:pred membermask:b32"), "Warp vote over a predicate.", min_sm=70,
      ptx_isa=(6, 0), effects=Effects(sync="warp"), example="vote.all.sync.pred",
      examples=("vote.any.sync.pred", "vote.uni.sync.pred")),
    B("vote.ballot", "vote", (slot("mode", "ballot"), slot("sync", "sync"), slot("type", "b32")),
      ops("d:b32 a:pred membermask:b32"), "Warp ballot: bit i set when lane i's predicate holds.",
      min_sm=70, ptx_isa=(6, 0), effects=Effects(sync="warp"), example="vote.ballot.sync.b32"),
    B("match.sync", "match", (slot("mode", "any all"), slot("sync", "sync"),
                              slot("type", "b32 b64")),
      ops("d:b32 a:$type membermask:b32"), "Lanes holding the same value.", min_sm=70,
      ptx_isa=(6, 0), effects=Effects(sync="warp"), example="match.any.sync.b32",
      examples=("match.any.sync.b64",)),
    B("redux.sync", "redux", (slot("sync", "sync"), slot("op", "add min max and or xor"),
                              slot("type", "u32 s32 b32")),
      ops("d:$type a:$type membermask:b32"),
      "Warp-wide integer reduction (add/min/max on .u32/.s32; and/or/xor on .b32).", min_sm=80,
      ptx_isa=(7, 0), effects=Effects(sync="warp"), check=_check_redux,
      example="redux.sync.add.u32", examples=("redux.sync.min.s32", "redux.sync.xor.b32")),
    B("activemask", "activemask", (slot("type", "b32"),), ops("d:b32"),
      "Mask of the currently active lanes.", min_sm=70, ptx_isa=(6, 2),
      example="activemask.b32"),
]


@hookimpl
def tirxh_register_instructions(isa):
    isa.extend(BINDINGS, owner="tirxh.isa_base")
