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

    def __init__(self, refuse=None, refuse_plain=None):
        self.blobs, self.docs, self.refuse, self.refuse_plain = {}, [], refuse, refuse_plain
        self.uploaded = set()

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
        if self.refuse or (self.refuse_plain and not doc["tools"]):
            from kcoral.client import KCoralError
            raise KCoralError("UNAVAILABLE", self.refuse or self.refuse_plain)
        tools = {}
        if doc["tools"]:
            tools["iket"] = {"status": "ok", "verdict": None,
                             "summary": {"warps": 32, "verdict": "ok",
                                         "render_s": {"decode": 0.5, "png": 1.25}},
                             "artifacts": {"iket_summary.txt": self.put_blob(b"iket timeline")}}
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
    assert (tmp_path / "s" / "iket_summary.txt").read_bytes() == b"iket timeline"
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
