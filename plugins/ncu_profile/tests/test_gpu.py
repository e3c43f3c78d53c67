"""On a GPU board with the CUDA tools: ncu and compute-sanitizer run a real job end to end
(skipped without a GPU, or without ncu / compute-sanitizer)."""

import pytest

import tirxh.lang as T
from tirxh_ncu_profile import tools


@T.kernel(grid=lambda n: T.cdiv(n + 32, 128), block=128)
def oob(x: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32):
    i = T.ctaid.x * 128 + T.tid.x
    with T.if_(i < n + 32):  # planted: 32 threads write past the end of `out`
        T.ptx.st.global_.f32(out.at(i), T.ptx.ld.global_.f32(x.at(T.ptx.min.u32(i, n - 1))))


def _job(tmp_path, name):
    blobs = pytest.importorskip("kcoral.blobs")
    from kcoral.job import Job
    store = blobs.BlobStore(tmp_path / "blobs")
    n = 1000
    doc = {"name": "oob", "target": "sm_90a",
           "module": {"format": "cubin", "blob": store.put(oob.compile("sm_90a").cubin)},
           "buffers": [{"name": "x", "dtype": "f32", "shape": [n],
                        "init": {"kind": "normal", "mean": 0, "std": 1}},
                       {"name": "out", "dtype": "f32", "shape": [n], "output": True}],
           "launches": [{"entry": "oob", "grid": [oob.grid_dims({"n": n})[0], 1, 1],
                         "block": [128, 1, 1],
                         "args": [{"buffer": "x"}, {"buffer": "out"},
                                  {"scalar": n, "dtype": "u32"}]}],
           "tools": [{"name": name, "options": {"tool": "memcheck"}}]}
    job = Job.from_json(doc)
    job.blob_root = str(store.root)
    return job


@pytest.mark.gpu
def test_sanitizer_finds_the_planted_write(tmp_path):
    t = tools.SanitizerTool()
    why = t.available(None)
    if why:
        pytest.skip(why)
    r = t.run(_job(tmp_path, t.name), tmp_path)
    hits = [f for f in r.findings if f.kind == "memory.out-of-bounds"]
    assert hits and r.verdict == "error"
    assert hits[0].where.file.endswith("test_gpu.py") and hits[0].data["access"] == "write"


@pytest.mark.gpu
def test_ncu_profiles_a_launch(tmp_path):
    t = tools.NcuTool()
    why = t.available(None)
    if why:
        pytest.skip(why)
    r = t.run(_job(tmp_path, t.name), tmp_path)
    assert r.summary["duration_ns"] > 0 and r.summary["kernel"].startswith("oob")
    assert (tmp_path / "profile.ncu-rep").stat().st_size > 0
