"""Every scan of the zoo (zoo/kernels/cumsum*.py) exact under numsim's per-warp schedule too:
each CTA runs alone until it waits, so a CTA reaches its waits on other CTAs (look-back flags,
cumsum_l2's segment sums) before they have published anything. The lockstep schedule the other
tests use publishes before anyone reads, which hides a wait that does not wait (session 22:
cumsum_l2's epoch check was load-bearing only here)."""

import pytest

from tests.zoo.zoo_modules import assert_matches, load

STEMS = ("cumsum", "cumsum_smem", "cumsum_tma", "cumsum_persist", "cumsum_ws", "cumsum_l2")
CASES = [(stem, name, c) for stem in STEMS for name in dir(load(stem)) if name.startswith("SUITE")
         for c in getattr(load(stem), name).cases if c.small]


@pytest.mark.parametrize("stem,suite,case", CASES, ids=[f"{s}-{n}-{c.name}" for s, n, c in CASES])
def test_small_case_is_exact_when_each_cta_runs_until_it_waits(stem, suite, case):
    ns = pytest.importorskip("tirxh_numsim")
    s = getattr(load(stem), suite)
    inputs = s.make_inputs(case, 0)
    res = ns.run(s.kernel, inputs, grid=s.grid(case), outputs=list(s.outputs),
                 consts=s.consts(case), per_warp=True)
    assert_matches(s, case, res, inputs)
