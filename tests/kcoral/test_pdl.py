"""Programmatic dependent launch (PDL), end to end on the CPU: a kernel that executes
``griddepcontrol.wait`` is launched with the programmatic-stream-serialization attribute. The
compiler says so in its launch metadata, benchmark and plan jobs carry it (``launches[i].pdl``),
KCoral validates it, and the cuda board adds the attribute to ``cuLaunchKernelEx`` (checked on
the launch config it builds; the launch itself needs a GPU: tests/kcoral/test_gpu.py)."""

import numpy as np
import pytest

import tirxh.lang as T
from kcoral.job import Job, JobError
from tirxh.core.benchjob import build_job
from tirxh.core.compiler import compile_kernel


@T.kernel(block=32)
def waits(out: T.gptr[T.f32]):
    T.ptx.griddepcontrol.wait()
    T.ptx.st.global_.f32(out.at(T.tid.x), 1.0)


@T.kernel(block=32)
def releases_only(out: T.gptr[T.f32]):
    T.ptx.griddepcontrol.launch_dependents()
    T.ptx.st.global_.f32(out.at(T.tid.x), 1.0)


def test_a_kernel_that_waits_on_its_prerequisite_grid_is_a_programmatic_launch():
    assert compile_kernel(waits, "sm_90a").launch_metadata()["pdl"] is True
    # launch_dependents alone lets the *next* kernel start early: this one needs no attribute
    assert compile_kernel(releases_only, "sm_90a").launch_metadata()["pdl"] is False


def test_the_benchmark_job_carries_it_and_kcoral_keeps_it():
    suite = T.suite(waits, inputs=lambda rng: {"out": np.zeros(32, np.float32)},
                    reference=lambda out: {"out": np.ones(32, np.float32)}, outputs=["out"],
                    cases=[T.case("one")])
    doc = build_job(compile_kernel(waits, "sm_90a"), suite, suite.cases[0]).to_doc()
    assert doc["launches"][0]["pdl"] is True
    assert Job.from_json(doc).launches[0].pdl is True


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_pdl_is_a_boolean_or_the_job_is_refused(value):
    doc = {"target": "sm_90a", "module": {"format": "fake", "blob": "0" * 64},
           "buffers": [{"name": "out", "dtype": "f32", "shape": [4], "output": True}],
           "launches": [{"entry": "k", "grid": [1], "block": [4], "args": [{"buffer": "out"}],
                         "pdl": value}]}
    with pytest.raises(JobError) as ei:
        Job.from_json(doc)
    assert [f for f, _ in ei.value.problems] == ["launches[0].pdl"]


@pytest.mark.parametrize("launch, ids", [
    ({}, []),
    ({"pdl": True}, ["CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION"]),
    ({"cluster": [2, 1, 1], "pdl": True}, ["CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION",
                                           "CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION"]),
])
def test_the_cuda_board_sets_the_launch_attribute(launch, ids):
    """The launch config the board hands cuLaunchKernelEx, built without a GPU (the driver's
    types only; the launcher calls no driver function for these launches)."""
    cuda = pytest.importorskip("cuda.bindings.driver")
    from kcoral.boards.cuda import CudaDevice
    dev = CudaDevice.__new__(CudaDevice)      # no device: only what launcher() reads
    dev.cu, dev.funcs, dev.stream = cuda, {"k": None}, cuda.CUstream(0)
    dev.ptrs = {"out": 0x1000}
    run = dev.launcher(dict({"entry": "k", "grid": [1, 1, 1], "block": [32, 1, 1],
                             "args": [{"buffer": "out"}], "params": None}, **launch), {})
    cfg = run._keep[1]
    assert cfg.numAttrs == len(ids)
    got = [a.id.name for a in cfg.attrs] if ids else []
    assert got == ids
    if launch.get("pdl"):
        assert cfg.attrs[-1].value.programmaticStreamSerializationAllowed == 1
