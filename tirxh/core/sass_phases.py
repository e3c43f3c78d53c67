"""A kernel's SASS cut into phases at the points where its threads wait for each other
(``tirxh show --phases``): what each phase issues and which source lines made it.

Why: in a kernel of one CTA an SM, the time between two barriers is paid by the whole SM, and
what a phase costs is decided by what ptxas made of it: how many global loads it issues (each
dependent round is a memory latency), how many shared-memory accesses feed each tensor-core
instruction, whether a loop is still a loop. Reading that from a 17,000-line listing is slow
for a person and expensive for an agent; the KDA backward's sessions (docs/TUNING.md "The
KDA backward's cycle model") did it by hand. This module gives the counts, not a time: no
latency model is applied (the counts are facts of the binary; a model's constants would be
guesses).

A phase ends after an instruction that waits for other threads: ``BAR.SYNC`` / ``BAR.RED``
(``bar.sync``, ``barrier.sync``, ``bar.red``) or ``SYNCS.PHASECHK`` (an mbarrier wait); phases
are in address order, so the retry blocks ptxas places after the main path (an mbarrier wait's)
come out as small phases of their own. Counts are per pass: a phase holding a backward branch
(``loop``) runs its body as often as the loop trips. Source lines come from the ``//## File
..., line N`` records that ``nvdisasm -g`` prints from ptxas's line table (tirxh emits ``.loc``
for every instruction): a helper's instructions name the helper's line.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

__all__ = ["Phase", "phases", "format_phases", "instructions", "CLASSES"]

# instruction classes, by opcode prefix (the first that matches; SASS opcodes of sm_80/sm_90)
CLASSES = (
    ("async_copy", ("LDGSTS", "UBLKCP", "UBLKRED", "UBLKPF", "UTMALDG", "UTMASTG", "UTMAREDG",
                    "UTMAPF")),
    ("global_load", ("LDG", "LD.")),
    ("global_store", ("STG", "ST.")),
    ("shared_load", ("LDS", "LDSM")),
    ("shared_store", ("STS", "STSM")),
    ("local", ("LDL", "STL")),                     # spills and local arrays
    ("tensor", ("HMMA", "HGMMA", "IMMA", "IGMMA", "QMMA", "QGMMA", "DMMA", "BMMA")),
    ("atomic", ("ATOM", "RED.", "ATOMS", "ATOMG")),
    ("mufu", ("MUFU",)),
    ("shuffle", ("SHFL",)),
    ("branch", ("BRA", "BRX", "JMP", "RET", "CALL")),
)
_WAITS = ("BAR.SYNC", "BAR.RED", "SYNCS.PHASECHK")
_INSTR = re.compile(r"/\*(?P<addr>[0-9a-f]{4,})\*/\s+(?P<text>[^;]*);")
_LINE = re.compile(r'//## File "(?P<file>[^"]+)", line (?P<line>\d+)')
_LABEL = re.compile(r"^(?P<label>\.L_x_\d+):")


@dataclass
class Phase:
    """One phase: its instruction range, the instruction that ends it, what it issues, the
    source lines that made it (``file:line`` -> instructions) and whether it loops."""

    index: int
    start: int                  # address of its first instruction
    end: int                    # address of its last
    ends_with: str              # the wait that ends it ("" at the end of the code)
    instructions: int = 0
    counts: dict = field(default_factory=dict)
    lines: dict = field(default_factory=dict)
    loop: bool = False

    def top_lines(self, n: int = 3) -> list:
        return sorted(self.lines.items(), key=lambda kv: (-kv[1], kv[0]))[:n]

    def to_json(self) -> dict:
        return {"index": self.index, "start": self.start, "end": self.end,
                "ends_with": self.ends_with, "instructions": self.instructions,
                "counts": dict(self.counts), "loop": self.loop,
                "lines": [{"line": k, "instructions": v}
                          for k, v in self.top_lines(len(self.lines))]}


def _class(op: str) -> "str | None":
    for name, prefixes in CLASSES:
        if op.startswith(prefixes):
            return name
    return None


def _opcode(text: str) -> str:
    return re.sub(r"^@!?U?P[T\d]+\s+", "", text).split(" ", 1)[0]


def _parse(sass: str) -> tuple:
    """The instructions in order, (address, text, "file:line" or ""), and each label's address."""
    out, where, labels = [], "", {}
    pending = []
    for raw in sass.splitlines():
        line = raw.strip()
        m = _LINE.search(line)
        if m:
            where = f"{os.path.basename(m.group('file'))}:{m.group('line')}"
            continue
        m = _LABEL.match(line)
        if m:
            pending.append(m.group("label"))
            continue
        m = _INSTR.search(line)
        if m:
            addr = int(m.group("addr"), 16)
            for lb in pending:
                labels[lb] = addr
            pending = []
            out.append((addr, m.group("text").strip(), where))
    return out, labels


