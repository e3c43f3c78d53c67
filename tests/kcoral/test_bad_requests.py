"""A labelled corpus of malformed requests (issue 11): each is refused with the right status code
and the field it names, never UNKNOWN or INTERNAL with raw Python text, and never restarts a
worker."""

import grpc
import pytest

from kcoral._proto import kcoral_pb2 as pb
from kcoral.client import KCoralError

from kcoral.client import KCoralClient

from .conftest import fake_job, start_daemon

NAN, INF = float("nan"), float("inf")


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """One daemon for the whole corpus: no request may restart its worker."""
    d = start_daemon(tmp_path_factory.mktemp("bad-requests"))
    try:
        yield d
    finally:
        d.stop(2)


@pytest.fixture(scope="module")
def client(daemon):
    c = KCoralClient(daemon.address, client_name="corpus")
    try:
        yield c
    finally:
        c.close()


def _set(path, value):
    def mutate(d):
        keys = path.replace("]", "").replace("[", ".").split(".")
        obj = d
        for k in keys[:-1]:
            obj = obj[int(k)] if isinstance(obj, list) else obj.setdefault(k, {})
        last = keys[-1]
        if isinstance(obj, list):
            obj[int(last)] = value
        else:
            obj[last] = value
    return mutate


def _del(path):
    def mutate(d):
        *head, last = path.split(".")
        obj = d
        for k in head:
            obj = obj[k]
        del obj[last]
    return mutate


