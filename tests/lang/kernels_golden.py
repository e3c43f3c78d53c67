"""Small kernels whose PTX is pinned by golden files (tests/lang/golden/<name>.<target>.ptx)."""

import tirxh.lang as T


@T.kernel(grid=lambda n: T.cdiv(n, 128), block=128)
def saxpy(x: T.gptr[T.f32], y: T.gptr[T.f32], alpha: T.f32, n: T.u32):
    i = T.ctaid.x * 128 + T.tid.x
    with T.if_(i < n):
        xv = T.ptx.ld.global_.f32(x.at(i))
        yv = T.ptx.ld.global_.f32(y.at(i))
        T.ptx.st.global_.f32(y.at(i), T.ptx.fma.rn.f32(alpha, xv, yv))


@T.kernel(block=32)
def branches(out: T.gptr[T.s32], k: T.s32):
    lane = T.laneid()
    v = T.reg(T.s32, init=0)
    with T.if_(lane < 16):
        v.set(k + 1)
    with T.else_():
        v.set(k - 1)
    with T.range(4) as i:
        with T.if_(i == 2):
            T.break_()
        v.set(v * 2)
    T.ptx.st.global_.s32(out.at(lane), v)


@T.kernel(block=64)
def smem_roundtrip(out: T.gptr[T.u32], ROWS: T.const = 2):
    buf = T.shared(T.u32, (ROWS, 64), align=16)
    t = T.tid.x
    for r in range(ROWS):  # Python loop: unrolled at trace time
        T.ptx.st.shared.u32(buf.at(r, t), t + r)
    T.ptx.bar.sync(0)
    acc = T.reg(T.u32, init=0)
    for r in range(ROWS):
        acc.set(acc + T.ptx.ld.shared.u32(buf.at(r, t)))
    T.ptx.st.global_.u32(out.at(t), acc, pred=t < 64)


GOLDEN = [(saxpy, {}), (branches, {}), (smem_roundtrip, {"ROWS": 3})]
