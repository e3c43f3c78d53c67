#!/usr/bin/env bash
# The zoo's attention forward (zoo/kernels/attention.py, issue 16) against torch SDPA on the H200,
# in one command:
#
#   (device) bash benchmarks/attn_bench.sh [GROUP ...]
#
# GROUPS (default: main) select cases by their role tags (VARIANTS in attention.py):
#   main   the fastest measured variant: persistent (132 CTAs), FlashAttention-3 ping-pong,
#          lazy rescaling (LAZY=8), causal tiles in pairs (pairs_lazy8:
#          zoo/kernels/attn_schedule.py)
#   alt    the persistent snake without the lazy rescale (p) and with it when causal, one CTA
#          per tile (the hardware's scheduler), the rendezvous ping-pong, KV blocks of 160 keys
#          (non-causal only)
#   sweep  no ping-pong (what the turns are worth)
#   all    every benchmark case
# Shapes (B, H, HKV, S): 4x32x32x2048, 4x32x32x8192, 2x16x16x16384, 4x32x8x8192 (GQA), each
# causal and not. One `tirxh bench` client per shape (benchmarks/gpu_bench.sh: one KCoral daemon,
# concurrent clients), so the host builds one shape's jobs (inputs, the float32 numpy reference
# threaded over heads, uploads) while the GPU times another's; a shape's masks and variants share
# its cached inputs and references. Each job checks O and LSE on the GPU (SEEDS seeds, before and
# after timing) and times the candidate interleaved with torch.sdpa on the same q, k, v buffers
# ([B, S, H, D], passed to SDPA as [B, H, S, D] views; GQA by enable_gqa). TFLOP/s: 4 B H S^2 128,
# half of it when causal.
# First a smoke pass, correctness only with a 15 s execution budget per job (SMOKE_LIMIT, default
# 90 s, for all of it): the small cases and the `smoke` cases (the full 132-CTA grid, every
# variant, 2 to 4 tiles per CTA), so a variant that deadlocks on hardware costs 15 s, not the
# timed jobs' budget; if it fails, the timed jobs are skipped (SMOKE_GATE). Then the timed
# jobs on one correctness seed (SEEDS, default 1: the float32 reference of a B4 H32 S8192 shape
# is ~30 s of 16 cores).
# Device time: set-up ~20 s + smoke <= 90 s + the timed jobs (BUDGET, default 180 s, cut to
# what is left of TOTAL_LIMIT, default 285 s, for the whole run) for "main"; "alt" and "sweep"
# in a second call. A shape whose client runs out of budget is listed under "Not timed" in
# summary.md.
#
# Env: ROUNDS (paired rounds per timed job, e.g. 300: both clock regimes, below), B2B (launches per sample), ATTN_K a -k expression over case names instead of the groups, BUDGET seconds for the timed clients (default 180), TOTAL_LIMIT (default 285),
# SMOKE_LIMIT (default 90; 0 skips the smoke pass), SMOKE_K (a -k expression that narrows the
# smoke pass to a new variant's small and smoke cases, e.g. "pairs"), SEEDS (default 1),
# SHAPES (e.g.
# "b4h32s8192 b2h16s16384" to restrict), OUT (default ./gpu_out: gpu_bench.tar.gz with every
# log and report, summary.md, summary.json).
# Exits 0 without a GPU, saying so.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"
mkdir -p "$OUT"
if [ -z "${GPU_BENCH_DRY:-}" ] && ! nvidia-smi -L >/dev/null 2>&1; then
    echo "attn_bench: SKIPPED: no NVIDIA GPU here (nvidia-smi -L failed); on the CPU the same"
    echo "kernel is checked with: cd zoo && tirxh check -k attention_fwd"
    exit 0
fi

role() {  # role GROUP -> a -k expression over the role tags
    case "$1" in
        main) echo "main";; alt) echo "alt";; sweep) echo "sweep";; all) echo "attention_fwd";;
        *) echo "attn_bench: unknown group $1 (main, alt, sweep, all)" >&2; return 1;;
    esac
}
roles=""
for g in ${*:-main}; do
    r=$(role "$g") || exit 2
    roles="${roles:+$roles or }($r)"
done
# ATTN_K replaces the groups by any -k expression over case names (e.g. "bn160 or lazy8")
[ -n "${ATTN_K:-}" ] && roles="$ATTN_K"
# one client per shape, the largest first (if the budget runs out, the S = 16384 and 8192 rows
# were timed)
shapes=${SHAPES:-"b2h16s16384 b4h32s8192 b4h32kv8s8192 b4h32s2048"}
SHARDS=""
for s in $shapes; do
    SHARDS="${SHARDS:+$SHARDS|}attention_fwd and ${s}_ and ($roles)"
done
echo "attn_bench: one client per shape: $shapes; roles: $roles"

smoke=""
[ "${SMOKE_LIMIT:-90}" = 0 ] ||
    smoke="attention_fwd and not (main or alt or sweep)${SMOKE_K:+ and ($SMOKE_K)}"
# ROUNDS: at least that many paired rounds per timed job (tirxh bench --min-rounds, up to 60 s of
# timing): the board reaches its sustained clock inside the job, which then reports the ratio at
# full clock and sustained (issue 16's goal holds in both). B2B: launches per sample (tirxh bench
# --back-to-back): S2048's rounds of one launch a side never heated the board (session 8)
[ -n "${ROUNDS:-}" ] && export BENCH_ARGS="--min-rounds $ROUNDS" EXEC_S="${EXEC_S:-120}"
[ -n "${B2B:-}" ] && export BENCH_ARGS="${BENCH_ARGS:-} --back-to-back $B2B"
SMOKE="$smoke" SMOKE_LIMIT="${SMOKE_LIMIT:-90}" SMOKE_EXEC_S=15 SMOKE_GATE=1 SEEDS="${SEEDS:-1}" \
    TOTAL_LIMIT="${TOTAL_LIMIT:-285}" SHARDS="$SHARDS" BENCH_LIMIT="${BUDGET:-180}" OUT="$OUT" \
    bash benchmarks/gpu_bench.sh

(cd benchmarks && python3 attn_summary.py /tmp/gpu_bench/bench_*.jsonl --json "$OUT/summary.json") \
    | tee "$OUT/summary.md"
