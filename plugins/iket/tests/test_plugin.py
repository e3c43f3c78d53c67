"""The tirxh side of iket: hooks validate, and ``tirxh_profile_item`` builds the profiling job
(instrumented cubin, trace buffer, iket tool), times the normal build too, and reports the
overhead. A fake client stands in for KCoral."""

import argparse
import hashlib
import pathlib
import subprocess
import sys
import types

import numpy as np
import pytest

import tirxh.lang as T
from tirxh.api import Parser, TransformRegistry, compile_kernel
from tirxh.testing import check_plugin
from tirxh_iket import plugin
from tirxh_iket.transform import TRANSFORM

ZOO = pathlib.Path(__file__).resolve().parents[3] / "zoo"


@T.kernel(grid=lambda n: T.cdiv(n, 128), block=128)
def scale(x: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32):
    i = T.ctaid.x * 128 + T.tid.x
    with T.if_(i < n):
        with T.iket.range("load"):
            v = T.ptx.ld.global_.f32(x.at(i))
        T.ptx.st.global_.f32(out.at(i), v + v)


SUITE = T.suite(scale, inputs=lambda rng, n: dict(x=rng.standard_normal(n, dtype=np.float32),
                                                  out=np.empty(n, np.float32), n=n),
                reference=lambda x: {"out": x + x}, outputs=["out"],
                cases=[T.case("n1024", n=1024)])


def _config(argv):
    parser = Parser()
    plugin.tirxh_addoption(parser)
    ap = argparse.ArgumentParser()
    for names, kw in parser.options:
        ap.add_argument(*names, **kw)
    ns = ap.parse_args(argv)
    return types.SimpleNamespace(getoption=lambda n, d=None: getattr(ns, n, d),
                                 getini=lambda s, k: None, stash={})


class FakeClient:
    """`refuse`: every submission is refused; `refuse_plain`: only the normal build's (the job
    without tools)."""

    def __init__(self, refuse=None, refuse_plain=None, losses=(), refuse_rerun=None):
        self.blobs, self.docs, self.refuse, self.refuse_plain = {}, [], refuse, refuse_plain
        self.refuse_rerun = refuse_rerun  # refuse the second profiling job (an auto rerun)
        self.uploaded = set()
        self.losses = list(losses)  # per profiling job in turn: its summary's events_lost

    def put_blob(self, data):
        dg = hashlib.sha256(data).hexdigest()
        self.blobs[dg] = data
        return dg

    def upload(self):
        new = [dg for dg in self.blobs if dg not in self.uploaded]
        self.uploaded.update(new)
        return new

    def submit(self, doc, timeout=None):
        doc = doc.to_doc() if hasattr(doc, "to_doc") else doc  # a kcoral.job.Job or its JSON
        self.docs.append(doc)
        reruns = sum(1 for d in self.docs if d["tools"]) > 1 and doc["tools"]
        if self.refuse or (self.refuse_plain and not doc["tools"]) or \
                (self.refuse_rerun and reruns):
            from kcoral.client import KCoralError
            raise KCoralError("UNAVAILABLE", self.refuse or self.refuse_plain or self.refuse_rerun)
        tools = {}
        if doc["tools"]:
            loss = self.losses.pop(0) if self.losses else None
            cap = doc["tools"][0]["options"]["layout"]["capacity"]
            tools["iket"] = {"status": "ok", "verdict": "incomplete" if loss else None,
                             "summary": {"warps": 32, "verdict": "incomplete" if loss else "ok",
                                         "events_lost": loss,
                                         "render_s": {"decode": 0.5, "png": 1.25}},
                             "artifacts": {"iket_summary.txt": self.put_blob(
                                 b"iket timeline at capacity %d" % cap)}}
        median = 0.011 if doc["tools"] else 0.010
        yield {"state": "queued", "job_id": str(len(self.docs)), "message": "position 0",
               "board": "", "result": None}
        yield {"state": "running", "job_id": str(len(self.docs)), "message": "timing",
               "board": "cuda0", "result": None}
        yield {"state": "done", "job_id": str(len(self.docs)), "message": "",
               "result": {"status": "ok", "run_s": 3.5, "tools": tools,
                          "timing": {"candidate": {"median_ms": median},
                                     "sm_clock_mhz": {"before": 1755, "after": 1740}}}}

    def download(self, dg):
        return self.blobs[dg]


def test_hooks_match_specs():
    check_plugin(plugin, "iket")