# (label, mutation of a valid fake job, field the refusal names)
CORPUS = [
    ("no target", _del("target"), "target"),
    ("target not a string", _set("target", 90), "target"),
    ("target pattern", _set("target", "sm90"), "target"),
    ("unknown target", _set("target", "sm_100a"), "target"),
    ("module missing", _del("module"), "module"),
    ("module a string", _set("module", "cubin"), "module"),
    ("module format", _set("module.format", "elf"), "module.format"),
    ("module blob digest", _set("module.blob", "xyz"), "module.blob"),
    ("module blob not uploaded", _set("module.blob", "f" * 64), "blobs"),
    ("module ir digest", _set("module.ir", "../x"), "module.ir"),
    ("module unknown key", _set("module.path", "/tmp/x"), "module.path"),
    ("buffers a string", _set("buffers", "abc"), "buffers"),
    ("buffers[0] null", _set("buffers.0", None), "buffers[0]"),
    ("buffer name path", _set("buffers.2.name", "../../../../../tmp/x"), "buffers[2].name"),
    ("buffer name slash", _set("buffers.0.name", "a/b"), "buffers[0].name"),
    ("buffer name empty", _set("buffers.0.name", ""), "buffers[0].name"),
    ("buffer name reserved", _set("buffers.0.name", "__ref_out"), "buffers[0].name"),
    ("buffer duplicate", _set("buffers.1.name", "a"), "buffers[1].name"),
    ("buffer dtype", _set("buffers.0.dtype", "q7"), "buffers[0].dtype"),
    ("buffer dtype b128", _set("buffers.0.dtype", "b128"), "buffers[0].dtype"),
    ("buffer shape string", _set("buffers.0.shape", "1000"), "buffers[0].shape"),
    ("buffer shape negative", _set("buffers.0.shape", [-1]), "buffers[0].shape[0]"),
    ("buffer shape float", _set("buffers.0.shape", [1.5]), "buffers[0].shape[0]"),
    ("buffer shape too big", _set("buffers.0.shape", [1 << 40, 1 << 40]), "buffers[0].shape"),
    ("buffer shape deep", _set("buffers.0.shape", [1] * 9), "buffers[0].shape"),
    ("buffer output not bool", _set("buffers.0.output", "yes"), "buffers[0].output"),
    ("init kind", _set("buffers.0.init", {"kind": "random"}), "buffers[0].init.kind"),
    ("init blob missing", _set("buffers.0.init", {"kind": "blob"}), "buffers[0].init.blob"),
    ("init std NaN", _set("buffers.0.init", {"kind": "normal", "std": NAN}),
     "buffers[0].init.std"),
    ("init mean inf", _set("buffers.0.init", {"kind": "normal", "mean": INF}),
     "buffers[0].init.mean"),
    ("init low >= high", _set("buffers.0.init", {"kind": "uniform", "low": 2, "high": 1}),
     "buffers[0].init.high"),
    ("init unknown key", _set("buffers.0.init", {"kind": "zeros", "path": "/x"}),
     "buffers[0].init.path"),
    ("launches empty", _set("launches", []), "launches"),
    ("launches a string", _set("launches", "vadd"), "launches"),
    ("launches[0] a string", _set("launches.0", "vadd"), "launches[0]"),
    ("launch entry path", _set("launches.0.entry", "../vadd"), "launches[0].entry"),
    ("launch entry missing", _del("launches.0.entry") if False else
     (lambda d: d["launches"][0].pop("entry")), "launches[0].entry"),
    ("launch grid zero", _set("launches.0.grid", [0, 1, 1]), "launches[0].grid"),
    ("launch grid huge", _set("launches.0.grid", [2 ** 31, 1, 1]), "launches[0].grid"),
    ("launch grid strings", _set("launches.0.grid", ["1"]), "launches[0].grid"),
    ("launch grid four", _set("launches.0.grid", [1, 1, 1, 1]), "launches[0].grid"),
    ("launch block big", _set("launches.0.block", [2048, 1, 1]), "launches[0].block"),
    ("launch block threads", _set("launches.0.block", [1024, 2, 1]), "launches[0].block"),
    ("launch cluster", _set("launches.0.cluster", [3, 1, 1]), "launches[0].cluster"),
    ("launch smem negative", _set("launches.0.dynamic_smem", -1), "launches[0].dynamic_smem"),
    ("launch smem huge", _set("launches.0.dynamic_smem", 1 << 30), "launches[0].dynamic_smem"),
    ("launch args a dict", _set("launches.0.args", {"a": 1}), "launches[0].args"),
    ("arg unknown buffer", _set("launches.0.args.0", {"buffer": "zz"}), "launches[0].args[0]"),
    ("arg empty", _set("launches.0.args.0", {}), "launches[0].args[0]"),
    ("arg two kinds", _set("launches.0.args.0", {"buffer": "a", "scalar": 1, "dtype": "u32"}),
     "launches[0].args[0]"),
    ("scalar abc", _set("launches.0.args.3", {"scalar": "abc", "dtype": "u32"}),
     "launches[0].args[3].scalar"),
    ("scalar 2**100", _set("launches.0.args.3", {"scalar": 2 ** 100, "dtype": "u32"}),
     "launches[0].args[3].scalar"),
    ("scalar negative u32", _set("launches.0.args.3", {"scalar": -1, "dtype": "u32"}),
     "launches[0].args[3].scalar"),
    ("scalar NaN f32", _set("launches.0.args.3", {"scalar": NAN, "dtype": "f32"}),
     "launches[0].args[3].scalar"),
    ("scalar no dtype", _set("launches.0.args.3", {"scalar": 1}), "launches[0].args[3].dtype"),
    ("scalar bad dtype", _set("launches.0.args.3", {"scalar": 1, "dtype": "u33"}),
     "launches[0].args[3].dtype"),
    ("tensormap source", _set("launches.0.args.3", {"tensormap": {
        "source": "zz", "dtype": "f32", "dims": [4], "strides": [], "box": [4]}}),
     "launches[0].args[3].tensormap.source"),
    ("tensormap swizzle", _set("launches.0.args.3", {"tensormap": {
        "source": "a", "dtype": "f32", "dims": [4], "strides": [], "box": [4], "swizzle": 7}}),
     "launches[0].args[3].tensormap.swizzle"),
    ("params mismatch", _set("launches.0.params", []), "launches[0].params"),
    ("checks a dict", _set("checks", {"buffer": "out"}), "checks"),
    ("check unknown buffer", _set("checks.0.buffer", "zz"), "checks[0].buffer"),
    ("check rtol negative", _set("checks.0.rtol", -1), "checks[0].rtol"),
    ("check rtol NaN", _set("checks.0.rtol", NAN), "checks[0].rtol"),
    ("check atol string", _set("checks.0.atol", "0"), "checks[0].atol"),
    ("check unknown baseline", _set("checks.0.baseline", "torch.nope"), "checks[0].baseline"),
    ("runs a string", _set("runs", "before"), "runs"),
    ("run when", _set("runs.0.when", "later"), "runs[0].when"),
    ("run seed negative", _set("runs.0.seed", -5), "runs[0].seed"),
    ("run seed huge", _set("runs.0.seed", 2 ** 40), "runs[0].seed"),
    ("run input digest", _set("runs.0.inputs", {"a": "bad"}), "runs[0].inputs.a"),
    ("run input unknown buffer", _set("runs.0.inputs", {"zz": "a" * 64}), "runs[0].inputs.zz"),
    ("run input key path", _set("runs.0.inputs", {"../a": "a" * 64}), "runs[0].inputs"),
    ("timing a list", _set("timing", []), "timing"),
    ("timing budget NaN", _set("timing.budget_s", NAN), "timing.budget_s"),
    ("timing budget huge", _set("timing.budget_s", 1e9), "timing.budget_s"),
    ("timing budget zero", _set("timing.budget_s", 0), "timing.budget_s"),
    ("timing min_iters string", _set("timing.min_iters", "5"), "timing.min_iters"),
    ("timing max_iters huge", _set("timing.max_iters", 10 ** 12), "timing.max_iters"),
    ("timing rel_noise zero", _set("timing.rel_noise", 0), "timing.rel_noise"),
    ("timing enabled string", _set("timing.enabled", "yes"), "timing.enabled"),
    ("budgets exec NaN", _set("budgets.exec_s", NAN), "budgets.exec_s"),
    ("budgets exec inf", _set("budgets.exec_s", INF), "budgets.exec_s"),
    ("budgets exec negative", _set("budgets.exec_s", -1), "budgets.exec_s"),
    ("budgets queue zero", _set("budgets.queue_s", 0), "budgets.queue_s"),
    ("budgets queue bool", _set("budgets.queue_s", True), "budgets.queue_s"),
    ("work flops negative", _set("work.flops", -1), "work.flops"),
    ("work bytes NaN", _set("work.bytes", NAN), "work.bytes"),
    ("baselines unknown", _set("baselines", [{"name": "torch.nope"}]), "baselines[0].name"),
    ("baseline name path", _set("baselines", [{"name": "../x"}]), "baselines[0].name"),
    ("baseline arg NaN", _set("baselines", [{"name": "fake.add", "args": {"a": NAN}}]),
     "baselines[0].args.a"),
    ("tools unknown", _set("tools", [{"name": "nope"}]), "tools[0].name"),
    ("tool name path", _set("tools", [{"name": "../../bin/sh"}]), "tools[0].name"),
    ("tool options a list", _set("tools", [{"name": "nope", "options": []}]),
     "tools[0].options"),
    ("tags a string", _set("tags", "fake"), "tags"),
    ("tag with slash", _set("tags", ["a/b"]), "tags[0]"),
    ("board unknown", _set("board", "nope"), "board"),
    ("name with newline", _set("name", "x\ny"), "name"),
    ("fake sleep NaN", _set("fake.sleep_s", NAN), "fake.sleep_s"),
    ("unknown top-level key", _set("runjob_args", ["--out", "/"]), "runjob_args"),
]


