#!/usr/bin/env bash
# The memory-bound zoo kernels of issue 14 (norms, activations, rope, transpose, tma_copy) on the
# lent H200, in one command: for every large case (tagged h200) KCoral compiles, checks the
# output against the numpy reference before and after timing, and times the kernel interleaved
# with the eager and torch.compile baselines (kcoral/baselines/torch_zoo.py; torch.compile
# compiles in prepare(), outside the timed region).
#
#   (device) bash benchmarks/zoo_bench.sh                    # all 20 large cases
#   (device) ZOO_K="rmsnorm or layernorm" bash benchmarks/zoo_bench.sh   # a subset
#
# The figures: $OUT/gpu_session.tar.gz (logs/bench.log: one line per case with GB/s, the
# fraction of the bandwidth floor and the ratio to each baseline; bench.jsonl: the full results).
# Set-up and archiving are benchmarks/gpu_session.sh's (its bench section, nothing else).
set -u
cd "$(dirname "$0")/.."
if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "zoo_bench: SKIPPED: no NVIDIA GPU here (nvidia-smi -L failed); run it on the GPU host"
    exit 0
fi
K="h200 and (${ZOO_K:-norms or activations or rope or transpose or tma_copy})"
SECTIONS=bench BENCH_K="$K" BENCH_LIMIT="${BENCH_LIMIT:-540}" TAIL="${TAIL:-40}" \
    exec bash benchmarks/gpu_session.sh
