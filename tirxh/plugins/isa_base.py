"""Base PTX bindings (every target): memory, arithmetic, comparison, conversion, movement,
control, barriers, fences, atomics and warp-level collectives.

One table entry per line. Sources: PTX ISA 8.x/9.0, chapter 9.7 ("Instructions"); the section is
noted per group. Spellings not listed here are rejected at trace time with a suggestion.
"""

from tirxh.core.bindings import Binding, Effects, operands as ops, opt, slot
from tirxh.core.pluginmanager import hookimpl

B = Binding
INT = "u16 u32 u64 s16 s32 s64"
INT32_64 = "u32 u64 s32 s64"
BITS = "b16 b32 b64"
FLT = "f32 f64"
HALF = "f16 f16x2 bf16 bf16x2"
LDST_T = "b8 b16 b32 b64 b128 u8 u16 u32 u64 s8 s16 s32 s64 f16 bf16 f32 f64"
SPACES = "global shared shared::cta shared::cluster local param const"
SCOPE = "cta cluster gpu sys"
RND_F = "rn rz rm rp"
RND_I = "rni rzi rmi rpi"
CMP = "eq ne lt le gt ge lo ls hi hs equ neu ltu leu gtu geu num nan"
CVT_T = "u8 u16 u32 u64 s8 s16 s32 s64 f16 bf16 f32 f64 e4m3 e5m2 tf32"


def _vec_or_scalar(dest: bool):
    def f(m):
        if dest:
            return ops("dv:$type:$vec m" if m.get("vec") else "d:$type m cache_policy=a:b64?")
        return ops("m av:$type:$vec" if m.get("vec") else "m a:$type cache_policy=a:b64?")
    return f


