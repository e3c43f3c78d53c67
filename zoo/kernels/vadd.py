"""Vector add: out[i] = a[i] + b[i] (f32).

Algorithm: one thread per 4 consecutive elements, 16-byte vector loads and stores
(``ld.global.v4.f32`` / ``st.global.v4.f32``) so each warp moves 512 contiguous bytes per access;
a scalar loop handles the tail when n is not a multiple of 4.

Techniques: vectorized coalesced access, predicated tail, grid sized from n.
Work: n FLOPs, 12n bytes (two reads, one write) -> memory bound on every GPU.
"""

import numpy as np

import tirxh.lang as T

BLOCK = 256
VEC = 4


@T.kernel(grid=lambda n: T.cdiv(n, BLOCK * VEC), block=BLOCK)
def vadd(a: T.gptr[T.f32], b: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32):
    i = (T.ctaid.x * BLOCK + T.tid.x) * VEC
    with T.if_(i + VEC <= n):
        with T.iket.range("load"):
            x = T.ptx.ld.global_.v4.f32(a.at(i))
            y = T.ptx.ld.global_.v4.f32(b.at(i))
        with T.iket.range("store"):
            T.ptx.st.global_.v4.f32(out.at(i), [xi + yi for xi, yi in zip(x, y)])
    with T.else_():
        with T.range(i, n) as j:  # the tail: at most VEC - 1 elements
            s = T.ptx.ld.global_.f32(a.at(j)) + T.ptx.ld.global_.f32(b.at(j))
            T.ptx.st.global_.f32(out.at(j), s)


def inputs(rng, n):
    return dict(a=rng.standard_normal(n, dtype=np.float32),
                b=rng.standard_normal(n, dtype=np.float32),
                out=np.empty(n, np.float32), n=n)


def reference(a, b):
    return {"out": a + b}


SUITE = T.suite(
    vadd, inputs=inputs, reference=reference, outputs=["out"],
    cases=[T.case("n1000", n=1000), T.case("n4096", n=4096),
           T.case("n16M", n=1 << 24, small=False), T.case("n64M", n=1 << 26, small=False)],
    tolerance=T.tolerance(rtol=0, atol=0),  # one f32 add: bitwise equal to numpy
    flops=lambda n: n, bytes=lambda n: 12 * n,
)
