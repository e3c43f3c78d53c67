#!/usr/bin/env bash
# Issue 14's variants of the memory-bound zoo kernels (activations, norms, softmax, cumsum) on
# the lent H200, in ONE command of at most ~290 s: set-up, then a correctness-only smoke pass
# over the small cases that run each variant's code (persistent grids, evict-first loads, cumsum
# tiles and look-back rounds; 15 s budget per job, so a hang costs seconds), then five concurrent
# `tirxh bench` clients of one KCoral daemon time each variant beside its kernel's plain case,
# interleaved with the eager and torch.compile baselines (one correctness seed before timing;
# a shard's variants of one kernel share its inputs and numpy reference: bench_with.py).
# Predicted effects: docs/TUNING.md. Set-up, daemon and archive: benchmarks/gpu_bench.sh.
#
#   (device, carry .whl) bash benchmarks/zoo_perf_bench.sh
#   (anywhere) bash benchmarks/zoo_perf_bench.sh --list    # the smoke and timed items, no GPU
#   EXTRA_SHARDS='h200 and (rope or transpose)': more clients in the same call (-k expressions, |-separated)
#   MODE="tma8 scan8" (several modes, space-separated): one call, one set-up and one smoke over
#     the union of their small cases, then every mode's shards in the order given; TOTAL_LIMIT
#     is the sum of theirs less one set-up (~40 s)
#   MODE=new: ONLY the variants of the s3 membound round beside each kernel's plain case (eight
#     shards of 1-4 items, one kernel each so a shard prepares its 16384 x 8192 inputs once;
#     smoke: the small cases of the changed code, LayerNorm's fused reduction, the L2 and L1
#     hints, tma_copy's 1-D bulk chunks), same limits; predictions in docs/TUNING.md
#     ("Memory-bound kernels, s3 round")
#   MODE=s6: ONLY session 6's variants (what torch.compile's inductor kernels do differently:
#     16 warps per row at full occupancy, Triton's evict-first policies, streaming stores, equal
#     TMA shares) beside each kernel's default case, first in its shard: four shards (rmsnorm,
#     swiglu, tma_copy, reduce_rows; 5-8 items each, most likely winners first, so the time
#     limit cuts the least likely) and a fifth, `reg_copy` (the copy as torch.compile does it,
#     the control for tma_copy), smoke over their small cases; predictions in
#     docs/TUNING.md ("Session 6: what inductor's kernels do differently")
#   MODE=s4: ONLY session 4's kernels beside the plain ones they replace: the pipelined cumsum
#     (`cumsum_pipe`), the filtered top-k (`topk_*_pipe`), the vectorized row sum
#     (`reduce_rows`, now with torch.sum baselines), the persistent transpose; five shards,
#     smoke over their small cases; predictions in docs/TUNING.md ("cumsum_pipe", "topk_pipe",
#     "reduce_rows", "transpose")
#   MODE=s5: ONLY session 5's `cumsum_smem` (tiles split between registers and a bulk-copied
#     shared part, block order) beside the `cumsum` cases it is meant to replace: three shards
#     of 2-3 items (the 1x64M default and its ticket-order control; the register-only and
#     smaller-shared variants beside `cumsum`'s 8K tiles; 8 rows of 4M), smoke over
#     cumsum_smem's small cases; predictions in docs/TUNING.md ("cumsum_smem (session 5)")
#   MODE=cum6: ONLY session 9's `cumsum_tma` (zoo/kernels/cumsum_tma.py: `cumsum_smem`'s tile
#     with the shared part scanned as one run per thread, written with one bulk store, the
#     aggregate published before the scan) beside `cumsum_smem` (first in its shard): two shards
#     (the 1x64M default with its EARLY=0 and st.global controls; 8 register chunks and 8 rows of
#     4M), smoke over cumsum_tma's small cases, and first an iket profile of the default (a range
#     per phase: 50 s at most, PROFILES='' skips it); run with TOTAL_LIMIT=240; predictions in
#     docs/TUNING.md ("cumsum (session 9, branch cum6)")
#   MODE=topk3: ONLY `topk_*_warp` (zoo/kernels/topk_warp.py: one warp per row, a running
#     threshold, no CTA barrier) beside the `topk_*_pipe` case of the same shape, first in its
#     shard; three shards (f32 4096 x 32768 k64, f32 16384 x 8192 k50, bf16 8192 x 32768 k64),
#     smoke over topk_warp's small cases; run with TOTAL_LIMIT=200; predictions in
#     docs/TUNING.md ("topk_warp")
#   MODE=topk4: ONLY session 7's STRICT top-k warp variants (`_st`: the filter passes only keys
#     above the k-th after a refine, so a row of ties stops appending) beside the `_pipe` and the
#     session-6 `_warp` case of the same shape (controls, first in the shard); three shards, smoke
#     over topk_warp's small STRICT cases; run with TOTAL_LIMIT=240; predictions in
#     docs/TUNING.md ("topk_warp, corrected (session 7)")
#   MODE=topk5: ONLY session 9's top-k warp variants (`_st_a`: warp-round appends, no shared
#     atomic, a refine only before an overflowing round; `_v4`/`_v2`: 2 KB / 1 KB a step) after
#     the STRICT `_st` case of the same shape (the control, first in its shard), the 2 KB step
#     next (the likeliest winner); three shards, smoke over topk_warp's small APPEND cases; run
#     with TOTAL_LIMIT=240; predictions in docs/TUNING.md ("topk (session 9, branch topk5)")
#   MODE=tma7: ONLY session 10's bytes-in-flight cases (tma_copy rings that hold 16-48 KB of
#     loads per SM instead of 93-176 KB, its LAG=2 refill; softmax_tma with shallower rings or
#     more CTAs per SM) after each kernel's control, in five shards: tma_copy (the default
#     first, the likeliest winner next), reg_copy's 32 KB and 64 KB controls, softmax_tma
#     16384 x 8192 (its p256 and s4_b256 controls first), 65536 x 2048, and the register
#     softmax (the row-in-registers control); smoke over the small cases of the two rings; run
#     with TOTAL_LIMIT=270; predictions in docs/TUNING.md ("tma_copy and softmax_tma: bytes in
#     flight (session 10)")
#   MODE=scan7: ONLY session 10's top-k row-end and cumsum look-back variants, each shard led by
#     the size's measured fastest (the `main` case, the control): four shards (f32 16384 x 8192
#     k50: `_st`, `_st_a_v4`, then FE=5 on both, the 8 KB-ahead ring `_w4s20` and the warps'
#     staggered starts `_sk2`, `_sk6`; f32 4096 x 32768 and bf16 8192 x 32768 `_st_a_v4` with
#     FE=6 and SKEW; cumsum_tma 1 x 64M `_k8` with LOOK 4; 8 x 4M default, `_k8`, `_k8_l4`),
#     smoke over topk_warp's FE/SKEW cases and cumsum_tma's LOOK 4 cases;
#     run with TOTAL_LIMIT=300; predictions in docs/TUNING.md ("topk and cumsum (session 10,
#     branch scan7)")
#   MODE=tma8: ONLY session 11's path and L2-policy cases (which half of the TMA copy costs its
#     ~4%: `path_copy`, reg_copy's geometry with the load and/or the store by one bulk copy a
#     chunk; evict-last loads on tma_copy, reg_copy, path_copy and softmax_tma), in five shards
#     led by their controls: tma_copy (default, `_pol3`), reg_copy (default, `_pol`), path_copy
#     (`_lb`, `_sb`, `_lbsb`, their `_pol`, 16 KB chunks `_u8_lbsb`), softmax_tma 16384 x 8192
#     (`_s4_b256`, its `_pol`, `_p256_s2_pol`, rows in 8 bulk copies `_k8`, `_pol_k8`) and
#     65536 x 2048 (`_s3_p512`, its `_pol`), 18 timed items; smoke over their small cases; run with
#     TOTAL_LIMIT=220; predictions in docs/TUNING.md ("tma_copy: which path costs (session 11,
#     branch tmacopy8)")
#   MODE=scan8: ONLY session 11's top-k variants (branch topk8), three shards each led by the
#     size's measured best as in-job controls (f32 16384 x 8192 k50: `_st`, `_st_a_v4_f5`; f32
#     4096 x 32768 and bf16 8192 x 32768: `_st_a_v4`): GUESS=1 (no second read of a row after a
#     short one), FUSE=1 (one ranking pass; <= 88 registers at k 50), 4 KB steps (`_v8`), 32
#     warps an SM (`_w32`: half the rows on the slowest warp); smoke over the small
#     GUESS/FUSE/VECS-8 cases; run with TOTAL_LIMIT=230; predictions in docs/PERFORMANCE.md
#     ("Session 11, branch topk8") and docs/TUNING.md ("top-k (session 11, branch topk8)")
#   MODE=scan9: ONLY session 13's top-k SEED=1 variants (branch topk9: a warp's first row from
#     the j-th largest of its lanes' maxima over the ring's first steps, not -inf), three shards
#     each led by the size's best of scan8 as in-job controls (f32 16384 x 8192 k50: `_v8_g1fu`
#     and `_v4_g1fu_w32`; f32 4096 x 32768: `_v8_g1fu`; bf16 8192 x 32768: `_v4_g1fu`), then
#     the `_sd` form of each and of `_w32` at 32768 (f32, bf16); smoke over the small `_sd`
#     cases; run with TOTAL_LIMIT=200; predictions in docs/PERFORMANCE.md ("Session 13, branch
#     topk9") and docs/TUNING.md ("top-k (session 13, branch topk9)")
#   MODE=scan10: ONLY session 14's top-k SEED=2 variants (branch topk10: the seed's rank from
#     a 1e-4 miss bound a row, not 2%: scan9's misses made single warps 35-57 us late), three
#     shards each led by its in-job controls (f32 4096 x 32768: `_v8_g1fu`, `_v4_g1fu_w32`;
#     bf16 8192 x 32768: `_v4_g1fu`, `_v4_g1fu_w32`; f32 16384 x 8192: `_v8_g1fu_sd`, the
#     best of scan9), then the `_sd2` forms; smoke over the small `_sd2` cases; run with
#     TOTAL_LIMIT=200; predictions in docs/PERFORMANCE.md ("Session 14, branch topk10") and
#     docs/TUNING.md ("top-k (session 14, branch topk10)")
#   MODE=scan11: ONLY session 15's top-k PK=1 variants (branch topk11: bf16's reach test and
#     pass masks compare each word's two bf16 halves with one HSETP2 instead of expanding
#     them to f32), one shard led by its in-job controls (bf16 8192 x 32768 `_v4_g1fu_w32_sd2`,
#     the measured best, and `_v4_g1fu_sd2`), then their `_pk` forms; smoke over the small
#     PK cases; run with TOTAL_LIMIT=200; predictions in docs/PERFORMANCE.md ("Session 15,
#     branch topk11") and docs/TUNING.md ("top-k (session 15, branch topk11)")
#   MODE=scan12: ONLY session 22's top-k variants: bf16 in 4 KB steps (`_v8_g1fu_sd2_pk`: a
#     step filtered as two groups of 4 vectors; `_bk`: the same ring filled by lane 0's bulk
#     copy a step) and the measured best with its row end by one bitonic sort (`_so`) after
#     their in-job controls (`_v4_g1fu_w32_sd2_pk`, `_v4_g1fu_sd2_pk`); f32 8192's best
#     (`_v8_g1fu_sd`) and its `_so`, a shard each; before them three iket timelines
#     (a `wait` range a step, `row_end` a row: benchmarks/item_timeline.py reads them) of
#     bf16's best at 32 and 16 warps an SM and of f32 8192's best, 60 s at most each
#     (PROFILES='' skips them); smoke over the small bf16 `_v8`, `_bk` and `_so` cases; run with
#     TOTAL_LIMIT=360; predictions in docs/PERFORMANCE.md ("Session 22")
#   MODE=topk13: ONLY session 23's top-k rows from a counter (DYN=1, `_dyn`) beside their
#     static-walk controls: bf16's best at 32 and 16 warps an SM, f32 8192's best (`_so`), a
#     shard each dtype, and an iket timeline of f32 8192's `_dyn` first; smoke over the small
#     `_dyn` cases; run with TOTAL_LIMIT=300; predictions in docs/PERFORMANCE.md ("Session 23")
#   MODE=topk14: ONLY session 24's GUESS=2 (`_g2fu`: the next row's guess mixed halfway with
#     the last, so that no row is read twice) beside its GUESS=1 controls: f32 8192's best with
#     rows from the counter and walked statically (a shard), bf16's best (a shard), and an iket
#     timeline of f32 8192's `_g2fu` `_dyn` first (its `again` ranges should be gone); smoke
#     over the small `_g2` cases; run with TOTAL_LIMIT=300; predictions in docs/PERFORMANCE.md
#     ("Session 24")
#   MODE=topk15: ONLY session 24's half rows (SPLIT=2, `_sp2`: two items a row, merged by the
#     second to finish) at 32768 columns beside the measured bests they build on: f32 (`_w32_sd2`,
#     one row a warp) and bf16 (`_w32_sd2_pk_dyn`), a shard each, and an iket timeline of bf16's
#     `_sp2` first; smoke over the small `_sp2` cases; run with TOTAL_LIMIT=300; predictions in
#     docs/PERFORMANCE.md ("Session 24")
#   MODE=topk16: ONLY session 25's register fetch of a second read's appends (GFETCH=0, every
#     case's now) beside each size's GFETCH=1 control (`_gf`, first in its shard): f32 8192
#     (with GUESS=1 and the static walk), f32 32768 `_w32_sd2`, bf16 (with GUESS=2), and
#     tma_copy's 536.9 MB (this device's copy rate in the job); an iket timeline of f32 8192's
#     `_g2fu` `_dyn` first (its `again` ranges: 129-136 us in session 25's H100 trace); smoke
#     over the small `_g2` and `_dyn` cases; run with TOTAL_LIMIT=300; predictions in
#     docs/PERFORMANCE.md ("Session 25")
#   MODE=topk17: ONLY session 26's early tickets (TAKE=1/2/4, `_ta1`/`_ta2`/`_ta4`: the next
#     row's counter ticket asked 1-4 steps before the row's end, read there; `_ta2_q8`: 8
#     counters, QUEUES=8) after their `_dyn`
#     controls, first in their shard: f32 8192 `_v8_g2fu_sd_so_dyn` and bf16
#     `_v4_g2fu_w32_sd2_pk_dyn`; tma_copy's 536.9 MB (the copy rate in the job); an iket
#     timeline and an ncu profile of f32's `_ta2` first; smoke over the small `_ta` cases; run
#     with TOTAL_LIMIT=300; predictions in docs/PERFORMANCE.md ("Session 26")
#   MODE=topk18: ONLY session 27's lead and queue count around the new mains (`_ta2_q8`,
#     f32 8192 143.92 us, 89.4%; bf16 148.54 us): `_ta1_q8`, `_ta1_q16`, `_ta2_q16` (f32),
#     `_ta1_q8`, `_ta2_q16` (bf16), the main first in each shard; tma_copy's 536.9 MB; no
#     profile; smoke over the small `_ta` cases; run with TOTAL_LIMIT=240; predictions in
#     docs/PERFORMANCE.md ("Session 27")
#   MODE=flush1: ONLY the L2-flush question (session 28, kcoral/boards/l2_flush.py): the copy
#     (tma_copy's 536.9 MB), top-k's two mains (f32 8192 and bf16 `_ta2_q8`) and cumsum_tma
#     `_k8` (1 x 64M), each timed three times, one shard per flush: `--l2-flush write` (the
#     protocol's memset), `read` (a read-only sweep) and `none`; a smoke over the small
#     `_ta2_q` top-k cases; first an ncu profile (full set) of the copy, for its L2 and DRAM
#     throughput beside top-k's (PROFILES='' skips it); run with TOTAL_LIMIT=400; predictions
#     in docs/PERFORMANCE.md ("Session 28")
#   MODE=bulk1: ONLY session 30's bulk ring on the counter's walk (`_bk`: BULK=1 with DYN, TAKE
#     and QUEUES) after each top-k main (`_ta2_q8`, f32 8192 and bf16; f32 32768's static
#     `_v4_g1fu_w32_sd2` and its `_bk`), and tma_copy's 536.9 MB,
#     under `--l2-flush write` and then `read` (a shard each); first an ncu profile (full set)
#     of f32's main and of its `_bk`, and an iket profile of kda_bwd_local_tc[t8192_h64] (its
#     phases' times; PROFILES='' skips them); smoke over the small `_ta2_q` and `_bk` cases;
#     run with TOTAL_LIMIT=420; predictions in docs/PERFORMANCE.md
#     ("Session 30")
#   MODE=cum13: ONLY session 22's `cumsum_l2` (zoo/kernels/cumsum_l2.py: reduce-then-scan a
#     segment of the resident grid's tiles at a time, the second read from the L2) after its
#     in-job controls (cumsum_tma `_k8` at both sizes, a shard of their own): the default,
#     `_p0` (no L2 policies), `_c16` (64 KB tiles), r8_c4M, `_pp` (the next segment's loads
#     in flight under the scan); an iket profile of the default first
#     (50 s at most, PROFILES='' skips it); run with TOTAL_LIMIT=240; predictions in
#     docs/PERFORMANCE.md ("Session 22")
#   MODE=cum9: ONLY session 12's `cumsum_persist` (zoo/kernels/cumsum_persist.py: persistent
#     CTAs, a bulk-copy tile ring, tile k+1's load issued before tile k's look-back) beside
#     cumsum_tma's measured best (`_k8` at 1 x 64M and 8 x 4M, the in-job controls, a shard of
#     their own), in three shards: the controls; 1 x 64M (the default 3 stages of 68 KB with a
#     refill one store behind, the double buffer of 2 x 100 KB, 4 stages of 52 KB with and
#     without the next tile's aggregate before the look-back (LAG), two CTAs per SM of 3 x 36
#     KB, 512 threads, LOOK 2 and 8); 8 x 4M (the default, two CTAs per SM, LAG). Smoke over
#     cumsum_persist's small cases, and first an iket profile of the default (50 s at most,
#     PROFILES='' skips it); run with TOTAL_LIMIT=240; predictions in docs/PERFORMANCE.md
#     ("Session 12, branch cumsum9")
#   MODE=tma9: ONLY session 13's one-box-per-CTA TMA copies (tma_copy PERSIST=0: path_copy's
#     geometry, 131072 CTAs of one 2 KB 2-D box, 16 per SM, the tensor copies kept) beside the
#     in-job controls, in four shards: tma_copy (default, `_pol3`, then the likeliest winner
#     `_one_b8x128_pol3` and `_one_b8x128`), reg_copy (default, `_pol`), path_copy (`_lbsb`,
#     `_lbsb_pol`: the same geometry by 1-D bulk copies), and the geometry probes (4 x 256
#     boxes, 32 CTAs per SM, 4 KB boxes at 8 per SM); smoke over the PERSIST=0 small cases; run
#     with TOTAL_LIMIT=180; predictions in docs/PERFORMANCE.md ("Session 13, branch tmacopy9")
#   MODE=cum10: ONLY session 13's `cumsum_ws` (zoo/kernels/cumsum_ws.py: cumsum_persist's ring
#     with the look-back in a warp of its own, each tile's aggregate published when its load
#     lands) beside the controls in a shard of their own (cumsum_tma `_k8` and cumsum_persist
#     `_s4_lag` at 1 x 64M and 8 x 4M), in three shards: the controls; 1 x 64M (the default 4
#     stages of 52 KB, its evict-last loads `_pol`, 3 x 68 KB, 5 x 40 KB, LOOK 2 and 8); 8 x 4M
#     (the default, `_pol`, 5 x 40 KB). Smoke over cumsum_ws's small cases, and first an iket
#     profile of the default (50 s at most, PROFILES='' skips it); run with TOTAL_LIMIT=240;
#     predictions in docs/PERFORMANCE.md ("Session 13, branch cumsum10")
#   MODE=cum11: ONLY session 14's `cumsum_ws` AGG=1 (branch cumsum11: a warp of its own sums
#     each tile and publishes its aggregate the moment the load lands, so no aggregate waits
#     for a look-back) in three shards: the controls (cumsum_tma `_k8` at both sizes, the AGG 0
#     default); 1 x 64M (`_a`, `_a_l2`, `_a_s5`, `_a_pol`); `_a_s3` and 8 x 4M (`_a`, `_a_pol`,
#     `_a_s5`). Smoke over cumsum_ws's small cases, and first an iket profile of `_a` (50 s at
#     most, PROFILES='' skips it); run with TOTAL_LIMIT=220; predictions in
#     docs/PERFORMANCE.md ("Session 14, branch cumsum11")
#   MODE=cum12: ONLY session 15's `cumsum_ws` COAL=1 (branch cumsum12: each look-back load
#     reads 32 consecutive flags, a quarter of the L2 requests a round at LOOK 4) in two shards:
#     the controls (cumsum_tma `_k8` and AGG 1 `_a` at both sizes, `_a_l2`); the COAL 1 cases
#     (`_a_c`, `_a_l2_c`, `_a_l8_c`, 8 x 4M `_a_c`). Smoke
#     over cumsum_ws's small cases, and first an iket profile of `_a_c` (50 s at most,
#     PROFILES='' skips it); run with TOTAL_LIMIT=200; predictions in docs/PERFORMANCE.md
#     ("Session 15, branch cumsum12")
#   MODE=rms10: ONLY session 13's rmsnorm at the copy's per-SM shape (branch rmsnorm10: BLOCK
#     1024 at 32 registers, one vector per thread, 2 CTAs and 32 KB of row loads per SM), three
#     shards: `_tri_pol2` (the in-job control, first) and `_tri1k_pol2`; `_b1024_r32_pol2` (w
#     read with the row) and `_tri1k` (no policy); reg_copy `_pol` (the evict-last copy the
#     predictions scale from). Smoke over their small cases; the margin is ~1%, so run with
#     BENCH_ARGS="--min-rounds 200" and TOTAL_LIMIT=240; predictions in docs/PERFORMANCE.md
#     ("Session 13, branch rmsnorm10")
#
# Each shard runs its items in file order, plain case first; the board takes jobs first come
# first served, so when TOTAL_LIMIT cuts the run short every shard loses its last variants, not
# a whole kernel. Output: $OUT/gpu_bench.tar.gz, and $OUT/zoo_perf_summary.md (every timed item;
# the fastest variant per kernel and size against the goals: >= 90% of the floor, >= 1.00x the
# faster of eager and torch.compile), also printed.
set -u
cd "$(dirname "$0")/.."
select_mode() {  # select_mode MODE: SMOKE_K and SHARDS_ALL (and PROFILES) for one mode
local MODE=$1
SHARD_ARGS_M=  # a mode's options per shard ('|'-separated, gpu_bench.sh's SHARD_ARGS)
FILES="(activations.py or norms.py or softmax.py or cumsum.py)"
SMOKE_K="not h200 and $FILES and (_p2 or _p3 or _ef or cta or _t128 or _l2 or _l4 or _u1)"
SH_ACT="swiglu[n64M]@ or swiglu[n64M_ef]@ or swiglu[n64M_p396]@ or swiglu[n64M_p528_r64]@ or \
gelu_tanh[n64M]@ or gelu_tanh[n64M_ef]@ or gelu_tanh[n64M_p528]@"
# a name such as rmsnorm[r16384_c8192_r64]@ also matches add_rmsnorm's case of that name
SH_RMS="(rmsnorm[r16384_c8192]@ or rmsnorm[r16384_c8192_r64]@ or rmsnorm[r16384_c8192_ef]@ or \
rmsnorm[r16384_c8192_p256_b512]@ or rmsnorm[r16384_c8192_p128_b1024]@) and not add_rmsnorm"
SH_CUM="cumsum[r1_c64M]@ or cumsum[r1_c64M_t8k]@ or cumsum[r1_c64M_t16k]@ or \
cumsum[r1_c64M_t16k_ef]@ or cumsum[r1_c64M_t32k]@ or cumsum[r8_c4M]@ or cumsum[r8_c4M_t16k]@"
SH_LNQ="layernorm[r16384_c8192]@ or layernorm[r16384_c8192_p128_b1024]@ or \
add_rmsnorm[r16384_c8192]@ or add_rmsnorm[r16384_c8192_r64]@ or \
add_rmsnorm[r16384_c8192_p256_b512]@ or quant_fp8[r16384_c8192]@ or \
quant_fp8[r16384_c8192_p256_b512]@"
SH_SMX="softmax[r16384_c8192]@ or softmax[r16384_c8192_ef]@ or softmax_tma[r16384_c8192]@ or \
softmax_tma[r16384_c8192_p256]@ or cross_entropy[r4096_c128256]@ or \
cross_entropy[r4096_c128256_ef]@"
SHARDS_ALL="h200 and ($SH_ACT)|h200 and ($SH_RMS)|h200 and ($SH_CUM)|h200 and ($SH_LNQ)|\
h200 and ($SH_SMX)"
if [ "${MODE:-all}" = new ]; then
    SMOKE_K="not h200 and (layernorm or _l2p or _l1na or _bulk)"
    N_LN="layernorm[r16384_c8192]@ or layernorm[r16384_c8192_r0]@ or \
layernorm[r16384_c8192_r80]@"
    N_LN2="layernorm[r16384_c8192_l2p256]@ or layernorm[r16384_c8192_l1na]@"
    N_RMS="(rmsnorm[r16384_c8192]@ or rmsnorm[r16384_c8192_l1na]@ or \
rmsnorm[r16384_c8192_l2p256]@) and not add_rmsnorm"
    N_RMS2="rmsnorm[r16384_c8192_l2p128]@ and not add_rmsnorm"
    N_SWI="swiglu[n64M]@ or swiglu[n64M_l2p256]@ or swiglu[n64M_b128_u4]@ or swiglu[n64M_r48]@"
    N_TMA="tma_copy[r16384_c8192]@ or tma_copy[r16384_c8192_bulk]@ or \
tma_copy[r16384_c8192_bulk_8k_s8]@"
    N_ADD="add_rmsnorm[r16384_c8192]@ or add_rmsnorm[r16384_c8192_l2p256]@ or \
add_rmsnorm[r16384_c8192_l1na]@"
    N_QNT="quant_fp8[r16384_c8192]@ or quant_fp8[r16384_c8192_l2p256]@"
    SHARDS_ALL="h200 and ($N_LN)|h200 and ($N_LN2)|h200 and ($N_RMS)|h200 and ($N_RMS2)|\
h200 and ($N_SWI)|h200 and ($N_TMA)|h200 and ($N_ADD)|h200 and ($N_QNT)"
elif [ "${MODE:-all}" = s6 ]; then
    SMOKE_K="not h200 and (rmsnorm[r5_c1000_b64_pol_st_late]@ or \
rmsnorm[r7_c1000_b64_p3_pol_late]@ or rmsnorm[r5_c1000_b64_pol2]@ or \
swiglu[n4099_u1_pol_st]@ or swiglu[n4099_p3_pol_st]@ or \
tma_copy[r100_c200_s2_pol]@ or tma_copy[r100_c200_s2_bulk_pol2]@ or tma_copy[r130_c264_pol2]@ or \
reduce_rows[r7_c1100_w2_u2]@ or reduce_rows[r3_c1100_w16_u1_pol]@ or \
reduce_rows[r5_c600_w4_scalar]@ or reg_copy[r8_c8]@ or reg_copy[r100_c200_b32_u2]@)"
    S6_RMS="(rmsnorm[r16384_c8192]@ or rmsnorm[r16384_c8192_tri_pol]@ or \
rmsnorm[r16384_c8192_tri]@ or rmsnorm[r16384_c8192_tri_pol2]@ or \
rmsnorm[r16384_c8192_b512_r40]@ or rmsnorm[r16384_c8192_pol]@ or \
rmsnorm[r16384_c8192_stcs]@ or rmsnorm[r16384_c8192_tri_pol_stcs]@) and not add_rmsnorm"
    S6_SWI="swiglu[n64M]@ or swiglu[n64M_b128_u1]@ or swiglu[n64M_b128_u4]@ or \
swiglu[n64M_b128_u4_stcs]@ or swiglu[n64M_stcs]@ or swiglu[n64M_b128_u1_pol]@ or \
swiglu[n64M_b128_u4_pol]@ or swiglu[n64M_b128_u1_stcs]@"
    S6_TMA="tma_copy[r16384_c8192]@ or tma_copy[r16384_c8192_p256]@ or \
tma_copy[r16384_c8192_pol]@ or tma_copy[r16384_c8192_pol2]@ or tma_copy[r16384_c8192_p256_s6]@ or \
tma_copy[r16384_c8192_p128_s12]@"
    S6_RED="reduce_rows[r8192_c8192]@ or reduce_rows[r8192_c8192_w16_u1]@ or \
reduce_rows[r8192_c8192_w16_u1_pol_r32]@ or reduce_rows[r8192_c8192_w16_u2_r40]@ or \
reduce_rows[r8192_c8192_w4_u4]@"
    S6_REG="reg_copy[r16384_c8192]@ or reg_copy[r16384_c8192_b128_u4]@ or \
reg_copy[r16384_c8192_b256_u2]@"
    SHARDS_ALL="h200 and ($S6_RMS)|h200 and ($S6_SWI)|h200 and ($S6_TMA)|$S6_RED|\
h200 and ($S6_REG)"
elif [ "${MODE:-all}" = s4 ]; then
    SMOKE_K="not h200 and (cumsum_pipe or topk or reduce_rows or transpose)"
    N_CUM="cumsum[r1_c64M_t16k]@ or cumsum_pipe[r1_c64M_t16k_s2]@ or \
cumsum_pipe[r1_c64M_t16k_s2_l2]@ or cumsum_pipe[r1_c64M_t16k_s2_l8]@ or \
cumsum_pipe[r1_c64M_t16k_s3]@ or cumsum_pipe[r1_c64M_t8k_s3]@ or cumsum_pipe[r8_c4M_t16k_s2]@"
    N_TOPK="topk_f32[r4096_c32768_k64_plain]@ or topk_f32_pipe[r4096_c32768_k64]@ or \
topk_f32_pipe[r4096_c32768_k64_t1]@ or topk_f32_pipe[r4096_c32768_k64_agg]@ or \
topk_f32_pipe[r16384_c8192_k50]@"
    N_TOPKB="topk_bf16[r8192_c32768_k64]@ or topk_bf16_pipe[r8192_c32768_k64]@ or \
topk_bf16_pipe[r8192_c32768_k16]@"
    SHARDS_ALL="h200 and ($N_CUM)|h200 and ($N_TOPK)|h200 and ($N_TOPKB)|\
reduce_rows[r8192_c8192]@ or reduce_rows[r8192_c8192_u4]@ or \
reduce_rows[r8192_c8192_scalar]@|h200 and transpose"
elif [ "${MODE:-all}" = s5 ]; then
    SMOKE_K="not h200 and cumsum_smem"
    N_C1="cumsum[r1_c64M_t16k]@ or cumsum_smem[r1_c64M]@ or cumsum_smem[r1_c64M_o1]@"
    N_C2="cumsum[r1_c64M_t8k]@ or cumsum_smem[r1_c64M_s0]@ or cumsum_smem[r1_c64M_s8]@"
    N_C3="cumsum[r8_c4M_t16k]@ or cumsum_smem[r8_c4M]@"
    SHARDS_ALL="h200 and ($N_C1)|h200 and ($N_C2)|h200 and ($N_C3)"
elif [ "${MODE:-all}" = cum6 ]; then
    SMOKE_K="not h200 and cumsum_tma"
    N_T1="cumsum_smem[r1_c64M]@ or cumsum_tma[r1_c64M]@ or cumsum_tma[r1_c64M_e0]@ or \
cumsum_tma[r1_c64M_st0]@"
    N_T2="cumsum_smem[r8_c4M]@ or cumsum_tma[r1_c64M_k8]@ or cumsum_tma[r8_c4M]@"
    SHARDS_ALL="h200 and ($N_T1)|h200 and ($N_T2)"
    # the phases of one launch (iket ranges), before the shards; PROFILES='' skips it
    export PROFILES="${PROFILES-kernels/cumsum_tma.py::cumsum_tma[r1_c64M] --iket --iket-capacity 24}"
    export PROFILE_LIMIT="${PROFILE_LIMIT:-50}"
elif [ "${MODE:-all}" = topk3 ]; then
    SMOKE_K="not h200 and topk_warp"
    N_W1="topk_f32_pipe[r4096_c32768_k64]@ or topk_f32_warp[r4096_c32768_k64]@ or \
topk_f32_warp[r4096_c32768_k64_s12]@ or topk_f32_warp[r4096_c32768_k64_v1]@ or \
topk_f32_warp[r4096_c32768_k64_m80]@ or topk_f32_warp[r4096_c32768_k64_v4]@"
    N_W2="topk_f32_pipe[r16384_c8192_k50]@ or topk_f32_warp[r16384_c8192_k50]@ or \
topk_f32_warp[r16384_c8192_k50_m80]@ or topk_f32_warp[r16384_c8192_k50_v4]@"
    N_W3="topk_bf16_pipe[r8192_c32768_k64]@ or topk_bf16_warp[r8192_c32768_k64]@ or \
topk_bf16_warp[r8192_c32768_k64_v2]@ or topk_bf16_warp[r8192_c32768_k64_s12]@ or \
topk_bf16_warp[r8192_c32768_k16]@"
    SHARDS_ALL="h200 and ($N_W1)|h200 and ($N_W2)|h200 and ($N_W3)"
elif [ "${MODE:-all}" = topk4 ]; then
    # session 7's strict small cases, not the later half-row ones that also end in _st_sp2
    SMOKE_K="not h200 and topk_warp and _st and not _sp2"
    N_S1="topk_f32_pipe[r4096_c32768_k64]@ or topk_f32_warp[r4096_c32768_k64]@ or \
topk_f32_warp[r4096_c32768_k64_st]@"
    N_S2="topk_f32_pipe[r16384_c8192_k50]@ or topk_f32_warp[r16384_c8192_k50]@ or \
topk_f32_warp[r16384_c8192_k50_st]@"
    N_S3="topk_bf16_pipe[r8192_c32768_k64]@ or topk_bf16_warp[r8192_c32768_k64]@ or \
topk_bf16_warp[r8192_c32768_k64_st]@"
    SHARDS_ALL="h200 and ($N_S1)|h200 and ($N_S2)|h200 and ($N_S3)"
elif [ "${MODE:-all}" = topk5 ]; then
    SMOKE_K="not h200 and topk_warp and _ap"
    N_A1="topk_f32_warp[r4096_c32768_k64_st]@ or topk_f32_warp[r4096_c32768_k64_st_a_v4]@ or \
topk_f32_warp[r4096_c32768_k64_st_a]@"
    N_A2="topk_f32_warp[r16384_c8192_k50_st]@ or topk_f32_warp[r16384_c8192_k50_st_a_v4]@ or \
topk_f32_warp[r16384_c8192_k50_st_a]@"
    N_A3="topk_bf16_warp[r8192_c32768_k64_st]@ or topk_bf16_warp[r8192_c32768_k64_st_a_v4]@ or \
topk_bf16_warp[r8192_c32768_k64_st_a_v2]@ or topk_bf16_warp[r8192_c32768_k64_st_a]@"
    SHARDS_ALL="h200 and ($N_A1)|h200 and ($N_A2)|h200 and ($N_A3)"
elif [ "${MODE:-all}" = tma7 ]; then
    SMOKE_K="not h200 and (tma_copy[r100_c200_b16_s5_cta2]@ or tma_copy[r100_c200_s2]@ or \
tma_copy[r100_c200_s4_lag2]@ or softmax_tma[r9_c1032_s2_cta2]@ or softmax_tma[r5_c2056_cta2]@)"
    T7_TMA="tma_copy[r16384_c8192]@ or tma_copy[r16384_c8192_b32_s3_p256]@ or \
tma_copy[r16384_c8192_s2_p256]@ or tma_copy[r16384_c8192_b32_s2_p512]@ or \
tma_copy[r16384_c8192_b32_s5_p128]@ or tma_copy[r16384_c8192_s2]@ or \
tma_copy[r16384_c8192_b32_s2_p256]@ or tma_copy[r16384_c8192_b32_s4_lag2_p256]@"
    T7_REG="reg_copy[r16384_c8192]@ or reg_copy[r16384_c8192_b256_u2]@"
    T7_SMX="softmax_tma[r16384_c8192_s4_b256]@ or softmax_tma[r16384_c8192_p256_s2]@ or \
softmax_tma[r16384_c8192_p128_s3_b1024]@ or softmax_tma[r16384_c8192_s2_b256]@ or \
softmax_tma[r16384_c8192_p256]@ or softmax_tma[r16384_c8192_p512_s2_b256]@"
    T7_S2K="softmax_tma[r65536_c2048]@ or softmax_tma[r65536_c2048_s3_p1024]@ or \
softmax_tma[r65536_c2048_s3_p512]@"
    SHARDS_ALL="h200 and ($T7_TMA)|h200 and ($T7_REG)|h200 and ($T7_SMX)|h200 and ($T7_S2K)|\
h200 and softmax[r16384_c8192]@"
elif [ "${MODE:-all}" = scan7 ]; then
    SMOKE_K="not h200 and ((topk_warp and _fe) or cumsum_tma[r2_c9004_b160)"
    N_R1="topk_f32_warp[r16384_c8192_k50_st]@ or topk_f32_warp[r16384_c8192_k50_st_a_v4]@ or \
topk_f32_warp[r16384_c8192_k50_st_a_v4_f5]@ or topk_f32_warp[r16384_c8192_k50_st_f5]@ or \
topk_f32_warp[r16384_c8192_k50_st_a_v4_w4s20]@ or topk_f32_warp[r16384_c8192_k50_st_a_v4_sk2]@ or \
topk_f32_warp[r16384_c8192_k50_st_a_v4_sk6]@"
    N_R2="topk_f32_warp[r4096_c32768_k64_st_a_v4]@ or topk_f32_warp[r4096_c32768_k64_st_a_v4_f6]@ or \
topk_f32_warp[r4096_c32768_k64_st_a_v4_sk6]@ or topk_bf16_warp[r8192_c32768_k64_st_a_v4]@ or \
topk_bf16_warp[r8192_c32768_k64_st_a_v4_f6]@ or topk_bf16_warp[r8192_c32768_k64_st_a_v4_sk6]@"
    N_R3="cumsum_tma[r1_c64M_k8]@ or cumsum_tma[r1_c64M_k8_l4]@"
    N_R4="cumsum_tma[r8_c4M]@ or cumsum_tma[r8_c4M_k8]@ or cumsum_tma[r8_c4M_k8_l4]@"
    SHARDS_ALL="h200 and ($N_R1)|h200 and ($N_R2)|h200 and ($N_R3)|h200 and ($N_R4)"
elif [ "${MODE:-all}" = tma8 ]; then
    SMOKE_K="not h200 and (path_copy or pol3 or reg_copy[r100_c200_b32_u2_pol]@ or \
softmax_tma[r9_c1032_s2_cta2_pol]@ or softmax_tma[r9_c1032_s2_cta2_k3]@)"
    T8_TMA="tma_copy[r16384_c8192]@ or tma_copy[r16384_c8192_pol3]@"
    T8_REG="reg_copy[r16384_c8192]@ or reg_copy[r16384_c8192_pol]@"
    T8_PATH="path_copy[r16384_c8192_lb]@ or path_copy[r16384_c8192_sb]@ or \
path_copy[r16384_c8192_lbsb]@ or path_copy[r16384_c8192_lb_pol]@ or \
path_copy[r16384_c8192_sb_pol]@ or path_copy[r16384_c8192_lbsb_pol]@ or \
path_copy[r16384_c8192_u8_lbsb]@"
    T8_SMX="softmax_tma[r16384_c8192_s4_b256]@ or softmax_tma[r16384_c8192_s4_b256_pol]@ or \
softmax_tma[r16384_c8192_p256_s2_pol]@ or softmax_tma[r16384_c8192_s4_b256_k8]@ or \
softmax_tma[r16384_c8192_s4_b256_pol_k8]@"
    T8_S2K="softmax_tma[r65536_c2048_s3_p512]@ or softmax_tma[r65536_c2048_s3_p512_pol]@"
    SHARDS_ALL="h200 and ($T8_TMA)|h200 and ($T8_REG)|h200 and ($T8_PATH)|h200 and ($T8_SMX)|\
h200 and ($T8_S2K)"
elif [ "${MODE:-all}" = scan8 ]; then
    SMOKE_K="not h200 and topk_warp and (g1 or fu)"
    T8_F="topk_f32_warp[r16384_c8192_k50"
    T8_L="topk_f32_warp[r4096_c32768_k64"
    T8_B="topk_bf16_warp[r8192_c32768_k64"
    N_R1="${T8_F}_st]@ or ${T8_F}_st_a_v4_f5]@ or ${T8_F}_st_a_v4_g1]@ or ${T8_F}_st_a_v4_g1fu]@ \
or ${T8_F}_st_a_v8_g1fu]@ or ${T8_F}_st_a_v4_g1fu_w32]@"
    N_R2="${T8_L}_st_a_v4]@ or ${T8_L}_st_a_v4_g1fu]@ or ${T8_L}_st_a_v8_g1fu]@ or \
${T8_L}_st_a_v4_g1fu_w32]@"
    N_R3="${T8_B}_st_a_v4]@ or ${T8_B}_st_a_v4_g1fu]@ or ${T8_B}_st_a_v4_g1fu_w32]@"
    SHARDS_ALL="h200 and ($N_R1)|h200 and ($N_R2)|h200 and ($N_R3)"
elif [ "${MODE:-all}" = scan9 ]; then
    SMOKE_K="not h200 and topk_warp and _sd and not _sd2 and not _bk"
    T9_F="topk_f32_warp[r16384_c8192_k50_st_a"
    T9_L="topk_f32_warp[r4096_c32768_k64_st_a"
    T9_B="topk_bf16_warp[r8192_c32768_k64_st_a"
    N_R1="${T9_F}_v8_g1fu]@ or ${T9_F}_v4_g1fu_w32]@ or ${T9_F}_v8_g1fu_sd]@ or \
${T9_F}_v4_g1fu_w32_sd]@"
    N_R2="${T9_L}_v8_g1fu]@ or ${T9_L}_v8_g1fu_sd]@ or ${T9_L}_v4_g1fu_w32_sd]@"
    N_R3="${T9_B}_v4_g1fu]@ or ${T9_B}_v4_g1fu_sd]@ or ${T9_B}_v4_g1fu_w32_sd]@"
    SHARDS_ALL="h200 and ($N_R1)|h200 and ($N_R2)|h200 and ($N_R3)"
elif [ "${MODE:-all}" = scan10 ]; then
    SMOKE_K="not h200 and topk_warp and _sd2"
    T10_F="topk_f32_warp[r16384_c8192_k50_st_a"
    T10_L="topk_f32_warp[r4096_c32768_k64_st_a"
    T10_B="topk_bf16_warp[r8192_c32768_k64_st_a"
    N_R1="${T10_L}_v8_g1fu]@ or ${T10_L}_v4_g1fu_w32]@ or ${T10_L}_v8_g1fu_sd2]@ or \
${T10_L}_v4_g1fu_w32_sd2]@"
    N_R2="${T10_B}_v4_g1fu]@ or ${T10_B}_v4_g1fu_w32]@ or ${T10_B}_v4_g1fu_sd2]@ or \
${T10_B}_v4_g1fu_w32_sd2]@"
    N_R3="${T10_F}_v8_g1fu_sd]@ or ${T10_F}_v4_g1fu_w32_sd2]@"
    SHARDS_ALL="h200 and ($N_R1)|h200 and ($N_R2)|h200 and ($N_R3)"
elif [ "${MODE:-all}" = scan11 ]; then
    SMOKE_K="not h200 and topk_warp and _pk"   # not "pk": "topk" holds it
    T11_B="topk_bf16_warp[r8192_c32768_k64_st_a"
    N_R1="${T11_B}_v4_g1fu_w32_sd2]@ or ${T11_B}_v4_g1fu_sd2]@ or \
${T11_B}_v4_g1fu_w32_sd2_pk]@ or ${T11_B}_v4_g1fu_sd2_pk]@"
    SHARDS_ALL="h200 and ($N_R1)"
elif [ "${MODE:-all}" = scan12 ]; then
    SMOKE_K="not h200 and topk_bf16_warp and (_v8 or _bk or _so) and not _dyn"
    T12_B="topk_bf16_warp[r8192_c32768_k64_st_a"
    T12_F="topk_f32_warp[r16384_c8192_k50_st_a"
    N_R1="${T12_B}_v4_g1fu_w32_sd2_pk]@ or ${T12_B}_v4_g1fu_sd2_pk]@ or \
${T12_B}_v8_g1fu_sd2_pk]@ or ${T12_B}_v8_g1fu_sd2_pk_bk]@ or ${T12_B}_v4_g1fu_w32_sd2_pk_so]@"
    N_R2="${T12_F}_v8_g1fu_sd]@ or ${T12_F}_v8_g1fu_sd_so]@"
    SHARDS_ALL="h200 and ($N_R1)|h200 and ($N_R2)"
    # where a warp's time goes (iket: a `wait` a step, a `row_end` a row): bf16's best at 32
    # and at 16 warps an SM, and f32 8192's best (74%); capacities hold the busiest warp's
    # 2 (1 + rows x (steps + 1)) events with room for second reads
    export PROFILES="${PROFILES-kernels/topk_warp.py::topk_bf16_warp[r8192_c32768_k64_st_a_v4_g1fu_w32_sd2_pk] --iket --iket-capacity 160;\
kernels/topk_warp.py::topk_bf16_warp[r8192_c32768_k64_st_a_v4_g1fu_sd2_pk] --iket --iket-capacity 320;\
kernels/topk_warp.py::topk_f32_warp[r16384_c8192_k50_st_a_v8_g1fu_sd] --iket --iket-capacity 192}"
    export PROFILE_LIMIT="${PROFILE_LIMIT:-60}"
    # the traces (~13-22 MB each) may make the archive too large to come back: their figures
    # are also written to $OUT/item_timeline.txt on the GPU host
    ITEM_TIMELINE="--item row_end --wait wait"
elif [ "${MODE:-all}" = topk13 ]; then
    SMOKE_K="not h200 and topk and _dyn"
    T13_B="topk_bf16_warp[r8192_c32768_k64_st_a"
    T13_F="topk_f32_warp[r16384_c8192_k50_st_a"
    N_R1="${T13_B}_v4_g1fu_w32_sd2_pk]@ or ${T13_B}_v4_g1fu_w32_sd2_pk_dyn]@ or \
${T13_B}_v4_g1fu_sd2_pk]@ or ${T13_B}_v4_g1fu_sd2_pk_dyn]@"
    N_R2="${T13_F}_v8_g1fu_sd_so]@ or ${T13_F}_v8_g1fu_sd_so_dyn]@"
    SHARDS_ALL="h200 and ($N_R1)|h200 and ($N_R2)"
    # the counter's walk on f32 8192 (the static walk's tail was 21% there): capacity for a
    # fast warp's ~10 rows of 2 (1 + rows x (steps + 1)) events
    export PROFILES="${PROFILES-kernels/topk_warp.py::topk_f32_warp[r16384_c8192_k50_st_a_v8_g1fu_sd_so_dyn] --iket --iket-capacity 256}"
    export PROFILE_LIMIT="${PROFILE_LIMIT:-60}"
    ITEM_TIMELINE="--item row_end --wait wait"
elif [ "${MODE:-all}" = topk14 ]; then
    SMOKE_K="not h200 and topk and _g2"
    T14_B="topk_bf16_warp[r8192_c32768_k64_st_a"
    T14_F="topk_f32_warp[r16384_c8192_k50_st_a"
    N_R1="${T14_F}_v8_g1fu_sd_so_dyn]@ or ${T14_F}_v8_g2fu_sd_so_dyn]@ or \
${T14_F}_v8_g1fu_sd_so]@ or ${T14_F}_v8_g2fu_sd_so]@"
    N_R2="${T14_B}_v4_g1fu_w32_sd2_pk_dyn]@ or ${T14_B}_v4_g2fu_w32_sd2_pk_dyn]@"
    SHARDS_ALL="h200 and ($N_R1)|h200 and ($N_R2)"
    # session 23's trace of `_g1fu` `_dyn` held 7 second reads on its last warps; this one's
    # capacity as topk13's
    export PROFILES="${PROFILES-kernels/topk_warp.py::topk_f32_warp[r16384_c8192_k50_st_a_v8_g2fu_sd_so_dyn] --iket --iket-capacity 256}"
    export PROFILE_LIMIT="${PROFILE_LIMIT:-60}"
    ITEM_TIMELINE="--item row_end --wait wait"
elif [ "${MODE:-all}" = topk15 ]; then
    SMOKE_K="not h200 and topk and _sp2"
    T15_B="topk_bf16_warp[r8192_c32768_k64_st_a"
    T15_F="topk_f32_warp[r4096_c32768_k64_st_a"
    N_R1="${T15_F}_v4_g1fu_w32_sd2]@ or ${T15_F}_v4_g2fu_w32_sd2_dyn_sp2]@"
    N_R2="${T15_B}_v4_g1fu_w32_sd2_pk_dyn]@ or ${T15_B}_v4_g2fu_w32_sd2_pk_dyn]@ or \
${T15_B}_v4_g2fu_w32_sd2_pk_dyn_sp2]@"
    SHARDS_ALL="h200 and ($N_R1)|h200 and ($N_R2)"
    # ~4 half rows a warp of 16 steps: 2 (1 + items x (steps + 1)) events
    export PROFILES="${PROFILES-kernels/topk_warp.py::topk_bf16_warp[r8192_c32768_k64_st_a_v4_g2fu_w32_sd2_pk_dyn_sp2] --iket --iket-capacity 256}"
    export PROFILE_LIMIT="${PROFILE_LIMIT:-60}"
    ITEM_TIMELINE="--item row_end --wait wait"
elif [ "${MODE:-all}" = topk16 ]; then
    SMOKE_K="not h200 and topk_warp and (_g2 or _dyn)"
    T16_B="topk_bf16_warp[r8192_c32768_k64_st_a"
    T16_F="topk_f32_warp[r16384_c8192_k50_st_a"
    T16_W="topk_f32_warp[r4096_c32768_k64_st_a"
    # each size's GFETCH=1 control first, then the register fetch (every case's now)
    N_R1="${T16_F}_v8_g2fu_sd_so_dyn_gf]@ or ${T16_F}_v8_g2fu_sd_so_dyn]@ or \
${T16_F}_v8_g1fu_sd_so_dyn]@ or ${T16_F}_v8_g2fu_sd_so]@"
    N_R2="${T16_W}_v4_g1fu_w32_sd2_gf]@ or ${T16_W}_v4_g1fu_w32_sd2]@"
    N_R3="${T16_B}_v4_g1fu_w32_sd2_pk_dyn_gf]@ or ${T16_B}_v4_g1fu_w32_sd2_pk_dyn]@ or \
${T16_B}_v4_g2fu_w32_sd2_pk_dyn]@"
    # the same 536.9 MB as f32 8192's reads, copied: this device's copy rate in this job
    N_R4="tma_copy[r16384_c8192]@"
    SHARDS_ALL="h200 and ($N_R1)|h200 and ($N_R2)|h200 and ($N_R3)|h200 and ($N_R4)"
    # the second reads' length with the register fetch (session 25's H100 trace: 129-136 us)
    export PROFILES="${PROFILES-kernels/topk_warp.py::topk_f32_warp[r16384_c8192_k50_st_a_v8_g2fu_sd_so_dyn] --iket --iket-capacity 256}"
    export PROFILE_LIMIT="${PROFILE_LIMIT:-60}"
    ITEM_TIMELINE="--item row_end --wait wait"
elif [ "${MODE:-all}" = topk17 ]; then
    SMOKE_K="not h200 and topk_warp and _ta"
    T17_B="topk_bf16_warp[r8192_c32768_k64_st_a_v4_g2fu_w32_sd2_pk_dyn"
    T17_F="topk_f32_warp[r16384_c8192_k50_st_a_v8_g2fu_sd_so_dyn"
    # each size's `_dyn` control first (the ticket asked and read at once), then TAKE
    N_R1="${T17_F}]@ or ${T17_F}_ta1]@ or ${T17_F}_ta2]@ or ${T17_F}_ta4]@ or ${T17_F}_ta2_q8]@"
    N_R2="${T17_B}]@ or ${T17_B}_ta2]@ or ${T17_B}_ta2_q8]@"
    N_R3="tma_copy[r16384_c8192]@"
    SHARDS_ALL="h200 and ($N_R1)|h200 and ($N_R2)|h200 and ($N_R3)"
    # where the warps stall with the ticket asked early (session 26's ncu of `_dyn`: 20.7% of
    # the samples on a ticket's first use), and the rows' timeline
    export PROFILES="${PROFILES-kernels/topk_warp.py::topk_f32_warp[r16384_c8192_k50_st_a_v8_g2fu_sd_so_dyn_ta2] --iket --iket-capacity 256;\
kernels/topk_warp.py::topk_f32_warp[r16384_c8192_k50_st_a_v8_g2fu_sd_so_dyn_ta2] --ncu --ncu-set full}"
    export PROFILE_LIMIT="${PROFILE_LIMIT:-150}"
    ITEM_TIMELINE="--item row_end --wait wait"
elif [ "${MODE:-all}" = topk18 ]; then
    SMOKE_K="not h200 and topk_warp and _ta"
    T18_B="topk_bf16_warp[r8192_c32768_k64_st_a_v4_g2fu_w32_sd2_pk_dyn"
    T18_F="topk_f32_warp[r16384_c8192_k50_st_a_v8_g2fu_sd_so_dyn"
    # each size's main (`_ta2_q8`, session 27) first, then the lead and the queue count
    N_R1="${T18_F}_ta2_q8]@ or ${T18_F}_ta1_q8]@ or ${T18_F}_ta1_q16]@ or ${T18_F}_ta2_q16]@"
    N_R2="${T18_B}_ta2_q8]@ or ${T18_B}_ta1_q8]@ or ${T18_B}_ta2_q16]@"
    N_R3="tma_copy[r16384_c8192]@"
    SHARDS_ALL="h200 and ($N_R1)|h200 and ($N_R2)|h200 and ($N_R3)"
    export PROFILES="${PROFILES-}"
elif [ "${MODE:-all}" = flush1 ]; then
    SMOKE_K="not h200 and topk_warp and _ta2_q"
    F1_ITEMS="tma_copy[r16384_c8192]@ or \
topk_f32_warp[r16384_c8192_k50_st_a_v8_g2fu_sd_so_dyn_ta2_q8]@ or \
topk_bf16_warp[r8192_c32768_k64_st_a_v4_g2fu_w32_sd2_pk_dyn_ta2_q8]@ or cumsum_tma[r1_c64M_k8]@"
    SHARDS_ALL="h200 and ($F1_ITEMS)|h200 and ($F1_ITEMS)|h200 and ($F1_ITEMS)"
    SHARD_ARGS_M="--l2-flush write|--l2-flush read|--l2-flush none"
    # the copy's own L2 and DRAM throughput under ncu, beside top-k's (s27/d9: L2 88.5%, DRAM
    # 83.4%): whether top-k's cp.async ring costs the L2 more per byte than TMA boxes
    export PROFILES="${PROFILES-kernels/tma_copy.py::tma_copy[r16384_c8192] --ncu --ncu-set full}"
    export PROFILE_LIMIT="${PROFILE_LIMIT:-100}"
elif [ "${MODE:-all}" = bulk1 ]; then
    SMOKE_K="not h200 and topk_warp and (_ta2_q or _bk)"
    B1_F="topk_f32_warp[r16384_c8192_k50_st_a_v8_g2fu_sd_so_dyn_ta2_q8"
    B1_B="topk_bf16_warp[r8192_c32768_k64_st_a_v4_g2fu_w32_sd2_pk_dyn_ta2_q8"
    B1_W="topk_f32_warp[r4096_c32768_k64_st_a_v4_g1fu_w32_sd2"
    B1_ITEMS="${B1_F}]@ or ${B1_F}_bk]@ or ${B1_W}]@ or ${B1_W}_bk]@ or ${B1_B}]@ or ${B1_B}_bk]@ \
or tma_copy[r16384_c8192]@"
    # each main first, then its bulk ring (a shard runs in file order: the copy before them);
    # under the protocol's flush and the read flush (session 29: the write flush charges these
    # readers ~2.5% more than the copy)
    SHARDS_ALL="h200 and ($B1_ITEMS)|h200 and ($B1_ITEMS)"
    SHARD_ARGS_M="--l2-flush write|--l2-flush read"
    # the mechanism: the L2's throughput per DRAM byte of the main and its bulk ring, one card
    # and piece 3 of the KDA backward by phase (its iket ranges, session 30; 20 events a warp)
    export PROFILES="${PROFILES-kernels/topk_warp.py::${B1_F}] --ncu --ncu-set full;\
kernels/topk_warp.py::${B1_F}_bk] --ncu --ncu-set full;\
kernels/kda_bwd_local_tc.py::kda_bwd_local_tc[t8192_h64] --iket --iket-capacity 32}"
    export PROFILE_LIMIT="${PROFILE_LIMIT:-120}"
elif [ "${MODE:-all}" = cum13 ]; then
    SMOKE_K="not h200 and cumsum_l2"
    # the controls first, in a shard of their own: cumsum_tma's best at both sizes
    C13_C="cumsum_tma[r1_c64M_k8]@ or cumsum_tma[r8_c4M_k8]@"
    C13_1="cumsum_l2[r1_c64M]@ or cumsum_l2[r1_c64M_p0]@ or cumsum_l2[r1_c64M_c16]@ or \
cumsum_l2[r8_c4M]@ or cumsum_l2[r1_c64M_pp]@"
    SHARDS_ALL="h200 and ($C13_C)|h200 and ($C13_1)"
    # the phases of one launch: 32 segments x (reduce, scan, wait) on warp 0
    export PROFILES="${PROFILES-kernels/cumsum_l2.py::cumsum_l2[r1_c64M] --iket --iket-capacity 224}"
    export PROFILE_LIMIT="${PROFILE_LIMIT:-50}"
elif [ "${MODE:-all}" = cum9 ]; then
    SMOKE_K="not h200 and cumsum_persist"
    # the controls in a shard of their own: a shard runs in file order, and cumsum_persist.py
    # sorts before cumsum_tma.py (a control after the variants would be the first item cut)
    N_C="cumsum_tma[r1_c64M_k8]@ or cumsum_tma[r8_c4M_k8]@"
    N_P1="cumsum_persist[r1_c64M]@ or cumsum_persist[r1_c64M_s2]@ or \
cumsum_persist[r1_c64M_s4]@ or cumsum_persist[r1_c64M_s4_lag]@ or cumsum_persist[r1_c64M_c2]@ or \
cumsum_persist[r1_c64M_b512]@ or cumsum_persist[r1_c64M_l2]@ or cumsum_persist[r1_c64M_l8]@"
    N_P2="cumsum_persist[r8_c4M]@ or cumsum_persist[r8_c4M_c2]@ or cumsum_persist[r8_c4M_s4_lag]@"
    SHARDS_ALL="h200 and ($N_C)|h200 and ($N_P1)|h200 and ($N_P2)"
    # the phases of one launch (iket ranges: ~30 tiles x 10 events a warp), before the shards
    export PROFILES="${PROFILES-kernels/cumsum_persist.py::cumsum_persist[r1_c64M] --iket --iket-capacity 320}"
    export PROFILE_LIMIT="${PROFILE_LIMIT:-50}"
elif [ "${MODE:-all}" = tma9 ]; then
    SMOKE_K="not h200 and tma_copy and _one"
    T9_ONE="tma_copy[r16384_c8192_one_b8x128"
    T9_TMA="tma_copy[r16384_c8192]@ or tma_copy[r16384_c8192_pol3]@ or ${T9_ONE}_pol3]@ or \
${T9_ONE}]@"
    T9_REG="reg_copy[r16384_c8192]@ or reg_copy[r16384_c8192_pol]@"
    T9_PATH="path_copy[r16384_c8192_lbsb]@ or path_copy[r16384_c8192_lbsb_pol]@"
    T9_GEO="tma_copy[r16384_c8192_one_b4x256_pol3]@ or ${T9_ONE}_t64_pol3]@ or \
tma_copy[r16384_c8192_one_b16x128_t256_pol3]@"
    SHARDS_ALL="h200 and ($T9_TMA)|h200 and ($T9_REG)|h200 and ($T9_PATH)|h200 and ($T9_GEO)"
elif [ "${MODE:-all}" = cum10 ]; then
    SMOKE_K="not h200 and cumsum_ws"
    # the controls in a shard of their own (a control after the variants would be the first
    # item a cut loses): cumsum_tma's best and cumsum_persist's best, both sizes
    N_C="cumsum_tma[r1_c64M_k8]@ or cumsum_tma[r8_c4M_k8]@ or cumsum_persist[r1_c64M_s4_lag]@ or \
cumsum_persist[r8_c4M_s4_lag]@"
    N_W1="cumsum_ws[r1_c64M]@ or cumsum_ws[r1_c64M_pol]@ or cumsum_ws[r1_c64M_s3]@ or \
cumsum_ws[r1_c64M_s5]@ or cumsum_ws[r1_c64M_l2]@ or cumsum_ws[r1_c64M_l8]@"
    N_W2="cumsum_ws[r8_c4M]@ or cumsum_ws[r8_c4M_pol]@ or cumsum_ws[r8_c4M_s5]@"
    SHARDS_ALL="h200 and ($N_C)|h200 and ($N_W1)|h200 and ($N_W2)"
    # the phases of one launch (iket ranges: 39 tiles x 10 events on warp 0), before the shards
    export PROFILES="${PROFILES-kernels/cumsum_ws.py::cumsum_ws[r1_c64M] --iket --iket-capacity 400}"
    export PROFILE_LIMIT="${PROFILE_LIMIT:-50}"
elif [ "${MODE:-all}" = cum11 ]; then
    SMOKE_K="not h200 and cumsum_ws"
    # the controls first, in a shard of their own: cumsum_tma's best and session 13's AGG 0
    C11_C="cumsum_tma[r1_c64M_k8]@ or cumsum_tma[r8_c4M_k8]@ or cumsum_ws[r1_c64M]@"
    C11_1="cumsum_ws[r1_c64M_a]@ or cumsum_ws[r1_c64M_a_l2]@ or cumsum_ws[r1_c64M_a_s5]@ or \
cumsum_ws[r1_c64M_a_pol]@"
    C11_2="cumsum_ws[r1_c64M_a_s3]@ or cumsum_ws[r8_c4M_a]@ or cumsum_ws[r8_c4M_a_pol]@ or \
cumsum_ws[r8_c4M_a_s5]@"
    SHARDS_ALL="h200 and ($C11_C)|h200 and ($C11_1)|h200 and ($C11_2)"
    # the roles' phases of one launch (iket ranges: 39 tiles x 10 events on warp 0)
    export PROFILES="${PROFILES-kernels/cumsum_ws.py::cumsum_ws[r1_c64M_a] --iket --iket-capacity 400}"
    export PROFILE_LIMIT="${PROFILE_LIMIT:-50}"
elif [ "${MODE:-all}" = cum12 ]; then
    SMOKE_K="not h200 and cumsum_ws"
    # the controls first, in a shard of their own: session 14's AGG 1 default and LOOK 2
    # (d3: 182.00, 168.58 us) and cumsum_tma's best
    C12_C="cumsum_tma[r1_c64M_k8]@ or cumsum_tma[r8_c4M_k8]@ or cumsum_ws[r1_c64M_a]@ or \
cumsum_ws[r1_c64M_a_l2]@ or cumsum_ws[r8_c4M_a]@"
    C12_1="cumsum_ws[r1_c64M_a_c]@ or cumsum_ws[r1_c64M_a_l2_c]@ or cumsum_ws[r1_c64M_a_l8_c]@ or \
cumsum_ws[r8_c4M_a_c]@"
    SHARDS_ALL="h200 and ($C12_C)|h200 and ($C12_1)"
    # the roles' phases of one launch (iket ranges: 39 tiles x 10 events on warp 0)
    export PROFILES="${PROFILES-kernels/cumsum_ws.py::cumsum_ws[r1_c64M_a_c] --iket --iket-capacity 400}"
    export PROFILE_LIMIT="${PROFILE_LIMIT:-50}"
elif [ "${MODE:-all}" = rms10 ]; then
    SMOKE_K="not h200 and rmsnorm and b1024 and not add_rmsnorm"
    # one suite per shard after its control: rmsnorm's cases run in declaration order, so
    # `_tri_pol2` (session 6) precedes the session-13 variants it is compared with
    R10_A="rmsnorm[r16384_c8192_tri_pol2]@ or rmsnorm[r16384_c8192_tri1k_pol2]@"
    R10_B="rmsnorm[r16384_c8192_b1024_r32_pol2]@ or rmsnorm[r16384_c8192_tri1k]@"
    SHARDS_ALL="h200 and ($R10_A) and not add_rmsnorm|h200 and ($R10_B) and not add_rmsnorm|\
h200 and (reg_copy[r16384_c8192_pol]@)"
elif [ "${MODE:-all}" != all ]; then
    echo "zoo_perf_bench: MODE=${MODE} must be 'all' (issue 14's variants), 'new', 's4'," \
        "'s5', 'cum6', 's6', 'topk3', 'topk4', 'topk5', 'tma7', 'scan7', 'tma8'," \
        "'scan8', 'cum9', 'tma9', 'cum10', 'scan9', 'rms10', 'cum11', 'scan10', 'cum12'," \
        "'scan11', 'scan12', 'cum13', 'topk13', 'topk14', 'topk15', 'topk16', 'topk17'," \
        "'topk18', 'flush1' or 'bulk1'" >&2
    exit 2
fi
}
# MODE may name several modes ("tma8 scan8"): one device call, one set-up, one smoke over the
# union of their small cases, every mode's shards after it in the order given
read -r -a MODES <<<"${MODE:-all}"
[ "${#MODES[@]}" -gt 0 ] || MODES=(all)
smoke_union=; shards_union=; args_union=
for m in "${MODES[@]}"; do
    select_mode "$m"
    smoke_union="${smoke_union:+$smoke_union or }($SMOKE_K)"
    # each shard's own options, kept in step with the shards (empty for a mode without any)
    IFS='|' read -r -a m_shards <<<"$SHARDS_ALL"
    IFS='|' read -r -a m_args <<<"$SHARD_ARGS_M"
    for j in "${!m_shards[@]}"; do
        args_union="${args_union}${shards_union:+|}${m_args[$j]:-}"
        shards_union="${shards_union:+$shards_union|}${m_shards[$j]}"
    done
