"""Kimi Delta Attention decode with the state moved by bulk copies (issue 18, session 9).

The same computation as kda_decode.py (its docstring has the math: TT = 1..4 tokens per sequence,
the f32 state [N, H, K=128, V=128] updated in place, o [N, TT, H, V] bf16), the same inputs,
reference and tolerances. kda_decode moves the state through registers (16 ``ld.global.v4`` per
lane, 4 CTAs per SM) and measured 87.1% of the H200's copy bandwidth; the zoo's TMA copy
(tma_copy.py) reaches 92.7% by moving bytes with the copy engine through shared memory. This
kernel moves each head's 64 KB the same way.

Algorithm: a persistent grid of G = min(N H, CTAS) CTAs of 8 warps (one per SM: three 68 KB
stages fill its shared memory) walks the heads (n, h) = cta, cta + G, ... (N and H are
compile-time constants, taken from the case like TT: a head's (n, h) is a multiply-shift, and the
suite declares kda_decode's own inputs() and reference()). Thread 0 drives the copy engine:
- a head's load: ``mbarrier.arrive.expect_tx`` on the stage's `full` barrier with the head's
  bytes, then 1-D ``cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes`` copies:
  the state (contiguous, 64 KB in 4 copies of 16 KB) and, per token, the 256-byte rows of q, k,
  g_raw and v (so no token load is exposed to the CTA's latency: only beta, A_log and dt_bias,
  a few bytes a head, are plain loads, issued before the wait);
- after the head is computed and written back into its stage: ``cp.async.bulk.global.
  shared::cta.bulk_group`` (4 copies), ``commit_group``; then ``wait_group.read 1`` (every store
  but this head's has read its stage) frees the previous head's stage, which is refilled with
  the head STAGES - 1 ahead (tma_copy's ring). With 3 stages up to two loads and a store of 64 KB
  are in flight per SM while the CTA computes: Little's law asks ~20-30 KB per SM and direction
  at 4.25 TB/s.
- ``cp.async.bulk.wait_group 0`` before the CTA exits.

Layout: warp w owns state rows 16w .. 16w + 15 and every column; lane l the columns 4l .. 4l + 3
of them (64 registers, as kda_decode). A warp's ``ld.shared.v4.f32`` reads one 512-byte row:
4 wavefronts, no bank conflict; the stores mirror it. Per token the column sums over rows
(S'^T k, S'^T q: 4 columns a lane) and the norms |k|^2, |q|^2, k.q are partial per warp: each
warp writes its partials to shared memory (``st.shared.v4``, conflict-free as the state), one
``bar.sync``, then every lane adds the 8 warps' partials of its columns (the buffer alternates
with the token's parity, so the next token's writes never meet this token's reads: one barrier
per token). The gate: lane l computes the decay of row 16w + (l mod 16) (``ex2``, ``rcp``,
``ex2``) and 16 ``shfl.sync.idx`` give every lane its warp's 16 decays (3 MUFU a lane instead of
kda_decode's 48). k and q of the warp's rows are broadcast ``ld.shared.v4`` from the stage.
After the tokens: the state back into the stage, ``fence.proxy.async.shared::cta`` (the copy
engine reads what the threads wrote), ``bar.sync``, thread 0's bulk store.

Numerics: kda_decode's (f32 state, ``ex2``/``rcp``/``rsqrt.approx``, the same gate and L2
norms); only the order of the sums over rows differs (16 rows in the lane, then 8 warps).

Techniques: 1-D bulk copies (TMA) in and out of a 3-stage shared-memory ring, mbarrier
transaction-count completion, bulk async-groups (wait_group.read recycles a stage), persistent
CTAs, conflict-free row-per-warp shared layout, cross-warp reduction through shared memory
double-buffered by token parity, shuffle broadcast of the gate, fused gate and L2 normalization.

Tags: memory-bound, tma, mbarrier-pipeline, persistent, bulk-async-group, linear-attention,
fused-gate
"""

from __future__ import annotations

import sys
from pathlib import Path

import tirxh.lang as T

