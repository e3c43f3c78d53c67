"""Row norms with the row held in registers (bf16 in, f32 math, one pass over memory), sm_90a:

- ``rmsnorm``:      out = x * rsqrt(mean(x^2) + eps) * w
- ``layernorm``:    out = (x - mean(x)) * rsqrt(var(x) + eps) * w + b   (biased variance)
- ``add_rmsnorm``:  h = x + residual (rounded to bf16, written: the new residual);
                    out = rmsnorm(h) * w
- ``quant_fp8``:    amax = max(|x|, 1e-12); scale = amax / 448 (f32, written);
                    q = e4m3(x * (448 / amax)) with round-to-nearest and saturation

x, residual, out, h: [rows, cols] bf16 row-major; w, b: [cols] bf16; q: [rows, cols] e4m3.

Algorithm: one CTA per row. Thread t of NT threads owns the 16-byte vectors t, t + NT, t + 2NT,
... of the row (8 bf16 each; NT = min(BLOCK, cols/8 rounded up to a warp)), so each warp-wide
``ld.global.v4.b32`` reads 512 contiguous bytes and every thread has V = cols/(8 NT) independent
16-byte loads in flight before its first use. The row stays in registers: the reduction (sum,
sum of squares around the mean, max |x|) runs over registers, a ``shfl.sync.bfly`` butterfly
combines the 32 lanes, one shared-memory word per warp and one ``bar.sync`` combine the warps
(every thread sums the NW words in the same order, so all agree bit for bit), and the
normalized values are written from the same registers: each element is read from HBM once and
written once. bf16 pairs unpack to f32 with a shift / mask (bf16 is the top half of an f32) and
pack back with ``cvt.rn.bf16x2.f32``; fp8 pairs with ``cvt.rn.satfinite.e4m3x2.f32``. The last
vector of a thread is predicated when cols is not a multiple of 8 NT (a tail within the row);
the grid covers any number of rows. LayerNorm reduces (sum, M2) pairs in one reduction and
one barrier: each thread's M2 is taken around its own mean from the registers and pairs
combine with Chan's update (`chan`: no E[x^2] - mean^2 cancellation); its w and b are read
after the barrier and its registers capped (LN_MAXREG) for 4 CTAs per SM; add_rmsnorm adds with
``add.rn.bf16x2`` (the exact sum rounded once, as torch's bf16 add); quant_fp8 reduces the
maximum on packed ``abs/max.bf16x2`` (exact: amax is one of the inputs) and takes
448 / amax and scale with IEEE ``div.rn``, so it is bitwise equal to its numpy reference.

Variants (constants; docs/TUNING.md: each one's predicted effect): CTAS > 0 makes the grid
persistent (`each_row`: CTA c takes rows c, c + G, ... and loads the next row before it reduces
and stores the current one, so its loads are in flight through the barrier and the arithmetic;
w (and b) are loaded once per CTA; the reduction words alternate between two halves per row);
EF=1 loads with ``ld.global.cs`` (evict-first: each element is read once, so the L2 keeps its
dirty lines instead); MAXREG caps the registers (``.maxnreg``) for one more CTA per SM; L2=128
or 256 adds the prefetch-size hint ``.L2::128B`` / ``.L2::256B`` to the row's loads (SASS
``LDG.E.LTC128B.128`` / ``LTC256B``: the L2 fetches whole 128/256-byte blocks from HBM); L1=1
loads the row with ``.L1::no_allocate`` and w, b with ``.L1::evict_last``, so the SM's L1
keeps the parameters every row reads. rmsnorm only (session 6, what torch.compile's kernel
does): POL=1 gives the row Triton's evict-first spelling (``ld.global.L1::evict_first.
L2::cache_hint`` with a ``createpolicy.fractional.L2::evict_first.b64`` policy) and w its
evict-last one, POL=2 evict-last on both (`Policies`); WLATE=1 reads w after the reduction
(no registers held through the barrier: 16 warps per row fit 32 registers, 4 CTAs of 512 per
SM); ST=1 stores with ``st.global.cs``.

Shapes: cols must be a multiple of 8 (rows are read as 16-byte vectors) and at most
8 * BLOCK * 16 (16 vectors per thread); rows * cols < 2^32 (u32 element offsets).

Techniques: vectorized 16-byte coalesced access, one CTA per row, row in registers (single pass),
warp-shuffle butterfly + shared-memory cross-warp reduction, a fused (sum, M2) reduction with
Chan's pairwise combine (one barrier), packed bf16x2 arithmetic, fp8 conversion with
saturation, persistent rows with next-row prefetch, register caps, cache-streaming, L1
eviction-priority and L2 prefetch-size hints.

Tags: vectorized, warp-shuffle, block-reduction, row-in-registers, single-pass, bf16, fp8,
persistent
"""

import numpy as np

import tirxh.lang as T
from tirxh.core.types import numpy_dtype

TAGS = ("vectorized", "warp-shuffle", "block-reduction", "row-in-registers", "single-pass",
        "bf16", "fp8", "persistent")

BF16 = numpy_dtype("bf16")
BENCH = dict(small=False, tags=("h200",))  # large cases: timed on the H200, never simulated
E4M3 = numpy_dtype("e4m3")
FULL = 0xFFFFFFFF
MAX_VECS = 16  # 16-byte vectors per thread (64 registers of row data)
E4M3_MAX = 448.0
AMAX_MIN = 1e-12  # an all-zero row gets a tiny scale instead of 0/0


