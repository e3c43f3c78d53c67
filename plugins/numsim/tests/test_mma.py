"""mma.sync, ldmatrix/stmatrix, movmatrix and wgmma against numpy matmuls and transposes.

The fragment and shared-memory layouts are written here independently of numsim's decoder, from
the PTX ISA tables ("Matrix Fragments for mma.m16n8k*", "Shared Memory Matrix Layout" with the
canonical K-major/MN-major layouts and the 32/64/128-byte swizzles, as mixed-radix layouts).
"""

import ml_dtypes
import numpy as np
import pytest

import tirxh.lang as T
import tirxh_numsim as ns

BF = ml_dtypes.bfloat16
ELEM = {"bf16": BF, "f16": np.float16, "tf32": np.float32, "e4m3": ml_dtypes.float8_e4m3fn,
        "e5m2": ml_dtypes.float8_e5m2, "s8": np.int8, "u8": np.uint8}
RNG = np.random.default_rng(7)


def _rand(shape, ty):
    if ty in ("s8", "u8"):
        lo = -8 if ty == "s8" else 0
        return RNG.integers(lo, 8, shape).astype(ELEM[ty])
    x = RNG.standard_normal(shape).astype(np.float32)
    if ty == "tf32":  # values exactly representable in tf32
        return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    return x.astype(ELEM[ty])


def _words(elems: np.ndarray) -> np.ndarray:
    """Pack the last axis (4 bytes' worth of elements) into uint32, first element lowest."""
    b = np.ascontiguousarray(elems).view(np.uint8)
    return b.reshape(elems.shape[:-1] + (-1,)).view(np.uint32)[..., 0]


# --- mma.sync -------------------------------------------------------------------------------------