# the zoo is a directory of kernel files, not a package (kda_decode.py says why)
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
import kda_decode as D  # noqa: E402 - after the path that finds it
from kda_decode import (FULL, K, V, _decay, _decay_and_sums, _gate_scale,  # noqa: E402
                        _store_o, _unpack, _update)

TAGS = ("memory-bound", "tma", "mbarrier-pipeline", "persistent", "bulk-async-group",
        "linear-attention", "fused-gate")

WARPS = 8
ROWS = K // WARPS             # state rows per warp
HEAD = K * V                  # state elements per head (64 KB)
NCOPY = 4                     # bulk copies per head's state, 16 KB each
PART = 2 * V + 4              # f32 partials per warp and token: S'^T k, S'^T q, |k|^2, |q|^2, k.q
SMEM_LIMIT = 227 * 1024       # the H200's shared memory per CTA


def _grid(N, H, CTAS):
    return (min(N * H, CTAS),)


def head_of(cta, j, grid, H):
    """(head, n, h) of a persistent CTA's j-th head, cta + j grid (``mad``, ``div``, ``mul``,
    ``sub``)."""
    hd = cta + j * grid
    n = hd / H
    return hd, n, hd - n * H


def load_head(bar, state_copies, tk, stage, tokens, n, h, H, TT):
    """Thread 0's load of one head into a ring stage, completing on the mbarrier `bar`:
    ``mbarrier.arrive.expect_tx`` with the head's bytes, the state's 1-D bulk copies
    (`state_copies`: (shared dst, global src, bytes), the caller's layout), then per token the
    256-byte rows of q, k, g_raw, v (`tokens`) into tk[stage, t, 0..3]."""
    bulk_load = T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"]
    bar.arrive_expect_tx(HEAD * 4 + TT * 4 * K * 2)
    for dst, src, nbytes in state_copies:
        bulk_load(dst, src, nbytes, bar)
    for t in range(TT):
        tok = (n * TT + t) * H + h
        for i, src in enumerate(tokens):
            bulk_load(tk.at(stage, t, i), src.at(tok * K), K * 2, bar)


def smem_bytes(TT, STAGES):
    """Shared memory of one CTA: the stages (state + TT tokens' q, k, g_raw, v rows in bf16),
    the partials' two buffers, the mbarriers and the 112 bytes by which the launch pads the
    window for its 128-byte alignment (`T.shared`)."""
    return STAGES * (HEAD * 4 + TT * 4 * K * 2) + 2 * WARPS * PART * 4 + 8 * STAGES + 112


def store_and_refill(store_copies, j, mine, STAGES, refill):
    """Thread 0 after the CTA's j-th head: its state's bulk stores (`store_copies`: (global dst,
    shared src, bytes)), one bulk async-group; then, if a head STAGES - 1 ahead remains, wait
    until every group but this one has read its stage (``wait_group.read 1``: the previous
    head's) and `refill()` it (tma_copy's recycling)."""
    bulk_store = T.ptx["cp.async.bulk.global.shared::cta.bulk_group"]
    for dst, src, nbytes in store_copies:
        bulk_store(dst, src, nbytes)
    T.ptx.cp.async_.bulk.commit_group()
    with T.if_((j > 0) & (j + (STAGES - 1) < mine)):
        T.ptx.cp.async_.bulk.wait_group.read(1)   # the previous head's store has read
        refill()


