"""sync_check: synchronization (synccheck) and race (racecheck) checking for TIRx kernels.

Both analyses run on the CPU over one numsim execution and its event trace (issue 5):
synccheck explores every interleaving of the warps' synchronizing steps with each warp's path held
fixed; racecheck builds happens-before with vector clocks over byte ranges. `check_kernel` runs
both on one launch; the tirxh plugin (`tirxh_sync_check.plugin`) runs them in `tirxh check`.
"""

from .analyze import check_kernel, check_trace
from .report import KINDS, format_finding

__all__ = ["check_kernel", "check_trace", "format_finding", "KINDS"]
__version__ = "0.1.0"
