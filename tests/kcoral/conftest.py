"""Fixtures for KCoral: an in-process daemon on port 0 with fake boards, clients, fake jobs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kcoral.client import KCoralClient
from kcoral.server import Daemon

N = 1000


def fake_module(op="add", time_ms=0.05, entry="vadd") -> bytes:
    return json.dumps({"kernels": {entry: {"op": op, "time_ms": time_ms}}}).encode()


def fake_job(client, op="add", n=N, fake=None, uploaded=True, timing=None, budgets=None,
             **extra) -> dict:
    """A vadd job for the fake board; with `uploaded`, correctness runs carry uploaded inputs
    and expected outputs computed here (so a wrong kernel fails)."""
    runs = []
    if uploaded:
        for seed, when in ((1, "before"), (2, "after")):
            rng = np.random.default_rng(seed)
            a = rng.standard_normal(n, dtype=np.float32)
            b = rng.standard_normal(n, dtype=np.float32)
            runs.append({"seed": seed, "when": when,
                         "inputs": {"a": client.put_array(a), "b": client.put_array(b)},
                         "expected": {"out": client.put_array(a + b)}})
    doc = {"name": f"vadd-{op}", "target": "sm_90a",
           "module": {"format": "fake", "blob": client.put_blob(fake_module(op))},
           "buffers": [{"name": "a", "dtype": "f32", "shape": [n], "init": {"kind": "normal"}},
                       {"name": "b", "dtype": "f32", "shape": [n], "init": {"kind": "normal"}},
                       {"name": "out", "dtype": "f32", "shape": [n], "output": True}],
           "launches": [{"entry": "vadd", "grid": [4, 1, 1], "block": [256, 1, 1],
                         "args": [{"buffer": "a"}, {"buffer": "b"}, {"buffer": "out"},
                                  {"scalar": n, "dtype": "u32"}]}],
           "checks": [{"buffer": "out", "rtol": 1e-6}],
           "runs": runs,
           "timing": dict({"min_iters": 5, "budget_s": 0.5}, **(timing or {})),
           "budgets": dict({"exec_s": 20}, **(budgets or {})),
           "work": {"flops": n, "bytes": 12 * n},
           "fake": fake or {}}
    doc.update(extra)
    return doc


def start_daemon(tmp_path, fake_boards=1, config_server=None, **kw) -> Daemon:
    return Daemon({"server": dict(config_server or {}),
                   "boards": {"fake": {"count": fake_boards}, "sim": {}}}, state_dir=tmp_path,
                  port=0, **kw).start()


@pytest.fixture
def daemon(tmp_path):
    d = start_daemon(tmp_path / "state")
    try:
        yield d
    finally:
        d.stop(2)


@pytest.fixture
def client(daemon):
    c = KCoralClient(daemon.address, client_name="test")
    try:
        yield c
    finally:
        c.close()
