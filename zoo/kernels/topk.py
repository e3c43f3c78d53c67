"""Top-k per row: the k largest values of each row and their column indices, largest first.

values[r, :] = x[r, order[:k]], indices[r, :] = order[:k], where order sorts the row by value
descending and, among equal values, by index ascending (the tie rule: the lower index wins; -0.0
ranks below +0.0, and NaN inputs are not supported). f32 (`topk_f32`) or bf16 (`topk_bf16`) input,
k <= 64, indices int64 (as torch.topk returns them).

Algorithm: one CTA per row, the row held in registers (read once from global memory with 16-byte
coalesced loads), then a radix select over an order-preserving key:
1. key = bits ^ (sign ? 0xFFFFFFFF : 0x80000000) (``shr.s32``, ``or.b32``, ``xor.b32``) compares as
   an unsigned integer the way the floats compare (bf16: the top 16 bits of the same transform);
2. radix select, 8 bits per pass from the top (4 passes for f32, 2 for bf16): every thread adds its
   elements whose higher digits match the prefix found so far to a 256-bin shared histogram
   (``red.shared.add.u32``; with AGG=1 lanes holding the same digit are first counted together
   by ``match.any.sync`` + ``popc``, since a value pass's bins are few and hot; after the first
   pass, a warp none of whose lanes still matches the prefix skips an element's counting after
   one ``vote.any.sync``); warp 0 scans the bins from the top (8 per lane, a ``shfl.sync.up``
   ladder across lanes), finds the bin holding the k-th largest, and leaves the digit and the
   count still needed; two ``bar.sync`` per pass;
3. the threshold key T may be shared by more elements than are still needed: two more passes over
   the inverted column index (0xFFFF - c) of the elements equal to T pick the lowest indices. The
   composite (key, inverted index) is unique, so exactly k elements are selected:
   key > T, or key == T and inverted index >= the index threshold;
4. the selected elements take slots with ``atom.shared.add.u32``; threads 0..k-1 each rank one of
   them against all k (larger key first, then lower index) and store its value and index there.

Rows wider than one CTA's registers (BLOCK * 64 elements) or than 65536 columns (the index digit)
are refused when the suite is declared (``constraints``).

`topk_f32_pipe` / `topk_bf16_pipe` (below): persistent CTAs that stream the next row into shared
memory (a 1-D bulk copy) while a threshold filter leaves ~0.2% of the row to the same exact
selection.

Tags: radix-select, row-in-registers, vectorized, warp-shuffle, shared-atomics, persistent,
bulk-copy, threshold-filter
Work: ~cols compares per element pass; bytes: the row read once, k values + k int64 indices written.
"""

import numpy as np

import tirxh.lang as T
from tirxh.core.types import numpy_dtype

TAGS = ("radix-select", "row-in-registers", "vectorized", "warp-shuffle", "shared-atomics",
        "persistent", "bulk-copy", "threshold-filter")

MAX_K = 64
MAX_PER_THREAD = 64
MAX_COLS = 1 << 16  # the inverted index is a 16-bit digit pair
BINS = 256
FULL = 0xFFFFFFFF
VEC = {"f32": 4, "bf16": 8}  # elements per 16-byte load


def _keys_f32(bits):
    """Order-preserving unsigned key of f32 bits: shr.s32, or.b32, xor.b32."""
    return T.ptx.xor.b32(bits, T.ptx.or_.b32(T.ptx.shr.s32(bits, 31), 0x80000000))


