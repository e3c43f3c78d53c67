#!/usr/bin/env bash
# The zoo's Hopper GEMMs (zoo/kernels/gemm_sm90.py, issue 15) against cuBLAS (torch.matmul),
# pyptx's Hopper GEMM and torch._scaled_mm, on the H200, in one command:
#
#   (device) bash benchmarks/gemm_bench.sh [GROUP ...]        carry: .whl (the pyptx wheel)
#
# GROUPS (default: main), each a `tirxh bench -k` over the role tags of the cases (`plan` in
# gemm_sm90.py); every shape is its own `tirxh bench` run against one KCoral daemon, so a
# shape's variants run back to back and share its inputs and numpy reference:
#   main   bf16 and fp8, the predicted fastest variant of every shape (the headline table)
#   bf16 / fp8   the same for one input type
#   alt    bf16 and fp8, the runner-up variant of every shape
#   sweep  the remaining techniques (no cluster, 3-stage whole-tile epilogue, other tile widths,
#          split-K on/off) and the N-major B: the per-technique figures of docs/TUNING.md
#   all    every benchmark case
# Expect ~8 minutes for "main" (correctness on 2 seeds of outputs up to 117M elements dominates),
# "alt sweep" in a second call.
# Each job checks correctness on the GPU (two seeds, before and after timing) and times the
# candidate interleaved with its baselines (KCoral's protocol, docs/KCORAL.md).
#
# Env: BUDGET seconds after which no new shape starts (default 540: one device call),
# SHAPES (e.g. "m8192n8192k8192 m128n4096k4096" to restrict), OUT (default ./gpu_out: the
# archive gemm_bench.tar.gz, summary.md and summary.json). Exits 0 without a GPU, saying so.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"
WORK=/tmp/gemm_bench
LOGS="$WORK/logs"
BUDGET="${BUDGET:-540}"
START=$(date +%s)
WANT="${*:-main}"   # (not GROUPS: bash reserves it)
mkdir -p "$LOGS" "$OUT"
export PYTHONUNBUFFERED=1 TIRXH_CACHE_DIR=/tmp/tirxh-cache

if ! nvidia-smi -L >"$WORK/gpus.txt" 2>&1 || ! grep -q "^GPU" "$WORK/gpus.txt"; then
    echo "gemm_bench: no NVIDIA GPU here ($(head -c 200 "$WORK/gpus.txt")): nothing to time."
    echo "On the CPU the same kernels are checked with: cd zoo && tirxh check -k gemm_sm90"
    exit 0
fi

# --- set-up: carried wheels (pyptx), the project and its plugins (no index reachable) ---------
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD:$PWD/plugins/numsim:$PWD/plugins/sync_check:${PYTHONPATH:-}"
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . \
    $(for d in plugins/*/; do printf -- '-e %s ' "$d"; done) >"$LOGS/install.log" 2>&1 \
    || { echo "install failed"; tail -20 "$LOGS/install.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu \
    --format=csv | tee "$WORK/nvidia-smi.csv"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
python3 -c "import pyptx.examples.hopper.gemm_highperf_hopper as g; print('pyptx', g.__file__)" \
    || echo "pyptx does not import: its baseline is not offered (carry .whl/pyptx-0.1.1-*.whl)"

# --- one KCoral daemon for every run ----------------------------------------------------------
kcoral serve --port 0 --port-file "$WORK/port" --state-dir "$WORK/kcoral" \
    >"$LOGS/kcoral.log" 2>&1 &
DAEMON=$!
trap 'kill $DAEMON 2>/dev/null; wait $DAEMON 2>/dev/null' EXIT
for _ in $(seq 60); do [ -s "$WORK/port" ] && break; sleep 1; done
[ -s "$WORK/port" ] || { echo "kcoral serve did not start"; tail -20 "$LOGS/kcoral.log"; exit 1; }
ADDR="127.0.0.1:$(cat "$WORK/port")"
kcoral boards --daemon "$ADDR" 2>/dev/null || true

results() {  # the tables (summary.md/.json) and every log and report so far (gemm_bench.tar.gz)
    python3 benchmarks/gemm_summary.py "$WORK"/*.jsonl --json "$OUT/summary.json" \
        >"$OUT/summary.md" 2>>"$LOGS/summary.log"
    tar -czf "$OUT/gemm_bench.tar.gz" -C "$WORK" --exclude ./kcoral . 2>/dev/null
}

# largest M first: if the budget runs out, the shapes with the 1.00x goal were timed
ALL_SHAPES=$(cd zoo/kernels && python3 -c "import gemm_sm90 as g; \
print(' '.join(f'm{M}n{N}k{K}' for M, N, K in sorted(g.SHAPES, key=lambda s: -s[0])))")
tags() {  # tags GROUP -> a -k expression
    case "$1" in
        main) echo "main";;
        bf16) echo "gemm_bf16 and main";;
        fp8) echo "gemm_fp8 and main";;
        alt) echo "alt";;
        sweep) echo "sweep or kn";;
        all) echo "gemm_sm90";;
        *) echo "gemm_bench: unknown group $1 (main, bf16, fp8, alt, sweep, all)" >&2; return 1;;
    esac
}

for group in $WANT; do
    expr=$(tags "$group") || exit 2
    for shape in ${SHAPES:-$ALL_SHAPES}; do
        left=$(( BUDGET - ($(date +%s) - START) ))
        if [ "$left" -le 20 ]; then
            echo "=== budget spent: $group $shape and later shapes not run" | tee -a "$WORK/skipped"
            continue
        fi
        echo "=== $group $shape (+$(( $(date +%s) - START ))s)"
        (cd zoo && timeout --kill-after=10 "$left" tirxh bench --target sm_90a --kcoral "$ADDR" \
            -k "gemm_sm90 and ${shape}_ and ($expr)" \
            --report-log "$WORK/$group-$shape.jsonl") >>"$LOGS/$group.log" 2>&1
        grep -E "^gemm_(bf16|fp8)[_c2]*\[${shape}_" "$LOGS/$group.log" | sed 's/^/    /'
        results  # after every shape: a command cut off at the device's limit still returns them
    done
done
cat "$OUT/summary.md" 2>/dev/null
echo "total $(( $(date +%s) - START ))s; results in $OUT"
