#!/usr/bin/env bash
# The zoo's Hopper GEMMs (zoo/kernels/gemm_sm90.py, issue 15) against cuBLAS (torch.matmul),
# pyptx's Hopper GEMM and torch._scaled_mm, on the H200, in one command:
#
#   (device) bash benchmarks/gemm_bench.sh [GROUP ...]        carry: .whl (the pyptx wheel)
#
# GROUPS (default: main) select cases by their role tags (`plan` in gemm_sm90.py):
#   main   bf16 and fp8, the predicted fastest variant of every shape (the headline table)
#   bf16 / fp8   the same for one input type
#   alt    bf16 and fp8, the runner-up variant of every shape
#   sweep  the remaining techniques (no cluster, 3-stage whole-tile epilogue, other tile widths,
#          split-K on/off, 128 CTAs, raster along N) and the N-major B (docs/TUNING.md)
#   all    every benchmark case
#   small  bf16 at M = 128 and 512 only (the 8 shapes of issue 15's small-M goal): each shape's
#          main (128 x 14336 x 4096: and alt, 112 unsplit tiles) beside the small-M candidates
#          (role "small": red.global.add split-K, retuned split factors, 128 x 64 tiles,
#          stream-K; docs/TUNING.md "Small M"), in <= 300 s of
#          device time: a correctness smoke of every new specialization first (15 s per job,
#          the timed shards skipped unless it passes), then one seed and 30 s per timed job.
#          One device call:   bash benchmarks/gemm_bench.sh small        (carry: .whl; the M = 512
#          shapes are timed beside pyptx too)
#   smallfp8   the same for the fp8 kernels against torch._scaled_mm (a second call)
#   small2 bf16, small M round 2: the two shapes still below 0.95x cuBLAS after session 10
#          (128 x 4096 x 4096, 512 x 1024 x 7168), each shape's fastest variant then
#          (`_t64k2r`, the control) beside role "lowm" (gemm_sm90.LOWM: `_t64k2` slots,
#          `_t64k2p` REDUCE "peers", `_t64k2p9d` 9 stages + direct epilogue, and at
#          512 x 1024 x 7168 gemm_bf16_c2 `_t64k2p`; 8 jobs; docs/TUNING.md "Small M, round
#          2"), one client per shape, >= 60 paired rounds per job within 8 s of timing
#          (session 10's 2 s gave 10-25 samples, IQRs up to 0.9 us; the predicted steps are
#          0.3-1.5 us of ~20), a smoke of the 4 new specializations first, <= 200 s.
#          One device call:   bash benchmarks/gemm_bench.sh small2       (carry: .whl for pyptx)
#   small3 bf16, small M round 3: 128 x 4096 x 4096 (the one shape below 0.95x after session
#          11's small2), role "small3" (gemm_sm90.LOWM3: `_t64k2p` beside A in its own ring with
#          B's 12 or 18 stages deep, `_t64k2pb12` / `_t64k2pb18`, `_t64k2pd` 8 stages + the
#          direct epilogue, and gemm_bf16_k2 `_t64k2x7` / `_t64k2xb12`: a tile's two K-splits
#          in a 2-CTA cluster summed through distributed shared memory), and 512 x 4096 x 4096
#          as the regression check (c2 `_t128`, its main then; `_t64k2p`, `_t64k2pb18`); 9 jobs,
#          one client per shape, >= 100 paired rounds per job within 10 s, a smoke of the 5 new
#          specializations first, <= 200 s (docs/TUNING.md "Small M, round 3").
#          One device call:   bash benchmarks/gemm_bench.sh small3       (carry: .whl for pyptx)
#   wave   bf16 at every M >= 2048 shape (issue 15's >= 1.00x goal): each shape's main beside
#          the stream-K tail, alone and with the spread deferred epilogue (role "wave":
#          `_t256skt`, `_t256sktds`, `_t256sktds4`; `_t128skt`, `_t256skt` at
#          2048 x 1024 x 7168; 43 jobs;
#          docs/TUNING.md "Wave quantization at M >= 2048"), in <= 400 s of device time:
#          a correctness smoke of the new
#          specializations first (the timed shards skipped unless it passes), then one client per
#          shape, started weakest shape first (gemm_sm90.WAVE_SHAPES), one seed, 30 s per job.
#          One device call:   bash benchmarks/gemm_bench.sh wave        (carry: .whl for pyptx)
#   wave2  bf16, session 15's second wave round (docs/PERFORMANCE.md "Session 15, branch
#          gemmwave2"): the M >= 2048 shapes still short of 1.00x, and 6144^3 (gemm_sm90.
#          WAVE2_SHAPES, 8), each shape's main beside role "wave2": the deferred epilogue
#          without stream-K in 1, 2 or 4 rounds (`_t256d`, `_t256ds`, `_t256ds4`), the tail in
#          K-lockstep (STREAMK "lock": `_t256skl`, `_t256sklds4`) at 8192 x 4096 x K, 4096^3
#          and 6144^3, and at 2048 x 1024 x 7168 c2 `_t256k2r` (128 x 256 tiles, 2 K-splits
#          summed by red); 35 jobs, a smoke of 6 new specializations first (the timed shards
#          skipped unless it passes), one client per shape, one seed, 30 s per job, <= 400 s.
#          One device call:   bash benchmarks/gemm_bench.sh wave2       (carry: .whl for pyptx)
#   pdl    bf16, sessions 19-20: the mains at gemm_sm90.PDL's shapes beside their
#          programmatic-dependent-launch twins (role "pdl": `_t128pdl` at 512 x 4096 x K,
#          `_t256ds4pdl` at 2048 x 4096 x 4096, 8192 x 1024 x 7168, 2048 x 4096 x 14336;
#          griddepcontrol, the launch attribute; at 2048 x 1024 x 7168 the twin is the main
#          since session 20, so it is timed alone), one client per shape; run it with
#          BENCH_ARGS="--back-to-back 20 ..." (the regime PDL can change) and without.
#          One device call:   bash benchmarks/gemm_bench.sh pdl         (carry: .whl for pyptx)
#   tall   bf16, session 41: the 256 x 128 tile (`_t256x128`, cuBLAS's at 8192 x 1024 x 7168)
#          beside the mains at gemm_sm90.TALL's shapes (the two 1.94-wave shapes), in a cluster
#          and alone; one client per shape, a smoke of the new specializations first.
#          One device call:   bash benchmarks/gemm_bench.sh tall        (carry: .whl for pyptx)
# The shapes are dealt largest first over SHARDS (default 4) concurrent `tirxh bench` clients of
# one KCoral daemon (benchmarks/gpu_bench.sh): building a job on the host (inputs, the numpy
# reference, uploads) overlaps the GPU's timing of another, and a shape's variants stay in one
# client, where they share its cached inputs and reference. Each job checks correctness on the
# GPU (two seeds, before and after timing) and times the candidate interleaved with its baselines.
#
# Env: EXTRA_SHARDS ('|'-separated -k expressions, e.g. other zoo kernels to time in the same
# call), BUDGET seconds for the clients (default 480: one device call with the set-up), SHAPES
# (e.g. "m8192n8192k8192 m128n4096k4096" to restrict), OUT (default ./gpu_out: gpu_bench.tar.gz
# with every log and report, summary.md, summary.json), PREWARM_S (default 90: seconds for
# benchmarks/pyptx_prewarm.py before the daemon starts; PREWARM='' skips it). Exits 0 without
# a GPU, saying so.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_out}"
# GEMM_BENCH_LIST=1 (anywhere, no GPU, seconds): the smoke's and every shard's items as
# `tirxh bench --collect-only` selects them, one "== NAME" line before each, and nothing run
# (tests/benchmarks/test_queue.py reads a queued call this way)
LIST="${GEMM_BENCH_LIST:-}"
[ -n "$LIST" ] || mkdir -p "$OUT"
if [ -z "$LIST" ] && [ -z "${GPU_BENCH_DRY:-}" ] && ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gemm_bench: SKIPPED: no NVIDIA GPU here (nvidia-smi -L failed); on the CPU the same"
    echo "kernels are checked with: cd zoo && tirxh check -k gemm_sm90"
    exit 0
