#!/usr/bin/env bash
# The wheels every device call carries in `.whl`, downloaded here (the GPU machine reaches no
# index). A fresh checkout has none: session 14 started on a new machine with `.whl` and
# `.carry` gone, and rebuilt them by hand. Run this once per machine, before the first call:
#
#   bash benchmarks/device_wheels.sh            # -> .whl/*.whl (about 1.9 MB)
#
# The pins are what the H200 runs were measured with (docs/PERFORMANCE.md "Session 14"):
#   grpcio-health-checking  KCoral's health service (the GPU machine lacks it; pure Python)
#   pyptx                   the GEMM baseline of issue 15 (cp312: the GPU machine's Python)
#   fla-core, flash-linear-attention  issue 18's FLA baselines (einops is there already)
#   nvidia-ml-py            NVML clocks for KCoral's regimes
# One version of each: two versions of one package stop the whole `pip install --target`.
set -eu
cd "$(dirname "$0")/.."
PINS="grpcio-health-checking==1.84.0 pyptx==0.1.1 fla-core==0.6.0 flash-linear-attention==0.6.0
nvidia-ml-py==13.615.71"
mkdir -p .whl
for pin in $PINS; do
    name=${pin%%==*}
    stem=$(echo "$name" | tr '-' '_')
    # drop other versions of this package first
    for old in .whl/"$stem"-*.whl; do
        [ -e "$old" ] || continue
        case "$old" in *"-${pin##*==}-"*) ;; *) rm -f "$old";; esac
    done
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d .whl "$pin" 2>&1 | grep -v "is ignored" || true
done
ls -l .whl
