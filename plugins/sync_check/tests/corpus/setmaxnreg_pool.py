"""setmaxnreg.pool-exhausted: a producer/consumer split of a 384-thread CTA (launched with ptxas's
168 registers per thread, 64512 in the CTA's pool) where the producer warpgroup keeps 48 registers:
128 x 48 + 256 x 232 = 65536 > 64512, so the consumers' ``setmaxnreg.inc`` waits forever for
registers nobody releases (PTX ISA "setmaxnreg": the pool is per CTA). The same arithmetic hung
every launch of a persistent GEMM on the H200 (2026-12-01) although numsim ran it to completion.

Fixed twin: the producer releases down to 40 registers (128 x 40 + 256 x 232 = 64512).
"""
import numpy as np

import tirxh.lang as T

GRID = (1,)


def _kernel(producer_regs: int, name: str):
    @T.kernel(block=384, min_blocks=1, name=name)
    def k(out: T.gptr[T.u32]):
        wg = T.warpgroup_index()
        with T.if_(wg == 0, uniform=True):
            T.ptx.setmaxnreg.dec.sync.aligned.u32(producer_regs)
        with T.else_():
            T.ptx.setmaxnreg.inc.sync.aligned.u32(232)  # EXPECT: setmaxnreg.pool-exhausted
        T.ptx.st.global_.u32(out.at(T.tid.x), wg)
    return k


buggy = _kernel(48, "buggy")
fixed = _kernel(40, "fixed")


def inputs():
    return dict(out=np.zeros(384, np.uint32))
