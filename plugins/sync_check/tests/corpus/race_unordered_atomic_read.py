"""race.unordered-atomic-read: a split-K sum by ``red``. Each of two CTAs adds its partial into
one global sum with ``red.global.add.f32``, then counts itself in on a counter; the CTA that
counts last reads the sum with ``ld.relaxed.gpu`` and writes it out. With a *relaxed* counter
nothing orders the other CTA's ``red`` before that load (morally strong accesses never race in
PTX's model, so this is not a data race, but the load may miss the other partial).

Fixed twin: the count is ``atom.acq_rel.gpu``: its release orders each CTA's ``red`` before its
count, its acquire in the last CTA orders both before the load.
"""
import numpy as np

import tirxh.lang as T

GRID = (2,)


@T.kernel(block=32)
def buggy(total: T.gptr[T.f32], count: T.gptr[T.u32], out: T.gptr[T.f32]):
    with T.if_(T.laneid() == 0):
        T.ptx.red.global_.add.f32(total.at(0), 1.0)
        old = T.ptx.atom.relaxed.gpu.global_.add.u32(count.at(0), 1)
        with T.if_(old == 1):  # the last of the two CTAs
            v = T.ptx.ld.relaxed.gpu.global_.f32(total.at(0))  # EXPECT: race.unordered-atomic-read
            T.ptx.st.global_.f32(out.at(0), v)


@T.kernel(block=32)
def fixed(total: T.gptr[T.f32], count: T.gptr[T.u32], out: T.gptr[T.f32]):
    with T.if_(T.laneid() == 0):
        T.ptx.red.global_.add.f32(total.at(0), 1.0)
        old = T.ptx.atom.acq_rel.gpu.global_.add.u32(count.at(0), 1)
        with T.if_(old == 1):
            v = T.ptx.ld.relaxed.gpu.global_.f32(total.at(0))
            T.ptx.st.global_.f32(out.at(0), v)


def inputs():
    return dict(total=np.zeros(1, np.float32), count=np.zeros(1, np.uint32),
                out=np.zeros(1, np.float32))
