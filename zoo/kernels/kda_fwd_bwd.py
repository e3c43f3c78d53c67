"""Kimi Delta Attention forward + backward as one item (issue 18's fwd+bwd goal: >= 3x FLA's
`chunk_kda` forward + backward through its autograd, `fla.chunk_kda.fwd_bwd`): the launches, in
order, that turn the raw inputs and the output gradients into o, ht and every gradient, with the
intermediate (scratch) buffers between them, one float64 reference for all of it, and the
declared work. docs/TUNING.md "Forward + backward as one item" has the plan and the prediction.

Not a kernel: a plan of seven launches of the zoo's KDA kernels (docs/TUNING.md "The chunked
backward: the chain" says why these pieces). Per launch, `STEPS` names the kernel, its
compile-time constants (from the variant), and which buffer each parameter reads or writes:

 1. ``fwd``     kda_fwd (v128wsb at H96, v64ws8b at H64: the fastest measured forwards): o, ht;
 2. ``prep_f``  kda_bwd_chain_prep FORWARD=1: the forward walk's operands (N^T, KL^T Tb V,
                exp(G_C)) of every chunk into the scratch `nfrag`, `bt`, `eg`;
 3. ``chain_f`` kda_bwd_chain FORWARD=1 (s8: 8 warps, N staged in shared memory): S0 of every
                chunk into the scratch `s0` (the chain's hi + lo precision: kda_fwd_s0's bf16 S0
                misses the public backward rule by up to 6.2x on saturated gates, docs/TUNING.md
                piece 2), the final state into the scratch `hn` (ht again, unused);
 4. ``prep_b``  kda_bwd_chain_prep FORWARD=0: the reverse walk's operands into the same `nfrag`,
                `bt`, `eg` (the forward walk has consumed them: the launches run in order);
 5. ``chain_b`` kda_bwd_chain FORWARD=0 (s8): dS1 of every chunk into the scratch `ds1`, dh0;
 6. ``pieces``  kda_bwd_chain_pieces: dv, and the PIECES (dqe, dke, dkl, dm, dtb, dgs, scratch);
 7. ``local``   kda_bwd_local: dq, dk, dg (of g_raw), dbeta, dA_log, ddt_bias (its `gred`, `cnt`
                workspaces zeroed once: kda_bwd's slot-and-counter sums leave them reset).

`simulate` runs the plan in numsim (each launch on the arrays the previous ones left: what a
board does with one job's buffers); tests/zoo/test_kda_fwd_bwd.py checks every output of the
small cases against `reference` (o and ht under the public forward rule, every gradient under
the public backward rule: atol = rtol = 0.01). benchmarks/kda_fwd_bwd_bench.py makes the plan one
KCoral job (`tirxh.core.planjob`: the seven entries in one module, the launches in order over
named buffers, SCRATCH zeroed) with `fla.chunk_kda.fwd_bwd` as its baseline.

Plan "tc" (`PLANS`) runs steps 2, 4, 6 and 7 with kda_bwd_prep_tc, kda_bwd_pieces_tc and
kda_bwd_local_tc: the same inputs and outputs, their products on tensor cores (docs/TUNING.md
"Forward + backward at 3x"). Plan "tc2" is "tc" with PREP=2 in steps 2, 4 and 6 (the prep's P,
M and T on tensor cores as well: `PLAN_CONSTS`). Plan "tc3" is "tc2" with steps 2 and 4 as ONE
launch, kda_bwd_prep3 (both walks' operands from one prep, its fragments by ``ldmatrix`` from
bf16 planes; each walk's outputs bit-identical to kda_bwd_prep_tc's at PREP=2), the forward
walk's into the scratch `nfrag_f`, `bt_f`: six launches (``fwd``, ``prep``, ``chain_f``,
``chain_b``, ``pieces``, ``local``). Measured alone at T8192 H96 (docs/PERFORMANCE.md,
sessions 13 and 17): 7.88 ms against the two prep_tc launches' 5.22 + 4.58. Plan "tc4" is
"tc3" whose prep launch (kda_bwd_prep3s) also stores the prep's tiles piece 2c reads into the
scratch `ptile` and whose pieces launch (kda_bwd_pieces_ld) loads them instead of computing
the prep a second time (kda_bwd_prep_tiles: `LOADED_PREP`). Plan "tc5" is "tc4" whose piece 3
(kda_bwd_local_ld) loads the prep's T from those tiles instead of inverting (`LOADED_T`; the
inverse was 15.7% of piece 3's CTA time in session 30's profile): within rounding of "tc4",
not bit for bit (the prep's blocked inverse against piece 3's forward substitution). Plan
"tc6" is "tc5" whose prep launch (kda_bwd_prep3g) also copies the norms' and gate's tiles out
(`gtile`, two bulk copies while P, M and T are computed) and whose piece 3 (kda_bwd_local_lg)
loads them instead of running its own norms and gate (`LOADED_GATES`; 25.9% of piece 3's CTA
time in session 30's profile): bit for bit "tc5" (the same functions on the same inputs).
Plan "tc7" is "tc6" whose prep stages q, k and g_raw in shared memory for its norms and gate
(STAGE=1: one round of ``cp.async`` instead of dependent rounds of scalar loads); plan "tc8"
is "tc7" whose prep stores its tiles as an image of its shared memory (`pimg`, IMG=1) that the
pieces load by three bulk copies (BULK=1; `IMAGE`, `LAUNCH_CONSTS`). Both are bit for bit
"tc6". Measured in one call (session 31, an H100, T8192 H96): tc5 29.92, tc6 28.86, tc7
28.39, tc8 28.39 ms (docs/PERFORMANCE.md "Session 31"). Plan "tc9" is "tc7" whose pieces load S0 and dS1 a k-step
ahead (AHEAD=1; measured 1.005x tc7's time, session 32). Plan "tc10" is "tc7" whose prep runs
its walks' products and its gate's rows as runtime loops (ROLL=1: 136 KB of SASS, not 180),
"tc11" is "tc10" whose piece 3 rolls its scan, row dots and dq_dk too (kda_bwd_local_lg
ROLL=1: 104 KB, not 154), and "tc12" is "tc11" with the prep's ROLL=2 (112 KB); all four
bit for bit "tc7" (`LAUNCH_CONSTS`). Measured in one call (session 32, an H100, T8192 H96):
tc7 28.57, tc10 26.35, **tc11 22.15 ms** (0.650x FLA's forward + backward); tc11 is
was benchmarks/kda_bench.sh's default until session 33. Plan "tc13" (session 33) is "tc11"
whose chains store each chunk's state as the split fragments the pieces multiply by
(kda_bwd_chain FRAGS=1, `CHAIN_CONSTS`) and whose pieces read them (kda_bwd_pieces_ld
FRAGS=1): bit for bit "tc11" but for dgs's sum (dg, dA_log, ddt_bias within rounding);
"tc14" is "tc12" with the same fragments ("tc13"'s outputs bit for bit). Measured in one
call each (session 33, an H100, T8192 H96): tc11 22.25, tc13 19.77 ms (the pieces 8.38 ->
5.92); tc13 19.80, **tc14 17.86 ms** (the prep 6.73 -> 4.90; 0.806x FLA's forward +
backward); tc14 was kda_bench.sh's default. Plan "tc15" (session 34) is "tc14" with the prep's
T inverse and piece 3's elementwise terms rolled (kda_bwd_prep3g ROLL=3, kda_bwd_local_lg
ROLL=2): bit for bit tc14, measured 18.06 ms against tc14's 17.96 (an H100, T8192 H96: the
prep 1.038x slower, piece 3 0.988x). Plans "tc16" and "tc17" are "tc14" whose pieces hold
R, Delta, dDelta and dR as split planes (kda_bwd_pieces_ld PLANES=1, 2), and "tc18" and
"tc19" whose pieces hold every shared operand so (PLANES=3 rolled, 4 unrolled): bit for bit
tc14. Measured (session 34, an H100, T8192 H96): tc16 16.33 ms (the pieces 5.92 -> 4.35),
**tc19 15.71 ms** (the pieces 3.84; 0.916x FLA's forward + backward; 10.98 ms, 0.855x at
H64). Plan "tc20" (session 35) is "tc19" whose prep runs the
gate's rows on both halves of the CTA (kda_bwd_prep3g GATE=1), "tc21" and "tc22" "tc20" whose
prep loads 16 and 32 rows a round for its decayed operands (DECAY=1, 2): bit for bit tc19.
Measured in one call (session 36, an H100, T8192 H96): tc19 15.82 ms, **tc20 15.63 ms** (the
prep 4.93 -> 4.72; 0.920x FLA's forward + backward), tc22 17.51 (the prep 6.62: its larger
loop body slowed every phase). Plan "tc23" (session 36) is "tc20" whose prep stages V by
16-byte chunks (VSTAGE=1), "tc24" by ``cp.async`` copies issued after U that land while N and
B^T are multiplied (VSTAGE=2): bit for bit tc19.
Measured in one call (session 36, **the H200**, T8192 H96): tc20 14.70 ms (0.828x FLA),
**tc24 14.40 ms** (the prep 4.51 -> 4.19; **0.846x** FLA's forward + backward); tc24 is
kda_bench.sh's default. Plans "tc25" and "tc26" (session 37) are "tc24" whose prep stages its
decayed operands (KE, QE, KL, dO) by 16-byte loads in four trips (kda_bwd_prep3g DECAY=3),
each trip's loads issued a trip ahead (DECAY=4): bit for bit tc19. Plan "tc27" is "tc25"
whose pieces launch loads the prep's stored tiles and dO by 16-byte loads, all of a thread's
in flight at once (kda_bwd_pieces_ld VLOAD=1); "tc28" and "tc29" are "tc27" whose piece 3
prefetches the lines its elementwise terms read into L2 at its start or right before the pair
products (kda_bwd_local_lg PREFETCH=1, 2): bit for bit tc19. Measured in one call (session
37, an H100, T8192 H96, full clock): tc25 15.09 ms (0.946x FLA), tc27 14.53 (the pieces 3.76
-> 3.31), tc28 14.70 (piece 3 slower: its prefetches compete with the gate tiles' copies),
**tc29 14.09 ms** (piece 3 4.33 -> 3.83; **1.012x** FLA's forward + backward). "tc30" is
"tc29" whose pieces prefetch the lines of S0, dS1 and V into L2 once their tiles have loaded
(kda_bwd_pieces_ld PREFETCH=1), "tc31" "tc29" whose prep prefetches the decayed phase's lines
of k, q and dO as its gate phase ends (kda_bwd_prep3g PREFETCH=1), "tc32" both. Measured in
one call (session 37, an H100, T8192 H96, full clock): tc24 15.16 ms (0.941x FLA), tc29 14.08,
tc30 13.79 (the pieces 3.32 -> 3.02), tc31 14.05 (the prep 4.24 -> 4.19), **tc32 13.78 ms**
(**1.035x** FLA's forward + backward; 0.909x tc24's time); tc32 is kda_bench.sh's default.
Plan "tc33" (session 37) is "tc32" whose pieces launch prefetches, before its last product,
the lines the first phase of the CTA one wave ahead (132 CTAs: one an SM on an H100 or H200)
will load (kda_bwd_pieces_ld NEXT=132), "tc34" also piece 3's, before its dq_dk phase
(kda_bwd_local_lg NEXT=132), "tc35" also the prep's, before its forward walk (kda_bwd_prep3g
NEXT=132): bit for bit tc19. Plan "tc36" (session 38) is "tc35" whose prep stores P (its pairs
phase's strict-lower product, 16 KB a chunk) beside the pieces' tiles and whose piece 3 loads
it with T under the gate tiles' copies instead of computing it again (kda_bwd_prep3g PSTORE=1,
kda_bwd_local_lg PLOAD=1): equal to tc35 within rounding (the two products fold the decay
factors into different operands), not bit for bit; "tc37" is "tc36" whose piece 3 also
prefetches g_raw's rows for its scan (kda_bwd_local_lg GRAW=1): bit for bit tc36. Measured in
one call (session 38, an H100, T8192 H96, full clock): tc32 13.84 ms, tc35 13.67, tc36 13.49
(piece 3 3.74 -> 3.51), **tc37 13.43 ms** (**1.068x** FLA's forward + backward; 0.970x
tc32's time); tc37 is kda_bench.sh's default. "tc38" is "tc37" whose pieces issue their NEXT
prefetches before dR, not right before dke (kda_bwd_pieces_ld NEXTAT=1): bit for bit tc37.
Measured in one call (session 39, an H100, T8192 H96, full clock): tc37 13.45 ms, **tc38 13.38
ms** (**1.075x**; the pieces 3.05 -> 3.00). "tc39" is "tc38" whose piece 3 copies its scan's
operands (g_raw's rows, dgs's and dt_bias's rows, A_log) into shared memory once `da` is done
and its scan reads them there (kda_bwd_local_lg GSTAGE=1, GRAW=0): bit for bit tc38. Measured
in one call (session 39, an H100, T8192 H96, full clock): **tc39 13.07 ms** (**1.090x**; 0.978x
tc38's time; piece 3 3.45 -> 3.16); 9.10 ms at H64 (1.020x).
"tc40" is "tc39" whose piece 3 also copies q's and k's rows into shared memory after its pair
products, for its row dots and dq_dk (kda_bwd_local_lg QKSTAGE=1): bit for bit tc39. "tc41" is
"tc40" whose pieces issue half of their NEXT prefetches before dR and the rest before dke
(kda_bwd_pieces_ld NEXTAT=2): bit for bit tc40. "tc42" is "tc41" whose chains run a head as two
CTAs of four warps where the doubled grid fits one wave (T8192 H64: 128 CTAs, not 64; H96
keeps 96 CTAs of eight: `SPLIT_HEADS`): bit for bit tc41 (the value columns are independent).
Measured in one session (41, an H100, full clock): tc40 13.13 ms at H96 (its piece 3 3.26 against
tc39's 3.14-3.18: the staging lost), tc41 13.15 (its pieces 2.94 against 2.99-3.03), and at H64
tc42 9.07 against tc41's 9.18 (each chain 0.69 -> 0.63-0.64). "tc43" is "tc42" with tc39's piece 3
(no QKSTAGE): the two changes that measured faster, on tc39. Measured (session 41, an H100,
T8192 H64, full clock, one call): **tc43 8.985 ms** (**1.034x** FLA), 0.986x tc39's 9.112;
tc43 is kda_bench.sh's default.

Inputs (kda_bwd's): q, k, g_raw, v, do [B, T, H, 128] bf16; beta [B, T, H] bf16; A_log [H],
dt_bias [H, K], h0, dht [N, H, K, V] f32; cu_seqlens, chunk_off [N + 1], order [N] s32, and the
chunk map chunk_tok, chunk_rows [chunks] s32. Outputs: o [B, T, H, V] bf16, ht [N, H, K, V] and
the gradients dq, dk, dv, dg [B, T, H, 128], dbeta [B, T, H], dh0 [N, H, K, V], dA_log [H],
ddt_bias [H, K] f32.

Tags: linear-attention, forward, backward, chunked-scan, multi-launch, varlen
"""