def _ldst_slots(op):
    sem = "weak volatile relaxed acquire" if op == "ld" else "weak volatile relaxed release"
    return (
        opt("sem", sem), opt("scope", SCOPE), opt("ss", SPACES), opt("nc", "nc"),
        opt("cop", "ca cg cs lu cv wb wt"),
        opt("evict", "L1::evict_normal L1::evict_unchanged L1::evict_first L1::evict_last "
                     "L1::no_allocate"),
        opt("l2evict", "L2::evict_first L2::evict_last L2::evict_normal"),
        opt("hint", "L2::cache_hint"), opt("prefetch", "L2::64B L2::128B L2::256B"),
        opt("vec", "v2 v4 v8"), slot("type", LDST_T),
    )


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
      "Load from a state space into registers (vector forms .v2/.v4).",
      effects=Effects(read="$ss"), example="ld.global.f32"),
    B("st", "st", _ldst_slots("st"), _vec_or_scalar(False),
      "Store registers to a state space (vector forms .v2/.v4).",
      effects=Effects(write="$ss"), example="st.global.f32"),
    B("prefetch", "prefetch", (opt("ss", "global local"), slot("level", "L1 L2")), ops("m"),
      "Prefetch a line into a cache level (a hint; no architectural effect).",
      example="prefetch.global.L2"),
    B("cvta", "cvta", (opt("to", "to"), slot("ss", "global shared shared::cta shared::cluster "
                                                  "local const param"),
                       slot("size", "u32 u64")), ops("d:$size a:$size"),
      "Convert between a state-space address and a generic address.", example="cvta.to.global.u64"),
    B("mov", "mov", (slot("type", "pred b16 b32 b64 b128 u16 u32 u64 s16 s32 s64 f16 bf16 f32 "
                                  "f64"),), ops("d:$type a:$type"),
      "Copy a register, immediate, special register or symbol address.", example="mov.u32"),
    # 9.7.1 integer arithmetic -------------------------------------------------------------------------
    B("add.int", "add", (opt("sat", "sat"), slot("type", INT)), ops("d:$type a:$type b:$type"),
      "Integer add (.sat only for .s32).", example="add.u32"),
    B("sub.int", "sub", (opt("sat", "sat"), slot("type", INT)), ops("d:$type a:$type b:$type"),
      "Integer subtract.", example="sub.s32"),
    B("mul.int", "mul", (slot("mode", "hi lo wide"), slot("type", INT)),
      lambda m: ops("d:{} a:$type b:$type".format(
          ({"u16": "u32", "u32": "u64", "s16": "s32", "s32": "s64"}.get(m["type"], m["type"]))
          if m["mode"] == "wide" else "$type")),
      "Integer multiply: .lo/.hi half of the product, or .wide (double width).",
      example="mul.lo.u32"),
    B("mad.int", "mad", (slot("mode", "hi lo wide"), opt("sat", "sat"), slot("type", INT)),
      lambda m: ops("d:{0} a:$type b:$type c:{0}".format(
          ({"u16": "u32", "u32": "u64", "s16": "s32", "s32": "s64"}.get(m["type"], m["type"]))
          if m["mode"] == "wide" else "$type")),
      "Integer multiply-add (d = a*b + c); .wide takes and returns double width c/d.",
      example="mad.lo.u32"),
    B("div.int", "div", (slot("type", INT),), ops("d:$type a:$type b:$type"),
      "Integer divide (truncating).", example="div.u32"),
    B("rem.int", "rem", (slot("type", INT),), ops("d:$type a:$type b:$type"),
      "Integer remainder.", example="rem.u32"),
    B("min.int", "min", (opt("relu", "relu"), slot("type", INT)), ops("d:$type a:$type b:$type"),
      "Integer minimum.", example="min.u32"),
    B("max.int", "max", (opt("relu", "relu"), slot("type", INT)), ops("d:$type a:$type b:$type"),
      "Integer maximum.", example="max.s32"),
    B("abs.int", "abs", (slot("type", "s16 s32 s64"),), ops("d:$type a:$type"),
      "Integer absolute value.", example="abs.s32"),
    B("neg.int", "neg", (slot("type", "s16 s32 s64"),), ops("d:$type a:$type"),
      "Integer negate.", example="neg.s32"),
    B("popc", "popc", (slot("type", "b32 b64"),), ops("d:u32 a:$type"),
      "Population count.", example="popc.b32"),
    B("clz", "clz", (slot("type", "b32 b64"),), ops("d:u32 a:$type"),
      "Count leading zeros.", example="clz.b32"),
    B("brev", "brev", (slot("type", "b32 b64"),), ops("d:$type a:$type"),
      "Bit reverse.", example="brev.b32"),
    B("bfind", "bfind", (opt("shiftamt", "shiftamt"), slot("type", INT32_64)), ops("d:u32 a:$type"),
      "Find the most significant non-sign bit.", example="bfind.u32"),
    B("bfe", "bfe", (slot("type", INT32_64),), ops("d:$type a:$type b:u32 c:u32"),
      "Bit-field extract.", example="bfe.u32"),
    B("bfi", "bfi", (slot("type", "b32 b64"),), ops("d:$type f:$type a:$type b:u32 c:u32"),
      "Bit-field insert.", example="bfi.b32"),
    # 9.7.3 floating point -------------------------------------------------------------------------------
    B("add.f", "add", (opt("rnd", RND_F), opt("ftz", "ftz"), opt("sat", "sat"), slot("type", FLT)),
      ops("d:$type a:$type b:$type"), "Floating-point add.", example="add.f32"),
    B("sub.f", "sub", (opt("rnd", RND_F), opt("ftz", "ftz"), opt("sat", "sat"), slot("type", FLT)),
      ops("d:$type a:$type b:$type"), "Floating-point subtract.", example="sub.f32"),
    B("mul.f", "mul", (opt("rnd", RND_F), opt("ftz", "ftz"), opt("sat", "sat"), slot("type", FLT)),
      ops("d:$type a:$type b:$type"), "Floating-point multiply.", example="mul.f32"),
    B("fma.f", "fma", (slot("rnd", RND_F), opt("ftz", "ftz"), opt("sat", "sat"), slot("type", FLT)),
      ops("d:$type a:$type b:$type c:$type"), "Fused multiply-add, one rounding.",
      example="fma.rn.f32"),
    B("mad.f", "mad", (slot("rnd", RND_F), opt("ftz", "ftz"), opt("sat", "sat"), slot("type", FLT)),
      ops("d:$type a:$type b:$type c:$type"), "Multiply-add (same as fma with a rounding mode).",
      example="mad.rn.f32"),
    B("div.f", "div", (slot("rnd", "approx full rn rz rm rp"), opt("ftz", "ftz"),
                       slot("type", FLT)),
      ops("d:$type a:$type b:$type"), "Floating-point divide (.approx, .full or IEEE rounding).",
      example="div.rn.f32"),
    B("min.f", "min", (opt("ftz", "ftz"), opt("nan", "NaN"), opt("xorsign", "xorsign.abs"),
                       slot("type", FLT)), ops("d:$type a:$type b:$type"),
      "Floating-point minimum.", example="min.f32"),
    B("max.f", "max", (opt("ftz", "ftz"), opt("nan", "NaN"), opt("xorsign", "xorsign.abs"),
                       slot("type", FLT)), ops("d:$type a:$type b:$type"),
      "Floating-point maximum.", example="max.f32"),
    B("abs.f", "abs", (opt("ftz", "ftz"), slot("type", FLT)), ops("d:$type a:$type"),
      "Floating-point absolute value.", example="abs.f32"),
    B("neg.f", "neg", (opt("ftz", "ftz"), slot("type", FLT)), ops("d:$type a:$type"),
      "Floating-point negate.", example="neg.f32"),
    B("rcp", "rcp", (slot("rnd", "approx rn rz rm rp"), opt("ftz", "ftz"), slot("type", FLT)),
      ops("d:$type a:$type"), "Reciprocal (.approx or IEEE-rounded).", example="rcp.rn.f32"),
    B("sqrt", "sqrt", (slot("rnd", "approx rn rz rm rp"), opt("ftz", "ftz"), slot("type", FLT)),
      ops("d:$type a:$type"), "Square root (.approx or IEEE-rounded).", example="sqrt.rn.f32"),
    B("rsqrt", "rsqrt", (slot("rnd", "approx"), opt("ftz", "ftz"), slot("type", FLT)),
      ops("d:$type a:$type"), "Reciprocal square root (approximate).", example="rsqrt.approx.f32"),
    B("ex2", "ex2", (slot("rnd", "approx"), opt("ftz", "ftz"), slot("type", "f32 f16 bf16 f16x2 "
                                                                    "bf16x2")),
      ops("d:$type a:$type"), "2^a, approximate.", example="ex2.approx.f32"),
    B("lg2", "lg2", (slot("rnd", "approx"), opt("ftz", "ftz"), slot("type", "f32")),
      ops("d:$type a:$type"), "log2(a), approximate.", example="lg2.approx.f32"),
    B("sin", "sin", (slot("rnd", "approx"), opt("ftz", "ftz"), slot("type", "f32")),
      ops("d:$type a:$type"), "sin(a), approximate.", example="sin.approx.f32"),
    B("cos", "cos", (slot("rnd", "approx"), opt("ftz", "ftz"), slot("type", "f32")),
      ops("d:$type a:$type"), "cos(a), approximate.", example="cos.approx.f32"),
    B("tanh", "tanh", (slot("rnd", "approx"), slot("type", "f32 f16 bf16 f16x2 bf16x2")),
      ops("d:$type a:$type"), "tanh(a), approximate (sm_75+).", min_sm=75, ptx_isa=(7, 0),
      example="tanh.approx.f32"),
    # 9.7.4 half precision ----------------------------------------------------------------------------
    B("add.h", "add", (opt("rnd", "rn"), opt("ftz", "ftz"), opt("sat", "sat"), slot("type", HALF)),
      ops("d:$type a:$type b:$type"), "Half-precision add (scalar or packed x2).",
      example="add.rn.f16x2"),
    B("sub.h", "sub", (opt("rnd", "rn"), opt("ftz", "ftz"), opt("sat", "sat"), slot("type", HALF)),
      ops("d:$type a:$type b:$type"), "Half-precision subtract.", example="sub.rn.bf16x2"),
    B("mul.h", "mul", (opt("rnd", "rn"), opt("ftz", "ftz"), opt("sat", "sat"), slot("type", HALF)),
      ops("d:$type a:$type b:$type"), "Half-precision multiply.", example="mul.rn.f16"),
    B("fma.h", "fma", (slot("rnd", "rn"), opt("ftz", "ftz"), opt("sat", "sat relu"),
                       slot("type", HALF)),
      ops("d:$type a:$type b:$type c:$type"), "Half-precision fused multiply-add.",
      example="fma.rn.bf16x2"),
    B("min.h", "min", (opt("ftz", "ftz"), opt("nan", "NaN"), slot("type", HALF)),
      ops("d:$type a:$type b:$type"), "Half-precision minimum.", min_sm=80, ptx_isa=(7, 0),
      example="min.bf16x2"),
    B("max.h", "max", (opt("ftz", "ftz"), opt("nan", "NaN"), slot("type", HALF)),
      ops("d:$type a:$type b:$type"), "Half-precision maximum.", min_sm=80, ptx_isa=(7, 0),
      example="max.f16x2"),
    # 9.7.5 comparison and selection -----------------------------------------------------------------
    B("setp", "setp", (slot("cmp", CMP), opt("ftz", "ftz"),
                       slot("type", "b16 b32 b64 u16 u32 u64 s16 s32 s64 f32 f64 f16 bf16")),
      ops("d:pred a:$type b:$type"), "Compare and set a predicate.", example="setp.lt.u32"),
    B("selp", "selp", (slot("type", "b16 b32 b64 u16 u32 u64 s16 s32 s64 f32 f64"),),
      ops("d:$type a:$type b:$type c:pred"), "Select a or b by predicate c.", example="selp.u32"),
    # 9.7.7 logic and shift ----------------------------------------------------------------------------
    B("and", "and", (slot("type", "pred " + BITS),), ops("d:$type a:$type b:$type"),
      "Bitwise AND.", example="and.b32"),
    B("or", "or", (slot("type", "pred " + BITS),), ops("d:$type a:$type b:$type"),
      "Bitwise OR.", example="or.b32"),
    B("xor", "xor", (slot("type", "pred " + BITS),), ops("d:$type a:$type b:$type"),
      "Bitwise XOR.", example="xor.b32"),
    B("not", "not", (slot("type", "pred " + BITS),), ops("d:$type a:$type"),
      "Bitwise NOT.", example="not.b32"),
    B("cnot", "cnot", (slot("type", BITS),), ops("d:$type a:$type"),
      "C-style logical not (1 if a == 0).", example="cnot.b32"),
    B("lop3", "lop3", (slot("type", "b32"),), ops("d:b32 a:b32 b:b32 c:b32 lut=i:b32"),
      "Arbitrary 3-input logic by an 8-bit truth table.", example="lop3.b32"),
    B("shl", "shl", (slot("type", BITS),), ops("d:$type a:$type b:u32"),
      "Shift left.", example="shl.b32"),
    B("shr", "shr", (slot("type", BITS + " u16 u32 u64 s16 s32 s64"),), ops("d:$type a:$type b:u32"),
      "Shift right (arithmetic for .sN).", example="shr.u32"),
    B("shf", "shf", (slot("dir", "l r"), slot("mode", "wrap clamp"), slot("type", "b32")),
      ops("d:b32 a:b32 b:b32 c:u32"), "Funnel shift.", example="shf.l.wrap.b32"),
    B("prmt", "prmt", (slot("type", "b32"), opt("mode", "f4e b4e rc8 ecl ecr rc16")),
      ops("d:b32 a:b32 b:b32 c:b32"), "Byte permute.", example="prmt.b32"),
    # 9.7.9.21 cvt ---------------------------------------------------------------------------------------
    B("cvt", "cvt", (opt("rnd", RND_F + " " + RND_I + " rna rs"), opt("ftz", "ftz"),
                     opt("sat", "sat satfinite"), opt("relu", "relu"),
                     slot("dtype", CVT_T + " f16x2 bf16x2 e4m3x2 e5m2x2"),
                     slot("atype", CVT_T + " e4m3x2 e5m2x2")), _cvt_operands,
      "Convert between types with rounding/saturation; packed .bf16x2/.f16x2/.e4m3x2 forms.",
      example="cvt.rn.f32.s32"),
    # 9.7.12 control flow ----------------------------------------------------------------------------
    B("ret", "ret", (opt("uni", "uni"),), (), "Return from the kernel.", example="ret"),
    B("exit", "exit", (), (), "Terminate the thread.", example="exit"),
    B("trap", "trap", (), (), "Abort the kernel with an error.", example="trap"),
    B("nanosleep", "nanosleep", (slot("type", "u32"),), ops("t:u32"),
      "Suspend the thread for about t ns.", min_sm=70, ptx_isa=(6, 3), example="nanosleep.u32"),
    # 9.7.13 parallel synchronization ----------------------------------------------------------------
    B("bar.sync", "bar", (slot("op", "sync"),), ops("a:u32 b:u32?"),
      "CTA barrier a (with b threads): wait for all participants.",
      effects=Effects(sync="bar.sync"), example="bar.sync"),
    B("bar.arrive", "bar", (slot("op", "arrive"),), ops("a:u32 b:u32"),
      "Arrive at CTA barrier a (b threads) without waiting.",
      effects=Effects(sync="bar.arrive"), example="bar.arrive"),
    B("bar.warp.sync", "bar", (slot("op", "warp"), slot("sync", "sync")), ops("membermask:b32"),
      "Synchronize the lanes of a warp in membermask.", effects=Effects(sync="bar.warp.sync"),
      example="bar.warp.sync"),
    B("barrier.sync", "barrier", (opt("cta", "cta"), slot("op", "sync"), opt("aligned", "aligned")),
      ops("a:u32 b:u32?"), "Named barrier a (with b threads): wait.",
      effects=Effects(sync="bar.sync"), example="barrier.sync"),
    B("barrier.arrive", "barrier", (opt("cta", "cta"), slot("op", "arrive"),
                                    opt("aligned", "aligned")),
      ops("a:u32 b:u32"), "Named barrier a (b threads): arrive without waiting.",
      effects=Effects(sync="bar.arrive"), example="barrier.arrive"),
    B("membar", "membar", (slot("level", "cta gl sys"),), (),
      "Memory barrier (orders this thread's accesses at a scope).",
      effects=Effects(sync="fence"), example="membar.gl"),
    B("fence", "fence", (opt("sem", "sc acq_rel"), slot("scope", SCOPE)), (),
      "Memory fence with a scope.", effects=Effects(sync="fence"), min_sm=70, ptx_isa=(6, 0),
      example="fence.acq_rel.gpu"),
    B("atom", "atom", (opt("sem", "relaxed acquire release acq_rel"), opt("scope", SCOPE),
                       opt("ss", "global shared shared::cta shared::cluster"),
                       slot("op", "and or xor cas exch add inc dec min max"),
                       opt("noftz", "noftz"),
                       slot("type", "b32 b64 u32 u64 s32 s64 f32 f64 f16 bf16 f16x2 bf16x2")),
      lambda m: ops("d:$type m b:$type c:$type" if m["op"] == "cas" else "d:$type m b:$type"),
      "Atomic read-modify-write; returns the old value.",
      effects=Effects(read="$ss", write="$ss", atomic=True), example="atom.global.add.u32"),
    B("red", "red", (opt("sem", "relaxed release"), opt("scope", SCOPE),
                     opt("ss", "global shared shared::cta shared::cluster"),
                     slot("op", "and or xor add inc dec min max"), opt("noftz", "noftz"),
                     slot("type", "b32 b64 u32 u64 s32 s64 f32 f64 f16 bf16 f16x2 bf16x2")),
      ops("m b:$type"), "Atomic reduction without a result.",
      effects=Effects(read="$ss", write="$ss", atomic=True), example="red.global.add.f32"),
    # 9.7.8 warp-level data movement -------------------------------------------------------------------
    B("shfl.sync", "shfl", (slot("sync", "sync"), slot("mode", "up down bfly idx"),
                            slot("type", "b32")),
      ops("d:b32 a:b32 b:u32 c:u32 membermask:b32"),
      "Exchange a register between lanes of a warp.", min_sm=70, ptx_isa=(6, 0),
      effects=Effects(sync="warp"), example="shfl.sync.bfly.b32"),
    B("vote.sync", "vote", (slot("mode", "all any uni"), slot("sync", "sync"),
                            slot("type", "pred")),
      ops("d:pred a:pred membermask:b32"), "Warp vote over a predicate.", min_sm=70,
      ptx_isa=(6, 0), effects=Effects(sync="warp"), example="vote.all.sync.pred"),
    B("vote.ballot", "vote", (slot("mode", "ballot"), slot("sync", "sync"), slot("type", "b32")),
      ops("d:b32 a:pred membermask:b32"), "Warp ballot: bit i set when lane i's predicate holds.",
      min_sm=70, ptx_isa=(6, 0), effects=Effects(sync="warp"), example="vote.ballot.sync.b32"),
    B("match.sync", "match", (slot("mode", "any all"), slot("sync", "sync"),
                              slot("type", "b32 b64")),
      ops("d:b32 a:$type membermask:b32"), "Lanes holding the same value.", min_sm=70,
      ptx_isa=(6, 0), effects=Effects(sync="warp"), example="match.any.sync.b32"),
    B("redux.sync", "redux", (slot("sync", "sync"), slot("op", "add min max and or xor"),
                              slot("type", "u32 s32 b32")),
      ops("d:$type a:$type membermask:b32"), "Warp-wide integer reduction.", min_sm=80,
      ptx_isa=(7, 0), effects=Effects(sync="warp"), example="redux.sync.add.u32"),
    B("activemask", "activemask", (slot("type", "b32"),), ops("d:b32"),
      "Mask of the currently active lanes.", min_sm=70, ptx_isa=(6, 2),
      example="activemask.b32"),
]


@hookimpl
def tirxh_register_instructions(isa):
    isa.extend(BINDINGS, owner="tirxh.isa_base")
