"""How long each item took last time: the order in which ``-n`` hands items to workers.

A parallel run ends when its slowest worker does; handing out the longest items first keeps one
long simulation from starting last while the other workers sit idle. Every run (serial or
parallel) records its items' durations in the artifact cache's directory, one small JSON file
per project and command (``durations/<key>-<command>.json``, merged with what was there, written
atomically: temp file + rename, so concurrent runs never leave a torn file). Items never seen
get a heuristic guess: a small case of a Suite is simulated by the analyzers (seconds to
minutes), anything else is only compiled (a fraction of a second).

The history only orders work; a missing, stale or unreadable file costs nothing but a worse
order. ``--no-cache`` (the artifact cache disabled) neither reads nor writes it: a run told to
ignore the cache leaves nothing under the cache's root.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from .cache import cache_key

# the heuristic's guesses, seconds: a small case is simulated (numsim, sync_check), a large case
# or a compile-only kernel is only compiled by `tirxh check`
GUESS_SIMULATED = 10.0
GUESS_COMPILED = 0.5


def history_path(config) -> Path:
    """The history file of this project and command, under the artifact cache's root."""
    key = cache_key(str(Path(config.rootdir).resolve()))[:16]
    return Path(config.cache.root) / "durations" / f"{key}-{config.command}.json"


def load(config) -> dict:
    """node id -> seconds from the last runs ({} when there is no readable history, or the
    cache is disabled)."""
    if not config.cache.enabled:
        return {}
    try:
        data = json.loads(history_path(config).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(v, (int, float))}


def save(config, reports: list) -> None:
    """Merge the durations of `reports` (`ItemReport`) into the history; never fails a run."""
    if not reports or not config.cache.enabled:
        return
    path = history_path(config)
    data = load(config)
    data.update({r.nodeid: round(float(r.duration), 3) for r in reports})
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".durations-", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache directory: the next run orders by the heuristic


def guess(item) -> float:
    """Seconds an item never timed before is expected to take (see the module docstring)."""
    case = getattr(item, "case", None)
    if getattr(item, "suite", None) is not None and case is not None and case.small:
        return GUESS_SIMULATED
    return GUESS_COMPILED


def longest_first(config, items: list) -> list:
    """Indices into `items`, the longest expected first (ties keep collection order)."""
    history = load(config)
    expected = [history.get(it.nodeid, None) for it in items]
    expected = [guess(it) if e is None else e for it, e in zip(items, expected)]
    return sorted(range(len(items)), key=lambda i: -expected[i])