from __future__ import annotations

import sys
from typing import NamedTuple
from pathlib import Path

import numpy as np

from tirxh.api import numpy_dtype

# the zoo is a directory of kernel files, not a package (see kda_fwd.py)
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
import kda_bwd as BW  # noqa: E402 - after the path that finds it
import kda_bwd_chain as CH  # noqa: E402
import kda_bwd_chain_pieces as PC  # noqa: E402
import kda_bwd_chain_prep as PR  # noqa: E402
import kda_bwd_local as BL  # noqa: E402
import kda_bwd_local_tc as LT  # noqa: E402
import kda_bwd_pieces_tc as TC  # noqa: E402
import kda_bwd_prep3 as P3  # noqa: E402
import kda_bwd_prep_tc as PT  # noqa: E402
import kda_bwd_prep_tiles as PTL  # noqa: E402
import kda_bwd_split as SP  # noqa: E402
import kda_fwd as FW  # noqa: E402
import kda_ref as R  # noqa: E402
from kda_chunk import C, K, V  # noqa: E402

TAGS = ("linear-attention", "forward", "backward", "chunked-scan", "multi-launch", "varlen")

# the forward variant and the chains' by head count (the fastest measured forward of each:
# docs/PERFORMANCE.md, session 7; the chain's s8: one CTA a head, N staged once per CTA)
FORWARDS = {96: "v128wsb", 64: "v64ws8b"}
CHAIN = dict(WARPS=8, STAGED=1)
# CTAs resident at once in the plans' launches: one an SM on an H100 or H200 (132 SMs)
RESIDENT = 132
SMALL_FORWARD = "v128wsb"          # small cases: the H96 forward (one warp-specialized CTA)
# the plans: which kernels compute pieces 2a (both walks), 2c and 3 (the f32 correctness-first
# ones, or their products on tensor cores); every other launch is the same
PLANS = {"f32": (PR.kda_bwd_chain_prep, PC.kda_bwd_chain_pieces, BL.kda_bwd_local),
         "tc": (PT.kda_bwd_prep_tc, TC.kda_bwd_pieces_tc, LT.kda_bwd_local_tc),
         "tc2": (PT.kda_bwd_prep_tc, TC.kda_bwd_pieces_tc, LT.kda_bwd_local_tc),
         "tc3": (P3.kda_bwd_prep3, TC.kda_bwd_pieces_tc, LT.kda_bwd_local_tc),
         "tc4": (P3.kda_bwd_prep3s, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_tc),
         "tc5": (P3.kda_bwd_prep3s, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_ld),
         "tc6": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc7": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc8": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc9": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc10": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc11": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc12": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc13": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc14": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc15": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc16": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc17": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc18": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc19": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc20": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc21": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc22": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc23": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc24": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc25": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc26": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc27": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc28": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc29": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc30": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc31": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc32": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc33": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc34": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc35": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc36": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc37": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc38": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc39": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc40": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc41": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc42": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg),
         "tc43": (P3.kda_bwd_prep3g, TC.kda_bwd_pieces_ld, LT.kda_bwd_local_lg)}
