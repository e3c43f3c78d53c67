"""Job validation: every problem named by its field, all reported together."""

import pytest

from kcoral.job import Job, JobError, check_module

D = "a" * 64


def base(**kw):
    d = {"target": "sm_90a", "module": {"format": "cubin", "blob": D},
         "buffers": [{"name": "x", "dtype": "f32", "shape": [16]}],
         "launches": [{"entry": "k", "grid": [1], "block": [32], "args": [{"buffer": "x"}]}]}
    d.update(kw)
    return d


def problems(doc, limits=None):
    with pytest.raises(JobError) as ei:
        Job.from_json(doc).validate(limits)
    return dict(ei.value.problems)


def test_valid_job_gets_defaults():
    j = Job.from_json(base())
    assert j.doc["launches"][0]["grid"] == [1, 1, 1]
    assert j.doc["timing"]["rel_noise"] == 0.01
    assert j.doc["buffers"][0]["init"] == {"kind": "zeros"}
    assert j.blobs() == {D}
    assert Job.from_json(j.to_json()).doc == j.doc


def test_errors_name_fields_and_are_collected():
    p = problems(base(target="", module={"format": "elf", "blob": "xyz"},
                      launches=[{"entry": "k", "grid": [0, 1, 1], "block": [2048, 1, 1],
                                 "args": [{"buffer": "nope"}, {"scalar": 1, "dtype": "q7"}]}]))
    assert set(p) >= {"target", "module.format", "module.blob", "launches[0].grid",
                      "launches[0].block", "launches[0].args[1].dtype"}
    # references between fields are checked once every field has the right shape
    p = problems(base(launches=[{"entry": "k", "grid": [1], "block": [32],
                                 "args": [{"buffer": "nope"}, {"buffer": "x"}]}],
                      checks=[{"buffer": "zz"}]))
    assert set(p) == {"launches[0].args[0]", "checks[0].buffer"}
    assert "nope" in p["launches[0].args[0]"]


def test_board_limits():
    lim = {"memory_bytes": 1000, "max_smem_per_block": 1024, "max_grid": (10, 10, 10)}
    doc = base(launches=[{"entry": "k", "grid": [11, 1, 1], "block": [32, 1, 1],
                          "dynamic_smem": 4096, "args": []}],
               buffers=[{"name": "x", "dtype": "f32", "shape": [1000]}])
    p = problems(doc, lim)
    assert "exceeds the board's limit" in p["launches[0].grid"]
    assert "4096" in p["launches[0].dynamic_smem"]
    assert "4000 bytes" in p["buffers[0].shape"]


def test_cluster_must_divide_grid():
    doc = base(launches=[{"entry": "k", "grid": [3, 1, 1], "block": [32, 1, 1],
                          "cluster": [2, 1, 1], "args": []}])
    assert "multiple" in problems(doc)["launches[0].cluster"]


def test_runs_and_checks_fields():
    p = problems(base(checks=[{"buffer": "x", "rtol": -1}],
                      runs=[{"seed": 1, "when": "later", "inputs": {"x": "bad"}}]))
    assert "checks[0].rtol" in p
    assert "runs[0].when" in p
    assert "runs[0].inputs.x" in p


def test_not_an_object():
    with pytest.raises(JobError, match="expected a JSON object"):
        Job.from_json("[1, 2]")


PTX = b""".version 8.5
.target sm_90a
.address_size 64
.visible .entry vadd(.param .u64 a)
{
    ret;
}
"""


def test_module_checks():
    check_module("ptx", PTX, ["vadd"])
    check_module("cubin", b"\x7fELF....vadd\0....", ["vadd"])
    check_module("fake", b"anything", ["x"])  # the fake board checks its own modules
    with pytest.raises(JobError, match=r"module.blob: the PTX has no .entry \['gemm'\]"):
        check_module("ptx", PTX, ["gemm"])
    with pytest.raises(JobError, match="no .target directive"):
        check_module("ptx", PTX.replace(b".target sm_90a", b""), ["vadd"])
    with pytest.raises(JobError, match="expected an ELF image"):
        check_module("cubin", PTX, ["vadd"])
    with pytest.raises(JobError, match="no kernel named \\['gemm'\\]"):
        check_module("cubin", b"\x7fELF....vadd\0", ["gemm"])
