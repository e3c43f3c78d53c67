"""Decode attention over a paged KV cache: one query token per sequence, bf16, head dim 128, GQA.

out[b, h] = sum_j softmax_j(q[b, h] . K[b, j] / sqrt(128)) V[b, j], over the tokens j < seq_lens[b]
of sequence b, whose keys and values live in pages of PAGE tokens named by block_table[b].

Layout: k_cache and v_cache are [pages * KVH * PAGE, 128] bf16 (page-major, then KV head, then
token: a page's tokens for one head are PAGE contiguous 256-byte rows); block_table [B, max_pages]
int32 (entries past a sequence's pages are never read); query heads kvh*G .. kvh*G + G - 1 share KV
head kvh (G = query heads per KV head; G = 1 is plain multi-head attention).

Algorithm (split-K "flash decoding"): CTA (split s, KV head kvh, sequence b) takes the s-th of
SPLITS equal ranges of the sequence's 64-token blocks, for all G query heads of its KV head, so the
KV is read once however many query heads share it.
- warp 4 is the producer: one thread walks the blocks through a STAGES-deep ring in shared memory:
  wait the stage's `empty` mbarrier, arm `full` with the stage's bytes, and issue TMA loads
  (``cp.async.bulk.tensor.2d``, 128-byte swizzle) of each page's K and V rows (64 columns per box);
  the page of a token comes from the block table (past the last page it repeats the last one, so
  no table entry beyond the sequence is used), loaded one block ahead so its latency hides behind
  the wait for a free stage;
- warps 0-3 are consumers, 16 tokens each per block: S = Q K^T with ``mma.sync.m16n8k16`` (bf16,
  f32 accumulate; the G query heads are the M rows, padded to 16), K fragments by
  ``ldmatrix.x4`` from the swizzled tiles; online softmax per query head (running max m and
  sum l; log2(e)/sqrt(128) folded into one ``fma`` before ``ex2.approx``); P is rounded to bf16 and
  multiplied into the f32 accumulator by ``mma.sync`` with V fragments from ``ldmatrix.x4.trans``.
  Tokens at or past seq_lens are masked: their scores to -inf (``selp``), their V fragments to 0
  (``and.b32``), so stale or NaN cache slots cannot leak; then one lane per warp releases the stage;
- the four warps' (m, l, acc) are merged through shared memory; with SPLITS = 1 the CTA writes
  out directly; otherwise it writes its partial (m, l and the unnormalized f32 accumulator) to
  scratch, and the last CTA of (b, kvh) to finish -- a counter bumped with
  ``atom.acq_rel.gpu.global.add.u32`` after a ``fence.acq_rel.gpu`` -- merges the SPLITS partials
  and resets the counter to 0 for the next launch.

Shared memory: the ring (sK, sV: 1024-aligned for the 128B swizzle), the mbarriers and the merge
buffers (cm, cl, cacc, last) all live in the one window `T.shared` lays out, whose base the
prologue rounds up to 1024 bytes. Until issue 19 the merge buffers were static ``.shared``
variables in front of the window, which the H200 placed at the next 16-byte boundary behind them
(2576 for 2564 bytes), so every TMA load faulted with a misaligned address.

Techniques: TMA + mbarrier producer/consumer ring, warp specialization, 128B-swizzled tiles read by
ldmatrix, tensor-core mma.sync with the FA2 register reuse (S accumulators become P operands),
split-K with an in-kernel last-CTA combine.

Tags: tma, mbarrier-pipeline, warp-specialized, swizzle-128b, online-softmax, split-k, mma-sync,
paged-kv
Work: 4 * Hq * 128 FLOPs per token; bytes: the K and V of every token once, q and out.
"""

import numpy as np

import tirxh.lang as T
from tirxh.core.ir import Addr
from tirxh.core.types import numpy_dtype

TAGS = ("tma", "mbarrier-pipeline", "warp-specialized", "swizzle-128b", "online-softmax",
        "split-k", "mma-sync", "paged-kv")

D = 128
BN = 64  # tokens per pipeline stage (16 per consumer warp)
CONSUMERS = 4
LOG2E = 1.4426950408889634
SCALE = LOG2E / np.sqrt(D)  # softmax in base 2: exp(x/sqrt(D)) = 2^(x * SCALE)
NEG_BIG = -1.0e30  # running-max floor: finite, so (m_old - m_new) is never inf - inf
FULL = 0xFFFFFFFF
MMA = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"


