#!/usr/bin/env bash
# The zoo's reductions, scans and decode attention (softmax, softmax_tma, cross_entropy, topk,
# cumsum, decode_attention; issue 14) on the lent H200 in one command: every large case (tagged
# h200) is compiled, checked against its numpy reference before and after timing and timed
# interleaved with its eager and torch.compile baselines (kcoral/baselines/torch_zoo2.py), through
# benchmarks/zoo_bench.sh (which skips, saying so, without a GPU).
#
#   (device) bash benchmarks/zoo2_bench.sh                          # all large cases
#   (device) ZOO2_K="decode_attention" bash benchmarks/zoo2_bench.sh  # a subset (-k expression)
#   (anywhere) bash benchmarks/zoo2_bench.sh --resources            # CPU only: registers, spills
#                                                                   # and shared memory per case
set -u
cd "$(dirname "$0")/.."
K="${ZOO2_K:-softmax or topk or cumsum or decode_attention}"
if [ "${1:-}" = "--resources" ]; then
    cd zoo
    tirxh check -k "h200 and ($K)" --collect-only -q 2>/dev/null | grep '::.*\[' |
    while read -r node; do
        res=$(tirxh show "$node" --resources --json 2>/dev/null | python3 -c '
import json, sys
try:
    r = json.load(sys.stdin)["content"]["resources"]
    print("regs %3d  spills %3d  static smem %s" % (r["registers"], r["spill_stores"],
                                                   r["smem_static"]))
except Exception as e:
    print(f"(no resources: {e})")')
        printf '%-72s %s\n' "$node" "$res"
    done
    exit 0
fi
ZOO_K="$K" exec bash benchmarks/zoo_bench.sh
