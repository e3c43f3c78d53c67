"""Row softmax, single pass, online: out[r, c] = exp(x[r, c] - max_r) / sum_c' exp(x[r, c'] - max_r).

bf16 in, bf16 out, f32 math. One CTA per row; the row stays in registers between the read and the
write, so global memory sees exactly one read and one write of the data.

Algorithm:
1. each thread loads its slice of the row with 16-byte vector loads (``ld.global.nc.v4.b32``:
   8 bf16 per load, every load issued before any is used, so a CTA has the whole row in flight);
   lanes of a warp read 512 contiguous bytes per load; the last chunk is predicated and masked
   lanes hold -inf;
2. bf16 -> f32 by bit moves (``shl.b32`` / ``and.b32``: a bf16 is the high half of an f32);
3. each thread reduces its values to an online-softmax pair (m, s): m its maximum, s = sum
   2^((x - m) log2 e) with log2 e folded into one ``fma.rn.f32`` before ``ex2.approx.ftz.f32``
   (the exponentials p are kept in registers for step 5);
4. the pairs are merged -- (m1, s1) + (m2, s2) = (M, s1 2^((m1-M) log2 e) + s2 2^((m2-M) log2 e)),
   M = max(m1, m2) -- by a ``shfl.sync.bfly`` butterfly within each warp, then each warp's pair goes
   to shared memory and, after one ``bar.sync``, every warp merges all of them with a second
   butterfly: one CTA barrier per row, where a max-then-sum softmax needs two;
5. out = p * 2^((m - M) log2 e) / S, packed two at a time with ``cvt.rn.bf16x2.f32`` and stored
   with 16-byte vector stores.

The vector width follows the row width (a constant of the kernel): 8 bf16 per access when cols is a
multiple of 8, else 4, 2 or 1, so that every access is aligned. Rows wider than one CTA's registers
(``cols > BLOCK * 8 * MAX_CHUNKS``) are refused when the suite is declared (``constraints``).

`softmax_tma` is the persistent variant (CTAS CTAs, chosen to fill the SMs, each taking every
CTAS-th row): one thread keeps STAGES rows in flight with 1-D TMA bulk copies into a shared-memory
ring completed on mbarriers, so the next rows load while the CTA reduces and stores the current
one; each row then goes shared memory -> registers and through the same steps 2-5.

`cross_entropy` is the streaming form for rows of any width (LLM vocabularies): per row the
log-sum-exp lse = M + ln S and the loss lse - x[target], reading the row once in chunks with the
per-thread (m, s) rescaled online as the max grows (nothing per element stays in registers).

EF=1 (softmax, cross_entropy) reads with ``ld.global.cs.nc`` (evict-first: every element is read
once, so the L2 keeps the lines being written instead); docs/TUNING.md states its predicted effect.

Tags: online-softmax, vectorized, warp-shuffle, row-in-registers, persistent, tma,
mbarrier-pipeline, cross-entropy, logsumexp
Work: 5 FLOPs per element (max, fma, exp, add, scale); 4 bytes per element (bf16 read + write).
"""

import numpy as np

import tirxh.lang as T
from tirxh.core.types import numpy_dtype

TAGS = ("online-softmax", "vectorized", "warp-shuffle", "row-in-registers", "persistent", "tma",
        "mbarrier-pipeline", "cross-entropy", "logsumexp")

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
NEG_BIG = -1.0e38  # a finite floor for a thread's running max: keeps every exponent argument
#                    finite when all of a thread's elements are masked (-inf) -- its -max*log2(e)
#                    is still finite (-3.4e38 * log2(e) would overflow to -inf, giving NaN)
MAX_CHUNKS = 8  # 16-byte loads per thread: at most 64 bf16 (32 + 64 registers) per thread
BF16_NEG_INF2 = 0xFF80FF80  # two bf16 -inf: what a masked 32-bit load slot holds


def vector_width(cols: int) -> int:
    """bf16 elements per access: the widest of 8/4/2/1 that keeps every row start aligned."""
    return next(v for v in (8, 4, 2, 1) if cols % v == 0)