def test_the_profiling_build_is_the_pipeline_plus_the_registered_transform():
    reg = TransformRegistry()
    plugin.tirxh_register_transforms(registry=reg)
    assert reg.get("iket") is TRANSFORM and not TRANSFORM.default  # only when asked for
    prof = compile_kernel(scale, "sm_90a", transforms=[("iket", {"capacity": 4})], registry=reg)
    plain = compile_kernel(scale, "sm_90a")
    assert prof.key != plain.key and prof.ir.params[-1].name == "iket_trace"
    assert prof.transforms["iket"].capacity == 4


def test_profile_item(monkeypatch, tmp_path, capsys):
    client = FakeClient()
    monkeypatch.setattr(plugin, "client_for", lambda config: client)
    item = types.SimpleNamespace(name="k.py::scale[n1024]@sm_90a", kernel=scale, suite=SUITE,
                                 case=SUITE.cases[0])
    ck = scale.compile("sm_90a")
    rep = plugin.tirxh_profile_item(item=item, compiled=ck,
                                    config=_config(["--iket", "--iket-capacity", "16"]),
                                    request={"out": tmp_path})
    inst, plain = client.docs
    assert inst["module"]["blob"] != plain["module"]["blob"]
    assert b"iket_trace" in client.blobs[inst["module"]["blob"]]  # the instrumented cubin
    # and its IR (what a sim board runs), not the normal build's: a sim board ran that and
    # refused the trace buffer as a surplus argument
    assert inst["module"]["ir"] != plain["module"]["ir"]
    assert b"iket_trace" in client.blobs[inst["module"]["ir"]]
    assert inst["buffers"][-1]["name"] == "iket_trace"
    assert inst["buffers"][-1]["shape"] == [8 * 4 * 16 * 32]  # 8 CTAs x 4 warps x 16 records
    assert inst["launches"][0]["args"][-1] == {"buffer": "iket_trace"}
    assert inst["tools"][0]["name"] == "iket" and plain["tools"] == []
    assert rep.summary["overhead"]["ratio"] == pytest.approx(1.1)
    assert rep.summary["overhead"]["registers"]["instrumented"] > 0
    assert "instrumentation overhead" in rep.text and rep.text.startswith("iket timeline")
    assert rep.to_json()["artifacts"]["iket_summary.txt"].endswith("iket_summary.txt")
    # no baselines: the profile reports the ratio of the two builds only; one correctness seed
    assert inst["baselines"] == [] and plain["baselines"] == []
    assert [r["seed"] for r in inst["runs"]] == [r["seed"] for r in plain["runs"]] == [1]
    # the phases, in order, on stderr: what a run killed by `timeout` leaves in its log
    lines = capsys.readouterr().err.splitlines()
    assert all(line.startswith("iket [+") for line in lines), lines
    want = ["profiling build compiled: 2 annotation sites, capacity 16",
            f"jobs built: inputs and expected outputs of {len(plain['runs'])} runs",
            f"uploaded {len(client.uploaded)} blobs",
            "profiling build: queued", "profiling build: running on cuda0: timing",
            "profiling job ok (run 3.5 s on the board); iket ok; rendered on the board: "
            "decode 0.5 s, png 1.2 s",
            "1 artifacts downloaded into", "normal build: queued", "normal build: running",
            "normal build timed: ok"]
    at = 0
    for w in want:
        at = next((i for i in range(at, len(lines)) if w in lines[i]), None)
        assert at is not None, (w, lines)


def test_a_failed_normal_build_keeps_the_timeline(monkeypatch, tmp_path, capsys):
    """The artifacts are downloaded before the normal build is timed; if that job is refused,
    the report keeps the timeline and says the overhead is unknown."""
    client = FakeClient(refuse_plain="daemon stopping")
    monkeypatch.setattr(plugin, "client_for", lambda config: client)
    item = types.SimpleNamespace(name="s", kernel=scale, suite=SUITE, case=SUITE.cases[0])
    rep = plugin.tirxh_profile_item(item=item, compiled=scale.compile("sm_90a"),
                                    config=_config(["--iket"]), request={"out": tmp_path})
    assert rep.verdict is None and rep.summary["overhead"]["ratio"] is None
    assert (tmp_path / "s" / "iket_summary.txt").read_bytes() == b"iket timeline at capacity 64"
    assert "normal build not timed: UNAVAILABLE: daemon stopping" in capsys.readouterr().err


