"""zoo/kernels/kda_chunk.py: the A/M block units cover every lower 16 x 16 block once, balanced
over 4 or 8 warps; the reciprocal on the FMA pipe is within its stated error over the range the
gate phase feeds it (numsim). The phases themselves are checked through kda_fwd's cases."""

import numpy as np
import pytest

import tirxh.lang as T
from tests.zoo.zoo_modules import load

P = load("kda_chunk")


@pytest.mark.parametrize("NW,most", [(4, 5), (8, 4)])
def test_units_cover_each_lower_block_once_balanced(NW, most):
    per_warp = P.units(NW)
    assert len(per_warp) == NW
    blocks = [(x, a, b) for mine in per_warp for x, a in mine for b in range(a + 1)]
    assert sorted(blocks) == sorted((x, a, b) for x in "kq" for a in range(4)
                                    for b in range(a + 1))
    assert max(sum(a + 1 for _, a in mine) for mine in per_warp) == most


@T.kernel(grid=(1,), block=128)
def _rcp_probe(x: T.gptr[T.f32], y: T.gptr[T.f32]):
    i = T.tid.x
    T.ptx.st.global_.f32(y.at(i), P.rcp_fma(T.ptx.ld.global_.f32(x.at(i))))


def test_reciprocal_on_the_fma_pipe_is_within_1e_5():
    ns = pytest.importorskip("tirxh_numsim")
    # L = 2^(G - r) lies in [2^-108, 1] (16 rows of a gate bounded by 5); a wider sweep too
    x = np.float32(2.0) ** np.linspace(-108, 20, 128, dtype=np.float32)
    x *= np.random.default_rng(0).uniform(1.0, 2.0, 128).astype(np.float32)
    res = ns.run(_rcp_probe, dict(x=x, y=np.zeros(128, np.float32)), grid=(1,),
                 outputs=["y"])
    assert res.verdict == "clean"
    rel = np.abs(res.outputs["y"].astype(np.float64) * x - 1.0)
    assert rel.max() < 1e-5          # (5.1% estimate error)^4 ~ 7e-6