# constants a plan adds to its prep (both walks) and pieces launches: "tc2" is "tc" with the
# prep's P, M and T on tensor cores (kda_bwd_pieces_tc's PREP=2)
PLAN_CONSTS = {"tc2": dict(PREP=2), "tc3": dict(PREP=2), "tc4": dict(PREP=2),
               "tc5": dict(PREP=2), "tc6": dict(PREP=2), "tc7": dict(PREP=2, STAGE=1),
               "tc8": dict(PREP=2, STAGE=1, IMG=1), "tc9": dict(PREP=2, STAGE=1),
               "tc10": dict(PREP=2, STAGE=1, ROLL=1), "tc11": dict(PREP=2, STAGE=1, ROLL=1),
               "tc12": dict(PREP=2, STAGE=1, ROLL=2), "tc13": dict(PREP=2, STAGE=1, ROLL=1),
               "tc14": dict(PREP=2, STAGE=1, ROLL=2), "tc15": dict(PREP=2, STAGE=1, ROLL=3),
               "tc16": dict(PREP=2, STAGE=1, ROLL=2), "tc17": dict(PREP=2, STAGE=1, ROLL=2),
               "tc18": dict(PREP=2, STAGE=1, ROLL=2), "tc19": dict(PREP=2, STAGE=1, ROLL=2),
               "tc20": dict(PREP=2, STAGE=1, ROLL=2, GATE=1),
               "tc21": dict(PREP=2, STAGE=1, ROLL=2, GATE=1, DECAY=1),
               "tc22": dict(PREP=2, STAGE=1, ROLL=2, GATE=1, DECAY=2),
               "tc23": dict(PREP=2, STAGE=1, ROLL=2, GATE=1, VSTAGE=1),
               "tc24": dict(PREP=2, STAGE=1, ROLL=2, GATE=1, VSTAGE=2),
               "tc25": dict(PREP=2, STAGE=1, ROLL=2, GATE=1, VSTAGE=2, DECAY=3),
               "tc26": dict(PREP=2, STAGE=1, ROLL=2, GATE=1, VSTAGE=2, DECAY=4),
               **{p: dict(PREP=2, STAGE=1, ROLL=2, GATE=1, VSTAGE=2, DECAY=3)
                  for p in ("tc27", "tc28", "tc29", "tc30")},
               **{p: dict(PREP=2, STAGE=1, ROLL=2, GATE=1, VSTAGE=2, DECAY=3, PREFETCH=1)
                  for p in ("tc31", "tc32", "tc33", "tc34")},
               "tc35": dict(PREP=2, STAGE=1, ROLL=2, GATE=1, VSTAGE=2, DECAY=3, PREFETCH=1,
                            NEXT=132),
               **{p: dict(PREP=2, STAGE=1, ROLL=2, GATE=1, VSTAGE=2, DECAY=3, PREFETCH=1,
                          NEXT=132, PSTORE=1)
                  for p in ("tc36", "tc37", "tc38", "tc39", "tc40", "tc41", "tc42", "tc43")}}


