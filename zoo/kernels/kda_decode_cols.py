"""Kimi Delta Attention decode, bulk copies and column-owning warps that never wait on each other
(issue 18, session 11).

The same computation as kda_decode.py (its docstring has the math: TT = 1..4 tokens per
sequence, the f32 state [N, H, K=128, V=128] updated in place, o [N, TT, H, V] bf16), the same
inputs, reference and tolerances, and kda_decode_bulk's copy ring: a persistent CTA per SM walks
the heads (n, h) = cta, cta + G, ... through STAGES shared-memory stages filled and drained by
1-D bulk copies (its docstring has the ring).

Why another kernel: kda_decode_bulk gives warp w the state rows 16w .. 16w + 15 and every
column, so each token's column sums over the K rows (S'^T k, S'^T q) cross the 8 warps: partials
to shared memory, ``bar.sync``, every lane reading all 8 warps' partials (24 ``ld.shared.v4`` and
88 ``add`` a lane and token). At TT = 4 the H200 profile (session 11, ncu of n64_h64_t4:
6.6 us a head, 2.4 k instructions a warp and head, IPC 0.36 a scheduler, 2 warps a scheduler,
stalls barrier 1.24 and long scoreboard 1.07, 45% of the samples on the reduction after the
barrier) showed the CTA computing longer than the copy engine needs to move a head (4.1 us for
128 KB at 4.25 TB/s / 132 SMs): the ring starves behind the lock-stepped warps (61.9% of the
copy bandwidth). Here no sum crosses a warp:

- Layout (kda_decode's): warp w owns the value columns 16w .. 16w + 15 and every row; lane l
  (cg = l mod 4, rg = l / 4) the columns 16w + 4cg .. + 3 of rows 16rg .. 16rg + 15. A token's
  column sums are a ``shfl.sync.bfly`` butterfly over rg (kda_decode's `_butterfly`): no shared
  partials and no barrier, so the 8 warps drift apart and overlap their phases (one warp's
  shuffles beside another's FMAs).
- The copies: warp 8 is the producer (its lane 0 issues every copy, kda_decode_bulk's ring) and
  the 8 compute warps hand a stage back through an mbarrier `done` (256 arrivals, each after the
  thread's ``fence.proxy.async.shared::cta``) instead of a CTA barrier: a warp that finished its
  head starts the next one at once.
- Conflict-free without a swizzle: a warp's 16 columns are 64 bytes of a 512-byte row, 16 of the
  32 banks, so a quarter warp (8 lanes, two rg) reading two rows 16 apart would meet 2-way
  conflicts. The state is copied in 16 chunks of 8 rows (4 KB), each at a stride of 4160 bytes
  (64 bytes of padding: chunk c's rows start on bank 16 (c mod 2)), and an odd rg walks its rows
  from the second chunk (register i holds row 16rg + (i + 8 (rg mod 2)) mod 16): the two rg of a
  quarter warp read chunks of opposite parity, 32 banks, 4 wavefronts a 512-byte access, as
  kda_decode_bulk's rows. 16 copies a head and direction instead of 4; the same bytes.
- The grid: the fewest CTAs (at most CTAS = 132) that take as many rounds of heads as 132 would
  (`_ctas`): N64 H64's 4096 heads run on 128 CTAs, 32 each, instead of 31 rounds on 132 and a
  32nd on 4 (alone on the memory system for ~one head's compute, ~3% at TT = 4); the other
  shapes keep 131-132.
- The gate: lane l computes the decays of rows 4l .. 4l + 3 (12 MUFU, not kda_decode's 48; the
  flush-to-zero ``ex2``/``rcp``, exact here: `_decay_ftz`) and 16 ``shfl.sync.idx`` give each
  lane its rows' decays (source lane 4rg + ((i / 4 + 2 (rg mod 2)) mod 4), element i mod 4: the
  rotation above, lane-constant sources). The head's plain loads (A_log, 4 dt_bias, TT beta)
  are made a head ahead, so their latency (the long-scoreboard stalls of kda_decode_bulk's
  profile) passes under the previous head's tokens.

PREP = 1 (session 13, branch deccols2): the gates once per head instead of once per compute
warp. Every compute warp computed the same 128 decays (12 MUFU and 16 SHFL a lane and token)
and the same |k|^2, |q|^2, k.q (48 FFMA a lane, identical over the 4 lanes of a row group, and
9 SHFL of the butterfly); the producer warp, whose lanes 1..31 only waited, now does it for
the 8: the tokens land on their own mbarrier `tok` ahead of the state; after the j-th head's
store and refill the producer's 32 lanes take head j + 2's A_log, dt_bias and beta, wait on
`tok`, compute the 128 decays (4 rows a lane, `_decay_ftz`) and the norms (4 rows a lane, a
32-lane butterfly), write them to `pre` (the decays padded by 4 floats every 16 rows) and
arrive on `ready` (32 arrivals); the compute warps wait on `tok`, `ready` and `full` and read
5 LDS.128 a token. The compute warps' loop (SASS, ptxas 13.0) shrinks from 2,208 to 1,696
instructions a head at TT = 4 (no MUFU, 96 SHFL instead of 196) and from 650 to 516 at TT = 1.
Numerics: the decays are bit-identical; the norms sum their 128 rows in another order.

TAIL = 1 (with PREP = 1, session 13): the end of the walk. Memory-bound, a CTA's last head
lands with the last of DRAM's loads and is computed while DRAM has nothing left to do but the
previous heads' stores (already drained): one head's compute (~3.4 us at TT = 4, ~1.3 at
TT = 1) with DRAM idle, then its store. The stages of the last STAGES heads are never
refilled, so their stores can wait: the producer issues them only once the CTA's last load has
landed (`full` of the last head), and they keep DRAM busy while the last head computes. A
refill issued while its iteration's store is deferred waits for every store to have read
(``wait_group.read 0``: the newest group is the previous head's). Session 19: with any PREP
(`store_or_defer`, `deferred_store`), since PREP = 1's own loss (below) hid what the deferral
is worth; PREP = 2 TAIL = 1 is the `_pwtail` twin of each large shape.

PREP = 2 (session 14, branch deccols3): PREP = 1's gates by a tenth warp of their own. PREP = 1
measured 42% slower at TT = 4 and 11% at TT = 2 (session 14, d9): its producer warp waited, after
each refill, on the tokens of the head it had just refilled (a round trip through the loaded
memory system) and prepared them (each token's beta load sunk by ptxas into the token loop)
before it could issue the next store and refill, and its copies, inside a loop all 32 lanes
walk, ran in ptxas's waterfall loops (R2UR, BRA.U.ANY; 48 a head): one head per ~6.4 us at
TT = 4 against the memory's 4.4 (docs/PERFORMANCE.md, "Session 14, branch deccols3"). Here the
producer warp runs PREP = 0's loop unchanged and the preparing warp waits on `tok` alone.

Numerics: kda_decode's (f32 state, ``ex2``/``rcp``/``rsqrt.approx``, the same gate, norms and
butterfly); only an odd rg's 16-row sums run in the rotated row order.

START = 1 (session 21): the first head first. A CTA used to ask for its first STAGES heads at
once (the grid: 128 x 192 KB = 25 MB); if DRAM serves those requests interleaved, the first
head lands with the others at ~6 us, and no refill can be asked for until head 0 is written
back: DRAM idles for one head's compute (~3.4 us at TT = 4), the decode's fixed cost beyond a
copy's (docs/PERFORMANCE.md "Session 21"). Here the producer's lane 0 waits on ``full[0]``
(phase 0: the copies' bytes, no hand-back) before it asks for stages 1 .. STAGES - 1. With
PREP = 0 or 2.

DYN = 1 (session 21): heads from a counter. The static walk gives every CTA the same number of
heads, but the SMs walk them at their own rates: iket timelines on the H200 (docs/PERFORMANCE.md
"Session 21: where T = 4's fixed cost goes") showed 4.03-4.59 us a head at TT = 4 and 3.40-4.60
at TT = 2, the same SMs fast or slow throughout, so the kernel ended with its slowest SM 8.7 us
(33 us at TT = 2) after the median one. Here the producer's lane 0 takes each head with
``atom.add`` on `sched` (one u64): a launch takes exactly N H + grid tickets (one a head, one END
a CTA), so the head is the ticket mod N H + grid and the counter is never cleared. It writes the
head to ``hidx[stage]`` and arrives on ``asg[stage]``; the compute warps read head j + 1's index
after its ``asg`` phase (for the plain loads made a head ahead) and leave the loop at END. With
PREP = 0 only, no TAIL or START.

TAKE = 1 (session 27, with DYN = 1): each refill's ticket asked a head early. DYN = 1 asked the
counter and read the ticket at once, between a head's store and the refill of its stage, so each
refill waited for the atomic's round trip through the loaded memory system (at TT = 4 `_dyn` ran
1.012x the static walk's time where the walk's slowest SM ended 8.7 us after the median one;
top-k's ncu profile put 20.7% of its stall samples on such a ticket). Here the producer's lane
0 asks the next ticket (``tickets.ask_ticket``, the counter's low word) as soon as it took a
head and reads it at the next refill (``tickets.ticket_item32``); the holder of the launch's
last ticket sets the counter back to 0, and tickets are read mod N H + grid, so a counter DYN = 1
left at a multiple below 2^32 works too. Measured (session 27, H200, same job): `n64_h64_t4_dyn_ta`
141.68 us, 92.6% of 4.25 TB/s, against the static walk's 148.27 (0.956x) and `_dyn`'s 149.49; on
an H100, where the ring hides the round trip, `_dyn` alone was 0.955x the static walk and TAKE
added nothing (docs/PERFORMANCE.md "Session 27").

iket (session 21): the compute warps' ``wait_full`` (a head's state landing) and ``head`` (its
tokens and the state's write-back) and the producer's ``wait_done`` (lane 0) are iket ranges,
nothing in a normal build (the PTX is the same but for line numbers), so ``tirxh profile
--iket`` shows when each CTA's first head lands and when each SM finishes: where T = 4's fixed
cost beyond a copy's goes (docs/PERFORMANCE.md "Session 21: where T = 4's fixed cost goes").

Techniques: 1-D bulk copies (TMA) in and out of a 3-stage shared-memory ring, a producer warp,
a dynamic head scheduler on a self-resetting counter (DYN),
mbarrier hand-back of a stage (no CTA barrier in the loop), padded chunks for conflict-free
column-sliced rows, warp-shuffle butterfly reductions, shuffle broadcast of the gate, fused gate
and L2 normalization, persistent CTAs.

Tags: memory-bound, tma, mbarrier-pipeline, persistent, warp-specialized, warp-shuffle,
linear-attention, fused-gate, iket
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import tirxh.lang as T

# the zoo is a directory of kernel files, not a package (kda_decode.py says why)
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
import kda_decode as D  # noqa: E402 - after the path that finds it
import kda_decode_bulk as B  # noqa: E402
import kda_ref as R  # noqa: E402
from tickets import ask_ticket, take_item, ticket_item32  # noqa: E402
from kda_decode import (FULL, K, LOG2E, V, _butterfly, _decay_and_sums,  # noqa: E402
                        _store_o, _unpack, _update, _update_normed)

TAGS = ("memory-bound", "tma", "mbarrier-pipeline", "persistent", "warp-specialized",
        "warp-shuffle", "linear-attention", "fused-gate", "iket")

WARPS = 8                     # compute warps: 16 value columns each
PRODUCER = WARPS              # the warp whose lane 0 issues the copies
PREPARER = WARPS + 1          # PREP = 2: the warp that prepares the gates
HEAD = K * V                  # state elements per head (64 KB)
CROWS = 8                     # state rows per chunk (one bulk copy of 4 KB)
CHUNKS = K // CROWS
CSTRIDE = CROWS * V + 16      # f32 per chunk in shared memory: 64 bytes of padding (bank 16)
# PREP = 1: a token's prepared gate in shared memory, `_prep`: the 128 decays with 4 floats of
# padding after every 16 rows (row r at r + 4 (r / 16): a row group's 4 rows of the 8 rg of a
# warp on 8 distinct bank quads), then rk, rq, k^.q^ and beta
DPAD = K + 4 * (K // 16)
PRE = DPAD + 4


def _decay_ftz(g, c1, c0):
    """kda_decode's `_decay` (the decay exp(g) of a row from its raw gate) with the flush-to-zero
    ``ex2`` and ``rcp``: one MUFU each, where the IEEE forms add an FSETP and two FMUL that
    scale subnormals (~9 instructions a row, ~7% of a token's). Exact here: a subnormal
    exponent flushed to 0 gives 2^0 = 1 as it would, a subnormal exp(-z) flushed to 0 leaves
    1 + exp(-z) = 1 as rounding would, and 1 + exp(-z) >= 1 and the decay in [e^-5, 1] are
    never subnormal."""
    e = T.ptx.ex2.approx.ftz.f32(T.ptx.min.f32(T.ptx.fma.rn.f32(g, c1, c0), 64.0))
    sig = T.ptx.rcp.approx.ftz.f32(e + 1.0)
    return T.ptx.ex2.approx.ftz.f32(sig * (R.LOWER_BOUND * LOG2E))


def _butterfly_warp(values):
    """Sum each value over the 32 lanes of the warp (``shfl.sync.bfly`` 1 .. 16 + add)."""
    for off in (1, 2, 4, 8, 16):
        values = [x + T.ptx.mov.f32(T.ptx.shfl.sync.bfly.b32(x, off, 0x1F, FULL)) for x in values]
    return values


def _ctas(N, H, CTAS):
    """The persistent grid: the fewest CTAs (at most CTAS) that walk the N H heads in the same
    number of rounds as CTAS would. N64 H64: 4096 heads take 32 rounds on 132 CTAs, the last
    on 4 of them (a tail of ~one head alone, ~3% at TT = 4); 128 CTAs take 32 each with no tail
    and a 3% larger share of the bandwidth each (the shapes at 125, 94, 249 rounds keep 132,
    131, 132)."""
    rounds = -(-(N * H) // CTAS)
    return -(-(N * H) // rounds)


def _grid(N, H, CTAS):
    return (_ctas(N, H, CTAS),)


def smem_bytes(TT, STAGES, PREP=0):
    """Shared memory of one CTA: the stages (16 padded chunks of state + TT tokens' q, k, g_raw,
    v rows in bf16; PREP: + TT prepared gates of PRE floats), the mbarriers (`full` and `done`
    per stage; PREP: + `tok` and `ready`) and the 112 bytes by which the launch pads the window
    for its 128-byte alignment (`T.shared`)."""
    prep = STAGES * (TT * PRE * 4 + 16) if PREP else 0
    return STAGES * (CHUNKS * CSTRIDE * 4 + TT * 4 * K * 2) + 16 * STAGES + prep + 112


@T.kernel(grid=_grid, block=lambda PREP=0: 32 * (WARPS + 1 + (PREP == 2)))
def kda_decode_cols(q: T.gptr[T.bf16], k: T.gptr[T.bf16], v: T.gptr[T.bf16],
                    g_raw: T.gptr[T.bf16], beta: T.gptr[T.bf16], A_log: T.gptr[T.f32],
                    dt_bias: T.gptr[T.f32], state: T.gptr[T.f32], o: T.gptr[T.bf16],
                    sched: T.gptr[T.u64], N: T.const, H: T.const, TT: T.const = 1,
                    STAGES: T.const = 3, CTAS: T.const = 132, PREP: T.const = 0,
                    TAIL: T.const = 0, START: T.const = 0, DYN: T.const = 0,
                    TAKE: T.const = 0):
    st = T.shared(T.f32, (STAGES, CHUNKS, CSTRIDE), align=128)  # the heads' states, chunked
    tk = T.shared(T.bf16, (STAGES, TT, 4, K), align=128)        # their tokens: q, k, g_raw, v
    full = T.mbarrier(STAGES)       # a head's state and tokens landed (transaction bytes)
    done = T.mbarrier(STAGES)       # every compute thread wrote its state back (256 arrivals)
    if PREP:
        pre = T.shared(T.f32, (STAGES, TT, PRE), align=16)     # the tokens' prepared gates
        tok = T.mbarrier(STAGES)    # PREP: a head's tokens landed (its state lands on `full`)
        ready = T.mbarrier(STAGES)  # PREP: the producer warp prepared its gates (32 arrivals)
    if DYN:
        hidx = T.shared(T.u32, (STAGES,))   # DYN: the head each stage holds (END = N H: none)
        asg = T.mbarrier(STAGES)    # DYN: the producer wrote a stage's `hidx` (1 arrival)
    tid = T.tid.x
    lane = T.laneid()
    warp = tid >> 5
    grid = _ctas(N, H, CTAS)                 # = %nctaid.x (_grid), a constant here
    cta = T.ctaid.x
    mine = (N * H - 1 - cta) / grid + 1      # heads cta, cta + grid, ... below N H
    chunk = CROWS * V

    def head_of(j):
        return B.head_of(cta, j, grid, H)

    def split(hd):
        """(head, n, h) of head index `hd` (DYN: taken from the counter, not the walk)."""
        n = hd / H
        return hd, n, hd - n * H

    def take(stage, ticket=None):
        """DYN, the producer's lane 0: the launch's next head from `sched` (a ticket: one a head,
        then one END a CTA, so a launch takes exactly N H + grid and the counter never needs
        clearing: the head is the ticket mod N H + grid) into hidx[stage], END (N H) when none
        is left; arrives on asg[stage]. Returns the head. TAKE: the head of `ticket`, asked
        earlier on the counter's low word (`tickets.ticket_item32`: the launch's last ticket
        sets the counter back to 0)."""
        if ticket is None:
            hd = take_item(sched, N * H + grid, N * H)
        else:
            hd = ticket_item32(sched.at(0), ticket, N * H + grid, N * H)
        T.ptx.st.shared.u32(hidx.at(stage), hd)
        asg[stage].arrive()
        return hd

    def state_copies(hd, stage):
        return [(st.at(stage, c, 0), state.at(hd * HEAD + c * chunk), chunk * 4)
                for c in range(CHUNKS)]

    def state_stores(hd, stage):
        """`state_copies` the other way: (global dst, shared src, bytes) of head hd's chunks."""
        return [(src, dst, nbytes) for dst, src, nbytes in state_copies(hd, stage)]

    def store_head(hd, stage):
        """Lane 0 of the producer: head hd's state back from `stage`, one bulk async-group."""
        for dst, src, nbytes in state_stores(hd, stage):
            T.ptx["cp.async.bulk.global.shared::cta.bulk_group"](dst, src, nbytes)
        T.ptx.cp.async_.bulk.commit_group()

    def load(j, stage):
        """The j-th head's state (16 padded chunks) and tokens into `stage` (PREP: the tokens
        first, on their own barrier `tok`, so that the producer warp prepares their gates
        without waiting for the 64 KB behind them)."""
        load_head(*head_of(j), stage)

    def load_head(hd, n, h, stage):
        if PREP == 0:
            B.load_head(full[stage], state_copies(hd, stage), tk, stage, (q, k, g_raw, v),
                        n, h, H, TT)
            return
        bulk_load = T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"]
        tok[stage].arrive_expect_tx(TT * 4 * K * 2)
        for t in range(TT):
            for i, src in enumerate((q, k, g_raw, v)):
                bulk_load(tk.at(stage, t, i), src.at(((n * TT + t) * H + h) * K), K * 2,
                          tok[stage])
        full[stage].arrive_expect_tx(HEAD * 4)
        for dst, src, nbytes in state_copies(hd, stage):
            bulk_load(dst, src, nbytes, full[stage])

    def prep(jj, stage, phase, loaded=None):
        """PREP, the producer warp: the jj-th head's gates once for the 8 compute warps (which
        each computed all 128 decays and the norms over their rows). Lane l: the decays of rows
        4l .. 4l + 3 and their share of |k|^2, |q|^2, k.q (a 32-lane butterfly); lane 0 writes
        rk, rq, k^.q^ and beta; 32 arrivals on `ready`."""
        if loaded is None:
            _, n, h = head_of(jj)
            c1 = T.ptx.ex2.approx.f32(T.ptx.ld.global_.nc.f32(A_log.at(h)) * LOG2E) * -LOG2E
            c0 = [c1 * x for x in T.ptx.ld.global_.nc.v4.f32(dt_bias.at(h * K + 4 * lane))]
            bts = [T.ptx.ld.global_.nc.b16(beta.at((n * TT + t) * H + h)) for t in range(TT)]
        else:
            # PREP = 2: loaded a head ahead (`gate_loads`), out of the path of the `tok` wait
            # (PREP = 1's beta loads, sunk by ptxas into the token loop, wait for L2/DRAM
            # once a token there)
            a_log, dts, bts = loaded
            c1 = T.ptx.ex2.approx.f32(a_log * LOG2E) * -LOG2E
            c0 = [c1 * x for x in dts]
        tok[stage].wait(phase)
        for t in range(TT):
            gw = T.ptx.ld.shared.v2.b32(tk.at(stage, t, 2, 4 * lane))
            dec = [_decay_ftz(g, c1, c0[e]) for e, g in enumerate(x for w in gw
                                                                  for x in _unpack(w))]
            T.ptx.st.shared.v4.f32(pre.at(stage, t, 4 * lane + 4 * (lane >> 2)), dec)
            qr = [x for w in T.ptx.ld.shared.v2.b32(tk.at(stage, t, 0, 4 * lane))
                  for x in _unpack(w)]
            kr = [x for w in T.ptx.ld.shared.v2.b32(tk.at(stage, t, 1, 4 * lane))
                  for x in _unpack(w)]
            kk, qq, kq = kr[0] * kr[0], qr[0] * qr[0], kr[0] * qr[0]
            for r in range(1, 4):
                kk = T.ptx.fma.rn.f32(kr[r], kr[r], kk)
                qq = T.ptx.fma.rn.f32(qr[r], qr[r], qq)
                kq = T.ptx.fma.rn.f32(kr[r], qr[r], kq)
            kk, qq, kq = _butterfly_warp([kk, qq, kq])
            rk = T.ptx.rsqrt.approx.f32(kk + R.L2_EPS)
            rq = T.ptx.rsqrt.approx.f32(qq + R.L2_EPS)
            T.ptx.st.shared.v4.f32(pre.at(stage, t, DPAD),
                                   [rk, rq, kq * rk * rq, T.ptx.cvt.f32.bf16(bts[t])],
                                   pred=lane == 0)
        ready[stage].arrive()

    def gate_loads(jj):
        """The jj-th head's few plain loads: A_log, the dt_bias of rows 4 lane .. + 3, the
        tokens' beta (registers of the calling lane)."""
        _, n, h = head_of(jj)
        return (T.ptx.ld.global_.nc.f32(A_log.at(h)),
                list(T.ptx.ld.global_.nc.v4.f32(dt_bias.at(h * K + 4 * lane))),
                [T.ptx.ld.global_.nc.b16(beta.at((n * TT + t) * H + h)) for t in range(TT)])

    with T.if_(tid == 0):
        for s in range(STAGES):
            full[s].init(1)
            done[s].init(32 * WARPS)
            if DYN:
                asg[s].init(1)
            if PREP:
                tok[s].init(1)
                ready[s].init(32)
        T.ptx.fence.mbarrier_init.release.cluster()
    T.ptx.bar.sync(0)     # the mbarriers' initialisation, before anyone uses them

    def store_and_refill(j, prev):
        """Lane 0 of the producer: the j-th head's state back (kda_decode_bulk's ring)."""
        B.store_and_refill(state_stores(cta + j * grid, ring.stage), j, mine, STAGES,
                           lambda: load(j + (STAGES - 1), prev))

    def store_or_defer(j, prev):
        """Lane 0 of the producer once the j-th head is `done`: its store and the refill of the
        previous head's stage (`store_and_refill`). TAIL: a head whose stage is refilled later
        is stored at once; the last STAGES heads (never refilled) only in `deferred_store`, so
        that their stores keep DRAM busy while the last head computes. The refill of this
        iteration then waits for every store issued (the previous head's, the newest group) to
        have read."""
        if not TAIL:
            store_and_refill(j, prev)
            return
        with T.if_(j + STAGES < mine):
            store_and_refill(j, prev)
        with T.else_():
            with T.if_((j > 0) & (j + (STAGES - 1) < mine)):
                T.ptx.cp.async_.bulk.wait_group.read(0)
                load(j + (STAGES - 1), prev)

    def deferred_store(j, stage):
        """TAIL, lane 0 of the producer: the j-th head's store from `stage` when it is one of
        the CTA's last STAGES heads, once the CTA's last load has landed."""
        with T.if_(j + STAGES >= mine):
            last = mine - 1          # the CTA's last head: its stage's phase
            full[last % STAGES].wait((last / STAGES) & 1)
            store_head(cta + j * grid, stage)

    ring = T.pipeline(STAGES)

    def dynamic_producer():
        """DYN, the producer's lane 0: the first STAGES heads from the counter, then kda_decode_
        bulk's ring (the j-th head's store, the previous stage's refill once that store read it)
        with each refill's head taken from the counter, until it says END; the walk ends with
        the last head taken. A CTA may take no head at all (the others took them first)."""
        taken = T.reg(T.u32, init=0)            # heads this CTA took
        live = T.reg(T.u32, init=1)             # no END yet
        # TAKE = 1 (session 27): the next refill's ticket asked as soon as a head is taken, one
        # head (~4.4 us at TT = 4) before it is read, so the refill does not wait for the
        # atomic's round trip through the loaded memory system
        ticket = T.reg(T.u32, init=0) if TAKE else None
        if TAKE:
            ask_ticket(sched.at(0), ticket)

        def take_and_load(stage):
            hd = take(stage, ticket)
            with T.if_(hd < N * H):
                if TAKE:    # before the copies: its round trip starts first
                    ask_ticket(sched.at(0), ticket)
                load_head(*split(hd), stage)
                taken.set(taken + 1)
            with T.else_():
                live.set(0)

        for s in range(STAGES):
            with T.if_(live != 0):
                take_and_load(s)
        prev = T.reg(T.u32, init=0)
        j = T.reg(T.u32, init=0)
        with T.while_(lambda: j < taken):
            with T.iket.range("wait_done"):
                done[ring.stage].wait(ring.phase)
            store_head(T.ptx.ld.shared.u32(hidx.at(ring.stage)), ring.stage)
            with T.if_((j > 0) & (live != 0)):
                T.ptx.cp.async_.bulk.wait_group.read(1)   # the previous head's store has read
                take_and_load(prev)
            prev.set(ring.stage)
            ring.advance()
            j.set(j + 1)
        # TAKE: every ticket asked is read. One is asked after each head taken; while no END
        # was read the loop runs on (taken >= STAGES >= 3 after the first stages, and each
        # iteration from j = 1 reads one, a head adding an iteration), so the launch takes
        # exactly N H + grid tickets and its last ticket's holder resets the counter
        T.ptx.cp.async_.bulk.wait_group(0)

    with T.if_(warp == PRODUCER, uniform=True):
        with T.if_(lane == 0):
            if DYN:
                dynamic_producer()
            else:
                for s in range(STAGES):
                    with T.if_(mine > s):
                        if START and s == 1:
                            # START = 1: the first head lands before the other stages are asked
                            # for
                            full[0].wait(0)
                        load(s, s)
            if PREP != 1 and not DYN:
                prev = T.reg(T.u32, init=0)      # the stage of the previous head
                with T.range(mine) as j:
                    with T.iket.range("wait_done"):
                        done[ring.stage].wait(ring.phase)
                    store_or_defer(j, prev)
                    prev.set(ring.stage)
                    ring.advance()
                    if TAIL:
                        deferred_store(j, prev)
                T.ptx.cp.async_.bulk.wait_group(0)
        if PREP == 1:
            # the gates of heads 0 .. STAGES - 2 first; then, after the j-th head's store and
            # refill, those of head j + STAGES - 1 (just refilled, or loaded above): prepared a
            # head before the compute warps need them. Every lane waits on `done` itself: its
            # next writes of `pre` (the stage of a head the compute warps finished) follow
            # their reads by the mbarrier, not by the warp's reconvergence after lane 0's branch.
            for s in range(STAGES - 1):
                with T.if_(mine > s):
                    prep(s, s, 0)
            ahead = T.pipeline(STAGES, stage=STAGES - 1)
            prev = T.reg(T.u32, init=0)
            with T.range(mine) as j:
                done[ring.stage].wait(ring.phase)
                with T.if_(lane == 0):
                    store_or_defer(j, prev)
                prev.set(ring.stage)
                ring.advance()
                with T.if_(j + (STAGES - 1) < mine):
                    prep(j + (STAGES - 1), ahead.stage, ahead.phase)
                ahead.advance()
                if TAIL:
                    with T.if_(lane == 0):
                        deferred_store(j, prev)
            with T.if_(lane == 0):
                T.ptx.cp.async_.bulk.wait_group(0)

    def compute():
        """The 8 compute warps: warp w the value columns 16w .. 16w + 15 of every head."""
        rg = lane >> 2
        odd = rg & 1
        col = warp * 16 + (lane & 3) * 4          # this lane's first value column
        # register i holds row 16 rg + (i + 8 odd) mod 16: chunk 2 rg + odd first, then the other
        first, second = 2 * rg + odd, 2 * rg + (odd ^ 1)
        src = [4 * rg + ((i + 2 * odd) & 3) for i in range(4)]   # lane holding rows' decays
        if not PREP:
            # the head's few plain loads (A_log, dt_bias of rows 4 lane .. + 3, the tokens'
            # beta), made a head ahead: their L2 latency is spent during the previous head's
            # tokens
            ahead = [T.reg(T.f32, init=0.0) for _ in range(5)] + [T.reg(T.b16) for _ in range(TT)]

            def plain_loads(jj):
                plain_loads_of(*head_of(jj)[1:])

            def plain_loads_of(n, h):
                ahead[0].set(T.ptx.ld.global_.nc.f32(A_log.at(h)))
                for e, x in enumerate(T.ptx.ld.global_.nc.v4.f32(dt_bias.at(h * K + 4 * lane))):
                    ahead[1 + e].set(x)
                for t in range(TT):
                    ahead[5 + t].set(T.ptx.ld.global_.nc.b16(beta.at((n * TT + t) * H + h)))

            if not DYN:
                plain_loads(0)

        def _values(stage, t):
            """v of the lane's 4 columns."""
            return [x for w in T.ptx.ld.shared.v2.b32(tk.at(stage, t, 3, col)) for x in _unpack(w)]

        def one_head(n, h, gates):
            """Head (n, h) of the ring's current stage: wait for it, run its tokens, write the
            state back and hand the stage to the producer (`gates`: PREP = 0's c1, c0, beta)."""
            if not PREP:
                c1, c0, bts = gates
            with T.iket.range("wait_full"):
                full[ring.stage].wait(ring.phase)
            at = [st.at(ring.stage, first, col), st.at(ring.stage, second, col)]
            with T.iket.range("head"):
                S = [list(T.ptx.ld.shared.v4.f32(at[i // CROWS] + (i % CROWS) * V * 4))
                     for i in range(2 * CROWS)]
                for t in range(TT):
                    # q and k of the lane's rows in register order: 8 rows of each chunk
                    words = [w for i in (0, 1) for c in (first, second)
                             for w in T.ptx.ld.shared.v4.b32(tk.at(ring.stage, t, i, c * CROWS))]
                    qr = [x for w in words[:8] for x in _unpack(w)]
                    kr = [x for w in words[8:] for x in _unpack(w)]
                    if PREP:
                        # the decays of register rows 4i .. 4i + 3 (rows 4 src[i] .., padded by
                        # 4 rg), the norms and beta: 5 LDS.128 instead of 12 MUFU, 16 SHFL and
                        # 48 FFMA
                        dec = [list(T.ptx.ld.shared.v4.f32(pre.at(ring.stage, t,
                                                                  4 * src[i] + 4 * rg)))
                               for i in range(4)]
                        rk, rq, kq_hat, bt = T.ptx.ld.shared.v4.f32(pre.at(ring.stage, t, DPAD))
                        vc = _values(ring.stage, t)
                        # (the norms _decay_and_sums also returns are dead code: ptxas drops them)
                        part = _decay_and_sums(S, kr, qr, lambda i: dec[i // 4][i % 4])[:8]
                        out = _update_normed(S, kr, _butterfly(part), vc, bt, rk, rq, kq_hat)
                    else:
                        gw = T.ptx.ld.shared.v2.b32(tk.at(ring.stage, t, 2, 4 * lane))
                        dec = [_decay_ftz(g, c1, c0[e]) for e, g in enumerate(x for w in gw
                                                                              for x in _unpack(w))]
                        vc = _values(ring.stage, t)
                        part = _decay_and_sums(S, kr, qr, lambda i: T.ptx.mov.f32(
                            T.ptx.shfl.sync.idx.b32(dec[i % 4], src[i // 4], 0x1F, FULL)))
                        out = _update(S, kr, _butterfly(part), vc, bts[t])
                    _store_o(o.at(((n * TT + t) * H + h) * V + col), out, pred=rg == 0)
                for i in range(2 * CROWS):
                    T.ptx.st.shared.v4.f32(at[i // CROWS] + (i % CROWS) * V * 4, S[i])
            T.ptx.fence.proxy.async_.shared__cta()   # generic writes -> the copy engine's reads
            done[ring.stage].arrive()
            ring.advance()

        def gates_now():
            """PREP = 0: exp(-z) = 2^(c1 g_raw + c0), c1 = -exp(A_log) log2(e), c0 = c1 dt_bias
            (the gate of rows 4 lane .. + 3) and the tokens' beta, from the loads made a head
            ahead."""
            c1 = T.ptx.ex2.approx.f32(ahead[0] * LOG2E) * -LOG2E
            return c1, [c1 * x for x in ahead[1:5]], [T.ptx.cvt.f32.bf16(b) for b in ahead[5:]]

        if DYN:
            # the heads the producer took, in its order: head j + 1's index (for its plain
            # loads, a head ahead) once asg says it is written; END (N H) leaves the loop
            na = T.pipeline(STAGES)
            asg[na.stage].wait(na.phase)
            cur = T.reg(T.u32, init=0)
            cur.set(T.ptx.ld.shared.u32(hidx.at(na.stage)))
            na.advance()
            plain_loads_of(*split(T.ptx.min.u32(cur, N * H - 1))[1:])
            with T.loop():
                T.break_(cur >= N * H)
                gates = gates_now()
                asg[na.stage].wait(na.phase)
                nxt = T.ptx.ld.shared.u32(hidx.at(na.stage))
                na.advance()
                plain_loads_of(*split(T.ptx.selp.u32(nxt, cur, nxt < N * H))[1:])
                one_head(*split(cur)[1:], gates)
                cur.set(nxt)
            return
        with T.range(mine) as j:
            _, n, h = head_of(j)
            if PREP:
                tok[ring.stage].wait(ring.phase)
                ready[ring.stage].wait(ring.phase)
            gates = None
            if not PREP:
                # the gates, then the next head's loads (the last head reloads its own)
                gates = gates_now()
                plain_loads(T.ptx.min.u32(j + 1, mine - 1))
            one_head(n, h, gates)

    def preparer():
        """PREP = 2, warp 9: PREP = 1's gates of each head (`prep`), by a warp of its own. The
        producer warp keeps PREP = 0's loop (it waits on `done` alone, and never on the tokens
        of the head it has just refilled, which in PREP = 1 held its next store and refill
        back by a DRAM round trip and the preparation each head); this warp waits on `tok`
        alone (the tokens come with the refill two heads before). Its rewrite of a stage's
        `pre` needs no wait of its own: head jj's tokens are loaded only after the producer saw
        head jj - 2's `done`, which every compute thread arrives on after head jj - 3's, after
        its reads of that `pre` (sync_check finds no race without a `done` wait here; session
        14). A_log, dt_bias and beta are loaded a head ahead into registers (the compute
        warps' PREP = 0 way): in PREP = 1 ptxas sank each token's beta load into the token
        loop, a global-load latency exposed per token."""
        pa = T.pipeline(STAGES)
        regs = [T.reg(T.f32, init=0.0) for _ in range(5)] + [T.reg(T.b16) for _ in range(TT)]

        def load_ahead(jj):
            a_log, dts, bts = gate_loads(jj)
            for r, x in zip(regs, [a_log] + dts + bts):
                r.set(x)

        load_ahead(0)
        with T.range(mine) as jj:
            prep(jj, pa.stage, pa.phase, (regs[0], regs[1:5], regs[5:]))
            load_ahead(T.ptx.min.u32(jj + 1, mine - 1))    # the last head reloads its own
            pa.advance()

    with T.else_():
        if PREP == 2:
            with T.if_(warp == PREPARER, uniform=True):
                preparer()
            with T.else_():
                compute()
        else:
            compute()


def constraints(N, H, TT=1, STAGES=3, CTAS=132, PREP=0, TAIL=0, START=0, DYN=0,
                TAKE=0):
    out = B.ring_constraints(N, H, TT, STAGES, CTAS, smem_bytes(TT, STAGES, PREP))
    if PREP not in (0, 1, 2):
        out.append(f"PREP={PREP} must be 0 (each compute warp its gates), 1 (the producer "
                   "warp's, in shared memory) or 2 (a warp of their own's)")
    if TAIL not in (0, 1):
        out.append(f"TAIL={TAIL} must be 0 or 1 (the last heads' stores after the last load)")
    if START not in (0, 1):
        out.append(f"START={START} must be 0 or 1 (the first head's load before the others)")
    elif START and PREP == 1:
        out.append("START=1 needs PREP=0 or 2 (PREP=1's producer warp prepares the first heads' "
                   "gates beside their loads)")
    if DYN not in (0, 1):
        out.append(f"DYN={DYN} must be 0 (the static walk) or 1 (heads from the counter)")
    elif TAKE not in (0, 1):
        out.append(f"TAKE={TAKE} must be 0 or 1 (each refill's ticket asked a head early)")
    elif TAKE and not DYN:
        out.append("TAKE=1 needs DYN=1 (it asks the head counter early)")
    elif DYN and (PREP or TAIL or START):
        out.append(f"DYN=1 needs PREP=0, TAIL=0 and START=0 (got PREP={PREP}, TAIL={TAIL}, "
                   f"START={START}): the counter's walk is written for PREP = 0's ring only")
    return out


def inputs(rng, N, H, TT=1, gate="mixed"):
    """kda_decode's inputs and the head counter of DYN = 1 (`sched`, one u64, zero: a launch
    takes exactly N H + grid tickets from it, so it never needs clearing; KCoral's guards leave
    an all-zero buffer alone). Every case takes it (one kernel signature); DYN = 0 ignores it."""
    return {**D.inputs(rng, N, H, TT, gate), "sched": np.zeros(1, np.uint64)}


# kda_decode_bulk's suite (kda_decode's inputs, reference, cases with the large ones tagged
# "ring", its wrapping rings; n64_h64_t4_c128 has here the same grid as n64_h64_t4, `_ctas`: a
# replicate), and rings of odd sizes: one CTA walks 5 heads with saturated gates, three CTAs 5
# each of 15, and 5 heads on CTAS = 4 take 3 CTAs (the balanced grid)
SUITE = B.ring_suite(kda_decode_cols, constraints, inputs=inputs, extra=[
    T.case("n5_h1_t4_deep_c1", N=5, H=1, TT=4, CTAS=1, gate="deep"),
    T.case("n5_h3_t3_c3", N=5, H=3, TT=3, CTAS=3),
    T.case("n5_h1_t2_c4", N=5, H=1, TT=2, CTAS=4),
    # PREP = 1 (the producer warp's gates): every token count, odd sizes, saturated gates, rings
    # that wrap; then the four ring shapes beside PREP = 0's
    T.case("n2_h2_t1_prep", N=2, H=2, TT=1, PREP=1),
    T.case("n7_h1_t2_c2_prep", N=7, H=1, TT=2, CTAS=2, PREP=1),
    T.case("n5_h3_t3_c3_prep", N=5, H=3, TT=3, CTAS=3, PREP=1, gate="slow"),
    T.case("n5_h1_t4_deep_c1_prep", N=5, H=1, TT=4, CTAS=1, gate="deep", PREP=1),
    T.case("n1_h3_t4_prep", N=1, H=3, TT=4, PREP=1),
    # TAIL = 1: CTAs of 4 and 3 heads, of 5 (deep gates), of 2 and 1, of 1
    T.case("n7_h1_t2_c2_tail", N=7, H=1, TT=2, CTAS=2, PREP=1, TAIL=1),
    T.case("n5_h1_t4_deep_c1_tail", N=5, H=1, TT=4, CTAS=1, gate="deep", PREP=1, TAIL=1),
    T.case("n5_h1_t3_c4_tail", N=5, H=1, TT=3, CTAS=4, PREP=1, TAIL=1),
    T.case("n2_h2_t1_tail", N=2, H=2, TT=1, PREP=1, TAIL=1),
    # PREP = 2 (a warp of its own prepares the gates, session 14): every token count, odd
    # sizes, saturated and slow gates, CTAs of 1 to 5 heads (from the 4th, `pre` is rewritten)
    T.case("n2_h2_t1_pw", N=2, H=2, TT=1, PREP=2),
    T.case("n7_h1_t2_c2_pw", N=7, H=1, TT=2, CTAS=2, PREP=2),
    T.case("n5_h3_t3_c3_pw", N=5, H=3, TT=3, CTAS=3, PREP=2, gate="slow"),
    T.case("n5_h1_t4_deep_c1_pw", N=5, H=1, TT=4, CTAS=1, gate="deep", PREP=2),
    T.case("n1_h3_t4_pw", N=1, H=3, TT=4, PREP=2),
    T.case("n5_h1_t3_c4_pw", N=5, H=1, TT=3, CTAS=4, PREP=2),
    # TAIL = 1 beside PREP = 2 (session 19) and PREP = 0: CTAs of 4 and 3 heads, of 5 (deep
    # gates), of 2 and 1, of 1
    T.case("n7_h1_t2_c2_pwtail", N=7, H=1, TT=2, CTAS=2, PREP=2, TAIL=1),
    T.case("n5_h1_t4_deep_c1_pwtail", N=5, H=1, TT=4, CTAS=1, gate="deep", PREP=2, TAIL=1),
    T.case("n5_h1_t3_c4_pwtail", N=5, H=1, TT=3, CTAS=4, PREP=2, TAIL=1),
    T.case("n2_h2_t1_pwtail", N=2, H=2, TT=1, PREP=2, TAIL=1),
    T.case("n5_h1_t4_deep_c1_p0tail", N=5, H=1, TT=4, CTAS=1, gate="deep", TAIL=1),
    # START = 1 (session 21: the first head's load alone, then the other stages'), beside
    # PREP = 0 and 2: CTAs of 4 and 3 heads, of 5 (deep gates), of one head (no second stage)
    T.case("n7_h1_t2_c2_st", N=7, H=1, TT=2, CTAS=2, START=1),
    T.case("n5_h1_t4_deep_c1_st", N=5, H=1, TT=4, CTAS=1, gate="deep", START=1),
    T.case("n1_h3_t4_st", N=1, H=3, TT=4, START=1),
    T.case("n7_h1_t2_c2_pwst", N=7, H=1, TT=2, CTAS=2, PREP=2, START=1),
    T.case("n5_h3_t3_c3_pwst", N=5, H=3, TT=3, CTAS=3, PREP=2, START=1, gate="slow"),
    # DYN = 1 (session 21: each CTA takes its heads from a counter, not the static walk; the
    # SMs' own rates differ by up to 35%): 7 heads on 2 CTAs, 15 on 3 with slow gates, 5 on
    # one CTA with deep gates, 3 heads on 3 CTAs (one each, or none), every token count
    T.case("n7_h1_t2_c2_dyn", N=7, H=1, TT=2, CTAS=2, DYN=1),
    T.case("n5_h3_t3_c3_dyn", N=5, H=3, TT=3, CTAS=3, DYN=1, gate="slow"),
    T.case("n5_h1_t4_deep_c1_dyn", N=5, H=1, TT=4, CTAS=1, gate="deep", DYN=1),
    T.case("n1_h3_t1_dyn", N=1, H=3, TT=1, DYN=1),
    # TAKE = 1 (session 27: each refill's ticket asked a head early): the same four rings
    T.case("n7_h1_t2_c2_dyn_ta", N=7, H=1, TT=2, CTAS=2, DYN=1, TAKE=1),
    T.case("n5_h3_t3_c3_dyn_ta", N=5, H=3, TT=3, CTAS=3, DYN=1, TAKE=1, gate="slow"),
    T.case("n5_h1_t4_deep_c1_dyn_ta", N=5, H=1, TT=4, CTAS=1, gate="deep", DYN=1, TAKE=1),
    T.case("n1_h3_t1_dyn_ta", N=1, H=3, TT=1, DYN=1, TAKE=1),
] + [T.case(f"{c.name}_{kind}", small=False, tags=("ring",), PREP=1, **tail, **c.params)
     for kind, tail in (("prep", {}), ("tail", {"TAIL": 1}))
     for c in B.D.SUITE.cases if not c.small]
  # PREP = 2's twins of the four ring shapes, tagged "pwarp" and "alt", not "ring" (kda_bench.sh's
  # decodecols2 keeps its items, its smokes leave "alt" out; decodecols3 times these)
  + [T.case(f"{c.name}_pw", small=False, tags=("pwarp", "alt"), PREP=2, **c.params)
     for c in B.D.SUITE.cases if not c.small]
  # and their TAIL = 1 twins (session 19: the last heads' stores under the last head's compute;
  # kda_bench.sh decodecols4 times them beside `_pw` and the control)
  + [T.case(f"{c.name}_pwtail", small=False, tags=("pwtail", "alt"), PREP=2, TAIL=1,
            **c.params) for c in B.D.SUITE.cases if not c.small]
  # then DYN = 1's twins of the control (session 21: heads from a counter; kda_bench.sh
  # decodecols5 times them after the control)
  + [T.case(f"{c.name}_dyn", small=False, tags=("dyn", "alt"), DYN=1, **c.params)
     for c in B.D.SUITE.cases if not c.small]
  # and their TAKE = 1 twins (session 27: each refill's ticket asked a head early;
  # kda_bench.sh decodecols6 times them beside `_dyn` and the control)
  + [T.case(f"{c.name}_dyn_ta", small=False, tags=("dyn", "take", "alt"), DYN=1, TAKE=1,
            **c.params) for c in B.D.SUITE.cases if not c.small]
  # and START = 1's twins of the control and of PREP = 2 (session 21; decodecols5 times `_st`)
  + [T.case(f"{c.name}_{kind}", small=False, tags=("start", "alt"), START=1, **prep, **c.params)
     for kind, prep in (("st", {}), ("pwst", {"PREP": 2}))
     for c in B.D.SUITE.cases if not c.small])
