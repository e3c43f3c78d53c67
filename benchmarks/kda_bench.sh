#!/usr/bin/env bash
# Kimi Delta Attention (issue 18): the zoo's KDA kernels against FLA in one command on the H200,
# within 300 s of device time (set-up included):
#
#   (device) bash benchmarks/kda_bench.sh [GROUP ...]
#   carry: .whl (fla_core-0.6.0, flash_linear_attention-0.6.0, grpcio_health_checking) and,
#   from an earlier call, .carry/triton-autotune.tgz (that call's $OUT/triton-autotune.tgz:
#   FLA's autotune results, so the prewarm below only compiles) and .carry/tirxh-cache.tgz
#   (its $OUT/tirxh-cache.tgz: our cubins, benchmarks/compile_cache.sh)
#
# GROUPS (default: main):
#   main      the forward's predicted fastest variant per shape (kda_fwd, against fla.chunk_kda
#             and fla.chunk_kda.fwd_bwd) and decode (kda_decode, against fla.fused_recurrent_kda)
#             in this order: T8192 H96, H64, decode, the varlen packs, B2 T4096 H32
#   variants  every forward variant of every shape (BV 64/128, 1/2 stages, helper warps:
#             docs/TUNING.md; needs BUDGET of ~600 s)
#   ws        the warp-specialized forward (PREP prep warps hand chunk c + 1 to the state warps:
#             docs/TUNING.md, "Warp specialization") against its plain base in the same call:
#             T8192 H96 (v128s2, v128ws, v64ws8), then T8192 H64 (v64s2, v64ws, v64ws8, v128ws);
#             its smoke covers every kda_fwd small case
#   wsb       the batched prep (BATCH=8: the gate's rows and materialize's vectors loaded before
#             their in-place stores, the A/M blocks side by side; docs/TUNING.md, "The prep's
#             in-place chains") beside today's fastest in the same job: T8192 H96 (v128s2,
#             v128s2b, v128wsb), then T8192 H64 (v64ws8, v64ws8b, v64wsb); ~370 s of device time
#             (the ws call of 2026-12-02: 104 s to the first job, ~50 s per variant at H96 and
#             ~37 s at H64): `BUDGET=390 bash benchmarks/kda_bench.sh wsb`
#   wsbpacks  the batched prep on the varlen packs, one variant per job: pack6 at H96
#             (v128wsb) and H64 (v64ws8b), then 8 x 1024 (the same); step 0 prewarms FLA's
#             varlen kernels: `BUDGET=390 bash benchmarks/kda_bench.sh wsbpacks` (carry the
#             autotune cache of an earlier call, or its first job may autotune)
#   wsc       kda_fwd_slim (the batched ws prep in less code: the gate a runtime loop, one
#             diagonal-inverse path, and with BLOCKS=1 the A/M blocks one runtime path too;
#             docs/TUNING.md, "The prep's code size") beside its controls in the same job:
#             T8192 H96 (v128wsb, v128wsl, v128wsm), then T8192 H64 (v64ws8b, v64ws8l, v64ws8m);
#             its smoke covers those variants' small cases only; ~365 s of device time
#             (wsb's per-item times): `BUDGET=390 bash benchmarks/kda_bench.sh wsc` (its
#             smoke runs first and stops the call on a failure or hang; `... smoke wsc`: the
#             smoke alone, ~2 min); WSC_SHAPES=t8192_h64 times one shape (~190 s with the
#             autotune cache carried)
#   wsd       kda_fwd_ahead (zoo/kernels/kda_fwd_slim.py, session 8: v64ws8l with the next
#             chunk's norms beside the inverse (p), the A/M blocks as two warp-uniform loops (n),
#             both (q); docs/TUNING.md, "H64: the prep's path") beside kda_fwd_slim's v64ws8l in
#             one job at T8192 H64; its smoke covers those kernels' small cases only; ~230 s of
#             device time (the H64-only wsc call: 187 s for three variants, ~37 s a variant):
#             `BUDGET=300 bash benchmarks/kda_bench.sh wsd`
#   wse       kda_fwd_pair (zoo/kernels/kda_fwd_slim.py, session 10: the two value slices of
#             a head in a 2-CTA cluster, each CTA preparing every other chunk for both: c with
#             v64ws8l's prep, d with v64ws8n's; docs/TUNING.md, "H64: one prep per head")
#             beside the controls v64ws8l and v64ws8q in one job at T8192 H64; its smoke covers
#             those kernels' small cases only; ~240 s of device time (wsd's call: ~37 s a
#             variant): `BUDGET=300 bash benchmarks/kda_bench.sh wse`
#   wsf       kda_fwd_pair's session-11 forms (v64ws8e: the own state warps start beside the
#             copy into the peer; v64ws8f: e with M and Tb copied without their zero blocks;
#             v64ws8g: e with the raw q, k, g through a working buffer) beside v64ws8c, one job
#             per H64 shape: t8192, pack6, pack8x1024 (WSF_SHAPES narrows them, WSF_VARIANTS
#             the variants); its smoke covers those variants' small cases only; ~350-420 s:
#             `BUDGET=450 bash benchmarks/kda_bench.sh wsf`
#   slimpacks the slim forwards on the varlen packs against FLA's varlen chunk_kda, one job
#             per shape: pack6 at H96 (v128wsl) and H64 (SLIM_H64, default "v64ws8l v64ws8q"),
#             then 8 x 1024 (the same); step 0 prewarms FLA's varlen kernels (carry the
#             autotune cache); ~330 s: `BUDGET=360 bash benchmarks/kda_bench.sh slimpacks`
#   decode    the decode cases only: kda_decode (tag main) and kda_decode_bulk (the state by
#             bulk copies through a 3-stage shared-memory ring, tag ring; docs/TUNING.md "Decode
#             by bulk copies") in one job against fla.fused_recurrent_kda, one set of inputs per
#             shape for both (--share-inputs); ~400 s of device time with set-up and smoke,
#             the job ~130 s of host inputs:
#             `OUT=$OUT/kda BUDGET=450 bash benchmarks/kda_bench.sh decode`
#   decodebulk kda_decode_bulk's large cases alone (tag ring) against fla.fused_recurrent_kda,
#             DECODE_EXEC_S (default 150) per job: session 10's decode group spent its budget
#             on the control (43 s on the board for n256_h64_t1's 1 GB state: correctness,
#             guards, 25 samples) and timed the bulk kernel at one shape; n1024_h32_t2 (2 GB
#             of state) ran past a 60 s budget. Smoke: the decode kernels' small cases only.
#             `OUT=$OUT/kda BUDGET=520 bash benchmarks/kda_bench.sh decodebulk`
#   decodecols kda_decode_cols (session 11: column-owning warps, butterfly sums, no CTA barrier
#             per token, a producer warp; docs/TUNING.md "Decode by bulk copies") after
#             kda_decode_bulk at the five ring shapes, one job against fla.fused_recurrent_kda,
#             one set of inputs and float64 reference per shape for both (--share-inputs: the
#             c128 case takes n64_h64_t4's, so the 4 kept entries cover the second kernel);
#             DECODE_EXEC_S per job; smoke: the decode kernels' small cases; ~330 s:
#             `OUT=$OUT/kda BUDGET=480 bash benchmarks/kda_bench.sh decodecols`
#   decodecols2 kda_decode_cols PREP=1 (session 13: the producer warp prepares each head's gates
#             and norms once) and PREP=1 TAIL=1 (the last heads' stores deferred past the last
#             load; docs/PERFORMANCE.md "Session 13, branch deccols2") after PREP=0 (the
#             control, with its n64_h64_t4_c128 replicate) at the four ring shapes, one job
#             against fla.fused_recurrent_kda, one set of inputs per shape (--share-inputs);
#             smoke: the decode kernels' small cases; ~400 s:
#             `OUT=$OUT/kda BUDGET=520 bash benchmarks/kda_bench.sh decodecols2`
#   decodecols3 kda_decode_cols PREP=2 (session 14: a tenth warp prepares the gates, the
#             producer keeps PREP=0's loop; docs/PERFORMANCE.md "Session 14, branch deccols3")
#             after PREP=0 (the control and its c128 replicate) at n64_h64_t4 and n1024_h32_t2,
#             one job, one set of inputs per shape; smoke: kda_decode_cols's small cases; ~200 s:
#             `OUT=$OUT/kda BUDGET=300 bash benchmarks/kda_bench.sh decodecols3`
#   decodecols4 decodecols3's items and PREP=2's TAIL=1 twins (`_pwtail`, session 19: the last
#             heads' stores deferred under the last head's compute), one job a shape; ~220 s:
#             `OUT=$OUT/kda BUDGET=300 bash benchmarks/kda_bench.sh decodecols4`
#   decodecols5 DYN=1's twins (`_dyn`, session 21: heads from a counter instead of the static
#             walk) and START=1's (`_st`: the first head's load alone, then the other stages')
#             after the control at n64_h64_t4 and n1024_h32_t2, one job a shape; ~220 s:
#             `OUT=$OUT/kda BUDGET=300 bash benchmarks/kda_bench.sh decodecols5`
#   decodecols6 TAKE=1's twin (`_dyn_ta`, session 27: each refill's ticket asked a head early)
#             after the control and `_dyn` at n64_h64_t4, one job; ~200 s:
#             `OUT=$OUT/kda BUDGET=300 bash benchmarks/kda_bench.sh decodecols6`
#   bwd       the backward (kda_bwd: dq, dk, dv, dg, dbeta, dh0) against fla.chunk_kda.fwd_bwd and
#             fla.chunk_kda.bwd (FLA's backward alone), T8192 H96 and H64 first, then the varlen
#             packs (BWD_SHAPES); its smoke and warm-up cover kda_bwd only (run it as its own call:
#             `bash benchmarks/kda_bench.sh bwd`, or `... smoke bwd` for its smoke alone)
#   local     piece 3 of the chunked backward (kda_bwd_local: the intra-chunk gradients from
#             the reverse pass's pieces; f32 CUDA-core first version) alone, T8192 H96, H64 and
#             the public pack at H96, on synthetic pieces (timing only: its small cases, smoked
#             first, are the check); no baseline (FLA's backward is timed by group bwd)
#   reverse   piece 2 of the chunked backward (kda_bwd_reverse: the serial reverse pass over
#             the chunks, dv, dh0 and the pieces; f32 CUDA-core first version) alone, T8192
#             H96, H64 and the public pack at H96 (REVERSE_SHAPES), on a synthetic S0 (timing
#             only, as local), REVERSE_EXEC_S (default 180) per job; no baseline
#   chain     piece 2's serial part on tensor cores (kda_bwd_chain: dS <- exp(G_C) dS + N dS
#             + B over the chunks, bf16 hi + lo mma.sync; FORWARD=1 the same chain giving
#             every chunk's S0) alone, T8192 H96, H64 and the public pack at H96 / H64
#             (CHAIN_SHAPES; N staged in shared memory with 8 warps a CTA, and read from
#             global memory by 2-warp CTAs; the forward walk at T8192 H96), on synthetic
#             operands (timing only: its small cases, smoked first, are the check),
#             CHAIN_EXEC_S (default 180) per job; no baseline. After the first shape, pieces
#             2a and 2c (kda_bwd_chain_prep: the chain's operands of every chunk;
#             kda_bwd_chain_pieces: dv and the pieces from S0 and dS1; f32 CUDA-core first
#             versions) at PREP_SHAPES (default T8192 H96). Its smoke covers the three
#             kda_bwd_chain* kernels only when it is the only group
#   tc        pieces 2a, 2c and 3 on tensor cores (kda_bwd_prep_tc, kda_bwd_pieces_tc,
#             kda_bwd_local_tc: the f32 kernels' products as split bf16 mma.sync, same inputs
#             and outputs) beside the f32 kda_bwd_chain_prep, kda_bwd_chain_pieces and
#             kda_bwd_local at TC_SHAPES (default T8192 H96),
#             synthetic inputs, S0 and dS1 (timing only: the small cases of all four, smoked
#             first, are the check), CHAIN_EXEC_S (default 180) per job; no baseline;
#             predictions in docs/PERFORMANCE.md "Pieces on tensor cores"
#   tc2       the prep on tensor cores: kda_bwd_prep_tc and kda_bwd_pieces_tc with PREP=1
#             (P and M as split mma: cases pm_*) and PREP=2 (T's blocks too: pmt_*) beside
#             their PREP=0 (group tc's items), one job per shape at TC2_SHAPES (default T8192
#             H96; t8192_h64 too), synthetic inputs as tc's, CHAIN_EXEC_S (default 180) per
#             job; its smoke covers those two kernels' small cases (PREP 0, 1, 2); predictions
#             in docs/PERFORMANCE.md "Pieces on tensor cores", "The prep on tensor cores"
#   prep2     piece 2a of both walks from one prep (kda_bwd_prep2, PREP=2) beside the two
#             launches it replaces (kda_bwd_prep_tc PREP=2: pmt_ the reverse walk, pmt_fwd_
#             the forward), one job per shape at PREP2_SHAPES (default T8192 H96 and H64),
#             synthetic inputs, CHAIN_EXEC_S (default 180) per job; its smoke covers those
#             small cases (prep2's and prep_tc's pmt_); predictions in docs/PERFORMANCE.md
#             "Session 12, branch kdabwd9"
#   tf32      piece 2c's products as single-pass tf32 (kda_bwd_pieces_tc TF32=1 PREP=2, cases
#             tfpmt_*) beside the split bf16 products (PREP=2, pmt_*), one job per shape at
#             TF32_SHAPES (default T8192 H96 and H64), synthetic inputs as tc's, CHAIN_EXEC_S
#             (default 180) per job; its smoke is those two forms' small cases (tf_* at unit
#             input scale); predictions in docs/PERFORMANCE.md "Session 12, branch kdatf32"
#   prep3     piece 2a of both walks with split-once swizzled operands (kda_bwd_prep3,
#             ldmatrix fragments) beside kda_bwd_prep2, one job per shape at PREP3_SHAPES
#             (default T8192 H96 and H64), synthetic inputs, CHAIN_EXEC_S (default 180) per
#             job; its smoke is both kernels' small cases; predictions in docs/PERFORMANCE.md
#             "Session 13, branch kdaprep3"
#   calib     piece 2a's prep alone (kda_bwd_prep_only: kda_bwd_prep_tc PREP=2 up to its walk)
#             beside kda_bwd_prep_tc's two walks (pmt_, pmt_fwd_), one job per shape at
#             CALIB_SHAPES (default T8192 H96 and H64), synthetic inputs, CHAIN_EXEC_S (default
#             180) per job: the prep's and each walk's cycles, the terms of the backward's
#             cycle model; predictions in docs/PERFORMANCE.md "Session 13, branch kdabwd10"
#   s0        piece 1 of the chunked backward (kda_fwd_s0: the forward that also stores each
#             chunk's start state) at S0_SHAPES (default T8192 H96, H64), S0_EXEC_S (default
#             180) per job; `main` and `variants` leave it out (its 0.8 GB output makes a job
#             ~2x longer)
#   check     only step 1 below (no GPU needed)
#   smoke     steps 1-3 only (a first call of ~2 min that proves no kernel hangs; with bwd:
#             the backward's small cases only)
# BENCH_ARGS: more `tirxh bench` options for every timed job (e.g. '--min-rounds 200': a
# replicate that settles a sub-1% difference; listed with KDA_BENCH_LIST=1).
# KDA_BENCH_LIST=1 (anywhere, no GPU, seconds): the smoke's and every job's items for the
# GROUPs as `tirxh bench --collect-only` selects them, one "== NAME" line before each, and
# nothing else run: a -k that selects nothing (a renamed case) shows here, not on the GPU.
# KDA_BENCH_DRY=1 runs without a GPU (KCoral's sim board: numsim; checks the plumbing, slowly).
# Steps: 1. registers / spills / shared memory of every compiled variant (CHECK=1 adds `tirxh
# check`: numsim against float64 and sync_check, CPU minutes); 2. without a GPU, stop (saying
# so); 3. SMOKE: every variant's small cases on the GPU, correctness only, SMOKE_EXEC_S (default
# 15) per job and SMOKE_LIMIT (default 90) for all: numsim runs CTAs in one legal order, the
# hardware may not, so a kernel that hangs costs seconds; any failure or hang stops the script
# before anything is timed; 4. one tiny warm-up job (FLA's Triton kernels compile and autotune
# there, not inside a timed job's execution budget); 5. the timed jobs, one `tirxh bench` process
# per shape against one KCoral daemon (its variants share the inputs and the float64 reference,
# computed on the host), EXEC_S (default 60) per job, SEEDS correctness seeds (default 1: one
# check before timing; the protocol's 2 adds one after, and a reference per seed); the kernel is
# timed interleaved with the FLA baselines in the same job (ratio = FLA median / ours). The
# summary (summary.md: times, ratios, the issue's goals, memory and serial-chain floors) is
# written after every shape, so a command cut off still returns what was timed.
# Env: BWD_SHAPES the backward's shapes in order (group bwd), LOCAL_SHAPES / REVERSE_SHAPES
# / CHAIN_SHAPES (groups local, reverse, chain), BUDGET seconds after which no new job starts (default 270; 520 when the call may run 600 s: set-up and smoke took 130 s on the H200), WARMUP_EXEC_S the FLA warm-up job's execution budget (default 240), OUT (default ./kda_out),
# SHAPES the forward shapes in order (default: all; a second call can take those the first
# call's budget left out, e.g. SHAPES="pack6_h96 pack6_h64 ..." bash benchmarks/kda_bench.sh).
# Host time per large forward shape: its inputs and float64 reference (threads over chunks and
# heads) ~20-40 s on 16 cores (an estimate: 225 s measured on a 2-core CPU at T8192 H96),
# once per seed.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/kda_out}"
WORK=/tmp/kda_bench
LOGS="$WORK/logs"
BUDGET="${BUDGET:-270}"
START=$(date +%s)
WANT="${*:-main}"
for g in $WANT; do
    case "$g" in main|variants|ws|wsb|wsbpacks|wsc|wsd|wse|wsf|slimpacks|decode|decodebulk\
        |decodecols|decodecols2|decodecols3|decodecols4|decodecols5|decodecols6|bwd|local|reverse\
        |chain|fb|s0\
        |check|smoke|tc|tc2\
        |prep2|tf32|calib\
        |prep3) ;;
        *) echo "kda_bench: unknown group $g (main, variants, ws, wsb, wsbpacks, wsc, wsd, wse, \
wsf, slimpacks, decode, decodebulk, decodecols, decodecols2, decodecols3, decodecols4, decodecols5, \
decodecols6, bwd, \
local, reverse, \
chain, fb, s0, \
check, smoke, tc, tc2, prep2, tf32, calib, prep3)"
           exit 2;;
    esac
