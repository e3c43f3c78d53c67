"""TMA (cp.async.bulk.tensor) loads and stores against numpy slicing, with every swizzle and
out-of-bounds fill, completing transaction bytes on an mbarrier."""

import ml_dtypes
import numpy as np
import pytest

import tirxh.lang as T
import tirxh_numsim as ns

BF = ml_dtypes.bfloat16
SMEM = 16384


def _swz(addr, S):
    if S == 0:
        return addr
    B = {32: 1, 64: 2, 128: 3}[S]
    return addr ^ ((addr & (((1 << B) - 1) << 7)) >> 3)


def _tma_load_kernel(ndim):
    load = getattr(T.ptx.cp.async_.bulk.tensor, f"_{ndim}d").shared__cluster.global_.tile \
        .mbarrier__complete_tx__bytes

    @T.kernel(grid=1, block=32)
    def k(tmap: T.tensormap, src: T.gptr[T.u8], out: T.gptr[T.u32], c0: T.s32, c1: T.s32,
          c2: T.s32, nbytes: T.u32):
        buf = T.shared(T.u32, (SMEM // 4,), align=1024, name="tile")
        bar = T.mbarrier(1)
        tid = T.tid.x
        # zero the tile first: bytes outside the box are then defined (on a GPU, shared memory
        # keeps whatever an earlier kernel left there)
        with T.range(tid, SMEM // 4, 32) as i:
            T.ptx.st.shared.u32(buf.at(i), 0)
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.bar.sync(0)
        with T.if_(tid == 0):
            bar.init(1)
            T.ptx.fence.mbarrier_init.release.cluster()
            bar.arrive_expect_tx(nbytes)
            coords = [c0, c1, c2][:ndim]
            load(buf.at(0), tmap[tuple(coords)], bar[0])
        bar.wait(0)
        with T.range(tid, SMEM // 4, 32) as i:
            T.ptx.st.global_.u32(out.at(i), T.ptx.ld.shared.u32(buf.at(i)))
    return k


CASES = [  # (dtype, global shape, box, swizzle, coords innermost-first); row pitches are
    # multiples of 16 bytes, as cuTensorMapEncodeTiled requires
    (np.float32, (40, 52), (8, 32), 128, (8, 5)),
    (np.float32, (40, 52), (8, 8), 32, (-4, 36)),
    (BF, (20, 72), (16, 32), 64, (56, 12)),
    (BF, (33, 64), (8, 64), 128, (-8, -4)),
    (np.float32, (17, 24), (4, 12), 0, (20, 15)),
    (np.uint8, (9, 304), (4, 128), 128, (240, 7)),
    (np.float32, (5, 6, 40), (2, 3, 32), 128, (16, 4, 4)),
]


@pytest.mark.parametrize("fill", ["zero", "nan"])
@pytest.mark.parametrize("dt,shape,box,S,coords", CASES)
def test_tma_tile_load_matches_numpy_slicing(dt, shape, box, S, coords, fill):
    if fill == "nan" and np.dtype(dt).kind not in "fV" and dt is not BF:
        pytest.skip("NaN fill applies to float tensors")
    k, inputs, want, unswizzle = tma_case(dt, shape, box, S, coords, fill)
    res = ns.run(k, inputs, grid=(1,), trace=True)
    assert res.verdict == "clean", res.summary()
    got = unswizzle(res.outputs["out"])
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
    # the transaction bytes completed the phase
    mb = [e for e in res.trace.events if type(e).__name__ == "MBarrierEvent"]
    ctx = [e for e in mb if e.op == "complete_tx"]
    assert ctx and ctx[0].tx_bytes == inputs["nbytes"] and ctx[0].completed_phase


def tma_case(dt, shape, box, S, coords, fill):
    """(kernel, inputs, expected box, unswizzle(out) -> box) for one TMA tile load."""
    rng = np.random.default_rng(0)
    src = rng.standard_normal(shape).astype(dt) if dt is not np.uint8 else \
        rng.integers(0, 255, shape).astype(np.uint8)
    esize = np.dtype(dt).itemsize
    nbytes = int(np.prod(box)) * esize
    k = _tma_load_kernel(len(shape))
    cs = list(coords) + [0] * (3 - len(coords))
    inputs = dict(tmap=T.TensorMap("src", box=box, swizzle=S, oob_fill=fill),
                  src=src, out=np.zeros(SMEM // 4, np.uint32), c0=cs[0], c1=cs[1],
                  c2=cs[2], nbytes=nbytes)
    # expected box: numpy slicing with padding (coords are innermost first, numpy is outermost)
    want = np.zeros(box, dt)
    if fill == "nan":  # the H200's NaN fill: 0x7FF7 in every 16-bit half
        want.view(np.uint16)[...] = 0x7FF7
    start = list(reversed(coords))
    sl_src, sl_dst = [], []
    for d, (s, b, n) in enumerate(zip(start, box, shape)):
        lo, hi = max(s, 0), min(s + b, n)
        sl_src.append(slice(lo, max(lo, hi)))
        sl_dst.append(slice(lo - s, lo - s + max(0, hi - lo)))
    want[tuple(sl_dst)] = src[tuple(sl_src)]

    def unswizzle(out):
        raw = out.view(np.uint8)
        return raw[_swz(np.arange(nbytes), S)].view(dt).reshape(box)
    return k, inputs, want, unswizzle


def test_tma_store_writes_in_bounds_only():
    @T.kernel(grid=1, block=32)
    def k(tmap: T.tensormap, dst: T.gptr[T.f32], c0: T.s32, c1: T.s32):
        buf = T.shared(T.f32, (8, 32), align=1024, name="tile")
        tid = T.tid.x
        for r in range(8):
            v = T.ptx.cvt.rn.f32.u32(tid + r * 32)
            T.ptx.st.shared.f32(buf.at(r, tid), v)
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.bar.sync(0)
        with T.if_(tid == 0):
            T.ptx.cp.async_.bulk.tensor._2d.global_.shared__cta.tile.bulk_group(
                tmap[c0, c1], buf.at(0, 0))
            T.ptx.cp.async_.bulk.commit_group()
            T.ptx.cp.async_.bulk.wait_group(0)
    dst = np.full((10, 40), -1.0, np.float32)
    res = ns.run(k, dict(tmap=T.TensorMap("dst", box=(8, 32)), dst=dst, c0=20, c1=6), grid=(1,))
    assert res.verdict == "clean", res.summary()
    want = dst.copy()
    tile = np.arange(256, dtype=np.float32).reshape(8, 32)
    want[6:10, 20:40] = tile[:4, :20]
    assert np.array_equal(res.outputs["dst"], want)


def test_invalid_tensor_maps_and_misaligned_boxes_are_errors():
    k = _tma_load_kernel(2)
    src = np.zeros((10, 50), np.float32)  # 200-byte rows: not a multiple of 16
    res = ns.run(k, dict(tmap=T.TensorMap("src", box=(8, 8)), src=src,
                         out=np.zeros(SMEM // 4, np.uint32), c0=0, c1=0, c2=0, nbytes=256),
                 grid=(1,))
    bad = [f for f in res.diagnostics if f.kind == "numsim.tensormap-invalid"]
    assert bad and "200 bytes" in bad[0].message and res.verdict == "error"
    src = np.zeros((10, 52), np.float32)
    res = ns.run(k, dict(tmap=T.TensorMap("src", box=(8, 8)), src=src,
                         out=np.zeros(SMEM // 4, np.uint32), c0=3, c1=0, c2=0, nbytes=256),
                 grid=(1,))
    mis = [f for f in res.diagnostics if f.kind == "numsim.tma-misaligned"]
    assert mis and "12 bytes" in mis[0].message and res.verdict == "error"
