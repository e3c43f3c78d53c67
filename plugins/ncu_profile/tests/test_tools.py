"""The KCoral tools end to end on a CPU: fake ncu/compute-sanitizer binaries replay fixtures."""

import json
import sys
import types

import pytest

from kcoral.boards import BoardSpec
from kcoral.errors import JobError
import tirxh.api
from ncu_fakes import fake_binary, fake_ncu
from tirxh_ncu_profile import tools

kcoral_job = pytest.importorskip("kcoral.job")
BOARD = BoardSpec("cuda1", "cuda", "sm_90a", options={"ordinal": 1})

JOB = {
    "name": "vadd[n4096]", "target": "sm_90a",
    "module": {"format": "cubin", "blob": "0" * 64},
    "buffers": [{"name": "a", "dtype": "f32", "shape": [4096]},
                {"name": "out", "dtype": "f32", "shape": [4096], "output": True}],
    "launches": [{"entry": "vadd", "grid": [16, 1, 1], "block": [256, 1, 1],
                  "args": [{"buffer": "a"}, {"buffer": "out"},
                           {"scalar": 4096, "dtype": "u32"}]}],
    "runs": [{"seed": 1, "when": "before"}, {"seed": 2, "when": "after"}],
    "tools": [{"name": "ncu", "options": {"set": "full", "metrics": ["sm__inst_executed.sum"]}},
              {"name": "compute-sanitizer", "options": {"tool": "memcheck"}}],
}


@pytest.fixture
def job():
    return kcoral_job.Job.from_json(JOB)


def test_ncu_command_line(tmp_path):
    cmd = tools.ncu_profile_command("ncu", tmp_path / "rep", "vadd", ["python", "-m", "x"],
                                    "full", ["sm__inst_executed.sum"])
    assert cmd[:5] == ["ncu", "--clock-control", "none", "--set", "full"]
    metrics = cmd[cmd.index("--metrics") + 1].split(",")
    assert "dram__bytes_read.sum" in metrics and metrics[-1] == "sm__inst_executed.sum"
    assert cmd[cmd.index("--import-source") + 1] == "yes"
    assert cmd[cmd.index("--kernel-name") + 1] == "vadd"
    assert cmd[-3:] == ["python", "-m", "x"]
    with pytest.raises(ValueError, match="ncu --set 'detailed'"):
        tools.ncu_profile_command("ncu", tmp_path, "k", [], "detailed")


def test_sanitizer_command_line():
    cmd = tools.sanitizer_command("cs", "racecheck", ["python"])
    assert cmd == ["cs", "--tool", "racecheck", "--print-limit", "100", "--racecheck-report",
                   "all", "python"]
    with pytest.raises(ValueError, match="--sanitizer 'leak'"):
        tools.sanitizer_command("cs", "leak", [])


def test_profiling_job_runs_once():
    d = tools.profiling_job(JOB)
    assert d["timing"]["enabled"] is False and len(d["runs"]) == 1 and d["tools"] == []
    assert JOB["tools"] and len(JOB["runs"]) == 2  # the original is untouched


