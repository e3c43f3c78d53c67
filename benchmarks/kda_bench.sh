#!/usr/bin/env bash
# Kimi Delta Attention (issue 18): the zoo's KDA kernels against FLA in one command on the H200:
#
#   (device) bash benchmarks/kda_bench.sh [GROUP ...]     carry: .whl (fla-core, flash-linear-attention)
#
# GROUPS (default: main):
#   main      decode (kda_decode, against fla.fused_recurrent_kda) and the forward's predicted
#             fastest variant per shape (kda_fwd, against fla.chunk_kda and fla.chunk_kda.fwd_bwd)
#   variants  every forward variant of every shape (BV 64/128, 1/2 stages: docs/TUNING.md)
#   decode    the decode cases only
#   check     only step 1 below (no GPU needed)
# First two tiny warm-up jobs (FLA's Triton kernels compile there, not in the large jobs' 120 s).
# Each shape is one `tirxh bench` process against one KCoral daemon, so its variants share the
# inputs and the float64 reference (computed on the host: ~10-40 s per seed at T=8192, H=96);
# every job checks correctness on two seeds (before and after timing) and times the kernel
# interleaved with the FLA baselines in the same job (the ratio is FLA median / ours).
#
# Steps: 1. `tirxh check` of the KDA kernels (numsim against float64, sync_check) and their
# registers / spills / shared memory; 2. without a GPU, stop (saying so); 3. the benches, with
# the summary (summary.md: times, ratios, the issue's goals, memory and serial-chain floors)
# written after every shape, so a command cut off at the device's limit still returns results.
# Env: BUDGET seconds after which no new shape starts (default 540), OUT (default ./kda_out),
# SKIP_CHECK=1 to skip step 1 (the lead's CPU checks already ran it).
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/kda_out}"
WORK=/tmp/kda_bench
LOGS="$WORK/logs"
BUDGET="${BUDGET:-540}"
START=$(date +%s)
WANT="${*:-main}"
mkdir -p "$LOGS" "$OUT"
export PYTHONUNBUFFERED=1 TIRXH_CACHE_DIR=/tmp/tirxh-cache

