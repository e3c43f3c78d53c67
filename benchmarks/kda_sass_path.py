"""Per-phase issue counts and dependent-chain estimates of the KDA forward's prep warps, from
the SASS ptxas makes on this machine (no GPU): the model behind docs/TUNING.md's "The prep's
in-place chains" (issue 18).

The prep loop of a warp-specialized variant is straight-line code between the named-barrier
``BAR.SYNC 0x1`` of its phases (norms | gate | factors | A/M blocks | materialize + diagonal
inverse | off-diagonal inverse). For each phase this reports

- ``issue``: SASS instructions (one issue cycle each per warp);
- ``chain``: cycles of one warp issuing them in order with a register scoreboard: an
  instruction starts one cycle after the previous one or when its source registers are ready,
  whichever is later (fixed latencies below; no pipe contention; memory in order). Where the
  phase branches on the warp index (one unit per warp), each branch region is walked alone and
  the longest is taken, plus the code before the first branch; elsewhere a branch's code is
  counted as executed (the norms' ``tid < 64`` beta loads).

and, as a last row, one state warp's chunk (from its wait on ``ready[s]`` to its arrival on
``empty[s]``: the body after the role's ``USETMAXREG.TRY_ALLOC``; 232 HMMA per chunk).

It also reports the code's size (``code_size``: the prep loop's and the kernel's bytes), which
the six measured warp-specialized variants' chunk times follow better than the walk
(docs/TUNING.md, "The prep's code size"), and counts kda_fwd_slim's runtime loops once per trip
(``trips``).

A phase with w prep warps per SM sub-partition then costs about max(chain, w x issue, MUFU pipe):
a chain far above the issue count is a latency-bound phase that more warps or more independent
work per warp would shorten. The fixed latencies are published Hopper microbenchmark orders of
magnitude, not measurements here; the model is calibrated against the measured chunk times in
docs/TUNING.md.

    python benchmarks/kda_sass_path.py v64ws8 v64ws8b      # one table per variant
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tirxh.core.sass_phases import instructions  # noqa: F401 - also this module's API (tests)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "zoo" / "kernels"))
import kda_fwd as F  # noqa: E402 - the zoo's kernel files are found through this path
import kda_fwd_slim as FA  # noqa: E402

# latency in cycles until the destination registers can be read, by opcode prefix (longest
# prefix wins); everything else is an ALU op of ~5 cycles
LATENCY = {"LDS": 30, "LDSM": 33, "LDG": 500, "LD": 500, "MUFU": 18, "HMMA": 33, "S2R": 25,
           "SHFL": 30, "F2F": 10, "I2F": 10, "F2I": 10, "DMMA": 40}
ALU = 5
PHASES = ("norms", "gate", "factors", "blocks", "materialize+diag", "inverse")
UNITS = ("blocks", "materialize+diag", "inverse")   # phases whose branches are per-warp units
# kda_fwd_ahead with AHEAD = 1 (kda_fwd_slim.py): no norms phase in the loop; its last phase is
# materialize, then warps 0 .. 3 invert (diagonal, ``BAR.SYNC 0x2``, the blocks below) while
# warps 4 .. 7 make the next chunk's norms: one row per path (the norms row counts what warps
# 4 .. 7 issue after materialize; its chain includes materialize)
PHASES_AHEAD = ("gate", "factors", "blocks", "materialize+inverse", "norms ahead")

_REG = re.compile(r"\b(R\d+|P\d)\b")


def _width(op: str) -> int:
    if op.startswith("HMMA") or ".128" in op or op.startswith("LDSM") and ".x4" in op.lower():
        return 4
    if ".64" in op or op.startswith("LDSM") and ".x2" in op.lower():
        return 2
    return 1


def _operands(text: str):
    """(opcode, destination registers, source registers) of one instruction."""
    body = re.sub(r"^@!?P\d\s+", "", text)
    guard = re.match(r"^@!?(P\d)\s+", text)
    op, _, rest = body.partition(" ")
    parts = [p.strip() for p in rest.split(",")]
    regs = [_REG.findall(p) for p in parts]
    if not parts or op.startswith(("ST", "BAR", "BRA", "SYNCS", "MEMBAR", "RED", "ATOM")):
        dst, srcs = [], [r for rs in regs for r in rs]
    else:
        dst, srcs = regs[0], [r for rs in regs[1:] for r in rs]
    w = _width(op)
    if w > 1:
        dst = [f"R{int(r[1:]) + i}" for r in dst if r.startswith("R") for i in range(w)] or dst
    if op.startswith("HMMA"):        # A (4), B (2), C (4) registers
        widths = [4, 2, 4]
        srcs = [f"R{int(r[1:]) + i}" for r, n in zip(srcs, widths) if r.startswith("R")
                for i in range(n)]
    if guard:
        srcs.append(guard.group(1))
    return op, [r for r in dst if r not in ("RZ", "PT")], srcs


def chain(instrs: list[str]) -> int:
    """Cycles for one warp to issue `instrs` in order with a register scoreboard."""
    ready: dict[str, int] = {}
    t = 0
    for text in instrs:
        op, dst, srcs = _operands(text)
        t = max([t + 1] + [ready.get(r, 0) for r in srcs])
        lat = next((LATENCY[k] for k in sorted(LATENCY, key=len, reverse=True)
                    if op.startswith(k)), ALU)
        for r in dst:
            ready[r] = t + lat
    return max([t] + list(ready.values()))


def _branch_regions(instrs: list[str]) -> tuple[list[str], list[list[str]]]:
    """Code outside ``@P BRA`` skipped regions, and each region (a branch to a label skips the
    instructions up to the next branch or the end: one warp's unit)."""
    cuts = [i for i, s in enumerate(instrs) if re.search(r"@!?P\d\s+BRA", s)]
    if not cuts:
        return instrs, []
    common = instrs[:cuts[0]]
    regions = [instrs[a + 1:b] for a, b in zip(cuts, cuts[1:] + [len(instrs)])]
    return common, regions


def _prep_loop(ins: list[str]) -> tuple[int, list[int]]:
    """(the norms' first instruction: after the last full[s] wait before the first named
    barrier, the prep loop's ``BAR.SYNC 0x1`` indices)."""
    bars = [i for i, s in enumerate(ins) if s.startswith("BAR.SYNC") and "0x1," in s]
    if len(bars) < len(PHASES):
        raise ValueError(f"{len(bars)} BAR.SYNC 0x1 in the SASS: not a warp-specialized KDA "
                         f"forward (its prep loop has {len(PHASES)} named barriers)")
    waits = [i for i in range(bars[0]) if "TRYWAIT" in ins[i]]
    return (waits[-1] + 1 if waits else 0), bars


def _row(name, path, n=1, issue_all=None):
    return dict(phase=name, issue=n * len(path), issue_all=len(path) if issue_all is None
                else issue_all, chain=n * chain(path),
                mufu=n * sum(s.startswith("MUFU") or " MUFU" in s for s in path))


def _is_ahead(ins: list[str]) -> bool:
    return any(s.startswith("BAR.SYNC") and " 0x2," in s for s in ins)


def _phases_ahead(ins: list[str], trips: dict | None) -> list[dict]:
    """`phases` of a kda_fwd_ahead variant with AHEAD = 1 (the prologue's norms and barrier
    come first; the loop has 4 ``BAR.SYNC 0x1``): gate, factors, blocks as `phases` splits
    them, then the last phase as two rows: warps 0 .. 3's path (materialize, the diagonal
    inverse up to ``BAR.SYNC 0x2``, the longest warp branch of the blocks below) and warps
    4 .. 7's (the code after the join of warps 0 .. 3's branch: the wait on the next chunk's
    full[s], its norms; the chain from materialize on)."""
    bars = [i for i, s in enumerate(ins) if s.startswith("BAR.SYNC") and "0x1," in s][-4:]
    bar2 = next(i for i, s in enumerate(ins) if s.startswith("BAR.SYNC") and " 0x2," in s)
    waits = [i for i in range(bars[0]) if "TRYWAIT" in ins[i]]
    start = waits[-1] + 1
    out = []
    for name, a, b in zip(PHASES_AHEAD, [start, bars[0] + 1, bars[1] + 1], bars[:3]):
        body = ins[a:b]
        common, regions = _branch_regions(body) if name == "blocks" else (body, [])
        longest = max(regions, key=chain) if regions else []
        out.append(_row(name, common + longest, (trips or {}).get(name, 1), len(body)))
    wait = next(i for i in range(bar2, bars[3]) if "TRYWAIT" in ins[i])
    join = max(i for i in range(bar2, wait) if ins[i].startswith("BSYNC"))
    first_branch = next(i for i in range(bars[2] + 1, bar2) if re.search(r"@!?P\d\s+BRA",
                                                                       ins[i]))
    mat = ins[bars[2] + 1:first_branch]
    common, regions = _branch_regions(ins[bar2 + 1:join])
    inv = common + (max(regions, key=chain) if regions else [])
    out.append(_row("materialize+inverse", mat + ins[first_branch + 1:bar2 + 1] + inv,
                    issue_all=bar2 - bars[2] + len(ins[bar2 + 1:join])))
    norms = ins[join + 1:bars[3]]
    row = _row("norms ahead", mat + norms, issue_all=len(norms))
    out.append(dict(row, issue=len(norms)))
    return out


def phases(sass: str, trips: dict | None = None) -> list[dict]:
    """The prep loop's phases (between its ``BAR.SYNC 0x1``): issue, chain and MUFU counts;
    `trips` {phase: n}: the phase is a runtime loop (kda_fwd_slim's gate) whose body runs n
    times per chunk: its counts times n. kda_fwd_ahead's AHEAD layout: `_phases_ahead`."""
    ins = instructions(sass)
    if _is_ahead(ins):
        return _phases_ahead(ins, trips) + _state_rows(ins)
    start, bars = _prep_loop(ins)
    starts = [start] + [b + 1 for b in bars[:len(PHASES) - 1]]
    out = []
    for name, a, b in zip(PHASES, starts, bars):
        body = ins[a:b]
        common, regions = _branch_regions(body) if name in UNITS else (body, [])
        longest = max(regions, key=chain) if regions else []
        path = chain(common + longest)
        n = (trips or {}).get(name, 1)
        out.append(dict(phase=name, issue=n * (len(common) + len(longest)),
                        issue_all=len(body), chain=n * path,
                        mufu=n * sum(s.startswith("MUFU") or " MUFU" in s
                                     for s in common + longest)))
    return out + _state_rows(ins)


def _state_rows(ins: list[str]) -> list[dict]:
    body = _state_body(ins)
    if body is None:
        return []
    return [dict(phase="state (one warp)", issue=len(body), issue_all=len(body),
                 chain=chain(body), mufu=sum(s.startswith("MUFU") for s in body),
                 hmma=sum(s.startswith("HMMA") for s in body))]


def _state_body(ins: list[str]):
    """The state warps' chunk: after their ``setmaxnreg`` (``USETMAXREG.TRY_ALLOC``), from the
    first mbarrier wait (``TRYWAIT``: ready[s]) to the next ``SYNCS.ARRIVE`` (empty[s]); None
    where the SASS has no such role (4 + 4 warps need no register split)."""
    alloc = next((i for i, s in enumerate(ins) if "USETMAXREG.TRY_ALLOC" in s), None)
    if alloc is None:
        return None
    wait = next((i for i in range(alloc, len(ins)) if "TRYWAIT" in ins[i]), None)
    if wait is None:
        return None
    end = next((i for i in range(wait, len(ins)) if ins[i].startswith("SYNCS.ARRIVE")), None)
    return ins[wait + 1:end] if end is not None else None


def code_size(sass: str) -> dict:
    """Bytes of code (16 per SASS instruction): the whole kernel, and the prep loop (from the
    norms' start, as `phases`, to the last of its ``BAR.SYNC 0x1``: every warp's branches).
    The warp-specialized variants' measured chunk times follow the prep loop's size, not its
    issue or chain counts (docs/TUNING.md, "The prep's code size")."""
    ins = instructions(sass)
    if _is_ahead(ins):
        bars = [i for i, s in enumerate(ins) if s.startswith("BAR.SYNC") and "0x1," in s][-4:]
        start = [i for i in range(bars[0]) if "TRYWAIT" in ins[i]][-1] + 1
        return dict(kernel=16 * len(ins), prep_loop=16 * (bars[-1] + 1 - start))
    start, bars = _prep_loop(ins)
    return dict(kernel=16 * len(ins), prep_loop=16 * (bars[len(PHASES) - 1] + 1 - start))


def trips(variant: str) -> dict:
    """The runtime loops of a variant's prep per chunk: kda_fwd_slim's gate runs its 8-row body
    2 x (blocks per thread) times (4 with 4 prep warps, 2 with 8); with BLOCKS = 1 the A/M
    loop body (one block; a unit's A-fragment loads counted with it: an upper estimate) runs
    once per block of the busiest warp (5 with 4 prep warps, 4 with 8); kda_fwd's are
    unrolled."""
    if variant in FA.VARIANTS:
        return {"gate": 2}          # 8 prep warps; the blocks unrolled or blocks_wide's paths
    if variant not in F.SLIM_VARIANTS:
        return {}
    c = F.SLIM_VARIANTS[variant]
    out = {"gate": 2 * (4 // (c["PREP"] // 2))}
    if c.get("BLOCKS"):
        out["blocks"] = 5 if c["PREP"] == 4 else 4
    return out


def table(rows: list[dict]) -> str:
    lines = ["| phase | SASS issued (one warp) | dependent chain, cycles | MUFU |",
             "| --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['phase']} | {r['issue']} | {r['chain']} | {r['mufu']} |")
    prep = [r for r in rows if r["phase"] in PHASES + PHASES_AHEAD]
    tot = {k: sum(r[k] for r in prep) for k in ("issue", "chain", "mufu")}
    lines.insert(2 + len(prep), f"| prep total | {tot['issue']} | {tot['chain']} | "
                                f"{tot['mufu']} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1].strip())
        return 2
    known = {**F.VARIANTS, **F.SLIM_VARIANTS, **FA.VARIANTS}
    for v in argv:
        if v not in known:
            print(f"kda_sass_path: unknown variant {v!r}; known: {', '.join(known)}")
            return 2
        sass = variant_sass(v)
        size = code_size(sass) if "PREP" in known[v] else None
        note = (f"code: kernel {size['kernel'] / 1024:.0f} KB, prep loop "
                f"{size['prep_loop'] / 1024:.1f} KB\n\n" if size else "")
        print(f"## {v} ({known[v]})\n\n{note}{table(phases(sass, trips(v)))}\n")
    return 0


def variant_sass(variant: str) -> str:
    """The SASS of one kda_fwd variant (VARIANTS) or kda_fwd_slim variant (SLIM_VARIANTS),
    compiled for sm_90a on this machine."""
    kernel, consts = ((F.kda_fwd_slim, F.SLIM_VARIANTS[variant]) if variant in F.SLIM_VARIANTS
                      else (FA.kda_fwd_ahead, FA.VARIANTS[variant]) if variant in FA.VARIANTS
                      else (F.kda_fwd, F.VARIANTS[variant]))
    ck = kernel.compile("sm_90a", **consts)
    return ck.sass() if callable(ck.sass) else ck.sass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
