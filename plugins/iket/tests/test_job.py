"""The profiling build's KCoral job for real zoo kernels, checked the way a CUDA board reads it:
``kcoral.job.Job.from_json`` and ``kcoral.boards.cuda.pack_params`` with fake pointers. The H200
run of 2026-11-30 failed here ("the kernel takes 4 parameters (a, b, out, n), the launch passes
5") because the job kept the normal build's ``params``; this test needs no GPU."""

import copy
import importlib.util
import pathlib

import pytest

from tirxh_iket.transform import compile_profiling_build
from tirxh_iket.job import add_trace_buffer, profiling_job

kcoral_job = pytest.importorskip("kcoral.job")
cuda_board = pytest.importorskip("kcoral.boards.cuda")
from kcoral.errors import JobFailure  # noqa: E402
from tirxh.api import build_job as _build_job  # noqa: E402


def build_job(*a, **k) -> dict:
    return _build_job(*a, **k).to_doc()

ZOO = pathlib.Path(__file__).resolve().parents[3] / "zoo" / "kernels"


def _zoo(name):
    spec = importlib.util.spec_from_file_location(f"zoo_{name}", ZOO / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _pack(doc):
    """What the CUDA board does with the launch before cuLaunchKernelEx, minus the GPU."""
    ln = doc["launches"][0]
    ptrs = {b["name"]: 0x7F0000000000 + (i << 24) for i, b in enumerate(doc["buffers"])}
    return cuda_board.pack_params(ln.get("params"), ln["args"], ptrs.__getitem__,
                                  lambda desc: bytes(128))


@pytest.mark.parametrize("module,kernel,case,capacity", [
    ("vadd", "vadd", "n4096", 6),
    ("gemm_wgmma", "gemm_wgmma", "m128n128k128", 24),
])
def test_profiling_job_of_a_zoo_kernel_packs(module, kernel, case, capacity):
    mod = _zoo(module)
    k, suite = getattr(mod, kernel), mod.SUITE
    c = next(x for x in suite.cases if x.name == case)
    consts = suite.consts(c)
    plain = k.compile("sm_90a", **consts)
    prof, layout = compile_profiling_build(k, "sm_90a", consts, capacity=capacity)
    plain_doc = build_job(plain, suite, c)
    before = copy.deepcopy(plain_doc)
    doc = profiling_job(plain_doc, prof, layout, "f" * 64)
    assert plain_doc == before  # the normal build's job is left as it was (it is timed too)
    assert "ir" not in doc["module"]  # the normal build's IR is another program than the cubin
    assert profiling_job(plain_doc, prof, layout, "f" * 64, ir_blob="e" * 64)["module"]["ir"] \
        == "e" * 64
    job = kcoral_job.Job.from_json(doc)
    ln = job.doc["launches"][0]
    assert job.doc["module"]["blob"] == "f" * 64
    assert [p["name"] for p in ln["params"]] == \
        [p["name"] for p in plain_doc["launches"][0]["params"]] + [layout.param]
    assert ln["args"][-1] == {"buffer": layout.param}
    packed = _pack(job.doc)
    assert len(packed) == len(ln["params"]) and len(packed[-1]) == 8  # the trace pointer
    # the normal build's job still packs (it is the overhead baseline)
    assert len(_pack(plain_doc)) == len(plain_doc["launches"][0]["params"])


def test_normal_build_metadata_is_refused_on_the_client():
    """What the H200 run did: the instrumented cubin swapped in, the normal build's params
    kept. add_trace_buffer refuses it with the reason, before any board sees it."""
    mod = _zoo("vadd")
    c = next(x for x in mod.SUITE.cases if x.name == "n4096")
    plain = mod.vadd.compile("sm_90a")
    prof, layout = compile_profiling_build(mod.vadd, "sm_90a", capacity=6)
    doc = build_job(plain, mod.SUITE, c)
    doc = dict(doc, module=dict(doc["module"], blob="f" * 64))
    with pytest.raises(ValueError, match=r"launches\[0\]\.params are \['a', 'b', 'out', 'n'\] "
                       r"\(4 parameters\) but the launch passes 5 arguments .*profiling_job"):
        add_trace_buffer(doc, layout)
    # and the board's own check says the same thing, had it got through
    bad = copy.deepcopy(doc)
    bad["launches"][0]["args"].append({"buffer": layout.param})
    bad["buffers"].append({"name": layout.param, "dtype": "u8", "shape": [8]})
    with pytest.raises(JobFailure, match="the kernel takes 4 parameters .* passes 5"):
        _pack(bad)


def test_profiling_job_wants_the_instrumented_build():
    mod = _zoo("vadd")
    c = next(x for x in mod.SUITE.cases if x.name == "n4096")
    plain = mod.vadd.compile("sm_90a")
    _, layout = compile_profiling_build(mod.vadd, "sm_90a", capacity=6)
    with pytest.raises(ValueError, match="last parameter is 'n', not the trace buffer "
                       "'iket_trace'; pass the instrumented build"):
        profiling_job(build_job(plain, mod.SUITE, c), plain, layout, "f" * 64)
