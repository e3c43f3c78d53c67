"""Instruction-level tests of the base arithmetic bindings against hand-computed results."""



import numpy as np
import ml_dtypes
import pytest

from tirxh_numsim.testing import one
from tirxh_numsim.values import Unsupported, flush_subnormal

U32 = np.array([0, 1, 2, 0xFFFFFFFF, 0x80000000, 12345, 7, 100] * 4, np.uint32)
V32 = np.array([3, 0xFFFFFFFF, 5, 2, 0x80000000, 54321, 9, 3] * 4, np.uint32)
S32 = U32.view(np.int32)
T32 = V32.view(np.int32)


def test_add_sub_wrap_and_sat():
    assert np.array_equal(one("add.u32", "u32", [("u32", U32), ("u32", V32)]), U32 + V32)
    assert np.array_equal(one("sub.u32", "u32", [("u32", U32), ("u32", V32)]), U32 - V32)
    big = np.array([2 ** 31 - 1, -2 ** 31, 5, -5] * 8, np.int32)
    d = np.array([1, -1, 1, -1] * 8, np.int32)
    got = one("add.sat.s32", "s32", [("s32", big), ("s32", d)])
    assert list(got[:4]) == [2 ** 31 - 1, -2 ** 31, 6, -6]
    got = one("sub.sat.s32", "s32", [("s32", big), ("s32", -d)])
    assert list(got[:4]) == [2 ** 31 - 1, -2 ** 31, 6, -6]


def test_mul_lo_hi_wide():
    a, b = U32.astype(np.uint64), V32.astype(np.uint64)
    assert np.array_equal(one("mul.lo.u32", "u32", [("u32", U32), ("u32", V32)]),
                          (a * b & 0xFFFFFFFF).astype(np.uint32))
    assert np.array_equal(one("mul.hi.u32", "u32", [("u32", U32), ("u32", V32)]),
                          (a * b >> 32).astype(np.uint32))
    assert np.array_equal(one("mul.wide.u32", "u64", [("u32", U32), ("u32", V32)]), a * b)
    sa, sb = S32.astype(np.int64), T32.astype(np.int64)
    assert np.array_equal(one("mul.wide.s32", "s64", [("s32", S32), ("s32", T32)]), sa * sb)
    assert np.array_equal(one("mul.hi.s32", "s32", [("s32", S32), ("s32", T32)]),
                          (sa * sb >> 32).astype(np.int32))
    x = np.array([2 ** 63 + 5, 3] * 16, np.uint64)
    y = np.array([2 ** 40 + 1, 7] * 16, np.uint64)
    want = [(int(p) * int(q)) >> 64 for p, q in zip(x, y)]
    assert list(one("mul.hi.u64", "u64", [("u64", x), ("u64", y)])) == want


def test_mad():
    c = np.arange(32, dtype=np.uint32) * 1000
    got = one("mad.lo.u32", "u32", [("u32", U32), ("u32", V32), ("u32", c)])
    assert np.array_equal(got, U32 * V32 + c)
    cw = np.arange(32, dtype=np.uint64) << 40
    got = one("mad.wide.u32", "u64", [("u32", U32), ("u32", V32), ("u64", cw)])
    assert np.array_equal(got, U32.astype(np.uint64) * V32.astype(np.uint64) + cw)


def test_div_rem_truncate_and_div_by_zero_diagnosed():
    a = np.array([7, -7, 7, -7, 0, 5] * 5 + [1, 1], np.int32)
    b = np.array([2, 2, -2, -2, 3, 0] * 5 + [1, 1], np.int32)
    with pytest.raises(AssertionError, match="div-by-zero"):
        one("div.s32", "s32", [("s32", a), ("s32", b)])
    got = one("div.s32", "s32", [("s32", a), ("s32", b)], check_clean=False)
    assert list(got[:5]) == [3, -3, -3, 3, 0]
    got = one("rem.s32", "s32", [("s32", a), ("s32", b)], check_clean=False)
    assert list(got[:5]) == [1, -1, 1, -1, 0]
    ua, ub = np.array([7, 100] * 16, np.uint32), np.array([2, 7] * 16, np.uint32)
    assert list(one("div.u32", "u32", [("u32", ua), ("u32", ub)])[:2]) == [3, 14]
    assert list(one("rem.u32", "u32", [("u32", ua), ("u32", ub)])[:2]) == [1, 2]


