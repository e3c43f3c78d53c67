"""zoo/kernels/rope.py: rotary embedding in place."""

import numpy as np
import pytest

import tirxh.lang as T
from tirxh.api import build_job

from ._zoo import check, load, simulate, small_cases

rope = load("rope")


@pytest.mark.parametrize("suite,case", small_cases(rope.SUITE))
def test_small_cases_match_the_reference_in_numsim(suite, case):
    res = check(suite, case)
    assert res.verdict == "clean", [f.message for f in res.findings]


def test_heads_beyond_h_are_left_alone_and_the_rotation_keeps_norms():
    """H = 7 heads in groups of 4: the second round predicates off the 8th head (numsim would
    report an out-of-bounds access otherwise); a rotation keeps each pair's norm."""
    case = next(c for c in rope.SUITE.cases if c.name == "t5_h7_d128")
    inputs, out, _ = simulate(rope.SUITE, case)
    x, y = inputs["x"].astype(np.float64), out["x"].astype(np.float64)
    n_in = x[..., :64] ** 2 + x[..., 64:] ** 2
    n_out = y[..., :64] ** 2 + y[..., 64:] ** 2
    np.testing.assert_allclose(n_out, n_in, rtol=2 ** -6, atol=1e-3)


def test_the_bench_job_uploads_x_instead_of_poisoning_it():
    case = next(c for c in rope.SUITE.cases if c.name == "t3_h32_d128")
    ck = rope.rope.compile("sm_90a", **rope.SUITE.consts(case))
    doc = build_job(ck, rope.SUITE, case).to_doc()
    x = next(b for b in doc["buffers"] if b["name"] == "x")
    assert x["output"] and x["init"]["kind"] == "blob"
    assert all("x" in r["inputs"] and "x" in r["expected"] for r in doc["runs"])


def test_shapes_the_kernel_cannot_run_are_refused_when_declared():
    with pytest.raises(ValueError, match=r"case 'd72': D=72 must be a positive multiple of 16"):
        T.suite(rope.rope, inputs=rope.inputs, constraints=rope.constraints,
                cases=[T.case("d72", tokens=2, H=4, D=72)])
    with pytest.raises(ValueError, match=r"case 'wide': D/16 \* HG = 2048 threads per CTA must "
                                         r"be in 32..1024"):
        T.suite(rope.rope, inputs=rope.inputs, constraints=rope.constraints,
                cases=[T.case("wide", tokens=2, H=4, D=512, HG=64)])
