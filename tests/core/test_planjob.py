"""tirxh/core/planjob.py: several compiled kernels as one KCoral job (one merged module, the
launches in order over named buffers, scratch zeroed and never uploaded)."""

import numpy as np
import pytest

import tirxh.lang as T
from tirxh.core.planjob import build_plan_job, merge_ptx


@T.kernel(block=64)
def scale(x: T.gptr[T.f32], y: T.gptr[T.f32], k: T.const = 2):
    v = T.ptx.ld.global_.f32(x.at(T.tid.x))
    T.ptx.st.global_.f32(y.at(T.tid.x), v * float(k))


@T.kernel(block=64)
def shift(y: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32):
    with T.if_(T.tid.x < n):
        v = T.ptx.ld.global_.f32(y.at(T.tid.x))
        T.ptx.st.global_.f32(out.at(T.tid.x), v + 1.0)


def _steps():
    """scale by 2 into the scratch `mid`, by 3 into `mid2` (the same kernel, other constants),
    then shift `mid2` into `out`."""
    return [("s2", scale.compile("sm_90a", k=2), (1,), dict(y="mid")),
            ("s3", scale.compile("sm_90a", k=3), (1,), dict(x="mid", y="mid2")),
            ("sh", shift.compile("sm_90a"), (1,), dict(y="mid2"))]


def _run(seed, when="before"):
    x = np.random.default_rng(seed).standard_normal(64).astype(np.float32)
    z = np.zeros(64, np.float32)
    return {"seed": seed, "when": when, "expected": {"out": x * 6 + 1},
            "arrays": dict(x=x, mid=z, mid2=z, out=z, n=64)}


def test_merge_renames_each_entry_and_declares_the_header_once():
    parts = [(n, ck.ptx) for n, ck, _, _ in _steps()]
    ptx = merge_ptx(parts)
    assert ptx.count(".version") == 1 and ptx.count(".target") == 1
    for n in ("s2", "s3", "sh"):
        assert f".entry {n}(" in ptx
    assert ".entry scale(" not in ptx and ".entry shift(" not in ptx
    # each kernel's source file declared once, every .loc pointing at a declared index
    files = [ln.split()[1] for ln in ptx.splitlines() if ln.startswith(".file")]
    assert len(files) == len(set(files)) >= 1
    locs = {ln.split()[1] for ln in ptx.splitlines() if ln.strip().startswith(".loc")}
    assert locs <= set(files)


def test_merge_refuses_what_does_not_fit():
    ptx = scale.compile("sm_90a", k=2).ptx
    with pytest.raises(ValueError, match="no kernels to merge"):
        merge_ptx([])
    with pytest.raises(ValueError, match=r"entry names \['a'\] used more than once"):
        merge_ptx([("a", ptx), ("a", ptx)])
    with pytest.raises(ValueError, match="part 'b' has 2 .entry directives, expected 1"):
        merge_ptx([("a", ptx), ("b", merge_ptx([("x", ptx), ("y", ptx)]))])
    with pytest.raises(ValueError, match="part 'b' has header"):
        merge_ptx([("a", ptx), ("b", ptx.replace(".version 8.4", ".version 8.0"))])


def test_the_job_chains_launches_over_named_buffers_with_scratch_zeroed():
    job = build_plan_job("plan[small]", _steps(), [_run(1), _run(2, "after")], ["out"],
                         {"out": T.tolerance(rtol=1e-6)}, scratch=["mid", "mid2"])
    assert [ln.entry for ln in job.launches] == ["s2", "s3", "sh"]
    bufs = {b.name: b for b in job.buffers}
    assert set(bufs) == {"x", "mid", "mid2", "out"}
    assert bufs["mid"].init.kind == "zeros" and bufs["out"].init.kind == "empty"
    assert bufs["x"].init.kind == "blob" and bufs["out"].output
    assert job.launches[1].args[0].buffer == "mid" and job.launches[2].args[2].scalar == 64
    # only inputs travel per run; expected arrays for the checked output
    assert set(job.runs[0].inputs) == {"x"} and set(job.runs[1].expected) == {"out"}
    assert job.guards.seeds_before == 1 and job.guards.seeds_after == 1
    assert job.module.ir is None and "several kernels" in job.module.ir_error


def test_the_job_refuses_bindings_that_do_not_fit():
    steps = _steps()
    with pytest.raises(ValueError, match="parameter 'y' binds 'mid', which the plan's arrays"):
        run = _run(1)
        del run["arrays"]["mid"]
        build_plan_job("p", steps, [run], ["out"], {"out": T.tolerance()})
    with pytest.raises(ValueError, match="parameter 'x' is f32, buffer 'x' holds s32"):
        run = _run(1)
        run["arrays"]["x"] = np.zeros(64, np.int32)
        build_plan_job("p", steps, [run], ["out"], {"out": T.tolerance()})
    with pytest.raises(ValueError, match=r"outputs or scratch \['tmp'\] are bound by no launch"):
        build_plan_job("p", steps, [_run(1)], ["out"], {"out": T.tolerance()}, scratch=["tmp"])
    with pytest.raises(ValueError, match="a plan job needs at least one run"):
        build_plan_job("p", steps, [], ["out"], {"out": T.tolerance()})
    with pytest.raises(ValueError, match=r"p: the KCoral job is invalid: .*launches\[0\]\.grid"):
        bad = [(steps[0][0], steps[0][1], (0,), steps[0][3])] + steps[1:]
        build_plan_job("p", bad, [_run(1)], ["out"], {"out": T.tolerance()})