def _from(first):
    """Plans "tc<first>" and every later "tc<n>": each plan from "tc3" on keeps what the ones
    before it changed (the tuples below)."""
    return tuple(p for p in PLANS if p[2:].isdigit() and int(p[2:]) >= first)



# plans whose prep is one launch for both walks (the forward walk's operands in nfrag_f, bt_f)
ONE_PREP = _from(3)
# plans whose pieces load the prep's tiles that launch stored (`ptile`) instead of computing
# the prep again (kda_bwd_prep_tiles): their pieces launch takes no PREP
LOADED_PREP = _from(4)
# plans whose piece 3 loads the prep's T from `ptile` instead of inverting (kda_bwd_local_ld)
LOADED_T = _from(5)
# plans whose piece 3 loads the norms' and gate's tiles the prep copied out (`gtile`,
# kda_bwd_prep_tiles.GateStore) instead of computing them (kda_bwd_local_lg)
LOADED_GATES = _from(6)
# plans whose prep stores its tiles in kda_bwd_prep_tiles' image layout (the scratch `pimg`,
# bound to the kernels' `ptile`) and whose pieces load them by bulk copies (their constants in
# LAUNCH_CONSTS)
IMAGE = ("tc8",)
# plans whose prep stores P after the gate's tiles and whose piece 3 loads it (PSTORE=1,
# PLOAD=1): their `gtile` is the scratch `gtilep` (kda_bwd_prep_tiles.GATE_WORDS_P a chunk)
LOADED_P = _from(36)
# the constants of a plan's pieces and local launches (ONE_PREP plans): "tc8" the image's bulk
# loads; "tc9" loads S0 and dS1 a k-step ahead of the pieces' products (kda_bwd_pieces_ld
# AHEAD=1: session 32's ncu profile put 32.5% of the pieces' warp samples on waits for those
# loads; measured 1.03x slower); "tc11" and "tc12" roll piece 3's scan, row dots and dq_dk into
# runtime loops (kda_bwd_local_lg ROLL=1), as "tc10" its prep's; "tc13" is "tc11" whose
# pieces read S0 and dS1 as the chains' split fragments (FRAGS=1, `CHAIN_CONSTS`), and
# "tc14" is "tc12" with the same; "tc15" is "tc14" whose piece 3 rolls its elementwise terms
# too (kda_bwd_local_lg ROLL=2) and whose prep its blocked inverse (ROLL=3, `PLAN_CONSTS`);
# "tc16" and "tc17" are "tc14" whose pieces hold R, Delta, dDelta and dR as split bf16 planes
# read by ldmatrix (kda_bwd_pieces_ld PLANES=1; PLANES=2 with the products' k-steps rolled);
# "tc18" whose pieces hold every shared operand as planes (PLANES=3; "tc19" unrolled, PLANES=4);
# "tc20" is "tc19" whose prep runs the gate's rows on all eight warps (kda_bwd_prep3g GATE=1);
# "tc21" and "tc22" are "tc20" whose prep loads 16 and 32 rows a round in `_decayed` (DECAY=1, 2);
# "tc23" is "tc20" whose prep stages V by 16-byte chunks (kda_bwd_prep3g VSTAGE=1), "tc24" by
# cp.async issued after U, landing during N and B^T (VSTAGE=2); "tc25" and "tc26" are "tc24"
# whose prep loads its decayed operands by 16 bytes (DECAY=3), a trip ahead (DECAY=4); "tc27"
# is "tc25" whose pieces load the prep's tiles and dO by 16 bytes, all at once
# (kda_bwd_pieces_ld VLOAD=1); "tc28" and "tc29" are "tc27" whose piece 3 prefetches its
# elementwise terms' lines into L2 at its start, right before the pair products
# (kda_bwd_local_lg PREFETCH=1, 2); "tc30" is "tc29" whose pieces prefetch S0's, dS1's and
# V's lines once their tiles have loaded (kda_bwd_pieces_ld PREFETCH=1), "tc31" "tc29" whose prep
# prefetches the decayed phase's lines after the gate (kda_bwd_prep3g PREFETCH=1), "tc32" both;
# "tc33" is "tc32" whose pieces prefetch the tiles_load lines of the CTA one wave (132 CTAs)
# ahead before their last product (kda_bwd_pieces_ld NEXT=132), "tc34" also piece 3's
# gates_load, dtb and dm lines before its dq_dk (kda_bwd_local_lg NEXT=132), "tc35" also the prep's rows
# before its forward walk (kda_bwd_prep3g NEXT=132); "tc36" is "tc35" whose prep stores P
# beside the pieces' tiles (kda_bwd_prep3g PSTORE=1) and whose piece 3 loads it with T instead
# of its pairs phase's products (kda_bwd_local_lg PLOAD=1: equal within rounding, not bit for
# bit); "tc37" is "tc36" whose piece 3 prefetches g_raw's rows for its scan with the
# elementwise terms' lines (kda_bwd_local_lg GRAW=1); "tc38" is "tc37" whose pieces issue
# their NEXT prefetches before dR instead of before dke (kda_bwd_pieces_ld NEXTAT=1); "tc39"
# is "tc38" whose piece 3 stages its scan's operands in shared memory instead of prefetching
# g_raw's rows into L2 (kda_bwd_local_lg GSTAGE=1, GRAW=0); "tc40" is "tc39" whose piece 3
# stages q's and k's rows too, after its pair products (kda_bwd_local_lg QKSTAGE=1); "tc41"
# is "tc40" whose pieces split their NEXT prefetches, half the tiles' lines before dR, the rest
# and dO's rows before dke (kda_bwd_pieces_ld NEXTAT=2); "tc42" is "tc41" with `SPLIT_HEADS`'
# chains; "tc43" is "tc42" with tc39's piece 3 (QKSTAGE measured slower in session 41)
LAUNCH_CONSTS = {"tc8": (dict(BULK=1), dict(IMG=1)), "tc9": (dict(AHEAD=1), {}),
                 "tc11": ({}, dict(ROLL=1)), "tc12": ({}, dict(ROLL=1)),
                 "tc13": (dict(FRAGS=1), dict(ROLL=1)), "tc14": (dict(FRAGS=1), dict(ROLL=1)),
                 "tc15": (dict(FRAGS=1), dict(ROLL=2)),
                 "tc16": (dict(FRAGS=1, PLANES=1), dict(ROLL=1)),
                 "tc17": (dict(FRAGS=1, PLANES=2), dict(ROLL=1)),
                 "tc18": (dict(FRAGS=1, PLANES=3), dict(ROLL=1)),
                 "tc19": (dict(FRAGS=1, PLANES=4), dict(ROLL=1)),
                 "tc20": (dict(FRAGS=1, PLANES=4), dict(ROLL=1)),
                 "tc21": (dict(FRAGS=1, PLANES=4), dict(ROLL=1)),
                 "tc22": (dict(FRAGS=1, PLANES=4), dict(ROLL=1)),
                 "tc23": (dict(FRAGS=1, PLANES=4), dict(ROLL=1)),
                 "tc24": (dict(FRAGS=1, PLANES=4), dict(ROLL=1)),
                 "tc25": (dict(FRAGS=1, PLANES=4), dict(ROLL=1)),
                 "tc26": (dict(FRAGS=1, PLANES=4), dict(ROLL=1)),
                 "tc27": (dict(FRAGS=1, PLANES=4, VLOAD=1), dict(ROLL=1)),
                 "tc28": (dict(FRAGS=1, PLANES=4, VLOAD=1), dict(ROLL=1, PREFETCH=1)),
                 "tc29": (dict(FRAGS=1, PLANES=4, VLOAD=1), dict(ROLL=1, PREFETCH=2)),
                 "tc30": (dict(FRAGS=1, PLANES=4, VLOAD=1, PREFETCH=1),
                          dict(ROLL=1, PREFETCH=2)),
                 "tc31": (dict(FRAGS=1, PLANES=4, VLOAD=1), dict(ROLL=1, PREFETCH=2)),
                 "tc32": (dict(FRAGS=1, PLANES=4, VLOAD=1, PREFETCH=1),
                          dict(ROLL=1, PREFETCH=2)),
                 "tc33": (dict(FRAGS=1, PLANES=4, VLOAD=1, PREFETCH=1, NEXT=132),
                          dict(ROLL=1, PREFETCH=2)),
                 **{p: (dict(FRAGS=1, PLANES=4, VLOAD=1, PREFETCH=1, NEXT=132),
                        dict(ROLL=1, PREFETCH=2, NEXT=132)) for p in ("tc34", "tc35")},
                 "tc36": (dict(FRAGS=1, PLANES=4, VLOAD=1, PREFETCH=1, NEXT=132),
                          dict(ROLL=1, PREFETCH=2, NEXT=132, PLOAD=1)),
                 "tc37": (dict(FRAGS=1, PLANES=4, VLOAD=1, PREFETCH=1, NEXT=132),
                          dict(ROLL=1, PREFETCH=2, NEXT=132, PLOAD=1, GRAW=1)),
                 "tc38": (dict(FRAGS=1, PLANES=4, VLOAD=1, PREFETCH=1, NEXT=132, NEXTAT=1),
                          dict(ROLL=1, PREFETCH=2, NEXT=132, PLOAD=1, GRAW=1)),
                 "tc39": (dict(FRAGS=1, PLANES=4, VLOAD=1, PREFETCH=1, NEXT=132, NEXTAT=1),
                          dict(ROLL=1, PREFETCH=2, NEXT=132, PLOAD=1, GSTAGE=1)),
                 "tc40": (dict(FRAGS=1, PLANES=4, VLOAD=1, PREFETCH=1, NEXT=132, NEXTAT=1),
                          dict(ROLL=1, PREFETCH=2, NEXT=132, PLOAD=1, GSTAGE=1, QKSTAGE=1)),
                 **{p: (dict(FRAGS=1, PLANES=4, VLOAD=1, PREFETCH=1, NEXT=132, NEXTAT=2),
                        dict(ROLL=1, PREFETCH=2, NEXT=132, PLOAD=1, GSTAGE=1, QKSTAGE=1))
                    for p in ("tc41", "tc42")}}
