"""numsim's alignment audit: every instruction with an alignment rule reports a misaligned
operand as a ``numsim.misaligned`` error (the GPU faults with CUDA_ERROR_MISALIGNED_ADDRESS)
instead of silently working. One misaligned kernel per rule, and its aligned twin clean."""

import re

import numpy as np
import pytest

import tirxh.lang as T
import tirxh_numsim as ns

TMA2D = T.ptx.cp.async_.bulk.tensor._2d.shared__cluster.global_.tile.mbarrier__complete_tx__bytes
BULK = T.ptx.cp.async_.bulk.shared__cluster.global_.mbarrier__complete_tx__bytes


def _vector_ld(skew):
    @T.kernel(grid=1, block=32)
    def k(x: T.gptr[T.f32], out: T.gptr[T.f32]):
        i = T.tid.x
        v = T.ptx.ld.global_.v4.f32(x.at(i * 4 + skew))
        T.ptx.st.global_.f32(out.at(i), v[0] + v[3])
    return k, dict(x=np.ones(140, np.float32), out=np.zeros(32, np.float32))


def _vector_st(skew):
    @T.kernel(grid=1, block=32)
    def k(out: T.gptr[T.u32]):
        buf = T.shared(T.u32, (80,), name="buf")
        i = T.tid.x
        T.ptx.st.shared.v2.u32(buf.at(i * 2 + skew), [i, i])
        T.ptx.st.global_.u32(out.at(i), T.ptx.ld.shared.u32(buf.at(i * 2 + skew)))
    return k, dict(out=np.zeros(32, np.uint32))


def _ldmatrix(skew):
    @T.kernel(grid=1, block=32)
    def k(out: T.gptr[T.u32]):
        tile = T.shared(T.b16, (9, 8), name="tile")
        lane = T.laneid()
        with T.range(lane, 36, 32) as j:
            T.ptx.st.shared.u32(tile.ptr() + j * 4, j)
        T.ptx.bar.sync(0)
        (frag,) = T.ptx["ldmatrix.sync.aligned.m8n8.x1.shared.b16"](tile.ptr() + lane * 16 + skew)
        T.ptx.st.global_.u32(out.at(lane), frag)
    return k, dict(out=np.zeros(32, np.uint32))


def _stmatrix(skew):
    @T.kernel(grid=1, block=32)
    def k(out: T.gptr[T.u32]):
        tile = T.shared(T.b16, (9, 8), name="tile")
        lane = T.laneid()
        T.ptx["stmatrix.sync.aligned.m8n8.x1.shared.b16"](tile.ptr() + lane * 16 + skew, [lane])
        T.ptx.bar.sync(0)
        T.ptx.st.global_.u32(out.at(lane), T.ptx.ld.shared.u32(tile.ptr() + lane * 4))
    return k, dict(out=np.zeros(32, np.uint32))


def _cp_async(skew):
    @T.kernel(grid=1, block=32)
    def k(src: T.gptr[T.u32], out: T.gptr[T.u32]):
        buf = T.shared(T.u32, (72,), name="buf")
        lane = T.laneid()
        T.ptx.cp.async_.ca.shared.global_(buf.ptr() + lane * 8 + skew, src.at(lane * 2), 8)
        T.ptx.cp.async_.commit_group()
        T.ptx.cp.async_.wait_group(0)
        T.ptx.bar.sync(0)
        T.ptx.st.global_.u32(out.at(lane), T.ptx.ld.shared.u32(buf.ptr() + lane * 8 + skew))
    return k, dict(src=np.arange(64, dtype=np.uint32), out=np.zeros(32, np.uint32))


def _tma(skew, swizzle):
    @T.kernel(grid=1, block=32)
    def k(tmap: T.tensormap, src: T.gptr[T.u8], out: T.gptr[T.u32]):
        tile = T.shared(T.u8, (8 * 128 + 1024,), align=1024, name="tile")
        bar = T.mbarrier(1, name="bar")
        tid = T.tid.x
        with T.if_(tid == 0):
            bar.init(1)
            T.ptx.fence.mbarrier_init.release.cluster()
            bar.arrive_expect_tx(8 * 128)
            TMA2D(tile.at(skew), tmap[0, 0], bar[0])
        bar.wait(0)
        T.ptx.st.global_.u32(out.at(tid), T.ptx.ld.shared.u32(tile.at(skew + tid * 4)))
    return k, dict(src=np.arange(8 * 128, dtype=np.uint32).astype(np.uint8).reshape(8, 128),
                   out=np.zeros(32, np.uint32),
                   tmap=T.TensorMap("src", box=(128, 8), swizzle=swizzle))


