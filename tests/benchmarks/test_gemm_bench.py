"""benchmarks/gemm_bench.sh's group parsing, without a GPU (GPU_BENCH_DRY: past the nvidia-smi
check; every case here stops before the daemon starts): a group that must run alone refuses
company, and an unknown group lists the known ones."""

import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _run(tmp_path, *groups):
    return subprocess.run(["bash", "benchmarks/gemm_bench.sh", *groups], cwd=ROOT,
                          env=dict(os.environ, GPU_BENCH_DRY="1", OUT=str(tmp_path)),
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("groups,message", [
    (("small2", "main"), "the small2 group runs alone"),
    (("main", "small2"), "the small2 group runs alone"),
    (("wave", "small2"), "the wave group runs alone"),
    (("main", "small3"), "the small3 group runs alone"),
    (("wave2", "main"), "the wave2 group runs alone"),
    (("pdl", "main"), "the pdl group runs alone"),
    (("tall", "main"), "the tall group runs alone"),
    (("small4",), "unknown group small4 (main, bf16, fp8, alt, sweep, all, small, smallfp8, "
                  "wave, wave2, small2, small3, pdl, tall)"),
])
def test_groups_that_run_alone_and_unknown_groups_are_refused(tmp_path, groups, message):
    r = _run(tmp_path, *groups)
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr
    assert "clients over" not in r.stdout      # refused before any shard was planned
