"""Issue 11's security holes, each as a test: names that could be paths, client-chosen command
lines, identities and isolation between clients, board registration, remote boards and
provenance; plus the numbers a client could use to stall a board."""

import json
import os
import random
import string

import grpc
import pytest

from kcoral.agent import Agent, AgentRefused
from kcoral.client import KCoralClient
from kcoral.errors import JobError, KCoralError
from kcoral.job import Job
from kcoral.server import Daemon

from .conftest import fake_job

TOKENS = {"alice": "ta", "bob": "tb", "op": "to", "edge": "te"}
CREDS = "\n".join(f'[[credential]]\nname = "{n}"\nrole = "{r}"\ntoken = "{TOKENS[n]}"\n'
                  for n, r in (("alice", "client"), ("bob", "client"), ("op", "operator"),
                               ("edge", "agent")))
BASE = {"target": "sm_90a", "module": {"format": "fake", "blob": "a" * 64},
        "buffers": [{"name": "x", "dtype": "f32", "shape": [4]}],
        "launches": [{"entry": "k", "grid": [1], "block": [1], "args": [{"buffer": "x"}]}]}


def _with(path, value):
    doc = json.loads(json.dumps(BASE))
    if path == "buffer":
        doc["buffers"].append({"name": value, "dtype": "f32", "shape": [4], "output": True})
    elif path == "entry":
        doc["launches"][0]["entry"] = value
    elif path == "tool":
        doc["tools"] = [{"name": value}]
    elif path == "baseline":
        doc["baselines"] = [{"name": value}]
    elif path == "case":
        doc["name"] = f"vadd[{value}]"
    return doc


FIELDS = {"buffer": "buffers[1].name", "entry": "launches[0].entry", "tool": "tools[0].name",
          "baseline": "baselines[0].name", "case": "name"}
EVIL = ["../../../../../tmp/x", "/etc/passwd", "a/b", "..", "a\\b", "x\x00y", "x\ny", " x",
        "é", "$(rm -rf /)", "-rf", "a" * 300, ""]


@pytest.mark.parametrize("where", sorted(FIELDS))
@pytest.mark.parametrize("name", EVIL, ids=range(len(EVIL)))
def test_names_that_could_be_paths_are_refused(where, name):
    if where == "entry" and name == "$(rm -rf /)":
        name = "a$(b)"  # '$' is legal in a PTX entry name; the parentheses are not
    if where == "case" and name in ("-rf", ""):
        name = "a/b"  # "vadd[-rf]" and "vadd[]" are harmless display names
    with pytest.raises(JobError) as ei:
        Job.from_json(_with(where, name))
    assert ei.value.field == FIELDS[where], ei.value.problems


def test_name_fuzz_accepts_only_names_that_are_no_paths():
    """Random strings over a hostile alphabet: every name the model accepts is a plain file
    name (no separator, no '..', no control character, its own basename)."""
    rng = random.Random(11)
    alphabet = string.ascii_letters + string.digits + "._-/\\:$ \x00\n[]()=+@,~*?%"
    accepted = 0
    for _ in range(3000):
        name = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
        for where in FIELDS:
            try:
                Job.from_json(_with(where, name))
            except JobError as e:
                assert e.field == FIELDS[where]
                continue
            accepted += 1
            assert "/" not in name and "\\" not in name and ".." not in name
            assert name.isprintable() and os.path.basename(name) == name
    assert accepted > 100  # the fuzz reached names that are fine, too


@pytest.fixture
def multi(tmp_path):
    cf = tmp_path / "creds.toml"
    cf.write_text(CREDS)
    d = Daemon({"server": {"credentials_file": str(cf)}, "boards": {"fake": {"count": 1}}},
               state_dir=tmp_path / "s", port=0).start()
    clients = {n: KCoralClient(d.address, token=t, client_name="bob" if n == "alice" else n)
               for n, t in TOKENS.items()}
    try:
        yield d, clients
    finally:
        for c in clients.values():
            c.close()
        d.stop(1)