done
# group wsc's shapes (WSC_SHAPES, default both), refused here rather than after the smoke pass
for s in ${WSC_SHAPES:-}; do
    case "$s" in t8192_h96|t8192_h64) ;;
        *) echo "kda_bench: WSC_SHAPES takes t8192_h96 and t8192_h64, not $s"; exit 2;; esac
done
for s in ${WSF_SHAPES:-}; do
    case "$s" in t8192|pack6|pack8x1024) ;;
        *) echo "kda_bench: WSF_SHAPES takes t8192, pack6 and pack8x1024, not $s"; exit 2;; esac
done
LIST="${KDA_BENCH_LIST:-}"
SLIM_H64="${SLIM_H64:-v64ws8l v64ws8q}"
# group wsf's variants of kda_fwd_pair (its smoke's small cases and its jobs' items)
WSF_K=$(printf ' or %s' ${WSF_VARIANTS:-v64ws8c v64ws8e v64ws8f v64ws8g})
WSF_K="(${WSF_K# or })"
if [ -n "$LIST" ]; then
    WORK=$(mktemp -d)
    LOGS="$WORK/logs"
fi
rm -rf "$WORK"
mkdir -p "$LOGS"
[ -n "$LIST" ] || mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TIRXH_CACHE_DIR=/tmp/tirxh-cache
# FLA's autotune results travel between calls: each (H, varlen) key costs minutes of autotuning
# (T8192 H96: 85 s for the forward, 165 s more for forward + backward, 2026-12-01), far more
# than a call can spend on every shape. Triton keeps them as <hash>/<kernel>.autotune.json
# under TRITON_CACHE_DIR; results() saves those (kilobytes) to $OUT/triton-autotune.tgz, and a
# later call that carries it as .carry/triton-autotune.tgz starts from them (same GPU kind,
# driver and Triton: otherwise the hashes differ and Triton autotunes again, nothing worse).
# The compiled kernels travel too, as triton-cache.tgz (benchmarks/compile_cache.sh), when
# they fit a returned file; the autotune results alone are the fallback.
export TRITON_CACHE_DIR="${TRITON_CACHE_DIR:-/tmp/kda_triton_cache}"
mkdir -p "$TRITON_CACHE_DIR"
if [ -f .carry/triton-autotune.tgz ]; then
    tar -xzf .carry/triton-autotune.tgz -C "$TRITON_CACHE_DIR" \
        && echo "=== carried FLA autotune results: $(find "$TRITON_CACHE_DIR" \
            -name '*.autotune.json' | wc -l) files"
