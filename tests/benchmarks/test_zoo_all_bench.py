"""benchmarks/zoo_all_bench.sh without a GPU: the shard string it hands gpu_bench.sh, a clear
refusal of an unknown group, and a skip that says why (the GPU run: docs/PERFORMANCE.md)."""

import pathlib
import subprocess

import pytest

from kcoral.boards.cuda import gpu_count

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "zoo_all_bench.sh"


def _run(*args):
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=60)


def test_shards_are_one_k_expression_per_group_in_the_order_given():
    r = _run("--shards", "kda", "vector")
    assert r.returncode == 0
    assert r.stdout.strip().split("|") == [
        "kda_fwd[t8192_h64_v64s2]@",
        "vadd[n64M]@ or reduce_rows[r8192_c8192]@ or gemm_mma[m4096n4096k4096]@sm_90a"]


def test_every_group_by_default():
    assert len(_run("--shards").stdout.strip().split("|")) == 9


def test_an_unknown_group_is_refused_by_name():
    r = _run("--shards", "norms", "gemms")
    assert r.returncode == 2 and "unknown group 'gemms'" in r.stderr


@pytest.mark.skipif(gpu_count()[0] > 0, reason="this host has a GPU")
def test_without_a_gpu_it_says_so_and_exits_0():
    r = _run("norms")
    assert r.returncode == 0 and "SKIPPED: no NVIDIA GPU here" in r.stdout
