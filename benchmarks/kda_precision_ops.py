"""Which operand of piece 2c's products (kda_bwd_pieces_tc) could be a plain bf16 operand
(two mma a product instead of three, and no lo split) under the public backward rule: the
float64 split (kda_bwd_split) with every operand of chunk_reverse's products split into bf16
hi + lo, except ONE operand use rounded to plain bf16; piece 3 exact. CPU only, float64 numpy
(~1 min on 2 cores):

    python benchmarks/kda_precision_ops.py

Each row: the operand use (product.operand) and, per case of benchmarks/kda_precision.py, the
worst |error| / (0.01 + 0.01 |ref|) over the final gradients and which gradient it is (1 = the
rule's edge). Session 12's run (docs/PERFORMANCE.md "Session 12, branch kdabwd9"): every use
fails in at least one case, so the three-mma split stays on every operand but dO.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kda_precision as KP  # noqa: E402 - benchmarks/ is not a package

SP = KP.SP
USES = ("R.ke", "R.S0", "Delta.Tb", "Delta.R", "dDelta.M", "dDelta.KL", "dDelta.dS1",
        "dR.Tb", "dR.dDelta", "dqe.S0", "dke.dR", "dke.S0", "dkl.Delta", "dkl.dS1", "dm.Delta",
        "dtb.dDelta", "dtb.R")


def _body(plain, plain_round=KP.bf16):
    """kda_bwd_split._reverse_body with every operand split except the uses in `plain`, which
    `plain_round` rounds (plain bf16; kda_precision_fla.py asks tf32)."""
    def rd(use, x):
        return (plain_round if use in plain else KP.split)(x)

    def body(p, i, vc, doc, S0, dS, out, op_state=None, op=None):
        tr = SP._tr
        S, dO, eg = S0, doc[:, i], np.exp(p["gl"][:, i])
        ke, tb, kl = (p[x][:, i] for x in ("ke", "Tb", "kl"))
        res = vc[:, i] - rd("R.ke", ke) @ rd("R.S0", S)
        delta = rd("Delta.Tb", tb) @ rd("Delta.R", res)
        dD = (tr(rd("dDelta.M", p["M"][:, i])) @ dO
              + rd("dDelta.KL", kl) @ rd("dDelta.dS1", dS))
        dR = tr(rd("dR.Tb", tb)) @ rd("dR.dDelta", dD)
        out["dv"][:, i] = dR
        out["dqe"][:, i] = dO @ tr(rd("dqe.S0", S))
        out["dke"][:, i] = -rd("dke.dR", dR) @ tr(rd("dke.S0", S))
        out["dkl"][:, i] = rd("dkl.Delta", delta) @ tr(rd("dkl.dS1", dS))
        out["dm"][:, i] = np.tril(dO @ tr(rd("dm.Delta", delta)))
        out["dtb"][:, i] = np.tril(rd("dtb.dDelta", dD) @ tr(rd("dtb.R", res)))
        out["dgs"][:, i] = (dS * S0).sum(-1) * eg
        return dR
    return body


def study(plain=()) -> dict:
    """{case: (worst ratio, gradient)} with the uses in `plain` as plain bf16."""
    unknown = set(plain) - set(USES)
    if unknown:
        raise ValueError(f"kda_precision_ops: unknown operand uses {sorted(unknown)}; known: "
                         f"{', '.join(USES)}")
    original = SP._reverse_body
    SP._reverse_body = _body(set(plain))
    try:
        out = {}
        for case in KP.CASES:
            w = KP.study(case, variants=("exact",))["exact"]
            worst = max(w, key=w.get)
            out[case] = (w[worst], worst)
        return out
    finally:
        SP._reverse_body = original


def main() -> int:
    print("| plain bf16 | " + " | ".join(KP.CASES) + " |")
    print("| --- | " + " | ".join("---" for _ in KP.CASES) + " |")
    for plain in [()] + [(u,) for u in USES]:
        row = study(plain)
        print(f"| {', '.join(plain) or 'none (all split)'} | "
              + " | ".join(f"{r:.3g} ({g})" for r, g in row.values()) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
