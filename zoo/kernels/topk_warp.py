"""Top-k per row, one warp per row: the row read once from HBM, the selection hidden under the loads.

Same contract as `topk.py` (values and int64 indices of the k largest, largest first, ties to the
lower index, -0.0 below +0.0, no NaN inputs, k <= 64), same reference, inputs and baselines.

Why another variant: `topk_*_pipe` selects a row with the whole CTA: ~8 radix passes over the
candidates, each two ``bar.sync`` behind a serial warp-0 digit scan, so an SM spends ~5 us per
row on a chain of barriers with little in flight: selection bound (57% of copy bandwidth at
4096 x 32768 f32, 36% for bf16; docs/TUNING.md "topk_warp"). Here a row belongs to ONE warp and
an SM streams 16 rows at once: no CTA barrier anywhere, so while one warp selects, the others'
copies keep HBM busy, and what counts is instructions per element, not latency.

Per warp, persistent over rows ``w, w + W, ...`` (W warps in the grid):
1. stream (`_Ring`): a per-warp ring of STAGES 16-byte vectors per lane in shared memory, filled
   by ``cp.async.cg.shared.global`` one commit group per step of VECS vectors, STAGES - VECS
   vectors per lane in flight; the ring runs across the warp's rows, so the next row streams in
   while this one is selected. Cursors are byte offsets and a 64-bit pointer (adds only);
2. filter: a running threshold ``thr`` (f32): per vector the lane's maximum (``max.f32``; bf16
   ``max.bf16x2``), one ``vote.any.sync`` per step; a lane whose vector reaches ``thr`` builds a
   bit mask of its elements that do and appends them one round each (usually one), re-read by
   index from the ring: slot by ``atom.shared.add.u32`` on the warp's counter, the (raw bits,
   column) pair into the warp's candidate buffer (CAP pairs);
3. refine: before a step whose vectors could overflow the buffer (more than CAP - VECS * 32 *
   VEC entries), the warp keeps exactly the k largest (key, then lowest column), compacted, and
   raises ``thr`` to the k-th key's float. Elements dropped now or later rank below k kept ones,
   so the answer stays exact. The selection is a bitwise binary search, no histogram: each lane
   counts its CAP/32 buffered keys at or above a candidate (``setp``, ``@p add``) and
   ``redux.sync.add.u32`` sums the warp, one bit a round (32 rounds f32, 16 bf16); among keys
   equal to the k-th, 16 rounds over the column pick the lowest ones, only when more are equal
   than needed (a uniform branch). No hot bins, no barrier but ``bar.warp.sync``;
4. the row starts from the previous row's guess: the top 16 key bits of its rank 2k+16 entry (one
   more search in the final refine's rounds), so a row like the previous one buffers ~2k
   elements and needs no refine before its end; the first row of a warp starts from -inf. If
   fewer than k elements reach the guess (a row unlike the last), it is read again from global
   memory from -inf: exact either way;
5. at the row's end one more refine (over 8 entries per lane when at most 256 are buffered)
   leaves the k winners in slots 0..k-1; lanes rank them (larger key, then lower column, against
   all k by broadcast 16-byte shared loads) and store.

STRICT=1 (session 7, the `_st` cases; docs/TUNING.md "topk_warp, corrected"): after a refine the
threshold is the float of the k-th key + 1, so elements EQUAL to the k-th (which rank below every
kept entry: their columns are higher) are no longer appended. Without it a row of ties passes
the filter thousands of times (the suite's row 0: 123k warp-instructions against ~21k for a
normal row, which made warp 0 the kernel's tail); the carried guess stays a ``>=`` threshold.
A row that ends with over a quarter of its buffered entries equal to the k-th carries -inf to
the next (which would otherwise miss the guess and be read twice).

APPEND=1 (session 9, the `_a` cases; docs/TUNING.md "topk (session 9, branch topk5)"): a
step's elements that reach thr are appended in warp-converged rounds (`_append_rounds`: one
``vote.ballot`` a round, the slot from a counter register and ``popc``; no shared atomic, no
shared counter load, no divergent loop), and a refine runs only before a round that would
overflow CAP, so CAP no longer grows with VECS: 2 KB steps (VECS 4 f32, bf16) with CAP 256.
The session-9 measurements say a warp's time goes per step (commit group), whatever its bytes
(f32's 1 KB and bf16's 512 B steps both ~1380 cycles): bytes per step are the lever.

FE (session 10, the `_f5`/`_f6` cases; docs/TUNING.md "topk and cumsum (session 10, branch
scan7)"): the row end's short refine looks at FE entries per lane instead of min(8, CAP/32) when
at most 32 FE are buffered. The three `_st_a_v4` sizes move the same bytes and differ by ~7.7 us
per row per warp, the row end not hidden by the streaming: fewer entries, fewer instructions on
that chain. SKEW (ns, the `_sk` cases): the CTA's warps start in 4 phases SKEW ns apart (one
``nanosleep.u32``), so that an SM's warps stop ending their rows at the same moment, with the
HBM idle, if that is what they do (the hypothesis the `_sk` cases test).

GUESS=1 (session 11, the `_g1` cases; docs/TUNING.md "top-k (session 11, branch topk8)"): the
cut of a short row's guess to 12 key bits is idempotent, so a warp's first row (its buffer holds
only what followed its last refine: ~66 entries at k 50) hands the next rows a guess that only
~k elements reach, until one row has fewer and is read again from global memory (12.7% of 8-row
warps at 8192 columns in a numpy model of the rule, 1 in 16 in numsim). GUESS=1 starts the next
row from rank 3k/2 + 16 and lowers the guess of a row that ended with fewer than 5k/4 entries
by one 12-bit unit (1/8 octave): no second read in the model's 300 warps, ~2% fewer appends.

FUSE=1 (session 11, the `_fu` cases): the final refine leaves each winner as one u64 (key high,
0xFFFF - column low), so "ranks above" is one ``setp.gt.u64`` and a lane ranks its cdiv(k, 32)
entries in one pass over k/2 broadcast loads (`_store_fused`): ~490 fewer PTX a row at k 50, and
k = 50 compiles to 61-88 registers instead of 128, so 32 warps an SM fit (`_w32`).

SEED=1 (session 13, the `_sd` cases; docs/TUNING.md "top-k (session 13, branch topk9)"): a
warp's first row no longer starts from -inf (~2x a later row's work: 8.6k against 4.0k PTX at
8192 k 50, 18.0k against 10.4k at 32768 k 64, its refines over ~500+ early appends) but from the
j-th largest of the 32 lanes' maxima over the row's first steps, those the ring holds before the
loop (`_seed`: S x VECS ``ld.shared.v4`` and ``max`` a lane, j rounds of ``redux.sync.max.u32``;
j the least rank that a Poisson model of the sample puts below k row elements at most 2% of the
time, `_seed_rank`; none where j would exceed 24). A row that fewer than k elements reach is read
again from -inf (the fallback of 4.): exact either way. Every warp has a first row, so the
saving is every warp's, and all of `_w32` at 32768 f32 (one row a warp).

SEED=2 (session 14, the `_sd2` cases; docs/TUNING.md "top-k (session 14, branch topk10)"): the
same seed at a rank from a 1e-4 Poisson bound a row instead of 2%. The kernel's time is its
slowest warp's, and a missed row's second read runs one dependent HBM round trip a step from
-inf (numsim: 25.1k PTX against 9.1k seeded at f32 32768 `_v8`): scan9's timed input missed 3
of 2112 first rows there (2 at bf16 `_v4`, 37 of 4096 at f32 `_w32`; benchmarks/
topk_seed_model.py), and those items ran 23-37% slower. The deeper rank appends ~280-360
elements a first row instead of ~185-210 and misses none of 12-24k replayed rows.

PK=1 (session 15, the `_pk` cases, bf16 only; docs/TUNING.md "top-k (session 15, branch
topk11)"): a later bf16 row's largest share of instructions was the hit vectors' pass masks
(numsim: 31% of its PTX; 29-30 SASS a vector: 8 elements expanded to f32, ``FSETP``, ``SEL``, an
add tree). The threshold is always a bf16 value (or a NaN) at bf16, so each word's two halves are
compared with its bf16 in place (``mov.b32 {lo, hi}``, ``setp.ge.bf16`` x 2: one ``HSETP2``) and
the bits OR'ed in under the predicates (13-15 SASS a vector); the reach test compares the packed
maximum's halves the same way. The same elements pass: outputs bit-identical to PK=0.

iket (session 22): each step's ``cp.async.wait_group`` is a `wait` range, the row's end (the
final refine, ranking and store) a `row_end`, a second read an `again` inside it and the first
row's seed a `seed`; nothing in a normal build. ``tirxh profile --iket`` then shows whether a
warp waits for its data, spends its time at the row end, or ends early beside slower warps
(`benchmarks/item_timeline.py` reduces the trace to those shares). A step of more than 32
elements (bf16 VECS 8, `_v8`: 4 KB steps, as f32's) is filtered and appended as groups of
32 / VEC vectors, one APPEND mask and one ``vote.any`` each, under one commit group and wait.

BULK=1 (session 22, the `_bk` cases; `_BulkRing`): the same ring filled by lane 0's ONE
``cp.async.bulk`` a step on the step slot's mbarrier instead of each lane's ``cp.async``s: a
question about the memory path (does the TMA engine stream these rows better?), not about
instructions (numsim: +3% PTX a row). Since session 30 it also runs the counter's walk (DYN,
TAKE, QUEUES: `_ta2_q8_bk`): the mains' ncu profiles put the L2 nearer its peak than the DRAM
(H200, f32 8192: 88.5% against 83.4%) while the copy's TMA stream costs the L2 0.92 of its
DRAM throughput (H100), so the question is asked again at the mains.

SORT=1 (session 22, the `_so` cases; `_sorted_end`): a row that ends with at most 128
buffered entries is finished by ONE bitonic sort of u64 entries (key high, 0xFFFF - column low)
across the warp, 4 a lane, instead of the final refine's keybits + 16 dependent ``redux.sync``
rounds and the ranking's k/2 broadcast loads: the k first are stored as they stand and the next
row's guess is what the refine would have set (outputs and appends identical in numsim).
Measured (session 23): 0.919x at f32 8192 (78.5% of copy bandwidth), no gain at bf16.

DYN=1 (session 23, the `_dyn` cases): rows from a self-resetting counter (`tickets.take_item`,
the decode's DYN scheme) instead of the static walk w, w + W, ...: the ring's issue cursor takes
the next row when it reaches a row's end (lane 0's ``atom.add``, one ``shfl.sync``), and the
consumer takes the cursor's row at its own row end (the cursor is less than a row ahead: a
constraint). Why: iket timelines (session 23) put the static walk's tail at 21% of the kernel at
f32 8192 (the last warp 181 us, the SMs' median 143) and 13% at bf16 with 32 warps an SM.
Measured (session 23): 0.978-0.982x at bf16 with 32 warps an SM (84.0% of copy bandwidth), no
gain at 16 warps or at f32 8192, where a row is ~17 us of a warp and the tail stays a row long.

GUESS=2 (session 24, the `_g2fu` cases; docs/TUNING.md "a persistent kernel whose timeline's
last warps each hold a long fallback range"): session 23's f32 8192 traces hold 5-7 rows read a
second time (22-96 us each), and those warps end the kernel: a row's guess is the previous row's
rank-91 value, which fewer than k of the next row reach ~1e-4 of the time (both rows vary). The
next row's guess key is the mean of the last guess's and this row's (`_Buffer._mix_guess`), or
this row's cut to 12 bits where there is no handed-on guess before (a warp's first row, a row
read twice, after a row of ties): ~6e-6 misses a row in benchmarks/topk_guess_model.py.
Measured (session 25, an H100): 0.924x at f32 8192 `_dyn`, 0.982x on the static walk, 1.00x
at bf16; its trace still held 2 second reads in 16,384 rows, both a warp's second row: the
model had started each chain from -inf, the kernel from SEED's threshold, which leaves a first
row short (~60-90 entries) and its cut key the whole hand-on. Since session 25 such a row (no
guess before it, fewer than the rank's entries) hands on one 12-bit unit lower (the model with
seeded first rows: 5e-5 -> 6e-6 misses a row).

SPLIT=2 (session 24, the `_sp2` cases): the work items are half rows, the input seen as 2 rows
x cols / 2 of the same bytes, so the ring, the guess, the seed and the counter run unchanged over
items. An item's k go to `pvalues` / `pindices` (its slot), lane 0 counts it in on the row's
`pcount` (``atom.acq_rel.gpu`` after ``bar.warp.sync``), and the second of the two (an odd
count: the counter grows by 2 a row a launch, never cleared) loads both halves' k from the L2
and stores the first k of one bitonic sort (`_merge_halves`). Why: at 32768 columns a warp
held one or two rows of 50-75 us (session 23's bf16 timeline; f32 32768 `_w32` one row a warp),
so the kernel ended with its slowest warp's last row; half rows halve that granularity for
k x 12 (f32) or 10 (bf16) bytes a half row written and read back (~1%). Measured (session 25,
an H100): 1.123x (f32 32768) and 1.083x (bf16) the time of the whole-row controls, refuted:
the tail shrank (bf16 11.5 -> 7.4 us) but an item's end with the merge costs 14.8 us against
a whole row's 4.6 (iket). Kept as the measured record.

GFETCH (session 25): a row read a second time (from -inf, the fallback of 4.) appends tens of
elements before its buffer's k-th filters the rest; each was fetched again from global memory
by its index (GFETCH=1, kept as the control): one dependent round trip an append, 129-136 us a
second read of an f32 8192 row in session 25's H100 trace, on a kernel of ~200 us. Now
(GFETCH=0, every case) it is picked from the step's vectors in registers by a ``selp`` tree on
its index (`_register_bits`), so a second read costs its 8-16 load round trips and a first
row's filtering.

Every `cols` that is a multiple of VEC works (vectors past the row are neither copied nor
examined); rows wider than 65536 columns (16-bit column search), k > 64 and rows * cols >= 2^32
are refused when the suite is declared.

Tags: radix-select, warp-per-row, threshold-filter, cp-async, warp-ballot, redux, persistent,
iket, bulk-copy, mbarrier, bitonic-sort, dynamic-scheduling, split-merge
Work: the row read once; numsim counts (PTX warp-instructions per row, normal data, a warp's
first row / later rows): f32 32768 k64 21.1k / 12.9k, f32 8192 k50 9.9k / 5.5k, bf16 32768 k64
22.8k / 13.0k.
"""
import contextlib
import math
import sys
from pathlib import Path

import numpy as np

import tirxh.lang as T
from tirxh.core import ir

# the zoo is a directory of kernel files, not a package: tirxh's collection puts it on sys.path,
# a test that loads this file by path does not
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
import topk as _tk  # noqa: E402  (after the path set-up above)
from tickets import ask_ticket, take_item, ticket_item32  # noqa: E402

TAGS = ("radix-select", "warp-per-row", "threshold-filter", "cp-async", "warp-ballot", "redux",
        "persistent", "iket", "bulk-copy", "mbarrier", "bitonic-sort", "dynamic-scheduling",
        "split-merge")

FULL = 0xFFFFFFFF
MAX_COLS = 1 << 16
MAX_SKEW = 250_000  # ns: the last of 4 phases sleeps 3 SKEW, nanosleep's limit is 1 ms
NEG_INF = float("-inf")
# the next row starts from this row's value of rank 2k + 16: a row like it holds ~that many
# elements above it, fewer than k only ~4 standard deviations down (~sqrt(2 * rank) each)
GUESS_MULT, GUESS_PLUS = 2, 16


# SEED=1 (session 13): a warp's first row starts from the j-th largest of its 32 lane maxima over
# the row's steps already in the ring, j the least rank that a Poisson model of the sample puts
# below k elements of the row at most SEED_MISS of the time (a miss reads the row again: exact)
SEED_MISS = 0.02
SEED_MAX_RANK = 24   # beyond it the lane maxima (32, one per lane) say too little: no seed
# SEED=2 (session 14, branch topk10): the bound a GRID needs, not a row. The kernel's time is its
# slowest warp's, and a missed first row reads the row again from global memory, one dependent
# HBM round trip a step from -inf (+16k PTX and 32 steps in series at f32 32768 `_v8`): scan9's
# 2% bound let 3 of 2112 first rows miss at f32 32768 `_v8_sd` (the timed input, seed 1; 2 of
# 2112 at bf16 `_v4_sd`, 37 of 4096 at f32 `_w32_sd`), and each such warp ended ~35-57 us late.
# 1e-4 by the Poisson bound is <= 4e-7 a row in a semi-analytic model of the lane maxima (~0.001
# misses expected over a grid's 2112-4224 first rows; benchmarks/topk_seed_model.py)
SEED_MISS_BY_MODE = {1: SEED_MISS, 2: 1e-4}


def _seed_rank(k, cols, sample, miss=SEED_MISS):
    """The rank j of the first row's seed among the lane maxima of `sample` elements of a row of
    `cols`, or None (no seed: the row starts from -inf). Row elements above the sample's j-th
    largest number ~(cols / sample) x Gamma(j), so fewer than k reach it with probability
    P(Poisson(k x sample / cols) >= j), at most `miss`; the lane maxima's j-th largest is at most
    the sample's (two of the top j in one lane lower it), which only makes a miss rarer."""
    lam = k * sample / cols
    term, below = math.exp(-lam), 0.0       # P(Poisson(lam) = i), P(Poisson(lam) < i)
    for j in range(1, SEED_MAX_RANK + 1):
        below += term
        if 1.0 - below <= miss:
            return j
        term *= lam / j
    return None


