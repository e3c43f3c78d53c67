"""The iket KCoral tool end to end on a CPU: a real ``kcoral.runjob`` child process on the fake
board, whose kernel copies a synthetic trace into the hidden trace buffer; plus the job wiring."""

import json

import numpy as np
import pytest

import tracegen
from tirxh_iket.job import add_trace_buffer
from tirxh_iket.kcoral_tool import IketTool, ToolError, kcoral_register_tools

kcoral_job = pytest.importorskip("kcoral.job")
blobs = pytest.importorskip("kcoral.blobs")
from kcoral.boards import BoardSpec  # noqa: E402
from kcoral.errors import JobError  # noqa: E402

FAKE = BoardSpec("fake0", "fake", "sm_90a")  # runjob opens the board the tool runs on


def _job(tmp_path, layout, trace: bytes, extra_opts=None):
    store = blobs.BlobStore(tmp_path / "blobs")
    module = json.dumps({"kernels": {layout.kernel: {"op": "copy"}}}).encode()
    doc = {"name": "gemm_ws[synthetic]", "target": "sm_90a",
           "module": {"format": "fake", "blob": store.put(module)},
           "buffers": [{"name": "src", "dtype": "u8", "shape": [len(trace)],
                        "init": {"kind": "blob", "blob": store.put(
                            blobs.array_bytes(np.frombuffer(trace, np.uint8)))}}],
           "launches": [{"entry": layout.kernel, "grid": [2, 1, 1], "block": [384, 1, 1],
                         "args": [{"buffer": "src"}]}]}
    opts = dict(extra_opts or {})
    job = kcoral_job.Job.from_json(add_trace_buffer(doc, layout, options=opts))
    job.blob_root = str(store.root)
    return job


def test_job_wiring(gemm_layout):
    doc = {"launches": [{"entry": "gemm_ws", "grid": [4, 2, 1], "args": [{"buffer": "a"}]}],
           "buffers": [{"name": "a"}]}
    d = add_trace_buffer(doc, gemm_layout)
    buf = d["buffers"][-1]
    assert buf == {"name": "iket_trace", "dtype": "u8", "shape": [8 * 12 * 64 * 32],
                   "init": {"kind": "zeros"}, "output": True}
    assert d["launches"][0]["args"][-1] == {"buffer": "iket_trace"}
    assert d["tools"][0]["name"] == "iket" and d["tools"][0]["options"]["layout"]["capacity"] == 64
    assert doc["buffers"] == [{"name": "a"}]  # the input document is not modified
    with pytest.raises(ValueError, match="the layout is for kernel 'gemm_ws'"):
        add_trace_buffer({"launches": [{"entry": "other", "grid": [1, 1, 1]}]}, gemm_layout)
    with pytest.raises(ValueError, match="would take .* bytes"):
        add_trace_buffer({"launches": [{"entry": "gemm_ws", "grid": [1 << 20, 64, 1]}]},
                         gemm_layout)


def test_tool_runs_runjob_and_renders(tmp_path, gemm_layout):
    trace = tracegen.write(gemm_layout, 2, tracegen.gemm_schedule(nsms=2))
    job = _job(tmp_path, gemm_layout, trace)
    work = tmp_path / "work"
    work.mkdir()
    r = IketTool().run(job, work, FAKE)
    assert r.verdict is None, r.summary["issues"]
    assert r.summary["warps"] == 6 and r.summary["balance"]["sms"] == 2
    names = set(r.artifacts)
    assert {"iket_trace.json", "iket_summary.txt", "iket_summary.json", "iket_trace.bin",
            "iket_trace.layout.json"} <= names
    assert np.array_equal(np.fromfile(r.artifacts["iket_trace.bin"], np.uint8),
                          np.frombuffer(trace, np.uint8))
    doc = json.loads((work / "iket_trace.json").read_text())
    assert any(e["ph"] == "X" for e in doc["traceEvents"])
    # how long each rendering step took on the board, in the summary and its text
    steps = list(r.summary["render_s"])
    assert steps[:3] == ["decode", "summary", "chrome"] and steps[3:] in ([], ["png"])
    assert all(v >= 0 for v in r.summary["render_s"].values())
    assert "rendered in decode " in (work / "iket_summary.txt").read_text()


