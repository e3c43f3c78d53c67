"""Wire a profiling build into a KCoral job: the hidden trace buffer and the ``iket`` tool entry.

A client (``tirxh profile --iket``, or `benchmarks/profile_gpu.py`) builds the job of the
instrumented `CompiledKernel` as for any kernel, then calls `add_trace_buffer`, which appends a
zero-filled ``u8`` output buffer sized for the launch grid, passes it as the kernel's last
argument (the hidden ``iket_trace`` parameter), and names the ``iket`` tool with the layout.
"""

from __future__ import annotations

import copy

from .layout import TraceLayout

MAX_TRACE_BYTES = 2 << 30  # 2 GiB: beyond this, lower the capacity or the grid


def add_trace_buffer(doc: dict, layout: TraceLayout, launch: int = 0,
                     options: "dict | None" = None) -> dict:
    """A copy of job document `doc` with the trace buffer, its argument and the iket tool."""
    d = copy.deepcopy(doc)
    try:
        ln = d["launches"][launch]
    except (KeyError, IndexError):
        raise ValueError(f"job has no launches[{launch}] to profile") from None
    if ln.get("entry") != layout.kernel:
        raise ValueError(f"launches[{launch}].entry is {ln.get('entry')!r}, the layout is for "
                         f"kernel {layout.kernel!r}")
    if any(b.get("name") == layout.param for b in d.get("buffers", [])):
        raise ValueError(f"job already has a buffer named {layout.param!r}")
    nbytes = layout.buffer_bytes(ln["grid"])
    if nbytes > MAX_TRACE_BYTES:
        raise ValueError(f"launches[{launch}]: the iket trace buffer would take {nbytes} bytes "
                         f"(grid {ln['grid']}, {layout.warps_per_cta} warps per CTA, capacity "
                         f"{layout.capacity}); lower --iket-capacity or profile a smaller case")
    d.setdefault("buffers", []).append({"name": layout.param, "dtype": "u8", "shape": [nbytes],
                                        "init": {"kind": "zeros"}, "output": True})
    ln.setdefault("args", []).append({"buffer": layout.param})
    opts = dict(options or {})
    opts.update({"layout": layout.to_json(), "launch": launch})
    d.setdefault("tools", []).append({"name": "iket", "options": opts})
    return d
