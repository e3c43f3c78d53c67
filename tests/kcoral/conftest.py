"""Fixtures for KCoral: an in-process daemon on port 0 with fake boards, clients, fake jobs."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from kcoral.client import KCoralClient
from kcoral.server import Daemon

N = 1000
ROOT = pathlib.Path(__file__).resolve().parents[2]


def fake_module(op="add", time_ms=0.05, entry="vadd") -> bytes:
    return json.dumps({"kernels": {entry: {"op": op, "time_ms": time_ms}}}).encode()


def fake_job(client, op="add", n=N, fake=None, uploaded=True, timing=None, budgets=None,
             time_ms=0.05, **extra) -> dict:
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
           "module": {"format": "fake", "blob": client.put_blob(fake_module(op, time_ms))},
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


def serve(state, port_file, fake_boards=1, fake_extra="", timeout_s=30.0, tables=""):
    """``kcoral serve`` in a subprocess on port 0 with `fake_boards` fake boards (and the extra
    ``[boards.fake]`` TOML lines `fake_extra`, and whole tables `tables`, e.g. ``[store]``);
    returns ``(process, address)`` once the port file appears. The caller stops it (kill -9 or
    SIGTERM) in ``finally``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH",
                                                                                  "")]))
    if port_file.exists():
        port_file.unlink()
    cfg = state.parent / "kcoral.toml"
    state.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(f'[server]\nport = 0\nstate_dir = "{state}"\ngrace_s = 2\n'
                   f'[boards.fake]\ncount = {fake_boards}\n{fake_extra}\n[boards.sim]\n'
                   f'{tables}\n')
    p = subprocess.Popen([sys.executable, "-m", "kcoral.cli", "serve", "--config", str(cfg),
                          "--port-file", str(port_file)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, cwd=str(ROOT))
    deadline = time.time() + timeout_s
    while not port_file.exists():
        if p.poll() is not None or time.time() > deadline:
            p.kill()
            out = p.communicate(timeout=10)[0].decode()
            raise AssertionError(f"daemon did not start within {timeout_s} s:\n{out}")
        time.sleep(0.05)
    return p, f"127.0.0.1:{port_file.read_text()}"


def wait_for(cond, timeout, what):
    """Poll `cond()` until it returns something truthy (returned); fail naming `what` past
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.05)


def submit_load(addresses, clients, jobs, timeout=120) -> dict:
    """`clients` threads each submit `jobs` uniquely named fake jobs (``c<i>-j<j>``), job j of
    client i to ``addresses[(i + j) % len(addresses)]``, reading only the acknowledgement;
    returns name -> job id. Fails naming every client that could not submit or hung."""
    acked: dict = {}
    errors: list = []

    def client_main(i):
        try:
            for j in range(jobs):
                addr = addresses[(i + j) % len(addresses)]
                with KCoralClient(addr, client_name=f"c{i}", timeout=10) as c:
                    name = f"c{i}-j{j}"
                    doc = fake_job(c, n=256, uploaded=(i % 2 == 0), name=name,
                                   timing={"min_iters": 3, "warmup": 1, "budget_s": 0.1})
                    acked[name] = next(c.submit(doc, timeout=30))["job_id"]
        except Exception as e:  # reported below
            errors.append(f"client {i}: {e!r}")
    ts = [threading.Thread(target=client_main, args=(i,)) for i in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout)
    assert not any(t.is_alive() for t in ts), "a client hung while submitting"
    assert not errors, errors
    assert len(acked) == clients * jobs
    return acked
