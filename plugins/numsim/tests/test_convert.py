"""Comparison, selection, conversion and data movement against hand-computed results."""

import ml_dtypes
import numpy as np

import tirxh.lang as T
import tirxh_numsim as ns
from tirxh_numsim.testing import one

BF = ml_dtypes.bfloat16
E4 = ml_dtypes.float8_e4m3fn


def test_setp_ordered_unordered_and_unsigned():
    a = np.array([1.0, np.nan, 2.0, 3.0] * 8, np.float32)
    b = np.array([1.0, 1.0, np.nan, 2.0] * 8, np.float32)
    assert list(one("setp.eq.f32", "pred", [("f32", a), ("f32", b)])[:4]) == [1, 0, 0, 0]
    assert list(one("setp.ne.f32", "pred", [("f32", a), ("f32", b)])[:4]) == [0, 0, 0, 1]
    assert list(one("setp.neu.f32", "pred", [("f32", a), ("f32", b)])[:4]) == [0, 1, 1, 1]
    assert list(one("setp.geu.f32", "pred", [("f32", a), ("f32", b)])[:4]) == [1, 1, 1, 1]
    assert list(one("setp.num.f32", "pred", [("f32", a), ("f32", b)])[:4]) == [1, 0, 0, 1]
    assert list(one("setp.nan.f32", "pred", [("f32", a), ("f32", b)])[:4]) == [0, 1, 1, 0]
    x = np.array([0xFFFFFFFF, 1] * 16, np.uint32)
    y = np.array([1, 2] * 16, np.uint32)
    assert list(one("setp.lo.u32", "pred", [("u32", x), ("u32", y)])[:2]) == [0, 1]
    assert list(one("setp.lt.s32", "pred", [("s32", x.view(np.int32)),
                                           ("s32", y.view(np.int32))])[:2]) == [1, 1]


def test_selp_and_pred_logic():
    c = np.array([1, 0] * 16, np.uint32)
    a = np.full(32, 7, np.uint32)
    b = np.full(32, 9, np.uint32)
    assert list(one("selp.u32", "u32", [("u32", a), ("u32", b), ("pred", c)])[:2]) == [7, 9]
    d = np.array([1, 1, 0, 0] * 8, np.uint32)
    e = np.array([1, 0, 1, 0] * 8, np.uint32)
    assert list(one("and.pred", "pred", [("pred", d), ("pred", e)])[:4]) == [1, 0, 0, 0]
    assert list(one("or.pred", "pred", [("pred", d), ("pred", e)])[:4]) == [1, 1, 1, 0]
    assert list(one("xor.pred", "pred", [("pred", d), ("pred", e)])[:4]) == [0, 1, 1, 0]
    assert list(one("not.pred", "pred", [("pred", d)])[:4]) == [0, 0, 1, 1]


def test_cvt_float_to_int_rounding_and_saturation():
    x = np.array([2.5, -2.5, 3.7, -3.7, 1e10, -1e10, np.nan, 0.5] * 4, np.float32)
    assert list(one("cvt.rni.s32.f32", "s32", [("f32", x)])[:8]) == \
        [2, -2, 4, -4, 2 ** 31 - 1, -2 ** 31, 0, 0]
    assert list(one("cvt.rzi.s32.f32", "s32", [("f32", x)])[:8]) == \
        [2, -2, 3, -3, 2 ** 31 - 1, -2 ** 31, 0, 0]
    assert list(one("cvt.rmi.s32.f32", "s32", [("f32", x)])[:4]) == [2, -3, 3, -4]
    assert list(one("cvt.rpi.u32.f32", "u32", [("f32", x)])[:6]) == [3, 0, 4, 0, 2 ** 32 - 1, 0]
    assert list(one("cvt.rni.f32.f32", "f32", [("f32", x)])[:4]) == [2.0, -2.0, 4.0, -4.0]


def test_cvt_int_widths_and_sat():
    s = np.array([-1, 300, -300, 100] * 8, np.int32)
    assert list(one("cvt.sat.u8.s32", "u8", [("s32", s)])[:4]) == [0, 255, 0, 100]
    assert list(one("cvt.sat.s8.s32", "s8", [("s32", s)])[:4]) == [-1, 127, -128, 100]
    assert list(one("cvt.s64.s32", "s64", [("s32", s)])[:4]) == [-1, 300, -300, 100]
    assert list(one("cvt.u64.u32", "u64", [("u32", s.view(np.uint32))])[:1]) == [2 ** 32 - 1]
    assert list(one("cvt.u16.u32", "u16", [("u32", np.full(32, 0x12345, np.uint32))])[:1]) == \
        [0x2345]


