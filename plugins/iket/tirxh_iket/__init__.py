"""tirxh-iket: intra-kernel event timelines for TIRx kernels.

``T.iket.range``/``T.iket.mark`` annotate a kernel (no cost in a normal build); `instrument` makes
the profiling build (`compile_profiling_build`: the compile pipeline plus iket's IR transform,
`TRANSFORM`) that records ``%globaltimer``/``%clock64``/``%smid``/``%warpid`` per event into
a hidden trace buffer; `profiling_job` makes its KCoral job; `decode` reads the buffer back;
`to_chrome`, `write_png` and `summarize` turn it into a Perfetto trace, a picture and the
numbers. See docs/PROFILING.md.
"""

from .chrome import to_chrome, write_chrome
from .decode import Timeline, decode, load
from .instrument import InstrumentError, instrument
from .job import add_trace_buffer, profiling_job
from .layout import LayoutError, TraceLayout
from .summary import format_summary, summarize
from .transform import TRANSFORM, compile_profiling_build

__version__ = "0.1.0"

__all__ = ["instrument", "InstrumentError", "compile_profiling_build", "TRANSFORM", "TraceLayout",
           "LayoutError", "decode", "load", "Timeline", "to_chrome", "write_chrome",
           "summarize", "format_summary", "profiling_job", "add_trace_buffer"]
