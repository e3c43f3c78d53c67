"""The chunked KDA backward split into the pieces its fast kernels compute (issue 18, docs/TUNING.md
KDA item 5): the contract between the kernels, as numpy references. Not a kernel module (no
suite): each kernel of the split is checked against the piece here that it computes, and the
pieces together against `kda_ref._chunked_backward` / `_recurrent_backward` (equal to ~1e-13).

Per sequence and head (normalized q, k, the gate g, beta; chunks of C = 64 tokens; QE = scale q
exp(G), KE = k exp(G), KL = k exp(G_C - G), the pairwise products M, A and Tb = (I + A)^-1
Diag(beta) of kda_ref.chunked):

1. `chunk_states` (a forward pass: kda_fwd with a constant that stores S0, or kda_bwd's pass 1):
   S0 of every chunk, the only state the backward keeps (serial over chunks).
2. `chunk_reverse` (one CTA per (value slice, head, sequence), dS^T on chip, serial over chunks
   from the last): with dS1 the gradient of the chunk's final state,

       R = V - KE S0,  Delta = Tb R,  dDelta = M^T dO + KL dS1,  dR = Tb^T dDelta  (= dv)
       dS0 = QE^T dO + Diag(exp(G_C)) dS1 - KE^T dR                      (to the previous chunk)

   and what piece 3 needs, every product that contracts over the value dimension (so piece 3
   never reads a [C, V] or [K, V] tile): dqe = dO S0^T, dke = -dR S0^T, dkl = Delta dS1^T
   ([C, K] each), dm = lower(dO Delta^T), dtb = lower(dDelta R^T) ([C, C] each) and dgs =
   exp(G_C) rowsum(dS1 o S0) ([K]). Per chunk and head 2 C^2 + 3 C K + K floats (131 KB in f32):
   at T8192 H96, 1.6 GB written and read once (~0.75 ms of HBM at 4.25 TB/s; bf16 halves it).
3. `chunk_local` (one CTA per chunk and head, all chunks in parallel): from those and the
   chunk's own q, k, g, beta (its prep recomputed: norms, gate, A, (I + A)^-1), the gradients of
   normalized q, k, of g and of beta:

       dT = dtb Diag(beta),  dbeta = colsum(dtb o T) + rowsum(dA o P),  P = A / beta (rows)
       dA = -strict_lower(T^T dT T^T),  dP = Diag(beta) dA
       the pairwise products X[i, j] = sum_d a_i b_j exp(G_i - G_j) (P: a = b = k; M: a = q
       scaled, b = k): da = (dX (b exp(-G))) o exp(G), db = (dX^T (a exp(G))) o exp(-G),
       dG += a o da - b o db;  dG += dqe o QE + dke o KE - dkl o KL;  dG[C - 1] += dgs +
       colsum(dkl o KL);  dg = reverse cumulative sum of dG within the chunk

   then (in the kernel, as kda_bwd does per token) the L2 norms' and the gate's chains and the
   per-channel sums for dA_log and ddt_bias.

Piece 2 as a chain (session 6, kda_bwd_chain*.py): the reverse pass's only serial dependency
is dS0 = Diag(exp(G_C)) dS1 + N dS1 + B with N, B from the chunk's own inputs, so piece 2 splits
into `chain_operands` (2a, all chunks in parallel), `chain` (2b, serial: one [K, K] x [K, V]
product a chunk) and `chunk_pieces` (2c, all chunks in parallel, from S0 and the chained dS1);
piece 3 reads the same PIECES. The forward's state is the same chain with N^T
(`state_operands`), which gives S0 in the chain's precision.

The pairwise products are evaluated here as the kernels must, with the 16-row block references
of kda_chunk.py: for i in block a and j in block b <= a, exp(G_i - G_j) = 2^(G_i - r_a) 2^(r_a -
r_b) 2^(r_b - G_j) with r_a the cumulative log-decay at block a's first row, so every factor is
<= 1 or <= e^75 (the gate's bound -5 over 16 rows) and nothing overflows in float32 under
saturated gates, where exp(G) exp(-G) over 64 rows reaches e^320. `chunk_local(dtype=float32)`
is that claim checked (tests/zoo/test_kda_bwd_split.py).

Layouts: chunked, head first, as kda_ref's internals ([H, n, C, ...]); `split_backward` takes and
returns kda_ref._chunked_backward's (time first), so it is a drop-in for it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

# the zoo is a directory of kernel files, not a package (see kda_fwd.py)
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
import kda_ref as R  # noqa: E402 - after the path that finds it

BLOCK = 16                # rows per block of the block-local decay factors (kda_chunk.NB = 4)
PIECES = ("dqe", "dke", "dkl", "dm", "dtb", "dgs")   # piece 2 -> piece 3, per chunk and head


def _tr(x):
    return np.swapaxes(x, -1, -2)


def _prep(qc, kc, gc, bc):
    """The chunk quantities every piece recomputes (float64, [H, n, C, ...]): G, QE (scale
    included in qc), KE, KL, P = k_i . k_j exp(G_i - G_j) (all i, j), A, T = (I + A)^-1, Tb, M."""
    G = R._cumulative(gc)
    ep, en = np.exp(G), np.exp(-G)
    gl = G[:, :, -1]
    kl = kc * np.exp(gl[:, :, None, :] - G)
    kn_t = np.ascontiguousarray(_tr(kc * en))
    P = (kc * ep) @ kn_t
    A = np.tril(P, -1) * bc[..., :, None]
    eye = np.eye(gc.shape[2])
    Tm = np.linalg.solve(eye + A, np.broadcast_to(eye, A.shape))
    return dict(G=G, gl=gl, ke=kc * ep, qe=qc * ep, kl=kl, P=P, A=A, T=Tm,
                Tb=Tm * bc[..., None, :], M=np.tril((qc * ep) @ kn_t))


def chunk_states(k, v, g, beta, h0, C: int = R.CHUNK) -> np.ndarray:
    """Piece 1: S0 of every chunk of one sequence ([H, n, K, V], float64) and the final state
    (returned second). k, g [T, H, K] normalized and gated, v [T, H, V], beta [T, H]."""
    T_ = len(k)
    n = -(-T_ // C)
    kc, vc, gc, bc = (R._blocks(x, n, C) for x in (k, v, g, beta))
    p = _prep(np.zeros_like(kc), kc, gc, bc)
    S = np.array(h0, np.float64)
    out = np.zeros((S.shape[0], n) + S.shape[1:])
    for i in range(n):
        out[:, i] = S
        delta = p["Tb"][:, i] @ (vc[:, i] - p["ke"][:, i] @ S)
        S = np.exp(p["gl"][:, i])[:, :, None] * S + _tr(p["kl"][:, i]) @ delta
    return out, S


def _same(x):
    return x


def _reverse_body(p, i, vc, doc, S0, dS, out, op_state=_same, op=_same):
    """Chunk i of `chunk_reverse` given S0 (its start state) and dS (the gradient of its final
    state): dv and the PIECES into `out`; returns dR (which the state's update needs)."""
    S, dO, eg = op_state(S0), doc[:, i], np.exp(p["gl"][:, i])
    ke, tb, kl = (op(p[x][:, i]) for x in ("ke", "Tb", "kl"))
    res = vc[:, i] - ke @ S
    delta = op(tb @ op(res))
    dD = _tr(op(p["M"][:, i])) @ dO + kl @ op_state(dS)
    dR = _tr(tb) @ op(dD)
    out["dv"][:, i] = dR
    out["dqe"][:, i], out["dke"][:, i] = dO @ _tr(S), -op(dR) @ _tr(S)
    out["dkl"][:, i] = delta @ _tr(op_state(dS))
    out["dm"][:, i] = np.tril(dO @ _tr(delta))
    out["dtb"][:, i] = np.tril(op(dD) @ _tr(op(res)))
    out["dgs"][:, i] = (dS * S0).sum(-1) * eg
    return dR


def _reverse_outputs(p, vc):
    return {name: np.zeros(shape) for name, shape in (
        ("dv", vc.shape), ("dqe", p["ke"].shape), ("dke", p["ke"].shape),
        ("dkl", p["ke"].shape), ("dm", p["A"].shape), ("dtb", p["A"].shape),
        ("dgs", p["gl"].shape))}


def chunk_reverse(q, k, v, g, beta, S0, scale, do, dht, C: int = R.CHUNK, op_state=_same,
                  op=_same) -> dict:
    """Piece 2 for one sequence: walking the chunks from the last with dS (the gradient of the
    chunk's final state), {"dv" [H, n, C, V], "dh0" [H, K, V]} and the per-chunk `PIECES`
    ([H, n, ...]: dqe, dke, dkl [C, K]; dm, dtb [C, C]; dgs [K]). S0: `chunk_states`.
    `op_state` (S0, dS) and `op` (every other operand; dO is an input) model how a kernel's
    products round their operands (benchmarks/kda_precision.py: bf16, bf16 hi + lo); both
    default to exact, and the accumulation is float64 either way."""
    T_, H = np.shape(q)[:2]
    n = -(-T_ // C)
    qc, kc, vc, gc, bc, doc = (R._blocks(x, n, C) for x in (q, k, v, g, beta, do))
    p = _prep(qc * scale, kc, gc, bc)
    out = _reverse_outputs(p, vc)
    dS = np.array(dht, np.float64)
    for i in reversed(range(n)):
        dR = _reverse_body(p, i, vc, doc, S0[:, i], dS, out, op_state, op)
        qe, ke = op(p["qe"][:, i]), op(p["ke"][:, i])
        eg = np.exp(p["gl"][:, i])
        dS = _tr(qe) @ doc[:, i] + eg[:, :, None] * dS - _tr(ke) @ op(dR)
    out["dh0"] = dS
    return out


# --- piece 2 as a chain (issue 18, kda_bwd_chain.py): the serial part alone ------------------
#
# dS (the gradient of a chunk's final state) obeys a linear recurrence that never reads S0 or
# V: with dDelta = M^T dO + KL dS1 and dR = Tb^T dDelta,
#
#     dS0 = Diag(exp(G_C)) dS1 + N dS1 + B,   N = -KE^T Tb^T KL  [K, K],
#                                             B = (QE^T - KE^T Tb^T M^T) dO  [K, V],
#
# so piece 2 splits into 2a `chain_operands` (exp(G_C), N, B of every chunk: all chunks in
# parallel), 2b `chain` (the only serial part: one [K, K] x [K, V] product a chunk, whose value
# columns are independent, so any number of CTAs can share a head) and 2c `chunk_pieces`
# (chunk_reverse's dv and PIECES of every chunk from S0 and the chained dS1: in parallel).
# Piece 3 reads the same PIECES as before.

def chain_operands(q, k, g, beta, scale, do, C: int = R.CHUNK) -> dict:
    """Piece 2a for one sequence ([T, H, ...] normalized q, k, the gate g, beta; dO): per chunk
    {"eg": exp(G_C) [H, n, K], "N": -KE^T Tb^T KL [H, n, K, K], "B": (QE^T - KE^T Tb^T M^T) dO
    [H, n, K, V]} (float64). Rows past the sequence are zero in KE, KL, QE and dO, so they
    add nothing; exp(G_C) of a tail chunk is its last valid row's."""
    T_ = len(q)
    n = -(-T_ // C)
    qc, kc, gc, bc, doc = (R._blocks(x, n, C) for x in (q, k, g, beta, do))
    p = _prep(qc * scale, kc, gc, bc)
    w = _tr(p["ke"]) @ _tr(p["Tb"])                     # KE^T Tb^T [K, C]
    return {"eg": np.exp(p["gl"]), "N": -(w @ p["kl"]),
            "B": (_tr(p["qe"]) - w @ _tr(p["M"])) @ doc}


def state_operands(k, v, g, beta, C: int = R.CHUNK) -> dict:
    """The forward's state recurrence in the chain's form: S1 = Diag(exp(G_C)) S0 + N S0 + B
    with N = -KL^T Tb KE (the transpose of chain_operands' N) and B = KL^T Tb V, per chunk
    ({"eg", "N", "B"} [H, n, ...], float64), so `chain` walked from the first chunk gives every
    chunk's S0 (kda_bwd_chain.py with FORWARD=1: piece 1 in the chain's precision)."""
    T_ = len(k)
    n = -(-T_ // C)
    kc, vc, gc, bc = (R._blocks(x, n, C) for x in (k, v, g, beta))
    p = _prep(np.zeros_like(kc), kc, gc, bc)
    w = _tr(p["kl"]) @ p["Tb"]                          # KL^T Tb [K, C]
    return {"eg": np.exp(p["gl"]), "N": -(w @ p["ke"]), "B": w @ vc}


def chain(eg, N, B, dht, op_state=_same, op=_same):
    """Piece 2b for one sequence: (dS1 [H, n, K, V], the gradient of every chunk's final state,
    and dh0 [H, K, V]) from `chain_operands`' arrays and dht [H, K, V]: dS <- exp(G_C) dS +
    N dS + B from the last chunk. `op_state` (dS) and `op` (N) round the product's operands as
    `chunk_reverse`'s do (exp(G_C) and B enter in full precision, as in the kernel)."""
    n = N.shape[1]
    dS = np.array(dht, np.float64)
    dS1 = np.zeros(B.shape)
    for i in reversed(range(n)):
        dS1[:, i] = dS
        dS = eg[:, i][:, :, None] * dS + op(N[:, i]) @ op_state(dS) + B[:, i]
    return dS1, dS


def chunk_pieces(q, k, v, g, beta, S0, scale, do, dS1, C: int = R.CHUNK) -> dict:
    """Piece 2c for one sequence: `chunk_reverse`'s dv and PIECES ([H, n, ...]) of every chunk
    at once from S0 (`chunk_states`) and dS1 (`chain`): nothing crosses chunks."""
    T_ = len(q)
    n = -(-T_ // C)
    qc, kc, vc, gc, bc, doc = (R._blocks(x, n, C) for x in (q, k, v, g, beta, do))
    p = _prep(qc * scale, kc, gc, bc)
    out = _reverse_outputs(p, vc)
    for i in range(n):
        _reverse_body(p, i, vc, doc, S0[:, i], dS1[:, i], out)
    return out


def _block_refs(G):
    """r_a: the cumulative log-decay at each 16-row block's first row, [..., C / 16, K], and
    the within-block offsets G_i - r_a of every row ([..., C, K], each in [-75, 0])."""
    refs = G[..., ::BLOCK, :]
    return refs, G - np.repeat(refs, BLOCK, axis=-2)


def pair_grads(dX, a, b, G, dtype=np.float64):
    """da, db, dG of X[i, j] = sum_d a_i b_j exp(G_i - G_j) (j <= i; dX lower triangular) with
    the block-local factors (module docstring): L = 2^(G_i - r_a) <= 1, D = 2^(r_b - G_j) <=
    e^75, F_ab = 2^(r_a - r_b) <= 1 (b < a), evaluated in `dtype` (the kernels' float32).
    [..., C, C] and [..., C, K] inputs; C a multiple of 16."""
    C = G.shape[-2]
    if C % BLOCK:
        raise ValueError(f"kda_bwd_split.pair_grads: the chunk ({C} rows) must be a multiple of "
                         f"{BLOCK} rows")
    refs, off = _block_refs(np.asarray(G, np.float64))
    L, D = np.exp(off).astype(dtype), np.exp(-off).astype(dtype)
    dX, a, b = (np.asarray(x).astype(dtype) for x in (dX, a, b))
    da, db = np.zeros_like(a), np.zeros_like(b)
    nb = C // BLOCK
    for ia in range(nb):
        ra = slice(ia * BLOCK, ia * BLOCK + BLOCK)
        for ib in range(ia + 1):
            rb = slice(ib * BLOCK, ib * BLOCK + BLOCK)
            F = np.exp(refs[..., ia, None, :] - refs[..., ib, None, :]).astype(dtype)
            dXab = dX[..., ra, rb]
            da[..., ra, :] += dXab @ (b[..., rb, :] * D[..., rb, :] * F)
            db[..., rb, :] += _tr(dXab) @ (a[..., ra, :] * L[..., ra, :] * F)
    da *= L
    db *= D
    return da, db, a * da - b * db


def chunk_local(q, k, g, beta, scale, pieces: dict, dtype=np.float64, C: int = R.CHUNK):
    """Piece 3 for one sequence: (dq, dk, dg, dbeta) of the normalized q, k, the gate g and beta
    (time first, as kda_ref._chunked_backward returns them) from `pieces` (chunk_reverse's
    PIECES). The chunk's own quantities (G, T, P's diagonal blocks) are float64 here; the
    products with decay factors run in `dtype`."""
    T_, H = np.shape(q)[:2]
    n = -(-T_ // C)
    qc, kc, gc, bc = (R._blocks(x, n, C) for x in (q, k, g, beta))
    qc = qc * scale
    p = _prep(qc, kc, gc, bc)
    G = p["G"]
    dtb = pieces["dtb"]
    dT = dtb * bc[..., None, :]
    dbeta = (dtb * p["T"]).sum(-2)
    dA = -np.tril(_tr(p["T"]) @ dT @ _tr(p["T"]), -1)
    dbeta += (dA * p["P"]).sum(-1)
    dP = dA * bc[..., :, None]
    ep = np.exp(G).astype(dtype)
    dq = np.asarray(pieces["dqe"]).astype(dtype) * ep
    dk = (np.asarray(pieces["dke"]).astype(dtype) * ep
          + np.asarray(pieces["dkl"]).astype(dtype)
          * np.exp(p["gl"][:, :, None, :] - G).astype(dtype))
    dG = (pieces["dqe"] * p["qe"] + pieces["dke"] * p["ke"] - pieces["dkl"] * p["kl"])
    dG = dG.astype(dtype)
    for dX, a in ((dP, kc), (pieces["dm"], qc)):
        da, db, dg_ = pair_grads(dX, a, kc, G, dtype)
        if a is kc:
            dk = dk + da + db
        else:
            dq, dk = dq + da, dk + db
        dG = dG + dg_
    dG[..., -1, :] += (pieces["dgs"] + (pieces["dkl"] * p["kl"]).sum(-2)).astype(dtype)
    dg = np.flip(np.cumsum(np.flip(dG, -2), -2), -2)

    def unblock(x):
        return np.moveaxis(x, 0, 2).reshape((n * C, H) + x.shape[3:])[:T_]
    return (unblock(dq * scale), unblock(dk), unblock(dg),
            unblock(dbeta[..., None])[..., 0])


def split_backward(q, k, v, g, beta, h0, scale, do, dht, C: int = R.CHUNK):
    """The three pieces in order for one sequence: the same signature and results as
    kda_ref._chunked_backward (dq, dk, dv, dg, dbeta, dh0), float64."""
    S0, _ = chunk_states(k, v, g, beta, h0, C)
    rev = chunk_reverse(q, k, v, g, beta, S0, scale, do, dht, C)
    dq, dk, dg, dbeta = chunk_local(q, k, g, beta, scale, {n: rev[n] for n in PIECES}, C=C)
    T_, H = np.shape(q)[:2]
    n = -(-T_ // C)
    dv = np.moveaxis(rev["dv"], 0, 2).reshape((n * C, H) + rev["dv"].shape[3:])[:T_]
    return dq, dk, dv, dg, dbeta, rev["dh0"]