def test_tool_reports_runjob_failure(tmp_path, gemm_layout):
    trace = tracegen.write(gemm_layout, 2, tracegen.gemm_schedule(nsms=2))
    job = _job(tmp_path, gemm_layout, trace)
    with pytest.raises(ToolError, match="kcoral.runjob failed"):
        IketTool().run(job, tmp_path, BoardSpec("x0", "nosuch", "sm_90a"))


def test_bad_layout_option(tmp_path, gemm_layout):
    job = _job(tmp_path, gemm_layout, b"\0" * gemm_layout.buffer_bytes((2, 1, 1)))
    job.tools[0].options["layout"] = {"kernel": "x"}
    with pytest.raises(JobError, match=r"tools\.iket\.options\.layout: layout\.capacity"):
        IketTool().run(job, tmp_path, FAKE)


@pytest.mark.parametrize("options,field", [
    ({"runjob_args": ["--out", "/tmp"]}, "runjob_args"),   # no command line from a client
    ({"max_sms": 0}, "max_sms"),
    ({"roles": {"x": "load"}}, "roles"),
    ({"clock_ghz": float("nan")}, "clock_ghz"),
])
def test_options_are_a_typed_set(gemm_layout, options, field):
    from tirxh_iket.kcoral_tool import IketOptions
    with pytest.raises(JobError) as ei:
        IketOptions.parse(dict(layout=gemm_layout.to_json(), **options), "tools[0].options")
    assert ei.value.field == f"tools[0].options.{field}"


def test_trace_parameter_must_be_an_identifier(gemm_layout):
    from tirxh_iket.kcoral_tool import IketOptions
    lay = dict(gemm_layout.to_json(), param="../../etc/x")
    with pytest.raises(JobError, match=r"tools\[0\]\.options\.layout\.param: "):
        IketOptions.parse({"layout": lay}, "tools[0].options")


def test_registration():
    from kcoral.tools import ToolRegistry
    reg = ToolRegistry()
    kcoral_register_tools(reg)
    assert reg.names() == ["iket"]


def test_loads_into_kcorals_plugin_manager():
    from kcoral.plugins import build
    regs = build(extra_plugins=["tirxh_iket.kcoral_tool"], autoload=False)
    assert "iket" in regs.tools.names()


def test_a_sim_board_is_declined_by_type():
    assert IketTool().available(BoardSpec("sim0", "sim", "sm_90a")) == \
        "board 'sim0' is of type 'sim'; iket records time on a CUDA board"
    assert IketTool().available(FAKE) is None  # the CPU tests' stand-in for a GPU board


def test_a_lossy_trace_tells_the_client_what_to_rerun_with(tmp_path, gemm_layout):
    """The board's summary carries ``events_lost`` (the exact largest need and the capacity to
    rerun with): what `plugin.tirxh_profile_item` reads to rerun a capacity-auto profile."""
    from tirxh_iket.layout import TraceLayout
    small = TraceLayout(**{**gemm_layout.__dict__, "capacity": 8})
    trace = tracegen.write(small, 2, tracegen.gemm_schedule(nsms=2, tiles_per_sm=2))
    work = tmp_path / "work"
    work.mkdir()
    r = IketTool().run(_job(tmp_path, small, trace), work, FAKE)
    assert r.verdict == "incomplete"
    on_disk = json.loads((work / "iket_summary.json").read_text())
    assert on_disk["events_lost"] == r.summary["events_lost"]
    assert {k: on_disk["events_lost"][k] for k in ("warps", "needed_max", "capacity",
                                                    "suggested_capacity", "suggested_bytes")} \
        == {"warps": 6, "needed_max": 22, "capacity": 8, "suggested_capacity": 32,
            "suggested_bytes": 2 * 12 * 32 * 32}
    text = (work / "iket_summary.txt").read_text()
    assert text.count("events lost") == 1 and "rerun with --iket-capacity 32" in text
