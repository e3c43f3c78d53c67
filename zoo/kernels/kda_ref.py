"""Kimi Delta Attention (KDA): the float64 references and the inputs of the zoo's KDA kernels
(kda_decode.py, kda_fwd.py). No kernel here: this module is what the kernels are checked against.

The math (per sequence and head; state S in R^{K x V}, scale = K^-1/2):

    S'_t = Diag(exp(g_t)) S_{t-1}                    g_t in R^K: per-channel log-decay
    S_t  = S'_t + beta_t k_t (v_t - S'_t^T k_t)^T      beta_t in (0, 1)
    o_t  = scale * S_t^T q_t

with the gate and the normalization fused as in FLA's ``chunk_kda(..., use_qk_l2norm_in_kernel=
True, use_gate_in_kernel=True, safe_gate=True, lower_bound=-5)``:

    g_t = -5 * sigmoid(exp(A_log[h]) * (g_raw_t + dt_bias[h]))     (``safe_gate``)
    q_t = q_raw_t / sqrt(|q_raw_t|^2 + 1e-6), the same for k          (L2 normalization)

- `recurrent`: token by token (the definition; FLA's ``naive_recurrent_kda``).
- `chunked`: chunks of C tokens (FLA's ``naive_chunk_kda``, the algorithm the kernels use):
  with the within-chunk cumulative log-decay G_i = g_1 + ... + g_i (per channel) and the state
  S0 at the chunk's start, the chunk's "new values" Delta = U - W S0 solve a unit lower
  triangular system (the UT/WY transform):

      A[i, j] = beta_i sum_d k_i[d] k_j[d] exp(G_i[d] - G_j[d])      (j < i)
      Tb      = (I + A)^-1 Diag(beta)
      Delta   = Tb (V - (K * exp(G)) S0)
      O       = scale ((Q * exp(G)) S0 + M Delta),  M[i, j] = sum_d q_i k_j exp(G_i - G_j)  (j <= i)
      S       = Diag(exp(G_C)) S0 + (K * exp(G_C - G))^T Delta

  In float64 exp(+-G) cannot overflow here (the gate bounds G to [-5 C, 0]), so the reference
  factorizes exp(G_i - G_j) = exp(G_i) exp(-G_j) directly; the kernels cannot (see kda_fwd.py).
- `backward`: the gradient of sum(o * do) + sum(ht * dht) with respect to every input (q_raw,
  k_raw, v, g_raw, beta, h0, A_log, dt_bias), by reverse-mode differentiation by hand: of the
  recurrence (tests check it against finite differences), or of the chunked form (what a
  backward kernel computes; tests check it against the recurrence).

Layouts (FLA's): q, k, g_raw [B, T, H, K]; v [B, T, H, V]; beta [B, T, H]; A_log [H]; dt_bias
[H, K]; h0 and ht [N, H, K, V]. Variable-length packs (``cu_seqlens``, N + 1 offsets) have B = 1
and N sequences; otherwise N = B.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from tirxh.api import numpy_dtype

LOWER_BOUND = -5.0   # safe_gate's bound: every per-step log-decay is in [-5, 0)
L2_EPS = 1e-6        # FLA's l2norm epsilon
CHUNK = 64


# --- the gate, the normalization, the sequences of a batch ------------------------------------

def safe_gate(g_raw, A_log, dt_bias, lower_bound: float = LOWER_BOUND) -> np.ndarray:
    """g = lower_bound * sigmoid(exp(A_log) * (g_raw + dt_bias)), float64; g_raw [..., H, K],
    A_log [H], dt_bias [H, K]. sigmoid(z) = (1 + tanh(z / 2)) / 2 (no overflow for any z)."""
    z = np.exp(np.asarray(A_log, np.float64))[:, None] * (
        np.asarray(g_raw, np.float64) + np.asarray(dt_bias, np.float64))
    return lower_bound * 0.5 * (1.0 + np.tanh(0.5 * z))


def l2norm(x, eps: float = L2_EPS) -> np.ndarray:
    """x / sqrt(|x|^2 + eps) along the last axis, float64."""
    x = np.asarray(x, np.float64)
    return x / np.sqrt((x * x).sum(-1, keepdims=True) + eps)


def spans(B: int, T: int, cu_seqlens=None) -> list:
    """The sequences as (batch row, first token, end token): every row for fixed lengths, the
    ``cu_seqlens`` ranges of the single row of a varlen pack."""
    if cu_seqlens is None:
        return [(b, 0, T) for b in range(B)]
    cu = [int(x) for x in np.asarray(cu_seqlens)]
    if B != 1:
        raise ValueError(f"kda: a varlen pack (cu_seqlens) has B = 1, got B = {B}")
    if cu[0] != 0 or cu[-1] != T or any(b < a for a, b in zip(cu, cu[1:])):
        raise ValueError(f"kda: cu_seqlens must rise from 0 to T = {T}, got {cu}")
    return [(0, a, b) for a, b in zip(cu, cu[1:])]


def _prepare(q, k, g_raw, beta, A_log, dt_bias, b, t0, t1):
    """Normalized q, k, the gate g and beta of tokens [t0, t1) of row b, float64, time first."""
    return (l2norm(q[b, t0:t1]), l2norm(k[b, t0:t1]),
            safe_gate(g_raw[b, t0:t1], A_log, dt_bias),
            np.asarray(beta[b, t0:t1], np.float64))


# --- forward -----------------------------------------------------------------------------------

def recurrent(q, k, v, g, beta, h0, scale: float):
    """Token by token for one sequence: q, k, g [T, H, K] (normalized, gated), v [T, H, V],
    beta [T, H], h0 [H, K, V] -> (o [T, H, V], S_T [H, K, V]), float64."""
    S = np.array(h0, np.float64)
    o = np.zeros(np.shape(v), np.float64)
    for t in range(len(q)):
        S *= np.exp(g[t])[:, :, None]
        e = np.einsum("hk,hkv->hv", k[t], S)
        S += k[t][:, :, None] * (beta[t][:, None] * (v[t] - e))[:, None, :]
        o[t] = scale * np.einsum("hk,hkv->hv", q[t], S)
    return o, S


def _blocks(x, n: int, C: int):
    """[T, H, ...] -> [H, n, C, ...], zero-padded to n chunks of C tokens (contiguous)."""
    x = np.asarray(x, np.float64)
    pad = np.zeros((n * C - len(x),) + x.shape[1:])
    x = np.concatenate([x, pad]) if len(pad) else x
    return np.ascontiguousarray(np.moveaxis(x.reshape((n, C) + x.shape[1:]), 2, 0))


def _cumulative(gc):
    """The within-chunk cumulative log-decay G of gates blocked [H, n, C, K]."""
    G = np.cumsum(gc, axis=2)
    if G.min(initial=0.0) < -700:
        raise ValueError(f"kda.chunked: a chunk's cumulative log-decay reaches {G.min():.4g}: "
                         f"exp(-G) overflows float64 (gates must be bounded, |g| <= 700/C)")
    return G


def chunked(q, k, v, g, beta, h0, scale: float, C: int = CHUNK):
    """The same sequence in chunks of C tokens (the last one zero-padded: k = q = v = g = beta =
    0 changes nothing): the UT/WY form of the module docstring, float64. Everything within a
    chunk is computed for all chunks at once (batched over heads and chunks); only the state
    passes from chunk to chunk."""
    T, H = np.shape(q)[:2]
    n = -(-T // C)
    qc, kc, vc, gc, bc = (_blocks(x, n, C) for x in (q, k, v, g, beta))
    G = _cumulative(gc)
    ep = np.exp(G)
    kp, qp = kc * ep, qc * ep
    kn_t = np.ascontiguousarray(np.swapaxes(kc * np.exp(-G), -1, -2))  # BLAS wants contiguous
    A = np.tril(kp @ kn_t, -1) * bc[..., :, None]
    eye = np.eye(C)
    Tb = np.linalg.solve(eye + A, np.broadcast_to(eye, A.shape)) * bc[..., None, :]
    M = np.tril(qp @ kn_t)
    W, U = Tb @ kp, Tb @ vc                                   # Delta = U - W S0
    gl = G[:, :, -1]                                          # [H, n, K]
    kl_t = np.ascontiguousarray(np.swapaxes(kc * np.exp(gl[:, :, None, :] - G), -1, -2))
    S = np.array(h0, np.float64)
    o = np.zeros((H, n, C, vc.shape[-1]))
    for i in range(n):
        delta = U[:, i] - W[:, i] @ S
        o[:, i] = scale * (qp[:, i] @ S + M[:, i] @ delta)
        S = np.exp(gl[:, i])[:, :, None] * S + kl_t[:, i] @ delta
    return np.moveaxis(o, 0, 2).reshape(n * C, H, -1)[:T], S


def forward(q, k, v, g_raw, beta, A_log, dt_bias, h0, cu_seqlens=None, scale=None,
            method: str = "chunked", chunk: int = CHUNK, heads: int = 8):
    """The KDA forward of a batch from the kernels' raw inputs (module docstring's layouts):
    (o [B, T, H, V], ht [N, H, K, V]), float64. `method`: "chunked" or "recurrent". Groups of
    `heads` heads run on a thread pool (numpy's large array operations release the GIL; a
    group bounds the memory of the batched chunked form)."""
    if method not in ("chunked", "recurrent"):
        raise ValueError(f"kda.forward: method must be 'chunked' or 'recurrent', got {method!r}")
    B, T, H, K = np.shape(q)
    scale = K ** -0.5 if scale is None else scale
    o = np.zeros(np.shape(v), np.float64)
    ht = np.zeros(np.shape(h0), np.float64)

    def one(n, b, t0, t1, hs):
        qn, kn, gn, bn = _prepare(q[:, :, hs], k[:, :, hs], g_raw[:, :, hs], beta[:, :, hs],
                                  A_log[hs], dt_bias[hs], b, t0, t1)
        vn = np.asarray(v[b, t0:t1, hs], np.float64)
        fn = chunked if method == "chunked" else recurrent
        args = (chunk,) if method == "chunked" else ()
        o[b, t0:t1, hs], ht[n, hs] = fn(qn, kn, vn, gn, bn, h0[n, hs], scale, *args)

    work = [(n, b, t0, t1, slice(i, min(i + heads, H)))
            for n, (b, t0, t1) in enumerate(spans(B, T, cu_seqlens)) for i in range(0, H, heads)]
    with ThreadPoolExecutor(max_workers=max(1, min(len(work), os.cpu_count() or 1))) as pool:
        for f in [pool.submit(one, *w) for w in work]:
            f.result()
    return o, ht


# --- backward ----------------------------------------------------------------------------------

def _recurrent_backward(q, k, v, g, beta, h0, scale, do, dht):
    """Reverse mode through `recurrent` for one sequence (normalized, gated inputs): returns
    dq, dk, dv, dg, dbeta, dh0 with respect to those inputs. The states S_0 .. S_T are kept
    (float64, T + 1 of them: fine for the small cases the reference serves)."""
    T = len(q)
    states = [np.array(h0, np.float64)]
    for t in range(T):
        S = states[-1] * np.exp(g[t])[:, :, None]
        e = np.einsum("hk,hkv->hv", k[t], S)
        states.append(S + k[t][:, :, None] * (beta[t][:, None] * (v[t] - e))[:, None, :])
    dq, dk, dg = (np.zeros(np.shape(q)) for _ in range(3))
    dv, dbeta = np.zeros(np.shape(v)), np.zeros(np.shape(beta))
    dS = np.array(dht, np.float64)
    for t in reversed(range(T)):
        decay = np.exp(g[t])[:, :, None]
        P = decay * states[t]                              # S'_t
        e = np.einsum("hk,hkv->hv", k[t], P)
        d = beta[t][:, None] * (v[t] - e)                  # the new value delta_t
        dS += scale * q[t][:, :, None] * do[t][:, None, :]  # o_t = scale S_t^T q_t
        dq[t] = scale * np.einsum("hkv,hv->hk", states[t + 1], do[t])
        dd = np.einsum("hkv,hk->hv", dS, k[t])             # S_t = P + k d^T
        dk[t] = np.einsum("hkv,hv->hk", dS, d)
        dbeta[t] = (dd * (v[t] - e)).sum(-1)
        dv[t] = beta[t][:, None] * dd
        de = -beta[t][:, None] * dd                        # d = beta (v - P^T k)
        dP = dS + k[t][:, :, None] * de[:, None, :]
        dk[t] += np.einsum("hkv,hv->hk", P, de)
        dg[t] = (dP * P).sum(-1)                           # P = exp(g) S_{t-1}
        dS = decay * dP
    return dq, dk, dv, dg, dbeta, dS


def _chunked_backward(q, k, v, g, beta, h0, scale, do, dht, C: int = CHUNK):
    """Reverse mode through `chunked` for one sequence (what a backward kernel computes; the
    same results as `_recurrent_backward`). Per chunk, with dO and the gradient dS1 of the
    chunk's final state (QG = scale q exp(G), KE = k exp(G), KL = k exp(G_C - G)):

        dDelta = M^T dO + KL dS1          dR = Tb^T dDelta (= dV)
        dS0 = QG^T dO + Diag(exp(G_C)) dS1 - KE^T dR          (to the previous chunk)
        dM = lower(dO Delta^T), dTb = lower(dDelta R^T), dA = -strict_lower(T^T dTb Diag(beta) T^T)
        dQG = dO S0^T, dKE = -dR S0^T, dKL = Delta dS1^T

    and the pairwise products X[i, j] = sum_d a_i b_j exp(G_i - G_j) (A / beta and M) give
    da = (dX (b exp(-G))) exp(G), db = (dX^T (a exp(G))) exp(-G), dG += a da - b db; dg is the
    reverse cumulative sum of dG within the chunk."""
    T, H = np.shape(q)[:2]
    n = -(-T // C)
    qc, kc, vc, gc, bc, doc = (_blocks(x, n, C) for x in (q, k, v, g, beta, do))
    qc = qc * scale
    G = _cumulative(gc)
    ep, en = np.exp(G), np.exp(-G)
    gl = G[:, :, -1]
    kl = kc * np.exp(gl[:, :, None, :] - G)
    ke, qe = kc * ep, qc * ep
    kn_t = np.ascontiguousarray(np.swapaxes(kc * en, -1, -2))
    P = ke @ kn_t                                             # k_i . k_j exp(G_i - G_j)
    A = np.tril(P, -1) * bc[..., :, None]
    eye = np.eye(C)
    Tm = np.linalg.solve(eye + A, np.broadcast_to(eye, A.shape))
    Tb = Tm * bc[..., None, :]
    M = np.tril(qe @ kn_t)
    states = [np.array(h0, np.float64)]                      # S0 of every chunk, then S_T
    for i in range(n):
        delta = Tb[:, i] @ (vc[:, i] - ke[:, i] @ states[-1])
        states.append(np.exp(gl[:, i])[:, :, None] * states[-1]
                      + np.swapaxes(kl[:, i], -1, -2) @ delta)
    dq, dk, dv, dG = (np.zeros_like(x) for x in (qc, kc, vc, gc))
    dbeta = np.zeros_like(bc)
    dS = np.array(dht, np.float64)
    tr = lambda x: np.swapaxes(x, -1, -2)                     # noqa: E731 - a local shorthand
    for i in reversed(range(n)):
        S0, dO = states[i], doc[:, i]
        R = vc[:, i] - ke[:, i] @ S0
        delta = Tb[:, i] @ R
        dD = tr(M[:, i]) @ dO + kl[:, i] @ dS
        dR = tr(Tb[:, i]) @ dD
        dv[:, i] = dR
        dM = np.tril(dO @ tr(delta))
        dTb = np.tril(dD @ tr(R))
        dT = dTb * bc[:, i, None, :]
        dbeta[:, i] = (dTb * Tm[:, i]).sum(-2)
        dA = -np.tril(tr(Tm[:, i]) @ dT @ tr(Tm[:, i]), -1)
        dbeta[:, i] += (dA * P[:, i]).sum(-1)
        dP = dA * bc[:, i, :, None]
        dke, dqe, dkl = -dR @ tr(S0), dO @ tr(S0), delta @ tr(dS)
        dgl = (dS * S0).sum(-1) * np.exp(gl[:, i]) + (dkl * kl[:, i]).sum(-2)
        dS = tr(qe[:, i]) @ dO + np.exp(gl[:, i])[:, :, None] * dS - tr(ke[:, i]) @ dR
        k_, e_p, e_n = kc[:, i], ep[:, i], en[:, i]
        g_ = dke * ke[:, i] + dqe * qe[:, i] - dkl * kl[:, i]
        dk_ = dke * e_p + dkl * np.exp(gl[:, i, None, :] - G[:, i])
        dq_ = dqe * e_p
        for dX, a, dA_ in ((dP, k_, "k"), (dM, qc[:, i], "q")):   # the pairwise products
            da = (dX @ (k_ * e_n)) * e_p
            db = (tr(dX) @ (a * e_p)) * e_n
            if dA_ == "k":
                dk_ = dk_ + da + db
            else:
                dq_ = dq_ + da
                dk_ = dk_ + db
            g_ = g_ + a * da - k_ * db
        g_[:, -1] += dgl
        dq[:, i], dk[:, i] = dq_ * scale, dk_
        dG[:, i] = np.flip(np.cumsum(np.flip(g_, 1), 1), 1)  # dg: reverse cumulative sum

    def unblock(x):
        return np.moveaxis(x, 0, 2).reshape((n * C, H) + x.shape[3:])[:T]
    return (unblock(dq), unblock(dk), unblock(dv), unblock(dG), unblock(dbeta[..., None])[..., 0],
            dS)


def _l2norm_backward(x, dy, eps: float = L2_EPS):
    """d/dx of y = x r, r = (|x|^2 + eps)^-1/2: r (dy - y (y . dy))."""
    x = np.asarray(x, np.float64)
    r = 1.0 / np.sqrt((x * x).sum(-1, keepdims=True) + eps)
    y = x * r
    return r * (dy - y * (y * dy).sum(-1, keepdims=True))


def backward(q, k, v, g_raw, beta, A_log, dt_bias, h0, do, dht=None, cu_seqlens=None,
             scale=None, method: str = "recurrent", heads: int = 4) -> dict:
    """The gradient of sum(o * do) + sum(ht * dht) (float64) with respect to the kernels' raw
    inputs: {"dq", "dk", "dv", "dg" (of g_raw), "dbeta", "dh0", "dA_log", "ddt_bias"};
    `method` "recurrent" (token by token) or "chunked" (the chunked algorithm's reverse).
    Groups of `heads` heads run on a thread pool, as `forward`'s do (heads are independent; a
    group walks every sequence, so its dA_log / ddt_bias sums have one writer): a T = 8192,
    H = 64 chunked backward took 266 s in one group on 2 cores."""
    if method not in ("chunked", "recurrent"):
        raise ValueError(f"kda.backward: method must be 'chunked' or 'recurrent', "
                         f"got {method!r}")
    inner = _chunked_backward if method == "chunked" else _recurrent_backward
    B, T, H, K = np.shape(q)
    scale = K ** -0.5 if scale is None else scale
    dht = np.zeros(np.shape(h0)) if dht is None else dht
    out = {n: np.zeros(np.shape(a)) for n, a in (("dq", q), ("dk", k), ("dv", v), ("dg", g_raw),
                                                 ("dbeta", beta), ("dh0", h0),
                                                 ("dA_log", A_log), ("ddt_bias", dt_bias))}
    a = np.exp(np.asarray(A_log, np.float64))[:, None]                 # [H, 1]
    seqs = list(enumerate(spans(B, T, cu_seqlens)))

    def group(hs):
        for n, (b, t0, t1) in seqs:
            qn, kn, gn, bn = _prepare(q[:, :, hs], k[:, :, hs], g_raw[:, :, hs],
                                      beta[:, :, hs], A_log[hs], dt_bias[hs], b, t0, t1)
            vn = np.asarray(v[b, t0:t1, hs], np.float64)
            dq, dk, dv, dg, dbeta, dh0 = inner(
                qn, kn, vn, gn, bn, h0[n, hs], scale,
                np.asarray(do[b, t0:t1, hs], np.float64), dht[n, hs])
            out["dq"][b, t0:t1, hs] = _l2norm_backward(q[b, t0:t1, hs], dq)
            out["dk"][b, t0:t1, hs] = _l2norm_backward(k[b, t0:t1, hs], dk)
            out["dv"][b, t0:t1, hs], out["dbeta"][b, t0:t1, hs] = dv, dbeta
            out["dh0"][n, hs] = dh0
            # g = lb * sigmoid(z), z = a (g_raw + dt_bias): dg/dz = lb * s (1 - s)
            z = a[hs] * (np.asarray(g_raw[b, t0:t1, hs], np.float64)
                         + np.asarray(dt_bias[hs], np.float64))
            s = 0.5 * (1.0 + np.tanh(0.5 * z))
            dz = dg * LOWER_BOUND * s * (1.0 - s)
            out["dg"][b, t0:t1, hs] = dz * a[hs]
            out["ddt_bias"][hs] += (dz * a[hs]).sum(0)
            out["dA_log"][hs] += (dz * z).sum((0, 2))

    work = [slice(i, min(i + heads, H)) for i in range(0, H, heads)]
    with ThreadPoolExecutor(max_workers=max(1, min(len(work), os.cpu_count() or 1))) as pool:
        for f in [pool.submit(group, hs) for hs in work]:
            f.result()
    return out


# --- inputs ------------------------------------------------------------------------------------

def shape_problems(B: int, T_: int, H: int, lens, grid_axis: str) -> "tuple[list, int]":
    """The shape rules every KDA kernel shares (a varlen pack is one row whose lengths sum to
    T_; positive sizes; one sequence per grid index on `grid_axis`, at most 65535): the
    problems found (for a suite's `constraints`) and the number of sequences N."""
    out = []
    if lens is not None and (B != 1 or sum(lens) != T_ or min(lens) < 0):
        out.append(f"lens={lens!r}: a varlen pack is one row (B=1) of T_={T_} tokens")
    if min(B, T_, H) < 1 or H > 65535:
        out.append(f"B={B}, T_={T_}, H={H} must be positive (H <= 65535)")
    N = B if lens is None else len(lens)
    if N > 65535:
        out.append(f"{N} sequences: at most 65535 (grid {grid_axis})")
    return out, N


GATES = ("mixed", "deep", "slow")


def _gate_params(rng, H: int, K: int, gate: str):
    """(A_log [H], dt_bias [H, K]) for a gate regime: "mixed" (FLA's test distributions: A_log =
    log U(1, 16), dt_bias ~ N(0, 1)), "deep" (half the channels saturated at the -5 bound, i.e.
    a decay of exp(-5) per token, a cumulative -320 over a chunk; the other half near 0: no
    decay), "slow" (every channel near 0: long memory)."""
    if gate not in GATES:
        raise ValueError(f"kda: gate must be one of {GATES}, got {gate!r}")
    A_log = np.log(rng.uniform(1.0, 16.0, H)).astype(np.float32)
    if gate == "mixed":
        dt_bias = rng.standard_normal((H, K))
    elif gate == "deep":
        dt_bias = np.where(rng.random((H, K)) < 0.5, 6.0, -6.0) + rng.standard_normal((H, K))
    else:
        dt_bias = -6.0 + rng.standard_normal((H, K))
    return A_log, dt_bias.astype(np.float32)


def raw_inputs(rng, B: int, T: int, H: int, K: int = 128, V: int = 128, N: "int | None" = None,
               gate: str = "mixed") -> dict:
    """Random raw inputs, bf16 where the kernels read bf16 (q, k, v, g_raw, beta), float32
    otherwise (A_log, dt_bias, h0 for N sequences)."""
    bf16 = numpy_dtype("bf16")
    N = B if N is None else N
    A_log, dt_bias = _gate_params(rng, H, K, gate)
    beta = 1.0 / (1.0 + np.exp(-rng.standard_normal((B, T, H))))
    return dict(q=rng.standard_normal((B, T, H, K), np.float32).astype(bf16),
                k=rng.standard_normal((B, T, H, K), np.float32).astype(bf16),
                v=rng.standard_normal((B, T, H, V), np.float32).astype(bf16),
                g_raw=rng.standard_normal((B, T, H, K), np.float32).astype(bf16),
                beta=beta.astype(np.float32).astype(bf16), A_log=A_log, dt_bias=dt_bias,
                h0=rng.standard_normal((N, H, K, V), np.float32))


def unit_scale(*refs) -> float:
    """The power of two c for which c * min(RMS(ref)) lies in [1, 2): the outputs are linear in
    (v, h0), so scaling both by c (exactly, in bf16 and f32) scales every output by c, and an
    absolute tolerance of 0.5 is then at least as strict as 0.5 x RMS(ref) for each output."""
    rms = min(float(np.sqrt(np.mean(np.square(r)))) for r in refs)
    if not rms > 0:
        raise ValueError("kda.unit_scale: a reference is all zeros")
    return float(2.0 ** -np.floor(np.log2(rms)))


class RefCache:
    """References computed while making inputs (to scale them), kept for the suite's
    ``reference`` call on the same arrays: `put(arrays, outputs)`, `get(arrays)` (identity of
    every array, so a changed input is never served a stale reference). Holds a few entries."""

    def __init__(self, size: int = 4):
        self.size, self.entries = size, []

    def put(self, arrays: dict, outputs: dict) -> None:
        self.entries.append((dict(arrays), outputs))
        del self.entries[:-self.size]

    def get(self, arrays: dict):
        for keyed, outputs in reversed(self.entries):
            if keyed.keys() <= arrays.keys() and all(arrays[n] is a for n, a in keyed.items()):
                return outputs
        return None