def _a_regs(A, K, e):
    """Per lane, the A registers: (g + 8*(i%2), e*t + K/2*(i//2) + j)."""
    nreg = 4 if K > 4 * e else 2
    out = np.zeros((32, nreg), np.uint32)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(nreg):
            r, c = g + 8 * (i % 2), e * t + (K // 2) * (i // 2)
            out[lane, i] = _words(A[r, c: c + e][None])[0]
    return out


def _b_regs(B, K, e):
    nreg = 2 if K > 4 * e else 1
    out = np.zeros((32, nreg), np.uint32)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(nreg):
            k0 = e * t + (K // 2) * i
            out[lane, i] = _words(B[k0: k0 + e, g][None])[0]
    return out


def _cd_lanes(D):
    out = np.zeros((32, 4), D.dtype)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(4):
            out[lane, i] = D[g + 8 * (i // 2), 2 * t + i % 2]
    return out


MMA_CASES = [("m16n8k16", "bf16", "f32"), ("m16n8k8", "bf16", "f32"), ("m16n8k16", "f16", "f32"),
             ("m16n8k8", "f16", "f32"), ("m16n8k8", "tf32", "f32"), ("m16n8k4", "tf32", "f32"),
             ("m16n8k32", "s8", "s32"), ("m16n8k16", "s8", "s32"), ("m16n8k32", "u8", "s32")]


@pytest.mark.parametrize("shape,ty,acc", MMA_CASES)
def test_mma_sync_matches_numpy(shape, ty, acc):
    k, inputs, want = mma_case(shape, ty, acc)
    res = ns.run(k, inputs, grid=(1,), outputs=["d"])
    assert res.verdict == "clean", res.summary()
    got = res.outputs["d"].view(np.int32 if acc == "s32" else np.float32).reshape(32, 4)
    if acc == "s32":
        assert np.array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_tensor_core_rounding_aligns_and_truncates():
    """Hand-computed: terms are truncated to 2^(emax-25) before the sum, the sum to 23 bits."""
    from tirxh_numsim.sem_mma import tc_dot
    one = np.zeros((1, 1, 16))
    one[0, 0, :4] = 1.0
    b = np.zeros((1, 16))
    b[0, :4] = [1.0, 2.0 ** -24, 2.0 ** -24, 2.0 ** -24]  # 1 + 1.5 ulp
    assert tc_dot(one, b, np.zeros((1, 1, 1)), "bf16")[0, 0, 0] == 1 + 2.0 ** -23  # RZ, not RN
    b[0, :4] = [1.0, 3 * 2.0 ** -26, 3 * 2.0 ** -26, 3 * 2.0 ** -26]
    # exact sum 1 + 2.25 ulp would truncate to 1 + 2 ulp; aligned terms (each 2^-25) give 1.0
    assert tc_dot(one, b, np.zeros((1, 1, 1)), "bf16")[0, 0, 0] == 1.0
    # the accumulator takes part in the alignment: a large C truncates small products away
    b[0, :4] = [2.0 ** -20, 0, 0, 0]
    assert tc_dot(one, b, np.full((1, 1, 1), 64.0), "bf16")[0, 0, 0] == 64.0
    # fp8: 13 bits
    b[0, :4] = [1.0, 2.0 ** -13, 2.0 ** -14, 0]
    assert tc_dot(one, b, np.zeros((1, 1, 1)), "e4m3")[0, 0, 0] == 1 + 2.0 ** -13
    # integers are exact
    ai = np.full((1, 1, 16), 100.0)
    bi = np.full((1, 16), -100.0)
    assert tc_dot(ai, bi, np.full((1, 1, 1), 7.0), "s8")[0, 0, 0] == -160000 + 7


def _tc_inputs(rng, ty, spread, shape):
    """Random values of tensor-core input type `ty` (as float64) over 2^±spread, with zeros."""
    import ml_dtypes
    el = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "tf32": np.float32,
          "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}[ty]
    x = rng.standard_normal(shape) * np.exp2(rng.uniform(-spread, spread, shape))
    x[rng.random(shape) < 0.1] = 0.0
    x[rng.random(shape) < 0.05] = -0.0
    with np.errstate(over="ignore"):
        x = x.astype(np.float32).astype(el).astype(np.float64)
    if ty == "tf32":
        x = (x.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(
            np.float32).astype(np.float64)
    return x


@pytest.mark.parametrize("ty", ["bf16", "f16", "tf32", "e4m3", "e5m2"])
def test_tensor_core_fast_path_is_bitwise_the_float64_model(ty):
    """`tc_dot` (float32 slabs, integer sums) against `tc_dot_reference` (float64, all products
    at once): every bit of every output, over exponent spreads from narrow to extreme (which
    leave the fast path for the reference: Inf, NaN, out-of-range exponents), with shared and
    per-warp B."""
    from tirxh_numsim.sem_mma import _tc_dot_f32, tc_dot, tc_dot_reference
    rng = np.random.default_rng(sum(map(ord, ty)))
    K = {"tf32": 8, "e4m3": 32, "e5m2": 32}.get(ty, 16)
    fast = 0
    for trial in range(40):
        spread = [0.5, 4, 12, 40][trial % 4]
        W, N, U = 1 + trial % 4, [8, 64, 128][trial % 3], 1 + trial % 2
        U = U if W % U == 0 else 1
        A = _tc_inputs(rng, ty, spread, (W, 16, K))
        B = _tc_inputs(rng, ty, spread, (U, N, K))
        C = (rng.standard_normal((W, 16, N)) * np.exp2(rng.uniform(-spread, spread, (W, 16, N)))
             ).astype(np.float32).astype(np.float64)
        C[rng.random(C.shape) < 0.2] = 0.0
        b_of = np.repeat(np.arange(U), W // U) if trial % 3 else rng.integers(0, U, W)
        with np.errstate(all="ignore"):
            want = tc_dot_reference(A, B[b_of], C, ty)
            got = tc_dot(A, B, C, ty, b_of)
            fast += _tc_dot_f32(A, B, b_of, C, ty) is not None
        assert np.array_equal(got.view(np.uint64), want.view(np.uint64)) or \
            np.array_equal(got, want, equal_nan=True) and \
            np.array_equal(np.signbit(got), np.signbit(want)), (ty, trial)
    assert fast >= 20  # most cases exercise the fast path itself


def mma_case(shape, ty, acc):
    """(kernel, inputs, expected per-lane D registers (32 x 4)) for one mma.sync shape."""
    K = int(shape.split("k")[1])
    e = 4 // np.dtype(ELEM[ty]).itemsize
    A, B = _rand((16, K), ty), _rand((K, 8), ty)
    C = (RNG.integers(-50, 50, (16, 8)) if acc == "s32" else RNG.standard_normal((16, 8))
         ).astype(np.int32 if acc == "s32" else np.float32)
    ar, br, cr = _a_regs(A, K, e), _b_regs(B, K, e), _cd_lanes(C)
    na, nb = ar.shape[1], br.shape[1]
    spelling = f"mma.sync.aligned.{shape}.row.col.{acc}.{ty}.{ty}.{acc}"

    @T.kernel(grid=1, block=32)
    def k(a: T.gptr[T.u32], b: T.gptr[T.u32], c: T.gptr[T.u32], d: T.gptr[T.u32]):
        lane = T.tid.x
        ra = [T.ptx.ld.global_.b32(a.at(lane * na + i)) for i in range(na)]
        rb = [T.ptx.ld.global_.b32(b.at(lane * nb + i)) for i in range(nb)]
        acc_t = T.s32 if acc == "s32" else T.f32
        rc = T.fragment(acc_t, 4)
        for i in range(4):
            T.ptx.mov.b32(rc[i], T.ptx.ld.global_.b32(c.at(lane * 4 + i)))
        rd = T.fragment(acc_t, 4)
        T.ptx[spelling](rd, ra, rb, rc)
        for i in range(4):
            T.ptx.st.global_.b32(d.at(lane * 4 + i), rd[i])
    inputs = dict(a=ar.reshape(-1), b=br.reshape(-1), c=cr.reshape(-1).view(np.uint32),
                  d=np.zeros(128, np.uint32))
    if acc == "s32":
        want = _cd_lanes((A.astype(np.int64) @ B.astype(np.int64) + C).astype(np.int32))
    else:
        want = _cd_lanes((_as64(A, ty) @ _as64(B, ty) + C).astype(np.float32))
    return k, inputs, want


@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_stmatrix_roundtrip(trans):
    M = np.arange(4 * 64, dtype=np.uint16).reshape(4, 8, 8)  # four 8x8 b16 matrices
    tr = ".trans" if trans else ""

    @T.kernel(grid=1, block=32)
    def k(src: T.gptr[T.u16], frag: T.gptr[T.u32], back: T.gptr[T.u16]):
        buf = T.shared(T.u16, (4, 8, 8), name="mats")
        out = T.shared(T.u16, (4, 8, 8), name="outm")
        lane = T.tid.x
        for j in range(8):
            T.ptx.st.shared.u16(buf.at(lane >> 3, lane & 7, j),
                                T.ptx.ld.global_.u16(src.at(lane * 8 + j)))
        T.ptx.bar.sync(0)
        regs = T.ptx[f"ldmatrix.sync.aligned.m8n8.x4{tr}.shared.b16"](
            buf.at(lane >> 3, lane & 7))
        for i in range(4):
            T.ptx.st.global_.b32(frag.at(lane * 4 + i), regs[i])
        T.ptx[f"stmatrix.sync.aligned.m8n8.x4{tr}.shared.b16"](out.at(lane >> 3, lane & 7), regs)
        T.ptx.bar.sync(0)
        for j in range(8):
            T.ptx.st.global_.u16(back.at(lane * 8 + j), T.ptx.ld.shared.u16(
                out.at(lane >> 3, lane & 7, j)))
    res = ns.run(k, dict(src=M.reshape(-1), frag=np.zeros(128, np.uint32),
                         back=np.zeros(256, np.uint16)), grid=(1,))
    assert res.verdict == "clean", res.summary()
    frag = res.outputs["frag"].reshape(32, 4)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(4):
            m = M[i].T if trans else M[i]
            assert frag[lane, i] == int(m[g, 2 * t]) | (int(m[g, 2 * t + 1]) << 16)
    assert np.array_equal(res.outputs["back"], M.reshape(-1))  # stmatrix inverts ldmatrix


# --- movmatrix ------------------------------------------------------------------------------------

MOVMATRIX = T.ptx["movmatrix.sync.aligned.m8n8.trans.b16"]


def _movmatrix_kernel(divergent: bool):
    """Each warp transposes its 8x8 b16 matrix: lane l's word is row l // 4, columns 2(l % 4)
    (low half) and 2(l % 4) + 1, which is word l of the row-major matrix (PTX ISA, movmatrix)."""
    @T.kernel(grid=1, block=64)
    def k(src: T.gptr[T.u32], dst: T.gptr[T.u32]):
        lane = T.tid.x
        x = T.ptx.ld.global_.b32(src.at(lane))
        y = T.reg(T.u32, init=0)
        if divergent:
            with T.if_(T.laneid() < 16):
                T.ptx.mov.b32(y, MOVMATRIX(x))
        else:
            T.ptx.mov.b32(y, MOVMATRIX(x))
        T.ptx.st.global_.b32(dst.at(lane), y)
    return k


def test_movmatrix_transposes_each_warps_matrix():
    M = (np.arange(2 * 64, dtype=np.float32) - 60).astype(BF).reshape(2, 8, 8)  # all distinct
    res = ns.run(_movmatrix_kernel(False), dict(src=M.reshape(-1).view(np.uint32),
                                                dst=np.zeros(64, np.uint32)), grid=(1,))
    assert res.verdict == "clean", res.summary()
    got = res.outputs["dst"].reshape(2, 32)
    for w in range(2):
        want = M[w].T
        for lane in range(32):
            g, t = lane // 4, lane % 4
            lo, hi = want[g, 2 * t: 2 * t + 2].view(np.uint16)
            assert got[w, lane] == int(lo) | (int(hi) << 16), (w, lane)
    assert np.array_equal(got.view(BF).reshape(2, 8, 8), M.transpose(0, 2, 1))


def test_movmatrix_in_a_partial_warp_is_an_error():
    """.aligned: lanes 16-31 do not supply their rows; as for mma.sync, numsim says so."""
    res = ns.run(_movmatrix_kernel(True), dict(src=np.arange(64, dtype=np.uint32),
                                               dst=np.zeros(64, np.uint32)), grid=(1,))
    f = [f for f in res.diagnostics if f.kind == "numsim.partial-warp"]
    assert f and "movmatrix executed by a partial warp" in f[0].message, res.summary()
    assert res.verdict == "error"


# --- wgmma ----------------------------------------------------------------------------------------

MODE = {0: 0, 128: 1, 64: 2, 32: 3}


def _swz(addr, S):
    """CUTLASS-style Swizzle<B,4,3>: bits [7, 7+B) folded onto bits [4, 4+B)."""
    if S == 0:
        return addr
    B = {32: 1, 64: 2, 128: 3}[S]
    yyy = ((1 << B) - 1) << 7
    return addr ^ ((addr & yyy) >> 3)


def _layout(rows, K, esize, major, S):
    """(byte addresses rows x K before swizzle, lbo, sbo) of a dense canonical layout."""
    Tn = 16 // esize
    if major == "K":
        if S == 0:
            lbo, sbo = 128, 128 * (K * esize // 16)
            radix = [((8, 16), (None, sbo)), ((Tn, esize), (None, lbo))]
        else:
            lbo, sbo = 16, 8 * S
            radix = [((8, S), (None, sbo)), ((Tn, esize), (None, 16))]
    else:
        if S == 0:
            sbo = 128
            lbo = 128 * (rows // Tn)
            radix = [((Tn, esize), (None, sbo)), ((8, 16), (None, lbo))]
        else:
            c = S // 16
            blocks = max(1, rows // (Tn * c))
            lbo = 8 * S
            sbo = 8 * S * blocks
            radix = [((Tn, esize), (c, 16), (None, lbo)), ((8, S), (None, sbo))]
    idx = [np.arange(rows)[:, None], np.arange(K)[None, :]]
    addr = np.zeros((rows, K), np.int64)
    for v, modes in zip(idx, radix):
        rem = v
        for size, stride in modes:
            if size is None:
                addr = addr + rem * stride
            else:
                addr = addr + (rem % size) * stride
                rem = rem // size
    return addr, lbo, sbo


def _place(img, X, base, major, S):
    esize = X.dtype.itemsize
    addr, lbo, sbo = _layout(X.shape[0], X.shape[1], esize, major, S)
    phys = _swz(base + addr, S)
    raw = np.ascontiguousarray(X).view(np.uint8).reshape(X.shape[0], X.shape[1], esize)
    for j in range(esize):
        img[phys + j] = raw[:, :, j]
    desc_hi = ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 | MODE[S] << 62
    return desc_hi


OFF_B = 16384


def _wgmma_kernel(N, K, ty, acc, trans_a, trans_b, rs):
    spelling = f"wgmma.mma_async.sync.aligned.m64n{N}k{K}.{acc}.{ty}.{ty}"
    half = ty in ("bf16", "f16")

    @T.kernel(grid=1, block=128)
    def k(img: T.gptr[T.u32], afrag: T.gptr[T.u32], out: T.gptr[T.f32], hi_a: T.u64,
          hi_b: T.u64):
        buf = T.shared(T.u32, (32768 // 4,), align=1024, name="tiles")
        tid = T.tid.x
        with T.range(tid, 32768 // 4, 128) as i:
            T.ptx.st.shared.u32(buf.at(i), T.ptx.ld.global_.u32(img.at(i)))
        T.ptx.bar.sync(0)
        T.ptx.fence.proxy.async_.shared__cta()
        base = buf.ptr()
        da = T.ptx.or_.b64(T.ptx.cvt.u64.u32(T.ptx.shr.u32(base, 4)), hi_a)
        db = T.ptx.or_.b64(T.ptx.cvt.u64.u32(T.ptx.shr.u32(base + OFF_B, 4)), hi_b)
        acc_r = T.fragment(T.f32, N // 2)
        zero = T.ptx.setp.ne.u32(tid, tid)
        T.ptx.wgmma.fence.sync.aligned()
        a_op = [T.ptx.ld.global_.b32(afrag.at(tid * 4 + i)) for i in range(4)] if rs else da
        extra = [1, 1] if ty not in ("s8", "u8") else []
        if half:
            extra += ([] if rs else [trans_a]) + [trans_b]
        T.ptx[spelling](acc_r, a_op, db, zero, *extra)
        T.ptx.wgmma.commit_group.sync.aligned()
        T.ptx.wgmma.wait_group.sync.aligned(0)
        lane = T.laneid()
        w = tid >> 5
        row = w * 16 + (lane >> 2)
        base_idx = row * N + (lane & 3) * 2
        for i in range(N // 2):
            off = (8 * ((i // 2) % 2)) * N + 8 * (i // 4) + i % 2
            T.ptx.st.global_.f32(out.at(base_idx, 4 * off), acc_r[i])
    return k


def _run_wgmma(N, K, ty, a_major, b_major, Sa, Sb, rs=False):
    k, inputs, want = wgmma_case(N, K, ty, a_major, b_major, Sa, Sb, rs)
    res = ns.run(k, inputs, grid=(1,), outputs=["out"])
    assert res.verdict == "clean", res.summary()
    got = res.outputs["out"].reshape(64, N)
    # fp8 accumulates with 13-bit truncation (as the H200 does); others within a few ulp
    tol = 2.0 ** -11 if ty in ("e4m3", "e5m2") else 1e-5
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())
    return res


def wgmma_case(N, K, ty, a_major, b_major, Sa, Sb, rs=False):
    """(kernel, inputs, expected 64 x N product) for one wgmma layout combination."""
    A = _rand((64, K), ty)
    B = _rand((N, K), ty)
    img = np.zeros(32768, np.uint8)
    esize = np.dtype(ELEM[ty]).itemsize
    hi_a = 0 if rs else _place(img, A if a_major == "K" else A, 0, a_major, Sa)
    hi_b = _place(img, B, OFF_B, b_major, Sb)
    afrag = np.zeros((128, 4), np.uint32)
    if rs:
        e = 4 // esize
        for tid in range(128):
            w, lane = tid // 32, tid % 32
            g, t = lane // 4, lane % 4
            for i in range(4):
                r, c = 16 * w + g + 8 * (i % 2), e * t + (K // 2) * (i // 2)
                afrag[tid, i] = _words(A[r, c: c + e][None])[0]
    k = _wgmma_kernel(N, K, ty, "f32", int(a_major == "MN"), int(b_major == "MN"), rs)
    inputs = dict(img=img.view(np.uint32), afrag=afrag.reshape(-1),
                  out=np.zeros(64 * N, np.float32), hi_a=np.uint64(hi_a), hi_b=np.uint64(hi_b))
    want = (_as64(A, ty) @ _as64(B, ty).T).astype(np.float32)
    return k, inputs, want


def _as64(x, ty):
    if ty == "tf32":
        return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    return x.astype(np.float64)


@pytest.mark.parametrize("S", [0, 32, 64, 128])
@pytest.mark.parametrize("major", ["K", "MN"])
def test_wgmma_ss_bf16_every_layout_and_swizzle(major, S):
    _run_wgmma(64, 16, "bf16", major, major, S, S)


@pytest.mark.parametrize("ty,K", [("f16", 16), ("tf32", 8), ("e4m3", 32), ("e5m2", 32)])
@pytest.mark.parametrize("S", [0, 128])
def test_wgmma_ss_dtypes(ty, K, S):
    _run_wgmma(32, K, ty, "K", "K", S, S)


def test_wgmma_mixed_layouts_and_wide_n():
    _run_wgmma(256, 16, "bf16", "K", "MN", 128, 64)
    _run_wgmma(8, 16, "f16", "MN", "K", 32, 0)


@pytest.mark.parametrize("ty,K", [("bf16", 16), ("tf32", 8), ("e4m3", 32)])
def test_wgmma_register_a(ty, K):
    _run_wgmma(64, K, ty, "K", "K", 0, 128, rs=True)


def test_wgmma_results_land_at_wait_group_not_before():
    """Reading the accumulators before wgmma.wait_group sees the old values (the hazard
    sync_check flags); after the wait they hold the product."""
    @T.kernel(grid=1, block=128)
    def k(out: T.gptr[T.f32], early: T.gptr[T.f32]):
        buf = T.shared(T.u32, (2048,), align=1024)
        tid = T.tid.x
        with T.range(tid, 2048, 128) as i:
            T.ptx.st.shared.u32(buf.at(i), 0x3F803F80)  # bf16 pairs of 1.0
        T.ptx.bar.sync(0)
        base = buf.ptr()
        d = T.ptx.or_.b64(T.ptx.cvt.u64.u32(T.ptx.shr.u32(base, 4)), (8 << 16) | (16 << 32))
        acc = T.fragment(T.f32, 4, init=5.0)
        one = T.ptx.setp.eq.u32(tid, tid)
        T.ptx.wgmma.fence.sync.aligned()
        T.ptx.wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16(acc, d, d, one, 1, 1, 0, 0)
        T.ptx.wgmma.commit_group.sync.aligned()
        T.ptx.st.global_.f32(early.at(tid), acc[0])
        T.ptx.wgmma.wait_group.sync.aligned(0)
        T.ptx.st.global_.f32(out.at(tid), acc[0])
    res = ns.run(k, dict(out=np.zeros(128, np.float32), early=np.zeros(128, np.float32)),
                 grid=(1,), trace=True)
    assert res.verdict == "clean", res.summary()
    assert np.all(res.outputs["early"] == 5.0)
    assert np.all(res.outputs["out"] == 21.0)  # 5 + sum of 16 products of 1*1
    stages = [e.stage for e in res.trace.events if type(e).__name__ == "AsyncOp"
              and e.warp == 0]
    assert stages == ["issue", "commit", "complete", "wait"]