def _load_keys(x, row_base, cols, tid, c, BLOCK, dt, smem=None):
    """The keys of one 16-byte access (chunk c) and their column indices; masked slots get key 0
    and an index >= cols, so they rank below every element of the row. From global memory, or
    with `smem` from the row's copy in shared memory (a b32 array)."""
    vec = VEC[dt]
    col = (tid + c * BLOCK) * vec
    ok = col < cols
    words = [T.reg(T.b32, init=0) for _ in range(4)]
    if smem is None:
        T.ptx.ld.global_.nc.v4.b32(words, x.at(row_base + col), pred=ok)
    else:
        T.ptx.ld.shared.v4.b32(words, smem.at(col * 4 // vec), pred=ok)
    keys = []
    for w in words:
        if dt == "f32":
            keys.append(_keys_f32(w))
        else:  # two bf16: the f32 key of each, top 16 bits
            keys.append(T.ptx.shr.u32(_keys_f32(T.ptx.shl.b32(w, 16)), 16))
            keys.append(T.ptx.shr.u32(_keys_f32(T.ptx.and_.b32(w, 0xFFFF0000)), 16))
    for key in keys:  # cols is a multiple of vec: an access is wholly in the row or not
        T.ptx.mov.u32(key, 0, pred=~ok)
    return [(key, col, j) for j, key in enumerate(keys)]


def _select_digit(hist, sel, need, lane):
    """Warp 0: the bin (from the top) holding the need-th largest, and the count still needed in
    it; writes (digit, need) to `sel` and zeroes the bins for the next pass."""
    lo = 248 - 8 * lane  # this lane's bins lo..lo+7, lane 0 the highest
    cnt = list(T.ptx.ld.shared.v4.u32(hist.at(lo))) + list(T.ptx.ld.shared.v4.u32(hist.at(lo + 4)))
    T.ptx.st.shared.v4.u32(hist.at(lo), [0, 0, 0, 0])
    T.ptx.st.shared.v4.u32(hist.at(lo + 4), [0, 0, 0, 0])
    total = cnt[0]
    for c in cnt[1:]:
        total = total + c
    above = T.reg(T.u32, init=total)
    for off in (1, 2, 4, 8, 16):  # inclusive scan over lanes, then exclusive: bins above ours
        o = T.ptx.shfl.sync.up.b32(above, off, 0, FULL)
        T.ptx.add.u32(above, above, o, pred=lane >= off)
    T.ptx.sub.u32(above, above, total)
    for i in range(7, -1, -1):
        nxt = T.ptx.add.u32(above, cnt[i])
        hit = (above < need) & (nxt >= need)
        with T.if_(hit):
            T.ptx.st.shared.v2.u32(sel.at(0), [T.ptx.add.u32(lo, i), T.ptx.sub.u32(need, above)])
        above.set(nxt)


class _Elem:
    """One key a thread holds and how to get its inverted column index (0xFFFF - column: larger
    for lower columns, so one more radix select over it picks the lowest indices among ties)."""

    def __init__(self, key, inv):
        self.key, self.inv = key, inv


def _row_elems(keys_of_chunk, chunks) -> list:
    """The row's keys as elements; the index is recomputed where used (one ``sub.u32``), so
    registers hold only the keys."""
    out = []
    for c in range(chunks):
        for key, col, j in keys_of_chunk(c):
            out.append(_Elem(key, lambda col=col, j=j: T.ptx.sub.u32(0xFFFF - j, col)))
    return out


class _Select:
    """Radix selection over the elements a CTA's threads hold: a 256-bin shared histogram per
    8-bit digit, warp 0 picking the digit that holds the need-th largest (`_select_digit`), two
    ``bar.sync`` per pass. Every pass leaves the histogram zeroed for the next."""

    def __init__(self, BLOCK):
        self.hist = T.shared(T.u32, (BINS,), name="hist")
        self.sel = T.shared(T.u32, (2,), name="sel")  # digit, count still needed
        self.lane = T.laneid()
        self.warp0 = (T.tid.x >> 5) == 0
        self.lanes_below = T.sreg("lanemask_lt")
        self.BLOCK = BLOCK

    def zero(self):
        tid = T.tid.x
        for b in range(0, BINS, self.BLOCK):
            with T.if_(tid + b < BINS):
                T.ptx.st.shared.u32(self.hist.at(tid + b), 0)

    def count(self, digit, m, agg):
        """Add one to bin `digit` where `m` (every lane when m is None). With `agg`, lanes of a
        warp holding the same digit are counted together first (``match.any.sync``, ``popc``) and
        only the lowest of them adds: the bins of a value pass are few and hot (exponent bits),
        and same-address shared atomics within a warp serialize."""
        if not agg:
            T.ptx.red.shared.add.u32(self.hist.at(digit), 1, pred=m)
            return
        key = digit if m is None else T.ptx.selp.b32(digit, 0xFFFF, m)
        peers = T.ptx.match.any.sync.b32(key, FULL)
        first = T.ptx.and_.b32(peers, self.lanes_below) == 0
        T.ptx.red.shared.add.u32(self.hist.at(digit), T.ptx.popc.b32(peers),
                                 pred=first if m is None else first & m)

    def radix(self, elems, value_of, match_of, nbits, need, agg, passes=None):
        """`passes` (all by default) 8-bit passes from the top digit of `value_of(elem)` over
        elements where `match_of(elem)`; returns (the digits found, the count still needed)."""
        prefix = T.reg(T.u32, init=0)
        shifts = list(range(nbits - 8, -1, -8))[:passes]
        for shift in shifts:
            for e in elems:
                v = value_of(e)
                m = match_of(e)
                if shift + 8 < nbits:
                    hi = T.ptx.shr.u32(v, shift + 8) == prefix
                    m = hi if m is None else (m & hi)
                if m is None:
                    self.count(T.ptx.bfe.u32(v, shift, 8), m, agg)
                    continue
                # after the first pass few elements still match the prefix: a warp where none
                # does skips the counting (vote.any.sync + a uniform branch)
                with T.if_(T.ptx.vote.any.sync.pred(m, FULL), uniform=True):
                    self.count(T.ptx.bfe.u32(v, shift, 8), m, agg)
            T.ptx.bar.sync(0)
            with T.if_(self.warp0, uniform=True):
                _select_digit(self.hist, self.sel, need, self.lane)
            T.ptx.bar.sync(0)
            digit, left = T.ptx.ld.shared.v2.u32(self.sel.at(0))
            prefix.set(T.ptx.or_.b32(T.ptx.shl.b32(prefix, 8), digit))
            need = left
        return prefix, need


class _Winners:
    """The k selected elements: slots taken with ``atom.shared.add.u32``, then threads 0..k-1
    each rank one against all k (larger key first, then lower index) and store it there."""

    def __init__(self):
        self.slot = T.shared(T.u32, (1,), name="slot")
        self.skey = T.shared(T.u32, (MAX_K,), name="skey", align=16)
        self.sidx = T.shared(T.u32, (MAX_K,), name="sidx", align=16)

    def take(self, elems, thr, ithr):
        for e in elems:
            key = e.key
            take = (key > thr) | ((key == thr) & (e.inv() >= ithr))
            with T.if_(take):
                s = T.ptx.atom.shared.add.u32(self.slot.at(0), 1)
                T.ptx.st.shared.u32(self.skey.at(s), key)
                T.ptx.st.shared.u32(self.sidx.at(s), T.ptx.sub.u32(0xFFFF, e.inv()))

    def store(self, row, k, values, indices, keybits, dt):
        tid = T.tid.x
        with T.if_(tid < k):
            mk = T.ptx.ld.shared.u32(self.skey.at(tid))
            mi = T.ptx.ld.shared.u32(self.sidx.at(tid))
            # every winner's key and index by 16-byte loads issued up front (k is a constant: the
            # comparisons unroll), instead of a loop of k dependent shared-memory round trips
            rank = T.reg(T.u32, init=0)
            for j0 in range(0, k, 4):
                if j0 + 4 <= k:
                    oks = T.ptx.ld.shared.v4.u32(self.skey.at(j0))
                    ois = T.ptx.ld.shared.v4.u32(self.sidx.at(j0))
                else:   # the last k % 4 (the slots past k were never written)
                    oks = [T.ptx.ld.shared.u32(self.skey.at(j)) for j in range(j0, k)]
                    ois = [T.ptx.ld.shared.u32(self.sidx.at(j)) for j in range(j0, k)]
                for ok, oi in zip(oks, ois):
                    before = (ok > mk) | ((ok == mk) & (oi < mi))
                    T.ptx.add.u32(rank, rank, 1, pred=before)
            out = row * k + rank
            top = 1 << (keybits - 1)
            flip = T.ptx.selp.b32(top, (1 << keybits) - 1, T.ptx.and_.b32(mk, top) != 0)
            bits = T.ptx.xor.b32(mk, flip)
            if dt == "f32":
                T.ptx.st.global_.b32(values.at(out), bits)
            else:
                T.ptx.st.global_.b16(values.at(out), T.ptx.cvt.u16.u32(bits))
            T.ptx.st.global_.u64(indices.at(out), T.ptx.cvt.u64.u32(mi))


def _select_exact(select, winners, elems, k, keybits, agg, match=None):
    """2. the threshold key (the k-th largest among `elems` where `match`); 3. among elements
    equal to it, the lowest indices (distinct: a plain pass); 4. the k winners collected."""
    thr, need = select.radix(elems, lambda e: e.key, lambda e: match(e) if match else None,
                             keybits, T.reg(T.u32, init=k), agg)
    ithr, _ = select.radix(elems, lambda e: e.inv(), lambda e: e.key == thr, 16, need, False)
    winners.take(elems, thr, ithr)
    T.ptx.bar.sync(0)


def _topk(x, values, indices, cols, k, BLOCK, AGG, dt):
    vec = VEC[dt]
    keybits = 32 if dt == "f32" else 16
    chunks = T.cdiv(cols, BLOCK * vec)
    select, winners = _Select(BLOCK), _Winners()
    tid = T.tid.x
    row = T.ctaid.x
    row_base = row * cols

    elems = _row_elems(lambda c: _load_keys(x, row_base, cols, tid, c, BLOCK, dt), chunks)
    select.zero()  # and the slot counter
    with T.if_(tid == 0):
        T.ptx.st.shared.u32(winners.slot.at(0), 0)
    T.ptx.bar.sync(0)
    _select_exact(select, winners, elems, k, keybits, AGG)
    winners.store(row, k, values, indices, keybits, dt)


@T.kernel(grid=lambda rows: rows, block=lambda BLOCK: BLOCK)
def topk_f32(x: T.gptr[T.f32], values: T.gptr[T.f32], indices: T.gptr[T.s64], rows: T.u32,
             cols: T.const, k: T.const, BLOCK: T.const = 256, AGG: T.const = 1):
    _topk(x, values, indices, cols, k, BLOCK, AGG, "f32")


@T.kernel(grid=lambda rows: rows, block=lambda BLOCK: BLOCK)
def topk_bf16(x: T.gptr[T.bf16], values: T.gptr[T.bf16], indices: T.gptr[T.s64], rows: T.u32,
              cols: T.const, k: T.const, BLOCK: T.const = 256, AGG: T.const = 1):
    _topk(x, values, indices, cols, k, BLOCK, AGG, "bf16")


# -- the persistent, filtered variant --------------------------------------------------------------

def _pipe_grid(rows, CTAS=132):
    return min(rows, CTAS)


def row_bytes(cols, dt) -> int:
    return cols * 16 // VEC[dt]


def _topk_pipe(x, values, indices, rows, cols, k, BLOCK, AGG, PASSES, dt):
    """What `_topk` does, reordered so that an SM always has a row in flight and the radix
    passes run over a few candidates instead of the whole row (docs/TUNING.md, "topk_pipe"):

    1. persistent CTAs (rows cta, cta + G, ...); one thread streams the CTA's next row into a
       shared-memory copy with a 1-D bulk copy (``cp.async.bulk``, mbarrier ``complete_tx``) as
       soon as every thread has moved the current row into registers (one ``bar.sync``), so the
       next row loads while this one is selected;
    2. a threshold T0 that at least k elements reach: the k-th largest of the BLOCK per-thread
       maxima (``max.u32`` over the thread's keys) to PASSES 8-bit digits (a radix select over
       one key per thread): the top-k threads' maxima are k elements >= T0;
    3. the candidates (key >= T0; a warp with none skips after one ``vote.any.sync``) take slots
       in shared memory (``atom.shared.add.u32``): ~0.2% of a normal row at PASSES = 2, so
       one slot per thread (BLOCK slots) holds them;
    4. the exact selection of `_topk` (threshold key, lowest indices among ties, ranking) over
       the candidates, one per thread; if more than BLOCK candidates came (rows of heavy ties:
       T0 is then shared by many elements), over the whole row in registers instead, as `_topk`
       does. Either way the answer is exact.
    """
    vec = VEC[dt]
    keybits = 32 if dt == "f32" else 16
    chunks = T.cdiv(cols, BLOCK * vec)
    nbytes = row_bytes(cols, dt)
    rowbuf = T.shared(T.b32, (nbytes // 4,), name="rowbuf", align=128, dynamic=True)
    full = T.mbarrier(1, name="full", dynamic=True)
    ckey = T.shared(T.u32, (BLOCK,), name="ckey")
    cinv = T.shared(T.u32, (BLOCK,), name="cinv")
    ccount = T.shared(T.u32, (1,), name="ccount")
    select, winners = _Select(BLOCK), _Winners()
    bulk_load = T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"]
    tid = T.tid.x
    grid = T.nctaid.x
    cta = T.ctaid.x
    mine = (rows - 1 - cta) / grid + 1      # rows cta, cta + grid, ... below rows

    def load(row):
        full.arrive_expect_tx(nbytes)
        bulk_load(rowbuf.at(0), x.at(row * cols), nbytes, full)

    with T.if_(tid == 0):
        full.init(1)
        T.ptx.fence.mbarrier_init.release.cluster()
        load(cta)
    select.zero()
    T.ptx.bar.sync(0)
    phase = T.reg(T.u32, init=0)
    with T.range(mine) as i:
        row = cta + i * grid
        full.wait(phase)
        phase.set(phase ^ 1)
        elems = _row_elems(lambda c: _load_keys(x, 0, cols, tid, c, BLOCK, dt, smem=rowbuf),
                           chunks)
        T.ptx.bar.sync(0)     # every thread holds its keys: the copy may take the next row
        with T.if_(tid == 0):
            T.ptx.st.shared.u32(winners.slot.at(0), 0)
            T.ptx.st.shared.u32(ccount.at(0), 0)
            with T.if_(i + 1 < mine):
                load(row + grid)

        # 2. T0 from the per-thread maxima
        tmax = elems[0].key
        for e in elems[1:]:
            tmax = T.ptx.max.u32(tmax, e.key)
        top, _ = select.radix([_Elem(tmax, None)], lambda e: e.key, lambda e: None, keybits,
                              T.reg(T.u32, init=k), AGG, passes=PASSES)
        t0 = T.ptx.shl.b32(top, keybits - 8 * PASSES)

        # 3. the candidates into shared memory
        for e in elems:
            m = e.key >= t0
            with T.if_(T.ptx.vote.any.sync.pred(m, FULL), uniform=True):
                with T.if_(m):
                    pos = T.ptx.atom.shared.add.u32(ccount.at(0), 1)
                    with T.if_(pos < BLOCK):
                        T.ptx.st.shared.u32(ckey.at(pos), e.key)
                        T.ptx.st.shared.u32(cinv.at(pos), e.inv())
        T.ptx.bar.sync(0)
        found = T.ptx.ld.shared.u32(ccount.at(0))

        # 4. the exact selection, over the candidates or (too many) the whole row
        with T.if_(found <= BLOCK, uniform=True):
            valid = tid < found
            ck = T.reg(T.u32, init=0)
            ci = T.reg(T.u32, init=0)
            T.ptx.ld.shared.u32(ck, ckey.at(tid), pred=valid)
            T.ptx.ld.shared.u32(ci, cinv.at(tid), pred=valid)
            _select_exact(select, winners, [_Elem(ck, lambda: ci)], k, keybits, AGG,
                          match=lambda e: valid)
        with T.else_():
            _select_exact(select, winners, elems, k, keybits, AGG)
        winners.store(row, k, values, indices, keybits, dt)
        T.ptx.bar.sync(0)     # the winners read before the next row's slots are reset


@T.kernel(grid=_pipe_grid, block=lambda BLOCK: BLOCK)
def topk_f32_pipe(x: T.gptr[T.f32], values: T.gptr[T.f32], indices: T.gptr[T.s64],
                  rows: T.u32, cols: T.const, k: T.const, BLOCK: T.const = 1024,
                  AGG: T.const = 0, PASSES: T.const = 2, CTAS: T.const = 132):
    _topk_pipe(x, values, indices, rows, cols, k, BLOCK, AGG, PASSES, "f32")


@T.kernel(grid=_pipe_grid, block=lambda BLOCK: BLOCK)
def topk_bf16_pipe(x: T.gptr[T.bf16], values: T.gptr[T.bf16], indices: T.gptr[T.s64],
                   rows: T.u32, cols: T.const, k: T.const, BLOCK: T.const = 1024,
                   AGG: T.const = 0, PASSES: T.const = 2, CTAS: T.const = 132):
    _topk_pipe(x, values, indices, rows, cols, k, BLOCK, AGG, PASSES, "bf16")


# -- cases ------------------------------------------------------------------------------------------

def per_thread_limit(BLOCK: int) -> int:
    """Keys one thread may hold: a register each, within the 64K-register file shared by the CTA
    (``65536 / BLOCK`` per thread) less ~24 for addresses and the passes, at most 64."""
    return max(0, min(MAX_PER_THREAD, 65536 // BLOCK - 24))


def _constraints(dt):
    def constraints(rows, cols, k, BLOCK):
        """The shapes the kernel accepts (checked when the suite is declared)."""
        why = []
        if BLOCK % 32 or not 64 <= BLOCK <= 1024:
            why.append(f"BLOCK={BLOCK} must be a multiple of 32 in [64, 1024]")
        if not 1 <= k <= min(MAX_K, cols, BLOCK):
            why.append(f"k={k} must be in [1, min({MAX_K}, cols, BLOCK)]")
        if cols % VEC[dt]:
            why.append(f"cols={cols} must be a multiple of {VEC[dt]} ({dt} rows start 16-byte "
                       "aligned)")
        if cols > MAX_COLS:
            why.append(f"cols={cols} exceeds {MAX_COLS} (16-bit column index digit)")
        elif BLOCK > 0 and T.cdiv(cols, BLOCK * VEC[dt]) * VEC[dt] > per_thread_limit(BLOCK):
            why.append(f"cols={cols} needs {T.cdiv(cols, BLOCK * VEC[dt]) * VEC[dt]} elements "
                       f"per thread at BLOCK={BLOCK}; a row must fit in one CTA's registers (at "
                       f"most {per_thread_limit(BLOCK)} keys per thread at this BLOCK)")
        if rows < 1:
            why.append(f"rows={rows} must be positive")
        return why
    return constraints


constraints_f32, constraints_bf16 = _constraints("f32"), _constraints("bf16")


def make_case(name: str, rows: int, cols: int, k: int, BLOCK: int = 256, AGG: int = 1,
              small: bool = True) -> T.Case:
    """A top-k case; large ones are the H200's (tag h200), never simulated."""
    return T.case(name, small=small, tags=() if small else ("h200",), rows=rows, cols=cols, k=k,
                  BLOCK=BLOCK, AGG=AGG)


def _inputs(dt):
    def inputs(rng, rows, cols, k):
        x = rng.standard_normal((rows, cols), dtype=np.float32)
        if rows > 1:  # a row of heavy ties: the tie rule decides which indices are returned
            x[0] = rng.integers(-3, 4, cols).astype(np.float32)
        ndt = np.float32 if dt == "f32" else numpy_dtype("bf16")
        return dict(x=x.astype(ndt), values=np.empty((rows, k), ndt),
                    indices=np.empty((rows, k), np.int64), rows=rows)
    return inputs


def reference(x, k):
    """Sort by value descending, then index ascending, first k: the k-th largest value by
    ``np.partition`` (linear time: the benchmark rows are 4096 x 32768), then a stable sort of the
    few elements at or above it (in index order, so ties keep the lowest indices first)."""
    v = x.astype(np.float32)
    kth = -np.partition(-v, k - 1, axis=1)[:, k - 1]
    order = np.empty((v.shape[0], k), np.int64)
    for r in range(v.shape[0]):
        cand = np.flatnonzero(v[r] >= kth[r])
        order[r] = cand[np.argsort(-v[r, cand], kind="stable")[:k]]
    return {"values": np.take_along_axis(x, order, axis=1), "indices": order}


_BASELINES = [{"name": "torch.topk", "args": {"x": "x", "k": "k"}},
              {"name": "torch.compile.topk", "args": {"x": "x", "k": "k"}}]
_TOL = T.tolerance(rtol=0, atol=0)  # a selection: values and indices are exact


def _suite_args(dt) -> dict:
    """What every top-k suite of one dtype shares: inputs, the reference, the outputs, the exact
    tolerance, the work (the row read once, k values and k int64 indices written), baselines."""
    esize = 4 if dt == "f32" else 2
    return dict(inputs=_inputs(dt), reference=reference, outputs=["values", "indices"],
                tolerance=_TOL, flops=lambda rows, cols: rows * cols,
                bytes=lambda rows, cols, k: esize * rows * cols + (esize + 8) * rows * k,
                baselines=_BASELINES)

SUITE_F32 = T.suite(
    topk_f32, **_suite_args("f32"),
    cases=[
        make_case("r1_c1000_k7", rows=1, cols=1000, k=7, BLOCK=128),
        make_case("r3_c2052_k64", rows=3, cols=2052, k=64, BLOCK=128),
        make_case("r2_c256_k1", rows=2, cols=256, k=1, BLOCK=64),
        make_case("r3_c1000_k20_plain", rows=3, cols=1000, k=20, BLOCK=64, AGG=0),
        make_case("r4096_c32768_k64", rows=4096, cols=32768, k=64, BLOCK=1024,
                  small=False),
        make_case("r4096_c32768_k64_b512", rows=4096, cols=32768, k=64, BLOCK=512,
                  small=False),
        make_case("r4096_c32768_k64_plain", rows=4096, cols=32768, k=64, BLOCK=1024,
                  AGG=0, small=False),
        make_case("r4096_c32768_k8", rows=4096, cols=32768, k=8, BLOCK=1024, small=False),
        make_case("r16384_c8192_k50", rows=16384, cols=8192, k=50, BLOCK=256,
                  small=False),
    ],
    constraints=constraints_f32,
)

SUITE_BF16 = T.suite(
    topk_bf16, **_suite_args("bf16"),
    cases=[
        make_case("r3_c1000_k33", rows=3, cols=1000, k=33, BLOCK=64),
        make_case("r8192_c32768_k64", rows=8192, cols=32768, k=64, BLOCK=1024,
                  small=False),
        make_case("r8192_c32768_k16", rows=8192, cols=32768, k=16, BLOCK=512,
                  small=False),
    ],
    constraints=constraints_bf16,
)


# -- the persistent, filtered variant's cases -------------------------------------------------------

SMEM_LIMIT = 227 * 1024


def _pipe_constraints(dt):
    plain = _constraints(dt)

    def constraints(rows, cols, k, BLOCK, PASSES, CTAS):
        """`_topk`'s shapes, a row copy that fits shared memory beside the candidate slots, and
        T0 to at most the key's digits."""
        why = plain(rows, cols, k, BLOCK)
        smem = row_bytes(cols, dt) + 8 * BLOCK
        if smem > SMEM_LIMIT:
            why.append(f"cols={cols}: the row copy and {BLOCK} candidate slots take {smem} bytes "
                       f"of shared memory, more than {SMEM_LIMIT}")
        if PASSES not in (1, 2):
            why.append(f"PASSES={PASSES} (digits of the threshold T0) must be 1 or 2")
        if CTAS < 1:
            why.append(f"CTAS={CTAS} must be positive")
        return why
    return constraints


pipe_constraints_f32, pipe_constraints_bf16 = _pipe_constraints("f32"), _pipe_constraints("bf16")


def make_pipe_case(name, rows, cols, k, BLOCK=1024, AGG=0, PASSES=2, CTAS=132, small=True):
    return T.case(name, small=small, tags=() if small else ("h200",), rows=rows, cols=cols, k=k,
                  BLOCK=BLOCK, AGG=AGG, PASSES=PASSES, CTAS=CTAS)


SUITE_F32_PIPE = T.suite(
    topk_f32_pipe, **_suite_args("f32"),
    cases=[
        # 5 rows on 2 CTAs (3 and 2 rows: the row copy is refilled while a row is selected);
        # row 0 is heavy ties (T0 = 3 is shared by ~290 elements > 128 slots: the whole-row
        # path), the others take the candidate path
        make_pipe_case("r5_c2052_k64", rows=5, cols=2052, k=64, BLOCK=128, CTAS=2),
        make_pipe_case("r3_c1000_k7_t1", rows=3, cols=1000, k=7, BLOCK=64, PASSES=1, CTAS=1,
                       AGG=1),
        make_pipe_case("r2_c256_k1", rows=2, cols=256, k=1, BLOCK=64, CTAS=2),
        make_pipe_case("r4096_c32768_k64", rows=4096, cols=32768, k=64, small=False),
        make_pipe_case("r4096_c32768_k64_t1", rows=4096, cols=32768, k=64, PASSES=1,
                       small=False),
        make_pipe_case("r4096_c32768_k64_agg", rows=4096, cols=32768, k=64, AGG=1,
                       small=False),
        make_pipe_case("r4096_c32768_k8", rows=4096, cols=32768, k=8, small=False),
        make_pipe_case("r16384_c8192_k50", rows=16384, cols=8192, k=50, BLOCK=256, CTAS=264,
                       small=False),
    ],
    constraints=pipe_constraints_f32,
)

SUITE_BF16_PIPE = T.suite(
    topk_bf16_pipe, **_suite_args("bf16"),
    cases=[
        make_pipe_case("r4_c1000_k33", rows=4, cols=1000, k=33, BLOCK=64, CTAS=3),
        make_pipe_case("r8192_c32768_k64", rows=8192, cols=32768, k=64, small=False),
        make_pipe_case("r8192_c32768_k16", rows=8192, cols=32768, k=16, small=False),
    ],
    constraints=pipe_constraints_bf16,
)
