#!/usr/bin/env bash
# The whole zoo's headline cases on the lent H200 in one command: one large case per kernel
# (the size each kernel's table in docs/PERFORMANCE.md reports), each through KCoral beside its
# baselines (eager and torch.compile, cuBLAS / _scaled_mm / pyptx, SDPA, FLA), protocol
# kcoral-measure/3, paired ratios split by clock regime:
#
#   (device, carry .whl) bash benchmarks/zoo_all_bench.sh [GROUP ...]    # default: half1 half2
#   (anywhere) bash benchmarks/zoo_all_bench.sh --list [GROUP ...]      # the items, no GPU
#   (anywhere) bash benchmarks/zoo_all_bench.sh --shards [GROUP ...]    # the SHARDS string
#
# One `tirxh bench` client per group (benchmarks/gpu_bench.sh: one daemon; the host builds one
# group's inputs and references while the GPU times another's), a correctness-only smoke pass of
# each kernel's first small case first (SMOKE_GATE: nothing is timed if it fails). What
# TOTAL_LIMIT (default 540 s) cuts is each group's last items.
# The whole zoo does not fit one device call (600 s): measured on the H200 (session 7,
# 2026-12-02), nine clients timed 12 items in the 381 s left after set-up (74 s) and smoke, one
# of them a kda_fwd job that spent its 90 s budget in FLA's first Triton autotune: ~24 s of the
# board per item (the first torch.compile of a shape compiles inside its job). So two calls,
# `half1` (vector gemm decode norms: 13 items) and `half2` (softmax activations movement
# attention: 13 items), and the kda group through benchmarks/kda_bench.sh, which warms FLA up
# first (here, without the FLA wheels, its job says why FLA is not there and times the kernel
# alone). Env: SEEDS (default 1), EXEC_S (default 90), TOTAL_LIMIT, OUT; see gpu_bench.sh.
# Each headline is the kernel's fastest measured case at its size (session 10: reduce_rows'
# _w16_u1_pol_r32, rmsnorm's _tri_pol2, swiglu's _b128_u1_stcs, cumsum_tma's _k8, and
# kda_decode_bulk beside kda_decode; docs/PERFORMANCE.md "Session 10"); top-k's: every
# case topk_warp.py tags `main` (tests/benchmarks/test_zoo_all_bench.py checks it: f32 8192 and
# bf16 `_ta2_q8`, "Session 27"; f32 32768 `_w32_sd2`, "Session 26"); bf16 8192^3's
# stream-K tail `t256sktds4` (1.035x cuBLAS against `t256`'s 1.017x in one job, "Session 15").
set -u
cd "$(dirname "$0")/.."
declare -A G
G[vector]="vadd[n64M]@ or reduce_rows[r8192_c8192_w16_u1_pol_r32]@ or gemm_mma[m4096n4096k4096]@sm_90a"
G[gemm]="gemm_bf16_c2[m8192n8192k8192_t256sktds4]@ or gemm_fp8_c2[m8192n8192k8192_t256]@ or \
gemm_wgmma[m4096n4096k4096_bn256]@"
G[attention]="attention_fwd[b4h32s8192_lazy8]@ or attention_fwd[b4h32s8192_causal_pairs_lazy8]@"
G[decode]="decode_attention[b32_h32x8_l8k_p64]@ or kda_decode[n256_h64_t1]@ or \
kda_decode_bulk[n256_h64_t1]@"
G[kda]="kda_fwd[t8192_h64_v64ws8]@"
G[norms]="rmsnorm[r16384_c8192_tri_pol2]@ or add_rmsnorm[r16384_c8192]@ or layernorm[r16384_c8192]@ \
or quant_fp8[r16384_c8192]@"
G[softmax]="softmax[r16384_c8192]@ or softmax_tma[r16384_c8192_s4_b256]@ or \
cross_entropy[r4096_c128256]@"
G[activations]="swiglu[n64M_b128_u1_stcs]@ or gelu_tanh[n64M_u4]@ or rope[t16384_h32_d128]@"
G[movement]="transpose[r16384_c8192]@ or tma_copy[r16384_c8192]@ or cumsum_tma[r1_c64M_k8]@ or \
topk_f32_warp[r16384_c8192_k50_st_a_v8_g2fu_sd_so_dyn_ta2_q8]@ or \
topk_f32_warp[r4096_c32768_k64_st_a_v4_g1fu_w32_sd2]@ or \
topk_bf16_warp[r8192_c32768_k64_st_a_v4_g2fu_w32_sd2_pk_dyn_ta2_q8]@"
ORDER="vector gemm decode kda norms softmax activations movement attention"
declare -A HALF=([half1]="vector gemm decode norms" [half2]="softmax activations movement attention")
mode=run
case "${1:-}" in --list) mode=list; shift ;; --shards) mode=shards; shift ;; esac
groups=
for a in ${*:-half1 half2}; do groups="$groups ${HALF[$a]:-$a}"; done
shards=""
for g in $groups; do
    [ -n "${G[$g]:-}" ] || { echo "zoo_all_bench: unknown group '$g' (groups: $ORDER; half1, half2)" >&2; exit 2; }
    shards="${shards:+$shards|}${G[$g]}"
done
if [ "$mode" = shards ]; then
    echo "$shards"
    exit 0
fi
if [ "$mode" = list ]; then
    # a group that selects nothing is an error: a renamed case would otherwise drop out of the
    # whole-zoo run without a word
    cd zoo
    empty=
    for g in $groups; do
        echo "== $g"
        tirxh bench --collect-only -q -k "${G[$g]}" 2>&1 | grep '::' || empty="$empty $g"
    done
    [ -z "$empty" ] || { echo "zoo_all_bench: no item selected by group(s):$empty" >&2; exit 1; }
    exit 0
fi
if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "zoo_all_bench: SKIPPED: no NVIDIA GPU here (nvidia-smi -L failed); run it on the GPU host"
    exit 0
fi
# the smoke pass: each selected kernel's small cases that run its headline variant's code
SMOKE="${SMOKE:-not h200 and not smoke and (vadd[n4096] or reduce_rows[r33_c2048] or \
gemm_bf16_c2[m200n136k72] or gemm_fp8_c2[m200n136k160] or attention_fwd[s384_causal_pairs_lazy8_p3] or \
decode_attention[b2_g4_p32_s2] or kda_decode[n2_h2_t1] or kda_fwd[t100_h1_v64ws8] or \
rmsnorm[r3_c4096] or layernorm[r3_c4096] or quant_fp8[r3_c4096] or softmax[r3 or \
cross_entropy[r3 or swiglu[n4099] or rope[ or transpose[r33 or tma_copy[r100 or \
cumsum_tma[r3_c2604] or (topk_warp and _ta2_q))}" SMOKE_GATE=1 SHARDS="$shards" SEEDS="${SEEDS:-1}" SHARE_INPUTS=1 \
    EXEC_S="${EXEC_S:-90}" TOTAL_LIMIT="${TOTAL_LIMIT:-540}" TAIL="${TAIL:-40}" \
    exec bash benchmarks/gpu_bench.sh