LAUNCH_CONSTS["tc43"] = (LAUNCH_CONSTS["tc42"][0], LAUNCH_CONSTS["tc39"][1])   # see above
# the constants a plan adds to both chains: "tc13" stores each chunk's state as the split
# fragments the pieces multiply by (kda_bwd_chain FRAGS=1) instead of f32, in the same bytes
CHAIN_CONSTS = {p: dict(FRAGS=1) for p in ("tc13", "tc14", "tc15", "tc16", "tc17", "tc18",
                                            "tc19", "tc20", "tc21", "tc22", "tc23",
                                            "tc24", "tc25", "tc26", "tc27", "tc28",
                                            "tc29", "tc30", "tc31", "tc32", "tc33",
                                            "tc34", "tc35", "tc36", "tc37", "tc38",
                                            "tc39", "tc40", "tc41", "tc42", "tc43")}
# plans whose chains run each head as two CTAs of four warps (64 value columns each) where
# twice the heads of every sequence still fit one wave (`RESIDENT` CTAs), else as one CTA of
# eight (`chain_consts`). Why: at T8192 H64 one CTA a head leaves 68 of 132 SMs idle, and
# each chain ran at 2.34 TB/s (0.691 ms for 1.62 GB, session 39 d5, an H100) against 2.80
# at H96, where 96 CTAs pull: a head's step is the CTA's latency, not HBM's bandwidth.
SPLIT_HEADS = ("tc42", "tc43")


