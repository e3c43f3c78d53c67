"""How precise the chunked KDA backward's intermediates must be for the public backward rule
(atol = rtol = 0.01 on every final gradient; issue 18, docs/TUNING.md "Piece 2"): the float64
split (kda_bwd_split.py) with (a) S0 or the pieces rounded to bf16 for storage, and (b) the
reverse pass's matrix products taking bf16 operands (what mma.sync m16n8k16 reads), plainly
or split into bf16 hi + lo (three products), piece 3 exact. CPU only, float64 numpy.

    python benchmarks/kda_precision.py        # the table of docs/TUNING.md (~1 min, 2 cores)

Each row: the worst |error| / (0.01 + 0.01 |ref|) per gradient over kda_bwd's inputs (1 = the
rule's edge), the reference being kda_ref.backward's chunked float64 one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "zoo" / "kernels"))
import kda_bwd as BW  # noqa: E402 - the zoo's kernel files are found through this path
import kda_bwd_split as SP  # noqa: E402
import kda_ref as R  # noqa: E402
from tirxh.api import numpy_dtype  # noqa: E402

GRADS = ("dq", "dk", "dv", "dg", "dbeta", "dh0", "dA_log", "ddt_bias")
CASES = {"t150_deep": dict(T_=150, H=1, gate="deep"),
         "t150_mixed": dict(T_=150, H=1, gate="mixed"),
         "pack_80_1_30_h2": dict(T_=111, H=2, gate="mixed", lens=(80, 1, 30))}
_BF16 = numpy_dtype("bf16")


def bf16(x):
    """x rounded to bf16 (through f32), back in float64."""
    return np.asarray(np.asarray(x, np.float32).astype(_BF16), np.float64)


def split(x):
    """x as bf16 hi + lo (~16 bits of mantissa): what three bf16 products recover."""
    hi = bf16(x)
    return hi + bf16(np.asarray(x, np.float64) - hi)


def exact(x):
    return x


def f32(x):
    """x rounded to float32 (a kernel's f32 storage), back in float64."""
    return np.asarray(np.asarray(x, np.float32), np.float64)


def _inner(store_s0, store_pieces, op_state, op):
    """A drop-in for kda_ref._chunked_backward: the split with the given roundings."""
    def backward(q, k, v, g, beta, h0, scale, do, dht, C: int = R.CHUNK):
        S0, _ = SP.chunk_states(k, v, g, beta, h0, C)
        rev = SP.chunk_reverse(q, k, v, g, beta, store_s0(S0), scale, do, dht, C,
                               op_state=op_state, op=op)
        dq, dk, dg, dbeta = SP.chunk_local(q, k, g, beta, scale,
                                           {m: store_pieces(rev[m]) for m in SP.PIECES}, C=C)
        H, n, _, V = rev["dv"].shape
        dv = np.moveaxis(rev["dv"], 0, 2).reshape(n * C, H, V)[:len(q)]
        return dq, dk, dv, dg, dbeta, rev["dh0"]
    return backward


def _inner_chain(op_state, op):
    """A drop-in for kda_ref._chunked_backward through piece 2 as a chain (kda_bwd_chain.py):
    chain_operands (float64, stored: N as the chain's operand `op`, exp(G_C) and B in f32),
    the chain with dS rounded by `op_state` for its product (f32 accumulation is below these),
    dS1 stored in f32, then chunk_pieces and piece 3 exact."""
    def backward(q, k, v, g, beta, h0, scale, do, dht, C: int = R.CHUNK):
        S0, _ = SP.chunk_states(k, v, g, beta, h0, C)
        ops = SP.chain_operands(q, k, g, beta, scale, do, C)
        dS1, dh0 = SP.chain(f32(ops["eg"]), ops["N"], f32(ops["B"]), dht, op_state=op_state,
                            op=op)
        rev = SP.chunk_pieces(q, k, v, g, beta, S0, scale, do, f32(dS1), C)
        dq, dk, dg, dbeta = SP.chunk_local(q, k, g, beta, scale, {m: rev[m] for m in SP.PIECES},
                                           C=C)
        H, n, _, V = rev["dv"].shape
        dv = np.moveaxis(rev["dv"], 0, 2).reshape(n * C, H, V)[:len(q)]
        return dq, dk, dv, dg, dbeta, dh0
    return backward


VARIANTS = {
    "exact": (exact, exact, exact, exact),
    "S0 stored bf16": (bf16, exact, exact, exact),
    "pieces stored bf16": (exact, bf16, exact, exact),
    "bf16 operands": (exact, exact, bf16, bf16),
    "S0, dS split, rest bf16": (exact, exact, split, bf16),
    "S0, dS bf16, rest split": (exact, exact, bf16, split),
    "split operands": (exact, exact, split, split),
    # piece 2 as a chain (kda_bwd_chain.py): dS <- exp(G_C) dS + N dS + B, the product N dS
    "chain: N, dS bf16": (bf16, bf16),
    "chain: N split, dS bf16": (bf16, split),
    "chain: N bf16, dS split": (split, bf16),
    "chain: N, dS split": (split, split),
}


def study(case: str, variants=tuple(VARIANTS), seed: int = 0) -> dict:
    """{variant: {gradient: worst |error| / (0.01 + 0.01 |ref|)}} for one of `CASES`."""
    if case not in CASES:
        raise ValueError(f"kda_precision: unknown case {case!r}; known: {', '.join(CASES)}")
    params = CASES[case]
    x = BW.inputs(np.random.default_rng(seed), 1, params["T_"], params["H"],
                  lens=params.get("lens"), gate=params["gate"])
    args = [x[n] for n in ("q", "k", "v", "g_raw", "beta", "A_log", "dt_bias", "h0", "do",
                           "dht")]
    cu = x["cu_seqlens"] if params.get("lens") else None
    ref = R.backward(*args, cu_seqlens=cu, method="chunked")
    out = {}
    original = R._chunked_backward
    try:
        for name in variants:
            make = _inner_chain if name.startswith("chain") else _inner
            R._chunked_backward = make(*VARIANTS[name])   # kda_ref.backward's inner pass
            got = R.backward(*args, cu_seqlens=cu, method="chunked")
            out[name] = {n: float(np.max(np.abs(got[n] - ref[n])
                                         / (0.01 + 0.01 * np.abs(ref[n])))) for n in GRADS}
    finally:
        R._chunked_backward = original
    return out


def main() -> int:
    print("| case | variant | " + " | ".join(GRADS) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in GRADS) + " |")
    for case in CASES:
        for name, worst in study(case).items():
            print(f"| {case} | {name} | " + " | ".join(f"{worst[n]:.3g}" for n in GRADS) + " |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
