"""Blackwell bindings (binding set ``sm100a``: sm_100a and sm_110a/Thor): the tcgen05 family that
drives the 5th-generation tensor cores and tensor memory (TMEM).

Sources: PTX ISA 9.0 section 9.7.16 (tcgen05: alloc/dealloc/relinquish_alloc_permit, mma,
commit, ld/st with their shapes and register counts, wait, fence). Enough is bound for Blackwell
kernels to compile and be checked by ptxas; numsim does not model TMEM (its fidelity class for
these bindings is left to numsim, which reports them `incomplete`).

Tensor-memory addresses are 32-bit values (lane in the high 16 bits, column in the low 16) held in
registers; effects name that memory ``tmem`` (it is not a PTX state space). ``tcgen05.mma`` (A
from a shared-memory descriptor) and ``tcgen05.mma.ts`` (A in tensor memory, ``[a_tmem]``) share a
spelling and differ in operand A.
"""

from tirxh.core.bindings import Binding, Effects, operands as ops, opt, slot
from tirxh.core.pluginmanager import hookimpl

B = Binding
SM100A = dict(iset="sm100a", min_sm=100, ptx_isa=(8, 6))
GROUP = "cta_group::1 cta_group::2"
MMA_KIND = "kind::f16 kind::tf32 kind::f8f6f4 kind::i8"

# tcgen05.ld/st shape -> registers per .num step (.x1 .. .x128): 32x32b and 16x64b move one 32-bit
# value per thread per repetition, 16x128b two, 16x256b four; 16x32bx2 one (two half-warps).
_TC_REGS = {"32x32b": 1, "16x64b": 1, "16x128b": 2, "16x256b": 4, "16x32bx2": 1}
_TC_NUM = "x1 x2 x4 x8 x16 x32 x64 x128"


def _tc_count(m) -> int:
    return _TC_REGS[m["shape"]] * int(m["num"][1:])


def _check_tc_ldst(m):
    n = _tc_count(m)
    if n > 128:
        return (f"tcgen05 .{m['shape']}.{m['num']} would move {n} registers per thread; at most "
                f"128")
    return None


def _tc_ld_ops(m):
    # r, [taddr] (16x32bx2: r, [taddr], immHalfSplitoff)
    extra = " half_splitoff=i:u32" if m["shape"] == "16x32bx2" else ""
    return ops(f"d=dv:b32:{_tc_count(m)} taddr=m@tmem{extra}")


def _tc_st_ops(m):
    # [taddr], r (16x32bx2: [taddr], immHalfSplitoff, r)
    extra = " half_splitoff=i:u32" if m["shape"] == "16x32bx2" else ""
    return ops(f"taddr=m@tmem{extra} r=av:b32:{_tc_count(m)}")


def _commit_ops(m):
    return ops("mbar=m@$ss" + (" cta_mask=a:u16" if m.get("multicast") else ""))


_MMA_DOC = ("UMMA: D[tmem] (+)= A*B, A {} and B a shared-memory descriptor, idesc the "
            "instruction descriptor (types, shape, transposes); enable_input_d false overwrites "
            "D. Asynchronous: completion is tracked by tcgen05.commit.")