@pytest.mark.parametrize("label,mutate,field", CORPUS, ids=[c[0] for c in CORPUS])
def test_bad_job(client, label, mutate, field):
    doc = fake_job(client)
    mutate(doc)
    with pytest.raises(KCoralError) as ei:
        list(client.submit(doc, timeout=30))
    e = ei.value
    assert e.code == "INVALID_ARGUMENT", (e.code, e.message)
    assert e.refusal in ("invalid.job", "unavailable.board", "invalid.request")
    assert e.field == field, e.message
    assert field in e.message and "Traceback" not in e.message


RAW = [  # (label, request bytes or SubmitRequest, field)
    ("empty SubmitRequest", pb.SubmitRequest(), "job_json"),
    ("job JSON not JSON", pb.SubmitRequest(job_json="{not json"), "job_json"),
    ("job JSON a list", pb.SubmitRequest(job_json="[1, 2]"), "job"),
    ("deeply nested JSON", pb.SubmitRequest(job_json="[" * 100000 + "]" * 100000), "job_json"),
    ("protobuf garbage", b"\xff\xff\xff\xff\x0f", "request"),
    ("idempotency key too long", pb.SubmitRequest(job_json="{}", idempotency_key="k" * 500),
     "idempotency_key"),
]


@pytest.mark.parametrize("label,req,field", RAW, ids=[r[0] for r in RAW])
def test_bad_raw_submit(client, label, req, field):
    call = client.channel.unary_stream(
        "/kcoral.v1.KCoral/Submit",
        request_serializer=lambda r: r if isinstance(r, bytes) else r.SerializeToString(),
        response_deserializer=pb.JobEvent.FromString)
    with pytest.raises(grpc.RpcError) as ei:
        list(call(req, timeout=30))
    md = dict(ei.value.trailing_metadata() or ())
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, ei.value.details()
    assert md.get("kcoral-field") == field and md.get("kcoral-refusal")


