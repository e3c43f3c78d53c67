#!/usr/bin/env bash
# `tirxh bench` over chosen zoo items on the lent H200, as several concurrent clients of ONE
# KCoral daemon, so that building jobs on the host's CPU (inputs, numpy references, uploads:
# ~10-50 s per large case) overlaps with timing on the GPU. KCoral serializes jobs per board,
# so the figures are those of a single client (docs/KCORAL.md: 8 concurrent clients stayed
# within 2% of solo).
#
#   (device) SHARDS='norms|activations|gemm_bf16 and m4096' bash benchmarks/gpu_bench.sh
#
# SHARDS: `tirxh bench -k` expressions separated by '|', one client process each (default: the
# whole zoo's large cases in one client). BENCH_LIMIT: seconds for all shards (default 420).
# SMOKE: a -k expression run first, correctness only, with SMOKE_EXEC_S (default 15) per job, so
# a kernel that deadlocks on hardware is found in seconds. EXEC_S: the execution budget of each
# timed job (default 60; KCoral's own default is 120 s). SEEDS: correctness seeds per timed job
# (default: the protocol's two; 1 halves the worker's comparison time on huge outputs).
# SHARE_INPUTS=1: a shard's variants of one suite share its inputs and reference (bench_with.py).
# TOTAL_LIMIT: seconds for the whole run (set-up and smoke included): the timed shards get what
# is left of it (less 15 s for the archive) when that is less than BENCH_LIMIT.
# PROBE: a -k expression over benchmarks/probes (hardware facts numsim assumes), run first,
# correctness only. SMOKE_GATE=1: skip the timed shards when the smoke pass did not exit 0 (a
# GEMM that hangs on hardware would otherwise spend the whole budget on timeouts).
# BENCH_ARGS: more `tirxh bench` options for the timed shards (e.g. '--min-rounds 300': jobs
# long enough to reach the sustained clock, so each result has both regimes).
# SHARD_ARGS: more options for single shards, '|'-separated in SHARDS' order (e.g.
# '--l2-flush write|--l2-flush read': the same items timed under two L2 flushes, one client each).
# PROFILES: `tirxh profile` runs against the same daemon before the timed shards, separated by
# ';', each "NODEID OPTIONS" relative to zoo/ (e.g. 'kernels/attention.py::attention_fwd[CASE]
# --ncu --ncu-set full'), PROFILE_LIMIT seconds each (default 120), and never past TOTAL_LIMIT
# less 30 s (each profile gets what is left, at least 10 s; the timed shards get what the
# profiles left, so the log tail below is always reached). A profile killed at its limit
# (rc=124) still shows its phase lines (`iket [+12.3s] ...`) in the tail printed here.
# Artifacts in profile_N/ and profile_N.json inside the archive, less the Chrome JSON
# (iket_trace.json: ~100 MB for a full attention trace; rebuild it from iket_trace.bin and
# iket_trace.layout.json with `python -m tirxh_iket render`). SHARDS='' (set and empty) times
# nothing.
# PREWARM: a command run after the set-up, before the daemon starts (PREWARM_LIMIT seconds,
# default 120; output in logs/prewarm.log, its tail printed): a baseline's one-time first-call
# cost paid outside every job's budget (gemm_bench.sh: benchmarks/pyptx_prewarm.py).
# Carry .whl (grpcio-health-checking, and pyptx / fla / nvidia-ml-py for their baselines), and
# .carry/tirxh-cache.tgz and .carry/inductor-cache.tgz from an earlier call's $OUT
# (benchmarks/compile_cache.sh: our cubins and torch.compile's baselines).
# Output: $OUT/gpu_bench.tar.gz (logs/shard_N.log, bench_N.jsonl, daemon.log, nvidia-smi).
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"
WORK=/tmp/gpu_bench
LOGS="$WORK/logs"
rm -rf "$WORK"
mkdir -p "$LOGS" "$OUT"
export PYTHONUNBUFFERED=1 TIRXH_CACHE_DIR=/tmp/tirxh-cache TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache
# pyptx's own disk cache (PTX and cubins by specialization): its first call on a fresh machine
# took 20-30 s in sessions 10-13, carried as pyptx-cache.tgz like the others
export PYPTX_CACHE_DIR=/tmp/pyptx-cache
. benchmarks/compile_cache.sh
START=$(date +%s)
if [ -z "${GPU_BENCH_DRY:-}" ] && ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_bench: SKIPPED: no NVIDIA GPU here (nvidia-smi -L failed)"
    exit 0
