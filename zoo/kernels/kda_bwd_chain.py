"""Kimi Delta Attention backward, the serial part of piece 2 as a linear chain on tensor cores
(issue 18; kda_bwd_split.py has the contract, docs/TUNING.md "The chunked backward: the chain"
the plan and what was learned): the gradient dS of each chunk's final state, for every chunk of
every sequence, from per-chunk operands prepared in parallel (kda_bwd_split.chain_operands).

Math (kda_bwd_split.chain): per sequence and head, from the last chunk with dS = dht,

    dS1[c] = dS                                         (stored: piece 2c reads it)
    dS    <- Diag(exp(G_C)) dS + N_c dS + B_c,          N_c = -KE^T Tb^T KL  [K, K]
                                                        B_c = (QE^T - KE^T Tb^T M^T) dO  [K, V]

and dh0 = dS after the first chunk. The recurrence reads neither S0 nor V, and its value
columns are independent: a CTA takes 16 WARPS value columns of one head (16 per warp), so a
head is split over V / (16 WARPS) CTAs. With FORWARD=1 the same kernel walks the chunks from
the first: the forward's state obeys S1 = Diag(exp(G_C)) S0 + N_c^T S0 + KL^T Tb V
(kda_bwd_split.state_operands), so it gives every chunk's S0 with the chain's precision
(piece 1 without the forward's bf16 state products).

Precision (benchmarks/kda_precision.py, "chain" rows): the product N dS with either operand
plain bf16 misses the public backward rule on the final gradients (dk up to 4.1x, dbeta 2.1x);
both split into bf16 hi + lo (x = hi + lo, ~16 bits) meet it with >= 45x to spare. So each
product is three mma.sync (N_hi dS_hi + N_lo dS_hi + N_hi dS_lo; the lo lo term is ~2^-16
of the sum, below f32 accumulation's reach here); exp(G_C) and B enter in f32 (an FMA).

Work split (warp w of the CTA: value rows v0 = 16 (WARPS ctaid.x + w) .. v0 + 15): dS^T (16
value rows x 128 key channels, f32) lives in the warp's mma.sync accumulators across chunks (16
m16n8 C fragments, as kda_fwd's state), and per chunk

 1. dS^T stored to xs[c] ([chunks, H, K, V] f32, kda_fwd's layout: each 8 lanes one 32-byte
    sector of a row);
 2. its A fragments, hi = ``cvt.rn.bf16x2.f32`` of the accumulators, lo = the same of what hi
    leaves (``shl``/``and`` to unpack, ``sub``): 8 k-steps x (4 + 4) registers;
 3. dS^T <- dS^T Diag(exp(G_C)) + B^T (``ld.global.nc.v2.f32``: the lane's two channels; B^T
    [chunks, H, V, K] f32 so a lane's pair is 8 contiguous bytes);
 4. dS^T += dS1^T N^T: 8 k-steps x 16 n-tiles x 3 mma.sync m16n8k16, the B fragments of N^T
    in their register layout (`nfrag` [chunks, H, 8, 16, 32, 4] u32: k-step s, n-tile j,
    lane, then hi b0, hi b1, lo b0, lo b1: 16 bytes a lane and fragment pair, 512 contiguous
    bytes a warp), read either

    - STAGED=0: by every warp straight from global memory (``ld.global.nc.v4.b32``): no
      shared memory and no barrier, every warp its own chain; but every warp reads all of
      N_c (64 KB a chunk: V / 16 = 8 reads per chunk and head, from L2 after the first), so
      the L2-to-SM traffic is ~3.3x the HBM bytes (docs/TUNING.md);
    - STAGED=1: from a two-stage shared ring (2 x 64 KB) that thread 0 fills with one
      ``cp.async.bulk`` a chunk on the stage's `full` mbarrier (transaction bytes), chunk i + 1
      while the warps work on chunk i, once every thread has arrived on the stage's `empty`
      mbarrier after its reads of chunk i - 1 (``ld.shared.v4.b32``: 4 wavefronts a warp
      instruction, no conflict). N then crosses L2 once per CTA; with WARPS = 8 a CTA is a
      whole head (one CTA an SM: 128 KB of shared memory, 242 registers).

FRAGS=1 (plan "tc13" of kda_fwd_bwd): step 2's split A fragments of dS^T are stored instead
of step 1's f32 state (`_store_split`, `state_fragments`: the same 64 KB a chunk, two
``st.global.v4.b32`` of 512 contiguous bytes a warp and k-step), which hold the B fragments
kda_bwd_pieces_ld FRAGS=1 multiplies by: the pieces no longer load the state element by
element and split it again for each of their five products that read it.

Inputs: nfrag (above; kda_bwd_split.chain_operands' N as `fragments`), bt [chunks, H, V, K],
eg [chunks, H, K] f32 (B^T and exp(G_C) of every chunk), x0 [N, H, K, V] f32 (dht; h0 with
FORWARD), cu_seqlens [N + 1], chunk_off [N + 1] (each sequence's first chunk), order [N]
(longest first: grid z) s32. Outputs: xs [chunks, H, K, V] f32 (dS1 of every chunk; S0 with
FORWARD), xn [N, H, K, V] f32 (dh0; the final state with FORWARD).

Tags: linear-attention, backward, chunked-scan, mma-sync, state-in-registers, mbarrier-pipeline,
varlen
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import tirxh.lang as T
from tirxh.api import numpy_dtype

# the zoo is a directory of kernel files, not a package (see kda_fwd.py)
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
import kda_bwd as BW  # noqa: E402 - after the path that finds it
import kda_bwd_split as SP  # noqa: E402
import kda_ref as R  # noqa: E402
from kda_chunk import C, K, V, afrag, mma, pack, unpack  # noqa: E402

TAGS = ("linear-attention", "backward", "chunked-scan", "mma-sync", "state-in-registers",
        "mbarrier-pipeline", "varlen")

KS = K // 16              # k-steps of the product (16 key channels each)
NT = K // 8               # n-tiles (8 key channels each)
FRAG = KS * NT * 32 * 4   # u32 words of one chunk's N fragments (64 KB)
SCALE = K ** -0.5
_BF16 = numpy_dtype("bf16")


# --- the kernel ---------------------------------------------------------------------------------

class _Lane:
    """g = lane / 4, t = lane % 4 (the mma fragments' roles) and the warp's first value row."""

    def __init__(self, WARPS):
        self.lane = T.laneid()
        self.g, self.t = self.lane >> 2, self.lane & 3
        self.v0 = (T.ctaid.x * WARPS + (T.tid.x >> 5)) << 4


def _state_io(st, ln, buf, base, load):
    """The warp's dS^T to or from a [K, V] f32 state whose lane element 0 is `base` (its value
    row v0 + g): element (v = g (+ 8), channel 8j + 2t (+ 1)) at channel * V + v, kda_fwd's
    layout (each 8 lanes one 32-byte sector); one address a call (``mad.wide``) and immediate
    offsets after it."""
    row = buf.at(base + ln.t * (2 * V))
    for j in range(NT):
        for e in range(4):
            at = row + 4 * ((8 * j + (e & 1)) * V + 8 * (e >> 1))
            if load:
                T.ptx.ld.global_.f32(st[j][e], at)
            else:
                T.ptx.st.global_.f32(at, st[j][e])


def _split(st):
    """The A fragments of dS^T for the 8 k-steps, as bf16 hi and lo: hi = rn(x), lo = rn(x -
    hi), per pair of accumulators (``cvt.rn.bf16x2.f32``, ``shl``/``and``, ``sub``)."""
    his, los = [], []
    for s in range(KS):
        hi = afrag(st[2 * s], st[2 * s + 1])
        src = [(st[2 * s][0], st[2 * s][1]), (st[2 * s][2], st[2 * s][3]),
               (st[2 * s + 1][0], st[2 * s + 1][1]), (st[2 * s + 1][2], st[2 * s + 1][3])]
        lo = []
        for word, (a, b) in zip(hi, src):
            ha, hb = unpack(word)
            lo.append(pack(a - ha, b - hb))
        his.append(hi)
        los.append(lo)
    return his, los


def _step(st, ln, hc, bt, eg, frag, xs=None):
    """One chunk (head-chunk index hc = chunk * H + h): dS^T <- dS^T Diag(eg) + B^T + dS^T N^T
    with dS^T's operand split (module docstring, steps 2-4); `frag(s, j)` loads the lane's
    four words of N's fragments for k-step s and n-tile j (global or shared memory). `xs`
    (FRAGS=1): the split is also the chunk's stored state (`_store_split`)."""
    ahi, alo = _split(st)
    if xs is not None:
        _store_split(ahi, alo, ln, xs, hc)
    brow = bt.at((hc * V + ln.v0 + ln.g) * K + 2 * ln.t)
    erow = eg.at(hc * K + 2 * ln.t)
    for j in range(NT):
        e2 = T.ptx.ld.global_.nc.v2.f32(erow + 4 * 8 * j)
        b0 = T.ptx.ld.global_.nc.v2.f32(brow + 4 * 8 * j)
        b8 = T.ptx.ld.global_.nc.v2.f32(brow + 4 * (8 * K + 8 * j))
        for e in range(4):
            add = (b0, b8)[e >> 1][e & 1]
            T.ptx.fma.rn.f32(st[j][e], st[j][e], e2[e & 1], add)
    for s in range(KS):
        for j in range(NT):
            w = frag(s, j)
            hi, lo = [w[0], w[1]], [w[2], w[3]]
            mma(st[j], alo[s], hi)
            mma(st[j], ahi[s], lo)
            mma(st[j], ahi[s], hi)