OTHER = [  # (label, method, request, code, field)
    ("ListJobs bad state", "ListJobs", pb.ListJobsRequest(state="exploded"), "INVALID_ARGUMENT",
     "state"),
    ("ListJobs bad limit", "ListJobs", pb.ListJobsRequest(limit=-3), "INVALID_ARGUMENT",
     "limit"),
    ("GetJob unknown", "GetJob", pb.JobRef(job_id="../../etc"), "NOT_FOUND", "job_id"),
    ("Cancel unknown", "Cancel", pb.JobRef(job_id=""), "NOT_FOUND", "job_id"),
    ("FindMissingBlobs bad digest", "FindMissingBlobs",
     pb.FindMissingBlobsRequest(digests=["../x"]), "INVALID_ARGUMENT", "digests"),
    ("DownloadBlob path", "DownloadBlob", pb.DownloadBlobRequest(digest="../../kcoral.sqlite"),
     "NOT_FOUND", "digest"),
    ("GetJob garbage", "GetJob", b"\x0a\xff", "INVALID_ARGUMENT", "request"),
]


@pytest.mark.parametrize("label,method,req,code,field", OTHER, ids=[o[0] for o in OTHER])
def test_bad_other_requests(client, label, method, req, code, field):
    streaming = method == "DownloadBlob"
    make = client.channel.unary_stream if streaming else client.channel.unary_unary
    call = make(f"/kcoral.v1.KCoral/{method}",
                request_serializer=lambda r: r if isinstance(r, bytes) else r.SerializeToString(),
                response_deserializer=lambda b: b)
    with pytest.raises(grpc.RpcError) as ei:
        r = call(req, timeout=30)
        if streaming:
            list(r)
    assert ei.value.code().name == code, ei.value.details()
    assert dict(ei.value.trailing_metadata() or ()).get("kcoral-field") == field


def test_bad_upload_frames(client):
    frames = [pb.BlobChunk(digest="../x", size=1, offset=0, data=b"a", last=True)]
    with pytest.raises(grpc.RpcError) as ei:
        client.stub.UploadBlobs(iter(frames), timeout=10)
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    dg = "a" * 64
    frames = [pb.BlobChunk(digest=dg, size=2, offset=5, data=b"a")]
    with pytest.raises(grpc.RpcError, match="offset 5"):
        client.stub.UploadBlobs(iter(frames), timeout=10)


def test_bad_agent_hello(daemon, client):
    call = client.stub.AgentConnect(iter([pb.AgentMessage(hello=pb.AgentHello(
        name="x", target="sm_90a", properties_json="{not json",
        versions={"protocol": "1", "kcoral": __import__("kcoral").__version__}))]), timeout=10)
    with pytest.raises(grpc.RpcError) as ei:
        list(call)
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert dict(ei.value.trailing_metadata())["kcoral-field"] == "AgentHello.properties_json"


def test_zz_corpus_is_large_and_no_worker_restarted(daemon, client):
    kinds = len(CORPUS) + len(RAW) + len(OTHER) + 3
    assert kinds >= 80, kinds
    for doc in (fake_job(client, budgets={"exec_s": NAN}),):
        with pytest.raises(KCoralError):
            client.run(doc)
    b = {b["name"]: b for b in client.boards()}["fake0"]
    assert b["properties"]["worker_restarts"] == 0 and b["state"] == "idle"
    assert client.run(fake_job(client))["state"] == "done"  # the board still works