def test_not_requested():
    ck = scale.compile("sm_90a")
    item = types.SimpleNamespace(name="x", kernel=scale, suite=SUITE, case=SUITE.cases[0])
    assert plugin.tirxh_profile_item(item=item, compiled=ck, config=_config([]),
                                     request={}) is None


def test_kernel_without_annotations_is_an_error_report(monkeypatch, tmp_path):

    @T.kernel(grid=lambda n: T.cdiv(n, 128), block=128)
    def bare(x: T.gptr[T.f32], out: T.gptr[T.f32], n: T.u32):
        i = T.ctaid.x * 128 + T.tid.x
        T.ptx.st.global_.f32(out.at(i), T.ptx.ld.global_.f32(x.at(i)))

    def no_daemon(config):
        raise AssertionError("no daemon may be contacted for a kernel without annotations")

    monkeypatch.setattr(plugin, "client_for", no_daemon)
    item = types.SimpleNamespace(name="bare", kernel=bare, suite=SUITE, case=SUITE.cases[0])
    rep = plugin.tirxh_profile_item(item=item, compiled=bare.compile("sm_90a"),
                                    config=_config(["--iket"]), request={"out": tmp_path})
    assert rep.verdict == "error" and "has no T.iket annotations" in rep.text


def test_refused_job_is_an_error_report(monkeypatch, tmp_path):
    client = FakeClient(refuse="failed to connect to all addresses")
    monkeypatch.setattr(plugin, "client_for", lambda config: client)
    item = types.SimpleNamespace(name="s", kernel=scale, suite=SUITE, case=SUITE.cases[0])
    rep = plugin.tirxh_profile_item(item=item, compiled=scale.compile("sm_90a"),
                                    config=_config(["--iket"]), request={"out": tmp_path})
    assert rep.verdict == "error" and "UNAVAILABLE: failed to connect" in rep.text