def instructions(sass: str) -> list:
    """The instruction texts of an ``nvdisasm``/``cuobjdump -sass`` listing, in order (what
    other SASS readers, such as benchmarks/kda_sass_path.py, walk)."""
    return [text for _, text, _ in _parse(sass)[0]]


def _branch_target(text: str, labels: dict) -> "int | None":
    m = re.search(r"`\((?P<label>\.L_x_\d+)\)", text)
    if m:
        return labels.get(m.group("label"))
    return None


def phases(sass: str) -> list:
    """The phases of an ``nvdisasm -c -g`` listing of one kernel (`tirxh show` compiles one
    item: one entry), in address order (module docstring)."""
    ins, labels = _parse(sass)
    out: list = []
    cur = None
    for addr, text, where in ins:
        op = _opcode(text)
        if cur is None:
            cur = Phase(index=len(out) + 1, start=addr, end=addr, ends_with="")
        cur.end = addr
        cur.instructions += 1
        cls = _class(op)
        if cls:
            cur.counts[cls] = cur.counts.get(cls, 0) + 1
        if where:
            cur.lines[where] = cur.lines.get(where, 0) + 1
        if cls == "branch":
            target = _branch_target(text, labels)
            if target is not None and cur.start <= target < addr:   # not the end's self-branch
                cur.loop = True
        if op.startswith(_WAITS):
            cur.ends_with = op
            out.append(cur)
            cur = None
    if cur is not None:
        out.append(cur)
    # trailing padding (NOPs, the self-branch ptxas ends every function with) is not a phase
    return [p for p in out if any(k != "branch" for k in p.counts) or p.instructions > 2]


_COLS = (("global_load", "LDG"), ("global_store", "STG"), ("shared_load", "LDS"),
         ("shared_store", "STS"), ("local", "LOCAL"), ("tensor", "MMA"), ("async_copy", "ASYNC"),
         ("atomic", "ATOM"), ("mufu", "MUFU"), ("shuffle", "SHFL"))


def format_phases(ps: list, title: str = "") -> str:
    """A table: one row per phase, its counts by class and its three busiest source lines."""
    head = ["phase", "instrs"] + [c for _, c in _COLS] + ["ends with", "source lines"]
    rows = []
    for p in ps:
        name = f"{p.index}" + (" loop" if p.loop else "")
        src = ", ".join(f"{k} ({v})" for k, v in p.top_lines())
        rows.append([name, str(p.instructions)]
                    + [str(p.counts.get(k, 0) or "") for k, _ in _COLS]
                    + [p.ends_with or "-", src])
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head) - 1)]
    lines = [title] if title else []
    fmt = lambda r: "  ".join(c.rjust(w) if 0 < i < len(head) - 2 else c.ljust(w)  # noqa: E731
                              for i, (c, w) in enumerate(zip(r, widths))) + "  " + r[-1]
    lines.append(fmt(head))
    lines.extend(fmt(r) for r in rows)
    total = sum(p.instructions for p in ps)
    lines.append(f"{len(ps)} phases, {total} instructions (counts per pass: a `loop` phase "
                 f"repeats its body)")
    return "\n".join(lines)
