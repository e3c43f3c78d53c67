"""benchmarks/gpu_out.py: the KCoral GPU scripts' $OUT/<name>.json and exit status."""

import json

import gpu_out  # benchmarks/ is on sys.path (tests/benchmarks/conftest.py)


def test_without_out_nothing_is_written(monkeypatch, capsys):
    monkeypatch.delenv("OUT", raising=False)
    assert gpu_out.save({"a": 1}, "x") is None
    assert gpu_out.finish({"a": 1}, "x", []) == 0 and capsys.readouterr().out == ""


def test_finish_writes_the_file_and_fails_on_what_went_wrong(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("OUT", str(tmp_path / "out"))  # created on demand
    assert gpu_out.finish({"runs": [1]}, "kcoral_x", ["smoke: failed timeout.exec"]) == 1
    assert json.loads((tmp_path / "out" / "kcoral_x.json").read_text()) == {"runs": [1]}
    err = capsys.readouterr().err
    assert "kcoral_x: NOT all done: smoke: failed timeout.exec" in err
    assert not list((tmp_path / "out").glob("*.tmp"))


def test_run_recorded_keeps_the_record_or_the_traceback(capsys):
    out = {"runs": [], "errors": []}
    assert gpu_out.run_recorded(out, lambda x: {"label": x}, "a") == {"label": "a"}

    def boom():
        raise RuntimeError("the daemon went away")
    assert gpu_out.run_recorded(out, boom) is None
    assert out["runs"] == [{"label": "a"}]
    assert "RuntimeError: the daemon went away" in out["errors"][0]
    assert "the daemon went away" in capsys.readouterr().err