def split_offset(vb, s, part):
    """u32 words from a chunk's first word of the FRAGS=1 state to the 128 words (32 lanes x 4)
    of value block vb (16 rows), k-step s (16 key channels) and part (0 the hi A fragment, 1
    the lo one): `state_fragments`' layout."""
    return ((vb * KS + s) * 2 + part) * 128


def _store_split(ahi, alo, ln, xs, hc):
    """FRAGS=1: the state's split A fragments (dS^T, value rows v0 .. v0 + 15) stored where
    the f32 state went, as the words kda_bwd_pieces_ld FRAGS=1 multiplies by: per k-step the
    hi and the lo fragment, each one ``st.global.v4.b32`` (512 contiguous bytes a warp) of
    the very registers the mma reads (a word order of their own cost ptxas ~900 moves and
    14 KB of code). Why: the pieces read S0 and dS1 three and two times, each time split again
    element by element from scalar f32 loads (session 32's ncu profile: 32.5% of their warp
    samples waited on those loads); the chain has the split in registers already, and two of
    a fragment's words are a B fragment there (`state_fragments`)."""
    base = xs.at(hc * (K * V) + split_offset(ln.v0 >> 4, 0, 0) + 4 * ln.lane)
    for s in range(KS):
        for part, words in enumerate((ahi[s], alo[s])):
            T.ptx.st.global_.v4.b32(base + 4 * split_offset(0, s, part), words)