fi

. benchmarks/compile_cache.sh
[ -n "$LIST" ] || restore_compile_cache
# --- set-up: carried wheels (FLA), the project and its plugins (no index reachable) -----------
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl >"$LOGS/wheels.log" 2>&1 && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD:$PWD/plugins/numsim:$PWD/plugins/sync_check:$PWD/plugins/ncu_profile:\
$PWD/plugins/iket:${PYTHONPATH:-}"
[ -n "${KDA_BENCH_DRY:-}$LIST" ] || python3 -m pip install -q --no-index --no-deps --no-build-isolation \
    -e . \
    $(for d in plugins/*/; do [ -f "$d/pyproject.toml" ] && printf -- '-e %s ' "$d"; done) \
    >"$LOGS/install.log" 2>&1 \
    || { echo "install failed"; tail -20 "$LOGS/install.log"; }

# forward shapes, the headline ones first (if the budget runs out, those were timed)
SHAPES="${SHAPES:-t8192_h96 t8192_h64 pack6_h96 pack6_h64 pack8x1024_h96 pack8x1024_h64 \
b2_t4096_h32}"
BWD_SHAPES="${BWD_SHAPES:-t8192_h96 t8192_h64 pack6_h96 pack6_h64 pack8x1024_h96 pack8x1024_h64}"

# --- 0. FLA's autotuning at the timed shapes, in the background (benchmarks/fla_prewarm.py) --
# Its autotune keys include H and varlen-ness: a tiny warm-up job does not cover the timed
# shapes, whose first job then autotuned past its budget (H200, sessions 3 and 4). A plain
# process fills Triton's on-disk compile and autotune caches while step 1 compiles ours.
PREWARM=
pw_shapes=; pw_decode=; pw_bwd=; pw_only=
case " $WANT " in *" main "*|*" variants "*) pw_shapes="$SHAPES";;
    *" ws "*|*" wsb "*) pw_shapes="t8192_h96 t8192_h64";;
    *" wsc "*) pw_shapes="${WSC_SHAPES:-t8192_h96 t8192_h64}";;
    *" wsd "*|*" wse "*) pw_shapes="t8192_h64";;
    *" wsf "*) pw_shapes=$(printf '%s_h64 ' ${WSF_SHAPES:-t8192 pack6 pack8x1024});;
    *" wsbpacks "*) pw_shapes="pack6_h96 pack6_h64 pack8x1024_h96 pack8x1024_h64";;
    # slimpacks: PACKS narrows the packs, PACKS_H64_ONLY=1 drops the H96 jobs (and their prewarm)
    *" slimpacks "*) pw_shapes=$(for s in ${PACKS:-pack6 pack8x1024}; do
        [ -n "${PACKS_H64_ONLY:-}" ] || printf '%s_h96 ' "$s"; printf '%s_h64 ' "$s"; done);;
esac
case " $WANT " in *" main "*|*" decode "*|*" decodebulk "*|*" decodecols "*|*" decodecols2 "*\
    |*" decodecols3 "*|*" decodecols4 "*|*" decodecols5 "*|*" decodecols6 "*)
    pw_decode=default;;
esac
case " $WANT " in *" bwd "*) pw_shapes="$pw_shapes $BWD_SHAPES"; pw_bwd=--bwd;; esac
case " $WANT " in *" s0 "*) pw_shapes="$pw_shapes ${S0_SHAPES:-t8192_h96 t8192_h64}";; esac
# group fb times FLA's forward + backward only: alone, it warms that and nothing else (session 20:
# the forwards warmed first took the budget, and the plan's H96 job autotuned FLA inside its own)
case " $WANT " in *" fb "*) [ -z "$pw_shapes" ] && [ -z "$pw_bwd" ] && pw_only=fla.chunk_kda.fwd_bwd
    pw_shapes="$pw_shapes ${FB_SHAPES:-t8192_h96 t8192_h64}"
    [ -n "$pw_only" ] || pw_bwd=--bwd;;
esac
if [ -n "$pw_shapes$pw_decode" ]; then
    pw_list=$(printf '%s\n' $pw_shapes | awk '!seen[$0]++' | paste -sd, -)
    pw_cmd=(python3 benchmarks/fla_prewarm.py --shapes "$pw_list" $pw_bwd --only="$pw_only"
            $([ -z "$pw_decode" ] && printf -- "--decode=") --budget "${PREWARM_S:-240}")
    if [ -n "$LIST" ]; then   # what step 0 would warm (the listing's tests read this line)
        echo "prewarm: ${pw_cmd[*]}"
    elif [ -z "${KDA_BENCH_DRY:-}" ] && nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then
        "${pw_cmd[@]}" >"$LOGS/prewarm.log" 2>&1 &
        PREWARM=$!
    fi
fi

# --- 1. CPU checks and resources -----------------------------------------------------------------
if [ -z "$LIST" ]; then
if [ "${CHECK:-0}" = 1 ]; then
    echo "=== 1. tirxh check -k kda (numsim small cases, synccheck, racecheck)"
    (cd zoo && tirxh check -k "kda_fwd or kda_decode or kda_bwd" --junitxml "$OUT/check.xml") \
        >"$LOGS/check.log" 2>&1
    tail -n 3 "$LOGS/check.log"
fi
echo "=== 1. compile and resources (ptxas, one process per kernel variant, in parallel; the \
benches then hit the compile cache) at +$(( $(date +%s) - START ))s"
COMPILES=
for v in $(cd zoo/kernels && python3 -c "import kda_fwd as F; print(*F.VARIANTS)") \
        $(cd zoo/kernels && python3 -c "import kda_fwd as F; print(*('slim_' + v for v in \
F.SLIM_VARIANTS))") \
        $(cd zoo/kernels && python3 -c "import kda_fwd_slim as S; print(*('ahead_' + v for v in \
S.VARIANTS))") \
        $(cd zoo/kernels && python3 -c "import kda_fwd_slim as S; print(*('pair_' + v for v in \
S.PAIR_VARIANTS))") \
        TT1 TT2 TT4 bulk_TT1 bulk_TT2 bulk_TT4 bwd bwd_local bwd_reverse bwd_chain bwd_chain_s8 \
        bwd_chain_prep bwd_chain_pieces bwd_pieces_tc bwd_prep_tc bwd_local_tc bwd_pieces_tc_pm \
        bwd_prep_tc_pm bwd_pieces_tc_pmt bwd_prep_tc_pmt; do
    (cd zoo/kernels && python3 -c "
import sys, kda_fwd as F, kda_fwd_slim as S, kda_decode as D, kda_bwd as BW, kda_bwd_local as BL
import kda_bwd_reverse as BR, kda_bwd_chain as BC, kda_bwd_chain_prep as BP
import kda_bwd_chain_pieces as BQ, kda_bwd_pieces_tc as BT, kda_bwd_prep_tc as BA
import kda_bwd_local_tc as BLT, kda_decode_bulk as DB
v = sys.argv[1]
k, consts = ((BW.kda_bwd, {}) if v == 'bwd' else (BL.kda_bwd_local, {}) if v == 'bwd_local'
             else (BR.kda_bwd_reverse, {}) if v == 'bwd_reverse'
             else (BC.kda_bwd_chain, {'WARPS': 2}) if v == 'bwd_chain'
             else (BC.kda_bwd_chain, {'WARPS': 8, 'STAGED': 1}) if v == 'bwd_chain_s8'
             else (BP.kda_bwd_chain_prep, {}) if v == 'bwd_chain_prep'
             else (BQ.kda_bwd_chain_pieces, {}) if v == 'bwd_chain_pieces'
             else (BT.kda_bwd_pieces_tc, {}) if v == 'bwd_pieces_tc'
             else (BA.kda_bwd_prep_tc, {}) if v == 'bwd_prep_tc'
             else (BLT.kda_bwd_local_tc, {}) if v == 'bwd_local_tc'
             else (BT.kda_bwd_pieces_tc, {'PREP': 1}) if v == 'bwd_pieces_tc_pm'
             else (BA.kda_bwd_prep_tc, {'PREP': 1}) if v == 'bwd_prep_tc_pm'
             else (BT.kda_bwd_pieces_tc, {'PREP': 2}) if v == 'bwd_pieces_tc_pmt'
             else (BA.kda_bwd_prep_tc, {'PREP': 2}) if v == 'bwd_prep_tc_pmt'
             else (DB.kda_decode_bulk, {'TT': int(v[7:]), 'N': 256, 'H': 64})
             if v.startswith('bulk_TT')
             else (D.kda_decode, {'TT': int(v[2:])})
             if v.startswith('TT') else (S.kda_fwd_pair, S.PAIR_VARIANTS[v[5:]])
             if v.startswith('pair_') else (S.kda_fwd_ahead, S.VARIANTS[v[6:]])
             if v.startswith('ahead_') else (F.kda_fwd_slim, F.SLIM_VARIANTS[v[5:]])
             if v.startswith('slim_') else (F.kda_fwd, F.VARIANTS[v]))
ck = k.compile('sm_90a', **consts)
r = ck.resources
print('%-20s regs %3d  spills %d/%d  stack %d  dynamic smem %6d' % (k.name + ' ' + v,
      r.registers, r.spill_stores, r.spill_loads, r.stack_frame,
      ck.launch_metadata()['dynamic_smem']))
" "$v" >"$WORK/res_$v.txt" 2>&1) &
    COMPILES="$COMPILES $!"
done
# group fb: the plan's merged modules (ptxas, ~80 s each on one core) assembled meanwhile, the
# small cases' (which H96 shares) and H64's, into the cache its jobs read
# FB_PLAN=tc: the plan with pieces 2a and 2c on tensor cores (kda_fwd_bwd.PLANS; default tc43,
# the fastest measured: session 41 on an H100 at H64, tc43 0.986x tc39's time in one call (the
# pieces' NEXT prefetches split between dR and dke, the chains' heads as two CTAs where they
# fit one wave; at H96 its launches are tc39's but the pieces, 0.973-0.985x there); session 39
# on an H100 at H96, tc39 0.978x tc38's time in one call (piece
# 3's scan operands staged in shared memory; tc38 0.995x tc37's: the pieces' next-wave
# prefetches before dR); session 38, tc37 0.970x tc32's time in one call (the
# next wave's first-phase lines prefetched in the three backward launches, piece 3 loading the
# prep's P, g_raw's rows prefetched for its scan); session 37, tc32 0.909x tc24's (the
# pieces' tiles by 16-byte loads; L2 prefetches one phase ahead in piece 3, the pieces and the
# prep); session 36 on the H200, tc24 0.979x tc20's (V copied by cp.async during N and B^T);
# session 34: tc19 0.959x tc16's, tc16 0.913x tc14's); several
# plans ("tc14 tc19"): each shape times each plan in turn, one job each, after one FLA prewarm
# (each job has FLA's forward + backward beside it: the plans' ratio is across jobs)
read -r -a FB_PLANS <<<"${FB_PLAN:-tc43}"
FB=(python3 benchmarks/kda_fwd_bwd_bench.py --cache "$WORK/fbcache")   # the plans' client
FBPRE_SMALL=; FBPRE_H64=
case " $WANT " in *" fb "*)
    for p in "${FB_PLANS[@]}"; do
        "${FB[@]}" --plan "$p" --build-only --cases t20_h1_deep \
            >"$LOGS/fb-prebuild-small-$p.log" 2>&1 &
        FBPRE_SMALL="$FBPRE_SMALL $!"
        "${FB[@]}" --plan "$p" --build-only --cases t8192_h64 \
            >"$LOGS/fb-prebuild-h64-$p.log" 2>&1 &
        FBPRE_H64="$FBPRE_H64 $!"
    done;;
esac
# the compiles only: a bare `wait` also waited for step 0's prewarm (536 s on the H200,
# 2026-12-02: the whole call went by before the smoke started)
wait $COMPILES
cat "$WORK"/res_*.txt | tee "$WORK/resources.txt"
fi
[ "$WANT" = check ] && exit 0
# the backward's own call (group bwd or local alone, or with smoke) smokes and warms up the
# backward kernels only (`-k kda_bwd` also selects kda_bwd_local's and kda_bwd_reverse's small
# cases)
case " $WANT " in
    *" main "*|*" variants "*|*" decode "*) SMOKE_K="(kda_fwd or kda_decode or kda_bwd)";;
    " wsc "|" smoke wsc "|" wsc smoke ") SMOKE_K="kda_fwd and (v128wsb or v64ws8b or v128wsl \
or v64ws8l or v128wsm or v64ws8m)";;
    " wsd "|" smoke wsd "|" wsd smoke ") SMOKE_K="(kda_fwd_ahead or (kda_fwd_slim and v64ws8l)) \
and not kda_fwd_pair";;
    " wse "|" smoke wse "|" wse smoke ") SMOKE_K="kda_fwd_pair or (kda_fwd_slim and v64ws8l) \
or (kda_fwd_ahead and v64ws8q)";;
    *" ws "*|*" wsb "*|*" wsbpacks "*|*" wsc "*) SMOKE_K="kda_fwd";;
    # kda_fwd_slim names kda_fwd.py's slim kernel and the file of kda_fwd_ahead: both
    # (the file's name also selects kda_fwd_pair, group wse's: only when wse is asked for)
    *" wse "*) SMOKE_K="kda_fwd_slim";;
    *" wsf "*) SMOKE_K="kda_fwd_pair and $WSF_K";;
    *" wsd "*|*" slimpacks "*) SMOKE_K="kda_fwd_slim and not kda_fwd_pair";;
    *" s0 "*) SMOKE_K="(kda_fwd_s0 or kda_bwd)";;
    " chain ") SMOKE_K="kda_bwd_chain";;
    " decodecols3 "|" decodecols4 "|" decodecols5 "|" decodecols6 ") SMOKE_K="kda_decode_cols";;
    *" decodebulk "*|*" decodecols "*|*" decodecols2 "*) SMOKE_K="kda_decode";;
    " tc ") SMOKE_K="(kda_bwd_chain_p or kda_bwd_pieces_tc or kda_bwd_prep_tc or kda_bwd_local)";;
    " tc2 ") SMOKE_K="(kda_bwd_pieces_tc or kda_bwd_prep_tc) and not tf_";;
    " prep2 ") SMOKE_K="kda_bwd_prep2 or (kda_bwd_prep_tc and pmt_)";;
    " tf32 ") SMOKE_K="kda_bwd_pieces_tc and (pmt_ or tf_)";;
    " calib ") SMOKE_K="kda_bwd_prep_only or (kda_bwd_prep_tc and pmt_)${CALIB_EXTRA:+ or $CALIB_EXTRA}";;
    " prep3 ") SMOKE_K="kda_bwd_prep3 or kda_bwd_prep2";;
    # the plan's own small cases (group fb) run every kernel of it on the GPU: one staged
    # chain case here, for the flow's smoke step
    " fb ") SMOKE_K="kda_bwd_chain and s8_t150_h1_deep";;
    *) SMOKE_K="kda_bwd";;
esac

if [ -z "$LIST" ]; then
if [ -z "${KDA_BENCH_DRY:-}" ] && { ! nvidia-smi -L >"$WORK/gpus.txt" 2>&1 \
        || ! grep -q "^GPU" "$WORK/gpus.txt"; }; then
    echo "=== 2. no NVIDIA GPU here ($(head -c 200 "$WORK/gpus.txt")): nothing timed."
    for p in $FBPRE_SMALL $FBPRE_H64; do kill "$p" 2>/dev/null; done
    exit 0
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu \
    --format=csv 2>&1 | tee "$WORK/nvidia-smi.csv"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
python3 -c "import fla.ops.kda, fla; print('fla', getattr(fla, '__version__', '?'))" \
    || echo "FLA does not import: its baselines are not offered (carry .whl/fla_core-0.6.0 and \
flash_linear_attention-0.6.0; fla-core needs einops)"

# --- one KCoral daemon for every run ----------------------------------------------------------
python3 -m kcoral.cli serve --host 127.0.0.1 --port 0 --port-file "$WORK/port" \
    --state-dir "$WORK/kcoral" >"$LOGS/kcoral.log" 2>&1 &
DAEMON=$!
trap 'kill $DAEMON 2>/dev/null; wait $DAEMON 2>/dev/null' EXIT
for _ in $(seq 60); do [ -s "$WORK/port" ] && break; sleep 1; done
[ -s "$WORK/port" ] || { echo "kcoral serve did not start"; tail -20 "$LOGS/kcoral.log"; exit 1; }
ADDR="127.0.0.1:$(cat "$WORK/port")"
python3 -m kcoral.cli boards --daemon "$ADDR" 2>&1 | tee "$WORK/boards.txt" || true
else
    trap 'rm -rf "$WORK"' EXIT
fi

list_items() {  # KDA_BENCH_LIST: the items `-k EXPR` selects in the zoo
    (cd zoo && python3 -m tirxh bench --collect-only -q -k "$1" 2>&1) | grep '::'
}

results() {  # summary.md / summary.json and every log so far (kda_bench.tar.gz)
    # A device call returns at most 8 files from \$OUT: call.log, these three, and the three
    # caches make 7 (session 13 lost triton-cache.tgz as a ninth); everything else goes in
    # the tarball
    [ -z "$LIST" ] || return 0
    python3 benchmarks/kda_summary.py "$WORK"/*.jsonl --json "$OUT/summary.json" \
        >"$OUT/summary.md" 2>>"$LOGS/summary.log"
    # every timed item by clock regime with each ratio's 95% interval (KCoral's speedup_ci95),
    # appended to summary.md (no new file: a call returns few), so a comparison of two variants
    # reads off the call without recomputing it (session 20 did, for decode `_pwtail`)
    python3 benchmarks/regime_summary.py "$WORK"/*.jsonl >"$WORK/regimes.md" \
        2>>"$LOGS/summary.log" && cat "$WORK/regimes.md" >>"$OUT/summary.md"
    tar -czf "$OUT/kda_bench.tar.gz" -C "$WORK" --exclude ./kcoral . 2>/dev/null
    (cd "$TRITON_CACHE_DIR" && find . -name '*.autotune.json' -print0 \
        | tar -czf "$OUT/triton-autotune.tgz" --null -T -) 2>/dev/null
    save_compile_cache "$OUT"
}

smoke() {  # every variant's small cases on the GPU, correctness only; stop on a failure or hang
    # (a kernel without a Suite, compile_only, has no case to run: kda_bwd_prep3s and
    # kda_bwd_local_ld, plans tc4 and tc5's; kda_bwd_prep3g, kda_bwd_pieces_ld and
    # kda_bwd_local_lg, plans tc6 to tc9's, have timing suites only, for profiles; all are
    # checked in tests/zoo and through the plan's own smoke)
    local sel="($SMOKE_K) and not main and not ring and not alt and not timing and not compile_only"
    if [ -n "$LIST" ]; then
        echo "== smoke"
        list_items "$sel"
        return
    fi
    echo "=== 3. smoke (small cases, no timing) at +$(( $(date +%s) - START ))s"
    mkdir -p "$WORK/smoke"
    timeout --kill-after=5 "${SMOKE_LIMIT:-90}" python3 benchmarks/bench_with.py --kcoral "$ADDR" \
        --no-timing --exec-s "${SMOKE_EXEC_S:-15}" --target sm_90a \
        -k "$sel" \
        --report-log "$WORK/smoke/smoke.jsonl" >"$LOGS/smoke.log" 2>&1
    rc=$?
    tail -n 1 "$LOGS/smoke.log"
    # tirxh bench --no-timing exits 0 once any item is verified: the verdict is KCoral's
    # correctness of every item (kda_summary.py --smoke), and no timeout of the whole pass
    python3 benchmarks/kda_summary.py --smoke "$WORK/smoke/smoke.jsonl" | tee "$WORK/smoke.txt"
    verdict=${PIPESTATUS[0]}
    if [ "$rc" = 124 ] || [ "$rc" = 137 ] || [ "$verdict" != 0 ]; then
        echo "=== smoke FAILED (verdict $verdict; tirxh rc $rc, 124/137: the pass ran past \
${SMOKE_LIMIT:-90} s, a kernel may hang): nothing timed. Logs: $OUT/kda_bench.tar.gz"
        tar -czf "$OUT/kda_bench.tar.gz" -C "$WORK" --exclude ./kcoral . 2>/dev/null
        exit 1
    fi
    echo "=== smoke passed at +$(( $(date +%s) - START ))s"
}

bench() {  # bench NAME EXPR: one tirxh bench process, unless the budget is spent
    if [ -n "$LIST" ]; then
        echo "== $1"
        [ -z "${BENCH_ARGS:-}" ] || echo "   tirxh bench options: $BENCH_ARGS"
        list_items "$2"
        return
    fi
    left=$(( BUDGET - ($(date +%s) - START) ))
    if [ "$left" -le 20 ]; then
        echo "=== budget spent: $1 not run" | tee -a "$WORK/skipped"
        return
    fi
    echo "=== $1 (+$(( $(date +%s) - START ))s)"
    timeout --kill-after=5 "$left" python3 benchmarks/bench_with.py --kcoral "$ADDR" \
        --exec-s "${EXEC_S:-60}" --seeds "${SEEDS:-1}" --target sm_90a -k "$2" \
        ${SHARE_INPUTS:+--share-inputs} --report-log "$WORK/$1.jsonl" ${BENCH_ARGS:-} \
        >>"$LOGS/$1.log" 2>&1
    grep -E "^kda_(fwd|fwd_slim|fwd_ahead|decode|decode_bulk|decode_cols|bwd|bwd_local|bwd_reverse|bwd_chain|\
bwd_chain_prep|bwd_chain_pieces|bwd_pieces_tc|bwd_prep_tc|bwd_local_tc|bwd_prep2|bwd_prep_only|bwd_prep3)\[" "$LOGS/$1.log" \
        | sed 's/^/    /'
    results
}

wait_prewarm() {  # step 0 ends (at most PREWARM_S + 60 s from now) before any timed job
    [ -n "$PREWARM" ] || return 0
    for _ in $(seq $(( ${PREWARM_S:-240} + 60 ))); do kill -0 "$PREWARM" 2>/dev/null || break
        sleep 1; done
    kill "$PREWARM" 2>/dev/null
    echo "=== prewarm (step 0) ended at +$(( $(date +%s) - START ))s:"
    sed 's/^/    /' "$LOGS/prewarm.log" | tail -n 30
    PREWARM=
}

warmup() {  # FLA's first calls compile (and autotune) its Triton kernels: do it in a tiny job
    # (the small cases carry the same baselines; fixed, varlen and decode compile different
    # variants). Triton's on-disk cache keeps what a job compiled even if the job runs out of time.
    # Its own execution budget: on the H200 (2026-12-01 22:26) FLA's first compile and autotune
    # ran past the 60 s of a timed job, the worker was killed and the call's budget was gone.
    # With step 0's prewarm, wait for it (at most PREWARM_S + 60 s) and warm the worker only
    # (FLA's import and cached kernels, in the decode's tiny job).
    if [ -n "$PREWARM" ]; then
        wait_prewarm
        EXEC_S="${WARMUP_EXEC_S:-240}" bench warmup "kda_decode and n2_h2_t1"
        return
    fi
    EXEC_S="${WARMUP_EXEC_S:-240}" bench warmup "(kda_fwd and (t40_h1_v128_deep or \
pack_17_8_30_v128)) or (kda_decode and n2_h2_t1)"
}

smoke
case " $WANT " in *" smoke "*) echo "total $(( $(date +%s) - START ))s"; exit 0;; esac
case " $WANT " in *" main "*|*" variants "*|*" ws "*|*" wsb "*|*" wsbpacks "*|*" wsc "*\
    |*" wsd "*|*" wse "*|*" wsf "*|*" slimpacks "*|*" decode "*) warmup;; esac
# FLA's backward kernels compile and autotune in a tiny job of their own
case " $WANT " in *" bwd "*) wait_prewarm; bench warmup-bwd "kda_bwd and (t40_h1_deep or pack_17_1_64_30)";;
esac
for group in $WANT; do
    case "$group" in
        main)
            n=0
            for s in $SHAPES; do  # the two headline shapes, then decode, then the rest
                bench "main-$s" "kda_fwd and not kda_fwd_s0 and ${s}_ and main"
                n=$((n + 1))
                [ "$n" = 2 ] && bench decode "kda_decode and main"
            done
            [ "$n" -lt 2 ] && bench decode "kda_decode and main";;
        ws)
            # (substrings: v128ws also names v128wsb; the batched variants are group wsb's)
            nob="not v128s2b and not v128wsb and not v64wsb and not v64ws8b"
            bench ws-t8192_h96 "kda_fwd and not kda_fwd_s0 and t8192_h96_ and (v128s2 or v128ws \
or v64ws8) and $nob"
            bench ws-t8192_h64 "kda_fwd and not kda_fwd_s0 and t8192_h64_ and (v64s2 or v64ws \
or v128ws) and not v64s2w8 and $nob";;
        wsb)
            fwd="kda_fwd and not kda_fwd_s0"
            bench wsb-t8192_h96 "$fwd and t8192_h96_ and (v128s2 or v128wsb)"
            bench wsb-t8192_h64 "$fwd and t8192_h64_ and (v64ws8 or v64wsb)";;
        wsc)
            # kda_fwd_slim's variants beside their kda_fwd controls, one job per shape
            fwd="kda_fwd and not kda_fwd_s0"
            for s in ${WSC_SHAPES:-t8192_h96 t8192_h64}; do
                case "$s" in
                    t8192_h96) bench wsc-$s "$fwd and ${s}_ and (v128wsb or v128wsl or v128wsm)";;
                    t8192_h64) bench wsc-$s "$fwd and ${s}_ and (v64ws8b or v64ws8l or v64ws8m)";;
                esac
            done;;
        wsd)
            # kda_fwd_ahead's variants (kda_fwd_slim.py) after their control v64ws8l (kda_fwd.py's
            # items are collected first), one job: the four share the inputs and reference
            bench wsd-t8192_h64 "kda_fwd and t8192_h64_ and (v64ws8l or v64ws8n or v64ws8p \
or v64ws8q)";;
        wse)
            # kda_fwd_pair's variants (kda_fwd_slim.py) after the controls v64ws8l and v64ws8q,
            # one job: the four share the inputs and reference
            bench wse-t8192_h64 "kda_fwd and t8192_h64_ and (v64ws8l or v64ws8q or v64ws8c \
or v64ws8d)";;
        wsf)
            # kda_fwd_pair's WSF_VARIANTS (default v64ws8c, e, f, g), one job a shape
            for s in ${WSF_SHAPES:-t8192 pack6 pack8x1024}; do
                bench "wsf-${s}_h64" "kda_fwd_pair and ${s}_h64_ and $WSF_K"
            done;;
        slimpacks)
            # the slim forwards on the packs: v128wsl at H96, SLIM_H64 at H64 (one job a shape)
            h64=$(printf ' or %s' $SLIM_H64)
            for s in ${PACKS:-pack6 pack8x1024}; do
                [ -n "${PACKS_H64_ONLY:-}" ] || bench "slim-${s}_h96" "kda_fwd and ${s}_h96_v128wsl"
                bench "slim-${s}_h64" "kda_fwd and ${s}_h64_ and (${h64# or })"
            done;;
        wsbpacks)
            fwd="kda_fwd and not kda_fwd_s0"
            for s in pack6 pack8x1024; do
                bench "wsb-${s}_h96" "$fwd and ${s}_h96_v128wsb"
                bench "wsb-${s}_h64" "$fwd and ${s}_h64_v64ws8b"
            done;;
        variants)
            for s in $SHAPES; do bench "variants-$s" "kda_fwd and not kda_fwd_s0 and ${s}_"; done;;
        s0)
            # piece 1 of the chunked backward: it stores 64 KB per chunk and head (0.8 GB at
            # T8192 H96), which every correctness check and guard downloads and compares: its
            # job ran past 60 s on the H200 (2026-12-01), hence its own execution budget
            wait_prewarm
            for s in ${S0_SHAPES:-t8192_h96 t8192_h64}; do
                EXEC_S="${S0_EXEC_S:-180}" bench "s0-$s" "kda_fwd_s0 and ${s}_"
            done;;
        decode)
            # the control's large cases (main) and kda_decode_bulk's (ring) in one job, on one
            # set of inputs per shape (the same inputs(): its float64 reference is 30-70 s of
            # host time per shape, made once for both kernels)
            EXEC_S="${DECODE_EXEC_S:-150}" SHARE_INPUTS=1 bench decode \
                "(kda_decode and main) or (kda_decode_bulk and ring)";;
        decodebulk)
            EXEC_S="${DECODE_EXEC_S:-150}" bench decodebulk "kda_decode_bulk and ring";;
        decodecols)
            # kda_decode_bulk's ring cases, then kda_decode_cols's (collected in that order)
            EXEC_S="${DECODE_EXEC_S:-150}" SHARE_INPUTS=1 bench decodecols \
                "(kda_decode_bulk or kda_decode_cols) and ring and not _prep and not _tail";;
        decodecols2)
            # kda_decode_cols's PREP=0 ring cases (the control), then its PREP=1 twins, then
            # PREP=1 TAIL=1's
            EXEC_S="${DECODE_EXEC_S:-150}" SHARE_INPUTS=1 bench decodecols2 \
                "kda_decode_cols and ring";;
        decodecols3)
            # kda_decode_cols's PREP=0 n64_h64_t4 (and its c128 replicate) and n1024_h32_t2,
            # then their PREP=2 twins ("pwarp", "alt": not "ring", not "prep", out of the smokes)
            EXEC_S="${DECODE_EXEC_S:-150}" SHARE_INPUTS=1 bench decodecols3 \
                "kda_decode_cols and (n64_h64_t4 or n1024_h32_t2) and not prep and not tail \
and not start and not dyn";;
        decodecols4)
            # PREP=2's TAIL=1 twins (session 19: the last heads' stores under the last head's
            # compute) after the control, its c128 replicate and PREP=2 alone, at n64_h64_t4
            # (the T = 4 goal) and n1024_h32_t2, one job on shared inputs
            EXEC_S="${DECODE_EXEC_S:-150}" SHARE_INPUTS=1 bench decodecols4 \
                "kda_decode_cols and (n64_h64_t4 or n1024_h32_t2) and not prep and (not tail or \
pwtail) and not start and not dyn";;
        decodecols5)
            # DYN=1's twins (session 21: each CTA takes its heads from a counter; the SMs' own
            # rates differ by up to 35%), then START=1's (`_st`: the first head's load before the
            # other stages'), after the control, at n64_h64_t4 (the T = 4 goal) and
            # n1024_h32_t2, one job on shared inputs
            EXEC_S="${DECODE_EXEC_S:-150}" SHARE_INPUTS=1 bench decodecols5 \
                "kda_decode_cols and (n64_h64_t4 or n1024_h32_t2) and not c128 and (ring or dyn \
or start) and not prep and not tail and not pwst and not take";;
        decodecols6)
            # TAKE=1's twin (session 27: each refill's ticket asked a head early, `_dyn_ta`)
            # after the control and DYN=1's `_dyn`, at n64_h64_t4 (the T = 4 goal; T = 2 met
            # with `_dyn`, and its items did not fit session 27's first run), one job on shared
            # inputs
            EXEC_S="${DECODE_EXEC_S:-150}" SHARE_INPUTS=1 bench decodecols6 \
                "kda_decode_cols and n64_h64_t4 and not c128 and (ring or dyn) and not prep \
and not tail";;
        bwd)
            # the float64 gradients (kda_ref.backward, head groups on a thread pool) with
            # single-threaded BLAS: T2048 H16 took 1.6 s so and 15-54 s with OpenBLAS's own
            # threads under the pool's (2-core CPU, 2026-12-01)
            for s in $BWD_SHAPES; do
                OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 bench "bwd-$s" "kda_bwd and $s and main"
            done;;
        local)
            # synthetic pieces (no float64 reference on the host): seconds of input per shape
            for s in ${LOCAL_SHAPES:-t8192_h96 t8192_h64 pack6_h96}; do
                bench "local-$s" "kda_bwd_local and not kda_bwd_local_lg and $s and timing"
            done;;
        reverse)
            # a synthetic S0 (no float64 forward on the host): seconds of input per shape; its
            # own execution budget as s0's: 0.8 GB of S0 in and 2 GB of dv and pieces out at
            # T8192 H96 for the guards to move, and ~27 ms a launch predicted
            for s in ${REVERSE_SHAPES:-t8192_h96 t8192_h64 pack6_h96}; do
                EXEC_S="${REVERSE_EXEC_S:-180}" bench "reverse-$s" \
                    "kda_bwd_reverse and $s and timing"
            done;;
        chain)
            # synthetic operands (no float64 prep on the host): seconds of input per shape;
            # 1.6 GB in (N's fragments, B^T) and 0.8 GB of dS1 out at T8192 H96 for the guards
            # to move, as reverse's
            first=1
            for s in ${CHAIN_SHAPES:-t8192_h96 t8192_h64 pack6_h96 pack6_h64}; do
                EXEC_S="${CHAIN_EXEC_S:-180}" bench "chain-$s" \
                    "kda_bwd_chain and not kda_bwd_chain_p and ${s}_ and timing"
                if [ "$first" = 1 ]; then
                    first=0
                    for p in ${PREP_SHAPES:-t8192_h96}; do
                        EXEC_S="${CHAIN_EXEC_S:-180}" bench "chainprep-$p" \
                            "kda_bwd_chain_prep and $p and timing"
                        EXEC_S="${CHAIN_EXEC_S:-180}" bench "chainpieces-$p" \
                            "kda_bwd_chain_pieces and $p and timing"
                    done
                fi
            done;;
        tc)
            # pieces 2a, 2c and 3 on tensor cores beside the f32 kernels, one bench process
            # per shape; inputs as chain's (2c: 0.8 GB of S0 and dS1 in, ~1.9 GB of dv and
            # pieces out at H96; 2a: 1.6 GB of N and B^T out) and local's (3: 1.6 GB of
            # synthetic pieces in; `kda_bwd_local` selects kda_bwd_local_tc too)
            for s in ${TC_SHAPES:-t8192_h96}; do
                EXEC_S="${CHAIN_EXEC_S:-180}" bench "tc-$s" "(kda_bwd_chain_p or \
kda_bwd_pieces_tc or kda_bwd_prep_tc or kda_bwd_local) and $s and timing and not pm_ and \
not pmt_"
            done;;
        tc2)
            # the prep on tensor cores (PREP=1: P, M, cases pm_*; PREP=2: and T, pmt_*) beside
            # PREP=0: 2a and 2c, the three forms in one bench process per shape (tc's inputs)
            for s in ${TC2_SHAPES:-t8192_h96}; do
                EXEC_S="${CHAIN_EXEC_S:-180}" bench "tc2-$s" "(kda_bwd_pieces_tc or \
kda_bwd_prep_tc) and $s and timing and not pmt_fwd_ and not tfpmt_"
            done;;
        prep2)
            # kda_bwd_prep2 (both walks, one prep) beside the two launches it replaces
            # (kda_bwd_prep_tc PREP=2, each walk: pmt_, pmt_fwd_; collected in that order), one
            # bench process per shape; inputs as
            # tc's (2a writes 1.6 GB of N and B^T a walk at H96; prep2 both: 3.2 GB)
            for s in ${PREP2_SHAPES:-t8192_h96 t8192_h64}; do
                EXEC_S="${CHAIN_EXEC_S:-180}" bench "prep2-$s" "((kda_bwd_prep_tc and pmt_) or \
kda_bwd_prep2) and $s and timing"
            done;;
        tf32)
            # 2c's products single-pass tf32 (tfpmt_) after the split (pmt_), both PREP=2,
            # one bench process per shape (tc's inputs: timing only, scale irrelevant)
            for s in ${TF32_SHAPES:-t8192_h96 t8192_h64}; do
                EXEC_S="${CHAIN_EXEC_S:-180}" bench "tf32-$s" "kda_bwd_pieces_tc and pmt_ and \
$s and timing"
            done;;
        prep3)
            # kda_bwd_prep3 (prep2 with its walk operands split once into swizzled bf16
            # planes, fragments by ldmatrix) beside kda_bwd_prep2 in one bench process per
            # shape (the ratio prep3 / prep2 is the prediction's figure)
            for s in ${PREP3_SHAPES:-t8192_h96 t8192_h64}; do
                EXEC_S="${CHAIN_EXEC_S:-180}" bench "prep3-$s" "(kda_bwd_prep2 or \
kda_bwd_prep3) and not kda_bwd_prep3g and $s and timing"
            done;;
        calib)
            # the prep alone (kda_bwd_prep_only) beside the two launches it is the first part
            # of (kda_bwd_prep_tc PREP=2: pmt_, pmt_fwd_), one bench process per shape;
            # CALIB_EXTRA (a -k expression, e.g. kda_bwd_prep_sg) joins the same job
            for s in ${CALIB_SHAPES:-t8192_h96 t8192_h64}; do
                EXEC_S="${CHAIN_EXEC_S:-180}" bench "calib-$s" "((kda_bwd_prep_tc and pmt_) \
or kda_bwd_prep_only${CALIB_EXTRA:+ or $CALIB_EXTRA}) and $s and timing"
            done;;
        fb)
            if [ -n "$LIST" ]; then
                echo "== fb: benchmarks/kda_fwd_bwd_bench.py's own cases (not tirxh items)"
                continue
            fi
            # KDA forward + backward as ONE job per case (zoo/kernels/kda_fwd_bwd.py: seven
            # launches over shared scratch, one merged module; benchmarks/kda_fwd_bwd_bench.py)
            # against fla.chunk_kda.fwd_bwd in the same job. The merged module is assembled by
            # ptxas (~80 s on one core, cached by its PTX: step 1 starts both in the
            # background; the small cases and H96 share one). The plan's small cases on the GPU
            # first (float64 reference, every output under the public rules); nothing timed if
            # one fails. Large cases: synthetic inputs, no reference (~37 / ~25 ms a launch
            # predicted: docs/PERFORMANCE.md), their own execution budget (guards move ~10 GB
            # of scratch and outputs at H96).
            # shellcheck disable=SC2086  # the pids, split on purpose
            [ -n "$FBPRE_SMALL" ] && wait $FBPRE_SMALL
            smoke_rc=0
            for p in "${FB_PLANS[@]}"; do
                echo "=== fb: plan $p's small cases (+$(( $(date +%s) - START ))s)"
                timeout --kill-after=5 "${FB_SMOKE_LIMIT:-200}" "${FB[@]}" --plan "$p" \
                    --kcoral "$ADDR" --no-timing --exec-s "${FB_SMOKE_EXEC_S:-30}" \
                    --report "$WORK/fb-smoke-$p.jsonl" >"$LOGS/fb-smoke-$p.log" 2>&1
                rc=$?
                sed 's/^/    /' "$LOGS/fb-smoke-$p.log" | tail -n 8
                [ "$rc" = 0 ] || smoke_rc=$rc
            done
            if [ "$smoke_rc" != 0 ]; then
                echo "=== fb smoke FAILED (rc $smoke_rc): nothing timed"
                # shellcheck disable=SC2086
                kill $FBPRE_H64 2>/dev/null
                results
                continue
            fi
            wait_prewarm
            for s in ${FB_SHAPES:-t8192_h96 t8192_h64}; do
                # shellcheck disable=SC2086
                [ "$s" = t8192_h64 ] && [ -n "$FBPRE_H64" ] && wait $FBPRE_H64
                for p in "${FB_PLANS[@]}"; do
                    left=$(( BUDGET - ($(date +%s) - START) ))
                    if [ "$left" -le 45 ]; then
                        echo "=== budget spent: fb-$s-$p not run" | tee -a "$WORK/skipped"
                        continue
                    fi
                    # the daemon's execution budget ends before this client is killed, so a
                    # job that overruns comes back as its typed timeout, not as silence
                    # (session 20)
                    exec_s=$(( left - 25 < ${FB_EXEC_S:-180} ? left - 25 : ${FB_EXEC_S:-180} ))
                    echo "=== fb-$s plan $p (+$(( $(date +%s) - START ))s, execution budget" \
                        "${exec_s} s)"
                    timeout --kill-after=5 "$left" "${FB[@]}" --plan "$p" --kcoral "$ADDR" \
                        --cases "$s" --exec-s "$exec_s" --report "$WORK/fb-$s-$p.jsonl" \
                        >>"$LOGS/fb-$s-$p.log" 2>&1
                    sed 's/^/    /' "$LOGS/fb-$s-$p.log" | tail -n 3
                done
            done
            cat "$WORK"/fb-*.jsonl >"$OUT/fb.jsonl" 2>/dev/null
            results;;
        *) echo "kda_bench: unknown group $group"; exit 2;;
    esac
done
[ -z "$LIST" ] || exit 0
cat "$OUT/summary.md" 2>/dev/null
echo "total $(( $(date +%s) - START ))s; results in $OUT"
