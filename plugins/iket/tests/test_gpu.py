"""On a GPU: the profiling build really runs, writes one record per event per warp, and
decodes into the expected spans (skipped without a GPU)."""

import json

import numpy as np
import pytest

import tirxh.lang as T
from tirxh_iket.transform import compile_profiling_build
from tirxh_iket.job import add_trace_buffer
from tirxh_iket.kcoral_tool import IketTool


@T.kernel(grid=lambda n: T.cdiv(n, 128), block=128)
def looped(x: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32):
    i = T.ctaid.x * 128 + T.tid.x
    with T.if_(i < n):
        acc = T.reg(T.f32, init=0.0)
        with T.range(4):
            with T.iket.range("step"):
                acc.set(acc + T.ptx.ld.global_.f32(x.at(i)))
        T.ptx.st.global_.f32(out.at(i), acc)
        T.iket.mark("done")


@pytest.mark.gpu
def test_profiling_build_on_the_gpu(tmp_path):
    blobs = pytest.importorskip("kcoral.blobs")
    from kcoral.job import Job
    ck, layout = compile_profiling_build(looped, "sm_90a", capacity=16)
    store = blobs.BlobStore(tmp_path / "blobs")
    n = 128 * 6
    doc = {"name": "looped", "target": "sm_90a",
           "module": {"format": "cubin", "blob": store.put(ck.cubin)},
           "buffers": [{"name": "x", "dtype": "f32", "shape": [n],
                        "init": {"kind": "normal", "mean": 0, "std": 1}},
                       {"name": "out", "dtype": "f32", "shape": [n], "output": True}],
           "launches": [{"entry": "looped", "grid": [6, 1, 1], "block": [128, 1, 1],
                         "args": [{"buffer": "x"}, {"buffer": "out"},
                                  {"scalar": n, "dtype": "u32"}]}]}
    job = Job.from_json(add_trace_buffer(doc, layout))
    job.blob_root = str(store.root)
    from kcoral.boards import BoardSpec
    r = IketTool().run(job, tmp_path, BoardSpec("cuda0", "cuda", "sm_90a"))
    s = r.summary
    assert s["verdict"] == "ok", s["issues"]
    assert s["warps"] == 6 * 4
    step = s["roles"]["step"]["ranges"]["step"]
    assert step["count"] == 6 * 4 * 4 and step["mean_ns"] > 0
    trace = json.loads((tmp_path / "iket_trace.json").read_text())
    assert sum(e["ph"] == "i" for e in trace["traceEvents"]) == 6 * 4
    raw = np.fromfile(r.artifacts["iket_trace.bin"], np.uint8)
    assert raw.size == layout.buffer_bytes((6, 1, 1))