def test_min_max_abs_neg_int():
    assert np.array_equal(one("min.s32", "s32", [("s32", S32), ("s32", T32)]),
                          np.minimum(S32, T32))
    assert np.array_equal(one("max.u32", "u32", [("u32", U32), ("u32", V32)]),
                          np.maximum(U32, V32))
    assert np.array_equal(one("max.relu.s32", "s32", [("s32", S32), ("s32", T32)]),
                          np.maximum(np.maximum(S32, T32), 0))
    x = np.array([5, -5, -2 ** 31, 0] * 8, np.int32)
    assert list(one("abs.s32", "s32", [("s32", x)])[:4]) == [5, 5, -2 ** 31, 0]
    assert list(one("neg.s32", "s32", [("s32", x)])[:4]) == [-5, 5, -2 ** 31, 0]


def test_bit_counting():
    x = np.array([0, 1, 0x80000000, 0xF0F0F0F0, 0xFFFFFFFF, 6, 0x00010000, 3] * 4, np.uint32)
    assert list(one("popc.b32", "u32", [("b32", x)])[:8]) == [0, 1, 1, 16, 32, 2, 1, 2]
    assert list(one("clz.b32", "u32", [("b32", x)])[:8]) == [32, 31, 0, 0, 0, 29, 15, 30]
    brev = [int(f"{int(v):032b}"[::-1], 2) for v in x[:8]]
    assert list(one("brev.b32", "b32", [("b32", x)])[:8]) == brev
    assert list(one("bfind.u32", "u32", [("u32", x)])[:8]) == \
        [0xFFFFFFFF, 0, 31, 31, 31, 2, 16, 1]
    s = np.array([-1, 1, -2, 0x40000000] * 8, np.int32)
    assert list(one("bfind.s32", "u32", [("s32", s)])[:4]) == [0xFFFFFFFF, 0, 0, 30]
    assert list(one("bfind.shiftamt.u32", "u32", [("u32", x)])[:3]) == [0xFFFFFFFF, 31, 0]


def test_bfe_bfi():
    x = np.array([0xABCD1234] * 32, np.uint32)
    pos = np.array([0, 4, 8, 28, 30, 0, 16, 40] * 4, np.uint32)
    ln = np.array([8, 8, 12, 4, 8, 32, 0, 4] * 4, np.uint32)
    got = one("bfe.u32", "u32", [("u32", x), ("u32", pos), ("u32", ln)])
    assert list(got[:8]) == [0x34, 0x23, 0xD12, 0xA, 0x2, 0xABCD1234, 0, 0]
    got = one("bfe.s32", "s32", [("s32", x.view(np.int32)), ("u32", pos), ("u32", ln)])
    assert list(got[:5]) == [0x34, 0x23, 0xD12 - 0x1000, 0xA - 0x10, -2]
    f = np.array([0xF] * 32, np.uint32)
    b = np.array([0] * 32, np.uint32)
    got = one("bfi.b32", "b32", [("b32", f), ("b32", b), ("u32", pos), ("u32", ln)])
    assert list(got[:4]) == [0xF, 0xF0, 0xF00, 0xF0000000]


def test_logic_shift_lop3_prmt_shf():
    a = np.array([0x0F0F0F0F, 0xFFFF0000] * 16, np.uint32)
    b = np.array([0x00FF00FF, 0x12345678] * 16, np.uint32)
    c = np.array([0x33333333, 0] * 16, np.uint32)
    assert np.array_equal(one("and.b32", "b32", [("b32", a), ("b32", b)]), a & b)
    assert np.array_equal(one("or.b32", "b32", [("b32", a), ("b32", b)]), a | b)
    assert np.array_equal(one("xor.b32", "b32", [("b32", a), ("b32", b)]), a ^ b)
    assert np.array_equal(one("not.b32", "b32", [("b32", a)]), ~a)
    assert list(one("cnot.b32", "b32", [("b32", np.array([0, 5] * 16, np.uint32))])[:2]) == [1, 0]
    # lut 0x96 = a ^ b ^ c; 0xE8 = majority
    assert np.array_equal(one("lop3.b32", "b32", [("b32", a), ("b32", b), ("b32", c)], [0x96]),
                          a ^ b ^ c)
    assert np.array_equal(one("lop3.b32", "b32", [("b32", a), ("b32", b), ("b32", c)], [0xE8]),
                          (a & b) | (a & c) | (b & c))
    n = np.array([0, 4, 31, 32, 40, 1, 8, 16] * 4, np.uint32)
    x = np.array([0x80000001] * 32, np.uint32)
    want_shl = [int(v) << int(k) & 0xFFFFFFFF if k < 32 else 0 for v, k in zip(x, n)]
    assert list(one("shl.b32", "b32", [("b32", x), ("u32", n)])) == want_shl
    want_shr = [int(v) >> int(k) if k < 32 else 0 for v, k in zip(x, n)]
    assert list(one("shr.u32", "u32", [("u32", x), ("u32", n)])) == want_shr
    sx = x.view(np.int32)
    want_sar = [int(v) >> min(int(k), 31) for v, k in zip(sx, n)]
    assert list(one("shr.s32", "s32", [("s32", sx), ("u32", n)])) == want_sar
    lo = np.array([0x11223344] * 32, np.uint32)
    hi = np.array([0x55667788] * 32, np.uint32)
    sel = np.array([0x3210, 0x7654, 0x0123, 0x4444, 0x8888] * 6 + [0, 0], np.uint32)
    got = one("prmt.b32", "b32", [("b32", lo), ("b32", hi), ("b32", sel)])
    assert list(got[:5]) == [0x11223344, 0x55667788, 0x44332211, 0x88888888, 0]
    amt = np.array([8, 36, 0, 32] * 8, np.uint32)
    got = one("shf.l.wrap.b32", "b32", [("b32", lo), ("b32", hi), ("u32", amt)])
    assert list(got[:4]) == [0x66778811, 0x56677881, 0x55667788, 0x55667788]
    got = one("shf.r.clamp.b32", "b32", [("b32", lo), ("b32", hi), ("u32", amt)])
    assert list(got[:4]) == [0x88112233, 0x55667788, 0x11223344, 0x55667788]


