"""``kcoral boards/jobs/show/status/cancel`` against an in-process daemon."""

import json

import pytest

from kcoral.cli import main

from .conftest import fake_job


def test_query_commands(daemon, client, capsys):
    ev = client.run(fake_job(client))
    jid = ev["job_id"]
    assert main(["boards", "--daemon", daemon.address]) == 0
    out = capsys.readouterr().out
    assert "fake0" in out and "idle" in out and "numsim" in out
    assert main(["jobs", "--daemon", daemon.address]) == 0
    out = capsys.readouterr().out
    assert jid in out and "done" in out and " ms" in out
    assert main(["show", jid, "--daemon", daemon.address]) == 0
    out = capsys.readouterr().out
    assert "median" in out and "correctness (before, seed 1): ok" in out
    assert main(["show", jid, "--json", "--daemon", daemon.address]) == 0
    assert json.loads(capsys.readouterr().out)["result"]["status"] == "ok"
    assert main(["status", "--daemon", daemon.address]) == 0
    assert "1 jobs recorded" in capsys.readouterr().out
    assert main(["cancel", jid, "--daemon", daemon.address]) == 0
    assert "done" in capsys.readouterr().out


def test_errors(daemon, capsys):
    assert main(["show", "nope", "--daemon", daemon.address]) == 1
    assert "NOT_FOUND" in capsys.readouterr().err
    assert main(["status", "--daemon", "127.0.0.1:1"]) == 2
    assert "UNAVAILABLE" in capsys.readouterr().err


def test_serve_config_errors(tmp_path, capsys):
    bad = tmp_path / "kcoral.toml"
    bad.write_text("[servr]\nport = 1\n")
    assert main(["serve", "--config", str(bad)]) == 2
    assert "unknown table(s) ['servr']" in capsys.readouterr().err
    assert main(["serve", "--config", str(tmp_path / "none.toml")]) == 2
    assert "not found" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["frobnicate"])
