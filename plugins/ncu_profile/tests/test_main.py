"""``python -m tirxh_ncu_profile``: offline parsing commands and their exit codes."""

import json

from tirxh_ncu_profile.__main__ import main


def test_summarize(fixtures, tmp_path, capsys):
    out = tmp_path / "s.json"
    rc = main(["summarize", "--details", str(fixtures / "ncu_vadd_basic_details.csv"),
               "--source", str(fixtures / "ncu_vadd_source_sass.csv"),
               "--sass", str(fixtures / "vadd_sm90a.sass"), "--json", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "achieved occupancy" in text and "vadd.py:10" in text
    assert json.loads(out.read_text())["kernel"] == "vadd"


def test_sanitizer_exit_codes(fixtures, capsys):
    assert main(["sanitizer", str(fixtures / "memcheck_oob.txt"), "--tool", "memcheck",
                 "--block", "256,1,1"]) == 1
    assert "memory.out-of-bounds at" in capsys.readouterr().out
    assert main(["sanitizer", str(fixtures / "memcheck_clean.txt"), "--tool", "memcheck"]) == 0


def test_bad_input_is_exit_2(tmp_path, capsys):
    bad = tmp_path / "d.csv"
    bad.write_text("nothing\n")
    assert main(["summarize", "--details", str(bad)]) == 2
    assert "no CSV table found" in capsys.readouterr().err


def test_profile_command_end_to_end(monkeypatch, tmp_path, read, capsys):
    """``profile NODEID --ncu --sanitizer memcheck`` on the zoo project: configure, collect,
    compile for real; a fake KCoral client answers with fixture summaries."""
    import pathlib

    from tirxh_ncu_profile import plugin
    from tirxh_ncu_profile.sanitizer import parse
    from tirxh_ncu_profile.tools import summarize_exports
    from ncu_fakes import FakeClient

    client = FakeClient({})
    client.tools_result = {
        "ncu": {"status": "ok", "artifacts": {},
                "summary": summarize_exports(read("ncu_vadd_basic_details.csv"),
                                             read("ncu_vadd_source_sass.csv"), entry="vadd")},
        "compute-sanitizer": {"status": "ok", "verdict": "error", "artifacts": {},
                              "findings": [f.to_json() for f in
                                           parse(read("memcheck_oob.txt"), "memcheck").findings],
                              "summary": {"tool": "memcheck", "summary": "2 findings"}}}
    monkeypatch.setattr(plugin, "client_for", lambda config: client)
    zoo = pathlib.Path(__file__).resolve().parents[3] / "zoo"
    monkeypatch.chdir(zoo)
    out_json = tmp_path / "p.json"
    rc = main(["profile", "kernels/vadd.py::vadd[n4096]", "--ncu", "--sanitizer", "memcheck",
               "--out", str(tmp_path / "out"), "--json", str(out_json)])
    text = capsys.readouterr().out
    assert rc == 1  # the sanitizer's error verdict fails the command
    assert "ncu profile of vadd" in text and "memory.out-of-bounds" in text
    doc = json.loads(out_json.read_text())
    assert doc["item"].startswith("kernels/vadd.py::vadd[n4096]")
    assert [r["tool"] for r in doc["reports"]] == ["ncu", "compute-sanitizer"]
    assert doc["exitstatus"] == rc == 1  # the document carries the command's verdict
    assert client.docs[0]["launches"][0]["entry"] == "vadd"


def test_profile_command_usage(capsys):
    from tirxh.api import ExitCode
    assert main(["profile", "--ncu"]) == ExitCode.USAGE_ERROR
    assert capsys.readouterr().err.startswith("usage: python -m tirxh_ncu_profile profile NODEID")


def test_run_profiles_a_job_or_its_baseline_on_this_machine(monkeypatch, tmp_path, fixtures,
                                                            capsys):
    """``run JOB.json --ncu [--baseline NAME]``: the job under ncu on this machine's GPU (a
    board of type cuda, ordinal --device), as a KCoral board would run it; a stand-in ncu here.
    A baseline the job does not declare is exit 2, naming the ones it does."""
    from ncu_fakes import fake_ncu
    work, log = fake_ncu(monkeypatch, tmp_path, fixtures / "ncu_vadd_basic_details.csv",
                         fixtures / "ncu_vadd_source_sass.csv")
    job = {"name": "vadd[n4096]", "target": "sm_90a", "_blob_root": str(tmp_path / "blobs"),
           "module": {"format": "cubin", "blob": "0" * 64},
           "buffers": [{"name": "out", "dtype": "f32", "shape": [4096], "output": True}],
           "launches": [{"entry": "vadd", "grid": [16, 1, 1], "block": [256, 1, 1],
                         "args": [{"buffer": "out"}]}],
           "baselines": [{"name": "torch.add", "args": {}}]}
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job))
    assert main(["run", str(path), "--ncu", "--device", "1", "--workdir", str(work)]) == 0
    assert "ncu profile of vadd" in capsys.readouterr().out
    assert "--kernel-name vadd" in log.read_text() and "--device 1" in log.read_text()
    assert main(["run", str(path), "--ncu", "--baseline", "torch.add",
                 "--workdir", str(work)]) == 0
    assert capsys.readouterr().out.startswith("ncu profile of baseline torch.add: 1 launch(es)")
    assert log.read_text().splitlines()[-3].endswith("--baseline torch.add")
    assert main(["run", str(path), "--ncu", "--baseline", "torch.mm",
                 "--workdir", str(work)]) == 2
    assert "'torch.mm' is not one of the job's baselines ['torch.add']" in \
        capsys.readouterr().err