def _merge(m, s, m_o, s_o):
    """Merge two online-softmax pairs; emits max, 2x (sub, mul, ex2), mul, fma."""
    big = T.ptx.max.f32(m, m_o)
    a = T.ptx.ex2.approx.ftz.f32(T.ptx.mul.f32(T.ptx.sub.f32(m, big), LOG2E))
    b = T.ptx.ex2.approx.ftz.f32(T.ptx.mul.f32(T.ptx.sub.f32(m_o, big), LOG2E))
    return big, T.ptx.fma.rn.f32(s, a, T.ptx.mul.f32(s_o, b))


def _warp_merge(m, s):
    """Butterfly merge of (m, s) over the 32 lanes: 5 x (2 shfl.sync.bfly + `_merge`)."""
    for off in (16, 8, 4, 2, 1):
        m_o = T.ptx.shfl.sync.bfly.b32(m, off, 0x1F, 0xFFFFFFFF)
        s_o = T.ptx.shfl.sync.bfly.b32(s, off, 0x1F, 0xFFFFFFFF)
        m, s = _merge(m, s, m_o, s_o)
    return m, s


def _load_word(x, idx, vec, pred, EF=0):
    """The 32-bit words of one access (`vec` bf16 at element `idx`), -inf where `pred` fails;
    ``ld.global.nc``, with EF=1 ``ld.global.cs.nc`` (evict-first: every element is read once)."""
    nw = max(vec // 2, 1)
    words = [T.reg(T.b32, init=BF16_NEG_INF2) for _ in range(nw)] if pred is not None else None
    ld = T.ptx.ld.global_.cs.nc if EF else T.ptx.ld.global_.nc
    if vec == 8:
        spelling = ld.v4.b32
    elif vec == 4:
        spelling = ld.v2.b32
    elif vec == 2:
        spelling = ld.b32
    else:
        spelling = ld.b16
    if vec == 1:  # one bf16: widen its bits into the high half of a b32 word
        h = T.reg(T.b16, init=0xFF80) if pred is not None else None
        if h is None:
            h = spelling(x.at(idx))
        else:
            spelling(h, x.at(idx), pred=pred)
        return [T.ptx.shl.b32(T.ptx.cvt.u32.u16(h), 16)], True
    if words is None:
        got = spelling(x.at(idx))
        return list(got) if isinstance(got, tuple) else [got], False
    spelling(words if len(words) > 1 else words[0], x.at(idx), pred=pred)
    return words, False


def _unpack(words, high_only):
    """f32 values of packed bf16 words: low half ``shl.b32 16``, high half ``and.b32``."""
    out = []
    for w in words:
        if high_only:
            out.append(w)
            continue
        out.append(T.ptx.shl.b32(w, 16))
        out.append(T.ptx.and_.b32(w, 0xFFFF0000))
    return out


def _store(out, idx, vals, vec, pred):
    """Round to bf16 pairs (``cvt.rn.bf16x2.f32``) and store one access."""
    if vec == 1:
        T.ptx.st.global_.b16(out.at(idx), T.ptx.cvt.rn.bf16.f32(vals[0]), pred=pred)
        return
    words = [T.ptx.cvt.rn.bf16x2.f32(vals[2 * i + 1], vals[2 * i]) for i in range(vec // 2)]
    if vec == 8:
        T.ptx.st.global_.v4.b32(out.at(idx), words, pred=pred)
    elif vec == 4:
        T.ptx.st.global_.v2.b32(out.at(idx), words, pred=pred)
    else:
        T.ptx.st.global_.b32(out.at(idx), words[0], pred=pred)


def _row_stats(vals):
    """The thread's online-softmax pair (m, s) and its exponentials p = 2^((x - m) log2 e), kept
    for the output: max.f32 per value, then fma.rn + ex2.approx.ftz + add.f32 per value."""
    m = T.reg(T.f32, init=NEG_BIG)
    for v in vals:
        for e in v:
            T.ptx.max.f32(m, m, e)
    neg_m = T.ptx.mul.f32(m, -LOG2E)
    s = T.reg(T.f32, init=0.0)
    exps = []
    for v in vals:
        row = [T.ptx.ex2.approx.ftz.f32(T.ptx.fma.rn.f32(e, LOG2E, neg_m)) for e in v]
        for e in row:
            T.ptx.add.f32(s, s, e)
        exps.append(row)
    return m, s, exps


def _cta_merge(m, s, at, nwarps):
    """Warp butterfly, lane 0 of each warp to shared memory (``at(0 or 1, warp)``: the address
    of a warp's m or s), one bar.sync, butterfly over the warps' pairs: every thread gets the
    row's (M, S)."""
    lane = T.laneid()
    warp = T.tid.x >> 5
    wm, ws = _warp_merge(m, s)
    with T.if_(lane == 0):
        T.ptx.st.shared.f32(at(0, warp), wm)
        T.ptx.st.shared.f32(at(1, warp), ws)
    T.ptx.bar.sync(0)
    if nwarps == 1:
        return wm, ws
    cm = T.reg(T.f32, init=NEG_BIG)
    cs = T.reg(T.f32, init=0.0)
    have = lane < nwarps
    T.ptx.ld.shared.f32(cm, at(0, lane), pred=have)
    T.ptx.ld.shared.f32(cs, at(1, lane), pred=have)
    return _warp_merge(cm, cs)


def _scale(m, big, total):
    """2^((m - M) log2 e) / S: the factor from this thread's p to the output."""
    return T.ptx.mul.f32(T.ptx.ex2.approx.ftz.f32(T.ptx.mul.f32(T.ptx.sub.f32(m, big), LOG2E)),
                         T.ptx.rcp.rn.f32(total))


@T.kernel(grid=lambda rows: rows, block=lambda BLOCK: BLOCK)
def softmax(x: T.gptr[T.bf16], out: T.gptr[T.bf16], rows: T.u32,
            cols: T.const, BLOCK: T.const = 256, EF: T.const = 0):
    vec = vector_width(cols)
    nvec = cols // vec  # accesses per row
    chunks = T.cdiv(nvec, BLOCK)
    full = nvec // BLOCK  # chunks where every thread's access is in the row
    nwarps = BLOCK // 32
    part = T.shared(T.f32, (2, nwarps), name="part")
    tid = T.tid.x
    base = T.ctaid.x * cols

    # 1-2. the thread's slice of the row, all loads issued first
    vals, preds = [], []
    for c in range(chunks):
        idx = base + (tid + c * BLOCK) * vec
        p = None if c < full else (tid + c * BLOCK) < nvec
        words, high = _load_word(x, idx, vec, p, EF)
        preds.append(p)
        vals.append((idx, words, high))
    vals = [(idx, _unpack(words, high)) for idx, words, high in vals]

    # 3. the thread's (m, s); 4. merged over the CTA with one barrier
    m, s, exps = _row_stats([v for _, v in vals])
    big, total = _cta_merge(m, s, part.at, nwarps)

    # 5. out = p * 2^((m - M) log2 e) / S
    scale = _scale(m, big, total)
    for (idx, _), row, p in zip(vals, exps, preds):
        _store(out, idx, [T.ptx.mul.f32(e, scale) for e in row], vec, p)


@T.kernel(grid=lambda rows, CTAS: min(rows, CTAS), block=lambda BLOCK: BLOCK)
def softmax_tma(x: T.gptr[T.bf16], out: T.gptr[T.bf16], rows: T.u32, cols: T.const,
                BLOCK: T.const = 512, STAGES: T.const = 3, CTAS: T.const = 264,
                POL: T.const = 0, SPLIT: T.const = 1):
    """Persistent variant: CTA c takes rows c, c + CTAS, ...; one thread keeps STAGES rows in
    flight with 1-D bulk copies (``cp.async.bulk ... mbarrier::complete_tx::bytes``) into a
    shared-memory ring, so loads continue while the CTA computes and stores; each row then goes
    shared -> registers (``ld.shared.v4``) and through the same math as `softmax`. The row's
    stage is refilled right after the merge barrier, which every thread passes only after reading
    it. POL=1 (session 11) gives the row copies ``.L2::cache_hint`` with an ``L2::evict_last``
    policy (``createpolicy.fractional``), as rmsnorm `_tri_pol2` reads its rows: the L2 then
    evicts the written lines first (docs/TUNING.md "tma_copy: which path costs"). SPLIT > 1
    (session 11) copies each row as SPLIT bulk copies of cols / SPLIT elements on the same
    mbarrier (armed once with the row's bytes): operations of 2 KB instead of one of 16 KB, the
    size hypothesis HB of that section."""
    nvec = cols // 8
    chunks = T.cdiv(nvec, BLOCK)
    full_chunks = nvec // BLOCK
    nwarps = BLOCK // 32
    row_bytes = cols * 2
    ring_buf = T.shared(T.bf16, (STAGES, cols), align=128, dynamic=True, name="rows")
    full = T.mbarrier(STAGES, name="full", dynamic=True)
    part = T.shared(T.f32, (2, 2, nwarps), name="part")  # [row parity][m, s][warp]
    bulk = T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 + (".L2::cache_hint" if POL else "")]
    tid = T.tid.x
    hint = ()
    with T.if_(tid == 0):  # the policy word of the row copies (thread 0 issues them all)
        if POL:
            hint = (T.ptx.createpolicy.fractional.L2__evict_last.b64(),)
    cta, ncta = T.ctaid.x, T.nctaid.x
    mine = (rows - cta + ncta - 1) / ncta  # rows of this CTA (the grid has at most `rows` CTAs)

    def issue(i, stage):
        """Thread 0: arm `full[stage]` and copy this CTA's i-th row into it."""
        full[stage].arrive_expect_tx(row_bytes)
        row = (cta + i * ncta) * cols
        piece = cols // SPLIT  # elements a copy
        for j in range(SPLIT):
            bulk(ring_buf.at(stage, j * piece), x.at(row + j * piece if j else row), piece * 2,
                 full[stage], *hint)

    with T.if_(tid == 0):
        for st in range(STAGES):
            full[st].init(1)
        T.ptx.fence.mbarrier_init.release.cluster()
        for st in range(STAGES):
            with T.if_(mine > st):
                issue(st, st)
    T.ptx.bar.sync(0)

    ring = T.pipeline(STAGES)
    with T.range(mine) as i:
        full[ring.stage].wait(ring.phase)
        vals, preds = [], []
        for c in range(chunks):
            p = None if c < full_chunks else (tid + c * BLOCK) < nvec
            words = [T.reg(T.b32, init=BF16_NEG_INF2) for _ in range(4)]
            T.ptx.ld.shared.v4.b32(words, ring_buf.at(ring.stage, (tid + c * BLOCK) * 8),
                                   pred=p)
            preds.append(p)
            vals.append(_unpack(words, False))
        m, s, exps = _row_stats(vals)
        parity = i & 1  # alternate halves: a fast warp's next row cannot overwrite this one's
        big, total = _cta_merge(m, s, lambda k, w: part.at(parity, k, w), nwarps)
        with T.if_(tid == 0):  # every thread has read this stage: refill it with row i + STAGES
            with T.if_(i + STAGES < mine):
                issue(i + STAGES, ring.stage)
        scale = _scale(m, big, total)
        base = (cta + i * ncta) * cols
        for c, (row, p) in enumerate(zip(exps, preds)):
            _store(out, base + (tid + c * BLOCK) * 8, [T.ptx.mul.f32(e, scale) for e in row], 8,
                   p)
        ring.advance()


@T.kernel(grid=lambda rows: rows, block=lambda BLOCK: BLOCK)
def cross_entropy(x: T.gptr[T.bf16], target: T.gptr[T.s64], loss: T.gptr[T.f32],
                  lse: T.gptr[T.f32], cols: T.u32, VEC: T.const = 8, BLOCK: T.const = 256,
                  UNROLL: T.const = 4, EF: T.const = 0):
    """Cross-entropy per row: lse[r] = log sum_c exp(x[r, c]), loss[r] = lse[r] - x[r, target[r]]
    (NaN for a target outside [0, cols)). The streaming form of the online softmax: the row is
    read in chunks of BLOCK * UNROLL accesses (all loads of a chunk in flight before use), each
    thread keeping a running (m, s) that is rescaled when its max grows, so rows of any width
    (LLM vocabularies) take one pass and no registers per element; then the same CTA merge."""
    nwarps = BLOCK // 32
    part = T.shared(T.f32, (2, nwarps), name="part")
    tid = T.tid.x
    row = T.ctaid.x
    base = row * cols
    nvec = cols / VEC
    m = T.reg(T.f32, init=NEG_BIG)
    s = T.reg(T.f32, init=0.0)
    with T.range(0, nvec, BLOCK * UNROLL) as v0:
        vals = []
        for u in range(UNROLL):
            vi = v0 + (u * BLOCK) + tid
            words, high = _load_word(x, base + vi * VEC, VEC, vi < nvec, EF)
            vals.append(_unpack(words, high))
        big = m
        for v in vals:
            for e in v:
                big = T.ptx.max.f32(big, e)
        neg = T.ptx.mul.f32(big, -LOG2E)
        T.ptx.mul.f32(s, s, T.ptx.ex2.approx.ftz.f32(T.ptx.fma.rn.f32(m, LOG2E, neg)))
        for v in vals:
            for e in v:
                T.ptx.add.f32(s, s, T.ptx.ex2.approx.ftz.f32(T.ptx.fma.rn.f32(e, LOG2E, neg)))
        m.set(big)
    big, total = _cta_merge(m, s, part.at, nwarps)
    with T.if_(tid == 0):
        out = T.ptx.fma.rn.f32(T.ptx.lg2.approx.f32(total), LN2, big)  # ln S + M
        t = T.ptx.ld.global_.s64(target.at(row))
        ok = (t >= 0) & (t < T.ptx.cvt.s64.u32(cols))
        picked = T.reg(T.b16, init=0x7FC0)  # a bf16 NaN unless the target is in the row
        T.ptx.ld.global_.b16(picked, x.at(base + T.ptx.cvt.u32.s64(t)), pred=ok)
        T.ptx.st.global_.f32(lse.at(row), out)
        T.ptx.st.global_.f32(loss.at(row), T.ptx.sub.f32(
            out, T.ptx.shl.b32(T.ptx.cvt.u32.u16(picked), 16)))


# -- cases ------------------------------------------------------------------------------------------

def _problems(rows: int, cols: int, BLOCK: int) -> list:
    """What every kernel here refuses: the block shape, empty rows, 32-bit element indices."""
    why = []
    if BLOCK % 32 or not 32 <= BLOCK <= 1024:
        why.append(f"BLOCK={BLOCK} must be a multiple of 32 in [32, 1024]")
    if rows < 1 or cols < 1:
        why.append(f"rows={rows} and cols={cols} must be positive")
    if rows * cols >= 1 << 32:
        why.append(f"rows*cols={rows * cols} must be below 2^32 (32-bit element index)")
    return why


def _ef(EF) -> list:
    return [] if EF in (0, 1) else [f"EF={EF} must be 0 or 1 (1: evict-first loads)"]


def constraints(rows, cols, BLOCK, EF=0):
    """The shapes `softmax` accepts (checked when the suite is declared)."""
    why = _problems(rows, cols, BLOCK) + _ef(EF)
    if not why and T.cdiv(cols // vector_width(cols), BLOCK) * vector_width(cols) > \
            MAX_CHUNKS * 8:
        why.append(f"cols={cols} needs {T.cdiv(cols, BLOCK)} elements per thread at "
                   f"BLOCK={BLOCK}; a row must fit in one CTA's registers (at most "
                   f"{MAX_CHUNKS * 8} per thread: cols <= {BLOCK * MAX_CHUNKS * 8} for 16-byte "
                   f"accesses)")
    return why


def tma_constraints(rows, cols, BLOCK, STAGES, CTAS, POL=0, SPLIT=1):
    """The shapes `softmax_tma` accepts: those of `softmax`, rows starting 16-byte aligned for
    the bulk copies, and STAGES rows in shared memory."""
    why = constraints(rows, cols, BLOCK)
    if POL not in (0, 1):
        why.append(f"POL={POL} must be 0 (no policy) or 1 (evict-last row copies)")
    if SPLIT < 1 or cols % (8 * SPLIT):
        why.append(f"SPLIT={SPLIT} must be >= 1 and divide cols={cols} into pieces of whole "
                   "16-byte units (cols a multiple of 8 * SPLIT)")
    if cols % 8:
        why.append(f"cols={cols} must be a multiple of 8 (bulk copies move 16-byte units)")
    if STAGES * cols * 2 > 200 * 1024:
        why.append(f"STAGES={STAGES} rows of {cols} bf16 need {STAGES * cols * 2} bytes of "
                   "shared memory (at most 204800)")
    if not 2 <= STAGES <= 8 or CTAS < 1:
        why.append(f"STAGES={STAGES} must be in [2, 8] and CTAS={CTAS} positive")
    return why


def ce_constraints(rows, cols, BLOCK, UNROLL, EF=0):
    """The shapes `cross_entropy` accepts: any row width (it streams)."""
    why = _problems(rows, cols, BLOCK) + _ef(EF)
    if not 1 <= UNROLL <= 16:
        why.append(f"UNROLL={UNROLL} must be in [1, 16]")
    return why


def _case(name, small, **params) -> T.Case:
    """Small cases are simulated in CI; the others are the H200's (tag h200), never simulated."""
    return T.case(name, small=small, tags=() if small else ("h200",), **params)


def make_case(name: str, rows: int, cols: int, BLOCK: int = 256, small: bool = True,
              spread: float = 4.0, EF: int = 0) -> T.Case:
    """A softmax case; `spread` scales the inputs (larger: peakier rows); EF=1: evict-first
    loads."""
    return _case(name, small, rows=rows, cols=cols, BLOCK=BLOCK, spread=spread, EF=EF)


def rows_in_flight(cols: int, STAGES: int) -> int:
    """Bytes of row loads one `softmax_tma` CTA keeps in flight: a stage is refilled after the
    merge barrier of the row it held, so STAGES - 1 rows load while the CTA reduces one. Times
    the CTAs per SM it is the figure Little's law compares with ~16 KB (16 B/ns of reads per SM
    at 4.25 TB/s of copy traffic, ~1 us of loaded latency); `tma_copy.loads_in_flight` is the
    same count for the copy."""
    return (STAGES - 1) * cols * 2


def make_tma_case(name: str, rows: int, cols: int, BLOCK: int = 512, STAGES: int = 3,
                  CTAS: int = 264, small: bool = True, POL: int = 0, SPLIT: int = 1) -> T.Case:
    """A case of the persistent `softmax_tma` (CTAS: the grid, chosen to fill the SMs; POL=1:
    evict-last row copies; SPLIT: bulk copies per row)."""
    return _case(name, small, rows=rows, cols=cols, BLOCK=BLOCK, STAGES=STAGES, CTAS=CTAS,
                 POL=POL, SPLIT=SPLIT)


def inputs(rng, rows, cols, spread=4.0):
    bf16 = numpy_dtype("bf16")
    x = rng.standard_normal((rows, cols), dtype=np.float32) * spread
    # per-row offsets up to +-200: a kernel that forgets to subtract the row max overflows exp
    x += rng.uniform(-200, 200, (rows, 1)).astype(np.float32)
    return dict(x=x.astype(bf16), out=np.empty((rows, cols), bf16), rows=rows)


def reference(x):
    """Exact softmax in float64 of the bf16 inputs."""
    v = x.astype(np.float64)
    e = np.exp(v - v.max(axis=1, keepdims=True))
    return {"out": (e / e.sum(axis=1, keepdims=True)).astype(np.float32)}


# the output is rounded to bf16 (8-bit significand: relative error <= 2^-8 against the exact
# value, as numsim compares; KCoral compares with the bf16-rounded reference, where the two
# roundings can differ by one ulp, <= 2^-7 relative); ex2.approx and the f32 sums add ~1e-6.
# So rtol is one bf16 ulp plus a hair; the absolute floor covers results below f32's normal
# range, which ex2.approx.ftz flushes to 0
TOLERANCE = T.tolerance(rtol=8e-3, atol=1e-30)
BASELINES = [{"name": "torch.softmax", "args": {"x": "x"}},
             {"name": "torch.compile.softmax", "args": {"x": "x"}}]

SUITE = T.suite(
    softmax, inputs=inputs, reference=reference, outputs=["out"],
    cases=[
        make_case("r1_c1000", rows=1, cols=1000, BLOCK=128),          # one row, partial chunk
        make_case("r3_c2056_b128", rows=3, cols=2056, BLOCK=128),     # 3 chunks, 1 lane in last
        make_case("r2_c1030_b64", rows=2, cols=1030, BLOCK=64),       # 2-element accesses
        make_case("r4_c333_b32", rows=4, cols=333, BLOCK=32),         # odd width: scalar accesses
        make_case("r2_c4100_b512", rows=2, cols=4100, BLOCK=512, spread=30.0),  # 4-wide, peaky
        make_case("r3_c2056_b128_ef", rows=3, cols=2056, BLOCK=128, EF=1),
        make_case("r16384_c8192", rows=16384, cols=8192, small=False),
        make_case("r16384_c8192_ef", rows=16384, cols=8192, EF=1, small=False),
        make_case("r16384_c8192_b512", rows=16384, cols=8192, BLOCK=512, small=False),
        make_case("r16384_c8192_b1024", rows=16384, cols=8192, BLOCK=1024, small=False),
        make_case("r4096_c32768_b1024", rows=4096, cols=32768, BLOCK=1024, small=False),
        make_case("r65536_c2048_b128", rows=65536, cols=2048, BLOCK=128, small=False),
    ],
    tolerance=TOLERANCE, constraints=constraints,
    flops=lambda rows, cols: 5 * rows * cols, bytes=lambda rows, cols: 4 * rows * cols,
    baselines=BASELINES,
)

SUITE_TMA = T.suite(
    softmax_tma, inputs=inputs, reference=reference, outputs=["out"],
    cases=[
        make_tma_case("r7_c1024_cta3", rows=7, cols=1024, BLOCK=64, STAGES=2, CTAS=3),
        make_tma_case("r5_c2056_cta2", rows=5, cols=2056, BLOCK=128, STAGES=3, CTAS=2),
        make_tma_case("r16384_c8192", rows=16384, cols=8192, small=False),
        # 256 CTAs take 64 rows each; of 264, 16 take a 63rd row after the others are done
        make_tma_case("r16384_c8192_p256", rows=16384, cols=8192, CTAS=256, small=False),
        make_tma_case("r16384_c8192_s4_b256", rows=16384, cols=8192, BLOCK=256, STAGES=4,
                      CTAS=396, small=False),  # 3 CTAs per SM (64 KB of ring each)
        make_tma_case("r65536_c2048", rows=65536, cols=2048, BLOCK=128, STAGES=6, CTAS=528,
                      small=False),
        # session 10 (docs/TUNING.md "tma_copy and softmax_tma: bytes in flight"): STAGES - 1
        # rows load while one is reduced (`rows_in_flight`), and a CTA reduces one row at a
        # time, so the SM's rate is its CTAs over one row's chain: these vary the two apart.
        # The small case: 2 stages, each refilled twice, a 1-lane tail
        make_tma_case("r9_c1032_s2_cta2", rows=9, cols=1032, BLOCK=64, STAGES=2, CTAS=2),
        make_tma_case("r16384_c8192_p512_s2_b256", rows=16384, cols=8192, BLOCK=256, STAGES=2,
                      CTAS=512, small=False),  # the register softmax's 4 CTAs per SM, 62 KB
        make_tma_case("r16384_c8192_s2_b256", rows=16384, cols=8192, BLOCK=256, STAGES=2,
                      CTAS=396, small=False),  # s4_b256's grid, 1 row loading instead of 3
        make_tma_case("r16384_c8192_p256_s2", rows=16384, cols=8192, STAGES=2, CTAS=256,
                      small=False),
        make_tma_case("r16384_c8192_p128_s3_b1024", rows=16384, cols=8192, BLOCK=1024,
                      STAGES=3, CTAS=128, small=False),  # one CTA of 32 warps per SM
        make_tma_case("r65536_c2048_s3_p1024", rows=65536, cols=2048, BLOCK=128, STAGES=3,
                      CTAS=1024, small=False),  # 7.8 CTAs per SM (control: 4), 62 KB
        make_tma_case("r65536_c2048_s3_p512", rows=65536, cols=2048, BLOCK=128, STAGES=3,
                      CTAS=512, small=False),
        # session 11 (docs/TUNING.md "tma_copy: which path costs"): evict-last row copies on
        # the two fastest geometries; the small case wraps a 2-stage ring with a 1-lane tail
        make_tma_case("r9_c1032_s2_cta2_pol", rows=9, cols=1032, BLOCK=64, STAGES=2, CTAS=2,
                      POL=1),
        make_tma_case("r16384_c8192_s4_b256_pol", rows=16384, cols=8192, BLOCK=256, STAGES=4,
                      CTAS=396, small=False, POL=1),
        make_tma_case("r65536_c2048_s3_p512_pol", rows=65536, cols=2048, BLOCK=128, STAGES=3,
                      CTAS=512, small=False, POL=1),
        make_tma_case("r16384_c8192_p256_s2_pol", rows=16384, cols=8192, STAGES=2, CTAS=256,
                      small=False, POL=1),
        # a row in SPLIT bulk copies of 2 KB (hypothesis HB); small: 3 copies of 43 vectors
        make_tma_case("r9_c1032_s2_cta2_k3", rows=9, cols=1032, BLOCK=64, STAGES=2, CTAS=2,
                      SPLIT=3),
        make_tma_case("r16384_c8192_s4_b256_k8", rows=16384, cols=8192, BLOCK=256, STAGES=4,
                      CTAS=396, small=False, SPLIT=8),
        make_tma_case("r16384_c8192_s4_b256_pol_k8", rows=16384, cols=8192, BLOCK=256,
                      STAGES=4, CTAS=396, small=False, POL=1, SPLIT=8),
    ],
    tolerance=TOLERANCE, constraints=tma_constraints, flops=lambda rows, cols: 5 * rows * cols,
    bytes=lambda rows, cols: 4 * rows * cols, baselines=BASELINES,
)


def make_ce_case(name: str, rows: int, cols: int, BLOCK: int = 256, UNROLL: int = 4,
                 small: bool = True, EF: int = 0) -> T.Case:
    """A cross-entropy case; the access width follows cols (8/4/2/1 bf16); EF=1: evict-first
    loads."""
    return _case(name, small, rows=rows, cols=cols, VEC=vector_width(max(cols, 1)), BLOCK=BLOCK,
                 UNROLL=UNROLL, EF=EF)


def ce_inputs(rng, rows, cols):
    bf16 = numpy_dtype("bf16")
    x = rng.standard_normal((rows, cols), dtype=np.float32) * 3
    x += rng.uniform(-100, 100, (rows, 1)).astype(np.float32)
    return dict(x=x.astype(bf16), target=rng.integers(0, cols, rows).astype(np.int64),
                loss=np.empty(rows, np.float32), lse=np.empty(rows, np.float32), cols=cols)


def ce_reference(x, target):
    v = x.astype(np.float64)
    big = v.max(axis=1)
    lse = big + np.log(np.exp(v - big[:, None]).sum(axis=1))
    return {"lse": lse.astype(np.float32),
            "loss": (lse - v[np.arange(v.shape[0]), target]).astype(np.float32)}


SUITE_CE = T.suite(
    cross_entropy, inputs=ce_inputs, reference=ce_reference, outputs=["loss", "lse"],
    cases=[
        make_ce_case("r3_c1000", rows=3, cols=1000, BLOCK=64, UNROLL=2),
        make_ce_case("r2_c3001", rows=2, cols=3001, BLOCK=128, UNROLL=3),   # scalar accesses
        make_ce_case("r1_c70000", rows=1, cols=70000, BLOCK=256, UNROLL=4),  # 5 chunks
        make_ce_case("r2_c3000_ef", rows=2, cols=3000, BLOCK=64, UNROLL=2, EF=1),
        make_ce_case("r8192_c32768", rows=8192, cols=32768, small=False),
        make_ce_case("r4096_c128256", rows=4096, cols=128256, small=False),
        make_ce_case("r4096_c128256_ef", rows=4096, cols=128256, EF=1, small=False),
        make_ce_case("r4096_c128256_b512_u8", rows=4096, cols=128256, BLOCK=512, UNROLL=8,
                     small=False),
    ],
    # f32 results of f32 math (ex2/lg2.approx ~2 ulp, sums in a different order than numpy's):
    # the loss is a difference of values ~100, so the absolute floor is set at a few f32 ulps of
    # 100 plus the approximations; any wrong element, max or target is off by far more
    tolerance=T.tolerance(rtol=1e-5, atol=1e-4), constraints=ce_constraints,
    flops=lambda rows, cols: 4 * rows * cols, bytes=lambda rows, cols: 2 * rows * cols + 16 * rows,
    baselines=[{"name": "torch.cross_entropy", "args": {"x": "x", "target": "target"}},
               {"name": "torch.compile.cross_entropy", "args": {"x": "x", "target": "target"}}],
)
