"""SQLite job store: states persisted; recover() requeues queued and marks running interrupted."""

import json

import pytest

from kcoral.store import JobStore


def test_recover(tmp_path):
    s = JobStore(tmp_path / "k.sqlite")
    for i, st in enumerate(["queued", "running", "done", "queued", "timing"]):
        s.add(f"j{i}", "c", f"job{i}", "sm_90a", "{}")
        if st != "queued":
            s.set_state(f"j{i}", st, board="b0", result={"status": "ok"} if st == "done" else None)
    s.close()
    s = JobStore(tmp_path / "k.sqlite")
    queued, interrupted = s.recover()
    assert [r["job_id"] for r in queued] == ["j0", "j3"]
    assert sorted(interrupted) == ["j1", "j4"]
    row = s.get("j1")
    assert row["state"] == "interrupted"
    assert json.loads(row["result_json"])["error"]["type"] == "interrupted.daemon-restart"
    assert s.get("j2")["state"] == "done"
    assert s.counts() == {"queued": 2, "interrupted": 2, "done": 1}
    assert s._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_list_filters_and_idempotency(tmp_path):
    s = JobStore(tmp_path / "k.sqlite")
    s.add("a", "alice", "x", "sm_90a", "{}", idem_key="k1")
    s.add("b", "bob", "y", "sm_90a", "{}")
    assert s.find_idempotent("alice", "k1") == ("a", "{}")
    assert s.find_idempotent("bob", "k1") is None
    from kcoral.store import DuplicateKey
    with pytest.raises(DuplicateKey) as ei:  # one row per (client, key), atomically
        s.add("c", "alice", "x", "sm_90a", "{}", idem_key="k1")
    assert ei.value.job_id == "a" and ei.value.same
    with pytest.raises(DuplicateKey) as ei:
        s.add("d", "alice", "x", "sm_90a", '{"other": 1}', idem_key="k1")
    assert not ei.value.same
    assert [r["job_id"] for r in s.list(client="bob")] == ["b"]
    assert [r["job_id"] for r in s.list()] == ["b", "a"]
    with pytest.raises(ValueError, match="unknown job state"):
        s.set_state("a", "exploded")