def _bulk(skew):
    @T.kernel(grid=1, block=32)
    def k(src: T.gptr[T.u32], out: T.gptr[T.u32]):
        buf = T.shared(T.u32, (80,), align=128, name="buf")
        bar = T.mbarrier(1, name="bar")
        lane = T.laneid()
        with T.if_(lane == 0):
            bar.init(1)
            bar.arrive_expect_tx(256)
            BULK(buf.at(skew), src.at(0), 256, bar[0])
        bar.wait(0)
        T.ptx.st.global_.u32(out.at(lane), T.ptx.ld.shared.u32(buf.at(lane + skew)))
    return k, dict(src=np.arange(64, dtype=np.uint32), out=np.zeros(32, np.uint32))


def _mbarrier(skew):
    @T.kernel(grid=1, block=32)
    def k(out: T.gptr[T.u32]):
        raw = T.shared(T.u32, (4,), align=8, name="raw")
        lane = T.laneid()
        with T.if_(lane == 0):
            T.ptx.mbarrier.init.shared__cta.b64(raw.at(skew), 1)
            T.ptx.mbarrier.arrive.shared__cta.b64(T.sink, raw.at(skew))
        T.ptx.st.global_.u32(out.at(lane), lane)
    return k, dict(out=np.zeros(32, np.uint32))


def _atom(skew):
    @T.kernel(grid=1, block=32)
    def k(out: T.gptr[T.u32]):
        buf = T.shared(T.u8, (16,), name="buf")
        lane = T.laneid()
        with T.if_(lane == 0):
            T.ptx.st.shared.u32(buf.at(0), 0)
        T.ptx.bar.sync(0)
        old = T.ptx.atom.shared.add.u32(buf.at(skew), 1)
        T.ptx.st.global_.u32(out.at(lane), old)
    return k, dict(out=np.zeros(32, np.uint32))


RULES = [  # (rule, build(skew) -> (kernel, inputs), misaligned skew, message fragment)
    ("ld.v4 16 bytes", _vector_ld, 1, re.escape("misaligned 16-byte vector global access")),
    ("st.v2 8 bytes", _vector_st, 1, re.escape("misaligned 8-byte vector shared access")),
    ("ldmatrix row 16 bytes", _ldmatrix, 8, re.escape("misaligned ldmatrix row address (16 bytes)")),
    ("stmatrix row 16 bytes", _stmatrix, 8, re.escape("misaligned stmatrix row address (16 bytes)")),
    ("cp.async cp-size", _cp_async, 4, re.escape("misaligned 8-byte cp.async shared destination")),
    ("TMA box 128 bytes", lambda s: _tma(s, 0), 16,
     r"misaligned TMA box in shared memory \(no swizzle\) .* \(not a multiple of 128"),
    ("TMA 128B swizzle period", lambda s: _tma(s, 128), 128,
     r"misaligned TMA box in shared memory \(128B swizzle\) .* \(not a multiple of 1024"),
    ("cp.async.bulk 16 bytes", _bulk, 2, re.escape("size and addresses must be multiples of 16")),
    ("mbarrier 8 bytes", _mbarrier, 1, re.escape("not 8-byte aligned")),
    ("atom width", _atom, 2, re.escape("misaligned 4-byte shared access")),
]


@pytest.mark.parametrize("rule,build,skew,message", RULES, ids=[r[0] for r in RULES])
def test_a_misaligned_operand_is_an_error(rule, build, skew, message):
    k, inputs = build(skew)
    res = ns.run(k, inputs, grid=(1,))
    mis = [f for f in res.diagnostics if f.kind == "numsim.misaligned"]
    assert res.verdict == "error" and mis, res.summary()
    assert any(re.search(message, f.message) for f in mis), \
        [f.message for f in mis]


@pytest.mark.parametrize("rule,build", [(r[0], r[1]) for r in RULES], ids=[r[0] for r in RULES])
def test_the_aligned_twin_is_clean(rule, build):
    k, inputs = build(0)
    res = ns.run(k, inputs, grid=(1,))
    assert not [f for f in res.diagnostics if f.kind == "numsim.misaligned"], res.summary()
