"""Results of the KCoral GPU scripts (kcoral_gpu.py, kcoral_clock_check.py, kcoral_multi_gpu.py):
written to ``$OUT/<name>.json`` after every section, so a device call cut short still returns
what it measured, and replaced atomically, so a reader never sees half a file."""

from __future__ import annotations

import json
import os
import pathlib
import sys
import traceback


def save(out: dict, name: str) -> "pathlib.Path | None":
    """Write `out` to ``$OUT/<name>.json``; None when ``OUT`` is not set (a local run)."""
    if not os.environ.get("OUT"):
        return None
    p = pathlib.Path(os.environ["OUT"]) / f"{name}.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1, default=str))
    os.replace(tmp, p)
    return p


def finish(out: dict, name: str, bad: list) -> int:
    """Save `out` a last time and turn `bad` (what failed) into the exit status."""
    p = save(out, name)
    if p:
        print(f"wrote {p}")
    if bad:
        print(f"{name}: NOT all done: " + "; ".join(bad), file=sys.stderr)
        return 1
    return 0


def run_recorded(out: dict, describe, *args, **kwargs) -> "dict | None":
    """``describe(*args, **kwargs)`` (runs one job and returns its record), the record appended
    to ``out["runs"]``; an exception is kept in ``out["errors"]`` with its traceback and
    printed, so one failed job does not end the device call."""
    try:
        rec = describe(*args, **kwargs)
    except Exception:
        out["errors"].append(traceback.format_exc())
        print(out["errors"][-1], file=sys.stderr)
        return None
    out["runs"].append(rec)
    return rec
