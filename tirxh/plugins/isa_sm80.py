"""Ampere bindings (binding set ``sm80``, sm_80 and newer): cp.async, ldmatrix, movmatrix, mma.sync
and the mbarrier operations that exist since sm_80.

Sources: PTX ISA 9.0 sections 9.7.9.25 (cp.async), 9.7.14.5.15 (ldmatrix), 9.7.14.5.17
(movmatrix), 9.7.14.5.14 (mma.sync fragment shapes), 9.7.13.15 (mbarrier). One table entry per
binding; operand lists that depend on the shape (MMA fragments) are computed from the modifiers by
small functions next to the table.

mbarrier forms that arrived with sm_90 (``.cluster`` scope, ``.shared::cluster``, the arrive count
operand) are accepted by the same bindings so that one name covers one instruction; the target
check rejects ``.cluster``/``.shared::cluster`` below sm_90 through `Binding.modifier_min_sm`.
"""

from tirxh.core.bindings import Binding, Effects, operands as ops, opt, slot
from tirxh.core.pluginmanager import hookimpl

B = Binding
ISET = dict(iset="sm80", min_sm=80, ptx_isa=(7, 0))
MBAR_SS = "shared shared::cta shared::cluster"
_SM90_MBAR = {"cluster": 90, "shared::cluster": 90}
_EVICT = "L2::evict_last L2::evict_normal L2::evict_first L2::evict_unchanged"
_EVICT2 = "L2::evict_first L2::evict_unchanged"


# --- cp.async -------------------------------------------------------------------------------------

def _cp_async_ops(m):
    """``[dst], [src], cp-size{, src-size}{, cache-policy}`` (src-size < cp-size zero-fills)."""
    words = "dst=m@$dst src=m@global size=i:u32 src_size=a:u32"
    if m.get("hint"):
        return ops(words + " cache_policy=a:b64")  # src-size is then spelled out too
    return ops(words + "?")


# --- mma.sync -------------------------------------------------------------------------------------

# (shape, A/B element type) -> (A regs, B regs); each register holds 32 bits of packed elements
_MMA_FRAG = {
    ("m16n8k8", "f16"): (2, 1), ("m16n8k16", "f16"): (4, 2),
    ("m16n8k8", "bf16"): (2, 1), ("m16n8k16", "bf16"): (4, 2),
    ("m16n8k4", "tf32"): (2, 1), ("m16n8k8", "tf32"): (4, 2),
    ("m16n8k16", "s8"): (2, 1), ("m16n8k32", "s8"): (4, 2),
    ("m16n8k16", "u8"): (2, 1), ("m16n8k32", "u8"): (4, 2),
}
# accumulator type -> (registers of a 16x8 C/D fragment, register type)
_MMA_ACC = {"f32": (4, "f32"), "f16": (2, "f16x2"), "s32": (4, "s32")}
_MMA_ACC_OK = {"f16": ("f16", "f32"), "bf16": ("f32",), "tf32": ("f32",), "s8": ("s32",),
               "u8": ("s32",)}


def _check_mma(m):
    a, b = m["atype"], m["btype"]
    if (a in ("s8", "u8")) != (b in ("s8", "u8")) or (a not in ("s8", "u8") and a != b):
        return f"mma.sync A/B types .{a}/.{b} do not pair (same float type, or s8/u8 mixes)"
    if (m["shape"], a) not in _MMA_FRAG:
        shapes = sorted(s for s, t in _MMA_FRAG if t == a)
        return f"mma.sync with .{a} inputs takes shapes {', '.join('.' + s for s in shapes)}"
    if m["dtype"] not in _MMA_ACC_OK[a] or m["ctype"] not in _MMA_ACC_OK[a]:
        return (f"mma.sync with .{a} inputs accumulates in "
                f"{' or '.join('.' + t for t in _MMA_ACC_OK[a])}")
    if m["dtype"] != m["ctype"]:  # ptxas: ".dtype must be '.f16' when .ctype is '.f16'"
        return f"mma.sync accumulates in one type: .dtype .{m['dtype']} != .ctype .{m['ctype']}"
    if m.get("satfinite") and a not in ("s8", "u8"):
        return ".satfinite applies to integer mma.sync only"
    return None


def _mma_ops(m):
    na, nb = _MMA_FRAG[(m["shape"], m["atype"])]
    nd, td = _MMA_ACC[m["dtype"]]
    nc, tc = _MMA_ACC[m["ctype"]]
    return ops(f"d=dv:{td}:{nd} a=av:b32:{na} b=av:b32:{nb} c=av:{tc}:{nc}")


# --- mbarrier -------------------------------------------------------------------------------------

def _test_wait_ops(m):
    # .parity: the phase parity (u32); otherwise the state returned by an earlier arrive (b64)
    return ops("d:pred m@$ss parity=a:u32" if m.get("parity") else "d:pred m@$ss state=a:b64")