def _grid(B, KVH, SPLITS):
    return (SPLITS, KVH, B)


def _quad(v, op):
    """Reduce over the 4 lanes of a quad (lanes sharing lane/4): 2 x (shfl.sync.bfly, op)."""
    for off in (1, 2):
        v = op(v, T.ptx.mov.f32(T.ptx.shfl.sync.bfly.b32(v, off, 0x1F, FULL)))
    return v


def _producer(k_map, v_map, sK, sV, full, empty, block_table, b, kvh, blk0, nblk, last_page,
              max_pages, KVH, PAGE, STAGES):
    box = min(PAGE, BN)
    tma = T.ptx["cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"]

    def rows_of(blk):
        """The cache rows of block `blk`'s page boxes: one block-table load per box (past the
        last page the last page again, so every load is of the sequence's own entries)."""
        out = []
        for pc in range(BN // box):
            t = blk * BN + pc * box
            pidx = T.ptx.min.u32(t // PAGE, last_page)
            page = T.ptx.ld.global_.nc.s32(block_table.at(b * max_pages + pidx))
            out.append(T.ptx.mad.lo.s32(T.ptx.mad.lo.s32(page, KVH, kvh), PAGE,
                                        T.ptx.rem.u32(t, PAGE) if PAGE > BN else 0))
        return out

    ring = T.pipeline(STAGES)
    nxt = [T.reg(T.s32, init=r) for r in rows_of(blk0)]
    with T.range(nblk) as i:
        cur = [T.reg(T.s32, init=r) for r in nxt]
        for r, v in zip(nxt, rows_of(blk0 + i + 1)):  # the next block's table entries load
            r.set(v)                                   # while this one waits for its stage
        empty[ring.stage].wait(ring.phase ^ 1)  # a fresh barrier counts as released
        full[ring.stage].arrive_expect_tx(BN * D * 2 * 2)
        for pc, row in enumerate(cur):
            for half in range(2):
                tma(sK.at(ring.stage, half, pc * box), k_map[64 * half, row], full[ring.stage])
                tma(sV.at(ring.stage, half, pc * box), v_map[64 * half, row], full[ring.stage])
        ring.advance()


def _consumer(q, sK, sV, full, empty, b, kvh, blk0, nblk, seq_len, G, H, STAGES):
    """One consumer warp's pass over its 16 tokens of every block: returns (m, l, acc) of rows
    g and g + 8 (l summed over the quad)."""
    lane = T.laneid()
    warp = T.tid.x >> 5
    g = lane >> 2
    t = lane & 3
    wtok = warp * 16
    # Q as the A operand, 8 k-steps of 16 dims: rows g, g+8 (query heads), dims 16kk + 2t (+8)
    qrow = (b * H + kvh * G + g) * D + 2 * t  # element (head g, dim 2t); head g + 8 is 8 rows on
    qa = [[T.reg(T.b32, init=0) for _ in range(4)] for _ in range(D // 16)]
    for r in (0, 8):
        addr = q.at(qrow + r * D)
        live = g + r < G
        for kk in range(D // 16):
            for dk in (0, 8):
                T.ptx.ld.global_.nc.b32(qa[kk][r // 8 + dk // 4], addr + 2 * (16 * kk + dk),
                                        pred=live)
    m = [T.reg(T.f32, init=NEG_BIG), T.reg(T.f32, init=NEG_BIG)]
    l = [T.reg(T.f32, init=0.0), T.reg(T.f32, init=0.0)]
    acc = [T.fragment(T.f32, 4, init=0.0) for _ in range(D // 8)]
    # ldmatrix lane roles: matrix mi = lane/8, row ri = lane%8 of it; 128B swizzle: the 16-byte
    # chunk c of row r sits at chunk c ^ (r % 8)
    mi = lane >> 3
    ri = lane & 7
    k_row = sK.ptr() + (wtok + (mi >> 1) * 8 + ri) * 128
    v_row = sV.ptr() + (wtok + (mi & 1) * 8 + ri) * 128
    k_sel, v_sel = T.ptx.and_.b32(mi, 1), mi >> 1  # which chunk of the pair the matrix reads
    # this lane's address for chunk pair j (dims 16j..16j+15 of a 64-column half): row base +
    # ((2j + sel) ^ ri) * 16
    k_at = [T.ptx.add.u32(k_row, T.ptx.shl.b32(T.ptx.xor.b32(k_sel + 2 * j, ri), 4))
            for j in range(4)]
    v_at = [T.ptx.add.u32(v_row, T.ptx.shl.b32(T.ptx.xor.b32(v_sel + 2 * j, ri), 4))
            for j in range(4)]
    ring = T.pipeline(STAGES)
    with T.range(nblk) as i:
        full[ring.stage].wait(ring.phase)
        stage_off = ring.stage * (2 * BN * 128)
        # S = Q K^T, 16 heads x 16 tokens (two n-tiles of 8 tokens)
        s = [T.fragment(T.f32, 4, init=0.0) for _ in range(2)]
        kb = [T.ptx.add.u32(a, stage_off) for a in k_at]
        for kk in range(D // 16):
            r0, r1, r2, r3 = T.ptx.ldmatrix.sync.aligned.m8n8.x4.shared.b16(
                Addr(kb[kk % 4], (kk // 4) * (BN * 128)))
            T.ptx[MMA](s[0], qa[kk], [r0, r1], s[0])
            T.ptx[MMA](s[1], qa[kk], [r2, r3], s[1])
        # mask tokens at or past the sequence's end: this lane's tokens are 2t + e (+ 8)
        rem = T.ptx.sub.s32(seq_len, T.ptx.add.u32(T.ptx.mad.lo.u32(blk0 + i, BN, wtok), 2 * t))
        ok = {d: rem > d for d in (0, 1, 8, 9)}
        for n in range(2):
            for j in range(4):
                T.ptx.selp.f32(s[n][j], s[n][j], float("-inf"), ok[8 * n + (j & 1)])
        # online softmax per row (r = 0: head g, r = 1: head g + 8)
        p = [[None] * 4 for _ in range(2)]
        for r in range(2):
            mx = s[0][2 * r]
            for n, j in ((0, 1), (1, 0), (1, 1)):
                mx = T.ptx.max.f32(mx, s[n][2 * r + j])
            mx = T.ptx.max.f32(_quad(mx, T.ptx.max.f32), m[r])
            corr = T.ptx.ex2.approx.ftz.f32(T.ptx.mul.f32(T.ptx.sub.f32(m[r], mx), SCALE))
            m[r].set(mx)
            neg = T.ptx.mul.f32(mx, -SCALE)
            T.ptx.mul.f32(l[r], l[r], corr)
            for n in range(2):
                for j in range(2):
                    e = T.ptx.ex2.approx.ftz.f32(T.ptx.fma.rn.f32(s[n][2 * r + j], SCALE, neg))
                    T.ptx.add.f32(l[r], l[r], e)
                    p[n][2 * r + j] = e
            for a in acc:
                T.ptx.mul.f32(a[2 * r], a[2 * r], corr)
                T.ptx.mul.f32(a[2 * r + 1], a[2 * r + 1], corr)
        pa = [T.ptx.cvt.rn.bf16x2.f32(p[n][2 * r + 1], p[n][2 * r]) for n in range(2)
              for r in range(2)]  # the A fragment: (g, tok 2t..), (g+8, ..), (g, tok 8+2t..), ..
        # V fragments of masked tokens zeroed: (tokens 2t, 2t+1) and (8+2t, 9+2t) halves
        lo_mask = T.ptx.or_.b32(T.ptx.selp.b32(0xFFFF, 0, ok[0]),
                                T.ptx.selp.b32(0xFFFF0000, 0, ok[1]))
        hi_mask = T.ptx.or_.b32(T.ptx.selp.b32(0xFFFF, 0, ok[8]),
                                T.ptx.selp.b32(0xFFFF0000, 0, ok[9]))
        vb = [T.ptx.add.u32(a, stage_off) for a in v_at]
        for npair in range(D // 16):
            r0, r1, r2, r3 = T.ptx.ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16(
                Addr(vb[npair % 4], (npair // 4) * (BN * 128)))
            b0 = [T.ptx.and_.b32(r0, lo_mask), T.ptx.and_.b32(r1, hi_mask)]
            b1 = [T.ptx.and_.b32(r2, lo_mask), T.ptx.and_.b32(r3, hi_mask)]
            T.ptx[MMA](acc[2 * npair], pa, b0, acc[2 * npair])
            T.ptx[MMA](acc[2 * npair + 1], pa, b1, acc[2 * npair + 1])
        with T.if_(lane == 0):
            empty[ring.stage].arrive()
        ring.advance()
    return m, [_quad(x, T.ptx.add.f32) for x in l], acc


def _merge_warps(cm, cl, cacc, G):
    """Consumer thread d (0..127): for each query head, the warps' (m, l) merged and column d of
    their accumulators; returns [(m, l, o_d)] per head."""
    d = T.tid.x
    out = []
    for h in range(G):
        ms = [T.ptx.ld.shared.f32(cm.at(w, h)) for w in range(CONSUMERS)]
        big = ms[0]
        for x in ms[1:]:
            big = T.ptx.max.f32(big, x)
        lsum = T.reg(T.f32, init=0.0)
        o = T.reg(T.f32, init=0.0)
        for w in range(CONSUMERS):
            f = T.ptx.ex2.approx.ftz.f32(T.ptx.mul.f32(T.ptx.sub.f32(ms[w], big), SCALE))
            T.ptx.fma.rn.f32(lsum, T.ptx.ld.shared.f32(cl.at(w, h)), f, lsum)
            T.ptx.fma.rn.f32(o, T.ptx.ld.shared.f32(cacc.at(w, h, d)), f, o)
        out.append((big, lsum, o))
    return out


def _normalize(o, lsum):
    """o / l, or 0 for an empty sequence (l == 0)."""
    return T.ptx.selp.f32(T.ptx.div.rn.f32(o, lsum), 0.0, lsum > 0.0)


@T.kernel(grid=_grid, block=32 * (CONSUMERS + 1))
def decode_attention(k_map: T.tensormap, v_map: T.tensormap, q: T.gptr[T.bf16],
                     k_cache: T.gptr[T.bf16], v_cache: T.gptr[T.bf16],
                     block_table: T.gptr[T.s32], seq_lens: T.gptr[T.s32], out: T.gptr[T.bf16],
                     part_o: T.gptr[T.f32], part_ml: T.gptr[T.f32], counters: T.gptr[T.u32],
                     max_pages: T.u32, KVH: T.const, G: T.const, PAGE: T.const,
                     SPLITS: T.const = 1, STAGES: T.const = 3):
    H = KVH * G
    sK = T.shared(T.bf16, (STAGES, 2, BN, 64), align=1024, swizzle=128, dynamic=True, name="sK")
    sV = T.shared(T.bf16, (STAGES, 2, BN, 64), align=1024, swizzle=128, dynamic=True, name="sV")
    full = T.mbarrier(STAGES, name="full", dynamic=True)
    empty = T.mbarrier(STAGES, name="empty", dynamic=True)
    cm = T.shared(T.f32, (CONSUMERS, 16), name="cm")
    cl = T.shared(T.f32, (CONSUMERS, 16), name="cl")
    cacc = T.shared(T.f32, (CONSUMERS, G, D), name="cacc")
    last = T.shared(T.u32, (1,), name="last")
    tid = T.tid.x
    split, kvh, b = T.ctaid.x, T.ctaid.y, T.ctaid.z
    seq_len = T.ptx.ld.global_.nc.s32(seq_lens.at(b))
    # this split's blocks: the s-th of SPLITS equal ranges of the sequence's 64-token blocks
    nblocks = T.ptx.shr.u32(T.ptx.add.u32(seq_len, BN - 1), 6)
    per = T.ptx.div.u32(T.ptx.add.u32(nblocks, SPLITS - 1), SPLITS)
    blk0 = T.ptx.min.u32(split * per, nblocks)
    nblk = T.ptx.sub.u32(T.ptx.min.u32(T.ptx.add.u32(blk0, per), nblocks), blk0)
    last_page = T.ptx.div.u32(T.ptx.sub.u32(T.ptx.max.u32(seq_len, 1), 1), PAGE)

    with T.if_(tid == 0):
        for st in range(STAGES):
            full[st].init(1)
            empty[st].init(CONSUMERS)
        T.ptx.fence.mbarrier_init.release.cluster()
    T.ptx.bar.sync(0)

    with T.if_(tid >= 32 * CONSUMERS, uniform=True):  # warp 4: the producer
        with T.if_(tid == 32 * CONSUMERS):
            _producer(k_map, v_map, sK, sV, full, empty, block_table, b, kvh, blk0, nblk,
                      last_page, max_pages, KVH, PAGE, STAGES)
    with T.else_():  # warps 0-3: consumers
        m, l, acc = _consumer(q, sK, sV, full, empty, b, kvh, blk0, nblk, seq_len, G, H, STAGES)
        lane = T.laneid()
        warp = tid >> 5
        g = lane >> 2
        t = lane & 3
        for r in range(2):
            head = g + 8 * r
            with T.if_((t == 0) & (head < G)):
                T.ptx.st.shared.f32(cm.at(warp, head), m[r])
                T.ptx.st.shared.f32(cl.at(warp, head), l[r])
            with T.if_(head < G):
                row = cacc.at(warp, head, 2 * t)
                for n in range(D // 8):
                    T.ptx.st.shared.v2.f32(row + 32 * n, [acc[n][2 * r], acc[n][2 * r + 1]])
        T.ptx.bar.sync(1, 32 * CONSUMERS)
        merged = _merge_warps(cm, cl, cacc, G)
        if SPLITS == 1:
            for h, (_, lsum, o) in enumerate(merged):
                T.ptx.st.global_.b16(out.at((b * H + kvh * G + h) * D + tid),
                                     T.ptx.cvt.rn.bf16.f32(_normalize(o, lsum)))
        else:
            _split_combine(merged, out, part_o, part_ml, counters, last, b, kvh, split, G, H,
                           KVH, SPLITS)


def _split_combine(merged, out, part_o, part_ml, counters, last, b, kvh, split, G, H, KVH,
                   SPLITS):
    """Write this split's partial; the last CTA of (b, kvh) to arrive merges all of them."""
    d = T.tid.x
    for h, (big, lsum, o) in enumerate(merged):
        row = (b * H + kvh * G + h) * SPLITS + split
        T.ptx.st.global_.f32(part_o.at(row * D + d), o)
        with T.if_(d == 0):
            T.ptx.st.global_.v2.f32(part_ml.at(row * 2), [big, lsum])
    T.ptx.fence.acq_rel.gpu()  # every thread's partial before the arrival below (cumulative)
    T.ptx.bar.sync(1, 32 * CONSUMERS)
    with T.if_(d == 0):
        old = T.ptx.atom.acq_rel.gpu.global_.add.u32(counters.at(b * KVH + kvh), 1)
        T.ptx.st.shared.u32(last.at(0), old)
    T.ptx.bar.sync(1, 32 * CONSUMERS)
    with T.if_(T.ptx.ld.shared.u32(last.at(0)) == SPLITS - 1, uniform=True):
        for h in range(G):
            base = (b * H + kvh * G + h) * SPLITS
            ml = [T.ptx.ld.global_.cg.v2.f32(part_ml.at((base + s) * 2)) for s in range(SPLITS)]
            big = ml[0][0]
            for s in range(1, SPLITS):
                big = T.ptx.max.f32(big, ml[s][0])
            lsum = T.reg(T.f32, init=0.0)
            o = T.reg(T.f32, init=0.0)
            for s in range(SPLITS):
                f = T.ptx.ex2.approx.ftz.f32(T.ptx.mul.f32(T.ptx.sub.f32(ml[s][0], big), SCALE))
                T.ptx.fma.rn.f32(lsum, ml[s][1], f, lsum)
                T.ptx.fma.rn.f32(o, T.ptx.ld.global_.cg.f32(part_o.at((base + s) * D + d)), f, o)
            T.ptx.st.global_.b16(out.at((b * H + kvh * G + h) * D + d),
                                 T.ptx.cvt.rn.bf16.f32(_normalize(o, lsum)))
        with T.if_(d == 0):  # ready for the next launch
            T.ptx.st.relaxed.gpu.global_.u32(counters.at(b * KVH + kvh), 0)


# -- cases ------------------------------------------------------------------------------------------

def constraints(B, KVH, G, PAGE, L, SPLITS, STAGES, lens=None):
    """The shapes the kernel accepts (checked when the suite is declared)."""
    why = []
    if not 1 <= G <= 16:
        why.append(f"G={G} query heads per KV head must be in [1, 16] (the 16 M rows of "
                   "mma.m16n8k16)")
    if PAGE not in (16, 32, 64, 128, 256):
        why.append(f"PAGE={PAGE} must be 16, 32, 64, 128 or 256 tokens (a power of two >= 16: "
                   "TMA boxes of whole 1024-byte swizzle atoms)")
    if not 1 <= SPLITS <= 64:
        why.append(f"SPLITS={SPLITS} must be in [1, 64]")
    if not 2 <= STAGES <= 6:
        why.append(f"STAGES={STAGES} must be in [2, 6]")
    if L < 1 or B < 1 or KVH < 1:
        why.append(f"B={B}, KVH={KVH} and L={L} must be positive")
    if lens is not None and (len(lens) != B or not all(1 <= x <= L for x in lens)):
        why.append(f"lens={tuple(lens)!r} must hold B={B} lengths in [1, L={L}]")
    return why


def make_case(name: str, B: int, KVH: int, G: int, PAGE: int, L: int, SPLITS: int = 1,
              lens=None, STAGES: int = 3, small: bool = True) -> T.Case:
    """A decode case: every sequence has L tokens unless `lens` (B lengths) is given. Large
    cases are the H200's (tag h200), never simulated."""
    return T.case(name, small=small, tags=() if small else ("h200",), B=B, KVH=KVH, G=G,
                  PAGE=PAGE, L=L, SPLITS=SPLITS, STAGES=STAGES,
                  lens=tuple(lens) if lens is not None else None)


def _lens(B, L, lens):
    return np.asarray(lens if lens is not None else [L] * B, np.int64)


def inputs(rng, B, KVH, G, PAGE, L, SPLITS, lens=None):
    bf16 = numpy_dtype("bf16")
    n = _lens(B, L, lens)
    pages_of = -(-n // PAGE)
    max_pages = -(-L // PAGE)
    npages = int(pages_of.sum()) + 3  # a few pages no sequence owns
    perm = rng.permutation(npages)
    table = np.full((B, max_pages), -1, np.int32)  # -1: past a sequence's pages, never read
    owner = np.cumsum(pages_of) - pages_of
    for bi in range(B):
        table[bi, :pages_of[bi]] = perm[owner[bi]:owner[bi] + pages_of[bi]]
    # every slot NaN, then each sequence's tokens filled: stale or unowned slots must not leak
    kc = np.full((npages, KVH, PAGE, D), np.nan, np.float32)
    vc = np.full((npages, KVH, PAGE, D), np.nan, np.float32)
    for bi in range(B):
        j = np.arange(int(n[bi]))
        pg, slot = table[bi, j // PAGE], j % PAGE
        kc[pg, :, slot] = rng.standard_normal((j.size, KVH, D), dtype=np.float32)
        vc[pg, :, slot] = rng.standard_normal((j.size, KVH, D), dtype=np.float32)
    q = rng.standard_normal((B, KVH * G, D), dtype=np.float32) * 2.0  # peaky enough to matter
    H = KVH * G
    return dict(q=q.astype(bf16), k_cache=kc.reshape(-1, D).astype(bf16),
                v_cache=vc.reshape(-1, D).astype(bf16), block_table=table,
                seq_lens=n.astype(np.int32), out=np.empty((B, H, D), bf16),
                part_o=np.zeros((B * H * SPLITS, D), np.float32),
                part_ml=np.zeros((B * H * SPLITS, 2), np.float32),
                counters=np.zeros((B, KVH), np.uint32), max_pages=max_pages,
                k_map=T.TensorMap("k_cache", box=(min(PAGE, BN), 64), swizzle=128),
                v_map=T.TensorMap("v_cache", box=(min(PAGE, BN), 64), swizzle=128))


def reference(q, k_cache, v_cache, block_table, seq_lens, KVH, G, PAGE):
    """Exact attention in float64 over each sequence's gathered tokens."""
    B, H, _ = q.shape
    kc = k_cache.astype(np.float64).reshape(-1, KVH, PAGE, D)
    vc = v_cache.astype(np.float64).reshape(-1, KVH, PAGE, D)
    out = np.zeros((B, H, D))
    for bi in range(B):
        n = int(seq_lens[bi])
        pages = block_table[bi, :-(-n // PAGE)]
        k = kc[pages].transpose(1, 0, 2, 3).reshape(KVH, -1, D)[:, :n]
        v = vc[pages].transpose(1, 0, 2, 3).reshape(KVH, -1, D)[:, :n]
        for h in range(H):
            s = k[h // G] @ q[bi, h].astype(np.float64) / np.sqrt(D)
            p = np.exp(s - s.max())
            out[bi, h] = p @ v[h // G] / p.sum()
    return {"out": out.astype(np.float32)}


def _tokens(B, L, lens=None):
    return int(_lens(B, L, lens).sum())


SUITE = T.suite(
    decode_attention, inputs=inputs, reference=reference, outputs=["out"],
    cases=[
        # the smallest (so the one sync_check takes): GQA over 2 KV heads, 2 splits combined,
        # a 6-token tail block whose pages past the last one are clamped to it
        make_case("b1_kv2_g2_p16_s2", B=1, KVH=2, G=2, PAGE=16, L=70, SPLITS=2, STAGES=2),
        make_case("b1_g1_p64", B=1, KVH=1, G=1, PAGE=64, L=100),                 # MHA, 1 split
        # a 1-token sequence (its second split is empty) beside a 66-token one
        make_case("b2_g4_p32_s2", B=2, KVH=1, G=4, PAGE=32, L=66, SPLITS=2, lens=(1, 66)),
        # pages longer than a block (in-page offsets), 16 query heads per KV head
        make_case("b1_g16_p128_s2", B=1, KVH=1, G=16, PAGE=128, L=129, SPLITS=2),
        make_case("b32_h32x8_l8k_p16", B=32, KVH=8, G=4, PAGE=16, L=8192, small=False),
        make_case("b32_h32x8_l8k_p64", B=32, KVH=8, G=4, PAGE=64, L=8192, small=False),
        make_case("b32_h32x8_l8k_p64_s2", B=32, KVH=8, G=4, PAGE=64, L=8192, SPLITS=2,
                  small=False),
        make_case("b8_h64x8_l32k_p64_s4", B=8, KVH=8, G=8, PAGE=64, L=32768, SPLITS=4,
                  small=False),
        make_case("b1_h32x8_l128k_p64_s32", B=1, KVH=8, G=4, PAGE=64, L=131072, SPLITS=32,
                  small=False),
    ],
    # P is rounded to bf16 before P.V (relative 2^-9 on average per weight, averaging out over
    # tokens) and the output to bf16: over the small cases numsim's worst element is 6e-3 off on
    # outputs of magnitude ~1 and the normalized RMS error at most 2.1e-3 (expected ~2^-9 at any
    # length: the errors scale with the output). 1.5e-2 + 2^-7 relative per element and 1e-2 RMS
    # leave 2.5-5x margins; a wrong weight, mask or combine is off by far more
    tolerance=T.tolerance(rtol=2.0 ** -7, atol=1.5e-2, rms=1e-2), constraints=constraints,
    flops=lambda B, KVH, G, L, lens=None: 4 * KVH * G * D * _tokens(B, L, lens),
    bytes=lambda B, KVH, G, L, lens=None: 2 * 2 * KVH * D * _tokens(B, L, lens)
    + 2 * 2 * B * KVH * G * D,
    baselines=[{"name": "torch.decode_sdpa", "args": dict(
                   q="q", k_cache="k_cache", v_cache="v_cache", block_table="block_table",
                   seq_lens="seq_lens", kv_heads="KVH", page_size="PAGE")},
               {"name": "torch.compile.decode_sdpa", "args": dict(
                   q="q", k_cache="k_cache", v_cache="v_cache", block_table="block_table",
                   seq_lens="seq_lens", kv_heads="KVH", page_size="PAGE")}],
)