F = np.array([1.5, -2.25, 3e38, 1e-45, np.inf, -0.0, np.nan, 0.1] * 4, np.float32)
G = np.array([2.0, 0.5, 3e38, 1e-45, -np.inf, 0.0, 1.0, 0.2] * 4, np.float32)


def _same(a, b):
    return np.array_equal(np.asarray(a).view(np.uint32), np.asarray(b).view(np.uint32))


def test_float_add_mul_rn_is_ieee():
    with np.errstate(all="ignore"):
        assert _same(one("add.f32", "f32", [("f32", F), ("f32", G)], check_clean=False), F + G)
        assert _same(one("mul.f32", "f32", [("f32", F), ("f32", G)], check_clean=False), F * G)
        assert _same(one("sub.rn.f32", "f32", [("f32", F), ("f32", G)], check_clean=False),
                     F - G)


def test_float_directed_rounding():
    a = np.array([1.0] * 32, np.float32)
    b = np.array([2.0 ** -30] * 32, np.float32)  # 1 + 2^-30 is between 1 and nextafter(1)
    up = np.nextafter(np.float32(1), np.float32(2))
    assert one("add.rp.f32", "f32", [("f32", a), ("f32", b)])[0] == up
    assert one("add.rm.f32", "f32", [("f32", a), ("f32", b)])[0] == 1.0
    assert one("add.rz.f32", "f32", [("f32", -a), ("f32", -b)])[0] == -1.0
    assert one("add.rm.f32", "f32", [("f32", -a), ("f32", -b)])[0] == -up
    assert one("add.rn.f32", "f32", [("f32", a), ("f32", b)])[0] == 1.0


def test_fma_single_rounding_and_sat_ftz():
    a = np.array([1 + 2.0 ** -12] * 32, np.float32)
    c = np.array([-(1 + 2.0 ** -11)] * 32, np.float32)
    # a*a = 1 + 2^-11 + 2^-24 exactly; fma keeps 2^-24, mul then add loses it
    assert one("fma.rn.f32", "f32", [("f32", a), ("f32", a), ("f32", c)])[0] == 2.0 ** -24
    x = np.array([2.0, -1.0, 0.5, np.nan] * 8, np.float32)
    one_ = np.ones(32, np.float32)
    got = one("mul.sat.f32", "f32", [("f32", x), ("f32", one_)], check_clean=False)
    assert list(got[:4]) == [1.0, 0.0, 0.5, 0.0]
    sub = np.array([1e-40] * 32, np.float32)
    assert one("add.ftz.f32", "f32", [("f32", sub), ("f32", np.zeros(32, np.float32))])[0] == 0