def chain_consts(B, T_, H, lens=None, plan="f32") -> dict:
    """The constants of plan `plan`'s two chain launches at this shape (`CHAIN`, the plan's
    `CHAIN_CONSTS`, and WARPS=4 where `SPLIT_HEADS` splits a head in two)."""
    out = dict(CHAIN, **CHAIN_CONSTS.get(plan, {}))
    sequences = B if lens is None else len(lens)
    if plan in SPLIT_HEADS and 2 * H * sequences <= RESIDENT:
        out["WARPS"] = 4
    return out


class Step(NamedTuple):
    """One launch: its name in the plan, the kernel, its constants and, per kernel parameter,
    the buffer it reads or writes (a parameter not named binds the buffer of its own name)."""

    name: str
    kernel: object
    consts: dict
    grid: tuple
    bind: dict

    def buffer(self, param: str) -> str:
        return self.bind.get(param, param)


def _forward_consts(H, forward=None):
    name = forward or FORWARDS.get(H, SMALL_FORWARD)
    if name not in FW.VARIANTS:
        raise ValueError(f"forward variant {name!r} is not one of kda_fwd's "
                         f"{sorted(FW.VARIANTS)}")
    return dict(FW.VARIANTS[name])


def steps(B, T_, H, lens=None, forward=None, plan="f32") -> list:
    """The plan for a shape: seven `Step`s in launch order (module docstring); `plan` names
    the kernels of pieces 2a, 2c and 3 (`PLANS`)."""
    if plan not in PLANS:
        raise ValueError(f"plan {plan!r} is not one of {sorted(PLANS)}")
    prep, pieces, local = PLANS[plan]
    pc = PLAN_CONSTS.get(plan, {})
    fc = _forward_consts(H, forward)
    walk = dict(nfrag="nfrag", bt="bt", eg="eg")
    chain = chain_consts(B, T_, H, lens, plan)
    chains = CH._grid(B, T_, H, lens, chain["WARPS"])
    if plan in ONE_PREP:
        pieces_c, local_c = LAUNCH_CONSTS.get(plan, ({}, {}))
        img = dict(ptile="pimg") if plan in IMAGE else {}
        gates = dict(img, gtile="gtilep") if plan in LOADED_P else img   # prep and piece 3
        return [
            Step("fwd", FW.kda_fwd, fc, FW._grid(B, H, lens, fc["BV"]), {}),
            Step("prep", prep, dict(pc), PR._grid(B, T_, H, lens), gates),
            Step("chain_f", CH.kda_bwd_chain, dict(chain, FORWARD=1), chains,
                 dict(x0="h0", xs="s0", xn="hn", nfrag="nfrag_f", bt="bt_f", eg="eg")),
            Step("chain_b", CH.kda_bwd_chain, dict(chain, FORWARD=0), chains,
                 dict(x0="dht", xs="ds1", xn="dh0", **walk)),
            Step("pieces", pieces, dict(pieces_c) if plan in LOADED_PREP else dict(pc),
                 PC._grid(B, T_, H, lens), img),
            Step("local", local, dict(local_c), BL._grid(B, T_, H, lens), gates),
        ]
    return [
        Step("fwd", FW.kda_fwd, fc, FW._grid(B, H, lens, fc["BV"]), {}),
        Step("prep_f", prep, dict(FORWARD=1, **pc), PR._grid(B, T_, H, lens),
             dict(y="v", **walk)),
        Step("chain_f", CH.kda_bwd_chain, dict(CHAIN, FORWARD=1), chains,
             dict(x0="h0", xs="s0", xn="hn", **walk)),
        Step("prep_b", prep, dict(FORWARD=0, **pc), PR._grid(B, T_, H, lens),
             dict(y="do", **walk)),
        Step("chain_b", CH.kda_bwd_chain, dict(CHAIN, FORWARD=0), chains,
             dict(x0="dht", xs="ds1", xn="dh0", **walk)),
        Step("pieces", pieces, dict(pc), PC._grid(B, T_, H, lens), {}),
        Step("local", local, {}, BL._grid(B, T_, H, lens), {}),
    ]


