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

Tags: radix-select, row-in-registers, vectorized, warp-shuffle, shared-atomics
Work: ~cols compares per element pass; bytes: the row read once, k values + k int64 indices written.
"""

import numpy as np

import tirxh.lang as T
from tirxh.core.types import numpy_dtype

TAGS = ("radix-select", "row-in-registers", "vectorized", "warp-shuffle", "shared-atomics")

MAX_K = 64
MAX_PER_THREAD = 64
MAX_COLS = 1 << 16  # the inverted index is a 16-bit digit pair
BINS = 256
FULL = 0xFFFFFFFF
VEC = {"f32": 4, "bf16": 8}  # elements per 16-byte load


def _keys_f32(bits):
    """Order-preserving unsigned key of f32 bits: shr.s32, or.b32, xor.b32."""
    return T.ptx.xor.b32(bits, T.ptx.or_.b32(T.ptx.shr.s32(bits, 31), 0x80000000))


def _load_keys(x, row_base, cols, tid, c, BLOCK, dt):
    """The keys of one 16-byte access (chunk c) and their column indices; masked slots get key 0
    and an index >= cols, so they rank below every element of the row."""
    vec = VEC[dt]
    col = (tid + c * BLOCK) * vec
    ok = col < cols
    words = [T.reg(T.b32, init=0) for _ in range(4)]
    T.ptx.ld.global_.nc.v4.b32(words, x.at(row_base + col), pred=ok)
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


def _topk(x, values, indices, cols, k, BLOCK, AGG, dt):
    vec = VEC[dt]
    keybits = 32 if dt == "f32" else 16
    chunks = T.cdiv(cols, BLOCK * vec)
    hist = T.shared(T.u32, (BINS,), name="hist")
    sel = T.shared(T.u32, (2,), name="sel")  # digit, count still needed
    slot = T.shared(T.u32, (1,), name="slot")
    skey = T.shared(T.u32, (MAX_K,), name="skey")
    sidx = T.shared(T.u32, (MAX_K,), name="sidx")
    tid = T.tid.x
    lane = T.laneid()
    warp0 = (tid >> 5) == 0
    row = T.ctaid.x
    row_base = row * cols

    elems = []
    for c in range(chunks):
        elems += _load_keys(x, row_base, cols, tid, c, BLOCK, dt)
    for b in range(0, BINS, BLOCK):  # zero the histogram and the slot counter
        with T.if_(tid + b < BINS):
            T.ptx.st.shared.u32(hist.at(tid + b), 0)
    with T.if_(tid == 0):
        T.ptx.st.shared.u32(slot.at(0), 0)
    T.ptx.bar.sync(0)

    lanes_below = T.sreg("lanemask_lt")

    def count(digit, m, agg):
        """Add one to bin `digit` where `m` (every lane when m is None). With `agg`, lanes of a
        warp holding the same digit are counted together first (``match.any.sync``, ``popc``) and
        only the lowest of them adds: the bins of a value pass are few and hot (exponent bits),
        and same-address shared atomics within a warp serialize."""
        if not agg:
            T.ptx.red.shared.add.u32(hist.at(digit), 1, pred=m)
            return
        key = digit if m is None else T.ptx.selp.b32(digit, 0xFFFF, m)
        peers = T.ptx.match.any.sync.b32(key, FULL)
        first = T.ptx.and_.b32(peers, lanes_below) == 0
        T.ptx.red.shared.add.u32(hist.at(digit), T.ptx.popc.b32(peers),
                                 pred=first if m is None else first & m)

    def radix(value_of, match_of, nbits, need, agg):
        """Passes from the top digit of `value_of(elem)` over elements where `match_of(elem)`;
        returns (threshold, need) after the last pass."""
        prefix = T.reg(T.u32, init=0)
        for shift in range(nbits - 8, -1, -8):
            for e in elems:
                v = value_of(e)
                m = match_of(e)
                if shift + 8 < nbits:
                    hi = T.ptx.shr.u32(v, shift + 8) == prefix
                    m = hi if m is None else (m & hi)
                if m is None:
                    count(T.ptx.bfe.u32(v, shift, 8), m, agg)
                    continue
                # after the first pass few elements still match the prefix: a warp where none
                # does skips the counting (vote.any.sync + a uniform branch)
                with T.if_(T.ptx.vote.any.sync.pred(m, FULL), uniform=True):
                    count(T.ptx.bfe.u32(v, shift, 8), m, agg)
            T.ptx.bar.sync(0)
            with T.if_(warp0, uniform=True):
                _select_digit(hist, sel, need, lane)
            T.ptx.bar.sync(0)
            digit, left = T.ptx.ld.shared.v2.u32(sel.at(0))
            prefix.set(T.ptx.or_.b32(T.ptx.shl.b32(prefix, 8), digit))
            need = left
        return prefix, need

    def inv_index(e):  # recomputed where used (one sub.u32): registers hold only the keys
        _, col, j = e
        return T.ptx.sub.u32(0xFFFF - j, col)

    # 2. the threshold key; 3. among elements equal to it, the lowest indices
    thr, need = radix(lambda e: e[0], lambda e: None, keybits, T.reg(T.u32, init=k), AGG)
    ithr, _ = radix(inv_index, lambda e: e[0] == thr, 16, need, False)  # distinct indices

    # 4. collect the k selected (any order), then rank them
    for e in elems:
        key = e[0]
        take = (key > thr) | ((key == thr) & (inv_index(e) >= ithr))
        with T.if_(take):
            s = T.ptx.atom.shared.add.u32(slot.at(0), 1)
            T.ptx.st.shared.u32(skey.at(s), key)
            T.ptx.st.shared.u32(sidx.at(s), T.ptx.sub.u32(0xFFFF, inv_index(e)))
    T.ptx.bar.sync(0)
    with T.if_(tid < k):
        mk = T.ptx.ld.shared.u32(skey.at(tid))
        mi = T.ptx.ld.shared.u32(sidx.at(tid))
        rank = T.reg(T.u32, init=0)
        with T.range(k) as j:
            ok = T.ptx.ld.shared.u32(skey.at(j))
            oi = T.ptx.ld.shared.u32(sidx.at(j))
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


@T.kernel(grid=lambda rows: rows, block=lambda BLOCK: BLOCK)
def topk_f32(x: T.gptr[T.f32], values: T.gptr[T.f32], indices: T.gptr[T.s64], rows: T.u32,
             cols: T.const, k: T.const, BLOCK: T.const = 256, AGG: T.const = 1):
    _topk(x, values, indices, cols, k, BLOCK, AGG, "f32")


@T.kernel(grid=lambda rows: rows, block=lambda BLOCK: BLOCK)
def topk_bf16(x: T.gptr[T.bf16], values: T.gptr[T.bf16], indices: T.gptr[T.s64], rows: T.u32,
              cols: T.const, k: T.const, BLOCK: T.const = 256, AGG: T.const = 1):
    _topk(x, values, indices, cols, k, BLOCK, AGG, "bf16")


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
_WORK = dict(flops=lambda rows, cols: rows * cols)

SUITE_F32 = T.suite(
    topk_f32, inputs=_inputs("f32"), reference=reference, outputs=["values", "indices"],
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
    tolerance=_TOL, constraints=constraints_f32,
    bytes=lambda rows, cols, k: 4 * rows * cols + 12 * rows * k, **_WORK,
    baselines=_BASELINES,
)

SUITE_BF16 = T.suite(
    topk_bf16, inputs=_inputs("bf16"), reference=reference, outputs=["values", "indices"],
    cases=[
        make_case("r3_c1000_k33", rows=3, cols=1000, k=33, BLOCK=64),
        make_case("r8192_c32768_k64", rows=8192, cols=32768, k=64, BLOCK=1024,
                  small=False),
        make_case("r8192_c32768_k16", rows=8192, cols=32768, k=16, BLOCK=512,
                  small=False),
    ],
    tolerance=_TOL, constraints=constraints_bf16,
    bytes=lambda rows, cols, k: 2 * rows * cols + 10 * rows * k, **_WORK,
    baselines=_BASELINES,
)
