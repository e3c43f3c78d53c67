"""Is the dynamic shared window (``extern .shared .align 1024 .b8 tirx_dsmem[]``) 1024-byte
aligned on the GPU when the kernel also has static shared variables?

numsim lays the window out at its declared alignment after the static variables; 128B-swizzled
TMA tiles rely on 1024-byte alignment. Each thread writes ``address(window) mod 1024`` and the
static variables' total size; the reference says 0 (what numsim assumes). A GPU that does not
honour the alignment fails the check with the actual remainder (decode_attention, which has 2564
bytes of static shared memory before its 1024-aligned TMA ring, faulted with a misaligned address
on the H200, 2026-12-01).
"""

import numpy as np

import tirxh.lang as T

TAGS = ("probe",)


@T.kernel(grid=1, block=32)
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


SUITE = T.suite(dsmem_align, inputs=inputs, reference=lambda **_: {"out": np.zeros(32, np.uint32)},
                outputs=["out"],
                cases=[T.case("static2564", STATIC=2564), T.case("static0", STATIC=16),
                       T.case("static1024", STATIC=1024)])
