"""benchmarks/gpu_bench.sh without a GPU (GPU_BENCH_DRY: the same daemon and clients on the
local boards, here numsim's): each PROFILES entry is one `tirxh profile` run against the daemon,
its outcome printed with its phase lines, capped by PROFILE_LIMIT and by what is left of
TOTAL_LIMIT (a killed one is named, and the script still ends with its archive); SHARDS='' times
nothing; BENCH_ARGS reach every shard's `tirxh bench`, SHARD_ARGS one shard's; PREWARM runs
before the daemon.
One test: the script works in a fixed folder (/tmp/gpu_bench), so two runs must not overlap."""

import os
import pathlib
import subprocess
import tarfile

import pytest

from kcoral.boards.cuda import gpu_count

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _run(tmp_path, **env):
    r = subprocess.run(["bash", "benchmarks/gpu_bench.sh"], cwd=ROOT,
                       env=dict(os.environ, GPU_BENCH_DRY="1", OUT=str(tmp_path), **env),
                       capture_output=True, text=True, timeout=300)
    return r.stdout + r.stderr


@pytest.mark.slow  # a KCoral daemon and up to three tirxh processes, four times: ~25 s
@pytest.mark.skipif(gpu_count()[0] > 0, reason="this host has a GPU: the jobs would run")
def test_profiles_shards_and_bench_args(tmp_path):
    out = _run(tmp_path / "a", SHARDS="",
               PROFILES="kernels/vadd.py::vadd[n1000] --ncu;kernels/vadd.py::vadd[n1000] --iket")
    assert "=== profile 0 (kernels/vadd.py::vadd[n1000] --ncu): rc=1" in out, out
    assert "ncu: board 'sim0' is of type 'sim'; profilers need a CUDA board" in out
    assert "=== profile 1 (kernels/vadd.py::vadd[n1000] --iket): rc=1" in out
    assert "iket: board 'sim0' is of type 'sim'; iket records time on a CUDA board" in out
    assert "iket [+" in out and "profiling build: running" in out  # the phases, in the tail
    assert "shard_" not in out
    assert (tmp_path / "a" / "gpu_bench.tar.gz").exists()

    # BENCH_ARGS reach every shard, SHARD_ARGS' i-th entry shard i only
    _run(tmp_path / "b", SHARDS="vadd[n1000]@|vadd[n1000]@", BENCH_ARGS="--min-rounds 0",
         SHARD_ARGS="|--l2-flush evict")
    with tarfile.open(tmp_path / "b" / "gpu_bench.tar.gz") as tar:
        log = tar.extractfile("./logs/shard_0.log").read().decode()
        log1 = tar.extractfile("./logs/shard_1.log").read().decode()
    assert "--min-rounds 0: expected 1 to 1000000 rounds" in log, log
    assert "--l2-flush" not in log and "argument --l2-flush: invalid choice: 'evict'" in log1, \
        log1

    # a profile past its limit is killed and named, and the script goes on to its archive.
    # 0.1 s: less than importing tirxh takes (~0.8 s here); a 1 s limit let CI's faster
    # machine finish the whole numsim profile in time (stop 30's failure)
    out = _run(tmp_path / "c", SHARDS="", PROFILE_LIMIT="0.1",
               PROFILES="kernels/vadd.py::vadd[n1000] --iket")
    assert "=== profile 0 (kernels/vadd.py::vadd[n1000] --iket): limit 0.1s" in out, out
    assert "rc=124 (killed at its 0.1s limit)" in out, out
    assert (tmp_path / "c" / "gpu_bench.tar.gz").exists() and "total " in out

    # TOTAL_LIMIT caps each profile (less 30 s, at least 10 s), then the shards get the rest
    out = _run(tmp_path / "d", SHARDS="", TOTAL_LIMIT="35",
               PROFILES="kernels/vadd.py::vadd[n1000] --iket")
    assert "=== profile 0 (kernels/vadd.py::vadd[n1000] --iket): limit 10s" in out, out
    assert "=== profile 0 (kernels/vadd.py::vadd[n1000] --iket): rc=1 " in out, out
    assert out.index("rc=1 ") < out.index("s left of TOTAL_LIMIT=35s")

    # PREWARM runs after the set-up and before the daemon (gemm_bench.sh: pyptx's first call,
    # benchmarks/pyptx_prewarm.py, which says why it skips where there is no GPU or pyptx)
    out = _run(tmp_path / "e", SHARDS="", PREWARM="python3 benchmarks/pyptx_prewarm.py "
               "--shapes m128n4096k4096 m512n4096k4096")
    assert "=== prewarm: rc=0" in out and "prewarm: SKIPPED: " in out, out
    assert out.index("set-up done") < out.index("=== prewarm") < out.index("daemon serving")

    # the daemon's start is timed (plugins, each board's worker), and the timed shards end
    # with every item's clock regimes (here: the sim board never times, so none, and why)
    out = _run(tmp_path / "e", SHARDS="vadd[n1000]@")
    assert "daemon serving at +" in out and "board sim0: worker up in " in out, out
    assert "plugins loaded in " in out
    assert "=== clock regimes (" in out and "0 items timed" in out, out
    assert "- vadd[n1000]: " in (tmp_path / "e" / "regimes.md").read_text()
