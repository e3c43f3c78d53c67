"""tirxh-ncu-profile: Nsight Compute and compute-sanitizer for TIRx kernels through KCoral.

KCoral side (`tools`): the ``ncu`` and ``compute-sanitizer`` tools. Parsing (`ncu_csv`,
`sanitizer`, `source_map`) runs anywhere; `plugin` wires ``tirxh profile --ncu/--sanitizer``.
See docs/PROFILING.md.
"""

from .ncu_csv import NcuParseError, NcuSummary, parse_details, parse_source
from .sanitizer import SanitizerParseError, SanitizerReport, parse as parse_sanitizer
from .source_map import line_table, map_hotspots

__version__ = "0.1.0"

__all__ = ["parse_details", "parse_source", "NcuSummary", "NcuParseError", "parse_sanitizer",
           "SanitizerReport", "SanitizerParseError", "line_table", "map_hotspots"]
