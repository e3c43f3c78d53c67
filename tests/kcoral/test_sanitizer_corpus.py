"""benchmarks/sanitizer_corpus_gpu.py on the CPU: corpus entries become valid KCoral jobs, the
repeated-run and hang plumbing works through ``python -m kcoral.runjob`` on the fake board, and
the table logic reads the compute-sanitizer logs recorded on an H200 (2026-11-30, the script's
previous launcher; data/sanitizer_corpus_h200/)."""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from kcoral.blobs import BlobStore, array_bytes
from kcoral.boards.cuda import tensormap_args
from kcoral.job import Job, check_module

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data" / "sanitizer_corpus_h200"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location(
        "sanitizer_corpus_gpu", ROOT / "benchmarks" / "sanitizer_corpus_gpu.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _job(path) -> Job:
    doc = json.loads(Path(path).read_text())
    root = doc.pop("_blob_root")
    job = Job.from_json(doc)
    job.blob_root = root
    return job


@pytest.mark.parametrize("entry", ["race_rw_shared", "proxy_missing_fence"])
def test_corpus_entries_become_valid_jobs(bench, entry, tmp_path):
    info = bench.build(entry, tmp_path, analyze=False)
    store = BlobStore(tmp_path / "blobs")
    for variant in ("buggy", "fixed"):
        job = _job(info["variants"][variant])
        assert job.name == f"{entry}:{variant}" and job.target == "sm_90a"
        assert not store.missing(job.blobs()), "every blob the job names is in the store"
        ln = job.doc["launches"][0]
        assert ln["entry"] == variant and ln["grid"] == [1, 1, 1]
        check_module("cubin", store.get(job.doc["module"]["blob"]), [ln["entry"]])
        for b in job.doc["buffers"]:  # in-out: uploaded inputs(), read back
            assert b["output"] and b["init"]["kind"] == "blob"
            want = getattr(bench._load(entry), "inputs")()[b["name"]]
            np.testing.assert_array_equal(store.get_array(b["init"]["blob"]), want)
        assert not job.doc["timing"]["enabled"] and job.doc["runs"] == []


def test_the_rank1_tensor_map_of_proxy_missing_fence_encodes(bench, tmp_path):
    info = bench.build("proxy_missing_fence", tmp_path, analyze=False)
    ln = _job(info["variants"]["buggy"]).doc["launches"][0]
    tm = next(a["tensormap"] for a in ln["args"] if "tensormap" in a)
    assert tm["dims"] == [32] and tm["strides"] == []  # the map that failed on the H200
    assert tensormap_args(tm)["strides"] == [128]


def test_repeat_job_checks_every_output_exactly(bench, tmp_path):
    info = bench.build("oob_global", tmp_path, analyze=False)
    doc = _job(info["variants"]["buggy"]).doc
    exp = {"x": "a" * 64, "out": "b" * 64}
    rep = Job.from_json(bench.repeat_job(doc, 4, exp, first_seed=3)).doc
    assert [r["seed"] for r in rep["runs"]] == [3, 4, 5, 6]
    assert all(r["expected"] == exp for r in rep["runs"])
    assert {c["buffer"]: (c["rtol"], c["atol"]) for c in rep["checks"]} == \
        {"x": (0.0, 0.0), "out": (0.0, 0.0)}


def _args(**kw):
    base = dict(repeat=3, timeout=60.0, board_type="fake", sanitizer=None)
    base.update(kw)
    return argparse.Namespace(**base)


def test_fake_board_runs_the_whole_pipeline(bench, tmp_path):
    info = bench.build("race_rw_shared", tmp_path, board_type="fake", analyze=False)
    row = bench.run_entry(info, tmp_path, _args())
    assert row["gpu"] == "0/3 runs differ from fixed", row
    assert row["gpu_runs"]["buggy"]["runs"] == 3
    ref = tmp_path / "race_rw_shared" / "runs" / "fixed_ref" / "out.npy"
    np.testing.assert_array_equal(np.load(ref), np.zeros(64, np.uint32))  # no-op: the input


def test_mismatches_are_counted_by_resubmitting(bench, tmp_path, monkeypatch):
    info = bench.build("race_rw_shared", tmp_path, board_type="fake", analyze=False)
    store = BlobStore(tmp_path / "blobs")
    doc = _job(info["variants"]["buggy"]).doc
    wrong = {"out": store.put(array_bytes(np.arange(64, dtype=np.uint32)))}
    res = bench.repeated_runs(doc, wrong, 3, tmp_path / "w", store.root, 60.0, "fake")
    assert (res["runs"], res["differ"], res["first_differ"], res["stopped"]) == (3, 3, 1, False)
    assert res["max_elements"] == 63  # arange vs zeros: all but element 0
    assert bench.gpu_cell(res, {"runs": 3, "differ": 0}, 60.0) == \
        "3/3 runs differ from fixed (first: run 1, up to 63 elements)"
    monkeypatch.setattr(bench, "MAX_RESUBMITS", 1)
    res = bench.repeated_runs(doc, wrong, 5, tmp_path / "w2", store.root, 60.0, "fake")
    assert (res["runs"], res["differ"], res["stopped"]) == (2, 2, True)
    assert bench.gpu_cell(res, {"runs": 5, "differ": 0}, 60.0).startswith(">=2/2 runs differ")