def _frag_offset(s, j):
    """Bytes from a lane's first word of a chunk's `nfrag` to its words of (s, j)."""
    return 4 * (s * NT + j) * 32 * 4


def _walk_global(st, ln, nch, cbase, H, h, nfrag, bt, eg, xs, FORWARD, FRAGS=0):
    """STAGED=0: each warp reads N's fragments straight from global memory (L2)."""
    with T.range(nch) as i:
        c = cbase + (i if FORWARD else nch - 1 - i)
        hc = c * H + h
        if not FRAGS:
            _state_io(st, ln, xs, hc * (K * V) + ln.v0 + ln.g, load=False)
        fbase = nfrag.at(hc * FRAG + 4 * ln.lane)
        _step(st, ln, hc, bt, eg,
              lambda s, j: T.ptx.ld.global_.nc.v4.b32(fbase + _frag_offset(s, j)),
              xs if FRAGS else None)


def _walk_staged(st, ln, nch, cbase, H, h, nfrag, bt, eg, xs, FORWARD, WARPS, FRAGS=0):
    """STAGED=1: N's 64 KB of a chunk copied once per CTA into a two-stage shared ring (one
    ``cp.async.bulk`` by thread 0 on the stage's `full` mbarrier, transaction bytes), each warp
    reading its fragments with ``ld.shared.v4.b32`` (512 contiguous bytes a warp instruction),
    every thread arriving on the stage's `empty` mbarrier when its reads are consumed. Thread
    0 refills the other stage with chunk i + 1 at the top of chunk i, after `empty` says
    chunk i - 1's readers are done with it (parity ((i - 1) >> 1) & 1: that stage's use
    number (i - 1) / 2)."""
    sn = T.shared(T.u32, (2, FRAG), align=128, dynamic=True, name="sN")
    full = T.mbarrier(2, name="full", dynamic=True)
    empty = T.mbarrier(2, name="empty", dynamic=True)
    bulk = T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"]
    tid = T.tid.x

    def chunk_of(i):
        return cbase + (i if FORWARD else nch - 1 - i)

    def load(i, stage):
        full[stage].arrive_expect_tx(FRAG * 4)
        bulk(sn.at(stage, 0), nfrag.at((chunk_of(i) * H + h) * FRAG), FRAG * 4, full[stage])
    with T.if_(tid == 0):
        for s in range(2):
            full[s].init(1)
            empty[s].init(32 * WARPS)
        T.ptx.fence.mbarrier_init.release.cluster()
    T.ptx.bar.sync(0)
    with T.if_((tid == 0) & (nch > 0)):
        load(0, 0)
    ring = T.pipeline(2)
    with T.range(nch) as i:
        with T.if_((tid == 0) & (i + 1 < nch)):
            nxt = ring.stage ^ 1
            with T.if_(i >= 1):
                empty[nxt].wait(((i - 1) >> 1) & 1)
            load(i + 1, nxt)
        hc = chunk_of(i) * H + h
        if not FRAGS:
            _state_io(st, ln, xs, hc * (K * V) + ln.v0 + ln.g, load=False)
        sbase = sn.at(ring.stage, ln.lane * 4)
        full[ring.stage].wait(ring.phase)
        _step(st, ln, hc, bt, eg,
              lambda s, j: T.ptx.ld.shared.v4.b32(sbase + _frag_offset(s, j)),
              xs if FRAGS else None)
        empty[ring.stage].arrive()
        ring.advance()