# --- buffers ------------------------------------------------------------------------------------

FORWARD_OUTPUTS = ("o", "ht")
GRADS = BW.GRADS
OUTPUTS = FORWARD_OUTPUTS + GRADS
SCRATCH = ("nfrag", "bt", "eg", "s0", "hn", "ds1") + SP.PIECES + ("gred", "cnt")
# the forward walk's operands where one launch preps both walks (`ONE_PREP`)
WALK_F = ("nfrag_f", "bt_f")


def scratch(plan="f32") -> tuple:
    """The plan's scratch buffers (zeroed before each run, never uploaded)."""
    return (SCRATCH + (WALK_F if plan in ONE_PREP else ())
            + (("ptile",) if plan in LOADED_PREP and plan not in IMAGE else ())
            + (("pimg",) if plan in IMAGE else ())
            + (("gtilep" if plan in LOADED_P else "gtile",) if plan in LOADED_GATES else ()))


def _scratch(B, T_, H, lens):
    """Every plan's scratch arrays (a plan binds the ones it uses; `np.zeros` allocates pages
    on first write, so the walk buffers a plan does not bind cost no host memory)."""
    chunks = BL._chunks(B, T_, lens)
    N = B if lens is None else len(lens)
    walk = PR._outputs(H, chunks)
    out = dict(walk, nfrag_f=np.zeros(walk["nfrag"].shape, walk["nfrag"].dtype),
               bt_f=np.zeros(walk["bt"].shape, walk["bt"].dtype), **PTL.outputs(H, chunks), **PTL.gate_outputs(H, chunks),
               **PTL.image_outputs(H, chunks),
               gtilep=PTL.gate_outputs(H, chunks, p=True)["gtile"],
               s0=np.zeros((chunks, H, K, V), np.float32),
               hn=np.zeros((N, H, K, V), np.float32), ds1=np.zeros((chunks, H, K, V), np.float32))
    pieces = PC._outputs(B, T_, H, chunks)
    out.update({n: pieces[n] for n in SP.PIECES})
    local = BL._outputs(B, T_, H, chunks)
    out.update(gred=local["gred"], cnt=local["cnt"])
    return out


def _outputs(B, T_, H, N):
    z = np.zeros
    return dict(o=np.zeros((B, T_, H, V), numpy_dtype("bf16")), ht=z((N, H, K, V), np.float32),
                dq=z((B, T_, H, K), np.float32), dk=z((B, T_, H, K), np.float32),
                dv=z((B, T_, H, V), np.float32), dg=z((B, T_, H, K), np.float32),
                dbeta=z((B, T_, H), np.float32), dh0=z((N, H, K, V), np.float32),
                dA_log=z(H, np.float32), ddt_bias=z((H, K), np.float32))


_RAW = ("q", "k", "g_raw", "v", "beta", "A_log", "dt_bias", "h0", "do", "dht", "cu_seqlens",
        "chunk_off", "order")


def arrays_from(x, B, T_, H, lens=None):
    """Every buffer of the plan from kda_bwd's inputs `x` (raw tensors, do, dht, offsets): the
    inputs, the chunk map, the forward's tensormaps and row length, zeroed scratch and
    outputs."""
    tok, rows = BL._chunk_map(B, T_, lens)
    N = len(x["cu_seqlens"]) - 1
    return dict({n: x[n] for n in _RAW}, chunk_tok=tok, chunk_rows=rows, Trow=T_,
                **FW._tensormaps(), **_scratch(B, T_, H, lens), **_outputs(B, T_, H, N))


def inputs(rng, B, T_, H, lens=None, gate="mixed"):
    """kda_bwd's inputs for the shape and gate regime (v, h0 scaled so that the forward's
    outputs have RMS in [1, 2)), laid out as the plan's buffers (`arrays_from`)."""
    return arrays_from(BW.inputs(rng, B, T_, H, lens=lens, gate=gate), B, T_, H, lens)


def reference(q, k, v, g_raw, beta, A_log, dt_bias, h0, do, dht, cu_seqlens, lens=None):
    """o, ht (kda_ref.forward) and every gradient (kda_ref.backward, token by token), float64
    rounded to f32."""
    cu = None if lens is None else cu_seqlens
    o, ht = R.forward(q, k, v, g_raw, beta, A_log, dt_bias, h0, cu_seqlens=cu)
    out = {"o": o.astype(np.float32), "ht": ht.astype(np.float32)}
    out.update(BW.reference(q, k, v, g_raw, beta, A_log, dt_bias, h0, do, dht, cu_seqlens,
                            lens=lens))
    return out


def simulate(arrays, plan, before=None):
    """Run `plan` (a list of `Step`) in numsim, in order, each launch on the buffers the
    previous ones left; returns the buffers after the last launch. A launch that numsim does
    not find clean raises AssertionError naming the step. `before(step, args)`, if given, sees
    each launch's arguments first (the tests sync-check every launch on them)."""
    # optional dependency: numsim is the CPU simulator's plugin distribution, needed only here
    import tirxh_numsim as ns
    bufs = dict(arrays)
    for st in plan:
        args = {}
        for p in st.kernel.runtime_params:
            args[p.name] = bufs[st.buffer(p.name)]
        if before is not None:
            before(st, args)
        outs = [p.name for p in st.kernel.runtime_params if _writes(st, p.name)]
        res = ns.run(st.kernel, args, grid=st.grid, outputs=outs, consts=st.consts)
        if res.verdict != "clean":
            raise AssertionError(f"kda_fwd_bwd step {st.name!r} ({st.kernel.name}): "
                                 f"{res.summary()}")
        for p in outs:
            bufs[st.buffer(p)] = res.outputs[p]
    return bufs


