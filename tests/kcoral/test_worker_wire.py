"""The worker's messages to the daemon (`kcoral.worker.wire_line`)."""

import json

import numpy as np
import pytest

from kcoral.worker import wire_line


def test_numpy_scalars_travel_as_python_numbers():
    line = wire_line({"event": "result", "result": {"n": np.int64(3), "x": np.float32(0.5),
                                                     "ok": np.bool_(True)}})
    assert json.loads(line)["result"] == {"n": 3, "x": 0.5, "ok": True}


def test_an_unencodable_result_becomes_a_typed_failure_not_a_dead_worker():
    line = wire_line({"event": "result", "fatal": False, "result": {
        "job_id": "j1", "board": "cuda0", "status": "done", "timing": {"x": object()}}})
    res = json.loads(line)["result"]
    assert res["status"] == "failed" and res["job_id"] == "j1" and res["board"] == "cuda0"
    assert res["error"]["type"] == "internal.unencodable-result"
    assert "object is not JSON serializable" in res["error"]["message"]


def test_other_messages_still_raise():
    with pytest.raises(TypeError, match="ndarray is not JSON serializable"):
        wire_line({"event": "progress", "state": np.zeros(2)})
