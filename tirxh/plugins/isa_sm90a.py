"""Hopper bindings: binding set ``sm90`` (portable sm_90 features: TMA, mbarrier transaction counts,
cluster barriers, proxy fences, stmatrix, elect, mapa, griddepcontrol, setmaxnreg) and binding set
``sm90a`` (arch-specific to sm_90a: wgmma).

Sources: PTX ISA 9.0 sections 9.7.9.24-27 (cp.async.bulk, cp.async.bulk.tensor, bulk groups,
prefetch.tensormap), 9.7.13.15 (mbarrier), 9.7.13.4 (fence.proxy.*), 9.7.13.1 (barrier.cluster),
9.7.15 (wgmma: shapes, operand lists per input type, register fragments), 9.7.19.2 (setmaxnreg).

Binding names are stable: numsim and sync_check key on them (with the instruction's modifiers) and
on `Binding.effects`. Where one PTX opcode covers two directions with different operands and
completion mechanisms, the load keeps the PTX name and the store gets ``.store``:
``cp.async.bulk`` / ``cp.async.bulk.store``, ``cp.async.bulk.tensor`` /
``cp.async.bulk.tensor.store``. ``wgmma.mma_async.ss`` and ``wgmma.mma_async.rs`` share a
spelling and differ in operand A (a b64 shared-memory descriptor, or 4 b32 registers).

``.multicast::cluster`` is arch-specific (sm_90a, sm_100a, ...); every sm_90+ target here is, so
the portable set carries it.
"""

from tirxh.core.bindings import Binding, Effects, operands as ops, opt, slot
from tirxh.core.pluginmanager import hookimpl

B = Binding
SM90 = dict(iset="sm90", min_sm=90, ptx_isa=(8, 0))
SM90A = dict(iset="sm90a", min_sm=90, archs=("sm_90a",), ptx_isa=(8, 0))
MBAR_SS = "shared shared::cta shared::cluster"
DIMS = "1d 2d 3d 4d 5d"


def _hint(words: str, m) -> tuple:
    """Append the cache-policy operand (b64) when ``.L2::cache_hint`` is spelled."""
    return ops(words + (" cache_policy=a:b64" if m.get("hint") else ""))


def _try_wait_ops(m):
    # waitComplete, [addr], parity (u32) | state (b64) {, suspendTimeHint (ns, u32)}
    phase = "parity=a:u32" if m.get("parity") else "state=a:b64"
    return ops(f"d:pred m@$ss {phase} suspend_hint=a:u32?")


def _bulk_load_ops(m):
    words = "dst=m@shared::cluster src=m@global size=a:u32 mbar=m@shared::cta"
    return _hint(words + (" cta_mask=a:u16" if m.get("multicast") else ""), m)


def _tensor_load_ops(m):
    words = "dst=m@shared::cluster tmap=tref::$dim mbar=m@shared::cta"
    return _hint(words + (" cta_mask=a:u16" if m.get("multicast") else ""), m)


# --- st.async / red.async ------------------------------------------------------------------------

_RED_ASYNC_TYPES = {"inc": ("u32",), "dec": ("u32",), "min": ("u32", "s32"),
                    "max": ("u32", "s32"), "add": ("u32", "s32", "u64"), "and": ("b32",),
                    "or": ("b32",), "xor": ("b32",)}


def _check_st_async(m):
    if m.get("vec") == "v4" and m["type"] not in ("b32", "u32", "s32", "f32"):
        return f"st.async .v4 takes 32-bit types only; found .{m['type']}"
    return None


def _check_red_async(m):
    ok = _RED_ASYNC_TYPES[m["op"]]
    if m["type"] not in ok:
        return f"red.async .{m['op']} takes {' '.join('.' + t for t in ok)}; found .{m['type']}"
    return None


# --- wgmma ----------------------------------------------------------------------------------------