def test_clients_are_isolated_and_named_by_their_credential(multi):
    d, c = multi
    alice, bob, op = c["alice"], c["bob"], c["op"]
    ev = alice.run(fake_job(alice))  # alice's client library claims to be "bob"
    jid = ev["job_id"]
    assert ev["state"] == "done"
    assert d.store.get(jid)["client"] == "alice"  # the credential's name, not the request's
    for call in (lambda: bob.get_job(jid), lambda: list(bob.watch(jid)),
                 lambda: bob.cancel(jid)):
        with pytest.raises(KCoralError) as ei:
            call()
        assert ei.value.code == "NOT_FOUND" and ei.value.refusal == "not-found"
    assert bob.jobs() == [] and [j["job_id"] for j in alice.jobs()] == [jid]
    assert [j["job_id"] for j in bob.jobs(client="alice")] == []  # the filter cannot widen
    assert op.get_job(jid)["client"] == "alice" and len(op.jobs()) == 1
    # blobs: alice's module is "missing" for bob (he cannot learn it exists) and not his
    dg = json.loads(d.store.get(jid)["job_json"])["module"]["blob"]
    assert bob.stub.FindMissingBlobs(
        __import__("kcoral._proto.kcoral_pb2", fromlist=["x"]).FindMissingBlobsRequest(
            digests=[dg]), timeout=5).missing == [dg]
    with pytest.raises(KCoralError, match="NOT_FOUND"):
        bob.download(dg)
    assert alice.download(dg) and op.download(dg)
    # a job naming alice's blob without bob uploading it is refused, naming the blob
    doc = json.loads(d.store.get(jid)["job_json"])
    with pytest.raises(KCoralError) as ei:
        bob.run(doc)
    assert ei.value.field == "blobs" and dg in ei.value.message


def test_unknown_tokens_and_roles(multi):
    d, c = multi
    with KCoralClient(d.address, token="nope") as x:
        with pytest.raises(KCoralError) as ei:
            x.status()
        assert ei.value.code == "UNAUTHENTICATED" and "wrong token" in ei.value.message
    with KCoralClient(d.address) as x:
        with pytest.raises(KCoralError, match="UNAUTHENTICATED: kcoral: missing token"):
            x.boards()
    with pytest.raises(KCoralError) as ei:  # an agent credential submits no jobs
        c["edge"].run(fake_job(c["edge"]))
    assert ei.value.code == "PERMISSION_DENIED"


def test_only_agents_and_operators_register_boards(multi, tmp_path):
    d, c = multi
    ag = Agent(d.address, "fake", name="forger", token=TOKENS["alice"],
               cache_dir=tmp_path / "a")
    with pytest.raises(AgentRefused, match="may not register boards"):
        ag.run()
    assert "forger" not in {b["name"] for b in c["op"].boards()}


def test_remote_results_carry_provenance_and_are_never_chosen_unasked(multi, tmp_path):
    import threading
    import time
    d, c = multi
    ag = Agent(d.address, "fake", name="aaa", token=TOKENS["edge"], tags=["edge"],
               cache_dir=tmp_path / "a")
    t = threading.Thread(target=ag.run, daemon=True)
    t.start()
    try:
        deadline = time.time() + 20
        while "aaa" not in {b["name"] for b in c["op"].boards()}:
            assert time.time() < deadline
            time.sleep(0.05)
        alice = c["alice"]
        for _ in range(3):  # "aaa" sorts before "fake0": still never chosen unasked
            ev = alice.run(fake_job(alice))
            assert ev["provenance"] == {"kind": "local", "board": "fake0", "agent": ""}
        ev = alice.run(fake_job(alice, tags=["edge"]))
        assert ev["state"] == "done"
        assert ev["provenance"] == {"kind": "remote", "board": "aaa", "agent": "edge"}
        assert ev["result"]["provenance"]["agent"] == "edge"
    finally:
        ag.stop()
        t.join(10)


@pytest.mark.parametrize("budgets,field", [({"exec_s": float("nan")}, "budgets.exec_s"),
                                           ({"exec_s": float("inf")}, "budgets.exec_s"),
                                           ({"queue_s": -1}, "budgets.queue_s"),
                                           ({"exec_s": 1e12}, "budgets.exec_s")])
def test_budgets_are_finite_and_bounded(client, budgets, field):
    doc = fake_job(client)
    doc["budgets"] = budgets
    with pytest.raises(KCoralError) as ei:
        client.run(doc)
    assert ei.value.code == "INVALID_ARGUMENT" and ei.value.field == field


def test_health_names_each_board(daemon):
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    with grpc.insecure_channel(daemon.address) as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        r = stub.Check(health_pb2.HealthCheckRequest(service="kcoral.board.fake0"), timeout=5)
        assert r.status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as ei:
            stub.Check(health_pb2.HealthCheckRequest(service="kcoral.board.nope"), timeout=5)
        assert ei.value.code() == grpc.StatusCode.NOT_FOUND