def test_float_div_rcp_sqrt_minmax_absneg():
    a = np.array([1.0, 2.0, -3.0, 10.0] * 8, np.float32)
    b = np.array([3.0, 7.0, 5.0, 0.1] * 8, np.float32)
    assert _same(one("div.rn.f32", "f32", [("f32", a), ("f32", b)]), a / b)
    assert _same(one("rcp.rn.f32", "f32", [("f32", b)]), np.float32(1) / b)
    assert _same(one("sqrt.rn.f32", "f32", [("f32", b)]), np.sqrt(b))
    n = np.array([np.nan, 1.0, -0.0, 2.0] * 8, np.float32)
    m = np.array([1.0, np.nan, 0.0, -2.0] * 8, np.float32)
    got = one("min.f32", "f32", [("f32", n), ("f32", m)])
    assert list(got[:2]) == [1.0, 1.0] and got[3] == -2.0
    got = one("max.NaN.f32", "f32", [("f32", n), ("f32", m)])
    assert np.isnan(got[0]) and np.isnan(got[1]) and got[3] == 2.0
    assert _same(one("abs.f32", "f32", [("f32", F)]), np.abs(F))
    assert _same(one("neg.f32", "f32", [("f32", F)]), -F)
    d = np.array([1.0, 4.0] * 16, np.float64)
    assert np.array_equal(one("sqrt.rn.f64", "f64", [("f64", d)]), np.sqrt(d))


def test_approx_functions_are_representative():
    x = np.linspace(-3, 3, 32).astype(np.float32)
    np.testing.assert_allclose(one("ex2.approx.f32", "f32", [("f32", x)]), np.exp2(x), rtol=1e-6)
    np.testing.assert_allclose(one("tanh.approx.f32", "f32", [("f32", x)]), np.tanh(x),
                               rtol=1e-6, atol=1e-7)
    pos = np.abs(x) + 0.5
    np.testing.assert_allclose(one("rcp.approx.f32", "f32", [("f32", pos)]), 1 / pos, rtol=1e-6)
    np.testing.assert_allclose(one("lg2.approx.f32", "f32", [("f32", pos)]), np.log2(pos),
                               rtol=1e-6)
    np.testing.assert_allclose(one("rsqrt.approx.f32", "f32", [("f32", pos)]),
                               1 / np.sqrt(pos), rtol=1e-6)
    np.testing.assert_allclose(one("sin.approx.f32", "f32", [("f32", x)]), np.sin(x), atol=1e-6)
    np.testing.assert_allclose(one("cos.approx.f32", "f32", [("f32", x)]), np.cos(x), atol=1e-6)
    np.testing.assert_allclose(one("div.approx.f32", "f32", [("f32", x), ("f32", pos)]),
                               x / pos, rtol=1e-6)
    np.testing.assert_allclose(one("sqrt.approx.f32", "f32", [("f32", pos)]), np.sqrt(pos),
                               rtol=1e-6)


BF = ml_dtypes.bfloat16


def _pack(lo, hi, dt):
    return (np.asarray(lo, dt).view(np.uint16).astype(np.uint32) |
            (np.asarray(hi, dt).view(np.uint16).astype(np.uint32) << 16))


def test_half_precision_scalar_and_packed():
    a = np.array([1.0, 3.0, -2.5, 1000.0] * 8, np.float16)
    b = np.array([0.5, 2.0, 0.25, 0.125] * 8, np.float16)
    got = one("add.f16", "f16", [("f16", a), ("f16", b)])
    assert np.array_equal(got, (a + b).astype(np.float16))
    pa, pb = _pack(a, b, np.float16), _pack(b, a, np.float16)
    got = one("mul.rn.f16x2", "f16x2", [("f16x2", pa), ("f16x2", pb)])
    assert np.array_equal(got, _pack(a * b, b * a, np.float16))
    ba = np.array([1.0, 3.0, -2.5, 256.0] * 8, BF)
    bb = np.array([0.00390625, 2.0, 0.25, 1.0] * 8, BF)
    qa, qb = _pack(ba, bb, BF), _pack(bb, ba, BF)
    want_lo = (ba.astype(np.float64) + bb.astype(np.float64)).astype(BF)
    got = one("add.rn.bf16x2", "bf16x2", [("bf16x2", qa), ("bf16x2", qb)])
    assert np.array_equal(got, _pack(want_lo, want_lo, BF))
    got = one("fma.rn.bf16x2", "bf16x2", [("bf16x2", qa), ("bf16x2", qb), ("bf16x2", qa)])
    want = (ba.astype(np.float64) * bb.astype(np.float64) + ba.astype(np.float64)).astype(BF)
    want_hi = (bb.astype(np.float64) * ba.astype(np.float64) + bb.astype(np.float64)).astype(BF)
    assert np.array_equal(got, _pack(want, want_hi, BF))
    got = one("neg.bf16x2", "bf16x2", [("bf16x2", qa)])
    assert np.array_equal(got, _pack(-ba, -bb, BF))
    got = one("abs.f16", "f16", [("f16", -a)])
    assert np.array_equal(got, np.abs(a))
    got = one("max.f16x2", "f16x2", [("f16x2", pa), ("f16x2", pb)])
    assert np.array_equal(got, _pack(np.maximum(a, b), np.maximum(a, b), np.float16))
    got = one("sub.f16", "f16", [("f16", a), ("f16", b)])
    assert np.array_equal(got, (a - b).astype(np.float16))
    got = one("min.bf16x2", "bf16x2", [("bf16x2", qa), ("bf16x2", qb)])
    assert np.array_equal(got, _pack(np.minimum(ba, bb), np.minimum(ba, bb), BF))


