"""KCoral's ``sim`` board (tirxh_numsim.kcoral_board, registered through the ``kcoral`` entry
point): ``tirxh bench``-style jobs (cubin + ``module.ir``) run through numsim on an in-process
daemon whose only board is sim; correctness is checked, timing never taken."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from kcoral.client import KCoralClient, KCoralError
from kcoral.errors import Refusal
from kcoral.server import Daemon
from tirxh.api import bench_error
from tirxh.api import build_job as _build_job

ZOO = Path(__file__).resolve().parents[3] / "zoo" / "kernels"


def build_job(*a, **k) -> dict:
    return _build_job(*a, **k).to_doc()


def _suite(stem: str):
    spec = importlib.util.spec_from_file_location(f"zoo_sim_{stem}", ZOO / f"{stem}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.SUITE


def _compiled(suite, case_name: str):
    case = next(c for c in suite.cases if c.name == case_name)
    return suite.kernel.compile("sm_90a", **suite.consts(case)), case


@pytest.fixture(scope="module")
def sim_client(tmp_path_factory):
    d = Daemon({"boards": {"sim": {}}}, state_dir=tmp_path_factory.mktemp("sim-state"),
               port=0).start()
    c = KCoralClient(d.address, client_name="sim-test")
    try:
        assert [b["type"] for b in c.boards()] == ["sim"]
        yield c
    finally:
        c.close()
        d.stop(2)


@pytest.mark.parametrize("stem,case", [("vadd", "n1000"), ("gemm_wgmma", "m128n128k128")])
def test_bench_job_passes_on_the_sim_board(sim_client, stem, case):
    suite = _suite(stem)
    ck, c = _compiled(suite, case)
    doc = build_job(ck, suite, c, put=sim_client.put_blob)
    assert doc["module"]["format"] == "cubin" and doc["module"]["ir"]
    ev = sim_client.run(doc, timeout=120)
    res = ev["result"]
    assert ev["state"] == "done", res.get("error")
    assert res["board"] == "sim0" and res["verified"]
    assert [r["when"] for r in res["correctness"]] == ["before", "before", "after", "after"]
    assert all(r["ok"] and r["checks"] for r in res["correctness"])
    assert res["timing"] == {"skipped": "the sim board never times"}
    assert res["sim"]["simulated"] == "ir" and res["sim"]["ir"] == doc["module"]["ir"]
    # the correctness runs, then KCoral's guards' launches (kcoral/guards.py)
    assert res["sim"]["launches"] > 4 and res["sim"]["lane_instructions"] > 0
    assert {g["status"] for g in res["guards"].values()} == {"passed"}
    # checked, never a number: the bench plugin reports it as not timed (tests/kcoral)
    assert "the sim board never times" in res["timing"]["skipped"]


def test_wrong_expected_array_is_a_mismatch(sim_client):
    suite = _suite("vadd")
    ck, c = _compiled(suite, "n1000")
    doc = build_job(ck, suite, c, put=sim_client.put_blob)
    run = doc["runs"][0]
    inputs = suite.make_inputs(c, run["seed"])
    wrong = (inputs["a"] + inputs["b"]).astype(np.float32)
    wrong[7] += 1.0
    run["expected"]["out"] = sim_client.put_array(wrong)
    ev = sim_client.run(doc, timeout=120)
    err = ev["result"]["error"]
    assert ev["state"] == "failed" and err["type"] == "correctness.mismatch", err
    assert "1 of 1000 elements" in err["message"]
    bad = ev["result"]["correctness"][0]["checks"][0]
    assert bad["first"][0]["index"] == [7]


def test_job_without_ir_is_refused_naming_the_field(sim_client):
    suite = _suite("vadd")
    ck, c = _compiled(suite, "n1000")
    doc = build_job(ck, suite, c, put=sim_client.put_blob)
    del doc["module"]["ir"]
    with pytest.raises(KCoralError, match=r"module\.ir: board 'sim0' \(sim\) is unavailable "
                                          r"for this job: module\.ir is missing") as ei:
        sim_client.run(doc, timeout=60)
    assert ei.value.refusal == Refusal.NO_BOARD and ei.value.field == "module.ir"
    assert bench_error(ei.value)["type"] == "unavailable.board"  # `tirxh bench`: incomplete


def test_malformed_ir_is_a_typed_failure(sim_client):
    suite = _suite("vadd")
    ck, c = _compiled(suite, "n1000")
    doc = build_job(ck, suite, c, put=sim_client.put_blob)
    ir_doc = json.loads(ck.ir_json())
    ir_doc["body"][0]["spelling"] = "ld.parm.u64"
    doc["module"]["ir"] = sim_client.put_blob(json.dumps(ir_doc).encode())
    ev = sim_client.run(doc, timeout=60)
    err = ev["result"]["error"]
    assert err["type"] == "validation.module.ir", err
    assert "module.ir: kernel 'vadd': body[0].spelling: no binding accepts 'ld.parm.u64'" \
        in err["message"]


def test_bad_ir_digest_is_refused():
    from kcoral.job import Job, JobError
    doc = {"target": "sm_90a", "module": {"format": "cubin", "blob": "0" * 64, "ir": "xyz"},
           "launches": [{"entry": "k", "grid": [1], "block": [32]}]}
    with pytest.raises(JobError, match=r"module\.ir: 'xyz' is not a valid sha256 hex digest"):
        Job.from_json(doc)
    assert "1" * 64 in Job.from_json(dict(doc, module={"format": "cubin", "blob": "0" * 64,
                                                       "ir": "1" * 64})).blobs()


def test_ptx_module_must_be_what_the_ir_emits(sim_client):
    suite = _suite("vadd")
    ck, c = _compiled(suite, "n1000")
    doc = build_job(ck, suite, c, put=sim_client.put_blob)
    doc["module"].update(format="ptx", blob=sim_client.put_blob(ck.ptx.encode()))
    doc["timing"]["enabled"] = False
    ev = sim_client.run(doc, timeout=60)
    assert ev["state"] == "done", ev["result"].get("error")
    assert ev["result"]["sim"]["module_match"] == "ptx identical"
    assert ev["result"]["timing"] is None  # not asked for
    # the same IR beside a different program's PTX: refused, not simulated
    other = ck.ptx.replace("add.f32", "sub.f32")
    assert other != ck.ptx
    doc["module"]["blob"] = sim_client.put_blob(other.encode())
    ev = sim_client.run(doc, timeout=60)
    err = ev["result"]["error"]
    assert err["type"] == "validation.module.ir" and "different programs" in err["message"]


def test_unmodelled_aliasing_is_unavailable_not_passed(sim_client):
    suite = _suite("vadd")
    ck, c = _compiled(suite, "n1000")
    doc = build_job(ck, suite, c, put=sim_client.put_blob)
    doc["launches"][0]["args"][1] = {"buffer": "a"}  # a + a: legal on a GPU, not modelled
    ev = sim_client.run(doc, timeout=60)
    err = ev["result"]["error"]
    assert err["type"] == "unavailable.numsim", err
    assert "launches[0].args[1]: buffer 'a' is also argument 0" in err["message"]


def test_launch_disagreeing_with_the_ir_is_a_launch_error(sim_client):
    suite = _suite("vadd")
    ck, c = _compiled(suite, "n1000")
    doc = build_job(ck, suite, c, put=sim_client.put_blob)
    doc["launches"][0]["block"] = [128, 1, 1]
    ev = sim_client.run(doc, timeout=60)
    err = ev["result"]["error"]
    assert err["type"] == "launch.block", err
    assert "launches[0].block [128, 1, 1] differs from the kernel's block [256, 1, 1]" \
        in err["message"]


def test_scheduler_prefers_timing_boards_and_names_missing_ir(tmp_path):
    """No gRPC: a timed job goes to a board that times; only without one does it land on sim;
    a job without IR skips the sim board, or is refused when sim is all there is."""
    from kcoral.blobs import BlobStore
    from kcoral.boards import BoardSpec
    from kcoral.job import Job, JobError
    from kcoral.scheduler import Board, Scheduler
    from kcoral.store import JobStore

    class Idle:
        def run(self, *a, **k):  # never called: the test only picks boards
            raise AssertionError

    sim_props = {"requires": ["module.ir"], "max_buffer_bytes": 1 << 20, "max_work_flops": 1e6}
    s = Scheduler(JobStore(tmp_path / "k.sqlite"), BlobStore(tmp_path / "blobs"))
    try:
        s.add_board(Board(BoardSpec("sim0", "sim", "sm_80", timing=False,
                                    properties=sim_props), Idle()))
        s.add_board(Board(BoardSpec("sim1", "sim", "sm_90a", timing=False,
                                    properties=sim_props), Idle()))
        s.add_board(Board(BoardSpec("gpu0", "cuda", "sm_90a"), Idle()))

        def job(target, ir=True, timing=True, n=256, flops=None):
            mod = {"format": "cubin", "blob": "a" * 64}
            if ir:
                mod["ir"] = "c" * 64
            return Job.from_json({"target": target, "module": mod, "timing": {"enabled": timing},
                                  "buffers": [{"name": "x", "dtype": "f32", "shape": [n]}],
                                  "work": {"flops": flops},
                                  "launches": [{"entry": "k", "grid": [1], "block": [1]}]})
        assert s.pick_board(job("sm_90a")).name == "gpu0"
        assert s.pick_board(job("sm_90a", ir=False)).name == "gpu0"
        assert s.pick_board(job("sm_80")).name == "sim0"  # timing will say skipped
        with pytest.raises(JobError, match=r"module\.ir: board 'sim0' \(sim\) is unavailable"):
            s.pick_board(job("sm_80", ir=False))
        # too big to simulate in time: unavailable here (a GPU board would take it)
        with pytest.raises(JobError, match=r"buffers: board 'sim0' \(sim\) is unavailable for "
                                           r"this job: 4194304 bytes of buffers exceed the "
                                           r"1048576 this board takes"):
            s.pick_board(job("sm_80", n=1 << 20))
        with pytest.raises(JobError, match=r"work\.flops: .*2e\+06 declared FLOPs exceed"):
            s.pick_board(job("sm_80", flops=2e6))
        assert s.pick_board(job("sm_90a", n=1 << 20, flops=2e6)).name == "gpu0"
    finally:
        s.shutdown(0.5)


def test_the_ir_is_what_runs(sim_client):
    """A wrong kernel in module.ir fails even beside a correct cubin: the board simulates the
    IR (which is why a cubin's IR is taken from the same CompiledKernel)."""
    suite = _suite("vadd")
    ck, c = _compiled(suite, "n1000")
    doc = build_job(ck, suite, c, put=sim_client.put_blob)
    text = ck.ir_json()
    assert text.count('"spelling":"add.f32"') == 5  # four vector lanes and the tail
    wrong = text.replace('"spelling":"add.f32","binding":"add.f"',
                         '"spelling":"sub.f32","binding":"sub.f"')
    assert wrong.count('"spelling":"sub.f32"') == 5
    doc["module"]["ir"] = sim_client.put_blob(wrong.encode())
    ev = sim_client.run(doc, timeout=60)
    err = ev["result"]["error"]
    assert err["type"] == "correctness.mismatch", err
    assert "1000 of 1000 elements" in err["message"]
