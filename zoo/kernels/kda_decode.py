"""Kimi Delta Attention decode: TT = 1..4 new tokens per sequence against a state in HBM (issue 18).

Per sequence n, head h, token t (kda_ref.py has the math and the float64 reference):

    g = -5 sigmoid(exp(A_log[h]) (g_raw_t + dt_bias[h]))       per channel (safe_gate)
    k^ = k_t / |k_t|,  q^ = q_t / |q_t|                          (L2, eps 1e-6)
    S' = Diag(exp(g)) S;  S = S' + beta_t k^ (v_t - S'^T k^)^T;  o_t = K^-1/2 S^T q^

q, k, g_raw [N, TT, H, K] bf16; v [N, TT, H, V] bf16; beta [N, TT, H] bf16; A_log [H] f32;
dt_bias [H, K] f32; state [N, H, K, V] f32, updated in place; o [N, TT, H, V] bf16. K = V = 128.

Algorithm: memory bound (the state, 64 KB per head, is read once and written once; the tokens are
a few hundred bytes), so the state lives in registers between the two and everything else is
arithmetic on them. The value columns of S are independent (the update of column c needs only
column c, k, q, g and v_c), so a warp owns 16 columns and every row of them: lane l holds the 4
columns 4 (l % 4) .. +3 of rows 16 (l / 4) .. +15 (64 registers), and the CTA's 4 warps 64 columns
(grid: V / 64 x H x N). Each of its 16 ``ld.global.v4.f32`` covers 8 rows x 64 contiguous bytes
per warp (whole 32-byte sectors), all 16 issued before the first use, with the streaming hint
``.cs`` (each byte is touched once); the stores mirror them. Per token a lane loads its 16 rows of
k, q, g_raw (two 16-byte loads each), its 4 values of v and beta; computes the gate of its rows
(``ex2``, ``rcp``, ``ex2``: exp(A_log) and the dt_bias terms folded into one ``fma`` per row),
decays its state, and forms the partial sums over its rows of S'^T k and S'^T q (4 columns each)
and of |k|^2, |q|^2, k.q; a ``shfl.sync.bfly`` butterfly over the lane bits that select rows
(offsets 4, 8, 16) gives every lane of a column the same totals with no shared memory and no
barrier. Normalization is then scalar work: S'^T k^ = (S'^T k) / |k|, and o = K^-1/2 (S'^T q / |q|
+ (k^.q^) delta), with delta = beta (v - S'^T k^) the column update: one pass over the registers
per token.

Numerics: float32 throughout (the state never leaves f32); the gate with ``ex2.approx`` and
``rcp.approx`` (relative errors ~2^-22), the norms with ``rsqrt.approx``: the state stays within
~1e-6 relative of the float64 reference, o within its bf16 rounding.

Techniques: state in registers (single pass), 16-byte vector loads, warp-shuffle butterfly
reductions, fused gate and L2 normalization, in-place update.

Tags: memory-bound, state-in-registers, warp-shuffle, vectorized, fused-gate, linear-attention
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import tirxh.lang as T
from tirxh.core.types import numpy_dtype

# the zoo is a directory of kernel files, not a package: tirxh's collection puts it on sys.path,
# other loaders (tests, tools) import a file by path, so the sibling reference is found from here
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
import kda_ref as R  # noqa: E402 - after the path that finds it

TAGS = ("memory-bound", "state-in-registers", "warp-shuffle", "vectorized", "fused-gate",
        "linear-attention")

K = V = 128
BV = 64                   # value columns per CTA: 4 warps x 16
ROWS = 16                 # state rows per lane (K / 8 row groups)
LOG2E = 1.4426950408889634
FULL = 0xFFFFFFFF
MAX_TOKENS = 4


def _unpack(word):
    """bf16x2 -> (lo, hi) f32: ``shl.b32`` / ``and.b32`` and ``mov.f32`` (bf16 is the top half
    of an f32)."""
    return (T.ptx.mov.f32(T.ptx.shl.b32(word, 16)),
            T.ptx.mov.f32(T.ptx.and_.b32(word, 0xFFFF0000)))


def _load_rows(ptr, offset):
    """A lane's 16 consecutive bf16 rows of a K-vector at element `offset`: two
    ``ld.global.nc.v4.b32`` -> 16 f32."""
    addr = ptr.at(offset)
    words = list(T.ptx.ld.global_.nc.v4.b32(addr)) + list(T.ptx.ld.global_.nc.v4.b32(addr + 16))
    return [x for w in words for x in _unpack(w)]


def _butterfly(values):
    """Sum each value over the 8 lanes that share l % 4 (``shfl.sync.bfly`` 4, 8, 16 + add):
    every one of them ends with the same total."""
    for off in (4, 8, 16):
        values = [v + T.ptx.mov.f32(T.ptx.shfl.sync.bfly.b32(v, off, 0x1F, FULL)) for v in values]
    return values


def _gate_scale(A_log, h):
    """c1 = -exp(A_log[h]) log2(e), the head's gate scale: exp(-z) = 2^(c1 g_raw + c1 dt_bias)
    (``ld.global.nc.f32``, ``mul``, ``ex2.approx``, ``mul``)."""
    return T.ptx.ex2.approx.f32(T.ptx.ld.global_.nc.f32(A_log.at(h)) * LOG2E) * -LOG2E


def _decay(g, c1, c0):
    """The decay exp(g) of one row from its raw gate: g = -5 sigmoid(z), z = exp(A_log)
    (g_raw + dt_bias), so exp(g) = 2^(-5 log2(e) / (1 + exp(-z))) with exp(-z) = 2^(c1 g_raw
    + c0) (the kernel's per-head constants); ``fma``, ``min``, ``ex2``, ``rcp``, ``ex2``. exp(-z)
    is clamped at 2^64: sigmoid(z) < 6e-20 already rounds the decay to 1."""
    e = T.ptx.ex2.approx.f32(T.ptx.min.f32(T.ptx.fma.rn.f32(g, c1, c0), 64.0))
    sig = T.ptx.rcp.approx.f32(e + 1.0)
    return T.ptx.ex2.approx.f32(sig * (R.LOWER_BOUND * LOG2E))


def _decay_and_sums(S, kr, qr, decay_of):
    """Decay a lane's rows of S in place (row r by ``decay_of(r)``, emitted at the row) and
    return its sums over those rows: S'^T k and S'^T q of its 4 columns, k.k, q.q, k.q (11
    values: ``mul`` and ``fma`` chains in row order)."""
    pk, pq = [None] * 4, [None] * 4
    kk = qq = kq = None
    for r in range(len(S)):
        decay = decay_of(r)
        for c in range(4):
            S[r][c] = S[r][c] * decay
            pk[c] = kr[r] * S[r][c] if r == 0 else T.ptx.fma.rn.f32(kr[r], S[r][c], pk[c])
            pq[c] = qr[r] * S[r][c] if r == 0 else T.ptx.fma.rn.f32(qr[r], S[r][c], pq[c])
        kk = kr[r] * kr[r] if r == 0 else T.ptx.fma.rn.f32(kr[r], kr[r], kk)
        qq = qr[r] * qr[r] if r == 0 else T.ptx.fma.rn.f32(qr[r], qr[r], qq)
        kq = kr[r] * qr[r] if r == 0 else T.ptx.fma.rn.f32(kr[r], qr[r], kq)
    return pk + pq + [kk, qq, kq]


def _update(S, kr, tot, vc, bt):
    """From the totals over all K rows (`tot`: `_decay_and_sums`' 11 values summed): the
    column update delta = beta (v - S'^T k^) applied to the lane's rows of S in place (S +=
    k^ delta^T) and its 4 outputs o = K^-1/2 (S'^T q^ + (k^.q^) delta); ``rsqrt.approx`` for
    the norms."""
    rk = T.ptx.rsqrt.approx.f32(tot[8] + R.L2_EPS)
    rq = T.ptx.rsqrt.approx.f32(tot[9] + R.L2_EPS)
    return _update_normed(S, kr, tot, vc, bt, rk, rq, tot[10] * rk * rq)


def _update_normed(S, kr, tot, vc, bt, rk, rq, kq_hat):
    """`_update` with the norms' factors given: rk = |k|^-1, rq = |q|^-1, kq_hat = k^.q^ (for
    a kernel that computes them once for all its warps; `tot` then needs only its 8 column
    sums)."""
    delta = [bt * (vc[c] - tot[c] * rk) for c in range(4)]
    for r in range(len(S)):
        kh = kr[r] * rk
        for c in range(4):
            S[r][c] = T.ptx.fma.rn.f32(kh, delta[c], S[r][c])
    return [(T.ptx.fma.rn.f32(kq_hat, delta[c], tot[4 + c] * rq)) * K ** -0.5 for c in range(4)]


def _store_o(addr, out, pred):
    """4 outputs as bf16 at `addr` (``cvt.rn.bf16x2.f32`` x 2, ``st.global.v2.b32``)."""
    T.ptx.st.global_.v2.b32(addr, [T.ptx.cvt.rn.bf16x2.f32(out[1], out[0]),
                                   T.ptx.cvt.rn.bf16x2.f32(out[3], out[2])], pred=pred)


def _grid(N, H):
    return (V // BV, H, N)


@T.kernel(grid=_grid, block=32 * (BV // 16))
def kda_decode(q: T.gptr[T.bf16], k: T.gptr[T.bf16], v: T.gptr[T.bf16], g_raw: T.gptr[T.bf16],
               beta: T.gptr[T.bf16], A_log: T.gptr[T.f32], dt_bias: T.gptr[T.f32],
               state: T.gptr[T.f32], o: T.gptr[T.bf16], TT: T.const = 1):
    lane = T.laneid()
    warp = T.tid.x >> 5
    cg, rg = lane & 3, lane >> 2
    n, h, H = T.ctaid.z, T.ctaid.y, T.nctaid.y
    col = T.ctaid.x * BV + warp * 16 + cg * 4     # this lane's first value column
    row0 = rg * ROWS                               # and first state row (key channel)
    head = n * H + h
    # gate constants: exp(-z) = 2^(c1 g_raw + c0[r]), c1 = -exp(A_log) log2(e), c0 = c1 dt_bias
    c1 = _gate_scale(A_log, h)
    dtb = T.ptx.ld.global_.nc.v4.f32
    db_addr = dt_bias.at(h * K + row0)
    c0 = [c1 * x for i in range(ROWS // 4) for x in dtb(db_addr + 16 * i)]
    s_addr = state.at((head * K + row0) * V + col)
    S = [list(T.ptx.ld.global_.cs.v4.f32(s_addr + r * V * 4)) for r in range(ROWS)]
    for t in range(TT):
        tok = (n * TT + t) * H + h
        kr = _load_rows(k, tok * K + row0)
        qr = _load_rows(q, tok * K + row0)
        gr = _load_rows(g_raw, tok * K + row0)
        vw = T.ptx.ld.global_.nc.v2.b32(v.at(tok * V + col))
        vc = [x for w in vw for x in _unpack(w)]
        bt = T.ptx.cvt.f32.bf16(T.ptx.ld.global_.nc.b16(beta.at(tok)))
        part = _decay_and_sums(S, kr, qr, lambda r: _decay(gr[r], c1, c0[r]))
        out = _update(S, kr, _butterfly(part), vc, bt)
        _store_o(o.at(tok * V + col), out, pred=rg == 0)
    for r in range(ROWS):
        T.ptx.st.global_.cs.v4.f32(s_addr + r * V * 4, S[r])


# --- inputs, reference, cases ------------------------------------------------------------------

_REFS = R.RefCache()


def inputs(rng, N, H, TT=1, gate="mixed"):
    """Raw KDA inputs for N sequences of TT tokens; v and the state scaled by a power of two so
    that the smaller RMS of (o, state) lies in [1, 2) (kda_ref.unit_scale)."""
    x = R.raw_inputs(rng, N, TT, H, gate=gate)
    o, ht = R.forward(**x, method="recurrent")
    c = R.unit_scale(o, ht)
    x["v"] = (x["v"].astype(np.float32) * c).astype(x["v"].dtype)
    x["h0"] = x["h0"] * np.float32(c)
    arrays = dict(q=x["q"], k=x["k"], v=x["v"], g_raw=x["g_raw"], beta=x["beta"],
                  A_log=x["A_log"], dt_bias=x["dt_bias"], state=x["h0"],
                  o=np.empty((N, TT, H, V), numpy_dtype("bf16")))
    _REFS.put({n: arrays[n] for n in ("q", "k", "v", "g_raw", "beta", "state")},
              {"o": (o * c).astype(np.float32), "state": (ht * c).astype(np.float32)})
    return arrays


def reference(q, k, v, g_raw, beta, A_log, dt_bias, state):
    cached = _REFS.get(dict(q=q, k=k, v=v, g_raw=g_raw, beta=beta, state=state))
    if cached is not None:
        return cached
    o, ht = R.forward(q, k, v, g_raw, beta, A_log, dt_bias, state, method="recurrent")
    return {"o": o.astype(np.float32), "state": ht.astype(np.float32)}


def constraints(N, H, TT=1):
    out = []
    if not 1 <= TT <= MAX_TOKENS:
        out.append(f"TT={TT} tokens per sequence must be in [1, {MAX_TOKENS}] (decode)")
    if N < 1 or H < 1 or N > 65535 or H > 65535:
        out.append(f"N={N} and H={H} must be in [1, 65535] (grid dimensions)")
    elif N * H * K * V >= 1 << 32:
        out.append(f"N={N}, H={H}: the state must hold fewer than 2^32 elements (32-bit element "
                   f"offsets)")
    return out


def _bytes(N, H, TT=1):
    """The state read and written, the tokens' q, k, g_raw, v and beta read, o written."""
    return N * H * (2 * K * V * 4 + TT * (2 * (3 * K + V) + 2 + 2 * V))


def _flops(N, H, TT=1):
    """Per token and head: decay, S'^T k, S'^T q, the rank-1 update (2 K V each)."""
    return N * H * TT * 8 * K * V


SUITE = T.suite(
    kda_decode, inputs=inputs, reference=reference, outputs=["o", "state"], inplace=["state"],
    constraints=constraints,
    cases=[
        T.case("n2_h2_t1", N=2, H=2, TT=1),
        T.case("n1_h3_t4_deep", N=1, H=3, TT=4, gate="deep"),     # saturated gates
        T.case("n3_h1_t3_slow", N=3, H=1, TT=3, gate="slow"),
        # 1 GiB of state read and written: HBM bound (tag "main": benchmarks/kda_bench.sh)
        T.case("n256_h64_t1", N=256, H=64, TT=1, small=False, tags=("main",)),
        T.case("n128_h96_t1", N=128, H=96, TT=1, small=False, tags=("main",)),
        T.case("n64_h64_t4", N=64, H=64, TT=4, small=False, tags=("main",)),
        T.case("n1024_h32_t2", N=1024, H=32, TT=2, small=False, tags=("main",)),
    ],
    # o: bf16 rounding of an f32 result (relative 2^-9) on outputs of RMS in [1, 2); the state:
    # f32 arithmetic whose only approximations are ex2/rcp/rsqrt.approx (~2^-22 relative)
    tolerance={"o": T.tolerance(rtol=2.0 ** -7, atol=1e-2, rms=5e-3),
               "state": T.tolerance(rtol=1e-4, atol=1e-4, rms=1e-5)},
    flops=_flops, bytes=_bytes,
    # FLA's decode kernel on the same buffers: gate and L2 norm fused, the state in place; and
    # a copy of the state's bytes (read and written once, as here), the goal's "copy bandwidth"
    # at this size in the same job (benchmarks/kda_summary.py's decode table)
    baselines=[{"name": "fla.fused_recurrent_kda", "args": dict(
        q="q", k="k", v="v", g="g_raw", beta="beta", A_log="A_log", dt_bias="dt_bias",
        state="state", out="o", l2norm=True)},
        {"name": "torch.copy_like", "args": dict(x="state")}],
)