def test_on_a_sim_board_the_profile_says_iket_needs_time(tmp_path):
    """End to end through an embedded KCoral daemon whose only board is numsim's (the zoo's
    vadd): the profiling build runs there (its outputs checked), and the tool declines by the
    board's type."""
    r = subprocess.run([sys.executable, "-m", "tirxh", "profile", "--rootdir", str(ZOO),
                        "kernels/vadd.py::vadd[n1000]", "--iket", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "iket: board 'sim0' is of type 'sim'; iket records time on a CUDA board" in r.stdout
    assert "arguments for kernel" not in r.stdout
    # the phases reached, through a real daemon: the job ran on sim0, the tool declined
    err = r.stderr
    assert "profile kernels/vadd.py::vadd[n1000]@sm_90a: compiled in " in err
    assert "iket [+" in err and "profiling build: running: running on sim0" in err
    assert "iket unavailable" in err, err


def _loss(events=194 * 32, warps=32, need=258, cap=64, bytes_=None):
    from tirxh_iket.decode import suggest_capacity
    want = suggest_capacity(need)
    return {"events": events, "warps": warps, "needed_max": need, "capacity": cap,
            "suggested_capacity": want, "suggested_bytes": bytes_ or 32 * want * 32,
            "cut_ranges": 2 * warps}


def _profile(monkeypatch, tmp_path, argv, client):
    monkeypatch.setattr(plugin, "client_for", lambda config: client)
    item = types.SimpleNamespace(name="s", kernel=scale, suite=SUITE, case=SUITE.cases[0])
    return plugin.tirxh_profile_item(item=item, compiled=scale.compile("sm_90a"),
                                     config=_config(argv), request={"out": tmp_path})


def test_auto_capacity_reruns_once_at_the_measured_need(monkeypatch, tmp_path, capsys):
    """The default capacity is auto: a run that lost events is rerun once at the capacity its
    summary suggests (session 15's GEMM: need 258 -> 320), and the report says both runs."""
    client = FakeClient(losses=[_loss()])
    rep = _profile(monkeypatch, tmp_path, ["--iket"], client)
    first, rerun, plain = client.docs
    assert plain["tools"] == [] and first["tools"] and rerun["tools"]
    assert first["buffers"][-1]["shape"] == [8 * 4 * 64 * 32]
    assert rerun["buffers"][-1]["shape"] == [8 * 4 * 320 * 32]
    assert rerun["tools"][0]["options"]["layout"]["capacity"] == 320
    assert rerun["module"]["blob"] != first["module"]["blob"]  # rebuilt at the new capacity
    assert rep.verdict is None  # the rerun's: it lost nothing
    assert rep.summary["capacity_runs"] == [{"capacity": 64, "events_lost": _loss()},
                                            {"capacity": 320, "events_lost": None}]
    assert rep.text.startswith("iket timeline at capacity 320")
    assert ("capacity auto: the first run, at capacity 64, lost events (6208 events lost in 32 "
            "warps, the largest need 258 events a warp); this timeline is the rerun's, at "
            "capacity 320, which lost none") in rep.text
    err = capsys.readouterr().err
    assert "capacity 64 lost events (6208 events lost in 32 warps, the largest need 258 events " \
           "a warp): rerunning once at capacity 320" in err
    assert "profiling job (rerun) ok" in err


def test_a_rerun_that_loses_events_again_says_so(monkeypatch, tmp_path):
    client = FakeClient(losses=[_loss(), _loss(events=10, warps=1, need=330, cap=320)])
    rep = _profile(monkeypatch, tmp_path, ["--iket"], client)
    assert len(client.docs) == 3  # one rerun only
    assert rep.verdict == "incomplete"
    assert "which lost events too (10 events lost in 1 warps, the largest need 330" in rep.text


def test_explicit_capacity_runs_once(monkeypatch, tmp_path):
    client = FakeClient(losses=[_loss(cap=16)])
    rep = _profile(monkeypatch, tmp_path, ["--iket", "--iket-capacity", "16"], client)
    assert len(client.docs) == 2 and rep.verdict == "incomplete"
    assert rep.summary["capacity_runs"] == [{"capacity": 16, "events_lost": _loss(cap=16)}]
    assert "rerun" not in rep.text


def test_auto_does_not_rerun_past_its_buffer_cap(monkeypatch, tmp_path):
    big = _loss(need=100_000, bytes_=plugin.AUTO_MAX_TRACE_BYTES + 1)
    client = FakeClient(losses=[big])
    rep = _profile(monkeypatch, tmp_path, ["--iket", "--iket-capacity", "auto"], client)
    assert len(client.docs) == 2 and rep.verdict == "incomplete"
    assert "not rerun automatically: capacity 112512 takes a 256 MiB trace buffer, over " \
           "auto's 256 MiB; rerun with --iket-capacity 112512 (allowed up to 2 GiB)" in rep.text


@pytest.mark.parametrize("value,want", [(None, (64, True)), (0, (64, True)),
                                        ("auto", (64, True)), ("128", (128, False)),
                                        (16, (16, False))])
def test_parse_capacity(value, want):
    assert plugin.parse_capacity(value) == want


@pytest.mark.parametrize("value", ["-3", "1.5", "lots", True])
def test_bad_capacity_is_a_clear_error(value):
    with pytest.raises(ValueError, match=r"--iket-capacity .*expected 'auto' or a positive"):
        plugin.parse_capacity(value)


def test_bad_capacity_on_the_command_line(capsys):
    with pytest.raises(SystemExit):
        _config(["--iket", "--iket-capacity", "lots"])
    assert "expected 'auto' or a positive number" in capsys.readouterr().err


def test_bad_capacity_in_a_request_is_an_error_report(monkeypatch, tmp_path):
    def no_daemon(config):
        raise AssertionError("no daemon may be contacted for a bad capacity")

    monkeypatch.setattr(plugin, "client_for", no_daemon)
    item = types.SimpleNamespace(name="s", kernel=scale, suite=SUITE, case=SUITE.cases[0])
    rep = plugin.tirxh_profile_item(item=item, compiled=scale.compile("sm_90a"),
                                    config=_config([]), request={"iket": {"capacity": "x"}})
    assert rep.verdict == "error" and "--iket-capacity 'x'" in rep.text


def test_a_refused_rerun_keeps_the_first_runs_timeline(monkeypatch, tmp_path):
    client = FakeClient(losses=[_loss()], refuse_rerun="daemon stopping")
    rep = _profile(monkeypatch, tmp_path, ["--iket"], client)
    assert [bool(d["tools"]) for d in client.docs] == [True, True, False]
    assert rep.verdict == "incomplete" and rep.text.startswith("iket timeline at capacity 64")
    assert rep.summary["capacity_runs"][1] == {
        "capacity": 320, "error": "KCoral refused the job: UNAVAILABLE: daemon stopping"}
    assert "its rerun at capacity 320 failed (KCoral refused the job: UNAVAILABLE: daemon " \
           "stopping); this timeline is the first run's" in rep.text