_WG_K = {"f16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32, "s8": 32, "u8": 32}
_WG_ACC = {"f16": ("f16", "f32"), "bf16": ("f32",), "tf32": ("f32",), "e4m3": ("f16", "f32"),
           "e5m2": ("f16", "f32"), "s8": ("s32",), "u8": ("s32",)}
_WG_N_INT = (8, 16, 24) + tuple(range(32, 257, 16))  # s8/u8: N = 8, 16, 24, 32, 48, ..., 256
WG_SHAPES = tuple(f"m64n{n}k{k}" for k in (8, 16, 32) for n in range(8, 257, 8))


def _wg_family(t: str) -> str:
    return {"e4m3": "fp8", "e5m2": "fp8", "s8": "int", "u8": "int"}.get(t, t)


def _check_wgmma(m):
    a, b = m["atype"], m["btype"]
    if _wg_family(a) != _wg_family(b):
        return f"wgmma A/B types .{a}/.{b} do not pair"
    n, k = (int(x) for x in m["shape"][4:].split("k"))
    if k != _WG_K[a]:
        return f"wgmma with .{a} inputs has K = {_WG_K[a]} (m64nNk{_WG_K[a]}); found k{k}"
    if _wg_family(a) == "int" and n not in _WG_N_INT:
        return f"wgmma with .{a} inputs takes N in {_WG_N_INT}; found n{n}"
    if m["dtype"] not in _WG_ACC[a]:
        return f"wgmma with .{a} inputs accumulates in {' or '.join(_WG_ACC[a])}"
    if m.get("satfinite") and _wg_family(a) != "int":
        return ".satfinite applies to integer wgmma only"
    return None


def _wg_acc(m) -> str:
    """The accumulator: N/2 f32 or s32 registers, or N/4 f16x2 registers (64xN over 128 threads)."""
    n = int(m["shape"][4:].split("k")[0])
    if m["dtype"] == "f16":
        return f"d=inoutv:f16x2:{n // 4}"
    return f"d=inoutv:{m['dtype']}:{n // 2}"


def _wgmma_ops(form: str):
    """Operand list of the ss (A descriptor) or rs (A fragment of 4 b32 registers) form.

    f16/bf16: scale-d, imm-scale-a, imm-scale-b, then imm-trans-a (ss only) and imm-trans-b;
    tf32/fp8: scale-d, imm-scale-a, imm-scale-b (no transpose: K-major only);
    s8/u8: scale-d only. scale-d is a predicate (false: D = A*B, true: D = A*B + D);
    imm-scale-a/b are 1 or -1; imm-trans-a/b are 0 or 1.
    """
    def f(m):
        a = "a_desc=a:b64" if form == "ss" else "a=av:b32:4"
        words = f"{_wg_acc(m)} {a} b_desc=a:b64 scale_d=a:pred"
        fam = _wg_family(m["atype"])
        if fam in ("f16", "bf16"):
            words += " imm_scale_a=i:s32 imm_scale_b=i:s32"
            words += (" imm_trans_a=i:s32" if form == "ss" else "") + " imm_trans_b=i:s32"
        elif fam in ("tf32", "fp8"):
            words += " imm_scale_a=i:s32 imm_scale_b=i:s32"
        return ops(words)
    return f


def _wgmma_slots():
    return (slot("op", "mma_async"), slot("sync", "sync"), slot("aligned", "aligned"),
            slot("shape", WG_SHAPES), opt("satfinite", "satfinite"),
            slot("dtype", "f16 f32 s32"), slot("atype", "f16 bf16 tf32 e4m3 e5m2 s8 u8"),
            slot("btype", "f16 bf16 tf32 e4m3 e5m2 s8 u8"))


_SCALES = "imm_scale_a=1 imm_scale_b=1"
_WG_SS_EXAMPLES = tuple(
    f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16 {_SCALES}" for n in range(8, 257, 8)
) + (
    f"wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16 {_SCALES} imm_trans_a=1 imm_trans_b=1",
    f"wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {_SCALES}",
    f"wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 {_SCALES}",
    f"wgmma.mma_async.sync.aligned.m64n96k32.f16.e5m2.e4m3 {_SCALES}",
    "wgmma.mma_async.sync.aligned.m64n24k32.s32.s8.s8",
    "wgmma.mma_async.sync.aligned.m64n128k32.satfinite.s32.u8.s8",
    "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 imm_scale_a=-1 imm_scale_b=1",
)
_WG_RS_EXAMPLES = (
    f"wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {_SCALES}",
    f"wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {_SCALES} imm_trans_b=1",
    f"wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16 {_SCALES}",
    f"wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 {_SCALES}",
    f"wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e5m2 {_SCALES}",
    "wgmma.mma_async.sync.aligned.m64n48k32.s32.s8.u8",
)


BINDINGS = [
    # 9.7.13.15 mbarrier (sm_90: tx-count, try_wait) -----------------------------------------------
    B("mbarrier.try_wait", "mbarrier", (slot("op", "try_wait"), opt("parity", "parity"),
                                        opt("sem", "acquire"), opt("scope", "cta cluster"),
                                        opt("ss", "shared shared::cta"), slot("type", "b64")),
      _try_wait_ops,
      "Wait (for a system-dependent time, or suspend_hint ns) until a phase completes; returns a "
      "predicate (loop until true).",
      effects=Effects(read="$ss", sync="mbarrier.wait"),
      example="mbarrier.try_wait.parity.shared::cta.b64",
      examples=("mbarrier.try_wait.shared::cta.b64",
                "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 suspend_hint=1000"),
      **SM90),
    B("mbarrier.arrive.expect_tx", "mbarrier", (slot("op", "arrive"), slot("tx", "expect_tx"),
                                                opt("sem", "release"),
                                                opt("scope", "cta cluster"), opt("ss", MBAR_SS),
                                                slot("type", "b64")),
      ops("state=d:b64 m@$ss tx=a:u32"),
      "Raise the phase's expected transaction bytes by tx, then arrive (one arrival).",
      effects=Effects(read="$ss", write="$ss", sync="mbarrier.arrive.expect_tx", atomic=True),
      example="mbarrier.arrive.expect_tx.shared::cta.b64",
      examples=("mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64 state=_",),
      **SM90),
    B("mbarrier.expect_tx", "mbarrier", (slot("op", "expect_tx"), opt("sem", "relaxed"),
                                         opt("scope", "cta cluster"), opt("ss", MBAR_SS),
                                         slot("type", "b64")),
      ops("m@$ss tx=a:u32"), "Raise the current phase's expected transaction bytes by tx.",
      effects=Effects(read="$ss", write="$ss", sync="mbarrier.expect_tx", atomic=True),
      example="mbarrier.expect_tx.relaxed.cta.shared::cta.b64",
      examples=("mbarrier.expect_tx.relaxed.cluster.shared::cluster.b64",), **SM90),
    B("mbarrier.complete_tx", "mbarrier", (slot("op", "complete_tx"), opt("sem", "relaxed"),
                                           opt("scope", "cta cluster"), opt("ss", MBAR_SS),
                                           slot("type", "b64")),
      ops("m@$ss tx=a:u32"),
      "Mark tx transaction bytes complete (as an async copy would) on the current phase.",
      effects=Effects(read="$ss", write="$ss", sync="mbarrier.complete_tx", atomic=True),
      example="mbarrier.complete_tx.relaxed.cta.shared::cta.b64", **SM90),
    # 9.7.9.25 cp.async.bulk -----------------------------------------------------------------------
    B("cp.async.bulk", "cp", (slot("async", "async"), slot("bulk", "bulk"),
                              slot("dst", "shared::cluster"), slot("src", "global"),
                              slot("completion", "mbarrier::complete_tx::bytes"),
                              opt("multicast", "multicast::cluster"),
                              opt("hint", "L2::cache_hint")), _bulk_load_ops,
      "TMA bulk copy global -> shared::cluster of size bytes (multiple of 16); completes as "
      "complete_tx on the mbarrier (.multicast::cluster: into every CTA of cta_mask).",
      effects=Effects(read="global", write="shared::cluster", sync="mbarrier.complete_tx",
                      async_proxy=True),
      example="cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
      examples=("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                ".multicast::cluster",
                "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                ".L2::cache_hint"), **SM90),
    B("cp.async.bulk.store", "cp", (slot("async", "async"), slot("bulk", "bulk"),
                                    slot("dst", "global"), slot("src", "shared::cta"),
                                    slot("completion", "bulk_group"),
                                    opt("hint", "L2::cache_hint")),
      lambda m: _hint("dst=m@global src=m@shared::cta size=a:u32", m),
      "TMA bulk copy shared::cta -> global of size bytes; tracked by the bulk async-group "
      "(cp.async.bulk.commit_group / wait_group).",
      effects=Effects(read="shared::cta", write="global", sync="bulk.copy", async_proxy=True),
      example="cp.async.bulk.global.shared::cta.bulk_group",
      examples=("cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint",), **SM90),
    B("cp.async.bulk.tensor", "cp", (slot("async", "async"), slot("bulk", "bulk"),
                                     slot("tensor", "tensor"), slot("dim", DIMS),
                                     slot("dst", "shared::cluster"), slot("src", "global"),
                                     opt("mode", "tile"),
                                     slot("completion", "mbarrier::complete_tx::bytes"),
                                     opt("multicast", "multicast::cluster"),
                                     opt("hint", "L2::cache_hint")), _tensor_load_ops,
      "TMA tensor tile load (1d-5d) global -> shared::cluster at coordinates of a tensor map; "
      "completes as complete_tx on the mbarrier; .multicast::cluster writes every CTA in "
      "cta_mask.",
      effects=Effects(read="global", write="shared::cluster", sync="mbarrier.complete_tx",
                      async_proxy=True),
      example="cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
      examples=tuple(
          f"cp.async.bulk.tensor.{d}.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
          for d in ("1d", "3d", "4d", "5d")) + (
          "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
          "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
          ".multicast::cluster",
          "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
          ".multicast::cluster.L2::cache_hint",
          "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
          ".L2::cache_hint"), **SM90),
    B("cp.async.bulk.tensor.store", "cp", (slot("async", "async"), slot("bulk", "bulk"),
                                           slot("tensor", "tensor"), slot("dim", DIMS),
                                           slot("dst", "global"), slot("src", "shared::cta"),
                                           opt("mode", "tile"), slot("completion", "bulk_group"),
                                           opt("hint", "L2::cache_hint")),
      lambda m: _hint("tmap=tref::$dim src=m@shared::cta", m),
      "TMA tensor tile store (1d-5d) shared::cta -> global; tracked by the bulk async-group.",
      effects=Effects(read="shared::cta", write="global", sync="bulk.copy", async_proxy=True),
      example="cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group",
      examples=("cp.async.bulk.tensor.1d.global.shared::cta.bulk_group",
                "cp.async.bulk.tensor.5d.global.shared::cta.tile.bulk_group.L2::cache_hint"),
      **SM90),
    B("cp.async.bulk.prefetch.tensor", "cp", (slot("async", "async"), slot("bulk", "bulk"),
                                              slot("prefetch", "prefetch"),
                                              slot("tensor", "tensor"), slot("dim", DIMS),
                                              slot("level", "L2"), slot("src", "global"),
                                              opt("mode", "tile"), opt("hint", "L2::cache_hint")),
      lambda m: _hint("tmap=tref::$dim", m),
      "Prefetch a tensor tile (1d-5d) into L2 (a hint; no architectural effect).",
      example="cp.async.bulk.prefetch.tensor.2d.L2.global.tile",
      examples=("cp.async.bulk.prefetch.tensor.4d.L2.global.L2::cache_hint",), **SM90),
    B("cp.reduce.async.bulk.tensor", "cp", (slot("reduce", "reduce"), slot("async", "async"),
                                            slot("bulk", "bulk"), slot("tensor", "tensor"),
                                            slot("dim", DIMS), slot("dst", "global"),
                                            slot("src", "shared::cta"),
                                            slot("op", "add min max inc dec and or xor"),
                                            opt("mode", "tile"), slot("completion", "bulk_group"),
                                            opt("hint", "L2::cache_hint")),
      lambda m: _hint("tmap=tref::$dim src=m@shared::cta", m),
      "TMA tensor tile reduce-store: global op= shared::cta tile (element type from the map); "
      "tracked by the bulk async-group.",
      effects=Effects(read="shared::cta", write="global", sync="bulk.copy", async_proxy=True,
                      atomic=True),
      example="cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group",
      examples=("cp.reduce.async.bulk.tensor.3d.global.shared::cta.max.bulk_group.L2::cache_hint",),
      **SM90),
    # 9.7.9.12 st.async, 9.7.13.x red.async (PTX ISA 8.1): into a peer CTA's shared memory --------
    B("st.async", "st", (slot("async", "async"), opt("sem", "weak"), slot("ss", "shared::cluster"),
                         slot("completion", "mbarrier::complete_tx::bytes"), opt("vec", "v2 v4"),
                         slot("type", "b32 b64 u32 s32 u64 s64 f32 f64")),
      lambda m: ops("m@shared::cluster " + ("av:$type:$vec" if m.get("vec") else "a:$type") +
                    " mbar=m@shared::cluster"),
      "Asynchronous weak store (generic proxy) into a peer CTA's shared memory that completes as "
      "complete_tx of its size on the mbarrier in that CTA (release at cluster scope).",
      effects=Effects(write="shared::cluster", sync="mbarrier.complete_tx"),
      check=_check_st_async,
      example="st.async.shared::cluster.mbarrier::complete_tx::bytes.u32",
      examples=("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32",
                "st.async.weak.shared::cluster.mbarrier::complete_tx::bytes.v2.b64",
                "st.async.shared::cluster.mbarrier::complete_tx::bytes.s64"),
      iset="sm90", min_sm=90, ptx_isa=(8, 1)),
    B("red.async", "red", (slot("async", "async"), slot("sem", "relaxed"), slot("scope", "cluster"),
                           slot("ss", "shared::cluster"),
                           slot("completion", "mbarrier::complete_tx::bytes"),
                           slot("op", "inc dec min max add and or xor"),
                           slot("type", "u32 s32 u64 b32")),
      ops("m@shared::cluster b=a:$type mbar=m@shared::cluster"),
      "Asynchronous relaxed reduction (generic proxy) on a peer CTA's shared memory that completes "
      "as complete_tx of its size on the mbarrier in that CTA (release at cluster scope).",
      effects=Effects(read="shared::cluster", write="shared::cluster",
                      sync="mbarrier.complete_tx", atomic=True),
      check=_check_red_async,
      example="red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32",
      examples=tuple(
          f"red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.{o}.{t}"
          for o, t in (("inc", "u32"), ("dec", "u32"), ("min", "u32"), ("max", "s32"),
                       ("add", "s32"), ("add", "u64"), ("and", "b32"), ("or", "b32"),
                       ("xor", "b32"))),
      iset="sm90", min_sm=90, ptx_isa=(8, 1)),
    B("cp.async.bulk.commit_group", "cp", (slot("async", "async"), slot("bulk", "bulk"),
                                           slot("op", "commit_group")), (),
      "Close the current bulk async-group (bulk stores issued by this thread).",
      effects=Effects(sync="bulk.commit"), example="cp.async.bulk.commit_group", **SM90),
    B("cp.async.bulk.wait_group", "cp", (slot("async", "async"), slot("bulk", "bulk"),
                                         slot("op", "wait_group"), opt("read", "read")),
      ops("n=i:u32"),
      "Wait until at most n bulk async-groups are pending (.read: only their source reads).",
      effects=Effects(sync="bulk.wait"), example="cp.async.bulk.wait_group n=0",
      examples=("cp.async.bulk.wait_group.read n=1",), **SM90),
    B("prefetch.tensormap", "prefetch", (opt("ss", "const param"), slot("tensormap", "tensormap")),
      ops("tmap=m@$ss"), "Prefetch a tensor map (a hint; no architectural effect).",
      example="prefetch.tensormap",
      examples=("prefetch.param.tensormap",), **SM90),
    # 9.7.13.4 proxy fences ------------------------------------------------------------------------
    B("fence.proxy.async", "fence", (slot("proxy", "proxy"), slot("kind", "async"),
                                     opt("ss", "global shared::cta shared::cluster")), (),
      "Order this thread's generic-proxy accesses with async-proxy accesses (TMA, wgmma) to the "
      "state space (all spaces when none is given).",
      effects=Effects(sync="fence.proxy.async"),
      example="fence.proxy.async.shared::cta",
      examples=("fence.proxy.async", "fence.proxy.async.global",
                "fence.proxy.async.shared::cluster"), **SM90),
    B("fence.mbarrier_init", "fence", (slot("op", "mbarrier_init"), slot("sem", "release"),
                                       slot("scope", "cluster")), (),
      "Make prior mbarrier.init visible to the cluster (before other CTAs or TMA use them).",
      effects=Effects(sync="fence.mbarrier_init"),
      example="fence.mbarrier_init.release.cluster", **SM90),
    B("fence.proxy.tensormap", "fence", (slot("proxy", "proxy"),
                                         slot("kind", "tensormap::generic"),
                                         slot("sem", "release acquire"),
                                         slot("scope", "cta cluster gpu sys")),
      lambda m: ops("m size=i:u32") if m["sem"] == "acquire" else (),
      "Order generic-proxy writes of a tensor map (release) with its use by TMA (acquire of the "
      "128-byte map at [addr]).",
      effects=Effects(sync="fence.proxy.tensormap"),
      example="fence.proxy.tensormap::generic.release.gpu",
      examples=("fence.proxy.tensormap::generic.acquire.gpu size=128",),
      iset="sm90", min_sm=90, ptx_isa=(8, 3)),
    # warp / cluster collectives -------------------------------------------------------------------
    B("elect.sync", "elect", (slot("sync", "sync"),), ops("d=dpair:b32|pred membermask=a:b32"),
      "Elect one leader lane of membermask: d = its lane id, p true in the leader only.",
      effects=Effects(sync="warp"), example="elect.sync membermask=-1", **SM90),
    B("stmatrix", "stmatrix", (slot("sync", "sync"), slot("aligned", "aligned"),
                               slot("shape", "m8n8"), slot("num", "x1 x2 x4"),
                               opt("trans", "trans"), opt("ss", "shared shared::cta"),
                               slot("type", "b16")),
      ops("m@$ss r=av:b32:$num"),
      "Warp-collective store of 1, 2 or 4 8x8 b16 matrices from fragments to shared memory.",
      effects=Effects(write="$ss", sync="warp"),
      example="stmatrix.sync.aligned.m8n8.x4.shared.b16",
      examples=("stmatrix.sync.aligned.m8n8.x2.trans.shared::cta.b16",
                "stmatrix.sync.aligned.m8n8.x1.shared.b16"), **SM90),
    B("barrier.cluster.arrive", "barrier", (slot("cluster", "cluster"), slot("op", "arrive"),
                                            opt("sem", "release relaxed"),
                                            opt("aligned", "aligned")), (),
      "Arrive at the cluster barrier (default .release semantics; .relaxed orders nothing).",
      effects=Effects(sync="cluster.arrive"), example="barrier.cluster.arrive",
      examples=("barrier.cluster.arrive.release.aligned", "barrier.cluster.arrive.relaxed"),
      **SM90),
    B("barrier.cluster.wait", "barrier", (slot("cluster", "cluster"), slot("op", "wait"),
                                          opt("sem", "acquire"), opt("aligned", "aligned")), (),
      "Wait until all threads of the cluster arrived (acquire semantics).",
      effects=Effects(sync="cluster.wait"), example="barrier.cluster.wait",
      examples=("barrier.cluster.wait.acquire.aligned",), **SM90),
    B("mapa", "mapa", (opt("ss", "shared::cluster"), slot("type", "u32 u64")),
      ops("d:$type a:$type cta=a:u32"),
      "Map an address of this CTA's shared memory (or generic) to the same variable in CTA "
      "`cta` of the cluster (distributed shared memory).",
      example="mapa.shared::cluster.u32", examples=("mapa.u64",), **SM90),
    B("getctarank", "getctarank", (opt("ss", "shared::cluster"), slot("type", "u32 u64")),
      ops("d:u32 a:$type"), "The rank in the cluster of the CTA owning a shared::cluster address.",
      example="getctarank.shared::cluster.u32", examples=("getctarank.u64",), **SM90),
    B("griddepcontrol", "griddepcontrol", (slot("op", "launch_dependents wait"),), (),
      "Programmatic dependent launch: let the dependent grid launch, or wait for the "
      "prerequisite grid's memory to be visible.",
      effects=Effects(sync="griddepcontrol"), example="griddepcontrol.launch_dependents",
      examples=("griddepcontrol.wait",), **SM90),
    B("setmaxnreg", "setmaxnreg", (slot("action", "inc dec"), slot("sync", "sync"),
                                   slot("aligned", "aligned"), slot("type", "u32")),
      ops("n=i:u32"),
      "Raise (.inc) or lower (.dec) this warpgroup's per-thread register budget to n "
      "(24..256, multiple of 8); warp-specialized kernels give producers fewer registers.",
      effects=Effects(sync="setmaxnreg"), example="setmaxnreg.inc.sync.aligned.u32 n=240",
      examples=("setmaxnreg.dec.sync.aligned.u32 n=40",),
      iset="sm90", min_sm=90, archs=("sm_90a", "sm_100a", "sm_110a"), ptx_isa=(8, 0)),
    # 9.7.15 wgmma (sm_90a only) ------------------------------------------------------------------
    B("wgmma.mma_async.ss", "wgmma", _wgmma_slots(), _wgmma_ops("ss"),
      "Warpgroup MMA D (+)= A*B with A and B in shared memory (64-bit matrix descriptors); "
      "asynchronous: fence before, commit_group + wait_group before reading D.",
      effects=Effects(read="shared::cta", sync="wgmma.mma", async_proxy=True),
      check=_check_wgmma, example=_WG_SS_EXAMPLES[0], examples=_WG_SS_EXAMPLES[1:], **SM90A),
    B("wgmma.mma_async.rs", "wgmma", _wgmma_slots(), _wgmma_ops("rs"),
      "Warpgroup MMA D (+)= A*B with A from registers (4 b32 per thread) and B in shared memory.",
      effects=Effects(read="shared::cta", sync="wgmma.mma", async_proxy=True),
      check=_check_wgmma, example=_WG_RS_EXAMPLES[0], examples=_WG_RS_EXAMPLES[1:], **SM90A),
    B("wgmma.fence", "wgmma", (slot("op", "fence"), slot("sync", "sync"),
                               slot("aligned", "aligned")), (),
      "Order prior register/shared accesses of the accumulators and A before wgmma.mma_async.",
      effects=Effects(sync="wgmma.fence"),
      example="wgmma.fence.sync.aligned", **SM90A),
    B("wgmma.commit_group", "wgmma", (slot("op", "commit_group"), slot("sync", "sync"),
                                      slot("aligned", "aligned")), (),
      "Close the current group of wgmma.mma_async operations.",
      effects=Effects(sync="wgmma.commit"), example="wgmma.commit_group.sync.aligned", **SM90A),
    B("wgmma.wait_group", "wgmma", (slot("op", "wait_group"), slot("sync", "sync"),
                                    slot("aligned", "aligned")), ops("n=i:u32"),
      "Wait until at most n wgmma groups are pending (their accumulators are then readable).",
      effects=Effects(sync="wgmma.wait"), example="wgmma.wait_group.sync.aligned n=0",
      examples=("wgmma.wait_group.sync.aligned n=1",), **SM90A),
]


@hookimpl
def tirxh_register_instructions(isa):
    isa.extend(BINDINGS, owner="tirxh.isa_sm90a")