done
SHARDS_ALL=$shards_union
SHARD_ARGS_ALL=$args_union
[ "${#MODES[@]}" -gt 1 ] && SMOKE_K=$smoke_union
if [ "${1:-}" = "--list" ]; then
    cd zoo
    echo "== smoke (correctness only)"
    tirxh bench --collect-only -q -k "$SMOKE_K" 2>/dev/null | grep '::'
    IFS='|' read -r -a shards <<<"$SHARDS_ALL"
    IFS='|' read -r -a shard_args <<<"$SHARD_ARGS_ALL"
    for i in "${!shards[@]}"; do
        echo "== timed shard $i${shard_args[$i]:+ (${shard_args[$i]})}"
        tirxh bench --collect-only -q -k "${shards[$i]}" 2>/dev/null | grep '::'
    done
    exit 0
fi
if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "zoo_perf_bench: SKIPPED: no NVIDIA GPU here (nvidia-smi -L failed); run it on the GPU host"
    exit 0
fi
SMOKE="$SMOKE_K" SMOKE_EXEC_S=15 SMOKE_LIMIT="${SMOKE_LIMIT:-60}" SHARDS="$SHARDS_ALL${EXTRA_SHARDS:+|$EXTRA_SHARDS}" \
    SHARD_ARGS="$SHARD_ARGS_ALL" \
    SEEDS="${SEEDS:-1}" SHARE_INPUTS=1 EXEC_S="${EXEC_S:-45}" TOTAL_LIMIT="${TOTAL_LIMIT:-285}" \
    TAIL="${TAIL:-12}" bash benchmarks/gpu_bench.sh
OUT="${OUT:-$PWD/gpu_out}"
python3 benchmarks/zoo_perf_summary.py /tmp/gpu_bench/bench_*.jsonl | tee "$OUT/zoo_perf_summary.md"
if [ -n "${ITEM_TIMELINE:-}" ] && compgen -G "/tmp/gpu_bench/profile_*/" >/dev/null; then
    # shellcheck disable=SC2086  # the options, split on purpose
    python3 benchmarks/item_timeline.py $ITEM_TIMELINE /tmp/gpu_bench/profile_*/ \
        | tee "$OUT/item_timeline.txt"
fi
