#!/usr/bin/env bash
# One call on the lent H200 that produces every GPU figure the issues ask for.
#
#   (device) bash benchmarks/gpu_session.sh      # with .whl carried (grpcio-health-checking)
#
# Environment: SECTIONS (default "bench profile corpus"), BENCH_K (a `tirxh bench -k` expression,
# default all items), CORPUS_ENTRIES (sync_check corpus entries for compute-sanitizer),
# CORPUS_BUDGET (seconds after which no new corpus entry starts, default 170).
#
# (numsim against the H200: plugins/numsim/benchmarks/h200_compare.py, run in its own call.)
# Sections run in order, each under its own time limit, each logging to $WORK/logs; a failing
# section does not stop the others. Everything that touches the GPU goes through KCoral
# (the daemon, its client, or `python -m kcoral.runjob` for the numsim comparison and tools).
set -u
OUT="${OUT:-$PWD/gpu_out}"
WORK=/tmp/gpu_session      # everything is written here; $OUT gets one archive (8-file limit)
LOGS="$WORK/logs"
mkdir -p "$LOGS" "$OUT"
export PYTHONUNBUFFERED=1 TIRXH_CACHE_DIR=/tmp/tirxh-cache
START=$(date +%s)
SECTIONS="${SECTIONS:-bench profile corpus}"
CORPUS_ENTRIES="${CORPUS_ENTRIES:-race_rw_shared,mbar_phase_overrun,bar_divergent,oob_global,proxy_missing_fence}"
want() { case " $SECTIONS " in *" $1 "*) return 0;; *) return 1;; esac; }

section() {  # section NAME SECONDS CMD...
    local name=$1 limit=$2
    shift 2
    local t0=$(date +%s)
    echo "=== $name (limit ${limit}s) at +$((t0 - START))s"
    timeout --kill-after=10 "$limit" "$@" >"$LOGS/$name.log" 2>&1
    local rc=$?
    echo "=== $name: rc=$rc in $(( $(date +%s) - t0 ))s"
    tail -n "${TAIL:-25}" "$LOGS/$name.log"
}

# --- set-up: carried wheels, the project and its plugins (no index reachable there) -----------
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
# the sources stay importable even if an editable install fails
export PYTHONPATH="$PWD:$PWD/plugins/numsim:$PWD/plugins/sync_check:$PWD/plugins/ncu_profile:\
$PWD/plugins/iket:${PYTHONPATH:-}"
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . \
    $(for d in plugins/*/; do printf -- '-e %s ' "$d"; done) >"$LOGS/install.log" 2>&1 \
    || { echo "install failed"; tail -20 "$LOGS/install.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu \
    --format=csv >"$WORK/nvidia-smi.csv" 2>&1
cat "$WORK/nvidia-smi.csv"
(cd zoo && tirxh plugins | grep -E "entrypoint|builtin" | awk '{print $1}' | tr '\n' ' '; echo)
python3 -c "import torch, cuda.bindings, grpc, numpy; print('torch', torch.__version__, \
'grpc', grpc.__version__, 'numpy', numpy.__version__)"

# --- 1. tirxh bench over the zoo's large cases, side by side with baselines (issues 3 and 6) ---
if want bench; then
    (cd zoo && section bench "${BENCH_LIMIT:-150}" tirxh bench --target sm_90a ${BENCH_K:+-k "$BENCH_K"} \
        --report-log "$WORK/bench.jsonl")
fi

# (KCoral's own proof, benchmarks/kcoral_gpu.py, needs its own ~60 s call: docs/KCORAL.md.)

# --- 2. profilers: ncu, iket, compute-sanitizer (issue 7) -------------------------------------
if want profile; then
    OUT="$WORK" section profile_gpu 110 python3 benchmarks/profile_gpu.py --quick
fi

# --- 3. sync_check corpus bugs on the GPU and under compute-sanitizer (issue 5) ---------------
if want corpus; then
    budget="${CORPUS_BUDGET:-170}"
    OUT="$WORK" section sanitizer_corpus $((budget + 30)) python3 benchmarks/sanitizer_corpus_gpu.py \
        --entries "$CORPUS_ENTRIES" --repeat 50 --timeout 30 --budget "$budget" \
        --out "$WORK/sanitizer_corpus"
fi

# everything into one archive (the device returns at most 8 files)
tar -czf "$OUT/gpu_session.tar.gz" -C "$WORK" . 2>/dev/null
echo "total $(( $(date +%s) - START ))s"