fi

restore_compile_cache
# --- set-up: carried wheels, the project and its plugins (no index reachable there) ----------
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD:$PWD/plugins/numsim:$PWD/plugins/sync_check:$PWD/plugins/ncu_profile:\
$PWD/plugins/iket:${PYTHONPATH:-}"
[ -n "${GPU_BENCH_DRY:-}" ] || python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . \
    $(for d in plugins/*/; do [ -f "$d/pyproject.toml" ] && printf -- '-e %s ' "$d"; done) \
    >"$LOGS/install.log" 2>&1 || { echo "install failed"; tail -20 "$LOGS/install.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv | tee "$WORK/nvidia-smi-before.csv"
echo "set-up done at +$(( $(date +%s) - START ))s"
if [ -n "${PREWARM:-}" ]; then
    timeout --kill-after=10 "${PREWARM_LIMIT:-120}" bash -c "$PREWARM" >"$LOGS/prewarm.log" 2>&1
    echo "=== prewarm: rc=$? at +$(( $(date +%s) - START ))s"
    tail -n "${TAIL:-20}" "$LOGS/prewarm.log"
fi

# --- one daemon, several clients ---------------------------------------------------------------
rm -f "$WORK/port"
python3 -m kcoral.cli serve --host 127.0.0.1 --port 0 --port-file "$WORK/port" \
    --state-dir "$WORK/kcoral" >"$LOGS/daemon.log" 2>&1 &
DAEMON=$!
for _ in $(seq 120); do [ -s "$WORK/port" ] && break; sleep 0.5; done
if [ ! -s "$WORK/port" ]; then echo "daemon did not start"; tail -30 "$LOGS/daemon.log"; exit 1; fi
ADDR="127.0.0.1:$(cat "$WORK/port")"
# where the daemon's start goes (plugins, each board's worker): 40-60 s in session 9, when the
# baselines imported torch, FLA and pyptx at registration in the daemon and every worker; ~2 s since
echo "daemon serving at +$(( $(date +%s) - START ))s"
grep -E "plugins loaded|worker up" "$LOGS/daemon.log" | sed 's/^[^ ]* [^ ]* /    /'
python3 -m kcoral.cli boards --daemon "$ADDR" 2>&1 | tee "$WORK/boards.txt" || true

if [ -n "${PROBE:-}" ]; then
    timeout --kill-after=10 "${PROBE_LIMIT:-90}" python3 benchmarks/bench_with.py \
        --kcoral "$ADDR" --no-timing --exec-s 15 -k "$PROBE" --rootdir benchmarks/probes \
        --report-log "$WORK/probe.jsonl" >"$LOGS/probe.log" 2>&1
    echo "=== probe: rc=$? at +$(( $(date +%s) - START ))s"
    sed -n '/= KCoral/,$p' "$LOGS/probe.log" | tail -n 40
fi
smoke_rc=0
if [ -n "${SMOKE:-}" ]; then
    timeout --kill-after=10 "${SMOKE_LIMIT:-150}" python3 benchmarks/bench_with.py \
        --kcoral "$ADDR" --no-timing --exec-s "${SMOKE_EXEC_S:-15}" -k "$SMOKE" --target sm_90a \
        --report-log "$WORK/smoke.jsonl" >"$LOGS/smoke.log" 2>&1
    smoke_rc=$?
    # the gate wants every item verified: tirxh bench --no-timing exits 0 once any item is
    # (as a bench exits 0 once any item is timed), so an incomplete one (a hang: timeout.exec)
    # closes the gate here, as does a missing summary line (the pass itself timed out)
    if [ "$smoke_rc" = 0 ] && ! tail -n 5 "$LOGS/smoke.log" | grep -E "^=+ .* in " \
        | grep -qvE "failed|error|incomplete"; then smoke_rc=1; fi
    echo "=== smoke: rc=$smoke_rc at +$(( $(date +%s) - START ))s"
    grep -E "^(FAILED|ERROR)|failed|passed|incomplete" "$LOGS/smoke.log" | tail -n 30
fi

if [ -n "${PROFILES:-}" ]; then
    IFS=';' read -r -a profiles <<<"$PROFILES"
    j=0
    for p in "${profiles[@]}"; do
        limit="${PROFILE_LIMIT:-120}"
        if [ -n "${TOTAL_LIMIT:-}" ]; then  # 30 s kept for the shards' floor and the archive
            left=$(( TOTAL_LIMIT - ($(date +%s) - START) - 30 ))
            [ "$left" -lt "$limit" ] && limit=$(( left > 10 ? left : 10 ))
        fi
        echo "=== profile $j ($p): limit ${limit}s, started at +$(( $(date +%s) - START ))s"
        # shellcheck disable=SC2086  # NODEID and its options, split on purpose
        timeout --kill-after=10 "$limit" python3 -m tirxh profile --rootdir zoo \
            --kcoral "$ADDR" --target sm_90a $p --out "$WORK/profile_$j" \
            --json-file "$WORK/profile_$j.json" >"$LOGS/profile_$j.log" 2>&1
        rc=$?
        [ "$rc" = 124 ] || [ "$rc" = 137 ] && rc="$rc (killed at its ${limit}s limit)"
        echo "=== profile $j ($p): rc=$rc at +$(( $(date +%s) - START ))s"
        tail -n "${TAIL:-40}" "$LOGS/profile_$j.log"
        j=$((j + 1))
    done
fi
if [ -n "${TOTAL_LIMIT:-}" ]; then  # the whole run's cap: the shards get what is left of it
    left=$(( TOTAL_LIMIT - ($(date +%s) - START) - 15 ))
    [ "$left" -lt "${BENCH_LIMIT:-420}" ] && BENCH_LIMIT=$(( left > 10 ? left : 10 ))
    echo "timed shards: ${BENCH_LIMIT:-420}s left of TOTAL_LIMIT=${TOTAL_LIMIT}s"
fi
IFS='|' read -r -a shards <<<"${SHARDS-h200}"
IFS='|' read -r -a shard_args <<<"${SHARD_ARGS:-}"
if [ -n "${SMOKE_GATE:-}" ] && [ "$smoke_rc" != 0 ]; then
    echo "=== timed shards SKIPPED: the smoke pass exited $smoke_rc (SMOKE_GATE)"
    shards=()
fi
pids=()
i=0
for k in "${shards[@]}"; do
    (timeout --kill-after=10 "${BENCH_LIMIT:-420}" python3 benchmarks/bench_with.py \
        --kcoral "$ADDR" --exec-s "${EXEC_S:-60}" ${SEEDS:+--seeds "$SEEDS"} \
        ${SHARE_INPUTS:+--share-inputs} -k "$k" ${BENCH_ARGS:-} ${shard_args[$i]:-} \
        --target sm_90a --report-log "$WORK/bench_$i.jsonl" >"$LOGS/shard_$i.log" 2>&1
     echo "shard $i ($k): rc=$? at +$(( $(date +%s) - START ))s" >>"$LOGS/shard_$i.log") &
    pids+=($!)
    i=$((i + 1))
done
[ "${#pids[@]}" -gt 0 ] && wait "${pids[@]}"
kill "$DAEMON" 2>/dev/null
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv \
    >"$WORK/nvidia-smi-after.csv" 2>&1
for f in "$LOGS"/shard_*.log; do
    [ -e "$f" ] || continue
    echo "=== $f"
    sed -n '/= KCoral/,$p' "$f" | tail -n "${TAIL:-40}"
done
# the workers' own logs (a worker that dies says why only there); not the job blobs
find "$WORK/kcoral" -name "*.log" -exec cp {} "$LOGS/" \; 2>/dev/null
for f in "$LOGS"/worker-*.log; do
    [ -s "$f" ] && { echo "=== $f (last lines)"; tail -n "${TAIL:-40}" "$f"; }
done
# every timed item by clock regime (a bench line shows both ratios only when they differ > 2%)
if ls "$WORK"/bench_*.jsonl >/dev/null 2>&1 && python3 benchmarks/regime_summary.py \
        "$WORK"/bench_*.jsonl >"$OUT/regimes.md" 2>"$LOGS/regimes.log"; then
    echo "=== clock regimes ($OUT/regimes.md)"
    tail -n "${TAIL:-40}" "$OUT/regimes.md"
fi
tar -czf "$OUT/gpu_bench.tar.gz" -C "$WORK" --exclude=kcoral --exclude=iket_trace.json . \
    2>/dev/null
save_compile_cache "$OUT"
echo "total $(( $(date +%s) - START ))s"