# what each kernel writes (by parameter name): its module's OUTPUTS, the chain's xs/xn, the
# local kernel's workspaces
_WRITES = {"kda_fwd": ("o", "ht"), "kda_bwd_chain_prep": PR.OUTPUTS,
           "kda_bwd_chain": CH.OUTPUTS, "kda_bwd_chain_pieces": PC.OUTPUTS,
           "kda_bwd_pieces_tc": TC.OUTPUTS, "kda_bwd_prep_tc": PT.OUTPUTS,
           "kda_bwd_prep3": P3.OUTPUTS, "kda_bwd_prep3s": P3.OUTPUTS + ("ptile",),
           "kda_bwd_prep3g": P3.OUTPUTS + ("ptile", "gtile"),
           "kda_bwd_pieces_ld": TC.OUTPUTS,
           "kda_bwd_local": BL.OUTPUTS + ("gred", "cnt"),
           "kda_bwd_local_tc": LT.OUTPUTS + ("gred", "cnt"),
           "kda_bwd_local_ld": LT.OUTPUTS + ("gred", "cnt"),
           "kda_bwd_local_lg": LT.OUTPUTS + ("gred", "cnt")}


def _writes(st, param):
    return param in _WRITES[st.kernel.name]


def constraints(B, T_, H, lens=None, forward=None):
    """Every step's shape rules (the forward's with its variant's constants)."""
    fc = _forward_consts(H, forward)
    out = FW.constraints(B, T_, H, lens, **fc)
    out += CH.constraints(B, T_, H, lens, **CHAIN)
    out += PR.constraints(B, T_, H, lens) + PC.constraints(B, T_, H, lens)
    out += BL.constraints(B, T_, H, lens)
    return sorted(set(out))


def _bytes(B, T_, H, lens=None, plan="f32"):
    """The sum of the launches' declared bytes (each kernel's own `_bytes`: inputs read,
    outputs and scratch written, scratch read back by the next launch); a `ONE_PREP` plan's
    prep reads the raw inputs once for both walks (kda_bwd_prep2._bytes)."""
    chain = CH._bytes(B, T_, H, lens, CHAIN["WARPS"])
    preps = (P3._bytes(B, T_, H, lens) if plan in ONE_PREP
             else 2 * PR._bytes(B, T_, H, lens))
    out = (FW._bytes(B, T_, H, lens) + preps + 2 * chain
           + PC._bytes(B, T_, H, lens) + BL._bytes(B, T_, H, lens))
    if plan in LOADED_PREP:   # ptile written and read; the pieces read no q, k, g_raw, beta
        tile = BL._chunks(B, T_, lens) * H * PTL.WORDS * 4
        out += 2 * tile - B * T_ * H * (3 * 2 * K + 2)
    if plan in LOADED_T:      # piece 3 reads T's C x C words of each chunk and head again
        out += BL._chunks(B, T_, lens) * H * C * C * 4
    if plan in LOADED_GATES:  # gtile written and read; piece 3 reads no beta
        out += 2 * BL._chunks(B, T_, lens) * H * PTL.GATE_WORDS * 4 - B * T_ * H * 2
    if plan in LOADED_P:      # P's C x C words of each chunk and head written and read
        out += 2 * BL._chunks(B, T_, lens) * H * C * C * 4
    if plan in IMAGE:         # the pieces' bulk copies read the image's padding words too
        out += BL._chunks(B, T_, lens) * H * (PTL.IWORDS - PTL.WORDS) * 4
    return out


def _flops(B, T_, H, lens=None, plan="f32"):
    """The forward's matrix products (kda_fwd._flops) and the two chains' split products
    (kda_bwd_chain._flops: three bf16 mma a multiply-add), with plan "tc" pieces 2a's (both
    walks), 2c's and 3's split products (plan "tc2" with the preps' P, M and T; "tc3" with
    them once for both walks); the parallel
    pieces on the CUDA cores are not counted
    (their products are ~3x the forward's)."""
    out = FW._flops(B, T_, H) + 2 * CH._flops(B, T_, H, lens)
    if plan != "f32":
        pc = PLAN_CONSTS.get(plan, {})
        if plan in ONE_PREP:   # both walks' products, the prep's once
            out += P3._flops(B, T_, H, lens, PREP=pc["PREP"])   # STAGE moves no product
        else:
            out += sum(PT._flops(B, T_, H, lens, f, **pc) for f in (0, 1))
        out += TC._flops(B, T_, H, lens, **({} if plan in LOADED_PREP else pc))
        out += LT._flops(B, T_, H, lens)
    return out


# per output: the public forward rule on o and ht, the public backward rule on every gradient
TOLERANCE = dict({n: FW.TOLERANCE for n in FORWARD_OUTPUTS}, **{n: BW.TOLERANCE for n in GRADS})


def _baselines(varlen: bool) -> list:
    """FLA's forward + backward through its autograd on the same inputs (optional: without FLA
    the plan is timed alone and the item is incomplete, as the other KDA items)."""
    args = dict(BW._ARGS, cu_seqlens="cu_seqlens") if varlen else dict(BW._ARGS)
    return [{"name": "fla.chunk_kda.fwd_bwd", "args": args}]


class Case(NamedTuple):
    """A shape of the plan (kda's case parameters), small (checked in numsim) or large
    (timed)."""

    name: str
    B: int
    T_: int
    H: int
    lens: object = None        # a varlen pack's lengths, or None
    gate: str = "mixed"
    small: bool = True

    def params(self):
        return dict(B=self.B, T_=self.T_, H=self.H, lens=self.lens)


CASES = [
    # the smallest: one 20-row chunk, saturated gates
    Case("t20_h1_deep", 1, 20, 1, gate="deep"),
    # three chunks (64, 64, 22: a tail), saturated gates
    Case("t150_h1_deep", 1, 150, 1, gate="deep"),
    # two chunks (64 + a 6-row tail) on 2 heads, mixed gates
    Case("t70_h2_mixed", 1, 70, 2),
    # a varlen pack (2 chunks, a one-token sequence, a tail) on 2 heads
    Case("pack_80_1_30_h2", 1, 111, 2, lens=(80, 1, 30)),
    # the timed shapes (issue 18's)
    Case("t8192_h96", 1, 8192, 96, small=False),
    Case("t8192_h64", 1, 8192, 64, small=False),
]



def _check_cases():
    """Every case's shape rules at import, as T.suite checks a suite's (a shape some launch
    cannot run is refused here, not simulated or timed into a wrong answer)."""
    for c in CASES:
        bad = constraints(**c.params())
        if bad:
            raise ValueError(f"kda_fwd_bwd case {c.name!r}: " + "; ".join(bad))


_check_cases()
