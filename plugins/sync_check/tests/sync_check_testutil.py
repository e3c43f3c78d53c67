"""Helpers for sync_check's tests: corpus modules and their labels, hand-built traces.

A module with a unique name (not ``conftest``) so that test files import it unambiguously when
several plugins' test directories run in one pytest session."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

CORPUS = Path(__file__).parent / "corpus"
_EXPECT = re.compile(r"#\s*EXPECT:\s*([\w.\-]+)")
_CLASS = re.compile(r"^#\s*ISSUE13:\s*class\s+(\d+)\s*$", re.M)


def load_module(path: Path):
    spec = importlib.util.spec_from_file_location(f"sync_check_corpus_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def expectation(path: Path) -> dict:
    """The ``# EXPECT: kind`` marker of a corpus file: ``{"kind": ..., "line": ...}``."""
    found = [(i + 1, m.group(1)) for i, text in enumerate(path.read_text().splitlines())
             for m in [_EXPECT.search(text)] if m]
    if len(found) != 1:
        raise ValueError(f"{path}: expected exactly one '# EXPECT: kind' marker, found "
                         f"{len(found)}")
    line, kind = found[0]
    return {"kind": kind, "line": line}


def issue13_class(path: Path) -> "int | None":
    """The ``# ISSUE13: class N`` marker of a corpus file (the bug classes of issue 13), if any."""
    m = _CLASS.search(path.read_text())
    return int(m.group(1)) if m else None


def corpus_files() -> list:
    return sorted(CORPUS.glob("*.py"))


class TraceBuilder:
    """Hand-built numsim traces for unit tests: `add(cls, warp, line, **fields)` appends an event
    with the next per-warp sequence number; locations point at a fake file ``k.py``."""

    def __init__(self, block=(64, 1, 1), cluster=None, grid=(1, 1, 1)):
        from tirxh_numsim import events as ev
        self.ev = ev
        self.trace = ev.Trace(kernel="k", grid=grid, block=block, cluster=cluster)
        self.seq: dict = {}

    def bar_sync(self, warps, line, cta=0):
        """``bar.sync 0`` by `warps`: every arrival, then every release (a CTA barrier)."""
        for w in warps:
            self.add(self.ev.BarrierEvent, w, line, cta=cta, op="sync")
        for w in warps:
            self.add(self.ev.BarrierEvent, w, line, cta=cta, op="sync", released=True)

    def add(self, cls, warp, line, cta=0, lanes=0xFFFFFFFF, instr=None, **fields):
        from tirxh.api import ir
        key = (cta, warp)
        s = self.seq.get(key, 0)
        self.seq[key] = s + 1
        e = cls(cta=cta, warp=warp, lanes=lanes, seq=s, step=len(self.trace.events),
                instr=instr, loc=ir.Loc("k.py", line), **fields)
        self.trace.events.append(e)
        return e
