#!/usr/bin/env bash
# Issue 17's GPU figures, one device call each (the lead runs them; carry .whl):
#
#   bash benchmarks/kcoral_issue17_gpu.sh clock   # nvidia-h200:    ~150-250 s of device time
#   bash benchmarks/kcoral_issue17_gpu.sh gate    # nvidia-h200:    ~100-150 s of device time
#   bash benchmarks/kcoral_issue17_gpu.sh multi   # nvidia-h200-x2: ~120-200 s of device time
#
# clock: benchmarks/kcoral_clock_check.py (per-round SM clocks and both regime ratios of the
#        zoo's gemm_wgmma 8192^3 against torch.matmul, then a cool-down job);
# gate:  benchmarks/kcoral_gate_check.py (zoo jobs with torch.compile baselines gated, ungated,
#        gated again: does the launch gate take host overhead out of the timings?);
# multi: benchmarks/kcoral_multi_gpu.py (each GPU solo vs both together, a remote agent on GPU 1).
#
# Set-up first: the carried wheels (.whl: grpcio-health-checking, which the image lacks; the
# image has torch, grpcio, cuda-bindings and nvidia-ml-py) and the sources on PYTHONPATH. Then a
# SMOKE pass (`--smoke`: small cases, 30 s execution budgets, under `timeout 120`) so a hang or a
# broken path costs seconds; the full run only if the smoke pass is done and correct. Logs and
# JSON land in $OUT. Exit status: the smoke's or the full run's (0 = every job done).
set -u
what="${1:-}"
case "$what" in
    clock) script=benchmarks/kcoral_clock_check.py; limit="${LIMIT:-300}" ;;
    gate) script=benchmarks/kcoral_gate_check.py; limit="${LIMIT:-240}" ;;
    multi) script=benchmarks/kcoral_multi_gpu.py; limit="${LIMIT:-300}" ;;
    *) echo "usage: bash benchmarks/kcoral_issue17_gpu.sh clock|gate|multi" >&2; exit 2 ;;
esac
shift
OUT="${OUT:-$PWD/gpu_out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TIRXH_CACHE_DIR=/tmp/tirxh-cache
START=$(date +%s)
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD:$PWD/plugins/numsim:${PYTHONPATH:-}"
python3 - <<'EOF' || exit 2
import importlib.util as u
missing = [m for m in ("grpc", "grpc_health", "torch", "cuda.bindings", "numpy", "pluggy")
           if u.find_spec(m) is None]
print("nvidia-ml-py:", "present" if u.find_spec("pynvml") else "MISSING (no clock readings)")
if missing:
    raise SystemExit(f"missing {missing}: carry .whl (grpcio-health-checking) and run again")
EOF
nvidia-smi --query-gpu=index,name,pci.bus_id,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
    --format=csv 2>&1 | tee "$OUT/nvidia-smi.csv"
if [ "$what" = clock ] && [ "$#" -gt 0 ]; then  # a wrong --suite/--case fails now, not after the smoke
    python3 "$script" --resolve "$@" || exit 2
fi
echo "=== smoke (limit 120 s) at +$(( $(date +%s) - START ))s"
timeout --kill-after=10 120 python3 "$script" --smoke "$@" 2>&1 | tee "$OUT/smoke.log"
rc=${PIPESTATUS[0]}
echo "=== smoke: rc=$rc at +$(( $(date +%s) - START ))s"
[ "$rc" = 0 ] || { echo "smoke failed: no full run"; exit "$rc"; }
echo "=== full (limit ${limit} s)"
timeout --kill-after=10 "$limit" python3 "$script" "$@" 2>&1 | tee "$OUT/full.log"
rc=${PIPESTATUS[0]}
echo "=== full: rc=$rc at +$(( $(date +%s) - START ))s"
exit "$rc"