def test_cvt_float_narrowing_modes():
    x = np.array([1 + 2.0 ** -9, -(1 + 2.0 ** -9), 1e6, np.nan] * 8, np.float32)
    rn = one("cvt.rn.bf16.f32", "bf16", [("f32", x)])
    assert rn[0] == BF(1.0) and rn[1] == BF(-1.0) and np.isnan(rn[3].astype(np.float32))
    rp = one("cvt.rp.bf16.f32", "bf16", [("f32", x)])
    assert rp[0] == BF(1 + 2.0 ** -7) and rp[1] == BF(-1.0)
    y = np.array([1 + 2.0 ** -11 + 2.0 ** -13, 0, 1e6, 0] * 8, np.float32)
    rz = one("cvt.rz.f16.f32", "f16", [("f32", y)])
    assert rz[0] == np.float16(1.0) and rz[2] == np.float16(65504)  # rz saturates to max
    rn16 = one("cvt.rn.f16.f32", "f16", [("f32", y)])
    assert np.isinf(rn16[2]) and rn16[0] == np.float16(1 + 2.0 ** -10)
    up = one("cvt.f32.bf16", "f32", [("bf16", np.full(32, 3.5, BF))])
    assert up[0] == 3.5


def test_cvt_packed_and_fp8_and_tf32():
    a = np.full(32, 1.5, np.float32)
    b = np.full(32, -2.0, np.float32)
    got = one("cvt.rn.bf16x2.f32", "bf16x2", [("f32", a), ("f32", b)])
    # d = {a -> upper half, b -> lower half}
    want = np.uint32(BF(-2.0).view(np.uint16)) | (np.uint32(BF(1.5).view(np.uint16)) << 16)
    assert got[0] == want
    big = np.full(32, 1000.0, np.float32)
    got = one("cvt.rn.satfinite.e4m3x2.f32", "e4m3x2", [("f32", big), ("f32", b)])
    lo = np.uint16(np.asarray(-2.0, np.float32).astype(E4).view(np.uint8))
    hi = np.uint16(np.asarray(448.0, np.float32).astype(E4).view(np.uint8))
    assert got[0] == (lo | (hi << 8))
    got = one("cvt.rn.f16x2.e4m3x2", "f16x2", [("b16", np.full(32, lo | (hi << 8), np.uint16))])
    assert got[0] == (np.uint32(np.float16(-2.0).view(np.uint16)) |
                      (np.uint32(np.float16(448.0).view(np.uint16)) << 16))
    t = np.full(32, 1 + 2.0 ** -11 + 2.0 ** -12, np.float32)
    got = one("cvt.rna.tf32.f32", "b32", [("f32", t)])
    assert got[0] == np.float32(1 + 2.0 ** -10).view(np.uint32)


def test_mov_pack_unpack_and_cvta():
    lo = np.full(32, 0x11223344, np.uint32)
    hi = np.full(32, 0x55667788, np.uint32)
    got = one("mov.u32", "u32", [("u32", lo)])
    assert got[0] == 0x11223344

    @T.kernel(grid=1, block=32)
    def pack(out: T.gptr[T.u64], parts: T.gptr[T.u32]):
        i = T.tid.x
        a = T.ptx.ld.global_.b32(parts.at(i))
        b = T.ptx.ld.global_.b32(parts.at(i + 32))
        d = T.ptx.mov.b64([a, b])
        x, y = T.reg(T.b32), T.reg(T.b32)
        T.ptx.mov.b64([x, y], d)
        e = T.ptx.mov.b64([y, x])
        T.ptx.st.global_.b64(out.at(i), e)
    res = ns.run(pack, dict(out=np.zeros(32, np.uint64),
                            parts=np.concatenate([lo, hi])), grid=(1,))
    assert res.verdict == "clean", res.summary()
    assert res.outputs["out"][0] == (0x11223344 << 32) | 0x55667788