def _grid(B, T_, H, lens=None, WARPS=2):
    """(value slices, heads, sequences)."""
    return (V // (16 * WARPS), H, B if lens is None else len(lens))


def _block(WARPS=2):
    return 32 * WARPS


@T.kernel(grid=_grid, block=_block)
def kda_bwd_chain(nfrag: T.gptr[T.u32], bt: T.gptr[T.f32], eg: T.gptr[T.f32],
                  x0: T.gptr[T.f32], cu_seqlens: T.gptr[T.s32], chunk_off: T.gptr[T.s32],
                  order: T.gptr[T.s32], xs: T.gptr[T.f32], xn: T.gptr[T.f32],
                  WARPS: T.const = 2, FORWARD: T.const = 0, STAGED: T.const = 0,
                  FRAGS: T.const = 0):
    H, h = T.nctaid.y, T.ctaid.y
    n = T.ptx.ld.global_.nc.u32(order.at(T.ctaid.z))        # longest sequences first
    start = T.ptx.ld.global_.nc.u32(cu_seqlens.at(n))
    length = T.ptx.ld.global_.nc.u32(cu_seqlens.at(n + 1)) - start
    cbase = T.ptx.ld.global_.nc.u32(chunk_off.at(n))
    nch = (length + (C - 1)) >> 6
    ln = _Lane(WARPS)
    st = [T.fragment(T.f32, 4) for _ in range(NT)]
    sbase = (n * H + h) * (K * V) + ln.v0 + ln.g
    _state_io(st, ln, x0, sbase, load=True)
    if STAGED:
        _walk_staged(st, ln, nch, cbase, H, h, nfrag, bt, eg, xs, FORWARD, WARPS, FRAGS)
    else:
        _walk_global(st, ln, nch, cbase, H, h, nfrag, bt, eg, xs, FORWARD, FRAGS)
    _state_io(st, ln, xn, sbase, load=False)


# --- operands, inputs, reference, cases -----------------------------------------------------

OUTPUTS = ("xs", "xn")


def bf16_split(x):
    """(hi, lo) bf16 of x through f32: hi = rn(x), lo = rn(x - hi) (what the kernel's
    ``cvt.rn.bf16x2.f32`` pair makes of an f32 value)."""
    x32 = np.asarray(x, np.float32)
    hi = x32.astype(_BF16)
    lo = (x32 - hi.astype(np.float32)).astype(_BF16)
    return hi, lo


def _pack_pairs(x, i0, j0, i1, j1):
    """u32 words of bf16 pairs: x[..., i0, j0] in the low half, x[..., i1, j1] in the high."""
    lo_half = x[..., i0, j0].view(np.uint16).astype(np.uint32)
    return lo_half | (x[..., i1, j1].view(np.uint16).astype(np.uint32) << 16)


def _unpack_pairs(word):
    """(low, high) halves of u32 words of bf16 pairs, as float64."""
    return [((word >> sh) & 0xFFFF).astype(np.uint16).view(_BF16).astype(np.float64)
            for sh in (0, 16)]


LANE_G, LANE_T = np.arange(32) // 4, np.arange(32) % 4     # the fragments' (g, t) of each lane


def fragments(Nmat):
    """The chain's `nfrag` layout of N [..., K, K] (float): [..., 8, 16, 32, 4] u32, k-step s,
    n-tile j, lane (g, t), then the hi B fragment (b0, b1) and the lo one. The product's B
    operand is N^T (k = the input channel, n = the output channel), so b0 holds N[8j + g, 16s +
    2t], N[8j + g, 16s + 2t + 1] (the first in the low half) and b1 the same 8 channels on."""
    hi, lo = bf16_split(Nmat)
    out = np.zeros(np.shape(Nmat)[:-2] + (KS, NT, 32, 4), np.uint32)
    for s, j, w in np.ndindex(KS, NT, 4):
        rows, cols = 8 * j + LANE_G, 16 * s + 2 * LANE_T + 8 * (w & 1)
        out[..., s, j, :, w] = _pack_pairs((hi, lo)[w >> 1], rows, cols, rows, cols + 1)
    return out


def unsplit(frag):
    """N (float64, hi + lo) back from `fragments` (what the kernel multiplies by)."""
    out = np.zeros(frag.shape[:-4] + (K, K))
    for s, j, w in np.ndindex(KS, NT, 4):
        rows, cols = 8 * j + LANE_G, 16 * s + 2 * LANE_T + 8 * (w & 1)
        for e, half in enumerate(_unpack_pairs(frag[..., s, j, :, w])):
            out[..., rows, cols + e] += half
    return out


def state_fragments(S):
    """The FRAGS=1 layout of states S [..., K, V] (indexed [channel, value], kda_fwd's): [...,
    8 value blocks vb, 8 k-steps s, 2 parts (hi, lo: `bf16_split`), 32 lanes (g, t), 4] u32,
    word w the A fragment register a_w of S^T's 16 x 16 block: the bf16 pair (S[c, v], S[c +
    1, v]) (the first in the low half) with v = 16 vb + g + 8 (w & 1), c = 16 s + 2t + 8 (w >>
    1). Words (0, 2) and (1, 3) are B fragments of S as a [K, V] operand (value columns 16 vb
    .. + 7 and + 8 .. + 15); kda_bwd_pieces_ld turns each word into S^T's by ``movmatrix``.
    The same bytes as the f32 state."""
    parts = bf16_split(S)
    out = np.zeros(np.shape(S)[:-2] + (V // 16, KS, 2, 32, 4), np.uint32)
    for vb, s, part, w in np.ndindex(V // 16, KS, 2, 4):
        rows, cols = _state_place(vb, s, w)
        out[..., vb, s, part, :, w] = _pack_pairs(parts[part], rows, cols, rows + 1, cols)
    return out


def _state_place(vb, s, w):
    """(channels, values) of the first elements of word w's pairs, lane by lane."""
    return 16 * s + 2 * LANE_T + 8 * (w >> 1), 16 * vb + LANE_G + 8 * (w & 1)


def unsplit_state(frag):
    """S (float64, hi + lo) back from `state_fragments`."""
    out = np.zeros(frag.shape[:-5] + (K, V))
    for vb, s, part, w in np.ndindex(V // 16, KS, 2, 4):
        rows, cols = _state_place(vb, s, w)
        for e, half in enumerate(_unpack_pairs(frag[..., vb, s, part, :, w])):
            out[..., rows + e, cols] += half
    return out


def _operands(x, lens, forward=False):
    """(N [chunks, H, K, K], B [chunks, H, K, V], exp(G_C) [chunks, H, K]) of every chunk of
    every sequence (float64, sequence order): kda_bwd_split.chain_operands of the inputs `x`
    (kda_bwd's), or state_operands with `forward`."""
    Ns, Bs, egs = [], [], []
    B_, T_ = x["q"].shape[:2]
    for n, (b, t0, t1) in enumerate(R.spans(B_, T_, x["cu_seqlens"] if lens is not None
                                            else None)):
        qn, kn, gn, bn = R._prepare(x["q"], x["k"], x["g_raw"], x["beta"], x["A_log"],
                                    x["dt_bias"], b, t0, t1)
        if forward:
            ops = SP.state_operands(kn, np.asarray(x["v"][b, t0:t1], np.float64), gn, bn)
        else:
            ops = SP.chain_operands(qn, kn, gn, bn, SCALE, np.asarray(x["do"][b, t0:t1],
                                                                       np.float64))
        Ns.append(np.moveaxis(ops["N"], 0, 1))
        Bs.append(np.moveaxis(ops["B"], 0, 1))
        egs.append(np.moveaxis(ops["eg"], 0, 1))
    return np.concatenate(Ns), np.concatenate(Bs), np.concatenate(egs)


def _outputs(H, N, chunks):
    return dict(xs=np.zeros((chunks, H, K, V), np.float32),
                xn=np.zeros((N, H, K, V), np.float32))


def chain_inputs(x, lens=None, FORWARD=0):
    """The kernel's arguments from kda_bwd's inputs `x` (raw tensors, do, dht, h0, the
    offsets): the chain's operands (float64 chain_operands, or state_operands with FORWARD:
    the stand-in for the parallel kernel that will prepare them) and zeroed outputs."""
    B, T_, H = x["q"].shape[:3]
    Nm, Bm, egm = _operands(x, lens, forward=bool(FORWARD))
    N = len(x["cu_seqlens"]) - 1
    return dict(nfrag=fragments(Nm), bt=np.ascontiguousarray(np.swapaxes(Bm, -1, -2),
                                                              np.float32),
                eg=egm.astype(np.float32), x0=x["h0"] if FORWARD else x["dht"],
                cu_seqlens=x["cu_seqlens"], chunk_off=x["chunk_off"], order=x["order"],
                **_outputs(H, N, len(Nm)))


def inputs(rng, B, T_, H, lens=None, gate="mixed", FORWARD=0):
    """kda_bwd's inputs for the shape and gate regime, as the kernel's (`chain_inputs`)."""
    return chain_inputs(BW.inputs(rng, B, T_, H, lens=lens, gate=gate), lens, FORWARD)


def reference(nfrag, bt, eg, x0, cu_seqlens, chunk_off, FORWARD=0, **_):
    """kda_bwd_split.chain of every sequence and head in float64 from the kernel's own operands
    (N = hi + lo of `nfrag`, B and exp(G_C) as stored) with dS (or S) exact: what the kernel
    computes but for its split of the state and its f32 sums."""
    Nm = unsplit(nfrag)
    Bm = np.swapaxes(np.asarray(bt, np.float64), -1, -2)
    egm = np.asarray(eg, np.float64)
    chunks, H = Nm.shape[:2]
    out = _outputs(H, len(cu_seqlens) - 1, chunks)
    for n in range(len(cu_seqlens) - 1):
        c0, c1 = int(chunk_off[n]), int(chunk_off[n + 1])

        def seq(a, c0=c0, c1=c1):
            a = np.moveaxis(a[c0:c1], 0, 1)            # [H, n, ...]
            return a[:, ::-1] if FORWARD else a         # the forward walk as a reverse one
        xs, xn = SP.chain(seq(egm), seq(Nm), seq(Bm), np.asarray(x0[n], np.float64))
        out["xs"][c0:c1] = np.moveaxis(xs[:, ::-1] if FORWARD else xs, 0, 1)
        out["xn"][n] = xn
    return out


def timing_inputs(rng, B, T_, H, lens=None):
    """The large (timing) cases: synthetic operands of the right sizes (exp(G_C) = 1/2, N and
    B ~ N(0, 1) / 64: the chain stays bounded; its time does not depend on the values), no
    reference (SUITE's small cases are the check; the bench smokes them on the GPU first)."""
    cu, chunk_off = BW._offsets(B, T_, lens)
    N, chunks = len(cu) - 1, int(chunk_off[-1])
    order = np.argsort(-np.diff(cu), kind="stable").astype(np.int32)
    small = (rng.standard_normal((chunks, H, KS, NT, 32, 8), np.float32)
             * np.float32(1 / 64)).astype(_BF16)
    nfrag = small.view(np.uint32).reshape(chunks, H, KS, NT, 32, 4)
    bt = rng.standard_normal((chunks, H, V, K), np.float32) * np.float32(1 / 64)
    return dict(nfrag=nfrag, bt=bt, eg=np.full((chunks, H, K), 0.5, np.float32),
                x0=rng.standard_normal((N, H, K, V), np.float32), cu_seqlens=cu,
                chunk_off=chunk_off, order=order, **_outputs(H, N, chunks))


def constraints(B, T_, H, lens=None, WARPS=2, FORWARD=0, STAGED=0, FRAGS=0):
    out, N = R.shape_problems(B, T_, H, lens, "z")
    if WARPS not in (1, 2, 4, 8):
        out.append(f"WARPS={WARPS} must be 1, 2, 4 or 8 (16 value columns each, V = {V})")
    if FORWARD not in (0, 1):
        out.append(f"FORWARD={FORWARD} must be 0 (dS from the last chunk) or 1 (S0 from the "
                   f"first)")
    if STAGED not in (0, 1):
        out.append(f"STAGED={STAGED} must be 0 (N read by every warp from global memory) or "
                   f"1 (staged once per CTA in shared memory)")
    if FRAGS not in (0, 1):
        out.append(f"FRAGS={FRAGS} must be 0 (xs the f32 states) or 1 (their split fragments: "
                   f"state_fragments)")
    chunks = -(-T_ // C) * B if lens is None else sum(-(-x // C) for x in lens)
    if max(chunks * FRAG, chunks * K * V, N * K * V) * H >= 1 << 32:
        out.append(f"B={B}, T_={T_}, H={H}: nfrag and xs ({chunks} chunks x H x 64 KB) must "
                   f"hold fewer than 2^32 elements (32-bit element offsets)")
    return out


def _chunks(B, T_, lens=None):
    return sum(-(-x // C) for x in ([T_] * B if lens is None else lens))


def _bytes(B, T_, H, lens=None, WARPS=2):
    """Per chunk and head: N's fragments (64 KB, counted once: the V / (16 WARPS) CTAs of a
    head read it through L2), B^T read and dS1 written (64 KB each), exp(G_C); x0 read and
    xn written per sequence."""
    N = B if lens is None else len(lens)
    return _chunks(B, T_, lens) * H * (FRAG * 4 + 2 * K * V * 4 + K * 4) + 2 * N * H * K * V * 4


def _flops(B, T_, H, lens=None):
    """The product N dS per chunk and head at bf16 rate: three mma a multiply-add (hi + lo)."""
    return _chunks(B, T_, lens) * H * 3 * 2 * K * K * V


# Tolerance: against the float64 chain from the kernel's own operands the only differences are
# dS's hi + lo split (~2^-17 relative) and f32 sums: every element within rtol 1e-3 plus 1e-3
# x RMS(ref) (kda_bwd_reverse's rule), and a normalized RMS error below 1e-5. numsim gives
# <= 3.2e-6 on every small case; either lo product dropped (a plain bf16 operand, which breaks
# the public rule downstream: benchmarks/kda_precision.py) gives 2.5e-5 to 9e-4 on three
# chunks, so the RMS bound is what tells the split from plain bf16.
TOLERANCE = T.tolerance(rtol=1e-3, atol_rms=1e-3, rms=1e-5)

_COMMON = dict(outputs=list(OUTPUTS), constraints=constraints, bytes=_bytes, flops=_flops)
PACK6 = BW.PACK6

SUITE = T.suite(
    kda_bwd_chain, inputs=inputs, reference=reference, tolerance=TOLERANCE, **_COMMON,
    cases=[
        # the smallest (what `tirxh check`'s sync_check runs): one 20-row chunk, deep gates
        T.case("t20_h1_deep", B=1, T_=20, H=1, gate="deep", WARPS=1),
        # three chunks (64, 64, 22), saturated gates: dS through two chunk steps and a tail
        T.case("t150_h1_deep", B=1, T_=150, H=1, gate="deep"),
        # two rows of 70 (a chunk and a 6-row tail each), 4 warps, mixed gates
        T.case("b2_t70_h1_w4", B=2, T_=70, H=1, WARPS=4),
        # a varlen pack (2 chunks, a one-token sequence, a tail) on 2 heads, 8 warps
        T.case("pack_80_1_30_h2_w8", B=1, T_=111, H=2, lens=(80, 1, 30), WARPS=8),
        # FORWARD: S0 of every chunk (piece 1 in the chain's precision), three chunks, deep gates
        T.case("fwd_t150_h1_deep", B=1, T_=150, H=1, gate="deep", FORWARD=1),
        # FORWARD over a varlen pack on 2 heads
        T.case("fwd_pack_80_1_30_h2", B=1, T_=111, H=2, lens=(80, 1, 30), FORWARD=1),
        # STAGED: N through the two-stage shared ring, 8 warps, three chunks (the third
        # reuses stage 0), saturated gates
        T.case("s8_t150_h1_deep", B=1, T_=150, H=1, gate="deep", WARPS=8, STAGED=1),
        # STAGED, 4 warps, the forward walk over a varlen pack with a one-chunk sequence
        T.case("s4_fwd_pack_80_1_30_h2", B=1, T_=111, H=2, lens=(80, 1, 30), WARPS=4,
               STAGED=1, FORWARD=1),
    ])

# timing only (no reference: `timing_inputs`), tagged "timing": `benchmarks/kda_bench.sh chain`
# times them and leaves them out of its smoke step; kda_bwd_reverse's shapes, the staged
# version with 8 warps (main: one CTA a head and an SM) and the global one with 2 (alt), and
# the forward walk at T8192 H96
_VARIANTS = {"s8": dict(WARPS=8, STAGED=1), "w2": dict(WARPS=2)}
SUITE_TIMING = T.suite(
    kda_bwd_chain, inputs=timing_inputs, **_COMMON,
    cases=[T.case(f"{name}_h{H}_{v}", B=1, T_=8192, H=H, lens=lens, small=False,
                  tags=("timing", "main" if v == "s8" else "alt"), **params)
           for name, lens in (("t8192", None), ("pack6", PACK6)) for H in (96, 64)
           for v, params in _VARIANTS.items()]
    + [T.case("fwd_t8192_h96_s8", B=1, T_=8192, H=96, WARPS=8, STAGED=1, FORWARD=1,
              small=False, tags=("timing", "alt"))])
