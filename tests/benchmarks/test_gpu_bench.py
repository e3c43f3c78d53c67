"""benchmarks/gpu_bench.sh's profile pass without a GPU (GPU_BENCH_DRY: the same daemon and
clients on the local boards, here numsim's): each PROFILES entry is one `tirxh profile` run
against the daemon, its outcome printed, and SHARDS='' times nothing."""

import os
import pathlib
import subprocess

import pytest

from kcoral.boards.cuda import gpu_count

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.slow  # a KCoral daemon and two tirxh processes: ~15 s
@pytest.mark.skipif(gpu_count()[0] > 0, reason="this host has a GPU: the profiles would run")
def test_profiles_run_against_the_daemon_and_no_shard_when_shards_is_empty(tmp_path):
    env = dict(os.environ, GPU_BENCH_DRY="1", OUT=str(tmp_path), SHARDS="",
               PROFILES="kernels/vadd.py::vadd[n1000] --ncu;kernels/vadd.py::vadd[n1000] --iket")
    r = subprocess.run(["bash", "benchmarks/gpu_bench.sh"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    out = r.stdout
    assert "=== profile 0 (kernels/vadd.py::vadd[n1000] --ncu): rc=1" in out, out + r.stderr
    assert "ncu: board 'sim0' is of type 'sim'; profilers need a CUDA board" in out
    assert "=== profile 1 (kernels/vadd.py::vadd[n1000] --iket): rc=1" in out
    assert "iket: board 'sim0' is of type 'sim'; iket records time on a CUDA board" in out
    assert "shard_" not in out
    assert (tmp_path / "gpu_bench.tar.gz").exists()
