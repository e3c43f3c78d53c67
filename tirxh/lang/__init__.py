"""TIRx: a minimal PTX-level kernel language in Python (``import tirxh.lang as T``).

One call is one PTX instruction (``T.ptx.<spelling>(...)``); registers and predicates are typed;
device control flow is structured (``T.if_``, ``T.range``, ``T.while_``, ``T.loop``); Python control
flow runs at trace time. See docs/LANGUAGE.md.
"""

from tirxh.core.lang.annotations import iket
from tirxh.core.lang.control import break_, else_, if_, loop, range_ as range, while_
from tirxh.core.lang.kernel import Kernel, cdiv, kernel
from tirxh.core.lang.memory import (
    Fragment, GlobalPtr, LocalBuffer, MBarrierArray, MBarrierRef, SharedBuffer, TensorMapParam,
    clock, clock64, cluster_ctaid, cluster_ctarank, cluster_nctaid, clusterid, const, ctaid,
    fragment, globaltimer, gptr, laneid, local, mbarrier, nclusterid, nctaid, ntid, reg, shared,
    sink, smid, sreg, tensormap, tid, warpid,
)
from tirxh.core.lang.pipeline import PipelineCursor, pipeline, role, warp_index, warpgroup_index
from tirxh.core.lang.ptxns import ptx
from tirxh.core.lang.trace import Register, TraceError
from tirxh.core.suite import Case, Suite, TensorMap, case, suite, tolerance
from tirxh.core.types import (
    DType, b8, b16, b32, b64, b128, bf16, bf16x2, e4m3, e5m2, f16, f16x2, f32, f64, i8, i16, i32,
    i64, pred, s8, s16, s32, s64, tf32, u8, u16, u32, u64,
)

__all__ = [
    "kernel", "Kernel", "cdiv", "ptx", "if_", "else_", "range", "while_", "loop", "break_",
    "gptr", "tensormap", "const", "tid", "ntid", "ctaid", "nctaid", "clusterid", "nclusterid",
    "cluster_ctaid", "cluster_nctaid", "cluster_ctarank", "laneid", "warpid", "smid", "clock",
    "clock64", "globaltimer", "sreg", "shared", "local", "mbarrier", "reg", "fragment", "sink",
    "pipeline", "role", "warp_index", "warpgroup_index", "suite", "case", "tolerance",
    "TensorMap", "Suite", "Case", "Register", "TraceError", "GlobalPtr", "SharedBuffer",
    "LocalBuffer", "MBarrierArray", "MBarrierRef", "TensorMapParam", "Fragment", "PipelineCursor",
    "DType",
    "pred", "b8", "b16", "b32", "b64", "b128", "u8", "u16", "u32", "u64", "s8", "s16", "s32",
    "s64", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64", "tf32", "f16x2", "bf16x2",
    "e4m3", "e5m2", "iket",
]
