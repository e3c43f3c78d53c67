"""Why FLA's chunk_kda backward runs on bf16 tensor cores while ours needs the bf16 hi + lo split
(issue 18): FLA's formulation (fla-core 0.6.0, fla/ops/kda/chunk_bwd.py and the kernels it
calls; read, not copied) emulated in float64 numpy with its rounding points, beside our KE/KL
reverse pass (benchmarks/kda_precision.py's variants), on kda_precision.py's cases, under the
public backward rule (atol = rtol = 0.01 on every gradient element). CPU only:

    python benchmarks/kda_precision_fla.py            # docs/PERFORMANCE.md's tables (~17 min)
    python benchmarks/kda_precision_fla.py --sites --cases t150_deep,t150_mixed,pack_80_1_30_h2

(2 cores: the T8192 H2 cases take ~12 s a variant; `--sites`, which of FLA's rounding points
matter, ~3 min on the three small cases, `--unscaled` for c = 1; `--variants 'a;b'` a subset.)

FLA's formulation, per chunk of 64 (G the cumulative log-decay from the chunk's start, G_C
its last row; 16-row sub-chunks):
  forward recompute: the pairwise products A = beta_i k_i.k_j exp(G_i - G_j) and M = scale
  q_i.k_j exp(G_i - G_j) per 16 x 16 block with tf32 operands (off-diagonal blocks: both factors
  relative to the row sub-chunk's first row, so both <= 1; diagonal blocks: relative to that row
  minus 15, the factors <= e^15 and <= e^60), T = (I + A)^-1 by forward substitution in f32 on
  the diagonal blocks and tf32 products for the rest, then T and M stored in bf16; W = T (beta k
  exp(G)) and U = T (beta V) from bf16 operands, stored bf16; QG = q exp(G), KG = k exp(G_C - G)
  in bf16 (every factor <= 1).
  forward states: S in f32 across chunks, each chunk's S0 stored bf16 (h), Delta = U - W h
  stored bf16 (v_new), S <- exp(G_C) S + KG^T Delta.
  backward: dM = lower(dO Delta^T) (f32), dV_intra = M^T dO (bf16); the reverse chain keeps dS
  in f32, stores each chunk's dS1 in bf16 (dh), dDelta = KG dh + dV_intra (bf16), dS <- exp(G_C)
  dS + scale QG^T dO - W^T dDelta; then per chunk dq = (dO h^T) exp(G) scale, dk = (Delta dh^T)
  exp(G_C - G), dW = dDelta h^T, dT from dDelta V^T - bf16(dW) bf16(KE)^T, dA = -T^T (dT beta)
  T^T (bf16 operands); the intra-chunk gradients of A and M with the same 16-row references,
  off-diagonal products in tf32, diagonal ones in bf16x3; dg the reverse cumulative sum. Every
  exponential is applied in f32 outside a product, on whichever side keeps it <= 1 (or <= e^60
  on diagonal blocks).
So FLA rounds at least as much as our plain-bf16 pass: the study below says whether that meets
the rule (it does not, at kda_bwd's input scales nor at c = 1) and what tf32 single-pass
products and the split do instead.

Rounding sites (`FLA`: FLA's own assignment; every site absent from a variant is exact):
  qk     the normalized q^, k^ (FLA's l2norm writes them in the input dtype, bf16)
  g      the cumulative gate (f32)
  A      the tf32 operands of A's and M's block products
  solve  the tf32 operands of T's off-diagonal merges
  Astore T and M as stored (bf16)
  wu     W, U and their operands beta k exp(G), beta v (bf16)
  qgkg   QG, KG and KE as product operands (bf16)
  h      each chunk's S0 (bf16)
  vnew   Delta (bf16)
  dh     each chunk's dS1 (bf16)
  dv     dV_intra and dDelta (bf16)
  dw     dW and the dA chain's intermediate operands (bf16)
  intra  the tf32 operands of the intra-chunk backward's off-diagonal products
  diag   the bf16x3 operands of its diagonal products (modelled as hi + lo)
The final gradients FLA returns in the input dtype (bf16): `OUT_CAST` rounds them so.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kda_precision as KP  # noqa: E402 - benchmarks/ is not a package
import kda_precision_ops as KPO  # noqa: E402

R, BW, GRADS = KP.R, KP.BW, KP.GRADS
SUB = 16            # FLA's sub-chunk (BC)
DIAG_SHIFT = 15.0   # FLA's diagonal-block reference: the sub-chunk's first G minus (BC - 1) * 2 / 2
SITES = ("qk", "g", "A", "solve", "Astore", "wu", "qgkg", "h", "vnew", "dh", "dv", "dw", "intra",
         "diag")
OUT_CAST = ("dq", "dk", "dv", "dg", "dbeta")   # returned in bf16 by FLA's autograd


def tf32(x):
    """x rounded to tf32 (10 explicit mantissa bits, round to nearest even, as cvt.rn.tf32.f32),
    back in float64."""
    b = np.asarray(x, np.float32).view(np.uint32)
    b = (b + np.uint32(0xFFF) + ((b >> np.uint32(13)) & np.uint32(1))) & np.uint32(0xFFFFE000)
    return np.asarray(b.view(np.float32), np.float64)


def tf32_truncated(x):
    """x as a tf32 operand read from f32 bits without a conversion (the low 13 bits dropped:
    what mma with .tf32 operands does with raw f32 registers), back in float64."""
    b = np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    return np.asarray(b.view(np.float32), np.float64)


FLA = {"qk": KP.bf16, "g": KP.f32, "A": tf32, "solve": tf32, "Astore": KP.bf16, "wu": KP.bf16,
       "qgkg": KP.bf16, "h": KP.bf16, "vnew": KP.bf16, "dh": KP.bf16, "dv": KP.bf16,
       "dw": KP.bf16, "intra": tf32, "diag": KP.split}
_BF16_SITES = tuple(s for s, f in FLA.items() if f is KP.bf16 and s != "qk")


def _tr(x):
    return np.swapaxes(x, -1, -2)


def _rounder(sites):
    unknown = set(sites) - set(SITES)
    if unknown:
        raise ValueError(f"kda_precision_fla: unknown rounding sites {sorted(unknown)}; known: "
                         f"{', '.join(SITES)}")

    def rd(site, x):
        f = sites.get(site)
        return x if f is None else f(x)
    return rd


def _pairs_fwd(qc, kc, G, rd):
    """M0 = q_i.k_j exp(G_i - G_j) and P = k_i.k_j exp(G_i - G_j) ([..., C, C], j <= i blocks) as
    FLA's intra kernels form them: 16 x 16 blocks, tf32 operands (site A), the factors relative
    to the row sub-chunk's first row (off-diagonal) or that row minus DIAG_SHIFT (diagonal)."""
    C = G.shape[-2]
    M0, P = np.zeros(G.shape[:-1] + (C,)), np.zeros(G.shape[:-1] + (C,))
    for a in range(C // SUB):
        ra = slice(a * SUB, a * SUB + SUB)
        for b in range(a + 1):
            rb = slice(b * SUB, b * SUB + SUB)
            ref = G[..., a * SUB:a * SUB + 1, :] - (DIAG_SHIFT if a == b else 0.0)
            left = np.exp(G[..., ra, :] - ref)
            right = rd("A", kc[..., rb, :] * np.exp(ref - G[..., rb, :]))
            M0[..., ra, rb] = rd("A", qc[..., ra, :] * left) @ _tr(right)
            P[..., ra, rb] = rd("A", kc[..., ra, :] * left) @ _tr(right)
    return M0, P


def _inverse(A, rd):
    """T = (I + A)^-1 for strictly lower A [..., C, C] as FLA's solve: each diagonal 16-block's
    inverse exact (FLA: f32 forward substitution), the off-diagonal blocks merged by products
    with tf32 operands (site solve), in FLA's association."""
    C = A.shape[-1]
    nb = C // SUB
    blk = [slice(i * SUB, i * SUB + SUB) for i in range(nb)]
    eye = np.eye(SUB)
    T = np.zeros_like(A)
    for a in range(nb):
        T[..., blk[a], blk[a]] = np.linalg.solve(eye + A[..., blk[a], blk[a]],
                                                 np.broadcast_to(eye, A[..., :SUB, :SUB].shape))
    for a in range(1, nb):
        Taa = rd("solve", T[..., blk[a], blk[a]])
        for b in range(a - 1, -1, -1):
            if b == a - 1:
                x = rd("solve", Taa @ rd("solve", A[..., blk[a], blk[b]]))
                T[..., blk[a], blk[b]] = -(x @ rd("solve", T[..., blk[b], blk[b]]))
            else:
                s = sum(rd("solve", A[..., blk[a], blk[c]]) @ rd("solve", T[..., blk[c], blk[b]])
                        for c in range(b, a))
                T[..., blk[a], blk[b]] = -(Taa @ rd("solve", s))
    return T


def _pairs_bwd(qc, kc, bc, G, dAqk, dAkk, rd):
    """FLA's intra-chunk backward of M (dAqk, with scale) and A (dAkk): (dq2, dk2 with beta,
    dkt, db2), off-diagonal products with tf32 operands (site intra), diagonal ones as bf16x3
    (site diag), the same 16-row references as the forward."""
    C = G.shape[-2]
    dq2, dk2, dkt = (np.zeros_like(kc) for _ in range(3))
    for a in range(C // SUB):
        ra = slice(a * SUB, a * SUB + SUB)
        first = G[..., a * SUB:a * SUB + 1, :]
        last = G[..., a * SUB + SUB - 1:a * SUB + SUB, :]
        for b in range(a):          # rows of block a from earlier blocks b
            rb = slice(b * SUB, b * SUB + SUB)
            kg = rd("intra", kc[..., rb, :] * np.exp(first - G[..., rb, :]))
            dq2[..., ra, :] += rd("intra", dAqk[..., ra, rb]) @ kg
            dk2[..., ra, :] += rd("intra", dAkk[..., ra, rb]) @ kg
        dq2[..., ra, :] *= np.exp(G[..., ra, :] - first)
        dk2[..., ra, :] *= np.exp(G[..., ra, :] - first)
        ref = first - DIAG_SHIFT
        kd = rd("diag", kc[..., ra, :] * np.exp(ref - G[..., ra, :]))
        up = np.exp(G[..., ra, :] - ref)
        dq2[..., ra, :] += (rd("diag", dAqk[..., ra, ra]) @ kd) * up
        dk2[..., ra, :] += (rd("diag", dAkk[..., ra, ra]) @ kd) * up
        for b in range(a + 1, C // SUB):   # columns of block a from later blocks b
            rb = slice(b * SUB, b * SUB + SUB)
            e = np.exp(G[..., rb, :] - last)
            qe, kbe = qc[..., rb, :] * e, kc[..., rb, :] * bc[..., rb, None] * e
            dkt[..., ra, :] += (rd("intra", _tr(dAqk[..., rb, ra])) @ rd("intra", qe)
                                + rd("intra", _tr(dAkk[..., rb, ra])) @ rd("intra", kbe))
        dkt[..., ra, :] *= np.exp(last - G[..., ra, :])
        qd = rd("diag", qc[..., ra, :] * up)
        kbd = rd("diag", kc[..., ra, :] * bc[..., ra, None] * up)
        down = np.exp(ref - G[..., ra, :])
        dkt[..., ra, :] += (rd("diag", _tr(dAqk[..., ra, ra])) @ qd
                            + rd("diag", _tr(dAkk[..., ra, ra])) @ kbd) * down
    db2 = (dk2 * kc).sum(-1)
    return dq2, dk2 * bc[..., None], dkt, db2


def fla_backward(q, k, v, g, beta, h0, scale, do, dht, C: int = R.CHUNK, sites=None):
    """FLA's chunk_kda backward for one sequence (normalized q, k, the gate g, beta; time first),
    a drop-in for kda_ref._chunked_backward: (dq, dk, dv, dg, dbeta, dh0), float64 with the
    roundings of `sites` ({site: rounding function}, module docstring; {} = exact, equal to the
    reference to ~1e-12)."""
    if C % SUB:
        raise ValueError(f"kda_precision_fla: the chunk ({C}) must be a multiple of {SUB} rows")
    rd = _rounder(sites or {})
    T_, H = np.shape(q)[:2]
    n = -(-T_ // C)
    qc, kc, vc, gc, bc, doc = (R._blocks(x, n, C) for x in (q, k, v, g, beta, do))
    qc, kc = rd("qk", qc), rd("qk", kc)
    G = rd("g", R._cumulative(gc))
    gl = G[..., -1:, :]
    ep, el = np.exp(G), np.exp(gl - G)
    M0, P = _pairs_fwd(qc, kc, G, rd)
    low, strict = np.tril(np.ones((C, C))), np.tril(np.ones((C, C)), -1)
    Aqk = rd("Astore", M0 * low * scale)
    Akk = rd("Astore", _inverse(P * strict * bc[..., :, None], rd))
    w = rd("wu", Akk @ rd("wu", kc * bc[..., None] * ep))
    u = rd("wu", Akk @ rd("wu", vc * bc[..., None]))
    qg, kg = rd("qgkg", qc * ep), rd("qgkg", kc * el)
    hs = np.zeros(kc.shape[:2] + np.shape(h0)[1:])
    vnew = np.zeros_like(vc)
    S = np.array(h0, np.float64)
    for i in range(n):
        hs[:, i] = rd("h", S)
        vnew[:, i] = rd("vnew", u[:, i] - w[:, i] @ hs[:, i])
        S = np.exp(gl[:, i, 0])[..., None] * S + _tr(kg[:, i]) @ vnew[:, i]
    dAqk = (doc @ _tr(vnew)) * low * scale
    dv_in = _tr(Aqk) @ doc
    dhs, dv2 = np.zeros_like(hs), np.zeros_like(vc)
    dS = np.array(dht, np.float64)
    for i in reversed(range(n)):
        dhs[:, i] = rd("dh", dS)
        dv2[:, i] = rd("dv", kg[:, i] @ dhs[:, i] + rd("dv", dv_in[:, i]))
        dS = (np.exp(gl[:, i, 0])[..., None] * dS + scale * (_tr(qg[:, i]) @ doc[:, i])
              - _tr(w[:, i]) @ dv2[:, i])
    dgk = (hs * dhs).sum(-1) * np.exp(gl[..., 0, :])
    dq = (doc @ _tr(hs)) * ep * scale
    dk = (vnew @ _tr(dhs)) * el
    dvb = _tr(Akk) @ dv2
    dbeta = (dvb * vc).sum(-1)
    ke = kc * ep
    dwb = -rd("dw", dv2 @ _tr(hs))
    dT = dv2 @ _tr(vc) + dwb @ _tr(rd("qgkg", ke))
    dkgb = _tr(Akk) @ dwb
    dbeta += (dkgb * ke).sum(-1)
    kdk = kc * dk
    dG = qc * dq - kdk + ke * dkgb * bc[..., None]
    dG[..., -1, :] += dgk + kdk.sum(-2)
    dk = dk + dkgb * ep * bc[..., None]
    x = rd("dw", dT * strict * bc[..., None, :]) @ _tr(Akk)
    dAkk = -(_tr(Akk) @ rd("dw", x)) * strict
    dq2, dk2, dkt, db2 = _pairs_bwd(qc, kc, bc, G, dAqk, dAkk, rd)
    dG += qc * dq2 + (dk2 - dkt) * kc
    dq, dk, dbeta = dq + dq2, dk + dk2 + dkt, dbeta + db2
    dG = np.flip(np.cumsum(np.flip(dG, -2), -2), -2)

    def unblock(x):
        return np.moveaxis(x, 0, 2).reshape((n * C, H) + x.shape[3:])[:T_]
    return (unblock(dq), unblock(dk), unblock(dvb * bc[..., None]), unblock(dG),
            unblock(dbeta[..., None])[..., 0], dS)


# --- the study ---------------------------------------------------------------------------------

# the operand uses of chunk_reverse's products that meet neither S0 nor dS1
STATE_FREE = ("Delta.Tb", "Delta.R", "dDelta.M", "dR.Tb", "dR.dDelta", "dm.Delta", "dtb.dDelta",
              "dtb.R")
CASES = dict(KP.CASES, t8192_h2_mixed=dict(T_=8192, H=2, gate="mixed"),
             t8192_h2_deep=dict(T_=8192, H=2, gate="deep"))


def _fla(**over):
    return ("fla", dict(FLA, **over))


def _all(f):
    """FLA with every bf16 site rounded by f instead and q^, k^ exact (its tf32 sites and the
    diagonal's hi + lo kept)."""
    return ("fla", dict(FLA, qk=None, **{s: f for s in _BF16_SITES}))


VARIANTS = {
    # our KE/KL reverse pass (kda_precision.py's variants: piece 2's operands, piece 3 exact)
    "ours: exact": ("ours", "exact"),
    "ours: bf16 operands": ("ours", "bf16 operands"),
    "ours: split operands": ("ours", "split operands"),
    "ours: tf32 operands": ("ours_tf32", tf32),
    "ours: tf32 operands, truncated": ("ours_tf32", tf32_truncated),
    # per product (kda_precision_ops.py's operand uses): tf32, those with S0 or dS1 split
    "ours: tf32, S0 / dS1 products split": ("ours_ops", (STATE_FREE, tf32)),
    "ours: bf16, S0 / dS1 products split": ("ours_ops", (STATE_FREE, KP.bf16)),
    # piece 2 as the chain (kda_bwd_chain.py): its one product N dS with tf32 operands
    "ours: chain N, dS tf32": ("ours_chain", tf32),
    # FLA's formulation
    "FLA: as FLA": _fla(),
    "FLA: as FLA, bf16 out": ("fla_out", FLA),
    "FLA: q^, k^ exact": _fla(qk=None),
    "FLA: q^, k^ exact, tf32 exact": _fla(qk=None, A=None, solve=None, intra=None),
    "FLA: bf16 sites as tf32": _all(tf32),
    "FLA: bf16 sites split": _all(KP.split),
    "FLA: exact": ("fla", {}),
}


def _inner(kind, arg):
    """kda_ref._chunked_backward's replacement for a variant's (kind, argument)."""
    if kind == "ours":
        return KP._inner(*KP.VARIANTS[arg])
    if kind == "ours_tf32":
        return KP._inner(KP.exact, KP.exact, arg, arg)
    if kind == "ours_chain":
        return KP._inner_chain(arg, arg)
    if kind == "ours_ops":
        body = KPO._body(set(arg[0]), arg[1])
        inner = KP._inner(KP.exact, KP.exact, KP.exact, KP.exact)

        def backward(*a, C: int = R.CHUNK):
            original = KP.SP._reverse_body
            KP.SP._reverse_body = body
            try:
                return inner(*a, C=C)
            finally:
                KP.SP._reverse_body = original
        return backward

    def backward(*a, C: int = R.CHUNK):
        return fla_backward(*a, C=C, sites=arg)
    return backward


def inputs(case: str, seed: int = 0, unscaled: bool = False):
    """kda_bwd.inputs' arrays for one of `CASES` (the backward's arguments and cu_seqlens);
    `unscaled`: v and h0 as drawn (N(0, 1), FLA's tests' scale) instead of scaled by kda_bwd's
    power of two c that puts the output RMS in [1, 2) (c = 32 to 128 on these cases)."""
    if case not in CASES:
        raise ValueError(f"kda_precision_fla: unknown case {case!r}; known: {', '.join(CASES)}")
    p = CASES[case]
    x = BW.inputs(np.random.default_rng(seed), 1, p["T_"], p["H"], lens=p.get("lens"),
                  gate=p["gate"])
    if unscaled:
        raw = R.raw_inputs(np.random.default_rng(seed), 1, p["T_"], p["H"],
                           N=len(p.get("lens") or (0,)), gate=p["gate"])
        x = dict(x, v=raw["v"], h0=raw["h0"])
    args = [x[n] for n in ("q", "k", "v", "g_raw", "beta", "A_log", "dt_bias", "h0", "do",
                           "dht")]
    return args, (x["cu_seqlens"] if p.get("lens") else None)


def run(args, cu, variant: str) -> dict:
    """kda_ref.backward with its inner pass swapped for `variant`'s; kind "fla_out" also rounds
    the final gradients of OUT_CAST to bf16 (what FLA's autograd returns)."""
    if variant not in VARIANTS:
        raise ValueError(f"kda_precision_fla: unknown variant {variant!r}; known: "
                         f"{', '.join(VARIANTS)}")
    kind, arg = VARIANTS[variant]
    out_cast = kind == "fla_out"
    original = R._chunked_backward
    R._chunked_backward = _inner("fla" if out_cast else kind, arg)
    try:
        got = R.backward(*args, cu_seqlens=cu, method="chunked")
    finally:
        R._chunked_backward = original
    return {n: KP.bf16(a) if out_cast and n in OUT_CAST else a for n, a in got.items()}


def worst(got: dict, ref: dict) -> dict:
    """{gradient: max |got - ref| / (0.01 + 0.01 |ref|)} (1 = the public rule's edge)."""
    return {n: float(np.max(np.abs(got[n] - ref[n]) / (0.01 + 0.01 * np.abs(ref[n]))))
            for n in GRADS}


def study(case: str, variants=tuple(VARIANTS), seed: int = 0, unscaled: bool = False,
          reference: str = "ours: exact") -> dict:
    """{variant: {gradient: worst ratio}} against `reference` (a variant: "ours: exact" is
    kda_ref's float64 chunked backward; "FLA: as FLA, bf16 out" what checking against FLA's
    autograd means)."""
    args, cu = inputs(case, seed, unscaled)
    ref = run(args, cu, reference)
    return {v: worst(run(args, cu, v), ref) for v in variants}


def _row(label, w):
    return f"| {label} | " + " | ".join(f"{w[n]:.3g}" for n in GRADS) + " |"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sites", action="store_true",
                    help="FLA with q^, k^ exact and one site at a time kept exact / rounded")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--unscaled", action="store_true",
                    help="--sites on v, h0 as drawn (c = 1) instead of kda_bwd's scaled ones")
    ap.add_argument("--variants", default=None,
                    help="';'-separated variants of the main table (default: all)")
    a = ap.parse_args(argv)
    cases = a.cases.split(",")
    variants = tuple(VARIANTS) if a.variants is None else tuple(a.variants.split(";"))
    unknown = [v for v in variants if v not in VARIANTS] + [c for c in cases if c not in CASES]
    if unknown:
        ap.error(f"unknown variants or cases {unknown}; variants: {'; '.join(VARIANTS)}; cases: "
                 f"{', '.join(CASES)}")
    print("| case | inputs | variant | reference | " + " | ".join(GRADS) + " |")
    print("| --- | --- | --- | --- | " + " | ".join("---" for _ in GRADS) + " |")
    if a.sites:
        base = dict(FLA, qk=None)
        tag = "c = 1" if a.unscaled else "scaled"
        for case in cases:
            args, cu = inputs(case, unscaled=a.unscaled)
            ref = run(args, cu, "ours: exact")
            for s in SITES[1:]:
                for label, sites in ((f"FLA less {s}", dict(base, **{s: None})),
                                     (f"only {s}", {s: FLA[s]})):
                    VARIANTS[label] = ("fla", sites)
                    w = worst(run(args, cu, label), ref)
                    del VARIANTS[label]
                    print(_row(f"{case} | {tag} | {label} | exact", w), flush=True)
        return 0
    for case in cases:
        for unscaled in (False, True):
            tag = "c = 1" if unscaled else "scaled"
            for v, w in study(case, variants, unscaled=unscaled).items():
                print(_row(f"{case} | {tag} | {v} | exact", w), flush=True)
            for v, w in study(case, ("ours: exact", "ours: split operands", "FLA: as FLA"),
                              unscaled=unscaled, reference="FLA: as FLA, bf16 out").items():
                print(_row(f"{case} | {tag} | {v} | FLA, bf16 out", w), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
