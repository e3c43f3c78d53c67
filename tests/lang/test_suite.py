"""Suites: case parameters flow to inputs, the reference, the grid, constants and work counts;
tolerances decide correctness."""

import inspect

import numpy as np
import pytest

import tirxh.lang as T
from tirxh.core.errors import SuiteError
from tirxh.core.suite import Tolerance
from tirxh.core.types import numpy_dtype


@T.kernel(grid=lambda n, BLOCK: T.cdiv(n, BLOCK), block=lambda BLOCK: BLOCK)
def scale(x: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32, BLOCK: T.const = 128):
    i = T.ctaid.x * BLOCK + T.tid.x
    with T.if_(i < n):
        T.ptx.st.global_.f32(out.at(i), T.ptx.ld.global_.f32(x.at(i)) * 2.0)


def _inputs(rng, n):
    return dict(x=rng.standard_normal(n, dtype=np.float32), out=np.empty(n, np.float32), n=n)


SUITE = T.suite(scale, inputs=_inputs, reference=lambda x: {"out": 2 * x}, outputs=["out"],
                cases=[T.case("small", n=300), T.case("wide", n=4096, BLOCK=256, small=False)],
                flops=lambda n: n, bytes=lambda n: 8 * n)


def test_case_parameters_reach_grid_consts_inputs_and_work():
    small, wide = SUITE.cases
    assert SUITE.consts(small) == {"BLOCK": 128} and SUITE.consts(wide) == {"BLOCK": 256}
    assert SUITE.grid(small) == (3, 1, 1) and SUITE.grid(wide) == (16, 1, 1)
    assert SUITE.work(wide) == {"flops": 4096, "bytes": 8 * 4096, "flops_dtype": None}
    inp = SUITE.make_inputs(small, seed=3)
    assert inp["x"].shape == (300,) and inp["n"] == 300
    np.testing.assert_array_equal(inp["x"], SUITE.make_inputs(small, seed=3)["x"])
    assert not np.array_equal(inp["x"], SUITE.make_inputs(small, seed=4)["x"])
    np.testing.assert_array_equal(SUITE.expected(small, inp)["out"], 2 * inp["x"])
    assert scale.specialize(**SUITE.consts(wide)).block == (256, 1, 1)


def test_inputs_must_provide_every_runtime_parameter():
    bad = T.suite(scale, inputs=lambda rng, n: {"x": np.zeros(n, np.float32)},
                  cases=[T.case("c", n=4)])
    with pytest.raises(ValueError, match="did not provide out, n"):
        bad.make_inputs(bad.cases[0])


def test_duplicate_case_names_and_non_kernels_are_refused():
    with pytest.raises(ValueError, match="duplicate case names"):
        T.suite(scale, inputs=_inputs, cases=[T.case("a", n=1), T.case("a", n=2)])
    with pytest.raises(TypeError, match="expected a @T.kernel"):
        T.suite(lambda: None, inputs=_inputs)


def test_tolerance_floats_nan_and_rms():
    ref = np.linspace(-1, 1, 101, dtype=np.float32)
    tol = Tolerance(rtol=1e-3, atol=1e-3, rms=1e-4)
    assert tol.compare(ref, ref)["ok"]
    near = ref + np.float32(5e-4)
    r = tol.compare(near, ref)
    assert r["mismatches"] == 0 and not r["ok"] and "normalized RMS error" in r["reason"]
    assert Tolerance(1e-3, 1e-3).compare(near, ref)["ok"]
    far = ref.copy()
    far[7] += 1
    r = tol.compare(far, ref)
    assert not r["ok"] and r["mismatches"] == 1 and r["first"][0]["index"] == [7]
    withnan = ref.copy()
    withnan[3] = np.nan
    assert not Tolerance(1.0, 1.0).compare(withnan, ref)["ok"]  # NaN never passes
    assert tol.compare(ref.astype(numpy_dtype("bf16")), ref)["mismatches"] > 0


