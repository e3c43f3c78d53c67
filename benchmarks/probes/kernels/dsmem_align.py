"""Where does the GPU put the dynamic shared window, and is TIRx's layout independent of it?

Two kernels, each writing ``address mod 1024`` from every thread; each suite's reference is what
numsim assumes, so a mismatch on a GPU board is a hardware fact numsim gets wrong:

- `dsmem_align` (``smem_layout="split"``, the layout TIRx used before issue 19): 2564 (16, 1024)
  bytes of static ``.shared`` variables, then ``.extern .shared .align 1024 .b8 tirx_dsmem[]``.
  numsim assumes only the 16 bytes a kernel may rely on there: the window at the next 16-byte
  boundary behind the static bytes (2576 mod 1024 = 528 for 2564 bytes). A GPU that returns 0
  honours the declared 1024 (then decode_attention's misaligned-address fault on the H200,
  2026-12-01, had another cause); 528 confirms the diagnosis (TMA wrote to a window 16 bytes past
  a 128-byte boundary). Measured on the H200 (2026-12-01, GPU call 3): 528, 16 and 0 for 2564,
  16 and 1024 static bytes -- the next 16-byte boundary, as numsim's "split" layout places it.
- `window_base` (the default layout: every variable in the window, its base rounded up at run
  time): out[0] is the raw window base mod 1024 (how far the prologue had to move it: numsim
  assumes 0, the CTA's shared base), out[1..] the rounded base of a 1024-aligned variable, which
  must be 0 whatever out[0] is.
"""

import numpy as np

import tirxh.lang as T
from tirxh.core import ir

TAGS = ("probe",)


@T.kernel(grid=1, block=32, smem_layout="split")
def dsmem_align(out: T.gptr[T.u32], STATIC: T.const = 2564):
    pad = T.shared(T.u8, (STATIC,), name="pad")
    win = T.shared(T.u32, (256,), align=1024, dynamic=True, name="win")
    tid = T.tid.x
    with T.if_(tid == 0):
        T.ptx.st.shared.u8(pad.at(STATIC - 1), 7)   # keep the static variable alive
    T.ptx.st.shared.u32(win.at(tid), tid)
    T.ptx.bar.sync(0)
    rem = T.ptx.and_.b32(win.ptr(), 1023)
    keep = T.ptx.cvt.u32.u8(T.ptx.ld.shared.u8(pad.at(STATIC - 1)))
    T.ptx.st.global_.u32(out.at(tid), rem + (keep & 0))


def inputs(rng, STATIC=2564):
    return dict(out=np.zeros(32, np.uint32))


def _split_reference(STATIC=2564, **_):
    """numsim's placement of a window behind `STATIC` static bytes: the next 16-byte boundary."""
    return {"out": np.full(32, (-(-STATIC // 16) * 16) % 1024, np.uint32)}


SUITE = T.suite(dsmem_align, inputs=inputs, reference=_split_reference, outputs=["out"],
                cases=[T.case("static2564", STATIC=2564), T.case("static16", STATIC=16),
                       T.case("static1024", STATIC=1024)])


@T.kernel(grid=1, block=32)
def window_base(out: T.gptr[T.u32]):
    small = T.shared(T.u8, (2564,), name="small")  # packed after the aligned tile
    tile = T.shared(T.u32, (256,), align=1024, name="tile")
    tid = T.tid.x
    with T.if_(tid == 0):
        T.ptx.st.shared.u8(small.at(2563), 7)
    T.ptx.st.shared.u32(tile.at(tid), tid)
    T.ptx.bar.sync(0)
    raw = T.ptx.and_.b32(T.ptx.mov.u32(ir.Sym("tirx_dsmem", "shared")), 1023)
    rounded = T.ptx.and_.b32(tile.ptr(), 1023)
    keep = T.ptx.cvt.u32.u8(T.ptx.ld.shared.u8(small.at(2563)))
    T.ptx.st.global_.u32(out.at(tid), T.ptx.selp.u32(raw, rounded, tid == 0) + (keep & 0))


WINDOW_SUITE = T.suite(window_base, inputs=lambda rng: dict(out=np.zeros(32, np.uint32)),
                       reference=lambda **_: {"out": np.zeros(32, np.uint32)}, outputs=["out"],
                       cases=[T.case("rounded1024")])