# --- the row layout (trace-time arithmetic) ----------------------------------------------------

def threads(cols, BLOCK):
    """Threads per CTA: BLOCK, or fewer when the row has fewer vectors (whole warps)."""
    return min(BLOCK, -(-(cols // 8) // 32) * 32)


class Row:
    """Which 16-byte vectors of its row a thread owns: vector j is at column 8 (j NT + tid).

    `load` emits one ``mad.wide.u32`` per pointer and one ``ld.global.v4.b32`` per vector (the
    last one predicated with ``@p`` when the row's vectors do not fill every thread); `store`
    the matching ``st.global.v4.b32`` (or ``.v2.b32`` for 8-byte fp8 vectors).
    """

    def __init__(self, cols, BLOCK):
        self.cols, self.nt = cols, threads(cols, BLOCK)
        self.nvec = cols // 8
        self.v = -(-self.nvec // self.nt)
        self.nw = self.nt // 32
        self.tid = T.tid.x
        self.col = self.tid * 8  # first column of the thread's vector 0
        left = self.nvec - (self.v - 1) * self.nt  # vectors in the last round
        self.tail = (self.tid < left) if left < self.nt else None

    def pred(self, j):
        return self.tail if j == self.v - 1 else None

    def load(self, ptr, base=None, row_ok=None, hint="", policy=None):
        """The thread's vectors of a bf16 row at element offset `base`: V lists of 4 b32 words
        (zeros where the row's tail predicates a vector off). `row_ok` predicates every vector
        (a prefetch past the last row); `hint`: ld's cache qualifiers (`row_hint`,
        `param_hint`), ``ld.global<hint>.v4.b32``; `policy`: the b64 cache-policy operand
        that a hint with ``.L2::cache_hint`` takes (`Policies`)."""
        ld = T.ptx["ld.global" + hint + ".v4.b32"]
        extra = () if policy is None else (policy,)
        addr = ptr.at(self.col if base is None else base + self.col)
        out = []
        for j in range(self.v):
            tail = self.pred(j)
            p = tail if row_ok is None else (row_ok if tail is None else row_ok & tail)
            if p is None:
                words = ld(addr + j * self.nt * 16, *extra)
            else:  # zeros where the tail is off; a row predicated off is never used
                words = [T.reg(T.b32, init=0) if tail is not None else T.reg(T.b32)
                         for _ in range(4)]
                ld(words, addr + j * self.nt * 16, *extra, pred=p)
            out.append(list(words))
        return out

    def store(self, ptr, base, vectors, vec_bytes=16, hint=""):
        """``st.global<hint>.v4.b32`` (``.v2.b32`` for 8-byte vectors) of each vector; `hint`:
        the cache operator of the output (`store_hint`)."""
        addr = ptr.at(base + self.col)
        op = T.ptx["st.global" + hint + (".v4.b32" if vec_bytes == 16 else ".v2.b32")]
        for j, words in enumerate(vectors):
            op(addr + j * self.nt * vec_bytes, words, pred=self.pred(j))


# L1 policies (ld's .L1::no_allocate / .L1::evict_last; PTX ISA, ld): L1 -> (the streamed
# row's loads, the parameters' (w, b) loads). 1: the row never allocates in L1 (SASS
# LDG.E.NA.128) and w, b are kept (LDG.E.EL.128), so every row's parameter loads hit L1. Not
# offered: .L1::evict_first on the row, which ptxas compiles to the same LDG.E.EF.128 as
# EF=1's .cs (measured 2% slower on rmsnorm).
L1_HINTS = {0: ("", ""), 1: (".L1::no_allocate", ".L1::evict_last")}


def row_hint(EF=0, L2=0, L1=0):
    """ld qualifiers of the streamed rows: ``.cs`` (EF=1, evict-first in L1 and L2), the L1
    priority (L1_HINTS) and the L2 prefetch size ``.L2::128B`` / ``.L2::256B`` (L2=128/256:
    SASS ``LDG.E.LTC128B.128`` / ``LTC256B``, the L2 fetching whole 128/256-byte blocks)."""
    return (".cs" if EF else "") + L1_HINTS[L1][0] + (f".L2::{L2}B" if L2 else "")


def param_hint(L1=0):
    """ld qualifiers of w and b (read by every row): the L1 priority's second half."""
    return L1_HINTS[L1][1]


class Policies:
    """POL=1: torch.compile's (Triton's) eviction policies, as its generated PTX spells them:
    the streamed row ``ld.global.L1::evict_first.L2::cache_hint.v4.b32`` with a
    ``createpolicy.fractional.L2::evict_first.b64`` policy (inductor's
    ``eviction_policy='evict_first'`` on a load read once), the parameters every row re-reads
    ``.L1::evict_last.L2::cache_hint`` with an ``L2::evict_last`` policy (its broadcast loads).
    POL=2: the row evict-last as well, as the first pass of inductor's looped reduction reads x
    (it reads x again in a second loop, from L1 or L2, evict-first). Unlike EF=1's ``.cs`` (SASS
    ``LDG.E.EF.128``, measured 2% slower), the L2 priority comes from the policy word, not the
    cache operator. POL=0: no policies, no hints (`row_hint`)."""

    FIRST, LAST = ".L1::evict_first.L2::cache_hint", ".L1::evict_last.L2::cache_hint"

    def __init__(self, POL):
        self.pol = POL
        self.row = self.param = None
        if POL:  # one createpolicy per policy and thread, once per CTA
            self.param = T.ptx.createpolicy.fractional.L2__evict_last.b64()
            self.row = (T.ptx.createpolicy.fractional.L2__evict_first.b64() if POL == 1
                        else self.param)

    def row_hint(self, EF=0, L2=0, L1=0):
        if self.pol:
            return self.FIRST if self.pol == 1 else self.LAST
        return row_hint(EF, L2, L1)

    def param_hint(self, L1=0):
        return self.LAST if self.pol else param_hint(L1)


def store_hint(ST=0):
    """st's cache operator for the output: ST=1 ``st.global.cs`` (streaming: the line is
    written once and never read by this kernel, so the L2 may evict it first)."""
    return ".cs" if ST else ""


def unpack(word):
    """bf16x2 -> (lo, hi) f32: ``shl.b32`` / ``and.b32`` (bf16 is the top half of an f32) and
    ``mov.f32`` to retype."""
    lo = T.ptx.mov.f32(T.ptx.shl.b32(word, 16))
    hi = T.ptx.mov.f32(T.ptx.and_.b32(word, 0xFFFF0000))
    return lo, hi


def unpack_row(vectors):
    """Every vector's 8 f32 values, in memory order."""
    return [[v for w in words for v in unpack(w)] for words in vectors]


def pack_row(values):
    """f32 values (8 per vector) -> bf16x2 words: ``cvt.rn.bf16x2.f32 d, hi, lo``."""
    return [[T.ptx.cvt.rn.bf16x2.f32(vals[2 * i + 1], vals[2 * i]) for i in range(4)]
            for vals in values]


def block_reduce(value, op, slot, nw):
    """Reduce an f32 (or b32) over the CTA; every thread gets the result.

    ``shfl.sync.bfly.b32`` + `op` over offsets 16..1, then (more than one warp) lane 0 stores its
    warp's value to ``slot(warp)`` (``st.shared.b32``), ``bar.sync 0``, and every thread combines
    the NW words in order (``ld.shared.b32``). `slot(i)` is the address of warp i's word."""
    is_f32 = value.dtype.name == "f32"
    retype = T.ptx.mov.f32 if is_f32 else T.ptx.mov.b32
    for off in (16, 8, 4, 2, 1):
        value = op(value, retype(T.ptx.shfl.sync.bfly.b32(value, off, 0x1F, FULL)))
    if nw == 1:
        return value
    with T.if_(T.laneid() == 0):
        T.ptx.st.shared.b32(slot(T.tid.x >> 5), value)
    T.ptx.bar.sync(0)
    load = T.ptx.ld.shared.f32 if is_f32 else T.ptx.ld.shared.b32
    total = load(slot(0))
    for i in range(1, nw):
        total = op(total, load(slot(i)))
    return total


def slots(red, parity):
    """Warp i's word of the reduction buffer `red` [2, NW] in half `parity` (an int, or a
    register alternating per row: a fast warp's next row cannot overwrite a word another warp
    has yet to read, since it passes that row's barrier only after every warp has read)."""
    return lambda i: red.at(parity, i)


def each_row(row, rows, CTAS, ptrs, body, hint, policy=None):
    """Run ``body(r, base, vectors, parity)`` for the rows of this CTA, where `vectors` holds the
    thread's packed vectors of each pointer in `ptrs` for row r (element offset `base`).

    CTAS = 0: one CTA per row (the grid is the rows), parity 0. CTAS > 0: a persistent grid of
    G = min(rows, CTAS) CTAs, CTA c taking rows c, c + G, ... in a device loop that loads row
    r + G (``@p ld.global.v4.b32``, p = r + G < rows) before it reduces and stores row r: the next
    row's loads are in flight during this row's barrier and arithmetic, and the loop carries
    them over with ``mov`` (one per word). The parity alternates per row (`slots`)."""
    cols = row.cols
    if not CTAS:
        base = T.ctaid.x * cols
        body(T.ctaid.x, base, [row.load(p, base, hint=hint, policy=policy) for p in ptrs], 0)
        return
    step = T.nctaid.x
    # the grid holds <= rows CTAs
    cur = [row.load(p, T.ctaid.x * cols, hint=hint, policy=policy) for p in ptrs]
    it = T.reg(T.u32, init=0)
    with T.range(T.ctaid.x, rows, step) as r:
        nr = r + step
        nxt = [row.load(p, nr * cols, row_ok=nr < rows, hint=hint, policy=policy)
               for p in ptrs]
        body(r, r * cols, cur, it & 1)
        for dst, src in zip(cur, nxt):
            for dv, sv in zip(dst, src):
                for d, v in zip(dv, sv):
                    d.set(v)
        T.ptx.add.u32(it, it, 1)


def add(a, b):
    return a + b


def sum_of(values, f=None):
    """f32 sum over the thread's values (optionally of f(v)): one add or fma each."""
    acc = None
    for vals in values:
        for v in vals:
            if f == "square":
                acc = v * v if acc is None else T.ptx.fma.rn.f32(v, v, acc)
            else:
                acc = v if acc is None else acc + v
    return acc


# --- kernels -----------------------------------------------------------------------------------

def _block(cols, BLOCK):
    return threads(cols, BLOCK)


def _grid(rows, CTAS):
    return min(rows, CTAS) if CTAS else rows


def _maxnreg(MAXREG):
    return MAXREG or None  # 0: no cap (ptxas chooses)


def _red(row, name):
    """The cross-warp reduction words: [2 halves (alternate rows), NW]."""
    return T.shared(T.f32, (2, max(row.nw, 1)), name=name)


def _rsqrt_mean(total, cols, eps):
    """rsqrt(total / cols + eps): ``fma.rn.f32``, ``rsqrt.approx.f32``."""
    return T.ptx.rsqrt.approx.f32(T.ptx.fma.rn.f32(total, 1.0 / cols, eps))


KERNEL = dict(grid=_grid, block=_block, maxnreg=_maxnreg)


@T.kernel(**KERNEL)
def rmsnorm(x: T.gptr[T.bf16], w: T.gptr[T.bf16], out: T.gptr[T.bf16], rows: T.u32,
            eps: T.f32, cols: T.const, BLOCK: T.const = 256, CTAS: T.const = 0,
            EF: T.const = 0, MAXREG: T.const = 0, L2: T.const = 0, L1: T.const = 0,
            POL: T.const = 0, ST: T.const = 0, WLATE: T.const = 0):
    row = Row(cols, BLOCK)
    red = _red(row, "red")
    pol = Policies(POL)

    def load_w():
        return row.load(w, hint=pol.param_hint(L1), policy=pol.param)
    # w once per CTA (persistent: for all its rows); WLATE=1: after each row's reduction, as
    # torch.compile's kernel does (an L1/L2 hit that holds no registers through the barrier)
    wv = None if WLATE else load_w()

    def body(r, base, vecs, parity):
        xs = unpack_row(vecs[0])
        total = block_reduce(sum_of(xs, "square"), add, slots(red, parity), row.nw)
        rr = _rsqrt_mean(total, cols, eps)
        row.store(out, base, pack_row([[a * rr * b for a, b in zip(xv, wv_)]
                                       for xv, wv_ in zip(xs, unpack_row(wv or load_w()))]),
                  hint=store_hint(ST))
    each_row(row, rows, CTAS, [x], body, pol.row_hint(EF, L2, L1), pol.row)


def _count(row):
    """Elements of the row this thread holds: 8 V (an int) without a row tail, else a register
    (``selp.f32``: 8 V or 8 (V - 1) where the last vector is predicated off)."""
    if row.tail is None:
        return 8 * row.v
    return T.ptx.selp.f32(8.0 * row.v, 8.0 * (row.v - 1), row.tail)


def _warp_counts(row):
    """Elements each warp holds (trace-time ints): the cross-warp combine's weights."""
    left = row.nvec - (row.v - 1) * row.nt  # threads below `left` hold V vectors, others V - 1
    return [sum(8 * (row.v - 1 + (t < left)) for t in range(32 * w, 32 * w + 32))
            for w in range(row.nw)]


def chan(a, b):
    """Combine two (sum, M2, n) partials (M2: sum of squares around the partial's own mean):
    sum = sa + sb, M2 = M2a + M2b + (sa/na - sb/nb)^2 na nb / (na + nb) (Chan, Golub and
    LeVeque's pairwise update: no E[x^2] - mean^2 cancellation). Symmetric to the bit in a and
    b (IEEE add and mul commute, the difference only changes sign), so both lanes of a
    butterfly get the same result. Counts are ints when known at trace time (then 1 / n and
    na nb / (na + nb) are immediates: ``add``, ``sub``, ``mul``, ``fma``), else f32 registers
    (a row tail: ``max``, ``div.rn``); an empty partial (n = 0, sum 0) adds nothing."""
    (sa, ma, na), (sb, mb, nb) = a, b
    if isinstance(na, int) and isinstance(nb, int):
        if not na or not nb:
            return b if not na else a
        if na == nb:  # (d / na)^2 * na / 2 = d^2 / (2 na)
            d, c = sa - sb, 1.0 / (2 * na)
        else:
            d, c = sa * (1.0 / na) - sb * (1.0 / nb), na * nb / (na + nb)
        return sa + sb, T.ptx.fma.rn.f32(d, d * c, ma + mb), na + nb
    na, nb = (n if not isinstance(n, int) else T.ptx.mov.f32(float(n)) for n in (na, nb))
    d = sa / T.ptx.max.f32(na, 1.0) - sb / T.ptx.max.f32(nb, 1.0)
    n = na + nb
    c = (na * nb) / T.ptx.max.f32(n, 1.0)
    return sa + sb, T.ptx.fma.rn.f32(d, d * c, ma + mb), n


def block_mean_m2(part, row, s_slot, m_slot):
    """(sum, M2) of the whole row from each thread's (sum, M2, n) partial, in one barrier:
    ``shfl.sync.bfly.b32`` of sum and M2 (and n when it is a register) over offsets 16..1 with
    `chan`, then (several warps) lane 0 stores its warp's pair (``st.shared.b32`` x2),
    ``bar.sync 0``, and every thread combines the NW pairs in warp order with the warp counts
    as immediates (``ld.shared.f32`` x2 per warp), so all threads agree bit for bit."""
    for off in (16, 8, 4, 2, 1):  # a trace-time count is every lane's: nothing to exchange
        part = chan(part, [v if isinstance(v, int) else
                           T.ptx.mov.f32(T.ptx.shfl.sync.bfly.b32(v, off, 0x1F, FULL))
                           for v in part])
    s, m2 = part[0], part[1]
    if row.nw == 1:
        return s, m2
    with T.if_(T.laneid() == 0):
        T.ptx.st.shared.b32(s_slot(T.tid.x >> 5), s)
        T.ptx.st.shared.b32(m_slot(T.tid.x >> 5), m2)
    T.ptx.bar.sync(0)
    acc = None
    for i, n in enumerate(_warp_counts(row)):
        p = (T.ptx.ld.shared.f32(s_slot(i)), T.ptx.ld.shared.f32(m_slot(i)), n)
        acc = p if acc is None else chan(acc, p)
    return acc[0], acc[1]


# LayerNorm's register cap: uncapped, ptxas schedules the 8 w/b loads of the store phase
# beside the row's 32 f32 values and takes 96 registers (2 CTAs of 256 per SM); capped at 64 it
# fits without spilling (tests/zoo/test_norms.py) and 4 CTAs per SM keep twice the row loads in
# flight (docs/TUNING.md, "Memory-bound kernels, s3 round").
LN_MAXREG = 64


@T.kernel(**KERNEL)
def layernorm(x: T.gptr[T.bf16], w: T.gptr[T.bf16], b: T.gptr[T.bf16], out: T.gptr[T.bf16],
              rows: T.u32, eps: T.f32, cols: T.const, BLOCK: T.const = 256, CTAS: T.const = 0,
              EF: T.const = 0, MAXREG: T.const = LN_MAXREG, L2: T.const = 0,
              L1: T.const = 0):
    row = Row(cols, BLOCK)
    red = _red(row, "red")
    red2 = _red(row, "red2")  # M2 beside the sum: one barrier for both

    def body(r, base, vecs, parity):
        xs = unpack_row(vecs[0])
        n = _count(row)
        s = sum_of(xs)  # a predicated-off vector holds zeros
        mean_t = s * (1.0 / n) if isinstance(n, int) else s / T.ptx.max.f32(n, 1.0)
        ds = [[v - mean_t for v in vals] for vals in xs]
        if row.tail is None:
            m2 = sum_of(ds, "square")
        else:  # a predicated-off vector's (0 - mean)^2 must not enter M2
            m2 = T.ptx.selp.f32(sum_of(ds[-1:], "square"), 0.0, row.tail)
            if len(ds) > 1:
                m2 = m2 + sum_of(ds[:-1], "square")
        total, m2 = block_mean_m2((s, m2, n), row, slots(red, parity), slots(red2, parity))
        mean = total * (1.0 / cols)
        rr = _rsqrt_mean(m2, cols, eps)
        # w and b are read here, after the barrier (L1/L2 hits: every row reads the same 2 x
        # cols bf16), so they hold no registers while the row waits for the reduction
        wv, bv = row.load(w, hint=param_hint(L1)), row.load(b, hint=param_hint(L1))
        row.store(out, base, pack_row([[T.ptx.fma.rn.f32((v - mean) * rr, wv_, bv_)
                                        for v, wv_, bv_ in zip(xv, wvs, bvs)]
                                       for xv, wvs, bvs in
                                       zip(xs, unpack_row(wv), unpack_row(bv))]))
    each_row(row, rows, CTAS, [x], body, row_hint(EF, L2, L1))


@T.kernel(**KERNEL)
def add_rmsnorm(x: T.gptr[T.bf16], residual: T.gptr[T.bf16], w: T.gptr[T.bf16],
                h: T.gptr[T.bf16], out: T.gptr[T.bf16], rows: T.u32, eps: T.f32,
                cols: T.const, BLOCK: T.const = 256, CTAS: T.const = 0, EF: T.const = 0,
                MAXREG: T.const = 0, L2: T.const = 0, L1: T.const = 0):
    row = Row(cols, BLOCK)
    red = _red(row, "red")
    wv = row.load(w, hint=param_hint(L1))

    def body(r, base, vecs, parity):
        xv, rv = vecs
        hv = [[T.ptx.add.rn.bf16x2(a, c) for a, c in zip(xw, rw)] for xw, rw in zip(xv, rv)]
        row.store(h, base, hv)
        hs = unpack_row(hv)
        total = block_reduce(sum_of(hs, "square"), add, slots(red, parity), row.nw)
        rr = _rsqrt_mean(total, cols, eps)
        row.store(out, base, pack_row([[a * rr * c for a, c in zip(hvals, wvals)]
                                       for hvals, wvals in zip(hs, unpack_row(wv))]))
    each_row(row, rows, CTAS, [x, residual], body, row_hint(EF, L2, L1))


def _bmax(a, b):
    return T.ptx.max.bf16x2(a, b)


@T.kernel(**KERNEL)
def quant_fp8(x: T.gptr[T.bf16], q: T.gptr[T.e4m3], scale: T.gptr[T.f32], rows: T.u32,
              cols: T.const, BLOCK: T.const = 256, CTAS: T.const = 0, EF: T.const = 0,
              MAXREG: T.const = 0, L2: T.const = 0, L1: T.const = 0):
    row = Row(cols, BLOCK)
    red = T.shared(T.b32, (2, max(row.nw, 1)), name="red")

    def body(r, base, vecs, parity):
        xv = vecs[0]
        m = None
        for words in xv:  # packed |x| maximum: exact, two elements per instruction
            for word in words:
                a = T.ptx.abs.bf16x2(word)
                m = a if m is None else T.ptx.max.bf16x2(m, a)
        m = block_reduce(T.ptx.mov.b32(m), _bmax, slots(red, parity), row.nw)
        lo, hi = unpack(m)
        amax = T.ptx.max.f32(T.ptx.max.f32(lo, hi), AMAX_MIN)
        inv = T.ptx.div.rn.f32(T.ptx.mov.f32(E4M3_MAX), amax)
        with T.if_(row.tid == 0):
            T.ptx.st.global_.f32(scale.at(r), T.ptx.div.rn.f32(amax, E4M3_MAX))
        packed = []
        for vals in unpack_row(xv):
            sc = [T.ptx.mul.rn.f32(v, inv) for v in vals]
            pairs = [T.ptx.cvt.rn.satfinite.e4m3x2.f32(sc[2 * i + 1], sc[2 * i])
                     for i in range(4)]
            packed.append([T.ptx.mov.b32([pairs[0], pairs[1]]),
                           T.ptx.mov.b32([pairs[2], pairs[3]])])
        row.store(q, base, packed, vec_bytes=8)
    each_row(row, rows, CTAS, [x], body, row_hint(EF, L2, L1))


# --- cases, references, rules ------------------------------------------------------------------

EPS_RMS, EPS_LN = 1e-6, 1e-5


def constraints(rows, cols, BLOCK, CTAS, EF, MAXREG, L2=0, L1=0, POL=0, ST=0, WLATE=0):
    """The shapes these kernels accept (checked when the suite is declared)."""
    out = []
    if POL not in (0, 1, 2) or {ST, WLATE} - {0, 1} or (POL and (EF or L1 or L2)):
        out.append(f"POL={POL} must be 0, 1 or 2, ST={ST} and WLATE={WLATE} 0 or 1, and POL > 0 "
                   "needs EF=0, L1=0 and L2=0 (its loads carry their own L1 priority and L2 "
                   "policy)")
    if L2 not in (0, 128, 256):
        out.append(f"L2={L2} must be 0 (no hint), 128 or 256 (ld's .L2::128B / .L2::256B)")
    if L1 not in L1_HINTS or (L1 and EF):
        out.append(f"L1={L1} must be in {sorted(L1_HINTS)} and 0 with EF=1 (ld takes a .cs "
                   "cache operator or an .L1 eviction priority, not both)")
    if not 0 <= CTAS <= 4096 or EF not in (0, 1) or (MAXREG and not 32 <= MAXREG <= 255):
        out.append(f"CTAS={CTAS} must be in 0..4096 (0: one CTA per row), EF={EF} 0 or 1 and "
                   f"MAXREG={MAXREG} 0 (no cap) or in 32..255 (.maxnreg)")
    if cols % 8 or cols <= 0:
        out.append(f"cols={cols} must be a positive multiple of 8 (rows are read as 16-byte "
                   "vectors of 8 bf16)")
    if BLOCK % 32 or not 32 <= BLOCK <= 1024:
        out.append(f"BLOCK={BLOCK} must be a multiple of 32 in 32..1024")
    elif cols > 8 * BLOCK * MAX_VECS:
        out.append(f"cols={cols} is more than 8 * BLOCK * {MAX_VECS} = {8 * BLOCK * MAX_VECS} "
                   f"(the row must fit in {MAX_VECS} vectors per thread: raise BLOCK)")
    if rows < 1 or rows * cols >= 1 << 32:
        out.append(f"rows={rows}: need 1 <= rows and rows * cols < 2^32 (u32 element offsets)")
    return out


def _normal(rng, *shape):
    return rng.standard_normal(shape, dtype=np.float32).astype(BF16)


def _f64(a):
    return np.asarray(a).astype(np.float64)


# Tolerance of every bf16 output computed in f32: the f32 result is within a few f32 ulps of the
# exact value (rsqrt.approx: 2^-22.9 relative), so rounding it to bf16 lands on the reference's
# bf16 neighbour at worst: one bf16 ulp, at most 2^-7 of the reference's magnitude. LayerNorm's
# final fma adds the bias, which can cancel x*r*w: the f32 error of the larger term (~1e-6 for
# |terms| ~ 10) then stays absolute, hence its atol.
ONE_BF16_ULP = T.tolerance(rtol=2 ** -7, atol=0)
EXACT = T.tolerance(rtol=0, atol=0)


def _rms_inputs(rng, rows, cols):
    return dict(x=_normal(rng, rows, cols), w=_normal(rng, cols),
                out=np.empty((rows, cols), BF16), rows=rows, eps=EPS_RMS)


def _rms(x, w, eps):
    x = _f64(x)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * _f64(w)


def _norm_cases(variants):
    """Small cases (numsim in CI: a single row, a tail inside the row, several warps, persistent
    CTAs taking 3 or 2 rows with the row tail and the alternating reduction words) and the large
    H200 cases (16384 x 8192 bf16, 256 MiB per tensor, four times the L2): BLOCK variants trade
    registers per thread against threads per row, MAXREG caps registers for one more CTA per SM,
    CTAS makes the grid persistent (as many CTAs as are resident: 132 SMs times what the
    registers allow, rounded down so that every CTA takes the same number of rows; checked in
    tests/zoo/test_norms.py), EF loads with evict-first, L2 with the L2 prefetch-size hint, L1
    with L1 eviction priorities.
    `variants`: name suffix -> constants."""
    big = dict(rows=16384, cols=8192, **BENCH)
    return [T.case("r1_c520", rows=1, cols=520),
            T.case("r5_c1000_b64", rows=5, cols=1000, BLOCK=64),
            T.case("r3_c4096", rows=3, cols=4096),
            T.case("r7_c1000_b64_p3_ef", rows=7, cols=1000, BLOCK=64, CTAS=3, EF=1),
            T.case("r5_c4096_p2", rows=5, cols=4096, CTAS=2),
            T.case("r5_c1000_b64_l2p256", rows=5, cols=1000, BLOCK=64, L2=256),
            T.case("r5_c4096_p2_l1na", rows=5, cols=4096, CTAS=2, L1=1),
            T.case("r16384_c8192", **big)] + [
            T.case(f"r16384_c8192_{name}", **big, **params) for name, params in variants.items()]


# the variants each kernel is timed in (docs/TUNING.md: what each is predicted to do)
P512 = dict(BLOCK=512, CTAS=256, MAXREG=64)  # 2 CTAs of 512 per SM: 64 rows each
P1024 = dict(BLOCK=1024, CTAS=128)  # 1 CTA of 1024 per SM: 128 rows each
# the row's loads with the L2 prefetch-size hint (SASS LDG.E.LTC128B / LTC256B.128)
L2P128, L2P256 = dict(L2=128), dict(L2=256)
L1NA = dict(L1=1)  # the row not allocated in L1, w (and b) evict_last (L1_HINTS)
# session 6 (docs/TUNING.md, "Session 6: what inductor's kernels do differently"): what
# torch.compile's kernel does at 16384 x 8192: 16 warps per row (2 vectors per thread), w read
# after the reduction, ~32 registers (4 CTAs of 512 per SM: 2048 threads), Triton's eviction
# policies (Policies); and streaming stores (ST=1), which it does not use
TRI = dict(BLOCK=512, MAXREG=32, WLATE=1)  # its geometry and occupancy
S6_VARIANTS = dict(tri_pol=dict(TRI, POL=1), tri=TRI, tri_pol2=dict(TRI, POL=2),
                   b512_r40=dict(BLOCK=512, MAXREG=40), pol=dict(POL=1), stcs=dict(ST=1),
                   tri_pol_stcs=dict(TRI, POL=1, ST=1))
# their small cases (rmsnorm only: the other norms take no POL / ST / WLATE): a row tail with
# all three, and a persistent grid whose next-row loads take the policy under a predicate
S6_SMALL = [T.case("r5_c1000_b64_pol_st_late", rows=5, cols=1000, BLOCK=64, POL=1, ST=1,
                   WLATE=1),
            T.case("r7_c1000_b64_p3_pol_late", rows=7, cols=1000, BLOCK=64, CTAS=3, POL=1,
                   WLATE=1),
            T.case("r5_c1000_b64_pol2", rows=5, cols=1000, BLOCK=64, POL=2)]
# session 13 (branch rmsnorm10; docs/PERFORMANCE.md "Session 13, branch rmsnorm10"): `_tri_pol2`
# already reads its rows as reg_copy `_pol` does (``ld.global.L1::evict_last.L2::cache_hint.
# v4.b32`` with a ``createpolicy.fractional.L2::evict_last.b64`` policy) and stores them as it
# does (plain ``st.global.v4.b32``), so the copy's 1.9% from its policy is already in; what still
# differs is the loads in flight: 4 CTAs x one 16 KB row = 64 KB per SM against the copy's 16
# CTAs x 2 KB = 32 KB, and reg_copy at 64-128 KB per SM ran 3.3-3.8% slower than at 32 KB
# (`_b256_u2`, `_b128_u4`, session 6). BLOCK 1024 at 32 registers is the copy's per-SM shape: one
# 16-byte vector per thread, 2 CTAs (2048 threads) and 32 KB of row loads per SM. `_tri1k_pol2`:
# that with `_tri_pol2`'s policy and late w; `_b1024_r32_pol2`: w read with the row (WLATE=0,
# 31 registers: no wait on w after the barrier, which 2 CTAs per SM hide less well than 4);
# `_tri1k`: no policy, the twin that says whether the policy's gain survives the geometry
TRI1K = dict(BLOCK=1024, MAXREG=32, WLATE=1)
S13_VARIANTS = dict(tri1k_pol2=dict(TRI1K, POL=2), b1024_r32_pol2=dict(TRI1K, WLATE=0, POL=2),
                    tri1k=TRI1K)
# their small cases: 1023 vectors on 1024 threads (32 warps, one vector each, the last thread
# predicated off) over 3 rows, and 125 vectors on 128 threads (the tail, w read early)
S13_SMALL = [T.case("r3_c8184_b1024_pol2_late", rows=3, cols=8184, **dict(TRI1K, POL=2)),
             T.case("r5_c1000_b1024_r32_pol2", rows=5, cols=1000, **dict(TRI1K, WLATE=0,
                                                                          POL=2))]


def _torch(op, **args):
    """The eager and torch.compile baselines of `op` (kcoral/baselines/torch_zoo.py)."""
    return [{"name": f"torch.{op}", "args": args}, {"name": f"torch.compile.{op}", "args": args}]


RMSNORM = T.suite(
    rmsnorm, inputs=_rms_inputs,
    reference=lambda x, w, eps: {"out": _rms(x, w, eps).astype(BF16)},
    outputs=["out"], cases=_norm_cases(dict(
        b512=dict(BLOCK=512), b128=dict(BLOCK=128), r64=dict(MAXREG=64), ef=dict(EF=1),
        p256_b512=P512, p256_b512_ef=dict(P512, EF=1), p128_b1024=P1024, l2p128=L2P128,
        l2p256=L2P256, l1na=L1NA, **S6_VARIANTS, **S13_VARIANTS)) + S6_SMALL + S13_SMALL,
    tolerance=ONE_BF16_ULP,
    constraints=constraints, flops=lambda rows, cols: 4 * rows * cols, bytes=lambda rows, cols: 4 * rows * cols + 2 * cols,
    baselines=_torch("rms_norm", x="x", w="w", eps=EPS_RMS))


def _ln_inputs(rng, rows, cols):
    return dict(x=_normal(rng, rows, cols), w=_normal(rng, cols), b=_normal(rng, cols),
                out=np.empty((rows, cols), BF16), rows=rows, eps=EPS_LN)


def _ln(x, w, b, eps):
    x = _f64(x)
    d = x - x.mean(axis=-1, keepdims=True)
    return {"out": (d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + eps) * _f64(w)
                    + _f64(b)).astype(BF16)}


LAYERNORM = T.suite(
    layernorm, inputs=_ln_inputs, reference=_ln, outputs=["out"], cases=_norm_cases(dict(
        b512=dict(BLOCK=512), ef=dict(EF=1), b512_ef=dict(BLOCK=512, EF=1), p128_b1024=P1024,
        p128_b1024_ef=dict(P1024, EF=1), r0=dict(MAXREG=0), r80=dict(MAXREG=80),
        l2p256=L2P256, l1na=L1NA)),
    tolerance=T.tolerance(rtol=2 ** -7, atol=1e-5), constraints=constraints,
    flops=lambda rows, cols: 7 * rows * cols, bytes=lambda rows, cols: 4 * rows * cols + 4 * cols,
    baselines=_torch("layer_norm", x="x", w="w", b="b", eps=EPS_LN))


def _add_inputs(rng, rows, cols):
    return dict(x=_normal(rng, rows, cols), residual=_normal(rng, rows, cols),
                w=_normal(rng, cols), h=np.empty((rows, cols), BF16),
                out=np.empty((rows, cols), BF16), rows=rows, eps=EPS_RMS)


def _add_rms(x, residual, w, eps):
    h = (_f64(x) + _f64(residual)).astype(BF16)  # the exact sum rounded once, as add.rn.bf16x2
    return {"h": h, "out": _rms(h, w, eps).astype(BF16)}


ADD_RMSNORM = T.suite(
    add_rmsnorm, inputs=_add_inputs, reference=_add_rms, outputs=["h", "out"],
    cases=_norm_cases(dict(
        b512=dict(BLOCK=512), r64=dict(MAXREG=64), ef=dict(EF=1), p256_b512=P512,
        p256_b512_ef=dict(P512, EF=1), p128_b1024=P1024, l2p256=L2P256, l1na=L1NA)),
    tolerance={"h": EXACT, "out": ONE_BF16_ULP}, constraints=constraints,
    flops=lambda rows, cols: 5 * rows * cols, bytes=lambda rows, cols: 8 * rows * cols + 2 * cols,
    baselines=_torch("add_rms_norm", x="x", residual="residual", w="w", eps=EPS_RMS))


def _quant_inputs(rng, rows, cols):
    x = _normal(rng, rows, cols)
    x[0, :] = 0  # an all-zero row: the scale floor, not 0/0
    return dict(x=x, q=np.empty((rows, cols), E4M3), scale=np.empty(rows, np.float32), rows=rows)


def _quant(x):
    """The kernel's f32 arithmetic, step by step (every step is IEEE-rounded, so bitwise)."""
    xf = np.asarray(x).astype(np.float32)
    amax = np.maximum(np.abs(xf).max(axis=-1), np.float32(AMAX_MIN)).astype(np.float32)
    inv = np.float32(E4M3_MAX) / amax
    return {"scale": amax / np.float32(E4M3_MAX), "q": (xf * inv[:, None]).astype(E4M3)}


QUANT_FP8 = T.suite(
    quant_fp8, inputs=_quant_inputs, reference=_quant, outputs=["q", "scale"],
    cases=_norm_cases(dict(
        b512=dict(BLOCK=512), ef=dict(EF=1), p256_b512=dict(BLOCK=512, CTAS=256),
        p256_b512_ef=dict(BLOCK=512, CTAS=256, EF=1), p128_b1024=P1024, l2p256=L2P256)),
    tolerance=EXACT, constraints=constraints,
    flops=lambda rows, cols: 3 * rows * cols, bytes=lambda rows, cols: 3 * rows * cols + 4 * rows,
    baselines=_torch("fp8_quant", x="x", amax_min=AMAX_MIN))