def test_tolerance_atol_relative_to_each_references_rms():
    """atol_rms: a rule "atol = x * RMS(ref)" per output (KDA's o and final state differ ~11x
    in RMS: one absolute atol fitted to the smaller failed the larger's legitimate rounding)."""
    big = np.full(100, 20.0, np.float32)           # RMS 20: atol 0.5 * 20 = 10
    tol = T.tolerance(atol_rms=0.5)
    assert tol.absolute(big) == 10.0 and tol.absolute(big, big / 4) == 2.5  # the strictest
    assert T.tolerance(atol=0.25).absolute(big) == 0.25 and tol.absolute() == 0.0
    off = big.copy()
    off[3] += 9.5
    assert tol.compare(off, big)["ok"] and not T.tolerance(atol=0.5).compare(off, big)["ok"]
    off[3] += 1.0
    r = tol.compare(off, big)
    assert not r["ok"] and r["mismatches"] == 1 and r["first"][0]["index"] == [3]


def test_tolerance_integers_are_exact_and_shapes_must_match():
    a = np.arange(6, dtype=np.int32)
    assert Tolerance(atol=10).compare(a, a)["ok"]
    assert not Tolerance(atol=10).compare(a + 1, a)["ok"]
    r = Tolerance().compare(a.reshape(2, 3), a)
    assert not r["ok"] and "shape" in r["reason"]


def test_suite_case_passes_in_numsim():
    numsim = pytest.importorskip("tirxh_numsim")
    small = SUITE.cases[0]
    inp = SUITE.make_inputs(small, seed=1)
    res = numsim.run(scale, inp, consts=SUITE.consts(small), grid=SUITE.grid(small))
    assert SUITE.tolerance_for("out").compare(res.outputs["out"],
                                              SUITE.expected(small, inp)["out"])["ok"]


def _even(n):
    return [f"n={n} must be even (two elements per thread)"] if n % 2 else []


def test_constraints_refuse_every_bad_case_when_the_suite_is_declared():
    ok = T.suite(scale, inputs=_inputs, cases=[T.case("n4", n=4)], constraints=_even)
    assert [c.name for c in ok.cases] == ["n4"]
    with pytest.raises(ValueError, match=r"(?s)case 'n3': n=3 must be even.*case 'n5': n=5 must"):
        T.suite(scale, inputs=_inputs, constraints=_even,
                cases=[T.case("n3", n=3), T.case("n4", n=4), T.case("n5", n=5)])


def test_constraints_see_constants_with_their_defaults():
    seen = []

    def rule(n, BLOCK):
        seen.append((n, BLOCK))
        return [] if n % BLOCK == 0 else [f"n={n} is not a multiple of BLOCK={BLOCK}"]
    T.suite(scale, inputs=_inputs, constraints=rule,
            cases=[T.case("a", n=256), T.case("b", n=512, BLOCK=256)])
    assert seen == [(256, 128), (512, 256)]
    with pytest.raises(ValueError, match=r"case 'c': n=100 is not a multiple of BLOCK=128"):
        T.suite(scale, inputs=_inputs, constraints=rule, cases=[T.case("c", n=100)])


def test_inplace_must_name_outputs():
    s = T.suite(scale, inputs=_inputs, outputs=["out"], inplace=["out"], cases=[T.case("c", n=4)])
    assert s.inplace == ("out",)
    with pytest.raises(ValueError, match=r"inplace names \['x'\], which are not among the outputs"):
        T.suite(scale, inputs=_inputs, outputs=["out"], inplace=["x"])


# -- the suite's own mistakes are errors in the suite, at the user's line -------------------------

def _line(fn, text: str) -> int:
    src, first = inspect.getsourcelines(fn)
    return first + next(i for i, ln in enumerate(src) if text in ln)


def test_a_reference_missing_a_declared_output_is_an_error():
    def ref(x):
        return {"outt": 2 * x}  # a typo in the key
    s = T.suite(scale, inputs=_inputs, reference=ref, outputs=["out"],
                cases=[T.case("small", n=300)])
    c = s.cases[0]
    with pytest.raises(SuiteError, match=r"in kernel 'scale': reference\(\) for case 'small' "
                                         r"gives no value for declared output\(s\) 'out' \(it "
                                         r"gives 'outt'\)") as ei:
        s.expected(c, s.make_inputs(c))
    assert ei.value.loc.line == ref.__code__.co_firstlineno


