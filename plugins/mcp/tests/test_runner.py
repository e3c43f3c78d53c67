"""The tool runner: the JSON document of one `tirxh` child, errors and timeouts."""

import sys

import pytest

from tirxh_mcp.runner import TirxhCallError, TirxhRunner, extract_json


def test_extract_json_takes_the_document_after_stray_prints():
    assert extract_json('{\n  "a": 1\n}\n') == {"a": 1}
    assert extract_json('kernel module says hi\n{\n  "a": {"b": 2}\n}\n') == {"a": {"b": 2}}
    assert extract_json("no json here\n") is None
    assert extract_json("[1, 2]\n") is None  # a document is an object


def test_argv_adds_json_rootdir_and_plugins(tmp_path):
    r = TirxhRunner(cwd=tmp_path, rootdir=tmp_path, plugins=["x", "no:y"], python="py")
    assert r.argv(["zoo", "show", "vadd"]) == [
        "py", "-m", "tirxh", "zoo", "show", "vadd", "--json", "--rootdir", str(tmp_path),
        "-p", "x", "-p", "no:y"]


def test_a_usage_error_carries_tirxhs_message(tmp_path):
    r = TirxhRunner(cwd=tmp_path)
    with pytest.raises(TirxhCallError, match=r"exited with status 4 .*\n.*no kernel named"):
        r.run(["zoo", "show", "nosuchkernel"])


def test_a_call_past_its_timeout_is_stopped(tmp_path):
    # a "python" that sleeps: the runner's timeout, not tirxh's speed, is under test
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text("import time\ntime.sleep(30)\n")
    r = TirxhRunner(cwd=tmp_path, timeout=0.5, python=sys.executable)
    r.argv = lambda args: [sys.executable, str(sleeper)]
    with pytest.raises(TirxhCallError, match=r"did not finish within 0.5 s"):
        r.run(["check"])
