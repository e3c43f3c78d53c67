"""The semantics table: binding name -> how numsim executes it, and how faithfully.

Fidelity classes (issue 4):

- ``modeled``: results match the PTX ISA definition (bitwise for integer and exactly rounded
  float paths); any known gap is stated in the note.
- ``representative``: a plausible result, not the hardware's (``clock``, ``*.approx``); a kernel
  whose output depends on it should use a tolerance.
- ``ordering_only``: no data effect in numsim (fences, cache hints, prefetch); it is still recorded
  in the event trace for sync_check.
- ``rejected``: numsim refuses it; a kernel that executes it gets an ``incomplete`` verdict naming
  the instruction and its source line.

The semantic modules (``sem_*``) register into `TABLE` when imported; `tirxh_numsim.semantics`
imports them all and is where `lookup` lives (this module cannot import them: they import
`semantic` from here).

Semantic functions have the signature ``fn(warps, instr, mask) -> None | Wait`` where `warps` is the
executing `machine.Warps`, `mask` the lanes that execute (active and guard true). Returning a
`Wait` blocks the warps until it is ready (see `machine.Wait`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

FIDELITIES = ("modeled", "representative", "ordering_only", "rejected")


@dataclass(frozen=True)
class Semantic:
    name: str
    fn: Optional[Callable]
    fidelity: str
    note: str = ""


TABLE: dict[str, Semantic] = {}


def semantic(*names: str, fidelity: str = "modeled", note: str = ""):
    """Register `fn` as the semantics of the bindings `names`."""
    if fidelity not in FIDELITIES:
        raise ValueError(f"fidelity {fidelity!r} is not one of {FIDELITIES}")

    def deco(fn):
        for n in names:
            if n in TABLE:
                raise ValueError(f"numsim semantics for {n!r} registered twice")
            TABLE[n] = Semantic(n, fn, fidelity, note or _first_paragraph(fn.__doc__))
        return fn
    return deco


def _first_paragraph(doc) -> str:
    para = (doc or "").strip().split("\n\n")[0]
    return " ".join(line.strip() for line in para.splitlines())


def rejected(name: str, reason: str) -> None:
    """Declare a binding numsim refuses, with the reason reported in the verdict."""
    TABLE[name] = Semantic(name, None, "rejected", reason)