# --- set-up: carried wheels (FLA), the project and its plugins (no index reachable) -----------
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl >"$LOGS/wheels.log" 2>&1 && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD:$PWD/plugins/numsim:$PWD/plugins/sync_check:${PYTHONPATH:-}"
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . \
    $(for d in plugins/*/; do printf -- '-e %s ' "$d"; done) >"$LOGS/install.log" 2>&1 \
    || { echo "install failed"; tail -20 "$LOGS/install.log"; }

# --- 1. CPU checks and resources -----------------------------------------------------------------
if [ "${SKIP_CHECK:-0}" != 1 ]; then
    echo "=== 1. tirxh check -k kda (numsim small cases, synccheck, racecheck)"
    (cd zoo && tirxh check -k "kda_fwd or kda_decode" --junitxml "$OUT/check.xml") \
        >"$LOGS/check.log" 2>&1
    tail -n 3 "$LOGS/check.log"
    (cd zoo/kernels && python3 -c "
import kda_fwd as F, kda_decode as D
for name, k, consts in [('kda_fwd ' + v, F.kda_fwd, c) for v, c in F.VARIANTS.items()] + \
        [('kda_decode TT=%d' % t, D.kda_decode, {'TT': t}) for t in (1, 2, 4)]:
    ck = k.compile('sm_90a', **consts)
    r = ck.resources
    print('%-20s regs %3d  spills %d/%d  stack %d  dynamic smem %6d' % (name, r.registers,
          r.spill_stores, r.spill_loads, r.stack_frame, ck.launch_metadata()['dynamic_smem']))
") | tee "$OUT/resources.txt"
fi
[ "$WANT" = check ] && exit 0

if ! nvidia-smi -L >"$WORK/gpus.txt" 2>&1 || ! grep -q "^GPU" "$WORK/gpus.txt"; then
    echo "=== 2. no NVIDIA GPU here ($(head -c 200 "$WORK/gpus.txt")): nothing timed."
    exit 0
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu \
    --format=csv | tee "$WORK/nvidia-smi.csv"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
python3 -c "import fla.ops.kda, fla; print('fla', getattr(fla, '__version__', '?'))" \
    || echo "FLA does not import: its baselines are not offered (carry .whl/fla_core-0.6.0 and \
flash_linear_attention-0.6.0; fla-core needs einops)"

# --- one KCoral daemon for every run ----------------------------------------------------------
kcoral serve --port 0 --port-file "$WORK/port" --state-dir "$WORK/kcoral" \
    >"$LOGS/kcoral.log" 2>&1 &
DAEMON=$!
trap 'kill $DAEMON 2>/dev/null; wait $DAEMON 2>/dev/null' EXIT
for _ in $(seq 60); do [ -s "$WORK/port" ] && break; sleep 1; done
[ -s "$WORK/port" ] || { echo "kcoral serve did not start"; tail -20 "$LOGS/kcoral.log"; exit 1; }
ADDR="127.0.0.1:$(cat "$WORK/port")"
kcoral boards --daemon "$ADDR" 2>/dev/null || true

results() {  # summary.md / summary.json and every log so far (kda_bench.tar.gz)
    python3 benchmarks/kda_summary.py "$WORK"/*.jsonl --json "$OUT/summary.json" \
        >"$OUT/summary.md" 2>>"$LOGS/summary.log"
    tar -czf "$OUT/kda_bench.tar.gz" -C "$WORK" --exclude ./kcoral . 2>/dev/null
}

bench() {  # bench NAME EXPR: one tirxh bench process, unless the budget is spent
    left=$(( BUDGET - ($(date +%s) - START) ))
    if [ "$left" -le 30 ]; then
        echo "=== budget spent: $1 not run" | tee -a "$WORK/skipped"
        return
    fi
    echo "=== $1 (+$(( $(date +%s) - START ))s)"
    (cd zoo && timeout --kill-after=10 "$left" tirxh bench --target sm_90a --kcoral "$ADDR" \
        -k "$2" --report-log "$WORK/$1.jsonl") >>"$LOGS/$1.log" 2>&1
    grep -E "^kda_(fwd|decode)\[" "$LOGS/$1.log" | sed 's/^/    /'
    results
}

warmup() {  # FLA's first calls compile (and autotune) its Triton kernels: do it in tiny jobs
    # (the small cases carry the same baselines; fixed, varlen and decode compile different
    # variants) so that the large jobs stay within KCoral's 120 s execution budget. Triton's
    # on-disk cache keeps what a job compiled even when the job itself runs out of time.
    for pass in 1 2; do
        bench "warmup$pass" "(kda_fwd and (t40_h1_v128_deep or pack_17_8_30_v128)) or \
(kda_decode and n2_h2_t1)"
    done
}

# forward shapes, the headline ones first (if the budget runs out, those were timed)
SHAPES="t8192_h96 t8192_h64 pack6_h96 pack6_h64 pack8x1024_h96 pack8x1024_h64 b2_t4096_h32"
case " $WANT " in *" main "*|*" variants "*|*" decode "*) warmup;; esac
for group in $WANT; do
    case "$group" in
        main)
            bench decode "kda_decode and main"
            for s in $SHAPES; do bench "main-$s" "kda_fwd and ${s}_ and main"; done;;
        variants)
            for s in $SHAPES; do bench "variants-$s" "kda_fwd and ${s}_"; done;;
        decode)
            bench decode "kda_decode and main";;
        *) echo "kda_bench: unknown group $group (main, variants, decode, check)"; exit 2;;
    esac
done
cat "$OUT/summary.md" 2>/dev/null
echo "total $(( $(date +%s) - START ))s; results in $OUT"