fi

role() {  # role GROUP -> a -k expression over the role tags
    case "$1" in
        main) echo "main";; bf16) echo "gemm_bf16 and main";; fp8) echo "gemm_fp8 and main";;
        alt) echo "alt";; sweep) echo "sweep or kn";; all) echo "gemm_sm90";;
        small) echo "gemm_bf16 and (main or small or (alt and m128n14336k4096_))";;
        smallfp8) echo "gemm_fp8 and (main or small or (alt and m128n14336k4096_))";;
        wave) echo "gemm_bf16 and (main or wave)";;
        wave2) echo "gemm_bf16 and (main or wave2)";;
        pdl) echo "gemm_bf16 and (main or pdl)";;
        tall) echo "gemm_bf16 and (main or tall)";;
        small2) echo "lowm";;       # gemm_bf16 and gemm_bf16_c2 (LOWM is bf16's only)
        small3) echo "small3";;     # the same for LOWM3
        *) echo "gemm_bench: unknown group $1 (main, bf16, fp8, alt, sweep, all, small," \
                "smallfp8, wave, wave2, small2, small3, pdl, tall)" >&2; return 1;;
    esac
}
roles=""
small=""
wave=""
wave2=""
small2=""
small3=""
pdl=""
tall=""
for g in ${*:-main}; do
    r=$(role "$g") || exit 2
    roles="${roles:+$roles or }($r)"
    case "$g" in
        small|smallfp8) small=1;; wave) wave=1;; wave2) wave2=1;; small2) small2=1;;
        small3) small3=1;; pdl) pdl=1;; tall) tall=1;;
    esac