BINDINGS = [
    # 9.7.9.25 cp.async (non-bulk, generic proxy; completes at cp.async.wait_* or an mbarrier) ----
    B("cp.async", "cp", (slot("async", "async"), slot("cop", "ca cg"), slot("dst", "shared "
                                                                             "shared::cta"),
                         slot("src", "global"), opt("hint", "L2::cache_hint"),
                         opt("prefetch", "L2::64B L2::128B L2::256B")), _cp_async_ops,
      "Asynchronous global->shared copy of 4, 8 or 16 bytes (.cg: 16 only); joins the current "
      "cp.async group.", effects=Effects(read="global", write="$dst", sync="cp.async"),
      example="cp.async.ca.shared.global size=4",
      examples=("cp.async.cg.shared.global.L2::128B size=16",
                "cp.async.ca.shared::cta.global size=8 src_size=4",
                "cp.async.cg.shared.global.L2::cache_hint size=16 src_size=16"), **ISET),
    B("cp.async.commit_group", "cp", (slot("async", "async"), slot("op", "commit_group")), (),
      "Close the current group of cp.async operations.",
      effects=Effects(sync="cp.async.commit"), example="cp.async.commit_group", **ISET),
    B("cp.async.wait_group", "cp", (slot("async", "async"), slot("op", "wait_group")),
      ops("n=i:u32"), "Wait until at most n most recent cp.async groups are pending.",
      effects=Effects(sync="cp.async.wait"), example="cp.async.wait_group n=1", **ISET),
    B("cp.async.wait_all", "cp", (slot("async", "async"), slot("op", "wait_all")), (),
      "Wait for every cp.async of this thread (commits the open group first).",
      effects=Effects(sync="cp.async.wait"), example="cp.async.wait_all", **ISET),
    B("cp.async.mbarrier.arrive", "cp", (slot("async", "async"), slot("mbarrier", "mbarrier"),
                                         slot("op", "arrive"), opt("noinc", "noinc"),
                                         opt("ss", "shared shared::cta"), slot("type", "b64")),
      ops("mbar=m@$ss"),
      "Arrive on an mbarrier when all prior cp.async of this thread complete (.noinc: the "
      "arrival is counted in the barrier's expected count).",
      effects=Effects(read="$ss", write="$ss", sync="cp.async.mbarrier.arrive", atomic=True),
      example="cp.async.mbarrier.arrive.shared.b64",
      examples=("cp.async.mbarrier.arrive.noinc.shared::cta.b64",), **ISET),
    # 9.7.9.17 createpolicy: the b64 cache-policy operand of .L2::cache_hint forms -----------------
    B("createpolicy", "createpolicy", (slot("kind", "fractional"), slot("primary", _EVICT),
                                       opt("secondary", _EVICT2),
                                       slot("type", "b64")),
      ops("d:b64 fraction=a:f32?"),
      "Make an L2 cache policy applying `primary` to a fraction (default 1.0) of accesses.",
      example="createpolicy.fractional.L2::evict_last.b64",
      examples=("createpolicy.fractional.L2::evict_first.L2::evict_unchanged.b64 fraction=0.5",),
      **ISET),
    B("createpolicy.range", "createpolicy", (slot("kind", "range"), opt("ss", "global"),
                                             slot("primary", _EVICT),
                                             opt("secondary", _EVICT2),
                                             slot("type", "b64")),
      ops("d:b64 m@$ss primary_size=a:u32 total_size=a:u32"),
      "Make an L2 cache policy for the address range [a, a+total_size): `primary` on its first "
      "primary_size bytes.",
      example="createpolicy.range.global.L2::evict_last.L2::evict_first.b64",
      examples=("createpolicy.range.L2::evict_normal.b64",), **ISET),
    # 9.7.14.5.15 ldmatrix -------------------------------------------------------------------------
    B("ldmatrix", "ldmatrix", (slot("sync", "sync"), slot("aligned", "aligned"),
                               slot("shape", "m8n8"), slot("num", "x1 x2 x4"),
                               opt("trans", "trans"), opt("ss", "shared shared::cta"),
                               slot("type", "b16")),
      ops("d=dv:b32:$num m@$ss"),
      "Warp-collective load of 1, 2 or 4 8x8 b16 matrices from shared memory into fragments "
      "(each lane supplies one row address).",
      effects=Effects(read="$ss", sync="warp"), example="ldmatrix.sync.aligned.m8n8.x4.shared.b16",
      examples=("ldmatrix.sync.aligned.m8n8.x2.trans.shared::cta.b16",
                "ldmatrix.sync.aligned.m8n8.x1.shared.b16"), **ISET),
    # 9.7.14.5.17 movmatrix (sm_75, PTX ISA 7.8; in this set: there is no sm_75 binding set) -------
    B("movmatrix", "movmatrix", (slot("sync", "sync"), slot("aligned", "aligned"),
                                 slot("shape", "m8n8"), slot("trans", "trans"),
                                 slot("type", "b16")),
      ops("d:b32 a:b32"),
      "Warp-collective transpose of an 8x8 b16 matrix in registers: lane l holds row l/4, "
      "columns 2(l%4) (low half) and 2(l%4)+1 (high half), of a and of the transpose d. "
      "Needs sm_75; in the sm80 set as there is no sm_75 set.",
      effects=Effects(sync="warp"), example="movmatrix.sync.aligned.m8n8.trans.b16",
      **dict(ISET, min_sm=75, ptx_isa=(7, 8))),
    # 9.7.14.5.14 mma.sync -------------------------------------------------------------------------
    B("mma.sync", "mma", (slot("sync", "sync"), slot("aligned", "aligned"),
                          slot("shape", "m16n8k4 m16n8k8 m16n8k16 m16n8k32"),
                          slot("alayout", "row"), slot("blayout", "col"),
                          opt("satfinite", "satfinite"), slot("dtype", "f16 f32 s32"),
                          slot("atype", "f16 bf16 tf32 s8 u8"),
                          slot("btype", "f16 bf16 tf32 s8 u8"), slot("ctype", "f16 f32 s32")),
      _mma_ops,
      "Warp-level matrix multiply-accumulate D = A*B + C on register fragments (bf16/f16 "
      "m16n8k8/k16, tf32 m16n8k4/k8, s8/u8 m16n8k16/k32).",
      effects=Effects(sync="warp"), check=_check_mma,
      example="mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
      examples=("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32",
                "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
                "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32",
                "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32",
                "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
                "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32",
                "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.u8.s8.s32"), **ISET),
    # 9.7.13.15 mbarrier (sm_80 forms; sm_90 adds .cluster scope and .shared::cluster) ----------
    B("mbarrier.init", "mbarrier", (slot("op", "init"), opt("ss", "shared shared::cta"),
                                    slot("type", "b64")),
      ops("m@$ss count=a:u32"),
      "Initialize an mbarrier with an expected arrival count (phase 0, tx-count 0).",
      effects=Effects(write="$ss", sync="mbarrier.init"),
      example="mbarrier.init.shared::cta.b64 count=1", examples=("mbarrier.init.b64",), **ISET),
    B("mbarrier.inval", "mbarrier", (slot("op", "inval"), opt("ss", "shared shared::cta"),
                                     slot("type", "b64")),
      ops("m@$ss"), "Invalidate an mbarrier before its memory is reused.",
      effects=Effects(write="$ss", sync="mbarrier.inval"),
      example="mbarrier.inval.shared::cta.b64", **ISET),
    B("mbarrier.arrive", "mbarrier", (slot("op", "arrive"), opt("sem", "release"),
                                      opt("scope", "cta cluster"), opt("ss", MBAR_SS),
                                      slot("type", "b64")),
      ops("state=d:b64 m@$ss count=a:u32?"),
      "Arrive on an mbarrier (count arrivals, default 1; count needs sm_90); returns the phase "
      "state, or the sink _ (.shared::cluster requires _).",
      effects=Effects(read="$ss", write="$ss", sync="mbarrier.arrive", atomic=True),
      example="mbarrier.arrive.shared::cta.b64",
      examples=("mbarrier.arrive.shared.b64", "mbarrier.arrive.release.cta.shared::cta.b64",
                "mbarrier.arrive.release.cluster.shared::cta.b64 count=2"),
      modifier_min_sm=_SM90_MBAR, **ISET),
    B("mbarrier.arrive_drop", "mbarrier", (slot("op", "arrive_drop"), opt("sem", "release"),
                                           opt("scope", "cta cluster"), opt("ss", MBAR_SS),
                                           slot("type", "b64")),
      ops("state=d:b64 m@$ss count=a:u32?"),
      "Arrive and drop this thread from the expected count of later phases.",
      effects=Effects(read="$ss", write="$ss", sync="mbarrier.arrive_drop", atomic=True),
      example="mbarrier.arrive_drop.shared::cta.b64", modifier_min_sm=_SM90_MBAR, **ISET),
    B("mbarrier.test_wait", "mbarrier", (slot("op", "test_wait"), opt("parity", "parity"),
                                         opt("sem", "acquire"), opt("scope", "cta cluster"),
                                         opt("ss", "shared shared::cta"), slot("type", "b64")),
      _test_wait_ops,
      "Non-blocking test whether a phase (by state or .parity) completed; returns a predicate.",
      effects=Effects(read="$ss", sync="mbarrier.wait"),
      example="mbarrier.test_wait.parity.shared::cta.b64",
      examples=("mbarrier.test_wait.shared.b64",
                "mbarrier.test_wait.parity.acquire.cluster.shared::cta.b64"),
      modifier_min_sm=_SM90_MBAR, **ISET),
    B("mbarrier.pending_count", "mbarrier", (slot("op", "pending_count"), slot("type", "b64")),
      ops("d:u32 state=a:b64"), "Pending arrival count encoded in an arrive's returned state.",
      example="mbarrier.pending_count.b64", **ISET),
]


@hookimpl
def tirxh_register_instructions(isa):
    isa.extend(BINDINGS, owner="tirxh.isa_sm80")