BINDINGS = [
    B("tcgen05.alloc", "tcgen05", (slot("op", "alloc"), slot("group", GROUP),
                                   slot("sync", "sync"), slot("aligned", "aligned"),
                                   opt("ss", "shared::cta"), slot("type", "b32")),
      ops("dst=m@shared::cta ncols=a:u32"),
      "Allocate ncols (power of two >= 32) TMEM columns; the TMEM address is written to [dst] "
      "(warp-collective).",
      effects=Effects(write="shared::cta", sync="tcgen05.alloc"),
      example="tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32",
      examples=("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32",), **SM100A),
    B("tcgen05.dealloc", "tcgen05", (slot("op", "dealloc"), slot("group", GROUP),
                                     slot("sync", "sync"), slot("aligned", "aligned"),
                                     slot("type", "b32")),
      ops("taddr=a:b32 ncols=a:u32"), "Free TMEM columns allocated by tcgen05.alloc.",
      effects=Effects(sync="tcgen05.dealloc"),
      example="tcgen05.dealloc.cta_group::1.sync.aligned.b32", **SM100A),
    B("tcgen05.relinquish_alloc_permit", "tcgen05", (slot("op", "relinquish_alloc_permit"),
                                                     slot("group", GROUP), slot("sync", "sync"),
                                                     slot("aligned", "aligned")), (),
      "Give up this CTA's right to allocate TMEM (lets a co-resident CTA allocate).",
      effects=Effects(sync="tcgen05.alloc"),
      example="tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned", **SM100A),
    B("tcgen05.mma", "tcgen05", (slot("op", "mma"), slot("group", GROUP), slot("kind", MMA_KIND)),
      ops("d_tmem=m@tmem a_desc=a:b64 b_desc=a:b64 idesc=a:b32 enable_input_d=a:pred"),
      _MMA_DOC.format("a shared-memory descriptor"),
      effects=Effects(read="shared::cta", write="tmem", sync="tcgen05.mma", async_proxy=True),
      example="tcgen05.mma.cta_group::1.kind::f16",
      examples=("tcgen05.mma.cta_group::1.kind::tf32", "tcgen05.mma.cta_group::1.kind::f8f6f4",
                "tcgen05.mma.cta_group::2.kind::f16"), **SM100A),
    B("tcgen05.mma.ts", "tcgen05", (slot("op", "mma"), slot("group", GROUP),
                                    slot("kind", MMA_KIND)),
      ops("d_tmem=m@tmem a_tmem=m@tmem b_desc=a:b64 idesc=a:b32 enable_input_d=a:pred"),
      _MMA_DOC.format("in tensor memory ([a_tmem])"),
      effects=Effects(read="shared::cta", write="tmem", sync="tcgen05.mma", async_proxy=True),
      example="tcgen05.mma.cta_group::1.kind::f16", **SM100A),
    B("tcgen05.commit", "tcgen05", (slot("op", "commit"), slot("group", GROUP),
                                    slot("completion", "mbarrier::arrive::one"),
                                    opt("ss", "shared::cluster"),
                                    opt("multicast", "multicast::cluster"), slot("type", "b64")),
      _commit_ops,
      "Arrive once on the mbarrier when all prior tcgen05 async operations of this thread "
      "complete (.multicast::cluster: on the barrier of every CTA in cta_mask).",
      effects=Effects(read="$ss", write="$ss", sync="tcgen05.commit", atomic=True),
      example="tcgen05.commit.cta_group::1.mbarrier::arrive::one.b64",
      examples=("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64",
                "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster"
                ".multicast::cluster.b64"), **SM100A),
    B("tcgen05.ld", "tcgen05", (slot("op", "ld"), slot("sync", "sync"), slot("aligned", "aligned"),
                                slot("shape", "32x32b 16x64b 16x128b 16x256b 16x32bx2"),
                                slot("num", _TC_NUM), opt("pack", "pack::16b"),
                                slot("type", "b32")),
      _tc_ld_ops,
      "Warp-collective load from TMEM into registers (asynchronous: tcgen05.wait::ld before use); "
      "registers = per-shape count x num.",
      effects=Effects(read="tmem", sync="tcgen05.ld"), check=_check_tc_ldst,
      example="tcgen05.ld.sync.aligned.32x32b.x8.b32",
      examples=("tcgen05.ld.sync.aligned.16x64b.x4.b32", "tcgen05.ld.sync.aligned.16x128b.x2.b32",
                "tcgen05.ld.sync.aligned.16x256b.x1.b32",
                "tcgen05.ld.sync.aligned.16x32bx2.x2.b32 half_splitoff=16",
                "tcgen05.ld.sync.aligned.32x32b.x4.pack::16b.b32"), **SM100A),
    B("tcgen05.st", "tcgen05", (slot("op", "st"), slot("sync", "sync"), slot("aligned", "aligned"),
                                slot("shape", "32x32b 16x64b 16x128b 16x256b 16x32bx2"),
                                slot("num", _TC_NUM), opt("unpack", "unpack::16b"),
                                slot("type", "b32")),
      _tc_st_ops,
      "Warp-collective store from registers into TMEM (tcgen05.wait::st before depending on it).",
      effects=Effects(write="tmem", sync="tcgen05.st"), check=_check_tc_ldst,
      example="tcgen05.st.sync.aligned.32x32b.x8.b32",
      examples=("tcgen05.st.sync.aligned.16x128b.x1.b32",
                "tcgen05.st.sync.aligned.16x32bx2.x4.b32 half_splitoff=8",
                "tcgen05.st.sync.aligned.16x64b.x2.unpack::16b.b32"), **SM100A),
    B("tcgen05.wait", "tcgen05", (slot("op", "wait::ld wait::st"), slot("sync", "sync"),
                                  slot("aligned", "aligned")), (),
      "Wait for all prior tcgen05.ld (wait::ld) or tcgen05.st (wait::st) of this thread.",
      effects=Effects(sync="tcgen05.wait"), example="tcgen05.wait::ld.sync.aligned",
      examples=("tcgen05.wait::st.sync.aligned",), **SM100A),
    B("tcgen05.fence", "tcgen05", (slot("op", "fence::before_thread_sync "
                                              "fence::after_thread_sync"),), (),
      "Order tcgen05 operations across a thread synchronization (before: ahead of bar/mbarrier "
      "arrive; after: following the wait).",
      effects=Effects(sync="tcgen05.fence"),
      example="tcgen05.fence::before_thread_sync",
      examples=("tcgen05.fence::after_thread_sync",), **SM100A),
]


@hookimpl
def tirxh_register_instructions(isa):
    isa.extend(BINDINGS, owner="tirxh.isa_sm100a")
