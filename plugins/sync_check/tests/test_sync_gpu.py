"""The GPU side of benchmarks/sanitizer_corpus_gpu.py (needs a GPU; skipped otherwise): the
launcher runs built corpus kernels on the device and their outputs agree with numsim."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import tirxh_numsim as ns
from sync_check_testutil import CORPUS, load_module

pytestmark = pytest.mark.gpu
BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "sanitizer_corpus_gpu.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("sanitizer_corpus_gpu", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("entry", ["mbar_phase_overrun", "race_rw_shared", "cp_async_race"])
def test_fixed_twin_on_the_gpu_matches_numsim(bench, entry, tmp_path):
    info = bench.build(entry, tmp_path)
    assert info["ours"], "the buggy twin has findings"
    digests, outs = bench.launch(info["variants"]["fixed"], repeat=3)
    assert len(set(digests)) == 1, "the fixed twin is deterministic on the GPU"
    mod = load_module(CORPUS / f"{entry}.py")
    sim = ns.run(mod.fixed, mod.inputs(), grid=mod.GRID)
    for name, arr in sim.outputs.items():
        np.testing.assert_array_equal(outs[name], arr)