def test_board_without_ncu_answers_clearly(monkeypatch, tmp_path):
    monkeypatch.delenv("KCORAL_NCU", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(tools, "_SEARCH", ())
    # as on a board without CUDA tools (the tool looks find_tool up in tirxh.api when called)
    monkeypatch.setattr(tirxh.api, "find_tool", lambda name: None)
    board = types.SimpleNamespace(name="h200-0", type="cuda")
    why = tools.NcuTool().available(board)
    assert why.startswith("ncu (Nsight Compute CLI) not found on this board")
    assert "KCORAL_NCU" in why
    fake = types.SimpleNamespace(name="fake-0", type="fake")
    assert "profilers need a CUDA board" in tools.NcuTool().available(fake)
    assert "compute-sanitizer not found" in tools.SanitizerTool().available(board)


def test_ncu_tool_run_with_afake_ncu(monkeypatch, tmp_path, fixtures, job):
    work, log = fake_ncu(monkeypatch, tmp_path, fixtures / "ncu_vadd_basic_details.csv",
                          fixtures / "ncu_vadd_source_sass.csv")
    res = tools.NcuTool().run(job, work, BOARD)
    calls = log.read_text().splitlines()
    assert "--set full" in calls[0] and "kcoral.runjob" in calls[0]
    assert "--board-type cuda --device 1" in calls[0]  # the board the tool runs on
    assert set(res.artifacts) >= {"profile.ncu-rep", "ncu_details.csv", "ncu_source.csv",
                                  "ncu_summary.json"}
    assert res.summary["duration_ns"] == pytest.approx(56576)
    assert res.summary["hotspots"][0]["address"] == 0x150  # mapped later, by the client
    trimmed = json.loads((work / "job.json").read_text())
    assert trimmed["timing"]["enabled"] is False


def test_ncu_tool_reports_failure(monkeypatch, tmp_path, job):
    ncu = fake_binary(tmp_path, "ncu", """
        import sys
        sys.stderr.write("==ERROR== ERR_NVGPUCTRPERM - no permission to access counters\\n")
        sys.exit(1)
    """)
    monkeypatch.setenv("KCORAL_NCU", ncu)
    with pytest.raises(tools.ToolError, match=r"(?s)ncu failed \(exit 1\) profiling .vadd.*"
                       r"ERR_NVGPUCTRPERM"):
        tools.NcuTool().run(job, tmp_path, BOARD)


def test_sanitizer_tool_run_with_a_fake_binary(monkeypatch, tmp_path, fixtures, job):
    """Replays the memcheck log recorded on the H200 (fixtures/h200/memcheck_oob.log)."""
    cs = fake_binary(tmp_path, "compute-sanitizer", f"""
        import sys
        sys.stdout.write(open({str(fixtures / 'h200' / 'memcheck_oob.log')!r}).read())
        sys.exit(1)
    """)
    monkeypatch.setenv("KCORAL_COMPUTE_SANITIZER", cs)
    res = tools.SanitizerTool().run(job, tmp_path, BOARD)
    assert res.verdict == "error" and res.summary["findings"] == 3
    assert res.summary["error_summary"] == 67
    assert res.findings[0].kind == "memory.out-of-bounds"
    assert res.findings[0].warps == [5]  # thread 160: block shape taken from the job's launch
    assert "sanitizer_memcheck.log" in res.artifacts


@pytest.mark.parametrize("tool,options,field", [
    ("ncu", {"set": "detailed"}, "set"),
    ("ncu", {"metrics": ["a,b"]}, "metrics[0]"),
    ("ncu", {"metrics": ["--export=/tmp/x"]}, "metrics[0]"),
    ("ncu", {"launch": -1}, "launch"),
    ("ncu", {"args": ["--foo"]}, "args"),
    ("compute-sanitizer", {"tool": "leak"}, "tool"),
    ("compute-sanitizer", {"print_limit": 1e9}, "print_limit"),
])
def test_options_are_a_typed_set(tool, options, field):
    model = tools.NcuOptions if tool == "ncu" else tools.SanitizerOptions
    with pytest.raises(JobError) as ei:
        model.parse(options, f"tools[0].options")
    assert ei.value.field == f"tools[0].options.{field}"
    assert model.parse({}).to_doc()  # every option has a default


def test_registration():
    from kcoral.tools import ToolRegistry
    reg = ToolRegistry()
    tools.kcoral_register_tools(reg)
    assert reg.names() == ["compute-sanitizer", "ncu"]


def test_loads_into_kcorals_plugin_manager():
    from kcoral.plugins import build
    regs = build(extra_plugins=["tirxh_ncu_profile.tools"], autoload=False)
    assert {"ncu", "compute-sanitizer"} <= set(regs.tools.names())


# -- a baseline profiled in place of the kernel ----------------------------------------------------

BASELINE_JOB = dict(JOB, baselines=[{"name": "torch.matmul", "args": {"M": 64, "N": 64, "K": 64}},
                                    {"name": "torch.add", "args": {}, "optional": True}],
                    tools=[{"name": "ncu", "options": {"baseline": "torch.matmul"}}])


def test_ncu_baseline_command_line(tmp_path):
    cmd = tools.ncu_baseline_command("ncu", tmp_path / "rep", ["python", "-m", "x"], "basic")
    assert "--kernel-name" not in cmd
    i = cmd.index("--profile-from-start")
    assert cmd[i:i + 4] == ["--profile-from-start", "off", "--launch-count",
                            str(tools.BASELINE_LAUNCHES)]
    assert cmd[-3:] == ["python", "-m", "x"] and "--clock-control" in cmd


def test_profiling_job_keeps_only_the_profiled_baseline():
    d = tools.profiling_job(BASELINE_JOB, "torch.add")
    assert d["baselines"] == [{"name": "torch.add", "args": {}, "optional": False}]
    assert tools.profiling_job(BASELINE_JOB)["baselines"] == []
    with pytest.raises(tools.ToolError, match=r"'torch.mm' is not one of the job's baselines "
                                              r"\['torch.matmul', 'torch.add'\]"):
        tools.profiling_job(BASELINE_JOB, "torch.mm")


def test_a_baseline_name_is_validated_where_the_job_is_accepted():
    """The daemon refuses (before queueing) an ncu baseline the job does not declare, one not
    installed on the board, and a name that is not a plugin name."""
    job = kcoral_job.Job.from_json(BASELINE_JOB)
    tool_names = {"ncu": tools.NcuTool()}

    class Reg(dict):  # a registry: names(), in, get
        def names(self):
            return sorted(self)
    job.validate_plugins(Reg({"torch.matmul": 1}), Reg(tool_names), timed=False)
    with pytest.raises(JobError) as ei:   # installed here, but the job does not declare it
        kcoral_job.Job.from_json(dict(BASELINE_JOB, tools=[
            {"name": "ncu", "options": {"baseline": "fake.add"}}])).validate_plugins(
                Reg({"torch.matmul": 1, "fake.add": 1}), Reg(tool_names), timed=False)
    assert "tools[0].options.baseline" in str(ei.value)
    assert "'fake.add' is not one of the job's baselines ['torch.matmul', 'torch.add']" \
        in str(ei.value)
    with pytest.raises(JobError, match=r"unknown baseline 'torch.matmul'; installed: "
                                       r"\['fake.add'\]"):
        job.validate_plugins(Reg({"fake.add": 1}), Reg(tool_names), timed=False)
    with pytest.raises(JobError, match="not a valid baseline name"):   # never a path
        kcoral_job.Job.from_json(dict(BASELINE_JOB, tools=[
            {"name": "ncu", "options": {"baseline": "../x"}}])).validate_plugins(
                Reg({"torch.matmul": 1}), Reg(tool_names), timed=False)


def _two_launches(read) -> str:
    """A details export of two launches: the vadd fixture's, then the gemm fixture's as ID 1."""
    gemm = read("ncu_gemm_full_details.csv").splitlines()
    return read("ncu_vadd_basic_details.csv").rstrip("\n") + "\n" + "\n".join(
        '"1"' + line[3:] for line in gemm[1:] if line.startswith('"0"')) + "\n"


def test_ncu_tool_profiles_a_baseline_with_afake_ncu(monkeypatch, tmp_path, fixtures, read):
    (tmp_path / "two.csv").write_text(_two_launches(read))
    work, log = fake_ncu(monkeypatch, tmp_path, tmp_path / "two.csv",
                          fixtures / "ncu_vadd_source_sass.csv")
    res = tools.NcuTool().run(kcoral_job.Job.from_json(BASELINE_JOB), work, BOARD)
    call = log.read_text().splitlines()[0]
    assert "--profile-from-start off" in call and "--kernel-name" not in call
    assert call.endswith("--baseline torch.matmul")
    s = res.summary
    assert s["baseline"] == "torch.matmul" and s["launches_in_report"] == 2
    assert [k["kernel"] for k in s["kernels"]] == ["vadd", "gemm_wgmma"]
    assert s["duration_ns"] == pytest.approx(sum(k["duration_ns"] for k in s["kernels"]))
    assert "hotspots" not in s and all("hotspots" not in k for k in s["kernels"])
    trimmed = json.loads((work / "job.json").read_text())
    assert [b["name"] for b in trimmed["baselines"]] == ["torch.matmul"]
    from tirxh_ncu_profile.report import format_baseline
    text = format_baseline(s)
    assert text.startswith("ncu profile of baseline torch.matmul: 2 launch(es)")
    assert "[1] gemm_wgmma" in text and "grid (132, 1, 1), block (384, 1, 1)" in text


def test_a_baselines_cluster_rows_are_shown_as_ncu_exports_them():
    from tirxh_ncu_profile.report import format_baseline
    k = {"kernel": "sm90_xmma_gemm_bf16", "grid": "(132, 1, 1)", "block": "(384, 1, 1)",
         "metrics": {"Launch Statistics/Cluster Size": ["", "2"],
                     "Launch Statistics/Cluster Scheduling Policy": ["", "Spread"],
                     "Launch Statistics/Grid Size": ["", "132"]}}
    text = format_baseline({"baseline": "torch.matmul", "kernels": [k], "duration_ns": 1.5e5})
    assert "grid (132, 1, 1), block (384, 1, 1), cluster scheduling policy Spread, " \
           "cluster size 2," in text
    assert "cluster" not in format_baseline({"baseline": "b", "kernels": [dict(k, metrics={})]})


def test_a_baseline_range_that_captured_nothing_is_a_tool_error():
    with pytest.raises(tools.ToolError, match="ncu captured no launch of baseline 'torch.add'"):
        tools.summarize_baseline('"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n',
                                 "torch.add")