def test_an_exception_in_inputs_points_at_the_users_line():
    def bad_inputs(rng, n):
        return dict(x=rng.standard_normal(n, dtype=np.float32), out=np.empty(n, np.float32),
                    n=n, extra=undefined_name)  # noqa: F821  the user's mistake
    s = T.suite(scale, inputs=bad_inputs, reference=lambda x: {"out": x}, outputs=["out"],
                cases=[T.case("small", n=8)])
    with pytest.raises(SuiteError, match=r"inputs\(\) for case 'small' raised NameError: name "
                                         r"'undefined_name' is not defined") as ei:
        s.make_inputs(s.cases[0])
    assert ei.value.loc.file == __file__
    assert ei.value.loc.line == _line(bad_inputs, "undefined_name")
    assert isinstance(ei.value.__cause__, NameError)  # the full traceback, for --tb=long


def test_a_wrong_argument_name_in_the_reference_is_an_error_in_the_suite():
    s = T.suite(scale, inputs=_inputs, reference=lambda xx: {"out": xx}, outputs=["out"],
                cases=[T.case("small", n=8)])
    c = s.cases[0]
    with pytest.raises(SuiteError, match=r"reference\(\) for case 'small' raised TypeError: "
                                         r".*needs xx, which the case does not provide"):
        s.expected(c, s.make_inputs(c))


@pytest.mark.parametrize("value, why", [
    (np.zeros(8, np.float64), r"parameter 'x' is a gptr\[f32\] \(float32\); the array is "
                              r"float64"),
    ([0.0] * 8, r"parameter 'x' is a gptr\[f32\]: expected a numpy array of float32, got list"),
])
def test_an_array_that_does_not_fit_a_pointer_parameter_is_an_error(value, why):
    s = T.suite(scale, inputs=lambda n: dict(x=value, out=np.empty(n, np.float32), n=n),
                cases=[T.case("small", n=8)])
    with pytest.raises(SuiteError, match=r"inputs\(\) for case 'small': " + why):
        s.make_inputs(s.cases[0])


@pytest.mark.parametrize("n, why", [
    (np.arange(8), r"parameter 'n' is a scalar u32; got an array of shape \(8,\)"),
    (8.5, r"parameter 'n' is an integer u32; got a float \(float64\) 8.5"),
])
def test_a_value_that_does_not_fit_a_scalar_parameter_is_an_error(n, why):
    s = T.suite(scale, inputs=lambda: dict(x=np.zeros(8, np.float32),
                                           out=np.empty(8, np.float32), n=n),
                cases=[T.case("small")])
    with pytest.raises(SuiteError, match=why):
        s.make_inputs(s.cases[0])


def test_bit_typed_pointers_take_any_array_of_their_width():
    @T.kernel(block=32)
    def raw(buf: T.gptr[T.b32]):
        T.ptx.st.global_.b32(buf.at(T.tid.x), 0)
    s = T.suite(raw, inputs=lambda: dict(buf=np.zeros(32, np.float32)), cases=[T.case("c")])
    assert s.make_inputs(s.cases[0])["buf"].dtype == np.float32


def test_flops_dtype_is_checked_where_the_suite_is_declared():
    """A misspelt type would silently hold fp8 FLOPs against the bf16 peak (a false `suspect`)."""
    with pytest.raises(ValueError, match=r"flops_dtype='e4m3' is not one of \['bf16'"):
        T.suite(SUITE.kernel, inputs=SUITE.inputs, flops=lambda n: n, flops_dtype="e4m3")
    fp8 = T.suite(SUITE.kernel, inputs=SUITE.inputs, flops=lambda: 1, flops_dtype="fp8")
    assert fp8.work(fp8.cases[0])["flops_dtype"] == "fp8"