done
for alone in wave wave2 small2 small3 pdl tall; do
    if [ -n "${!alone}" ] && [ "$*" != "$alone" ]; then
        echo "gemm_bench: the $alone group runs alone (its own shapes, smoke and limits)" >&2
        exit 2
    fi
done
if [ -n "$small" ]; then  # the small-M shapes only, a smoke of every new specialization first
    kern=$([ "$*" = smallfp8 ] && echo gemm_fp8 || echo gemm_bf16)
    MAXM=512
    # three shapes whose small-role cases cover every new specialization once (10 jobs)
    export SMOKE="${SMOKE-gemm_sm90 and $kern and small and (m128n1024k7168_ or m128n4096k4096_ \
or m512n4096k4096_)}"
    export SMOKE_GATE="${SMOKE_GATE-1}" SEEDS="${SEEDS-1}" EXEC_S="${EXEC_S-30}"
    export TOTAL_LIMIT="${TOTAL_LIMIT-290}"
fi
if [ -n "$wave" ]; then  # M >= 2048 only, weakest first: one client per shape
    export SMOKE="${SMOKE-gemm_sm90 and gemm_bf16 and wave and (m2048n4096k4096_ or \
m2048n1024k7168_)}"
    export SMOKE_GATE="${SMOKE_GATE-1}" SEEDS="${SEEDS-1}" EXEC_S="${EXEC_S-30}"
    export TOTAL_LIMIT="${TOTAL_LIMIT-400}" SHARE_INPUTS="${SHARE_INPUTS-1}"
    SHAPES="${SHAPES:-$(cd zoo/kernels && PYTHONPATH="$PWD/../.." python3 -c "import gemm_sm90 \
as g; print(' '.join(f'm{M}n{N}k{K}' for M, N, K in g.WAVE_SHAPES))")}"
    NSHARDS="${NSHARDS:-$(echo "$SHAPES" | wc -w)}"
fi
if [ -n "$wave2" ]; then  # the shapes still short after session 15's d7: one client per shape
    export SMOKE="${SMOKE-gemm_sm90 and gemm_bf16 and wave2 and (m2048n4096k4096_ or \
m2048n1024k7168_ or (m8192n4096k4096_ and skl))}"
    export SMOKE_GATE="${SMOKE_GATE-1}" SEEDS="${SEEDS-1}" EXEC_S="${EXEC_S-30}"
    export TOTAL_LIMIT="${TOTAL_LIMIT-400}" SHARE_INPUTS="${SHARE_INPUTS-1}"
    SHAPES="${SHAPES:-$(cd zoo/kernels && PYTHONPATH="$PWD/../.." python3 -c "import gemm_sm90 \
as g; print(' '.join(f'm{M}n{N}k{K}' for M, N, K in g.WAVE2_SHAPES))")}"
    NSHARDS="${NSHARDS:-$(echo "$SHAPES" | wc -w)}"
fi
if [ -n "$pdl" ]; then  # the one-wave mains beside their PDL twins: one client per shape
    export SMOKE="${SMOKE-gemm_sm90 and gemm_bf16 and pdl}"
    export SMOKE_GATE="${SMOKE_GATE-1}" SHARE_INPUTS="${SHARE_INPUTS-1}"
    SHAPES="${SHAPES:-$(cd zoo/kernels && PYTHONPATH="$PWD/../.." python3 -c "import gemm_sm90 \
as g; print(' '.join(f'm{M}n{N}k{K}' for M, N, K in g.PDL))")}"
    NSHARDS="${NSHARDS:-$(echo "$SHAPES" | wc -w)}"
