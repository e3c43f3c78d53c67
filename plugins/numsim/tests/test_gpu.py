"""numsim against the hardware (needs a GPU; skipped otherwise), on probes of
``benchmarks/h200_compare.py``: everything but the approximate functions must be bitwise
identical, tensor-core results included (numsim models the tensor core's alignment and
truncation)."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import tirxh_numsim as ns

pytestmark = pytest.mark.gpu
BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "h200_compare.py"


@pytest.fixture(scope="module")
def harness():
    spec = importlib.util.spec_from_file_location("h200_compare", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from kcoral.boards import BoardSpec
    from kcoral.boards.cuda import CudaDevice
    dev = CudaDevice(BoardSpec("gpu0", "cuda", "sm_90a", options={"ordinal": 0}))
    probes = mod.zoo_probes() + mod.semantic_probes()
    yield mod, dev, probes
    dev.free_all()


def _both(harness, name):
    mod, dev, probes = harness
    sel = [p for p in probes if p["name"].startswith(name)]
    assert sel, name
    p = sel[0]
    sim = ns.run(p["kernel"], dict(p["inputs"]), consts=p.get("consts"),
                 grid=p.get("grid") or (1,), outputs=p["outputs"])
    assert sim.verdict in ("clean", "review"), sim.summary()
    hw = mod.gpu_run(dev, p)
    return [(sim.outputs[o], hw[o]) for o in p["outputs"]]


@pytest.mark.parametrize("name", ["zoo/vadd", "zoo/reduce_rows", "mma.sync m16n8k32 s8",
                                  "TMA float32 (40, 52) box (8, 32) sw128 at (8, 5) zero",
                                  "TMA float32 (40, 52) box (8, 32) sw128 at (8, 5) nan",
                                  "TMA float32 (5, 6, 40)", "instr fma.rn.f32",
                                  "instr cvt.rn.bf16x2.f32", "instr cvt.rn.satfinite.e4m3x2",
                                  "wgmma bf16 K-major sw128", "wgmma bf16 MN-major sw64",
                                  "wgmma tf32 register A", "wgmma e4m3 K-major sw128",
                                  "mma.sync m16n8k16 bf16", "mma.sync m16n8k4 tf32",
                                  "zoo/gemm_wgmma[m256n256k256]", "zoo/gemm_mma[m64n256k64]"])
def test_bitwise_identical(harness, name):
    for a, b in _both(harness, name):
        assert np.array_equal(np.ascontiguousarray(a).view(np.uint8),
                              np.ascontiguousarray(b).view(np.uint8)), name


@pytest.mark.parametrize("name", ["instr ex2.approx.f32", "instr tanh.approx.f32"])
def test_approximate_functions_are_close(harness, name):
    for a, b in _both(harness, name):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)
