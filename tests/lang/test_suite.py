"""Suites: case parameters flow to inputs, the reference, the grid, constants and work counts;
tolerances decide correctness."""

import numpy as np
import pytest

import tirxh.lang as T
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
    assert SUITE.work(wide) == {"flops": 4096, "bytes": 8 * 4096}
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
