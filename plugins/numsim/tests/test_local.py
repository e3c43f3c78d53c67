"""Local memory (`T.local`): each thread has its own window, accesses are bounds-checked and
reads of bytes the thread never wrote are diagnosed, in batched and per-warp mode."""

import numpy as np
import pytest

import tirxh.lang as T
import tirxh_numsim as ns
from tirxh_numsim import events as ev


@T.kernel(grid=2, block=64)
def spill(x: T.gptr[T.u32], out: T.gptr[T.u32], n: T.u32):
    arr = T.local(T.u32, 16, name="arr")
    t = T.ctaid.x * 64 + T.tid.x
    v = T.ptx.ld.global_.u32(x.at(t))
    with T.range(0, n) as i:
        T.ptx.st.local.u32(arr.at(i), v * i + t)
    acc = T.reg(T.u32, 0)
    with T.range(0, n) as i:
        acc.set(acc + T.ptx.ld.local.u32(arr.at(n - 1 - i)) * (i + 1))
    T.ptx.st.local.u32(arr.at(0), acc)
    T.ptx.st.global_.u32(out.at(t), T.ptx.ld.local.u32(arr.at(0)))


def _want(x, n):
    t = np.arange(x.size, dtype=np.uint64)
    xs = x.astype(np.uint64)
    return sum((xs * (n - 1 - i) + t) * (i + 1) for i in range(n)).astype(np.uint32)


@pytest.mark.parametrize("n", [1, 7, 16])
@pytest.mark.parametrize("per_warp,trace", [(False, False), (False, True), (True, True)],
                         ids=["batched", "batched-traced", "per-warp"])
def test_spilled_array_gives_the_right_result(n, per_warp, trace):
    x = (np.arange(128, dtype=np.uint32) * 2654435761 % 1000).astype(np.uint32)
    res = ns.run(spill, dict(x=x, out=np.zeros(128, np.uint32), n=n), outputs=["out"],
                 trace=trace, per_warp=per_warp)
    assert res.verdict == "clean", res.summary()
    assert res.stats["mode"] == ("per-warp" if per_warp else "batched")
    np.testing.assert_array_equal(res.outputs["out"], _want(x, n))


def test_local_accesses_are_traced_in_the_local_space():
    x = np.arange(128, dtype=np.uint32)
    res = ns.run(spill, dict(x=x, out=np.zeros(128, np.uint32), n=2), trace=True)
    loc = [e for e in res.trace.events if isinstance(e, ev.MemAccess) and e.space == "local"]
    assert loc and {e.access for e in loc} == {"read", "write"}
    assert loc[0].ranges[0] == (0, 0, 4)  # arr[0] of lane 0: offset 0 of its own window


def test_out_of_bounds_local_access_is_an_error():
    x = np.arange(128, dtype=np.uint32)
    res = ns.run(spill, dict(x=x, out=np.zeros(128, np.uint32), n=17))
    oob = [f for f in res.diagnostics if f.kind == "numsim.out-of-bounds"]
    assert res.verdict == "error" and oob
    assert "out-of-bounds local write of 4 bytes" in oob[0].message
    assert "64 bytes per thread" in oob[0].message and oob[0].addresses[0] == "0x40"


def test_uninitialized_local_read_is_diagnosed_per_thread():
    @T.kernel(grid=1, block=32)
    def k(out: T.gptr[T.u32]):
        buf = T.local(T.u32, 4, name="buf")
        lane = T.laneid()
        with T.if_(lane < 16):  # only the low half writes its copy
            T.ptx.st.local.u32(buf.at(1), lane)
        T.ptx.st.global_.u32(out.at(lane), T.ptx.ld.local.u32(buf.at(1)))

    res = ns.run(k, dict(out=np.zeros(32, np.uint32)), outputs=["out"])
    (f,) = [f for f in res.diagnostics if f.kind == "numsim.uninitialized-local"]
    assert f.severity == "review" and "buf+4" in f.message
    assert f.lanes[0] == 16  # lane 16 never wrote: thread copies are separate
    np.testing.assert_array_equal(res.outputs["out"][:16], np.arange(16))


def test_two_local_variables_are_laid_out_at_their_alignment():
    @T.kernel(grid=1, block=32)
    def k(out: T.gptr[T.u64]):
        a = T.local(T.u8, 3, align=1, name="a")
        b = T.local(T.u64, 2, align=8, name="b")
        lane = T.laneid()
        T.ptx.st.local.u8(a.at(2), 7)
        T.ptx.st.local.u64(b.at(1), T.ptx.cvt.u64.u32(lane))
        s = T.ptx.add.u64(T.ptx.ld.local.u64(b.at(1)), T.ptx.cvt.u64.u8(
            T.ptx.ld.local.u8(a.at(2))))
        T.ptx.st.global_.u64(out.at(lane), s)

    res = ns.run(k, dict(out=np.zeros(32, np.uint64)), outputs=["out"], trace=True)
    assert res.verdict == "clean", res.summary()
    np.testing.assert_array_equal(res.outputs["out"], np.arange(32) + 7)
    offs = sorted({e.ranges[0][1] for e in res.trace.events
                   if isinstance(e, ev.MemAccess) and e.space == "local"})
    assert offs == [2, 16]  # a at 0, b at 8: b[1] at 16
