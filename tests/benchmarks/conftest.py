"""The scripts under benchmarks/ import their shared helpers (report_tables.py) as top-level
modules, as they do when run as ``python benchmarks/<script>.py``: put that directory first on
``sys.path`` before the tests load them by path."""

import sys
from pathlib import Path

BENCHMARKS = str(Path(__file__).resolve().parents[2] / "benchmarks")
if BENCHMARKS not in sys.path:
    sys.path.insert(0, BENCHMARKS)
