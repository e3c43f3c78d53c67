"""numsim: run TIRx kernels on the CPU, numerically faithful, with diagnostics (issue 4).

Public API: `run` (simulate one launch -> `SimResult`), the event trace dataclasses in
`tirxh_numsim.events` (consumed by sync_check), and `supported_ops()` (every binding's fidelity
class). The tirxh plugin (`tirxh_numsim.plugin`, entry point ``numsim``) runs each item's small
cases in `tirxh check`.
"""

from .api import SimResult, run
from .support import supported_ops


__all__ = ["run", "SimResult", "supported_ops"]
__version__ = "0.1.0"