def _guess_rank(k, guess):
    """The rank whose value the next row starts from: 2k + 16 (GUESS=0), 3k/2 + 16 (GUESS=1,
    session 11: fewer appends a row, the short-row rule in `refine` keeps rows from missing)."""
    return k * GUESS_MULT + GUESS_PLUS if guess == 0 else (3 * k) // 2 + GUESS_PLUS


def _elements(words, dt):
    """The f32 values of one 16-byte vector in column order (bf16: the low half of a word is the
    lower column; expanded exactly, ``shl.b32`` / ``and.b32``)."""
    if dt == "f32":
        return list(words)
    out = []
    for w in words:
        out.append(T.ptx.mov.f32(T.ptx.shl.b32(w, 16)))
        out.append(T.ptx.mov.f32(T.ptx.and_.b32(w, 0xFFFF0000)))
    return out


def _element_bits(word, j, dt):
    """Element j's f32 bits from the 32-bit word holding it (bf16: shifted to the top half;
    the low half of a word is the lower column)."""
    if dt == "f32":
        return word
    return T.ptx.shl.b32(T.ptx.shr.u32(word, T.ptx.shl.b32(T.ptx.and_.b32(j, 1), 4)), 16)


def _global_bits(x, index, dt):
    """Element `index`'s f32 bits from global memory (bf16: a 16-bit load, shifted up)."""
    if dt == "f32":
        return T.ptx.ld.global_.nc.b32(x.at(index))
    return T.ptx.shl.b32(T.ptx.cvt.u32.u16(T.ptx.ld.global_.nc.u16(x.at(index))), 16)


def _register_bits(words, e, dt):
    """Element e's f32 bits from a lane's vectors in registers (`words`: vector u's word i at
    4 u + i; f32: element e is word e, bf16: half e % 2 of word e / 2), by a tree of ``selp``
    on e's bits. A second read's appends take their elements here: fetching each by its index
    from global memory was one dependent round trip an append, ~50 of them a row from -inf
    (session 25's H100 trace: 129-136 us a second read of an 8192-column f32 row)."""
    level = list(words)
    idx = e if dt == "f32" else T.ptx.shr.u32(e, 1)
    bit = 0
    while len(level) > 1:
        one = T.ptx.and_.b32(idx, 1 << bit) != 0
        level = [T.ptx.selp.b32(level[i + 1], level[i], one) if i + 1 < len(level)
                 else level[i] for i in range(0, len(level), 2)]
        bit += 1
    return _element_bits(level[0], e, dt)


def _vector_max(words, dt):
    """The largest element of one 16-byte vector as f32: 3 ``max.f32`` (f32) or 3 ``max.bf16x2``
    and the larger of the two halves (bf16)."""
    if dt == "f32":
        a, b, c, d = words
        return T.ptx.max.f32(T.ptx.max.f32(a, b), T.ptx.max.f32(c, d))
    a, b, c, d = words
    m = T.ptx.max.bf16x2(T.ptx.max.bf16x2(a, b), T.ptx.max.bf16x2(c, d))
    return T.ptx.max.f32(T.ptx.mov.f32(T.ptx.shl.b32(m, 16)),
                         T.ptx.mov.f32(T.ptx.and_.b32(m, 0xFFFF0000)))


def _bf16_of(thr):
    """PK=1 (session 15): the threshold as a bf16 register, its top 16 bits. Exact: at bf16 every
    value `thr` takes is a bf16 value expanded (a refine's k-th key or key + 1, the carried guess,
    the seed, -inf) or a NaN whose top half is a bf16 NaN (STRICT past +inf), so ``>=`` against
    it says what the f32 compare says, ties of -0.0 and +0.0 and NaN's false included."""
    h = T.reg(T.bf16)
    T.ptx.mov.b16(h, T.ptx.cvt.u16.u32(T.ptx.shr.u32(T.ptx.mov.b32(thr), 16)))
    return h


def _halves(word):
    """PK=1: the two bf16 of a 32-bit word (low half: the lower column), unpacked with one
    ``mov.b32 {lo, hi}`` that ptxas folds into the compare's half selectors (no shift, no mask)."""
    lo, hi = T.reg(T.bf16), T.reg(T.bf16)   # written by the unpack: no init
    T.ptx.mov.b32([lo, hi], word)
    return lo, hi


def _reach_pk(words, th):
    """PK=1: whether one 16-byte bf16 vector has an element at or above `th` (a bf16): 3
    ``max.bf16x2`` and ``setp.ge.bf16`` on both halves of the result, which ptxas issues as ONE
    ``HSETP2.BF16_V2`` with two predicates, instead of expanding both halves to f32 (``IMAD.U32``,
    ``LOP3``), ``FMNMX`` and ``FSETP``."""
    a, b, c, d = words
    lo, hi = _halves(T.ptx.max.bf16x2(T.ptx.max.bf16x2(a, b), T.ptx.max.bf16x2(c, d)))
    return T.ptx.setp.ge.bf16(lo, th) | T.ptx.setp.ge.bf16(hi, th)


def _key(value, dt):
    """The order-preserving unsigned key of an (expanded) element: f32's, bf16's top 16 bits."""
    key = _tk._keys_f32(T.ptx.mov.b32(value))
    return key if dt == "f32" else T.ptx.shr.u32(key, 16)


def _value_bits(key, keybits):
    """The float bits of a key (the inverse of `_key`): flip the sign bit of a non-negative
    value's key, every bit of a negative one's."""
    top = 1 << (keybits - 1)
    flip = T.ptx.selp.b32(top, (1 << keybits) - 1, T.ptx.and_.b32(key, top) != 0)
    return T.ptx.xor.b32(key, flip)


class _Buffer:
    """A warp's candidate buffer in shared memory: CAP (raw bits, column) pairs in the warp's
    slice, its fill counter (taken with ``atom.shared.add.u32``), the running threshold `thr`
    (f32) and `guess`, the threshold a row starts from (the previous row's, see `refine`)."""

    def __init__(self, WARPS, CAP, strict=False, rounds=False, guess=0, fuse=False, pk=False):
        self.strict = strict
        self.pk = pk
        self.guess_mode = guess
        self.fuse = fuse
        self.rounds = rounds
        self.pairs = T.shared(T.u32, (WARPS * CAP * 2,), name="pairs", align=16)
        if rounds:   # APPEND=1: the counter is one register, the same in every lane
            self.n = T.reg(T.u32, init=0)
        else:
            self.fill = T.shared(T.u32, (WARPS,), name="fill")
        self.CAP = CAP
        self.lane = T.laneid()
        self.warp = T.tid.x >> 5
        self.base = self.warp * (2 * CAP)
        self.thr = T.reg(T.f32, init=NEG_INF)
        self.guess = T.reg(T.f32, init=NEG_INF)
        # GUESS=2: whether `guess` was handed on by a row's end (1) or is a seed, -inf or a
        # row of ties' reset (0): only the first is mixed into the next row's
        self.hist = T.reg(T.u32, init=0) if guess == 2 else None

    def reset(self, thr):
        """An empty buffer (lane 0 writes the counter; ``bar.warp.sync`` orders it after the
        lanes' last reads of it and before the appends of the other lanes; APPEND=1: the counter
        register) and the threshold `thr`."""
        if self.rounds:
            self.n.set(0)
        else:
            T.ptx.bar.warp.sync(FULL)
            with T.if_(self.lane == 0):
                T.ptx.st.shared.u32(self.fill.at(self.warp), 0)
            T.ptx.bar.warp.sync(FULL)
        self.thr.set(thr)

    def count(self):
        """The entries so far, the same in every lane (after ``bar.warp.sync``, which also orders
        the appends' stores before the refine's loads)."""
        T.ptx.bar.warp.sync(FULL)
        if self.rounds:   # a copy: `refine` sets the counter to k and still needs n
            return T.reg(T.u32, init=self.n)
        return T.ptx.ld.shared.u32(self.fill.at(self.warp))

    def append(self, bits, col):
        """One slot (``atom.shared.add.u32``) and the (bits, column) pair in it."""
        pos = T.ptx.atom.shared.add.u32(self.fill.at(self.warp), 1)
        T.ptx.st.shared.v2.b32(self.pairs.at(self.base + 2 * pos),  # one type per vector
                               [T.ptx.mov.b32(bits), T.ptx.mov.b32(col)])

    def _count(self, preds):
        """How many of the warp's entries satisfy their predicate: per lane ``@p add``, then
        ``redux.sync.add.u32``."""
        cnt = T.reg(T.u32, init=0)
        for p in preds:
            T.ptx.add.u32(cnt, cnt, 1, pred=p)
        return T.ptx.redux.sync.add.u32(cnt, FULL)

    def refine(self, k, keybits, dt, final=False, E=None, eq=False):
        """Keep exactly the k largest entries (key, then the lowest column), compacted to slots
        0..k-1 (as raw bits, so that every entry is keyed the same way at the next refine; as keys
        when `final`, for `store`); `thr` becomes the k-th key's float. Needs at least k entries.
        `final`: also the next row's `guess`, the float of the top 16 key bits of the entry of
        rank 2k + 16 (a value that about that many elements of a row like this one reach;
        with fewer buffered, of the smallest entry, cut to 12 bits). `eq`: returns the k-th
        key's float (the ``>=`` threshold even when STRICT, for elements of the step being
        appended, whose columns may lie below kept ones: see `_append_rounds`)."""
        E = E or self.CAP // 32            # entries per lane looked at (n <= 32 E)
        n = self.count()
        valid = [(self.lane + 32 * e) < n for e in range(E)]
        keys = [T.reg(T.u32, init=0) for _ in range(E)]  # empty slots: key 0 is never counted
        at = [self.pairs.at(self.base + 2 * (self.lane + 32 * e)) for e in range(E)]
        for e in range(E):   # the columns stay in shared memory (fewer registers)
            T.ptx.ld.shared.u32(keys[e], at[e], pred=valid[e])
            T.ptx.mov.u32(keys[e], _key(keys[e], dt), pred=valid[e])

        def col(e):
            c = T.reg(T.u32, init=0)
            T.ptx.ld.shared.u32(c, self.pairs.at(self.base + 2 * (self.lane + 32 * e) + 1),
                                pred=valid[e])
            return c
        # the k-th largest key, one bit a round from the top; at the row's end also the
        # rank 2k + 16 key's top 16 bits in the same rounds
        kth = T.reg(T.u32, init=0)
        rank = T.reg(T.u32, init=_guess_rank(k, self.guess_mode))
        if final:
            T.ptx.min.u32(rank, rank, n)   # fewer buffered: the smallest entry (see below)
        far = T.reg(T.u32, init=0)
        for bit in range(keybits - 1, -1, -1):
            t = T.ptx.or_.b32(kth, 1 << bit)
            T.ptx.mov.u32(kth, t, pred=self._count([key >= t for key in keys]) >= k)
            if final and bit >= keybits - 16:
                tf = T.ptx.or_.b32(far, 1 << bit)
                T.ptx.mov.u32(far, tf, pred=self._count([key >= tf for key in keys]) >= rank)
        need = T.reg(T.u32, init=k)        # of the entries equal to kth
        T.ptx.sub.u32(need, need, self._count([key > kth for key in keys]))
        ties = self._count([key == kth for key in keys])
        last = T.reg(T.u32, init=0xFFFF)   # the highest column kept among ties
        with T.if_(ties > need, uniform=True):   # more equal than needed: the lowest columns
            last.set(0)
            for bit in range(15, -1, -1):
                t = T.ptx.or_.b32(last, 1 << bit)
                lower = self._count([(key == kth) & (col(e) < t) for e, key in enumerate(keys)])
                T.ptx.mov.u32(last, t, pred=lower < need)
        # compaction in place: entry e's slot (lane + 32e) is read in round e, and round e
        # writes only slots below 32(e + 1) (a kept entry moves down), so one bar.warp.sync per
        # round (its reads before its writes) orders every read before the write over it
        kept = T.reg(T.u32, init=0)
        below = T.sreg("lanemask_lt")
        for e, key in enumerate(keys):
            c = col(e)
            keep = (key > kth) | ((key == kth) & (c <= last))
            b = T.ptx.vote.ballot.sync.b32(keep, FULL)
            pos = kept + T.ptx.popc.b32(T.ptx.and_.b32(b, below))
            stored = key if final else _raw_bits(key, keybits)   # appends after it are raw
            T.ptx.bar.warp.sync(FULL)
            if final and self.fuse:   # one u64 per entry, key high, 0xFFFF - column low
                T.ptx.st.shared.v2.u32(self.pairs.at(self.base + 2 * pos),
                                       [T.ptx.xor.b32(c, 0xFFFF), stored], pred=keep)
            else:
                T.ptx.st.shared.v2.u32(self.pairs.at(self.base + 2 * pos), [stored, c],
                                       pred=keep)
            kept.set(kept + T.ptx.popc.b32(b))
        if self.rounds:
            self.n.set(k)
        else:
            with T.if_(self.lane == 0):
                T.ptx.st.shared.u32(self.fill.at(self.warp), k)
        T.ptx.bar.warp.sync(FULL)
        if self.strict and not final:
            # STRICT: every later element has a higher column than the k kept ones, so one equal
            # to the k-th ranks below all of them: the filter passes only keys above it (the
            # float of key + 1; past +inf a NaN, which nothing reaches). A row of ties stops
            # appending its tied value after the first refine.
            self.thr.set(_key_float(kth + 1, keybits))
        else:
            self.thr.set(_key_float(kth, keybits))
        if final:
            self.hand_on_guess(far, n, lambda: ties, k, keybits)
        return _key_float(kth, keybits) if eq else None

    def sorted_end(self, row, k, values, indices, keybits, dt):
        """SORT=1: the row's end by one sort (`_sorted_end`): the k first stored, `guess` set."""
        _sorted_end(self, row, k, values, indices, keybits, dt)

    def store(self, row, k, values, indices, keybits, dt):
        """The k entries of slots 0..k-1 ranked (larger key, then lower column, against all k by
        broadcast 16-byte loads: two pairs each) and stored."""
        if self.fuse:
            self._store_fused(row, k, values, indices, keybits, dt)
            return
        for h in range(T.cdiv(k, 32)):
            j = self.lane + 32 * h
            mine = j < k
            mk = T.reg(T.u32, init=0)
            mi = T.reg(T.u32, init=0)
            T.ptx.ld.shared.v2.u32([mk, mi], self.pairs.at(self.base + 2 * j), pred=mine)
            rank = T.reg(T.u32, init=0)
            for i0 in range(0, k, 2):
                if i0 + 2 <= k:
                    w = T.ptx.ld.shared.v4.u32(self.pairs.at(self.base + 2 * i0))
                    others = [(w[0], w[1]), (w[2], w[3])]
                else:
                    others = [tuple(T.ptx.ld.shared.v2.u32(self.pairs.at(self.base + 2 * i0)))]
                for ok, oi in others:
                    T.ptx.add.u32(rank, rank, 1, pred=(ok > mk) | ((ok == mk) & (oi < mi)))
            with T.if_(mine):
                out = row * k + rank
                bits = _value_bits(mk, keybits)
                if dt == "f32":
                    T.ptx.st.global_.b32(values.at(out), bits)
                else:
                    T.ptx.st.global_.b16(values.at(out), T.ptx.cvt.u16.u32(bits))
                T.ptx.st.global_.u64(indices.at(out), T.ptx.cvt.u64.u32(mi))
        T.ptx.bar.warp.sync(FULL)          # ranked before the next row's appends overwrite

    def _store_fused(self, row, k, values, indices, keybits, dt):
        """FUSE=1 (session 11): the final refine left each entry as one u64, key in the high
        word and 0xFFFF - column in the low, so "ranks above" (larger key, then lower column) is
        one ``setp.gt.u64``, and a lane ranks its cdiv(k, 32) entries in ONE pass over the
        broadcast 16-byte loads (two entries each): k/2 loads and k x cdiv(k, 32) compares,
        against cdiv(k, 32) passes of k/2 loads and k x 6 instructions. At k = 50 the separate
        passes also made ptxas keep the 25 loaded vectors live across them (128 registers, where
        k = 64 took 68): the fused pass needs two ranks and two entries."""
        entries = []
        for h in range(T.cdiv(k, 32)):
            j = self.lane + 32 * h
            me = T.reg(T.u64, init=0)
            T.ptx.ld.shared.u64(me, self.pairs.at(self.base + 2 * j), pred=j < k)
            entries.append((j < k, me, T.reg(T.u32, init=0)))
        for i0 in range(0, k, 2):
            if i0 + 2 <= k:
                others = T.ptx.ld.shared.v2.u64(self.pairs.at(self.base + 2 * i0))
            else:
                others = [T.ptx.ld.shared.u64(self.pairs.at(self.base + 2 * i0))]
            for other in others:
                for _, me, rank in entries:
                    T.ptx.add.u32(rank, rank, 1, pred=other > me)
        for mine, me, rank in entries:
            with T.if_(mine):
                _store_entry(values, indices, row * k + rank, me, keybits, dt)
        T.ptx.bar.warp.sync(FULL)          # ranked before the next row's appends overwrite

    def hand_on_guess(self, far, n, ties, k, keybits):
        """The next row's `guess` from `far`, the top 16 key bits of the entry of rank min(R,
        n) (R = `_guess_rank`), at a row's end (`refine` final, `_sorted_end`); `ties()`: the
        entries equal to the k-th (STRICT only)."""
        # fewer than that rank buffered: exactly n elements of this row reach the
        # smallest of them (none above it was dropped), so a row like it may hold fewer
        # than k: start lower, the key cut to its top 12 bits (at most 1/8 of an octave)
        T.ptx.and_.b32(far, far, ((1 << keybits) - 1) ^ ((1 << (keybits - 12)) - 1),
                       pred=n < _guess_rank(k, self.guess_mode))
        if self.guess_mode:
            # GUESS=1 (session 11): the cut is idempotent, so a short row (a warp's first,
            # whose buffer holds only what followed its last refine) hands the next row a
            # guess that k-ish elements reach, and that row hands on the same guess: on
            # 8192-column normal rows 12.7% of 8-row chains missed it once (a second read
            # from global memory, +6.8k warp-instructions on that warp; a numpy model of
            # this rule, docs/TUNING.md "top-k (session 11, branch topk8)"). Below 5k/4
            # entries, one 12-bit unit lower (1/8 octave), not below -inf's key.
            unit = 1 << (keybits - 12)
            low = T.ptx.sub.u32(T.ptx.max.u32(far, unit), unit)
            lower = (n * 4) < 5 * k
            if self.guess_mode == 2:
                # session 25: a short row with no guess handed on before it (a warp's seeded
                # first row: SEED=1's threshold leaves ~60-90 entries) lowers by one unit too.
                # The cut alone lowers by 0-1 unit, so its successor missed ~2e-4 of the time
                # (the H100 trace's 2 second reads, both a warp's second row; the guess model
                # with seeded first rows: 5e-5 misses a row, 6 of 8 on second rows -> 6e-6)
                lower = lower | ((n < _guess_rank(k, 2)) & (self.hist == 0))
            T.ptx.max.u32(far, low, (0x007FFFFF >> (32 - keybits)), pred=lower)
        if self.guess_mode == 2:
            self._mix_guess(far, keybits)
        self.guess.set(_key_float(far, keybits))
        if self.strict:
            # a row where over a quarter of the buffered entries equal the k-th (a row of
            # ties: the strict filter dropped the rest of them) predicts nothing about the
            # next; that one starts from -inf through the ring (a first row's cost) instead
            # of missing the guess and reading the row again from global memory, one
            # dependent load round trip a step. Exact either way.
            T.ptx.mov.f32(self.guess, NEG_INF, pred=ties() * 4 > n)
            if self.guess_mode == 2:
                T.ptx.mov.u32(self.hist, 0, pred=ties() * 4 > n)

    def _mix_guess(self, far, keybits):
        """GUESS=2 (session 24): the next row's guess key halfway between the last guess's and
        this row's `far`, so that one row's luck moves it half as far. The count of a row's
        elements at or above the previous row's rank-R value varies with both rows (~sqrt(2R)):
        at R = 91, k = 50 a row misses ~1e-4 of the time, and each miss reads the row again from
        global memory, 22-96 us, at the kernel's end (session 23's traces: 5 and 7 second reads
        a launch at f32 8192, the last warps). A running mean leaves mostly the next row's own
        variance (0 misses in 120k modelled rows; benchmarks/topk_guess_model.py). Without a
        handed-on guess before (a warp's first row, after a second read or a row of ties) there
        is nothing to mix: the key is cut to 12 bits (at most 1/8 octave lower) instead."""
        top12 = ((1 << keybits) - 1) ^ ((1 << (keybits - 12)) - 1)
        fresh = self.hist == 0
        T.ptx.and_.b32(far, far, top12, pred=fresh)
        prev = _key(self.guess, "f32" if keybits == 32 else "bf16")
        mixed = T.ptx.add.u32(T.ptx.shr.u32(prev, 1), T.ptx.shr.u32(far, 1))
        # two -inf keys would average one below -inf's: a NaN threshold that nothing reaches
        T.ptx.max.u32(far, mixed, (0x007FFFFF >> (32 - keybits)), pred=~fresh)
        self.hist.set(1)

    def forget_guess(self):
        """GUESS=2: the row was read again (its guess missed): hand on from this row alone."""
        if self.guess_mode == 2:
            self.hist.set(0)


