"""Shared helpers for sync_check's tests: loading corpus modules and reading their labels."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

CORPUS = Path(__file__).parent / "corpus"
_EXPECT = re.compile(r"#\s*EXPECT:\s*([\w.\-]+)")


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


def corpus_files() -> list:
    return sorted(CORPUS.glob("*.py"))


@pytest.fixture
def corpus():
    return corpus_files()
