"""Wire a profiling build into a KCoral job: the hidden trace buffer and the ``iket`` tool entry.

A client (``tirxh profile --iket``, or `benchmarks/profile_gpu.py`) builds the normal build's job
(``tirxh.api.build_job(...).to_doc()``: buffers, inputs, checks) and turns it into the profiling
build's job with `profiling_job`: the module becomes the instrumented cubin, the launch metadata
(``params``, block, shared memory) comes from the instrumented kernel's ``launch_metadata()``, and
`add_trace_buffer` appends a zero-filled ``u8`` output buffer sized for the launch grid, passes it
as the kernel's last argument (the hidden ``iket_trace`` parameter), and names the ``iket`` tool
with the layout.

Why the metadata must be swapped (issue 7, H200 run of 2026-11-30): the normal build's
``launches[i].params`` lists the kernel's own parameters only; with the trace buffer's argument
appended, KCoral's ``pack_params`` refused the launch ("the kernel takes 4 parameters (a, b, out,
n), the launch passes 5"). `add_trace_buffer` now checks that params and args agree, so such a
job fails on the client, before it reaches a board.
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
    params = ln.get("params")
    if params is not None:  # KCoral packs args against these: they must be the profiling build's
        names = [p.get("name") for p in params]
        if len(names) != len(ln["args"]) or names[-1:] != [layout.param]:
            raise ValueError(
                f"launches[{launch}].params are {names} ({len(names)} parameters) but the "
                f"launch passes {len(ln['args'])} arguments ending with the trace buffer "
                f"{layout.param!r}: the launch metadata is the normal build's; take it from the "
                "profiling build (tirxh_iket.job.profiling_job)")
    opts = dict(options or {})
    opts.update({"layout": layout.to_json(), "launch": launch})
    d.setdefault("tools", []).append({"name": "iket", "options": opts})
    return d


def profiling_job(plain_doc: dict, profiling_build, layout: TraceLayout, cubin_blob: str,
                  launch: int = 0, options: "dict | None" = None,
                  ir_blob: "str | None" = None) -> dict:
    """The profiling build's job from the normal build's job document `plain_doc`.

    `profiling_build` is the instrumented `CompiledKernel` (`transform.compile_profiling_build`),
    `cubin_blob` the digest its cubin was uploaded under. Buffers, inputs, runs and checks stay
    the normal build's (the profiling build must compute the same result); the module and the
    launch's entry, params, block, cluster and dynamic shared memory become the profiling
    build's; then `add_trace_buffer`. `plain_doc` is not modified. The module's IR (what a sim
    board runs) becomes `ir_blob`, the profiling build's IR, or is dropped: the normal build's
    IR is another program than the cubin (a sim board ran it and refused the trace buffer as a
    fifth argument of a four-parameter kernel).
    """
    d = copy.deepcopy(plain_doc)
    module = {k: v for k, v in (d.get("module") or {}).items() if k != "ir"}
    d["module"] = dict(module, format="cubin", blob=cubin_blob, **({"ir": ir_blob} if ir_blob
                                                                    else {}))
    try:
        ln = d["launches"][launch]
    except (KeyError, IndexError):
        raise ValueError(f"job has no launches[{launch}] to profile") from None
    md = profiling_build.launch_metadata()
    if md["params"][-1:] and md["params"][-1]["name"] != layout.param:
        raise ValueError(f"kernel {md['entry']!r}: the profiling build's last parameter is "
                         f"{md['params'][-1]['name']!r}, not the trace buffer {layout.param!r}; "
                         "pass the instrumented build, not the normal one")
    ln.update(entry=md["entry"], params=md["params"], block=list(md["block"]),
              cluster=md["cluster"], dynamic_smem=int(md["dynamic_smem"]))
    return add_trace_buffer(d, layout, launch, options)