fi
if [ -n "$tall" ]; then  # the 256 x 128 tile beside the mains: one client per shape
    export SMOKE="${SMOKE-gemm_sm90 and gemm_bf16 and tall}"
    export SMOKE_GATE="${SMOKE_GATE-1}" SHARE_INPUTS="${SHARE_INPUTS-1}"
    SHAPES="${SHAPES:-$(cd zoo/kernels && PYTHONPATH="$PWD/../.." python3 -c "import gemm_sm90 \
as g; print(' '.join(f'm{M}n{N}k{K}' for M, N, K in g.TALL))")}"
    NSHARDS="${NSHARDS:-$(echo "$SHAPES" | wc -w)}"
fi
lowm_group() {  # lowm_group SMOKE_K PLAN ROUNDS SECONDS: the shapes of gemm_sm90.PLAN, one
    # client each, the new specializations (SMOKE_K) first, >= ROUNDS paired rounds per job
    # within SECONDS of timing, <= 200 s
    export SMOKE="${SMOKE-$1}"
    export SMOKE_GATE="${SMOKE_GATE-1}" SEEDS="${SEEDS-1}" EXEC_S="${EXEC_S-30}"
    export TOTAL_LIMIT="${TOTAL_LIMIT-200}" \
        BENCH_ARGS="${BENCH_ARGS---min-rounds $3 --timing-budget $4}"
    SHAPES="${SHAPES:-$(cd zoo/kernels && PYTHONPATH="$PWD/../.." python3 -c "import gemm_sm90 \
as g; print(' '.join(f'm{M}n{N}k{K}' for M, N, K in g.$2))")}"
    NSHARDS="${NSHARDS:-$(echo "$SHAPES" | wc -w)}"
}
if [ -n "$small2" ]; then
    lowm_group "gemm_sm90 and lowm and not t64k2r and (m128n4096k4096_ or \
(gemm_bf16_c2 and m512n1024k7168_))" LOWM 60 8
fi
if [ -n "$small3" ]; then
    lowm_group "gemm_sm90 and small3 and m128n4096k4096_ and (t64k2pb or t64k2pd or t64k2x)" \
        LOWM3 100 10
fi
# every shape once (M <= MAXM), largest M x N first, dealt round-robin so the shards carry
# similar work
shapes=${SHAPES:-$(cd zoo/kernels && PYTHONPATH="$PWD/../.." python3 -c "import gemm_sm90 as g; \
print(' '.join(f'm{M}n{N}k{K}' for M, N, K in sorted(g.SHAPES, key=lambda s: -s[0] * s[1]) \
               if M <= ${MAXM:-1 << 30}))")}
n=${NSHARDS:-4}
declare -a part
i=0
for s in $shapes; do
    part[$((i % n))]="${part[$((i % n))]:+${part[$((i % n))]} or }${s}_"
    i=$((i + 1))
done
SHARDS=""
for p in "${part[@]}"; do
    SHARDS="${SHARDS:+$SHARDS|}gemm_sm90 and ($p) and ($roles)"
done
echo "gemm_bench: $n clients over: ${shapes}"
if [ -n "$LIST" ]; then
    list_items() { (cd zoo && python3 -m tirxh bench --collect-only -q -k "$1" 2>&1) | grep '::'; }
    [ -z "${SMOKE:-}" ] || { echo "== smoke"; list_items "$SMOKE"; }
    j=0
    IFS='|' read -r -a listed <<<"$SHARDS"
    for sh in "${listed[@]}"; do
        echo "== shard $j"
        list_items "$sh"
        j=$((j + 1))
    done
    exit 0
fi

# pyptx's first call (~20 s on a fresh machine: its shim and the kernel's cubin) before the
# daemon, not inside the first job that has pyptx beside it (session 13: that job ran past its
# 30 s budget in the warm-up and read as a hang of gemm_bf16 t64k2p; docs/TUNING.md)
export PREWARM="${PREWARM-python3 benchmarks/pyptx_prewarm.py --budget ${PREWARM_S:-90} \
--shapes $shapes}"
SHARDS="$SHARDS${EXTRA_SHARDS:+|$EXTRA_SHARDS}" BENCH_LIMIT="${BUDGET:-480}" OUT="$OUT" bash benchmarks/gpu_bench.sh

python3 benchmarks/gemm_summary.py /tmp/gpu_bench/bench_*.jsonl --json "$OUT/summary.json" \
    | tee "$OUT/summary.md"