@T.kernel(grid=_grid, block=32 * WARPS)
def kda_decode_bulk(q: T.gptr[T.bf16], k: T.gptr[T.bf16], v: T.gptr[T.bf16],
                    g_raw: T.gptr[T.bf16], beta: T.gptr[T.bf16], A_log: T.gptr[T.f32],
                    dt_bias: T.gptr[T.f32], state: T.gptr[T.f32], o: T.gptr[T.bf16],
                    N: T.const, H: T.const, TT: T.const = 1, STAGES: T.const = 3,
                    CTAS: T.const = 132):
    st = T.shared(T.f32, (STAGES, HEAD), align=128)            # the heads' states
    tk = T.shared(T.bf16, (STAGES, TT, 4, K), align=128)        # their tokens: q, k, g_raw, v
    red = T.shared(T.f32, (2, WARPS, PART), align=16)           # partials, by token parity
    full = T.mbarrier(STAGES)
    tid = T.tid.x
    lane = T.laneid()
    warp = tid >> 5
    grid = min(N * H, CTAS)                  # = %nctaid.x (_grid), a constant here
    cta = T.ctaid.x
    mine = (N * H - 1 - cta) / grid + 1      # heads cta, cta + grid, ... below N H
    chunk = HEAD // NCOPY

    def load(j, stage):
        """Thread 0: the j-th head's state (4 contiguous copies) and tokens into `stage`."""
        hd, n, h = head_of(cta, j, grid, H)
        load_head(full[stage], [(st.at(stage, c * chunk), state.at(hd * HEAD + c * chunk),
                                 chunk * 4) for c in range(NCOPY)],
                  tk, stage, (q, k, g_raw, v), n, h, H, TT)

    with T.if_(tid == 0):
        for s in range(STAGES):
            full[s].init(1)
        T.ptx.fence.mbarrier_init.release.cluster()
        for s in range(STAGES):
            with T.if_(mine > s):
                load(s, s)
    T.ptx.bar.sync(0)     # the mbarriers' initialisation, before anyone waits on them

    row0 = warp * ROWS
    grow = row0 + (lane & 15)        # the row whose gate this lane computes
    col = lane * 4                   # this lane's first value column
    ring = T.pipeline(STAGES)
    prev = T.reg(T.u32, init=0)      # the stage of the previous head
    par = T.reg(T.u32, init=0)       # the token's parity: which partials buffer
    with T.range(mine) as j:
        hd, n, h = head_of(cta, j, grid, H)
        # the head's few plain loads, before the wait: exp(-z) = 2^(c1 g_raw + c0), c1 =
        # -exp(A_log) log2(e), c0 = c1 dt_bias (kda_decode's gate)
        c1 = _gate_scale(A_log, h)
        c0 = c1 * T.ptx.ld.global_.nc.f32(dt_bias.at(h * K + grow))
        betas = [T.ptx.ld.global_.nc.b16(beta.at((n * TT + t) * H + h)) for t in range(TT)]
        full[ring.stage].wait(ring.phase)
        s_addr = st.at(ring.stage, row0 * V + col)
        S = [list(T.ptx.ld.shared.v4.f32(s_addr + r * V * 4)) for r in range(ROWS)]
        for t in range(TT):
            rows = tk.at(ring.stage, t, 0, row0)               # q of the warp's rows
            words = [w for i in (0, 1) for half in (0, 16)
                     for w in T.ptx.ld.shared.v4.b32(rows + i * K * 2 + half)]
            qr = [x for w in words[:8] for x in _unpack(w)]
            kr = [x for w in words[8:] for x in _unpack(w)]
            g = T.ptx.cvt.f32.bf16(T.ptx.ld.shared.b16(tk.at(ring.stage, t, 2, grow)))
            vw = T.ptx.ld.shared.v2.b32(tk.at(ring.stage, t, 3, col))
            vc = [x for w in vw for x in _unpack(w)]
            bt = T.ptx.cvt.f32.bf16(betas[t])
            # one row's decay a lane (kda_decode's gate), broadcast in the warp
            dec = _decay(g, c1, c0)
            part = _decay_and_sums(S, kr, qr, lambda r: T.ptx.mov.f32(
                T.ptx.shfl.sync.idx.b32(dec, r, 0x1F, FULL)))
            # the warp's partials, one barrier, every warp's partials of this lane's columns
            dst = red.at(par, warp, col)
            T.ptx.st.shared.v4.f32(dst, part[:4])
            T.ptx.st.shared.v4.f32(dst + V * 4, part[4:8])
            T.ptx.st.shared.v4.f32(red.at(par, warp, 2 * V), part[8:] + part[10:], pred=lane == 0)
            T.ptx.bar.sync(0)
            base = red.at(par, 0, col)
            norms = red.at(par, 0, 2 * V)
            tot = None
            for w in range(WARPS):
                theirs = (list(T.ptx.ld.shared.v4.f32(base + w * PART * 4))
                          + list(T.ptx.ld.shared.v4.f32(base + w * PART * 4 + V * 4))
                          + list(T.ptx.ld.shared.v4.f32(norms + w * PART * 4))[:3])
                tot = theirs if tot is None else [a + b for a, b in zip(tot, theirs)]
            par.set(T.ptx.xor.b32(par, 1))
            out = _update(S, kr, tot, vc, bt)
            _store_o(o.at(((n * TT + t) * H + h) * V + col), out, pred=warp == 0)
        for r in range(ROWS):
            T.ptx.st.shared.v4.f32(s_addr + r * V * 4, S[r])
        T.ptx.fence.proxy.async_.shared__cta()   # generic writes -> the copy engine's reads
        T.ptx.bar.sync(0)
        with T.if_(tid == 0):
            store_and_refill([(state.at(hd * HEAD + c * chunk), st.at(ring.stage, c * chunk),
                               chunk * 4) for c in range(NCOPY)],
                             j, mine, STAGES, lambda: load(j + (STAGES - 1), prev))
        prev.set(ring.stage)
        ring.advance()
    with T.if_(tid == 0):
        T.ptx.cp.async_.bulk.wait_group(0)