def test_a_hang_is_reported_and_a_fault_named(bench, tmp_path):
    info = bench.build("race_rw_shared", tmp_path, board_type="fake", analyze=False)
    store = BlobStore(tmp_path / "blobs")
    doc = _job(info["variants"]["buggy"]).doc
    exp = {"out": store.put(array_bytes(np.zeros(64, np.uint32)))}
    res = bench.repeated_runs(dict(doc, fake={"hang": True}), exp, 2, tmp_path / "h",
                              store.root, 3.0, "fake")
    assert res["hang"] and res["runs"] == 0
    assert bench.gpu_cell(res, {"runs": 2, "differ": 0}, 3.0) == "hung (> 3 s)"
    res = bench.repeated_runs(dict(doc, fake={"fault": True}), exp, 2, tmp_path / "f",
                              store.root, 60.0, "fake")
    assert res["error"].startswith("runtime.illegal-address"), res


# the H200 recording: our findings (sanitizer_corpus.log) and the block of each entry
RECORDED = {
    "race_rw_shared": ([("race.read-write", 17)], [64, 1, 1]),
    "mbar_phase_overrun": ([("mbarrier.phase-overrun", 47), ("race.read-write", 48)],
                           [96, 1, 1]),
    "bar_divergent": ([("barrier.divergent", 19)], [64, 1, 1]),
    "oob_global": ([("memory.out-of-bounds", 16)], [64, 1, 1]),
    "proxy_missing_fence": ([("proxy.missing-fence", 18)], [32, 1, 1]),
}


def _recorded_row(bench, entry, failures=None):
    ours, block = RECORDED[entry]
    row = {"entry": entry, "ours": ours}
    for tool in bench.TOOLS:
        log = DATA / entry / f"{tool}.log"
        row[tool] = bench.sanitizer_cell(log.read_text(), tool, block, log,
                                         (failures or {}).get(tool, ""))
    return row


@pytest.mark.parametrize("entry,counts,missed", [
    ("race_rw_shared", (1, 0, 0), []),
    ("mbar_phase_overrun", (1, 0, 0), ["mbarrier.phase-overrun@47"]),
    ("oob_global", (0, 0, 2), []),
    ("proxy_missing_fence", (0, 0, 1), ["proxy.missing-fence@18"]),
])
def test_recorded_sanitizer_logs(bench, entry, counts, missed):
    row = _recorded_row(bench, entry)
    assert tuple(row[t]["count"] for t in bench.TOOLS) == counts
    assert bench.missed_findings(row) == missed


def test_recorded_findings_have_sync_checks_kinds(bench):
    race = _recorded_row(bench, "race_rw_shared")["racecheck"]
    assert race["findings"] == [("race.read-write", 16)]  # the write; the read (17) is related
    mem = _recorded_row(bench, "oob_global")["memcheck"]
    assert mem["findings"] == [("memory.out-of-bounds", 16)]


def test_recorded_synccheck_count_is_the_tools_total(bench):
    # the log also says "ERROR SUMMARY: 28 errors were not printed": not the total
    row = _recorded_row(bench, "bar_divergent")
    assert row["synccheck"]["count"] == 48
    assert row["synccheck"]["findings"] == [("barrier.divergent", 21)]


def test_a_job_that_failed_under_a_tool_is_flagged(bench, capsys):
    """The H200's proxy_missing_fence memcheck 'error' was the host's tensor-map encode failing,
    not the kernel: with the job's failure known, the cell says so."""
    row = _recorded_row(bench, "proxy_missing_fence",
                        {"memcheck": "launch.invalid_value: cuTensorMapEncodeTiled(...)"})
    assert bench.tool_cell(row["memcheck"]) == "1!"
    bench.print_table([row], sanitizer=True)
    out = capsys.readouterr().out
    assert "! proxy_missing_fence under memcheck: the job did not complete" in out
    assert "proxy_missing_fence: proxy.missing-fence@18" in out


def test_a_tool_without_summary_leaves_the_list_undetermined(bench):
    row = _recorded_row(bench, "race_rw_shared")
    row["memcheck"] = bench.sanitizer_cell("========= COMPUTE-SANITIZER\n", "memcheck",
                                           [64, 1, 1], "x.log", "hang")
    assert bench.tool_cell(row["memcheck"]) == "?!"
    assert bench.missed_findings(row) is None


def test_build_only_cli(bench, tmp_path, capsys):
    assert bench.main(["--build-only", "--entries", "race_rw_shared,oob_global",
                       "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "race_rw_shared         race.read-write@17" in out
    assert (tmp_path / "oob_global" / "buggy.job.json").exists()
    with pytest.raises(SystemExit, match="no corpus entry 'nope'"):
        bench.main(["--build-only", "--entries", "nope", "--out", str(tmp_path)])


@pytest.mark.gpu
def test_proxy_missing_fence_runs_on_the_gpu(bench, tmp_path):
    """On a GPU: the rank-1 tensor map is encoded by KCoral's cuda board and both twins run."""
    info = bench.build("proxy_missing_fence", tmp_path, analyze=False)
    row = bench.run_entry(info, tmp_path, _args(repeat=2, board_type="cuda"))
    assert "runs differ from fixed" in row["gpu"], row["gpu"]
