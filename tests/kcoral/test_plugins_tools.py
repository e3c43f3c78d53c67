"""KCoral's plugin manager, tools run by the worker, and ``python -m kcoral.runjob``."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from kcoral.client import KCoralClient
from kcoral.errors import KCoralError
from kcoral.plugins import build
from kcoral.server import Daemon

from .conftest import fake_job

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TOOL = textwrap.dedent('''
    from dataclasses import dataclass
    from kcoral.schema import Int, Model, spec
    from kcoral.tools import Tool, ToolResult

    @dataclass
    class EchoOptions(Model):
        x: int = spec(Int(0, 10), 0)

    class Echo(Tool):
        name = "echo"
        options = EchoOptions
        def available(self, board):
            return None if board.type == "fake" else "echo runs on fake boards only"
        def run(self, job, workdir, board):
            p = workdir / "job.json"
            job.write_json(p)
            opts = job.tool_options("echo", EchoOptions)
            return ToolResult(artifacts={"job.json": p}, summary={"launches": len(
                job.launches), "x": opts.x, "workdir": str(workdir), "board": board.name})

    class Escape(Tool):
        name = "escape"
        def run(self, job, workdir, board):
            return ToolResult(artifacts={"passwd": "/etc/passwd"})

    class Never(Tool):
        name = "never"
        def available(self, board):
            return "never available"

    def kcoral_register_tools(registry):
        registry.add(Echo(), owner="echo_plugin")
        registry.add(Never(), owner="echo_plugin")
        registry.add(Escape(), owner="echo_plugin")
''')


def test_builtins_and_misspelled_hooks(tmp_path, monkeypatch):
    regs = build(autoload=False)
    assert set(regs.board_types.names()) == {"cuda", "fake"}  # sim comes from numsim
    assert "sim" in build().board_types.names()  # through the kcoral entry point
    assert "fake.add" in regs.baselines
    (tmp_path / "typo_plugin.py").write_text("def kcoral_register_boards(registry):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import pluggy
    with pytest.raises(pluggy.PluginValidationError, match="kcoral_register_boards"):
        build(["typo_plugin"], autoload=False)


def test_tools_run_after_the_job(tmp_path, monkeypatch):
    (tmp_path / "echo_plugin.py").write_text(TOOL)
    import kcoral.plugins
    monkeypatch.setattr(kcoral.plugins, "_CACHED", None)  # restored afterwards
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("KCORAL_PLUGINS", "echo_plugin")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), ROOT]))
    d = Daemon({"boards": {"fake": {"count": 1}}}, state_dir=tmp_path / "s", port=0).start()
    try:
        with KCoralClient(d.address) as c:
            doc = fake_job(c, tools=[{"name": "echo", "options": {"x": 1}}, {"name": "never"},
                                     {"name": "escape"}])
            ev = c.run(doc)
            assert ev["state"] == "done", ev
            tools = ev["result"]["tools"]
            assert tools["echo"]["status"] == "ok"
            summary = tools["echo"]["summary"]
            assert summary["launches"] == 1 and summary["x"] == 1 and summary["board"] == "fake0"
            # the tool's directory: under the job's, created by the daemon, gone afterwards
            wd = summary["workdir"]
            assert wd == str(tmp_path / "s" / "jobs" / ev["job_id"] / "echo")
            assert not os.path.exists(os.path.dirname(wd))
            written = json.loads(c.download(tools["echo"]["artifacts"]["job.json"]))
            assert written["_blob_root"]
            assert written["launches"][0]["args"] == doc["launches"][0]["args"]
            assert tools["never"] == {"status": "unavailable", "reason": "never available"}
            # an artifact outside the tool's directory is never read back
            assert tools["escape"]["status"] == "error"
            assert "outside the tool's directory" in tools["escape"]["reason"]
            # tools and options are checked when the job is submitted
            for tl, field, why in ((
                    [{"name": "missing"}], "tools[0].name", "unknown tool 'missing'"),
                    ([{"name": "echo", "options": {"x": 99}}], "tools[0].options.x",
                     "99 is outside 0..10"),
                    ([{"name": "echo", "options": {"runjob_args": ["--out", "/tmp"]}}],
                     "tools[0].options.runjob_args", "unknown field"),
                    ([{"name": "never", "options": {"a": 1}}], "tools[0].options",
                     "takes no options")):
                with pytest.raises(KCoralError) as ei:
                    c.run(fake_job(c, tools=tl))
                assert ei.value.code == "INVALID_ARGUMENT" and ei.value.field == field
                assert why in ei.value.message
    finally:
        d.stop(1)


def test_a_daemon_without_numsim_has_no_sim_board_and_says_so(tmp_path, monkeypatch):
    import kcoral.plugins
    monkeypatch.setattr(kcoral.plugins, "_CACHED", None)  # restored afterwards
    monkeypatch.setenv("KCORAL_DISABLE_PLUGIN_AUTOLOAD", "1")  # as if numsim were not installed
    d = Daemon({"boards": {"fake": {"count": 1}, "sim": {}}}, state_dir=tmp_path / "s",
               port=0).start()
    try:
        assert "sim" not in kcoral.plugins.registries().board_types.names()
        with KCoralClient(d.address) as c:
            assert [b["name"] for b in c.boards()] == ["fake0"]
            with pytest.raises(KCoralError) as ei:
                c.run(fake_job(c, board="sim0"))
            assert ei.value.refusal == "unavailable.board" and ei.value.field == "board"
            assert "board type 'sim' is configured but not installed: it comes from the " \
                   "numsim distribution" in ei.value.message
            assert c.run(fake_job(c))["state"] == "done"  # the rest works as before
    finally:
        d.stop(1)


def test_runjob_without_a_daemon(tmp_path):
    from kcoral.blobs import BlobStore
    from kcoral.job import Job

    class Put:
        def __init__(self):
            self.store = BlobStore(tmp_path / "blobs")

        def put_blob(self, data):
            return self.store.put(data)

        def put_array(self, a):
            return self.store.put_array(a)
    p = Put()
    job = Job.from_json(fake_job(p))
    job.blob_root = str(p.store.root)
    job.write_json(tmp_path / "job.json")
    env = dict(os.environ, PYTHONPATH=ROOT)
    cmd = [sys.executable, "-m", "kcoral.runjob", str(tmp_path / "job.json"), "--board-type",
           "fake", "--out", str(tmp_path / "out"), "--save-outputs"]
    r = subprocess.run(cmd + ["--iterations", "3"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    out = np.load(tmp_path / "out" / "out.npy")
    assert out.shape == (1000,) and np.isfinite(out).all()
    r = subprocess.run(cmd + ["--check"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    assert [c["ok"] for c in res["correctness"]] == [True, True]
    bad = Job.from_json(fake_job(p, op="add_bug"))
    bad.blob_root = str(p.store.root)
    bad.write_json(tmp_path / "bad.json")
    r = subprocess.run([sys.executable, "-m", "kcoral.runjob", str(tmp_path / "bad.json"),
                        "--board-type", "fake", "--check"], capture_output=True, text=True,
                       env=env)
    assert r.returncode == 1 and "correctness.mismatch" in r.stdout
    r = subprocess.run([sys.executable, "-m", "kcoral.runjob", str(tmp_path / "nope.json")],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "nope.json" in r.stderr


def test_runjob_runs_a_baseline_inside_the_profiler_range(tmp_path, monkeypatch):
    """``runjob --baseline fake.add``: the baseline runs (it writes out), once before the
    profiler range and `--iterations` times inside it, and the kernel never; a name the job
    does not declare exits 2, naming the ones it does."""
    from kcoral import runjob
    from kcoral.blobs import BlobStore
    from kcoral.boards import fake
    from kcoral.job import Job

    store = BlobStore(tmp_path / "blobs")
    put = type("Put", (), {"put_blob": lambda self, d: store.put(d),
                           "put_array": lambda self, a: store.put_array(a)})()
    job = Job.from_json(fake_job(put, uploaded=False,
                                 baselines=[{"name": "fake.add",
                                             "args": {"a": "a", "b": "b", "out": "out"}}]))
    job.blob_root = str(store.root)
    job.write_json(tmp_path / "job.json")
    events = []
    monkeypatch.setattr(fake.FakeDevice, "profiler_range",
                        lambda self, on: events.append("on" if on else "off"))
    prepare = fake.FakeBaseline.prepare

    def counted(self, device, doc, args):
        run = prepare(self, device, doc, args)

        def call():
            events.append("call")
            run()
        return call
    monkeypatch.setattr(fake.FakeBaseline, "prepare", counted)
    monkeypatch.setattr(fake.FakeDevice, "launcher", lambda self, ln, doc: lambda: events.append(
        "kernel"))
    argv = [str(tmp_path / "job.json"), "--board-type", "fake", "--out", str(tmp_path / "o"),
            "--save-outputs", "--iterations", "2"]
    assert runjob.main(argv + ["--baseline", "fake.add"]) == 0
    assert events == ["call", "on", "call", "call", "off"]
    out = np.load(tmp_path / "o" / "out.npy")   # poisoned (NaN) by the fill, then written
    assert out.shape == (1000,) and np.isfinite(out).all()
    assert json.loads((tmp_path / "o" / "result.json").read_text())["baseline"] == "fake.add"
    assert runjob.main(argv + ["--baseline", "fake.add", "--check"]) == 2
    assert runjob.main(argv + ["--baseline", "torch.matmul"]) == 2
    res = json.loads((tmp_path / "o" / "result.json").read_text())
    assert res["error"]["type"] == "validation.baseline"
    assert "'torch.matmul' is not one of the job's baselines ['fake.add']" in \
        res["error"]["message"]