def constraints(N, H, TT=1, STAGES=3, CTAS=132):
    return ring_constraints(N, H, TT, STAGES, CTAS, smem_bytes(TT, STAGES))


def ring_constraints(N, H, TT, STAGES, CTAS, smem):
    """kda_decode's rules, and a ring's: 3 stages or more, `smem` bytes within a CTA's."""
    out = list(D.constraints(N, H, TT))
    if STAGES < 3:
        out.append(f"STAGES={STAGES}: the ring needs 3 stages or more (a head's stage is "
                   "refilled with the head STAGES - 1 ahead once the previous head's store has "
                   "read it; with 2 the load would start only when it is needed)")
    if smem > SMEM_LIMIT:
        out.append(f"STAGES={STAGES}, TT={TT}: {smem} bytes of shared memory exceed the "
                   f"{SMEM_LIMIT} of a CTA")
    if CTAS < 1:
        out.append(f"CTAS={CTAS} must be >= 1")
    return out


# rings that wrap: two CTAs walk 4 and 3 heads, one CTA 9 (stages refilled behind the stores);
# 4096 heads over 132 CTAs leave 4 of them a 32nd head (a tail of ~3% at TT = 4); 128 CTAs take
# 32 each (docs/TUNING.md "Decode by bulk copies")
RING_CASES = [
    T.case("n7_h1_t2_c2", N=7, H=1, TT=2, CTAS=2),
    T.case("n3_h3_t1_c1", N=3, H=3, TT=1, CTAS=1),
    T.case("n64_h64_t4_c128", N=64, H=64, TT=4, CTAS=128, small=False, tags=("ring",)),
]


def ring_suite(kernel, constraints, extra=(), inputs=None):
    """A suite of kda_decode's computation for a ring kernel (N, H, TT, STAGES, CTAS constants):
    kda_decode's own inputs and reference (N and H are the kernel's constants, not inputs: one
    function, so benchmarks/bench_with.py --share-inputs makes them once for every such kernel),
    its cases with the large ones tagged "ring" (benchmarks/kda_bench.sh's decode groups time
    them beside the control's "main" ones), RING_CASES and the kernel's `extra` cases;
    `inputs`: kda_decode's by default (a kernel with more parameters adds its own to them)."""
    return T.suite(
        kernel, inputs=inputs or D.inputs, reference=D.reference, outputs=["o", "state"],
        inplace=["state"], constraints=constraints,
        cases=[c if c.small else T.case(c.name, small=False, tags=("ring",), **c.params)
               for c in D.SUITE.cases] + RING_CASES + list(extra),
        tolerance=D.SUITE.tolerance, flops=D._flops, bytes=D._bytes,
        baselines=list(D.SUITE.baselines),
    )


SUITE = ring_suite(kda_decode_bulk, constraints)