SORT_N = 128   # SORT=1: the row end's bitonic sort, 4 entries a lane


def _bitonic_sort(ents, lane):
    """The warp's 4 x 32 u64 entries (entry e of lane l is index 4 l + e) sorted descending by
    one bitonic network: 13 stages within a lane, 15 by ``shfl.sync.bfly`` (`_sorted_end`)."""
    ents = list(ents)

    def exchange(lo, hi, desc):
        """Entries `lo` < `hi` (by index) of one lane ordered: the larger first where `desc`."""
        gt = ents[lo] > ents[hi]
        mx = T.ptx.selp.b64(ents[lo], ents[hi], gt)
        mn = T.ptx.selp.b64(ents[hi], ents[lo], gt)
        if desc is True:
            ents[lo], ents[hi] = mx, mn
        elif desc is False:
            ents[lo], ents[hi] = mn, mx
        else:
            ents[lo], ents[hi] = T.ptx.selp.b64(mx, mn, desc), T.ptx.selp.b64(mn, mx, desc)

    size = 2
    while size <= SORT_N:
        j = size // 2
        # a block of `size` indices sorts descending where (index & size) == 0
        if size == SORT_N:
            desc = True
        elif size == 2:
            desc = None   # by entry: e & 2
        else:
            desc = (lane & (size // 4)) == 0
        while j >= 1:
            if j < 4:     # both entries in this lane
                for e in range(4):
                    if e & j == 0:
                        exchange(e, e | j, (e & 2 == 0) if desc is None else desc)
            else:         # the partner is lane ^ (j / 4): keep this entry if it should be the
                d = j // 4   # larger (the lower index of a descending block, the higher of
                low = (lane & d) == 0    # an ascending one) and it is, or the smaller and is
                same = low if size == SORT_N else low ^ desc   # take the larger: ~same
                for e in range(4):
                    lo32, hi32 = T.reg(T.u32), T.reg(T.u32)
                    T.ptx.mov.b64([lo32, hi32], ents[e])
                    other = T.ptx.mov.b64([T.ptx.shfl.sync.bfly.b32(lo32, d, 0x1F, FULL),
                                           T.ptx.shfl.sync.bfly.b32(hi32, d, 0x1F, FULL)])
                    gt = ents[e] > other
                    if size == SORT_N:   # take the larger where low: the other where gt != low
                        ents[e] = T.ptx.selp.b64(other, ents[e], gt ^ same)
                    else:                # take the larger where low == desc
                        ents[e] = T.ptx.selp.b64(ents[e], other, gt ^ same)
            j //= 2
        size *= 2
    return ents


def _sorted_end(buf, row, k, values, indices, keybits, dt):
    """SORT=1 (session 22): the row's end over at most SORT_N buffered entries as ONE bitonic
    sort of u64 entries (key high, 0xFFFF - column low: larger key, then lower column, first)
    across the warp, 4 a lane (index 4 lane + e): 13 stages within a lane, 15 by
    ``shfl.sync.bfly`` (7 PTX an entry each), no ``redux`` chain. The final refine it replaces
    runs 48 (f32) or 32 (bf16) dependent rounds of count + ``redux.sync`` and the ranking k/2
    broadcast loads, a ~2-4k-cycle chain during which the warp's ring asks for nothing (docs/
    TUNING.md "top-k (session 22)"). After the sort rank r sits in lane r / 4, entry r % 4: the
    k first are stored as they stand, the k-th's key (for STRICT's tie rule) and the guess's
    rank entry come by one ``shfl.sync.idx`` each. `guess` is set exactly as `_Buffer.refine`
    (final) sets it, so the rows after it run as they did."""
    n = buf.count()
    lane = buf.lane
    ents = []
    for e in range(4):   # slot lane + 32 e: conflict-free loads (where an entry starts is free)
        slot = lane + 32 * e
        ok = slot < n
        bits = T.reg(T.u32, init=0)
        col = T.reg(T.u32, init=0)
        T.ptx.ld.shared.v2.u32([bits, col], buf.pairs.at(buf.base + 2 * slot), pred=ok)
        ent = T.reg(T.u64, init=0)   # empty: 0, below every entry (a real key is never 0)
        T.ptx.mov.b64(ent, T.ptx.mov.b64([T.ptx.xor.b32(col, 0xFFFF), _key(bits, dt)]), pred=ok)
        ents.append(ent)
    T.ptx.bar.warp.sync(FULL)   # read before the next row's appends overwrite

    ents = _bitonic_sort(ents, lane)

    def key_at(rank):
        """The key (high word) of the entry of `rank` (1-based; a register or an int)."""
        r = rank - 1
        if isinstance(r, int):
            hi = T.ptx.cvt.u32.u64(ents[r % 4] >> 32)
            return T.ptx.shfl.sync.idx.b32(hi, r // 4, 0x1F, FULL)
        e = r & 3
        ent = T.ptx.selp.b64(ents[1], ents[0], e == 1)
        ent = T.ptx.selp.b64(ents[2], ent, e == 2)
        ent = T.ptx.selp.b64(ents[3], ent, e == 3)
        return T.ptx.shfl.sync.idx.b32(T.ptx.cvt.u32.u64(ent >> 32), r >> 2, 0x1F, FULL)

    for e in range(4):   # ranks 4 lane + e below k: stored as they stand
        r = lane * 4 + e
        with T.if_(r < k):
            _store_entry(values, indices, row * k + r, ents[e], keybits, dt)

    def ties():
        """The entries whose key equals the k-th's."""
        kth = key_at(k)
        n_eq = T.reg(T.u32, init=0)
        for ent in ents:
            T.ptx.add.u32(n_eq, n_eq, 1, pred=T.ptx.cvt.u32.u64(ent >> 32) == kth)
        return T.ptx.redux.sync.add.u32(n_eq, FULL)
    # the next row's guess, as `_Buffer.refine` (final) hands it on: from the key of rank
    # min(R, n) cut to its top 16 bits (R = `_guess_rank`)
    rank = T.ptx.min.u32(T.reg(T.u32, init=_guess_rank(k, buf.guess_mode)), n)
    far = T.ptx.and_.b32(key_at(rank), ((1 << keybits) - 1) ^ ((1 << (keybits - 16)) - 1))
    buf.hand_on_guess(far, n, ties, k, keybits)


def _merge_halves(buf, item, k, final, parts, half, keybits, dt):
    """SPLIT=2: this half row's k are in `parts` (values, indices: slot `item`); count it in on
    the row's counter (``atom.acq_rel.gpu``, lane 0, after ``bar.warp.sync`` so that it
    releases every lane's stores); the second of the two (an odd count before: the counter
    grows by 2 a row a launch, never cleared) loads both halves' k (L2, ``ld.global.cg``) as
    u64 entries (key high, 0xFFFF - column low; the upper half's columns + `half`), 4 a lane
    (index 4 lane + e: half 0's first, 2k <= 128), and stores the first k of one bitonic sort
    (`_bitonic_sort`) into `final`. Nothing of the buffer, the threshold or the guess changes:
    the warp goes on with its next half row."""
    pvalues, pindices, pcount = parts
    lane = buf.lane
    r = item >> 1
    T.ptx.bar.warp.sync(FULL)          # every lane's partial stores before lane 0's release
    old = T.reg(T.u32, init=0)
    with T.if_(lane == 0):
        old.set(T.ptx.atom.acq_rel.gpu.global_.add.u32(pcount.at(r), 1))
    second = T.ptx.and_.b32(T.ptx.shfl.sync.idx.b32(old, 0, 0x1F, FULL), 1)
    T.ptx.bar.warp.sync(FULL)          # lane 0's acquire before every lane's loads
    with T.if_(second == 1, uniform=True):
        ents = []
        for e in range(4):
            idx = lane * 4 + e                       # 0 .. 127: half idx / k, entry idx % k
            upper = idx >= k
            ok = idx < 2 * k
            src = (r * 2) * k + idx                  # the halves' slots are adjacent
            bits = T.reg(T.u32, init=0)
            if dt == "f32":
                T.ptx.ld.global_.cg.b32(bits, pvalues.at(src), pred=ok)
            else:
                h = T.reg(T.u16, init=0)
                T.ptx.ld.global_.cg.u16(h, pvalues.at(src), pred=ok)
                bits.set(T.ptx.shl.b32(T.ptx.cvt.u32.u16(h), 16))
            col = T.reg(T.u64, init=0)
            T.ptx.ld.global_.cg.u64(col, pindices.at(src), pred=ok)
            c = T.ptx.cvt.u32.u64(col) + T.ptx.selp.u32(half, 0, upper)
            ent = T.reg(T.u64, init=0)   # empty: 0, below every entry (a real key is never 0)
            T.ptx.mov.b64(ent, T.ptx.mov.b64([T.ptx.xor.b32(c, 0xFFFF), _key(bits, dt)]),
                          pred=ok)
            ents.append(ent)
        ents = _bitonic_sort(ents, lane)
        for e in range(4):   # ranks 4 lane + e below k: stored as they stand
            with T.if_(lane * 4 + e < k):
                _store_entry(final[0], final[1], r * k + lane * 4 + e, ents[e], keybits, dt)


def _store_entry(values, indices, out, ent, keybits, dt):
    """Store one u64 entry (key high, 0xFFFF - column low) as the value and index at `out`."""
    bits = _value_bits(T.ptx.cvt.u32.u64(ent >> 32), keybits)
    if dt == "f32":
        T.ptx.st.global_.b32(values.at(out), bits)
    else:
        T.ptx.st.global_.b16(values.at(out), T.ptx.cvt.u16.u32(bits))
    col = T.ptx.xor.b32(T.ptx.cvt.u32.u64(ent), 0xFFFF)
    T.ptx.st.global_.u64(indices.at(out), T.ptx.cvt.u64.u32(col))


def _raw_bits(key, keybits):
    """The f32 bits (bf16: expanded) whose key is `key`: what the buffer holds between refines."""
    bits = _value_bits(key, keybits)
    return bits if keybits == 32 else T.ptx.shl.b32(bits, 16)


def _key_float(key, keybits):
    """The f32 whose key (to `keybits`) is `key`."""
    return T.ptx.mov.f32(_raw_bits(key, keybits))


class _Ring:
    """A warp's ring of STAGES 16-byte vectors per lane in shared memory, filled by
    ``cp.async.cg.shared.global``, one commit group per step of VECS vectors. Each lane reads
    back only what it copied itself: no cross-lane ordering. The ring runs over the warp's rows
    back to back (`steps` vectors per lane per row, padded to a multiple of VECS), so the next
    row streams in while this one's last vectors, its final refine and its ranking run.

    Step t reads stages tV..tV+V-1 (mod STAGES) and first refills the V stages step t-1 read
    (their registers were used then: no write-after-read), STAGES - VECS stages ahead; the
    cursors are byte offsets and a 64-bit global pointer, advanced by adds, so a step costs
    ~10 instructions of bookkeeping for all its vectors."""

    ALIGN = 16             # the ring's alignment (a bulk copy's destination wants 128)
    LANE_POINTER = True    # the global cursor points at this lane's vector (bulk: the step's)

    def __init__(self, x, rows, cols, nvec, vec, WARPS, STAGES, VECS, buf, first_row, row_step,
                 take=None, ask=None, lead=0):
        self.x, self.cols, self.vec, self.take = x, cols, vec, take
        self.ask, self.lead = ask, lead     # TAKE: the next row's ticket asked `lead` steps early
        self.data = T.shared(T.b32, (WARPS * STAGES * 32 * 4,), name="ring", align=self.ALIGN)
        self.rows, self.nvec, self.S, self.V = rows, nvec, STAGES, VECS
        self.lane = buf.lane
        self.steps = T.cdiv(T.cdiv(nvec, 32), VECS) * VECS    # vectors per lane per row
        self.tail = self.steps * 32 != nvec     # vectors past the row exist: check each
        self.sbase = self.data.ptr() + (buf.warp * STAGES * 32 + buf.lane) * 16
        self.span = STAGES * 512                                # a lane's ring, in bytes
        esize = 16 // vec
        # the issue cursor: row, vector step, global address, stage offset
        self.row = T.reg(T.u32, init=first_row)
        self.v = T.reg(T.u32, init=0)
        self.gp = T.reg(T.u64, init=0)
        self.gp.set(x.at(first_row * cols + self.lane * vec if self.LANE_POINTER else
                         first_row * cols).base)
        # to the next row's first vector: W rows on, less the row's (padded) steps
        self.jump = T.ptx.cvt.u64.u32(row_step * (cols * esize)) - T.reg(
            T.u64, init=self.steps * 512)
        self.soff = T.reg(T.u32, init=0)
        self.row_step = row_step

    def ok(self, v, u):
        """Whether this lane's vector u of step v is in the row (None: always, no tail)."""
        return ((v + u) * 32 + self.lane < self.nvec) if self.tail else None

    def issue(self):
        """The next step's VECS vectors of this lane (nothing past the row or the warp's last
        row) into the stages at the issue offset, one commit group."""
        live = self.row < self.rows
        for u in range(self.V):
            ok = self.ok(self.v, u)
            ok = live if ok is None else (live & ok)
            T.ptx.cp.async_.cg.shared.global_(
                ir.Addr(self.sbase + self.soff, u * 512), ir.Addr(self.gp, u * 512), 16, pred=ok)
        T.ptx.cp.async_.commit_group()
        T.ptx.add.u64(self.gp, self.gp, self.V * 512)
        self.v.set(self.v + self.V)
        self.asks_ahead()
        self.row_end()
        self.soff.set(self.soff + self.V * 512)
        T.ptx.mov.u32(self.soff, 0, pred=self.soff == self.span)

    def row_end(self):
        """At the row's last step: the issue cursor to the next row (the static walk's W rows
        on, or DYN=1's row from the counter)."""
        with T.if_(self.v == self.steps, uniform=True):
            self.v.set(0)
            if self.take is None:
                self.row.set(self.row + self.row_step)
                T.ptx.add.u64(self.gp, self.gp, self.jump)
            else:
                self.next_row()

    def asks_ahead(self):
        """TAKE: at `lead` steps before the row's end, the next row's ticket asked (read at the
        row's end by `next_row`)."""
        if self.lead:
            with T.if_(self.v == self.steps - self.lead * self.V, uniform=True):
                with T.if_(self.row < self.rows, uniform=True):
                    self.ask()

    def next_row(self):
        """DYN=1: the next row from the counter (one END ticket a warp, then none) and the
        global cursor at it (this lane's vector, or the row's start for a bulk ring)."""
        with T.if_(self.row < self.rows, uniform=True):
            self.row.set(self.take())
        self.gp.set(self.x.at(self.row * self.cols + (self.lane * self.vec if self.LANE_POINTER
                                                      else 0)).base)

    def wait_first(self, ahead, S, live=None):   # noqa: N803, ARG002 (the bulk ring's)
        """Before the loop: the first S of the `ahead` steps in flight landed (a thread's
        cp.async groups: none asked for, none waited on, whatever `live` says)."""
        T.ptx.cp.async_.wait_group(ahead - S)

    def wait(self, ahead):
        """The oldest step in flight landed (the loop's next step)."""
        T.ptx.cp.async_.wait_group(ahead)

    def drain(self):
        """Nothing in flight at exit (the ring asks for no step past the warp's rows, but
        cp.async's groups are per thread: wait for all)."""
        T.ptx.cp.async_.wait_all()


class _BulkRing(_Ring):
    """BULK=1 (session 22): the same ring and layout (a step's VECS vectors of 32 lanes are
    VECS x 512 contiguous bytes in global memory and in the ring), filled by lane 0's ONE
    ``cp.async.bulk`` a step on the step slot's mbarrier (``complete_tx``: the slot's bytes) in
    place of 32 lanes' VECS ``cp.async``s, a commit group and their cursors; every lane waits on
    the slot's phase. Why: a bf16 step's ring bookkeeping was ~38 SASS (docs/TUNING.md "top-k
    (session 15)"), ~9% of a later row's PTX in numsim, and the TMA engine streams from one
    request a step (tma_copy, softmax_tma: 91-95% of copy bandwidth). The slot a step reads is
    refilled at the top of the next step after a ``bar.warp.sync`` (every lane's reads of it are
    done: their values were used), as `softmax_tma` refills a row's stage after its barrier.
    A row's last step copies only the row's bytes (a tail); no step past the warp's rows is
    asked for, so every copy is waited on before exit."""

    ALIGN = 128
    LANE_POINTER = False

    def __init__(self, x, rows, cols, nvec, vec, WARPS, STAGES, VECS, buf, first_row, row_step,
                 take=None, ask=None, lead=0):
        super().__init__(x, rows, cols, nvec, vec, WARPS, STAGES, VECS, buf, first_row, row_step,
                         take, ask, lead)
        self.nst = STAGES // VECS                               # step slots a warp
        self.bars = T.mbarrier(WARPS * self.nst, name="full")
        self.bbase = self.bars.buf.ptr() + buf.warp * (self.nst * 8)
        # no register for the warp's ring base or the issue slot (the bf16 `_w32` build has 64
        # registers a thread): lane 0's `sbase` is the ring's base, and the issue slot is the
        # stage offset over a step's bytes (a power of two)
        self.cslot = T.reg(T.u32, init=0)                      # wait: the slot and its parity
        self.cpar = T.reg(T.u32, init=0)
        with T.if_(buf.lane == 0):
            for i in range(self.nst):
                T.MBarrierRef(ir.Addr(self.bbase, 8 * i)).init(1)
            T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.bar.warp.sync(FULL)                              # initialized before any wait

    def _bar(self, slot):
        return T.MBarrierRef(ir.Addr(self.bbase + slot * 8, 0))

    def issue(self):
        """The next step's VECS x 512 bytes (a tail row's last step: the row's) into the slot
        at the issue offset, by lane 0, unless past the warp's last row."""
        T.ptx.bar.warp.sync(FULL)     # every lane's reads of the slot (the last step's) done
        full = self.V * 512
        size = full
        if self.tail:                 # the vectors left in the row, at most a step's
            size = T.ptx.min.u32(T.ptx.mul.lo.u32(self.nvec - self.v * 32, 16), full)
        with T.if_((self.row < self.rows) & (self.lane == 0)):
            bar = self._bar(self.soff >> (full.bit_length() - 1))
            bar.arrive_expect_tx(size)
            T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"](
                ir.Addr(self.sbase + self.soff, 0), ir.Addr(self.gp, 0), size, bar)
        T.ptx.add.u64(self.gp, self.gp, full)
        self.v.set(self.v + self.V)
        self.asks_ahead()
        self.row_end()
        self.soff.set(self.soff + full)
        T.ptx.mov.u32(self.soff, 0, pred=self.soff == self.span)

    def wait_first(self, ahead, S, live=None):   # noqa: N803, ARG002 (the plain ring's)
        """Phase 0 of the first S slots (the loop waits again), only where the warp has a
        first row (`live`): a warp past the rows (the static walk's last CTA, or the counter's
        END as its first ticket) asked for no copy, and its slots' phase 0 never completes
        (numsim and sync_check: deadlock, the `r3_c8200_k9` cases)."""
        with T.if_(live, uniform=True) if live is not None else contextlib.nullcontext():
            for i in range(S):
                T.MBarrierRef(ir.Addr(self.bbase, 8 * i)).wait(0)

    def wait(self, ahead):            # noqa: ARG002
        self._bar(self.cslot).wait(self.cpar)
        self.cslot.set(self.cslot + 1)
        with T.if_(self.cslot == self.nst, uniform=True):
            self.cslot.set(0)
            self.cpar.set(self.cpar ^ 1)

    def drain(self):
        pass                          # every copy asked for was waited on


LOG2 = {4: 2, 8: 3}   # elements per vector -> shift


def _step_col(col_base, e, vec):
    """The column of a step's element e (bit e of `_pass_mask`: vector e / vec, element e % vec
    of it; a lane's vectors of one step lie 32 vectors apart)."""
    return col_base + (e >> LOG2[vec]) * (32 * vec) + (e & (vec - 1))


def _pass_mask(vectors, thr, dt, first=0, th=None, pk=False):
    """A lane's elements of one step that reach `thr` (and lie in the row), bit u * vec + j for
    element j of vector u (`vectors` from the step's vector `first` on): one ``setp`` and
    ``selp`` each, OR'ed as a tree (not a chain). `th` (PK=1, bf16): `thr` as a bf16, compared
    with each word's two halves in place (``setp.ge.bf16`` x 2 = one ``HSETP2``), not with the
    elements expanded to f32 (8 ``IMAD.U32``/``LOP3`` and 8 ``FSETP`` a vector: 4 ``HSETP2``),
    the bits OR'ed in under the predicates; `pk` without `th`: `thr` made a bf16 here (the
    rounds' refine's k-th)."""
    vec = _tk.VEC[dt]
    if pk and th is None:
        th = _bf16_of(thr)
    if th is not None:
        # PK=1: a predicated ``or`` per element into two chains (the low halves' bits and the
        # high halves'), not ``selp`` and an add tree: 8 + 1 instructions a vector, not 15
        acc = [T.reg(T.u32, init=0), T.reg(T.u32, init=0)]
        for u, (words, ok) in enumerate(vectors, first):
            for i, w in enumerate(words):
                for h, half in enumerate(_halves(w)):
                    p = T.ptx.setp.ge.bf16(half, th)
                    T.ptx.or_.b32(acc[h], acc[h], 1 << (u * vec + 2 * i + h),
                                  pred=p if ok is None else ok & p)
        return T.ptx.or_.b32(acc[0], acc[1])
    terms = []
    for u, (words, ok) in enumerate(vectors, first):
        for j, val in enumerate(_elements(words, dt)):
            p = val >= thr
            terms.append(T.ptx.selp.b32(1 << (u * vec + j), 0, p if ok is None else ok & p))
    while len(terms) > 1:
        terms = [T.ptx.or_.b32(*terms[i:i + 2]) if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    return terms[0]


def _append_rounds(buf, vectors, hits, col_base, fetch_e, k, keybits, dt):
    """APPEND=1 (session 9, docs/TUNING.md "topk (session 9, branch topk5)"): append the step's
    elements that reach thr in warp-converged rounds, one element per lane a round (usually one
    round): ``vote.ballot`` of the lanes with one left, the slot the counter register plus the
    ``popc`` of the lower lanes' bits, no shared atomic, no shared counter load, no divergent
    per-lane loop. Before a round that could overflow the buffer (counter + lanes > CAP) a
    refine; the elements of this step still to append are then filtered against the k-th's
    float with ``>=``, never STRICT's ``>`` (a lane's later element may have a lower column than
    an earlier round's kept one; the next refine breaks such ties by column); later steps use
    the refine's `thr`. So CAP needs room for k entries and one round (32), whatever VECS is.
    With several vectors a step, a vector's bits are built only where some lane's vector
    `hits` (one ``vote.any`` each): a later row's hit step usually has one such vector of 4."""
    vec = _tk.VEC[dt]
    th = _bf16_of(buf.thr) if buf.pk else None   # PK=1: thr as a bf16, once a hit step
    if len(vectors) == 1:   # the caller's vote.any was this vector's
        mask = T.reg(T.u32, init=_pass_mask(vectors, buf.thr, dt, th=th))
    else:
        mask = T.reg(T.u32, init=0)
        for u, (vector, hit) in enumerate(zip(vectors, hits)):
            with T.if_(T.ptx.vote.any.sync.pred(hit, FULL), uniform=True):
                T.ptx.or_.b32(mask, mask, _pass_mask([vector], buf.thr, dt, first=u, th=th))
    b = T.reg(T.u32, init=T.ptx.vote.ballot.sync.b32(mask != 0, FULL))
    below = T.sreg("lanemask_lt")
    with T.while_(lambda: b != 0):
        with T.if_(buf.n + T.ptx.popc.b32(b) > buf.CAP, uniform=True):
            kth = buf.refine(k, keybits, dt, eq=True)
            T.ptx.and_.b32(mask, mask, _pass_mask(vectors, kth, dt, pk=buf.pk))
            b.set(T.ptx.vote.ballot.sync.b32(mask != 0, FULL))
        pos = buf.n + T.ptx.popc.b32(T.ptx.and_.b32(b, below))
        with T.if_(mask != 0):
            e = T.ptx.bfind.u32(mask)
            T.ptx.xor.b32(mask, mask, T.ptx.shl.b32(1, e))
            T.ptx.st.shared.v2.b32(buf.pairs.at(buf.base + 2 * pos),
                                   [T.ptx.mov.b32(fetch_e(e)),
                                    T.ptx.mov.b32(_step_col(col_base, e, vec))])
        buf.n.set(buf.n + T.ptx.popc.b32(b))
        b.set(T.ptx.vote.ballot.sync.b32(mask != 0, FULL))


def _seed(ring, live, k, cols, dt, ahead, miss=SEED_MISS):
    """SEED=1 (session 13): the float a warp's first row starts from instead of -inf, from the
    row's first S = min(ahead, steps) steps, which the ring holds before the loop: each lane's
    largest valid element (S x VECS ``ld.shared.v4``, ``max``), then j - 1 rounds of
    ``redux.sync.max.u32`` over the lanes' keys, each dropping the lanes that hold the maximum
    (ties drop together: the result can only be lower), and one more: the j-th largest (j from
    `_seed_rank` at the bound `miss`), -inf when fewer lanes hold a value. None when no rank
    fits (a short row, a small sample). A first row from -inf costs ~2x a later row (numsim,
    8192 k 50: 8.6k against 4.0k PTX: its refines and ~500 appends); from the seed it appends
    ~130-200 elements (SEED=1) or ~280-360 (SEED=2 at 32768 columns)."""
    vec = _tk.VEC[dt]
    S = min(ahead, ring.steps // ring.V)       # noqa: N806 (steps, as VECS and STAGES)
    j = _seed_rank(k, cols, min(S * ring.V * 32, ring.nvec) * vec, miss)
    if j is None:
        return None
    ring.wait_first(ahead, S, live)            # the row's first S steps landed
    best = T.reg(T.f32, init=NEG_INF)
    for u in range(S * ring.V):
        ok = ring.ok(0, u)
        ok = live if ok is None else (live & ok)
        words = [T.reg(T.b32, init=0) for _ in range(4)]
        T.ptx.ld.shared.v4.b32(words, ir.Addr(ring.sbase, u * 512), pred=ok)
        if dt == "f32":
            words = [T.ptx.mov.f32(w) for w in words]
        T.ptx.max.f32(best, best, _vector_max(words, dt), pred=ok)
    key = T.reg(T.u32, init=_tk._keys_f32(T.ptx.mov.b32(best)))
    for _ in range(j - 1):
        top = T.ptx.redux.sync.max.u32(key, FULL)
        T.ptx.mov.u32(key, 0, pred=key == top)
    top = T.ptx.max.u32(T.ptx.redux.sync.max.u32(key, FULL), 0x007FFFFF)   # -inf's key at least
    return T.ptx.mov.f32(_value_bits(top, 32))


def _take_row(sched, rows, grid_warps, lane, ticket=None, queue=None):
    """DYN=1 (session 23): the warp's next row from the counter (`tickets.take_item`: a launch
    takes rows + grid_warps tickets, END = rows), taken by lane 0 and shuffled to every lane;
    with `ticket` (TAKE), the row of the ticket lane 0 asked for earlier (`_ask_row`) on its
    queue's counter (`_Queue`)."""
    got = T.reg(T.u32, init=0)
    with T.if_(lane == 0):
        if ticket is None:
            got.set(take_item(sched, rows + grid_warps, rows))
        else:
            local = ticket_item32(queue.counter, ticket, queue.tickets, queue.rows)
            got.set(local if queue.Q == 1 else T.ptx.selp.b32(
                queue.q + local * queue.Q, rows, local < queue.rows))
    return T.ptx.shfl.sync.idx.b32(got, 0, 0x1F, FULL)


def _ask_row(queue, lane, ticket):
    """TAKE (session 26): lane 0 asks its queue's counter for the next row's ticket into
    `ticket` (`tickets.ask_ticket`: the counter's low word), which nothing reads until the row's
    end (`_take_row`): the warp does not wait for the atomic here. The ncu profile of f32 8192
    `_dyn` (session 26) put 20.7% of the warps' stall samples on the first use of a ticket
    asked and read at once."""
    ask_ticket(queue.counter, ticket, lane == 0)


class _Queue:
    """TAKE's row queues (QUEUES = Q, session 26): warp gw takes the rows r = q (mod Q) of queue
    q = gw mod Q from its own counter, 256 bytes from the next. Why: with one counter every
    warp's ticket is an atomic on one address, ~125 a microsecond at f32 8192 on the H200, and
    session 26's H100 profile still waited for a ticket asked two steps (~6 us) earlier: the
    address's atomics queue. Each queue is a launch of its own (its rows and warps, tickets mod
    their sum, reset by its last); Q = 1 is TAKE's single counter, DYN=1's element 0.

    Each Q has counters of its own (`counter_index`): the variants of a shard share their
    inputs, and a counter another Q left at a multiple of ITS tickets is not one of this
    queue's, so the reset (`tickets.ticket_item32`) would come mid-launch."""

    STRIDE = 32            # u64 elements between two counters

    @staticmethod
    def counter_index(Q, q):   # noqa: N803
        """`sched`'s element for queue q of Q: 0 for Q = 1, then Q(Q - 1)/2 + q counters on."""
        return _Queue.STRIDE * (Q * (Q - 1) // 2 + q)

    def __init__(self, sched, rows, grid_warps, gw, Q):   # noqa: N803
        self.Q = Q
        if Q == 1:
            self.q, self.rows, self.counter = 0, rows, sched.at(0)
            self.tickets = rows + grid_warps
            return
        self.q = T.reg(T.u32, init=T.ptx.rem.u32(gw, Q))
        self.rows = T.reg(T.u32, init=(rows + (Q - 1) - self.q) / Q)
        self.tickets = T.reg(T.u32, init=self.rows + (grid_warps + (Q - 1) - self.q) / Q)
        self.counter = sched.at(self.counter_index(Q, 0) + self.q * self.STRIDE)


def _topk_warp(x, values, indices, rows, cols, k, WARPS, STAGES, VECS, CAP, dt, STRICT=0,
               APPEND=0, FE=0, SKEW=0, GUESS=0, FUSE=0, SEED=0, PK=0, BULK=0, SORT=0, DYN=0,
               sched=None, SPLIT=0, parts=None, GFETCH=0, TAKE=0, QUEUES=1):
    final = (values, indices)
    if SPLIT:
        # SPLIT=2 (session 24): the work items are half rows, the input seen as 2 rows x cols / 2
        # (the same bytes): the ring, the guess, the seed and the counter run over items; each
        # item's k land in `parts`' slot for it, and the second of a row's two to finish merges
        rows = T.ptx.shl.b32(rows, 1)
        cols = cols // 2
        values, indices = parts[0], parts[1]
    vec = _tk.VEC[dt]
    keybits = 32 if dt == "f32" else 16
    nvec = cols // vec
    buf = _Buffer(WARPS, CAP, strict=bool(STRICT), rounds=bool(APPEND), guess=GUESS,
                  fuse=bool(FUSE), pk=bool(PK))
    lane = buf.lane
    gw = T.ctaid.x * WARPS + buf.warp
    grid_warps = T.nctaid.x * WARPS
    # DYN=1: rows from the counter as the ring's issue cursor reaches them (the consumer takes
    # the cursor's row at its row end: the cursor is less than a row ahead); else w, w + W, ...
    # TAKE > 0 (session 26): the next row's ticket asked TAKE issue steps before the cursor
    # reaches the row's end, read there (the first row's ticket asked and read at once)
    take = (lambda: _take_row(sched, rows, grid_warps, lane)) if DYN else None
    ask = None
    if TAKE:   # the counter's low word (tickets.ask_ticket); the first row asked and read here
        ticket = T.reg(T.u32, init=0)
        queue = _Queue(sched, rows, grid_warps, gw, QUEUES)
        take = lambda: _take_row(sched, rows, grid_warps, lane, ticket, queue)   # noqa: E731
        ask = lambda: _ask_row(queue, lane, ticket)                              # noqa: E731
        ask()
    first = take() if DYN else gw
    ring = (_BulkRing if BULK else _Ring)(x, rows, cols, nvec, vec, WARPS, STAGES, VECS, buf,
                                          first, grid_warps, take=take,
                                          **({"ask": ask, "lead": TAKE} if TAKE else {}))
    steps = ring.steps
    ahead = STAGES // VECS - 1                         # steps in flight beyond the current
    # APPEND=1's step mask has 32 bits: a step of more elements (bf16 VECS 8, session 22) is
    # filtered and appended as groups of 32 // vec vectors, one mask and one vote each
    group = min(VECS, 32 // vec) if APPEND else VECS
    mine = T.reg(T.u32, init=0)                       # this warp's rows: gw, gw + W, ...
    with T.if_(gw < rows, uniform=True):
        mine.set((rows - 1 - gw) / grid_warps + 1)
    if SKEW:
        # scan7: phase p = (w + w / 4) mod 4 of the CTA's warp w starts p x SKEW ns late, so that
        # the row ends of an SM's warps stop coinciding (equal rows keep the phases); with 8
        # warps each scheduler (w mod 4, as the hardware is understood to assign them) holds
        # two phases, not one. nanosleep's time is approximate: a desync, not a schedule
        phase = T.ptx.and_.b32(T.ptx.add.u32(buf.warp, buf.warp >> 2), 3)
        T.ptx.nanosleep.u32(phase * SKEW)
    for _ in range(ahead):                             # the ring's first stages in flight
        ring.issue()
    if SEED:
        with T.iket.range("seed"):
            seed = _seed(ring, first < rows, k, cols, dt, ahead, SEED_MISS_BY_MODE[SEED])
            if seed is not None:
                buf.guess.set(seed)
    row = T.reg(T.u32, init=first)
    v = T.reg(T.u32, init=0)                           # the row's next vector step (x VECS)
    soff = T.reg(T.u32, init=0)                        # its stages' offset in the ring
    buf.reset(buf.guess)

    def examine(vectors, col_base, fetch_e):
        """Filter VECS vectors per lane ((words, in the row or None, first column, element j's
        bits) each) against thr; one ``vote.any`` for all, then (APPEND=0) one overflow check
        (room for all) and refine, then the elements that reach thr appended; APPEND=1:
        `_append_rounds` (the step's first column `col_base`, element e's bits `fetch_e`)."""
        if dt == "f32":
            vectors = [([T.ptx.mov.f32(w) for w in words], ok, c, f) for words, ok, c, f in vectors]
        hits = []
        th = _bf16_of(buf.thr) if PK else None         # PK=1: once a step
        for words, ok, _, _ in vectors:
            reach = _reach_pk(words, th) if PK else _vector_max(words, dt) >= buf.thr
            hits.append(reach if ok is None else ok & reach)
        anyhit = hits[0]
        for h in hits[1:]:
            anyhit = anyhit | h
        if APPEND:
            with T.if_(T.ptx.vote.any.sync.pred(anyhit, FULL), uniform=True):
                _append_rounds(buf, [(w, ok) for w, ok, _, _ in vectors], hits, col_base,
                               fetch_e, k, keybits, dt)
            return
        with T.if_(T.ptx.vote.any.sync.pred(anyhit, FULL), uniform=True):
            with T.if_(buf.count() > CAP - VECS * 32 * vec, uniform=True):
                buf.refine(k, keybits, dt)
            for hit, (words, _, col0, fetch) in zip(hits, vectors):
                with T.if_(hit):
                    # which elements reach thr (a bit each), then one round per such element
                    # (usually one): fetched again by its index, no per-element ballot
                    mask = T.reg(T.u32, init=0)
                    for j, val in enumerate(_elements(words, dt)):
                        T.ptx.or_.b32(mask, mask, 1 << j, pred=val >= buf.thr)
                    c0 = col0()
                    with T.while_(lambda: mask != 0):
                        j = T.ptx.bfind.u32(mask)
                        T.ptx.xor.b32(mask, mask, T.ptx.shl.b32(1, j))
                        buf.append(fetch(j), c0 + j)

    with (T.loop() if DYN else T.range(mine * (steps // VECS))):
        if DYN:
            T.break_(row >= rows)                      # END: the counter had no row left
        ring.issue()                                   # into the stages the last step read
        with T.iket.range("wait"):
            ring.wait(ahead)                           # this step's stages landed
        vectors = []
        at = ring.sbase + soff
        for u in range(VECS):
            ok = ring.ok(v, u)
            words = [T.reg(T.b32, init=0) for _ in range(4)]
            T.ptx.ld.shared.v4.b32(words, ir.Addr(at, u * 512), pred=ok)  # not ok: not copied
            vectors.append((words, ok, lambda u=u: ((v + u) * 32 + lane) * vec,
                            lambda j, u=u: _element_bits(
                                T.ptx.ld.shared.b32(ir.Addr(at + (j >> (vec // 8)) * 4,
                                                            u * 512)), j, dt)))
        for g in range(0, VECS, group):
            examine(vectors[g:g + group], ((v + g if g else v) * 32 + lane) * vec,
                    lambda e, g=g: _element_bits(T.ptx.ld.shared.b32(ir.Addr(
                        at + (e >> LOG2[vec]) * 512 + ((e & (vec - 1)) >> (vec // 8)) * 4,
                        g * 512)), e, dt))
        soff.set(soff + VECS * 512)
        T.ptx.mov.u32(soff, 0, pred=soff == ring.span)
        v.set(v + VECS)
        with T.if_(v == steps, uniform=True), T.iket.range("row_end"):  # select the row
            # fewer than k elements reached the previous row's guess (the row is unlike it):
            # once more from -inf, straight from global memory (exact, slower)
            with T.if_(buf.count() < k, uniform=True), T.iket.range("again"):
                buf.reset(NEG_INF)
                buf.forget_guess()
                with T.range(0, steps, VECS) as u0:
                    again = []
                    for u in range(VECS):
                        ucol = (u0 + u) * 32 + lane
                        words = [T.reg(T.b32, init=0) for _ in range(4)]
                        T.ptx.ld.global_.nc.v4.b32(words, x.at(row * cols + ucol * vec),
                                                   pred=ucol < nvec)
                        if GFETCH:   # the control: each appended element loaded again
                            fetch = (lambda j, ucol=ucol: _global_bits(
                                x, row * cols + ucol * vec + j, dt))
                        else:
                            fetch = (lambda j, words=words: _register_bits(words, j, dt))
                        again.append((words, ucol < nvec, lambda ucol=ucol: ucol * vec, fetch))
                    for g in range(0, VECS, group):
                        def base(g=g, u0=u0):     # the group's first column (traced per use)
                            return ((u0 + g if g else u0) * 32 + lane) * vec
                        if GFETCH:
                            fetch_e = (lambda e, base=base: _global_bits(
                                x, row * cols + _step_col(base(), e, vec), dt))
                        else:   # element e of the group: vector e / vec, element e % vec
                            flat = [w for words, *_ in again[g:g + group] for w in words]
                            fetch_e = (lambda e, flat=flat: _register_bits(flat, e, dt))
                        examine(again[g:g + group], base(), fetch_e)
            # a row that started from a good guess ends with ~2k entries: a refine over 8 per
            # lane costs half of one over CAP / 32; FE (scan7): fewer, every count round and
            # compaction round of the row's end is E setp + E dependent adds
            def refine_and_store():
                small = FE or min(8, CAP // 32)
                with T.if_(buf.count() <= 32 * small, uniform=True):
                    buf.refine(k, keybits, dt, final=True, E=small)
                with T.else_():
                    buf.refine(k, keybits, dt, final=True)
                buf.store(row, k, values, indices, keybits, dt)
            if SORT:   # session 22: at most SORT_N entries (nearly every row) by one sort
                with T.if_(buf.count() <= SORT_N, uniform=True):
                    buf.sorted_end(row, k, values, indices, keybits, dt)
                with T.else_():
                    refine_and_store()
            else:
                refine_and_store()
            if SPLIT:
                _merge_halves(buf, row, k, final, parts, cols, keybits, dt)
            buf.reset(buf.guess)
            v.set(0)
            row.set(ring.row if DYN else row + grid_warps)
    ring.drain()                                       # nothing in flight at exit


def _grid(rows, WARPS=8, CTAS=396):  # noqa: N803 (the kernel's parameter names)
    return min(CTAS, T.cdiv(rows, WARPS))


def _maxnreg(MAXREG):
    return MAXREG or None  # 0: no cap (ptxas chooses)


@T.kernel(grid=_grid, block=lambda WARPS: 32 * WARPS, maxnreg=_maxnreg)
def topk_f32_warp(x: T.gptr[T.f32], values: T.gptr[T.f32], indices: T.gptr[T.s64],
                  sched: T.gptr[T.u64], pvalues: T.gptr[T.f32], pindices: T.gptr[T.s64],
                  pcount: T.gptr[T.u32], rows: T.u32, cols: T.const, k: T.const, WARPS: T.const = 8,
                  STAGES: T.const = 8, VECS: T.const = 2, CAP: T.const = 512,
                  CTAS: T.const = 264, MAXREG: T.const = 128, STRICT: T.const = 0,
                  APPEND: T.const = 0, FE: T.const = 0, SKEW: T.const = 0,
                  GUESS: T.const = 0, FUSE: T.const = 0, SEED: T.const = 0,
                  BULK: T.const = 0, SORT: T.const = 0, DYN: T.const = 0,
                  SPLIT: T.const = 0, GFETCH: T.const = 0, TAKE: T.const = 0,
                  QUEUES: T.const = 1):
    _topk_warp(x, values, indices, rows, cols, k, WARPS, STAGES, VECS, CAP, "f32", STRICT,
               APPEND, FE, SKEW, GUESS, FUSE, SEED, BULK=BULK, SORT=SORT, DYN=DYN, sched=sched,
               SPLIT=SPLIT, parts=(pvalues, pindices, pcount), GFETCH=GFETCH, TAKE=TAKE,
               QUEUES=QUEUES)


@T.kernel(grid=_grid, block=lambda WARPS: 32 * WARPS, maxnreg=_maxnreg)
def topk_bf16_warp(x: T.gptr[T.bf16], values: T.gptr[T.bf16], indices: T.gptr[T.s64],
                   sched: T.gptr[T.u64], pvalues: T.gptr[T.bf16], pindices: T.gptr[T.s64],
                   pcount: T.gptr[T.u32], rows: T.u32, cols: T.const, k: T.const,
                   WARPS: T.const = 8, STAGES: T.const = 8, VECS: T.const = 1, CAP: T.const = 512,
                   CTAS: T.const = 264, MAXREG: T.const = 128, STRICT: T.const = 0,
                   APPEND: T.const = 0, FE: T.const = 0, SKEW: T.const = 0,
                   GUESS: T.const = 0, FUSE: T.const = 0, SEED: T.const = 0,
                   PK: T.const = 0, BULK: T.const = 0, SORT: T.const = 0,
                   DYN: T.const = 0, SPLIT: T.const = 0, GFETCH: T.const = 0,
                   TAKE: T.const = 0, QUEUES: T.const = 1):
    _topk_warp(x, values, indices, rows, cols, k, WARPS, STAGES, VECS, CAP, "bf16", STRICT,
               APPEND, FE, SKEW, GUESS, FUSE, SEED, PK, BULK, SORT, DYN, sched, SPLIT,
               (pvalues, pindices, pcount), GFETCH, TAKE, QUEUES)


# -- cases ------------------------------------------------------------------------------------------

MAX_QUEUES = 16   # TAKE's row queues: counters 256 bytes apart in `sched` (34 KB for Q <= 16)


def _suite_args(dt) -> dict:
    """topk's suite arguments, its inputs with DYN=1's row counter (`sched`: zeros; DYN=1 uses
    element 0, QUEUES = Q's queue q `_Queue.counter_index(Q, q)`; a launch takes exactly rows +
    grid warps tickets, so it never needs clearing). Every case takes it (one kernel
    signature); DYN=0 ignores it."""
    args = _tk._suite_args(dt)
    plain = args["inputs"]

    def inputs(rng, rows, cols, k):
        got = plain(rng, rows, cols, k)
        # SPLIT=2's scratch: k values and indices a half row, a u32 count a row (zero once:
        # each launch adds 2 a row); every case takes it, SPLIT=0 ignores it
        return {**got, "sched": np.zeros(_Queue.counter_index(MAX_QUEUES + 1, 0), np.uint64),
                "pvalues": np.zeros(2 * rows * k, got["values"].dtype),
                "pindices": np.zeros(2 * rows * k, np.int64),
                "pcount": np.zeros(rows, np.uint32)}
    return {**args, "inputs": inputs}


SMEM_LIMIT = 227 * 1024


def smem_bytes(WARPS, STAGES, CAP, VECS=1, BULK=0) -> int:  # noqa: N803
    """A CTA's shared memory: per warp CAP (bits, column) pairs, STAGES x 512 bytes of ring, a
    4-byte fill counter; BULK=1: an mbarrier a step slot and the ring 128-byte aligned."""
    bulk = (WARPS * 8 * (STAGES // VECS) + 128) if BULK else 0
    return WARPS * (8 * CAP + 512 * STAGES + 4) + bulk


def _constraints(dt):
    vec = _tk.VEC[dt]

    def constraints(rows, cols, k, WARPS, STAGES, VECS, CAP, CTAS, MAXREG, STRICT=0, APPEND=0,
                    FE=0, SKEW=0, GUESS=0, FUSE=0, SEED=0, PK=0, BULK=0, SORT=0, DYN=0,
                    SPLIT=0, GFETCH=0, TAKE=0, QUEUES=1):
        """The shapes the kernel accepts (checked when the suite is declared)."""
        why = []
        if GFETCH not in (0, 1):
            why.append(f"GFETCH={GFETCH} must be 0 (a second read appends from its registers) "
                       "or 1 (fetched again from global memory, the control)")
        if SPLIT not in (0, 2):
            why.append(f"SPLIT={SPLIT} must be 0 (a row an item) or 2 (half rows, merged by "
                       "the second to finish)")
        elif SPLIT and (cols % (2 * vec) or k > cols // 2):
            why.append(f"SPLIT=2 needs halves of whole vectors holding k (cols={cols} a "
                       f"multiple of {2 * vec}, k={k} <= cols / 2)")
        item_cols = cols // 2 if SPLIT else cols
        row_steps = T.cdiv(T.cdiv(item_cols // vec, 32), VECS)
        in_flight = STAGES // VECS - 1
        if DYN not in (0, 1):
            why.append(f"DYN={DYN} must be 0 (the static walk) or 1 (rows from the counter)")
        elif DYN and row_steps <= in_flight:
            why.append(f"DYN=1 needs a row of more steps ({row_steps}) than the ring has in "
                       f"flight ({in_flight}): the consumer takes its next row from the issue "
                       "cursor, at most one row ahead")
        if TAKE and not DYN:
            why.append(f"TAKE={TAKE} needs DYN=1 (it asks the row counter early)")
        elif TAKE and not 0 < TAKE < row_steps:
            why.append(f"TAKE={TAKE} must be in [1, {row_steps - 1}]: the ticket is asked TAKE "
                       f"of a row's {row_steps} steps before its end")
        grid_warps = _grid(rows, WARPS, CTAS) * WARPS        # the launch's warps
        if QUEUES != 1 and not TAKE:
            why.append(f"QUEUES={QUEUES} needs TAKE (the queues' u32 counters)")
        elif not 1 <= QUEUES <= min(MAX_QUEUES, grid_warps):
            why.append(f"QUEUES={QUEUES} must be in [1, {min(MAX_QUEUES, grid_warps)}] (at "
                       f"most {MAX_QUEUES} counters, and a warp for each queue: {grid_warps} warps)")
        if not 1 <= k <= min(_tk.MAX_K, cols):
            why.append(f"k={k} must be in [1, min({_tk.MAX_K}, cols)]")
        if cols % vec:
            why.append(f"cols={cols} must be a multiple of {vec} ({dt} rows start 16-byte "
                       "aligned)")
        if cols > MAX_COLS:
            why.append(f"cols={cols} exceeds {MAX_COLS} (the 16-bit column search)")
        # APPEND=1 refines before a round of 32 that would overflow, APPEND=0 before a step
        room = 32 if APPEND else VECS * 32 * vec
        if CAP % 32 or CAP - room < _tk.MAX_K:
            why.append(f"CAP={CAP} must be a multiple of 32 with room for {_tk.MAX_K} kept "
                       + (f"entries and one append round (32): at least {_tk.MAX_K + 32}"
                          if APPEND else
                          f"entries and VECS={VECS} vectors per lane ({room}): at least "
                          f"{_tk.MAX_K + room}"))
        if APPEND not in (0, 1):
            why.append(f"APPEND={APPEND} must be 0 (per-lane shared atomics) or 1 (warp rounds)")
        elif APPEND and VECS * vec > 32 and VECS % (32 // vec):
            why.append(f"VECS={VECS} vectors of {vec} elements: APPEND=1 filters a step in "
                       f"groups of {32 // vec} vectors (its 32-bit mask), so VECS must be at "
                       f"most {32 // vec} or a multiple of it")
        if not 1 <= WARPS <= 32:
            why.append(f"WARPS={WARPS} must be in [1, 32]")
        elif smem_bytes(WARPS, STAGES, CAP, VECS, BULK) > SMEM_LIMIT:
            why.append(f"WARPS={WARPS} buffers of CAP={CAP} and rings of STAGES={STAGES} take "
                       f"{smem_bytes(WARPS, STAGES, CAP, VECS, BULK)} bytes of shared memory, "
                       f"more than {SMEM_LIMIT}")
        if VECS < 1 or STAGES % VECS or not 2 * VECS <= STAGES <= 32:
            why.append(f"STAGES={STAGES} (the cp.async ring) must be a multiple of VECS={VECS}, "
                       "at least two steps of it, at most 32")
        if rows * cols >= 1 << 32:
            why.append(f"rows*cols={rows * cols} must be below 2^32 (32-bit element indices)")
        if MAXREG and not 32 <= MAXREG <= 255:
            why.append(f"MAXREG={MAXREG} must be 0 (no cap) or in 32..255 (.maxnreg)")
        if rows < 1 or CTAS < 1:
            why.append(f"rows={rows} and CTAS={CTAS} must be positive")
        if STRICT not in (0, 1):
            why.append(f"STRICT={STRICT} must be 0 or 1 (the strict threshold after a refine)")
        if FE and not (T.cdiv(k, 32) <= FE <= CAP // 32):
            why.append(f"FE={FE} (entries per lane of the row end's short refine) must be 0 "
                       f"(min(8, CAP/32)) or in [cdiv(k, 32), CAP/32] = [{T.cdiv(k, 32)}, "
                       f"{CAP // 32}]: it must hold k entries and fit the buffer")
        if not 0 <= SKEW <= MAX_SKEW:
            why.append(f"SKEW={SKEW} (ns of start delay per warp phase) must be in [0, "
                       f"{MAX_SKEW}]: 3 SKEW within nanosleep's 1 ms")
        if GUESS not in (0, 1, 2):
            why.append(f"GUESS={GUESS} must be 0 (the next row from rank 2k + 16), 1 (rank "
                       "3k/2 + 16, a short row's guess one 12-bit unit lower) or 2 (1's, mixed "
                       "halfway with the last row's guess)")
        if FUSE not in (0, 1):
            why.append(f"FUSE={FUSE} must be 0 (a ranking pass per entry of a lane) or 1 (one "
                       "pass, u64 entries)")
        if SEED not in (0, 1, 2):
            why.append(f"SEED={SEED} must be 0 (a warp's first row from -inf), 1 (from the "
                       "lane maxima of its first steps, a 2% miss bound a row) or 2 (the same, "
                       "a 1e-4 bound)")
        if SORT not in (0, 1):
            why.append(f"SORT={SORT} must be 0 (the row's end by refine and ranking) or 1 (by one "
                       f"bitonic sort of at most {SORT_N} entries)")
        if BULK not in (0, 1):
            why.append(f"BULK={BULK} must be 0 (each lane's cp.async a vector) or 1 (lane 0's "
                       "bulk copy a step on an mbarrier)")
        elif BULK and VECS & (VECS - 1):
            why.append(f"BULK=1 needs VECS a power of two (got {VECS}): a step's slot is its "
                       "stage offset shifted by the step's bytes")
        if PK not in (0, 1):
            why.append(f"PK={PK} must be 0 (elements compared as f32) or 1 (bf16 halves "
                       "compared in place)")
        elif PK and (dt != "bf16" or not APPEND):
            why.append(f"PK=1 compares bf16 halves in place: it needs dt=bf16 and APPEND=1 (got "
                       f"dt={dt}, APPEND={APPEND})")
        return why
    return constraints


constraints_f32, constraints_bf16 = _constraints("f32"), _constraints("bf16")


def make_case(name, rows, cols, k, WARPS=8, STAGES=8, VECS=None, CAP=512, CTAS=264,
              MAXREG=128, small=True, dt="f32", STRICT=0, APPEND=0, FE=0, SKEW=0, GUESS=0,
              FUSE=0, SEED=0, PK=0, BULK=0, SORT=0, DYN=0, SPLIT=0, GFETCH=0, TAKE=0,
              QUEUES=1, main=False):
    """A case; large ones are the H200's (tag h200), never simulated; `main`: the size's
    measured fastest, the one a whole-zoo run times (``-k main``)."""
    VECS = VECS or (2 if dt == "f32" else 1)  # noqa: N806 (the kernel's parameter name)
    tags = (() if small else ("h200",)) + (("main",) if main else ())
    return T.case(name, small=small, tags=tags, rows=rows, cols=cols, k=k,
                  WARPS=WARPS, STAGES=STAGES, VECS=VECS, CAP=CAP, CTAS=CTAS, MAXREG=MAXREG,
                  **({"STRICT": STRICT} if STRICT else {}),
                  **({"APPEND": APPEND} if APPEND else {}),
                  **({"FE": FE} if FE else {}),
                  **({"SKEW": SKEW} if SKEW else {}),
                  **({"GUESS": GUESS} if GUESS else {}),
                  **({"FUSE": FUSE} if FUSE else {}),
                  **({"SEED": SEED} if SEED else {}),
                  **({"PK": PK} if PK else {}),
                  **({"BULK": BULK} if BULK else {}),
                  **({"SORT": SORT} if SORT else {}),
                  **({"DYN": DYN} if DYN else {}),
                  **({"SPLIT": SPLIT} if SPLIT else {}),
                  **({"GFETCH": GFETCH} if GFETCH else {}),
                  **({"TAKE": TAKE} if TAKE else {}),
                  **({"QUEUES": QUEUES} if QUEUES != 1 else {}))


# scan8's large cases (session 11): the three sizes, and GUESS + FUSE at 2 KB steps (16 warps an
# SM), 4 KB steps (`_v8`, CAP by k) and 32 warps an SM (`_w32`)
_K50 = dict(rows=16384, cols=8192, k=50, small=False)
_K64 = dict(rows=4096, cols=32768, k=64, small=False)
_KB16 = dict(rows=8192, cols=32768, k=64, small=False, dt="bf16")
_G1FU = dict(STRICT=1, APPEND=1, GUESS=1, FUSE=1)
_V4 = dict(VECS=4, STAGES=16, CAP=256, **_G1FU)
_V8 = dict(VECS=8, STAGES=24, **_G1FU)
_W32 = dict(VECS=4, STAGES=12, CAP=96, CTAS=528, MAXREG=64, **_G1FU)
_G1FU_SMALL = dict(STRICT=1, APPEND=1, GUESS=1, FUSE=1)

SUITE_F32 = T.suite(
    topk_f32_warp, **_suite_args("f32"),
    cases=[
        # 5 rows on 2 warps (3 and 2 rows each); row 0 is heavy ties (-3..3: the column search)
        make_case("r5_c2052_k64", rows=5, cols=2052, k=64, WARPS=2, CTAS=1, CAP=320),
        make_case("r3_c1000_k1_v1", rows=3, cols=1000, k=1, WARPS=1, CTAS=2, VECS=1, CAP=192),
        make_case("r4_c4100_k7_s2", rows=4, cols=4100, k=7, WARPS=2, STAGES=2, VECS=1,
                  CTAS=2, CAP=192),
        make_case("r2_c64_k64", rows=2, cols=64, k=64, WARPS=2),
        # STRICT (session 7): row 0 of ties (warp 0's first row; its next row, 2, starts from
        # -inf), k = 1 on one warp over three rows, k = 64 over a 2-step row
        make_case("r5_c2052_k64_st", rows=5, cols=2052, k=64, WARPS=2, CTAS=1, CAP=320,
                  STRICT=1),
        make_case("r3_c1000_k1_v1_st", rows=3, cols=1000, k=1, WARPS=1, CTAS=2, VECS=1, CAP=192,
                  STRICT=1),
        make_case("r3_c260_k64_st", rows=3, cols=260, k=64, WARPS=1, CTAS=1, STRICT=1),
        # APPEND=1 (session 9): warp rounds; CAP at its least (96, 128) so refines fall inside
        # the rounds, row 0 of ties, a tail (1100 columns), 4 vectors a step, k = 1 not STRICT
        # (`_ap`, `_apst`: not `_st`, which MODE=topk4's smoke selects)
        make_case("r5_c2052_k64_apst", rows=5, cols=2052, k=64, WARPS=2, CTAS=1, CAP=128,
                  STRICT=1, APPEND=1),
        make_case("r3_c1100_k17_v4_apst", rows=3, cols=1100, k=17, WARPS=1, CTAS=2, VECS=4,
                  CAP=96, STRICT=1, APPEND=1),
        make_case("r3_c1000_k1_v1_ap", rows=3, cols=1000, k=1, WARPS=1, CTAS=2, VECS=1, CAP=96,
                  APPEND=1),
        # FE (scan7): the row end's short refine over FE entries per lane; rows that end with
        # more (the first from -inf, the tie row) take the full one: both paths, a tail
        make_case("r5_c2052_k64_fe3", rows=5, cols=2052, k=64, WARPS=2, CTAS=1, CAP=128,
                  STRICT=1, APPEND=1, FE=3),
        make_case("r4_c1100_k17_v4_fe1", rows=4, cols=1100, k=17, WARPS=1, CTAS=2, VECS=4,
                  CAP=96, STRICT=1, APPEND=1, FE=1),
        # SKEW (scan7): warp 1 starts late (numsim has no timing: the code path, the answer)
        make_case("r5_c2052_k64_fe3_sk", rows=5, cols=2052, k=64, WARPS=2, CTAS=1, CAP=128,
                  STRICT=1, APPEND=1, FE=3, SKEW=500),
        # GUESS=1 (scan8): rank 3k/2 + 16, a short row's guess lowered; row 0 of ties (its
        # successor from -inf), odd k, a tail; the rings of the H200 cases: `_w32`'s (VECS 4,
        # STAGES 12, CAP 96: 2 steps ahead) and `_v8`'s (4 KB steps, all 32 bits of the step's
        # mask, STAGES 24), a tail inside a step
        make_case("r6_c2052_k37_g1s12", rows=6, cols=2052, k=37, WARPS=2, CTAS=1, VECS=4,
                  STAGES=12, CAP=96, STRICT=1, APPEND=1, FE=3, GUESS=1, FUSE=1),
        make_case("r4_c1000_k1_v1_g1", rows=4, cols=1000, k=1, WARPS=1, CTAS=1, VECS=1, CAP=96,
                  STRICT=1, APPEND=1, GUESS=1),
        make_case("r5_c2052_k64_v8g1", rows=5, cols=2052, k=64, WARPS=2, CTAS=1, VECS=8,
                  STAGES=24, CAP=128, STRICT=1, APPEND=1, FE=3, GUESS=1),
        # FUSE=1 (scan8): the row's k ranked in one pass over u64 entries; k 64 over ties (row
        # 0), k 50 (two entries a lane, the second partly empty), k 1
        make_case("r5_c2052_k64_fu", rows=5, cols=2052, k=64, WARPS=2, CTAS=1, CAP=128,
                  STRICT=1, APPEND=1, FE=3, GUESS=1, FUSE=1),
        make_case("r4_c2052_k50_v8fu", rows=4, cols=2052, k=50, WARPS=1, CTAS=1, VECS=8,
                  STAGES=16, CAP=96, STRICT=1, APPEND=1, GUESS=1, FUSE=1),
        make_case("r3_c1000_k1_fu", rows=3, cols=1000, k=1, WARPS=1, CTAS=2, VECS=1, CAP=96,
                  STRICT=1, APPEND=1, FUSE=1),
        # SEED=1 (scan9): a warp's first row from the j-th largest of its lane maxima over the
        # ring's first steps: 2 warps, row 0 of ties (its lanes' maxima all 3: the seed drops to
        # -inf), warp 1's row 1 seeded (j 6 of 1024 sampled of 4100, a tail), k 50 over 4 KB
        # steps on a tail row (j 13), and k 64 on rows too short to seed (j > 24: from -inf)
        make_case("r5_c4100_k7_sd", rows=5, cols=4100, k=7, WARPS=2, CTAS=1, VECS=4, STAGES=12,
                  CAP=96, STRICT=1, APPEND=1, GUESS=1, FUSE=1, SEED=1),
        make_case("r3_c8196_k50_v8_sd", rows=3, cols=8196, k=50, WARPS=2, CTAS=1, VECS=8,
                  STAGES=16, CAP=96, STRICT=1, APPEND=1, FE=3, GUESS=1, FUSE=1, SEED=1),
        make_case("r3_c2052_k64_sd", rows=3, cols=2052, k=64, WARPS=1, CTAS=1, CAP=128,
                  STRICT=1, APPEND=1, FE=3, GUESS=1, FUSE=1, SEED=1),
        # SEED=2 (scan10): the 1e-4 bound, a deeper rank (j 9 of 1024 sampled of 4100 at k 7,
        # 18 of 1024 of 8196 at k 50 over 4 KB steps): the tie row 0 (its seed -inf), tails
        make_case("r5_c4100_k7_sd2", rows=5, cols=4100, k=7, WARPS=2, CTAS=1, VECS=4, STAGES=12,
                  CAP=96, STRICT=1, APPEND=1, GUESS=1, FUSE=1, SEED=2),
        make_case("r3_c8196_k50_v8_sd2", rows=3, cols=8196, k=50, WARPS=2, CTAS=1, VECS=8,
                  STAGES=16, CAP=96, STRICT=1, APPEND=1, FE=3, GUESS=1, FUSE=1, SEED=2),
        make_case("r4096_c32768_k64", rows=4096, cols=32768, k=64, small=False),
        make_case("r4096_c32768_k64_s12", rows=4096, cols=32768, k=64, STAGES=12, small=False),
        make_case("r4096_c32768_k64_v4", rows=4096, cols=32768, k=64, VECS=4, CAP=640,
                  small=False),
        make_case("r4096_c32768_k64_m80", rows=4096, cols=32768, k=64, MAXREG=80, CTAS=396,
                  small=False),
        make_case("r4096_c32768_k64_v1", rows=4096, cols=32768, k=64, VECS=1, small=False),
        make_case("r16384_c8192_k50", rows=16384, cols=8192, k=50, small=False),
        make_case("r4096_c32768_k64_st", rows=4096, cols=32768, k=64, STRICT=1, small=False),
        make_case("r16384_c8192_k50_st", rows=16384, cols=8192, k=50, STRICT=1, small=False),
        make_case("r16384_c8192_k50_v4", rows=16384, cols=8192, k=50, VECS=4, CAP=640,
                  small=False),
        make_case("r16384_c8192_k50_m80", rows=16384, cols=8192, k=50, MAXREG=80, CTAS=396,
                  small=False),
        # session 9 (branch topk5, docs/TUNING.md "topk (session 9, branch topk5)"): 2 KB a step
        # (VECS 4, 3 steps ahead: STAGES 16), then the warp-round appends alone (_a); file order
        # is the benchmark's order (MODE=topk5), likeliest winner first
        make_case("r4096_c32768_k64_st_a_v4", rows=4096, cols=32768, k=64, VECS=4, STAGES=16,
                  CAP=256, STRICT=1, APPEND=1, small=False),
        make_case("r4096_c32768_k64_st_a", rows=4096, cols=32768, k=64, STRICT=1, APPEND=1,
                  small=False),
        make_case("r16384_c8192_k50_st_a_v4", rows=16384, cols=8192, k=50, VECS=4, STAGES=16,
                  CAP=256, STRICT=1, APPEND=1, small=False),
        make_case("r16384_c8192_k50_st_a", rows=16384, cols=8192, k=50, STRICT=1, APPEND=1,
                  small=False),
        # scan7 (docs/TUNING.md "topk and cumsum (session 10, branch scan7)"): the three
        # `_st_a_v4` figures move the same 512 MB and differ only in rows per warp (2, 4, 8):
        # ~7.6 us per row per warp not hidden by the streaming. FE: the row end's short refine
        # over 5-6 entries per lane instead of 8; `_w4s20`: 4 warps per CTA, 4 CTAs per SM, a
        # ring of 20 (4 steps, 8 KB, ahead per warp instead of 6 KB) across the row's end
        make_case("r16384_c8192_k50_st_a_v4_f5", rows=16384, cols=8192, k=50, VECS=4, STAGES=16,
                  CAP=256, STRICT=1, APPEND=1, FE=5, small=False),
        make_case("r16384_c8192_k50_st_f5", rows=16384, cols=8192, k=50, STRICT=1, FE=5,
                  small=False),
        make_case("r16384_c8192_k50_st_a_v4_w4s20", rows=16384, cols=8192, k=50, WARPS=4,
                  CTAS=528, VECS=4, STAGES=20, CAP=256, STRICT=1, APPEND=1, small=False),
        make_case("r4096_c32768_k64_st_a_v4_f6", rows=4096, cols=32768, k=64, VECS=4, STAGES=16,
                  CAP=256, STRICT=1, APPEND=1, FE=6, small=False),
        # SKEW: 4 phases of warps start 0, 2, 4, 6 us late (`_sk6`: 0..18 us), so that fewer of
        # an SM's warps end a row at a time while the rest stream
        make_case("r16384_c8192_k50_st_a_v4_sk2", rows=16384, cols=8192, k=50, VECS=4, STAGES=16,
                  CAP=256, STRICT=1, APPEND=1, SKEW=2000, small=False),
        make_case("r16384_c8192_k50_st_a_v4_sk6", rows=16384, cols=8192, k=50, VECS=4, STAGES=16,
                  CAP=256, STRICT=1, APPEND=1, SKEW=6000, small=False),
        make_case("r4096_c32768_k64_st_a_v4_sk6", rows=4096, cols=32768, k=64, VECS=4, STAGES=16,
                  CAP=256, STRICT=1, APPEND=1, SKEW=6000, small=False),
        # scan8 (session 11, docs/TUNING.md "top-k (session 11, branch topk8)"), in the
        # benchmark's order: GUESS=1 alone (the next row from rank 3k/2 + 16, a short row's
        # guess one 12-bit unit lower: 12.7% of 8-row warps at 8192 columns read a row twice
        # without it; the row end's short refine over 4 entries a lane, ~98 are left), then
        # with FUSE=1 (the ranking in one pass, 61-88 registers instead of 128 at k 50), 4 KB
        # steps (`_v8`: VECS 8, STAGES 24: 12 KB outstanding per warp at the wait, CAP 160 /
        # 192 so that two ~110 KB CTAs share an SM), and twice the warps an SM with half the
        # rows each: `_w32` (4 CTAs of 8, STAGES 12, CAP 96, MAXREG 64: 4 rows on the slowest
        # warp instead of 8; at 32768 columns one row a warp)
        make_case("r16384_c8192_k50_st_a_v4_g1", rows=16384, cols=8192, k=50, VECS=4, STAGES=16,
                  CAP=256, STRICT=1, APPEND=1, FE=4, GUESS=1, small=False),
        make_case("r16384_c8192_k50_st_a_v4_g1fu", **_K50, **_V4, FE=4),
        make_case("r16384_c8192_k50_st_a_v8_g1fu", **_K50, **_V8, CAP=160, FE=4),
        make_case("r16384_c8192_k50_st_a_v4_g1fu_w32", **_K50, **_W32),
        make_case("r4096_c32768_k64_st_a_v4_g1fu", **_K64, **_V4, FE=5),
        make_case("r4096_c32768_k64_st_a_v8_g1fu", **_K64, **_V8, CAP=192, FE=5),
        make_case("r4096_c32768_k64_st_a_v4_g1fu_w32", **_K64, **_W32),
        # scan9 (session 13, docs/TUNING.md "top-k (session 13, branch topk9)"): SEED=1 on each
        # size's two best of scan8 (4 KB steps at 16 warps an SM, 2 KB steps at 32): a warp's
        # first row no longer costs ~2x a later one (numsim: 8192 k 50 8.6k -> 4.7k PTX, 32768
        # k 64 18.0k -> 12.0k, -8.7k at `_w32`'s CAP 96), on every warp of the grid
        make_case("r16384_c8192_k50_st_a_v8_g1fu_sd", **_K50, **_V8, CAP=160, FE=4, SEED=1),
        make_case("r16384_c8192_k50_st_a_v4_g1fu_w32_sd", **_K50, **_W32, SEED=1),
        make_case("r4096_c32768_k64_st_a_v8_g1fu_sd", **_K64, **_V8, CAP=192, FE=5, SEED=1),
        make_case("r4096_c32768_k64_st_a_v4_g1fu_w32_sd", **_K64, **_W32, SEED=1),
        # scan10 (session 14, docs/TUNING.md "top-k (session 14, branch topk10)"): SEED=2, the
        # seed's rank from a 1e-4 bound a row instead of 2% (j 14 / 10 / 18 at f32 `_v8`, f32
        # `_w32`, 8192 `_w32`): scan9's misses (3 first rows of 2112 at f32 32768 `_v8_sd` in
        # the timed input) each read a row again and made one warp ~35-57 us late
        make_case("r4096_c32768_k64_st_a_v8_g1fu_sd2", **_K64, **_V8, CAP=192, FE=5, SEED=2),
        make_case("r4096_c32768_k64_st_a_v4_g1fu_w32_sd2", **_K64, **_W32, SEED=2,
                  main=True),   # the fastest measured at this size: 147.02 us (session 15)
        # session 30: the same filled by lane 0's bulk copy a step (2 KB; one row a warp, so
        # the static walk is the main's too): QUEUE 106 beside the other two mains' `_bk`
        make_case("r4096_c32768_k64_st_a_v4_g1fu_w32_sd2_bk", **_K64, **_W32, SEED=2, BULK=1),
        make_case("r16384_c8192_k50_st_a_v4_g1fu_w32_sd2", **_K50, **_W32, SEED=2),
        # scan12 (session 22): f32 8192's best (8 row ends a warp) with its row end by one
        # bitonic sort (SORT=1): -380 PTX a row in numsim and no 48-round redux chain
        make_case("r16384_c8192_k50_st_a_v8_g1fu_sd_so", **_K50, **_V8, CAP=160, FE=4, SEED=1,
                  SORT=1),   # 163.94 us (session 23)
        # DYN=1 (session 23): rows from a counter (the timeline put the static walk's tail at 21%
        # of the kernel: the last warp 181.0 us, the SMs' median 142.6)
        make_case("r16384_c8192_k50_st_a_v8_g1fu_sd_so_dyn", **_K50, **_V8, CAP=160, FE=4,
                  SEED=1, SORT=1, DYN=1),
        # small: 9 rows on 4 warps (13 tickets), and on one warp of one CTA; APPEND=0's path
        make_case("r9_c2056_k50_dyn", rows=9, cols=2056, k=50, WARPS=2, CTAS=2, VECS=8,
                  STAGES=24, CAP=160, FE=4, SEED=1, SORT=1, DYN=1, **_G1FU_SMALL),
        make_case("r5_c2060_k64_dyn", rows=5, cols=2060, k=64, WARPS=1, CTAS=1, CAP=128,
                  STRICT=1, APPEND=1, FUSE=1, DYN=1),
        make_case("r7_c1000_k33_dyn", rows=7, cols=1000, k=33, WARPS=2, CTAS=2, CAP=320, DYN=1),
        # GUESS=2 (session 24): the guess mixed halfway with the last row's. Session 23's traces
        # of `_sd` and `_so_dyn` hold 5 and 7 rows read a second time (22-96 us each), and
        # those warps end last: without them `_so_dyn`'s last warp ends at 142.6 us, not 160.0
        make_case("r16384_c8192_k50_st_a_v8_g2fu_sd_so_dyn", **_K50, **{**_V8, "GUESS": 2},
                  CAP=160, FE=4, SEED=1, SORT=1, DYN=1),   # 148.08 us on the H200 (session 26)
        make_case("r16384_c8192_k50_st_a_v8_g2fu_sd_so", **_K50, **{**_V8, "GUESS": 2},
                  CAP=160, FE=4, SEED=1, SORT=1),
        # small: the DYN case's rows and rings; row 0 of ties (its successor from -inf, nothing
        # mixed), odd k, a tail, a warp's later rows mixed
        make_case("r9_c2056_k50_g2_dyn", rows=9, cols=2056, k=50, WARPS=2, CTAS=2, VECS=8,
                  STAGES=24, CAP=160, FE=4, SEED=1, SORT=1, DYN=1,
                  **{**_G1FU_SMALL, "GUESS": 2}),
        make_case("r6_c2052_k37_g2s12", rows=6, cols=2052, k=37, WARPS=1, CTAS=1, VECS=4,
                  STAGES=12, CAP=96, STRICT=1, APPEND=1, FE=3, GUESS=2, FUSE=1),
        # SPLIT=2 (session 24): half rows as the items, merged by the second of a row's two to
        # finish. At 32768 columns a warp of `_w32` streams ONE row (4096 rows, 4224 warps), so
        # the kernel is its slowest warp's row; halves give the counter two items a warp
        make_case("r4096_c32768_k64_st_a_v4_g2fu_w32_sd2_dyn_sp2", **_K64,
                  **{**_W32, "GUESS": 2}, SEED=2, DYN=1, SPLIT=2),
        # small: the half rows of 5 rows on 4 warps from the counter (row 0 of ties, k 50 over
        # 2056-column halves), 3 rows on 2 CTAs' single warps walked statically (APPEND=0's
        # counter, k 64), 4 rows of 1000 (halves of 500: a tail inside each half)
        make_case("r5_c4112_k50_g2_dyn_sp2", rows=5, cols=4112, k=50, WARPS=2, CTAS=2, VECS=4,
                  STAGES=12, CAP=128, SEED=2, SORT=1, DYN=1, SPLIT=2,
                  **{**_G1FU_SMALL, "GUESS": 2}),
        make_case("r3_c2064_k64_sp2", rows=3, cols=2064, k=64, WARPS=1, CTAS=2, CAP=320,
                  SPLIT=2),
        make_case("r4_c1000_k33_st_sp2", rows=4, cols=1000, k=33, WARPS=2, CTAS=1, CAP=320,
                  STRICT=1, SPLIT=2),
        # GFETCH=1 (session 25): the controls of a second read's appends from registers (now
        # every case's): session 25's H100 trace of `_g2fu_sd_so_dyn` held 2 second reads of
        # 129-136 us, each ~50 appends fetched again from global memory one round trip apiece
        make_case("r16384_c8192_k50_st_a_v8_g2fu_sd_so_dyn_gf", **_K50, **{**_V8, "GUESS": 2},
                  CAP=160, FE=4, SEED=1, SORT=1, DYN=1, GFETCH=1),
        make_case("r4096_c32768_k64_st_a_v4_g1fu_w32_sd2_gf", **_K64, **_W32, SEED=2, GFETCH=1),
        # TAKE (session 26): the next row's ticket asked TAKE steps before the row's end and
        # read there. The ncu profile of `_v8_g2fu_sd_so_dyn` (session 26) put 20.7% of the
        # warps' stall samples on the first use of a ticket asked and read at once: the
        # atomic's round trip with HBM busy, the ring draining behind it at every row's end
        make_case("r16384_c8192_k50_st_a_v8_g2fu_sd_so_dyn_ta1", **_K50,
                  **{**_V8, "GUESS": 2}, CAP=160, FE=4, SEED=1, SORT=1, DYN=1, TAKE=1),
        make_case("r16384_c8192_k50_st_a_v8_g2fu_sd_so_dyn_ta2", **_K50,
                  **{**_V8, "GUESS": 2}, CAP=160, FE=4, SEED=1, SORT=1, DYN=1, TAKE=2),
        # half a row early: session 26's H100 profile of `_ta2` still had 8.4% of the stall
        # samples on the ticket's first use, two steps (~6 us there) after it was asked
        make_case("r16384_c8192_k50_st_a_v8_g2fu_sd_so_dyn_ta4", **_K50,
                  **{**_V8, "GUESS": 2}, CAP=160, FE=4, SEED=1, SORT=1, DYN=1, TAKE=4),
        # small: rows of 3 steps (2 in flight), the ticket 1 and 2 steps early: with 2 the ask
        # falls among the ring's first issues, before the loop; 7 rows on one warp
        make_case("r9_c2056_k50_g2_dyn_ta1", rows=9, cols=2056, k=50, WARPS=2, CTAS=2, VECS=8,
                  STAGES=24, CAP=160, FE=4, SEED=1, SORT=1, DYN=1, TAKE=1,
                  **{**_G1FU_SMALL, "GUESS": 2}),
        make_case("r9_c2056_k50_g2_dyn_ta2", rows=9, cols=2056, k=50, WARPS=2, CTAS=2, VECS=8,
                  STAGES=24, CAP=160, FE=4, SEED=1, SORT=1, DYN=1, TAKE=2,
                  **{**_G1FU_SMALL, "GUESS": 2}),
        make_case("r7_c1000_k33_dyn_ta1", rows=7, cols=1000, k=33, WARPS=1, CTAS=1, CAP=320,
                  DYN=1, TAKE=1),
        # QUEUES (session 26): 8 counters, warp gw taking rows = gw (mod 8) from counter gw mod
        # 8, so that no one address takes every warp's atomic (~125 a microsecond at f32 8192)
        make_case("r16384_c8192_k50_st_a_v8_g2fu_sd_so_dyn_ta2_q8", **_K50,
                  **{**_V8, "GUESS": 2}, CAP=160, FE=4, SEED=1, SORT=1, DYN=1, TAKE=2, QUEUES=8,
                  main=True),   # the fastest measured on the H200: 143.92 us (session 27)
        # session 27 (MODE=topk18): on the H200 `_ta1` ran 0.5% ahead of `_ta2` and 8 counters
        # 0.7%; the lead and the queue count around that best
        make_case("r16384_c8192_k50_st_a_v8_g2fu_sd_so_dyn_ta1_q8", **_K50,
                  **{**_V8, "GUESS": 2}, CAP=160, FE=4, SEED=1, SORT=1, DYN=1, TAKE=1, QUEUES=8),
        make_case("r16384_c8192_k50_st_a_v8_g2fu_sd_so_dyn_ta1_q16", **_K50,
                  **{**_V8, "GUESS": 2}, CAP=160, FE=4, SEED=1, SORT=1, DYN=1, TAKE=1,
                  QUEUES=16),
        make_case("r16384_c8192_k50_st_a_v8_g2fu_sd_so_dyn_ta2_q16", **_K50,
                  **{**_V8, "GUESS": 2}, CAP=160, FE=4, SEED=1, SORT=1, DYN=1, TAKE=2,
                  QUEUES=16),
        # small: 16 queues, one warp each (2 CTAs of 8), 20 rows (queues 0-3 take two)
        make_case("r20_c1000_k33_dyn_ta1_q16", rows=20, cols=1000, k=33, WARPS=8, CTAS=2,
                  CAP=320, DYN=1, TAKE=1, QUEUES=16),
        # small: 9 rows in 3 queues on 4 warps (queue 0 has two warps, 1 and 2 one each)
        make_case("r9_c2056_k50_g2_dyn_ta2_q3", rows=9, cols=2056, k=50, WARPS=2, CTAS=2,
                  VECS=8, STAGES=24, CAP=160, FE=4, SEED=1, SORT=1, DYN=1, TAKE=2, QUEUES=3,
                  **{**_G1FU_SMALL, "GUESS": 2}),
        # BULK=1 on the counter's walk (session 30): the main's ring filled by lane 0's one bulk
        # copy a step (4 KB). Why: the main's ncu profile on the H200 (s27/d9) ran the L2 at
        # 88.5% of its peak against the DRAM's 83.4%, and the copy's TMA stream on the H100
        # (s29/d2) costs the L2 0.92 of its DRAM throughput, top-k's cp.async ring 1.00-1.06
        make_case("r16384_c8192_k50_st_a_v8_g2fu_sd_so_dyn_ta2_q8_bk", **_K50,
                  **{**_V8, "GUESS": 2}, CAP=160, FE=4, SEED=1, SORT=1, DYN=1, TAKE=2, QUEUES=8,
                  BULK=1),
        # small: the same over a tail (2056: a row's last step copies 8 of 256 vectors), 9 rows
        # in 3 queues on 4 warps, and without TAKE from the single counter
        make_case("r9_c2056_k50_g2_dyn_ta2_q3_bk", rows=9, cols=2056, k=50, WARPS=2, CTAS=2,
                  VECS=8, STAGES=24, CAP=160, FE=4, SEED=1, SORT=1, DYN=1, TAKE=2, QUEUES=3,
                  BULK=1, **{**_G1FU_SMALL, "GUESS": 2}),
        make_case("r7_c1000_k33_dyn_bk", rows=7, cols=1000, k=33, WARPS=2, CTAS=2, CAP=320,
                  DYN=1, BULK=1),
        # small: more warps than rows (4 warps, 3 rows), seeded: a warp whose first row is none
        # (the static walk's warp 3; the counter's END ticket) has no copy in flight to wait on
        make_case("r3_c8200_k9_g2_dyn_ta2_bk", rows=3, cols=8200, k=9, WARPS=2, CTAS=2,
                  VECS=8, STAGES=24, CAP=160, FE=4, SEED=1, SORT=1, DYN=1, TAKE=2, BULK=1,
                  **{**_G1FU_SMALL, "GUESS": 2}),
        make_case("r3_c8200_k9_g2_sd_bk", rows=3, cols=8200, k=9, WARPS=2, CTAS=2,
                  VECS=8, STAGES=24, CAP=160, FE=4, SEED=1, SORT=1, BULK=1,
                  **{**_G1FU_SMALL, "GUESS": 2}),
    ],
    constraints=constraints_f32,
)

SUITE_BF16 = T.suite(
    topk_bf16_warp, **_suite_args("bf16"),
    cases=[
        make_case("r4_c1000_k33", rows=4, cols=1000, k=33, WARPS=2, CTAS=1, CAP=320, dt="bf16"),
        make_case("r5_c1000_k33_st", rows=5, cols=1000, k=33, WARPS=2, CTAS=1, CAP=320,
                  dt="bf16", STRICT=1),
        make_case("r3_c2056_k64_v2", rows=3, cols=2056, k=64, WARPS=1, CTAS=2, VECS=2, CAP=576,
                  dt="bf16"),
        make_case("r5_c1000_k33_apst", rows=5, cols=1000, k=33, WARPS=2, CTAS=1, CAP=96,
                  dt="bf16", STRICT=1, APPEND=1),
        make_case("r3_c2056_k64_v2_apst", rows=3, cols=2056, k=64, WARPS=1, CTAS=2, VECS=2,
                  STAGES=4, CAP=128, dt="bf16", STRICT=1, APPEND=1),
        make_case("r2_c3000_k50_v4_apst", rows=2, cols=3000, k=50, WARPS=1, CTAS=1, VECS=4,
                  CAP=96, dt="bf16", STRICT=1, APPEND=1),
        make_case("r5_c1000_k33_fe2", rows=5, cols=1000, k=33, WARPS=2, CTAS=1, CAP=96,
                  dt="bf16", STRICT=1, APPEND=1, FE=2),
        make_case("r5_c1000_k33_g1", rows=5, cols=1000, k=33, WARPS=1, CTAS=1, CAP=96,
                  dt="bf16", STRICT=1, APPEND=1, FE=2, GUESS=1),
        make_case("r5_c1000_k33_fu", rows=5, cols=1000, k=33, WARPS=2, CTAS=1, CAP=96,
                  dt="bf16", STRICT=1, APPEND=1, FE=2, GUESS=1, FUSE=1),
        make_case("r5_c4104_k9_sd", rows=5, cols=4104, k=9, WARPS=2, CTAS=1, VECS=4, STAGES=12,
                  CAP=96, dt="bf16", STRICT=1, APPEND=1, GUESS=1, FUSE=1, SEED=1),
        make_case("r5_c4104_k9_sd2", rows=5, cols=4104, k=9, WARPS=2, CTAS=1, VECS=4, STAGES=12,
                  CAP=96, dt="bf16", STRICT=1, APPEND=1, GUESS=1, FUSE=1, SEED=2),
        # PK=1 (scan11): the filter and the pass masks compare bf16 halves in place; the
        # suite's row 0 of ties, tails (1000 = 125 vectors, 4104 = 513), the rounds' refine at
        # CAP 96, one vector a step and four, from -inf and seeded (`_pk2`: SEED=2; no "_sd" in
        # the names, which scan9's and scan10's smoke select)
        make_case("r5_c1000_k33_pk", rows=5, cols=1000, k=33, WARPS=2, CTAS=1, CAP=96,
                  dt="bf16", STRICT=1, APPEND=1, FE=2, GUESS=1, FUSE=1, PK=1),
        make_case("r5_c4104_k9_pk2", rows=5, cols=4104, k=9, WARPS=2, CTAS=1, VECS=4,
                  STAGES=12, CAP=96, dt="bf16", STRICT=1, APPEND=1, GUESS=1, FUSE=1, SEED=2,
                  PK=1),
        make_case("r3_c3000_k50_v4_pk", rows=3, cols=3000, k=50, WARPS=1, CTAS=1, VECS=4,
                  CAP=96, dt="bf16", STRICT=1, APPEND=1, GUESS=1, FUSE=1, PK=1),
        # VECS 8 (session 22): 4 KB steps filtered as two groups of 4 vectors (APPEND's 32-bit
        # mask each): seeded and PK over 4104 (513 vectors: the last step holds one, in its
        # first group), k 64 from -inf without PK over 3112 (389 vectors: the last step's
        # second group partly in the row; ties in row 0), 2 warps
        make_case("r3_c4104_k50_v8sd2pk", rows=3, cols=4104, k=50, WARPS=1, CTAS=1, VECS=8,
                  STAGES=24, CAP=96, dt="bf16", STRICT=1, APPEND=1, GUESS=1, FUSE=1, SEED=2,
                  PK=1),
        make_case("r5_c3112_k64_v8", rows=5, cols=3112, k=64, WARPS=2, CTAS=1, VECS=8,
                  STAGES=16, CAP=128, dt="bf16", STRICT=1, APPEND=1, FE=3, GUESS=1, FUSE=1),
        # BULK=1 (session 22): lane 0's bulk copy a step on the slot's mbarrier; 2 warps over a
        # tail (4104: the last step's copy holds one vector), the ring wrapping across rows,
        # seeded PK in 2 KB steps and VECS 8 without PK; the tie row 0
        make_case("r5_c4104_k50_v4_bk", rows=5, cols=4104, k=50, WARPS=2, CTAS=1, VECS=4,
                  STAGES=12, CAP=96, dt="bf16", STRICT=1, APPEND=1, GUESS=1, FUSE=1, SEED=2,
                  PK=1, BULK=1),
        make_case("r5_c3112_k64_v8_bk", rows=5, cols=3112, k=64, WARPS=2, CTAS=1, VECS=8,
                  STAGES=16, CAP=128, dt="bf16", STRICT=1, APPEND=1, FE=3, GUESS=1, FUSE=1,
                  BULK=1),
        # SORT=1 (session 22): the row end by one bitonic sort (at most 128 entries; more: the
        # refine), the tie row 0 (its guess -inf), seeded rows, k 64 and 9
        make_case("r5_c4104_k50_v4_so", rows=5, cols=4104, k=50, WARPS=2, CTAS=1, VECS=4,
                  STAGES=12, CAP=96, dt="bf16", STRICT=1, APPEND=1, GUESS=1, FUSE=1, SEED=2,
                  PK=1, SORT=1),
        make_case("r5_c3112_k64_so", rows=5, cols=3112, k=64, WARPS=2, CTAS=1, VECS=4,
                  STAGES=16, CAP=256, dt="bf16", STRICT=1, APPEND=1, GUESS=1, FUSE=1, SORT=1),
        make_case("r8192_c32768_k64", rows=8192, cols=32768, k=64, small=False, dt="bf16"),
        make_case("r8192_c32768_k64_v2", rows=8192, cols=32768, k=64, VECS=2, CAP=576,
                  small=False, dt="bf16"),
        make_case("r8192_c32768_k64_s12", rows=8192, cols=32768, k=64, STAGES=12, small=False,
                  dt="bf16"),
        make_case("r8192_c32768_k16", rows=8192, cols=32768, k=16, small=False, dt="bf16"),
        make_case("r8192_c32768_k64_st", rows=8192, cols=32768, k=64, STRICT=1, small=False,
                  dt="bf16"),
        # session 9: 2 KB a step, 1 KB (f32's default), then 512 B (VECS 1) as before
        make_case("r8192_c32768_k64_st_a_v4", rows=8192, cols=32768, k=64, VECS=4, STAGES=16,
                  CAP=256, STRICT=1, APPEND=1, small=False, dt="bf16"),
        # scan7: the row end's short refine over 6 entries per lane (~144-160 at the end)
        make_case("r8192_c32768_k64_st_a_v4_f6", rows=8192, cols=32768, k=64, VECS=4, STAGES=16,
                  CAP=256, STRICT=1, APPEND=1, FE=6, small=False, dt="bf16"),
        make_case("r8192_c32768_k64_st_a_v4_sk6", rows=8192, cols=32768, k=64, VECS=4, STAGES=16,
                  CAP=256, STRICT=1, APPEND=1, SKEW=6000, small=False, dt="bf16"),
        make_case("r8192_c32768_k64_st_a_v2", rows=8192, cols=32768, k=64, VECS=2, STAGES=16,
                  CAP=256, STRICT=1, APPEND=1, small=False, dt="bf16"),
        # (STAGES 12: at 80 registers 3 CTAs of 64 KB would fit an SM, and the grid is 2 per
        # SM; session 7's `_s12` ran as STAGES 8 within 0.4%)
        make_case("r8192_c32768_k64_st_a", rows=8192, cols=32768, k=64, STAGES=12, STRICT=1,
                  APPEND=1, small=False, dt="bf16"),
        # scan8: as f32 (4 rows on a warp at 16 warps an SM, 2 at `_w32`)
        make_case("r8192_c32768_k64_st_a_v4_g1fu", **_KB16, **_V4, FE=5),
        make_case("r8192_c32768_k64_st_a_v4_g1fu_w32", **_KB16, **_W32),
        # scan9: SEED=1 (first rows: 19.0k -> 12.3k PTX at 16 warps an SM, 22.7k -> 12.0k at 32)
        make_case("r8192_c32768_k64_st_a_v4_g1fu_sd", **_KB16, **_V4, FE=5, SEED=1),
        make_case("r8192_c32768_k64_st_a_v4_g1fu_w32_sd", **_KB16, **_W32, SEED=1),
        # scan10: SEED=2 (j 18 at `_v4`, 14 at `_w32`; scan9's j 13 missed 2 first rows of 2112)
        make_case("r8192_c32768_k64_st_a_v4_g1fu_sd2", **_KB16, **_V4, FE=5, SEED=2),
        make_case("r8192_c32768_k64_st_a_v4_g1fu_w32_sd2", **_KB16, **_W32, SEED=2),
        # scan11 (session 15, docs/TUNING.md "top-k (session 15, branch topk11)"): PK=1, the
        # filter's reach test and the hit vectors' pass masks on bf16 halves in place (one
        # HSETP2 a word, no f32 expansion): the pass masks were 46% of a later row's PTX
        make_case("r8192_c32768_k64_st_a_v4_g1fu_w32_sd2_pk", **_KB16, **_W32, SEED=2, PK=1),
        make_case("r8192_c32768_k64_st_a_v4_g1fu_sd2_pk", **_KB16, **_V4, FE=5, SEED=2, PK=1),
        # scan12 (session 22, docs/TUNING.md "top-k (session 22)"): bf16 in 4 KB steps, as f32's
        # `_v8` (f32 32768 `_v4_g1fu` -> `_v8_g1fu` 156.85 -> 152.78 us in one job): a step
        # filtered as two groups of 4 vectors
        make_case("r8192_c32768_k64_st_a_v8_g1fu_sd2_pk", **_KB16, **_V8, CAP=192, FE=5, SEED=2,
                  PK=1),
        # and the same filled by lane 0's bulk copy a step (BULK=1): +3% PTX a row in numsim
        # (the slot's wait loop and cursors against 4 cp.async and a commit group), so a gain
        # would be the TMA engine's stream, not fewer instructions
        make_case("r8192_c32768_k64_st_a_v8_g1fu_sd2_pk_bk", **_KB16, **_V8, CAP=192, FE=5,
                  SEED=2, PK=1, BULK=1),
        # and the row end by one bitonic sort (SORT=1) on the measured best: -576 PTX a row in
        # numsim, none of them in a redux chain
        make_case("r8192_c32768_k64_st_a_v4_g1fu_w32_sd2_pk_so", **_KB16, **_W32, SEED=2, PK=1,
                  SORT=1),
        # DYN=1 (session 23): rows from a counter (timeline: the last warp 165.1 us at 32 warps
        # an SM, the SMs' median 143.4; 156.9 / 147.6 at 16)
        make_case("r8192_c32768_k64_st_a_v4_g1fu_w32_sd2_pk_dyn", **_KB16, **_W32, SEED=2, PK=1,
                  DYN=1),   # 151.9 us (session 23)
        make_case("r8192_c32768_k64_st_a_v4_g1fu_sd2_pk_dyn", **_KB16, **_V4, FE=5, SEED=2,
                  PK=1, DYN=1),
        make_case("r7_c4104_k9_dyn", rows=7, cols=4104, k=9, WARPS=2, CTAS=2, VECS=4,
                  STAGES=12, CAP=96, dt="bf16", SEED=2, PK=1, SORT=1, DYN=1, **_G1FU_SMALL),
        # GUESS=2 (session 24) on the best bf16 (no second read in session 23's bf16 traces:
        # ~2 rows a warp, a seeded first one)
        make_case("r8192_c32768_k64_st_a_v4_g2fu_w32_sd2_pk_dyn", **_KB16,
                  **{**_W32, "GUESS": 2}, SEED=2, PK=1, DYN=1),
        # GFETCH=1 (session 25): the control of a second read's appends from registers
        make_case("r8192_c32768_k64_st_a_v4_g1fu_w32_sd2_pk_dyn_gf", **_KB16, **_W32, SEED=2,
                  PK=1, DYN=1, GFETCH=1),
        make_case("r7_c4104_k9_g2_dyn", rows=7, cols=4104, k=9, WARPS=2, CTAS=2, VECS=4,
                  STAGES=12, CAP=96, dt="bf16", SEED=2, PK=1, SORT=1, DYN=1,
                  **{**_G1FU_SMALL, "GUESS": 2}),
        # SPLIT=2 (session 24) on the best bf16: 8192 rows on 4224 warps were ~2 rows of 50-75
        # us a warp (session 23's timeline: the last warp 165.1 us, the SMs' median 143.4)
        make_case("r8192_c32768_k64_st_a_v4_g2fu_w32_sd2_pk_dyn_sp2", **_KB16,
                  **{**_W32, "GUESS": 2}, SEED=2, PK=1, DYN=1, SPLIT=2),
        make_case("r5_c4112_k64_g2_dyn_sp2", rows=5, cols=4112, k=64, WARPS=2, CTAS=2, VECS=4,
                  STAGES=12, CAP=128, dt="bf16", SEED=2, PK=1, SORT=1, DYN=1, SPLIT=2,
                  **{**_G1FU_SMALL, "GUESS": 2}),
        # TAKE (session 26) on the best bf16: ~2 rows a warp, so one early ticket a warp
        make_case("r8192_c32768_k64_st_a_v4_g2fu_w32_sd2_pk_dyn_ta2", **_KB16,
                  **{**_W32, "GUESS": 2}, SEED=2, PK=1, DYN=1, TAKE=2),
        make_case("r7_c4104_k9_g2_dyn_ta2", rows=7, cols=4104, k=9, WARPS=2, CTAS=2, VECS=4,
                  STAGES=12, CAP=96, dt="bf16", SEED=2, PK=1, SORT=1, DYN=1, TAKE=2,
                  **{**_G1FU_SMALL, "GUESS": 2}),
        make_case("r8192_c32768_k64_st_a_v4_g2fu_w32_sd2_pk_dyn_ta2_q8", **_KB16,
                  **{**_W32, "GUESS": 2}, SEED=2, PK=1, DYN=1, TAKE=2, QUEUES=8,
                  main=True),   # the fastest measured on the H200: 148.54 us (session 27)
        # session 27 (MODE=topk18): 8 counters gave bf16 (4224 warps) 1.9% on the H200
        make_case("r8192_c32768_k64_st_a_v4_g2fu_w32_sd2_pk_dyn_ta1_q8", **_KB16,
                  **{**_W32, "GUESS": 2}, SEED=2, PK=1, DYN=1, TAKE=1, QUEUES=8),
        make_case("r8192_c32768_k64_st_a_v4_g2fu_w32_sd2_pk_dyn_ta2_q16", **_KB16,
                  **{**_W32, "GUESS": 2}, SEED=2, PK=1, DYN=1, TAKE=2, QUEUES=16),
        make_case("r7_c4104_k9_g2_dyn_ta2_q4", rows=7, cols=4104, k=9, WARPS=2, CTAS=2, VECS=4,
                  STAGES=12, CAP=96, dt="bf16", SEED=2, PK=1, SORT=1, DYN=1, TAKE=2, QUEUES=4,
                  **{**_G1FU_SMALL, "GUESS": 2}),
        # BULK=1 on the counter's walk (session 30; the f32 suite says why): 2 KB steps, and
        # small over a tail (4104: a row's last copy holds one vector) in 4 queues
        make_case("r8192_c32768_k64_st_a_v4_g2fu_w32_sd2_pk_dyn_ta2_q8_bk", **_KB16,
                  **{**_W32, "GUESS": 2}, SEED=2, PK=1, DYN=1, TAKE=2, QUEUES=8, BULK=1),
        make_case("r7_c4104_k9_g2_dyn_ta2_q4_bk", rows=7, cols=4104, k=9, WARPS=2, CTAS=2,
                  VECS=4, STAGES=12, CAP=96, dt="bf16", SEED=2, PK=1, SORT=1, DYN=1, TAKE=2,
                  QUEUES=4, BULK=1, **{**_G1FU_SMALL, "GUESS": 2}),
    ],
    constraints=constraints_bf16,
)