def _f16(x):
    return np.array(x * 8, np.float16)


# (spelling, result type, sources, expected results): with .ftz a subnormal *result* is flushed to
# a zero of the result's sign (PTX ISA "Floating Point Instructions", .ftz), as the H200 did for
# rcp.approx.ftz.f32 in the GELU of zoo/kernels/activations.py (issue 19: 10 of 64M outputs of
# ~1e-38 came back 0); a normal result next to it is kept
FTZ_RESULTS = [
    ("rcp.approx.ftz.f32", "f32", [("f32", np.array([1e38, -1e38, 1e37, -2e38] * 8, np.float32))],
     [0.0, -0.0, np.float32(1e-37), -0.0]),
    ("ex2.approx.ftz.f32", "f32", [("f32", np.array([-127.5, -130.0, -126.0, -149.0] * 8,
                                                     np.float32))],
     [0.0, 0.0, 2.0 ** -126, 0.0]),
    ("div.approx.ftz.f32", "f32", [("f32", np.array([1e-30, -1e-30, 1e-20, 3e-31] * 8, np.float32)),
                                   ("f32", np.array([1e10, 1e10, 1e10, -1e9] * 8, np.float32))],
     [0.0, -0.0, np.float32(np.float32(1e-20) / np.float32(1e10)), -0.0]),
    ("ex2.approx.ftz.bf16", "bf16", [("bf16", np.array([-127.5, -130.0, -126.0, 1.0] * 8,
                                                       np.float32))],
     [0.0, 0.0, 2.0 ** -126, 2.0]),
    ("add.ftz.f16", "f16", [("f16", _f16([1e-4, -1e-4, 1e-4, 1.0])),
                            ("f16", _f16([-9e-5, 9e-5, 1e-4, 1.0]))],
     [0.0, -0.0, np.float16(np.float16(1e-4) + np.float16(1e-4)), 2.0]),
    ("rcp.approx.ftz.f64", "f64", [("f64", np.array([1e308, -1e308, 1e300, 4.0] * 8))],
     [0.0, -0.0, 1e-300, 0.25]),
    ("cvt.rn.ftz.f32.f64", "f32", [("f64", np.array([1e-40, -1e-40, 1e-30, -1e-45] * 8))],
     [0.0, -0.0, np.float32(1e-30), -0.0]),
]


@pytest.mark.parametrize("spelling,out_t,ins,want", FTZ_RESULTS, ids=[c[0] for c in FTZ_RESULTS])
def test_ftz_flushes_subnormal_results_to_a_zero_of_their_sign(spelling, out_t, ins, want):
    got = np.asarray(one(spelling, out_t, ins)[:4]).astype(np.float64)
    want = np.asarray(want, np.float64)
    assert np.array_equal(got, want), (got, want)
    assert list(np.signbit(got)) == list(np.signbit(want))  # -0.0 stays negative


def test_without_ftz_subnormal_results_are_kept():
    x = np.array([1e38, -1e38] * 16, np.float32)
    got = one("rcp.approx.f32", "f32", [("f32", x)])
    assert got[0] == np.float32(1) / np.float32(1e38) and got[0] != 0
    assert 0 > got[1] > -np.finfo(np.float32).tiny
    h = one("add.f16", "f16", [("f16", _f16([1e-4] * 4)), ("f16", _f16([-9e-5] * 4))])
    assert h[0] == np.float16(1e-4) + np.float16(-9e-5) != 0


def test_ftz_flushes_subnormal_inputs_too():
    sub = np.array([1e-40, -1e-40] * 16, np.float32)
    big = np.full(32, 1e30, np.float32)
    assert list(one("div.approx.ftz.f32", "f32", [("f32", sub), ("f32", np.full(32, 0.5,
                                                                               np.float32))])[:2]) \
        == [0.0, 0.0]
    got = one("min.ftz.f32", "f32", [("f32", sub), ("f32", big)])
    assert got[0] == 0 and got[1] == 0 and np.signbit(got[1])


def test_ftz_of_a_non_float_type_is_not_modeled():
    with pytest.raises(Unsupported, match=r"\.ftz on int32 values"):
        flush_subnormal(np.zeros(4, np.int32))
