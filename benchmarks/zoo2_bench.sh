#!/usr/bin/env bash
# The zoo's reductions, scans and decode attention (softmax, topk, cumsum, decode_attention):
# check, inspect and time them in one call on a GPU machine (the lead runs it on the H200):
#
#   bash benchmarks/zoo2_bench.sh                 # OUT=dir for the reports (default ./zoo2_out)
#
# 1. `tirxh check` of the small cases (numsim against the references, synccheck, racecheck);
# 2. registers, spills and shared memory of every case (`tirxh show --resources`): the kernels
#    are designed for no spills;
# 3. without a GPU it stops here and says so; with one, `tirxh bench --target sm_90a` over the
#    large cases through KCoral: candidate and baselines (torch eager and torch.compile) interleaved
#    in one job per case, correctness before and after timing; text, JUnit XML and the report log
#    (JSON lines) in OUT.
# Environment: ZOO2_K (a -k expression, default all four kernels), KCORAL (a daemon address;
# default an embedded one), BENCH_LIMIT (seconds, default 540).
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/zoo2_out}"
mkdir -p "$OUT"
K="${ZOO2_K:-softmax or topk or cumsum or decode_attention}"
cd zoo

echo "=== 1. tirxh check -k \"$K\""
tirxh check -k "$K" --junitxml "$OUT/check.xml" | tail -n 25

echo "=== 2. resources of every case"
tirxh check -k "$K" --collect-only -q 2>/dev/null | grep '::.*\[' | while read -r node; do
    res=$(tirxh show "$node" --resources --json 2>/dev/null | python3 -c '
import json, sys
try:
    r = json.load(sys.stdin)["content"]["resources"]
    print("regs %3d  spills %3d  static smem %s" % (r["registers"], r["spill_stores"],
                                                   r["smem_static"]))
except Exception as e:
    print(f"(no resources: {e})")')
    printf '%-72s %s\n' "$node" "$res"
done | tee "$OUT/resources.txt"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "=== 3. no GPU on this machine (nvidia-smi finds none): nothing timed"
    exit 0
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.csv"
echo "=== 3. tirxh bench --target sm_90a -k \"$K\" (large cases, baselines interleaved)"
timeout --kill-after=10 "${BENCH_LIMIT:-540}" tirxh bench --target sm_90a -k "($K)" \
    ${KCORAL:+--kcoral "$KCORAL"} --junitxml "$OUT/bench.xml" --report-log "$OUT/bench.jsonl" \
    2>&1 | tee "$OUT/bench.txt" | tail -n 60
