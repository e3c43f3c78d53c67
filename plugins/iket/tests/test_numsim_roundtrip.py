"""The profiling build run on the CPU by numsim (which models %smid, %warpid, %lanemask_lt,
activemask and a monotonic %globaltimer/%clock64): the buffer it writes must decode into exactly
the events the kernel's control flow implies. This checks the instrumentation's semantics (warp
regions, leader election, sequence numbers, site ids) without a GPU."""

import importlib.util
import pathlib
import types

import numpy as np
import pytest

import tirxh.lang as T
from tirxh_iket.transform import compile_profiling_build
from tirxh_iket.chrome import to_chrome
from tirxh_iket.decode import decode
from tirxh_iket.summary import summarize

numsim = pytest.importorskip("tirxh_numsim", reason="numsim (plugins/numsim) runs the kernel")


@T.kernel(grid=(4, 2), block=(64, 2))
def ws(out: T.gptr[T.u32], n: T.u32):
    w = T.warp_index()  # tid.x >> 5: with a (64, 2) block, hardware warps 0 and 2 have w == 0
    with T.if_(w == 0, uniform=True):  # the "producer" warps loop
        with T.range(n) as k:
            with T.iket.range("load"):
                T.ptx.st.global_.u32(out.at(k), k)
    with T.else_():
        with T.iket.range("mma"):
            T.iket.mark("tick")


@T.kernel(grid=1, block=64)
def divergent(out: T.gptr[T.u32]):
    t = T.tid.x
    with T.if_(t >= 40):  # lanes 8..31 of warp 1 only: the leader is lane 8
        with T.iket.range("tail"):
            T.ptx.st.global_.u32(out.at(t), t)


def _run(kernel, layout_grid, inputs, capacity):
    ck, layout = compile_profiling_build(kernel, "sm_90a", capacity=capacity)
    nbytes = layout.buffer_bytes(layout_grid)
    inputs = dict(inputs, iket_trace=np.zeros(nbytes // 8, np.uint64))
    res = numsim.run(ck, inputs, grid=layout_grid)
    assert res.verdict == "clean", res.diagnostics
    # the profiling build computes what the normal build computes
    plain = numsim.run(kernel, {k: v for k, v in inputs.items() if k != "iket_trace"},
                       grid=layout_grid)
    for name, arr in plain.outputs.items():
        np.testing.assert_array_equal(res.outputs[name], arr)
    return decode(res.outputs["iket_trace"].view(np.uint8), layout), layout


def test_warp_specialized_roundtrip():
    n = 5
    tl, layout = _run(ws, (4, 2, 1), {"out": np.zeros(n, np.uint32), "n": n}, capacity=16)
    assert tl.issues == []
    assert len(tl.warps) == 8 * 4
    by_role = {}
    for w in tl.warps:
        by_role.setdefault(w.role, []).append(w)
    assert sorted(by_role) == ["load", "mma"]
    # the prologue's warp index is the linear one (x + 64 * y) >> 5: rows y = 0 and 1 of
    # threads x < 32 are warps 0 and 2
    assert sorted((w.cta, w.warp) for w in by_role["load"]) == [(c, k) for c in range(8)
                                                                 for k in (0, 2)]
    for w in by_role["load"]:
        assert [s.name for s in w.spans] == ["load"] * n
        assert [e.seq for e in w.events] == list(range(2 * n))
        assert all(s.dur > 0 for s in w.spans)
    for w in by_role["mma"]:
        assert [(e.kind, e.name) for e in w.events] == [("begin", "mma"), ("mark", "tick"),
                                                        ("end", "mma")]
        assert w.hwwarp == w.warp  # numsim's %warpid is the warp's index in its CTA
    s = summarize(tl)
    assert s["roles"]["load"]["ranges"]["load"]["count"] == 16 * n
    assert s["verdict"] == "ok"
    doc = to_chrome(tl)
    assert sum(e["ph"] == "X" for e in doc["traceEvents"]) == 16 * n + 16


def test_overflow_keeps_the_last_record():
    n = 9
    tl, _ = _run(ws, (4, 2, 1), {"out": np.zeros(n, np.uint32), "n": n}, capacity=8)
    prod = [w for w in tl.warps if w.warp in (0, 2)]
    assert prod and all(w.dropped == 2 * n - 8 for w in prod)
    assert any("events lost" in i for i in tl.issues)


def test_divergent_branch_records_once_per_warp():
    tl, _ = _run(divergent, (1, 1, 1), {"out": np.zeros(64, np.uint32)}, capacity=4)
    assert tl.issues == []
    assert [(w.cta, w.warp) for w in tl.warps] == [(0, 1)]  # warp 0 never enters the branch
    assert [s.name for s in tl.warps[0].spans] == ["tail"]


ZOO = pathlib.Path(__file__).resolve().parents[3] / "zoo" / "kernels"
ATTN_CASE = "s384_causal_pairs_lazy8_p3"  # 3 persistent CTAs of 12 warps, causal, 3 KV blocks


@pytest.fixture
def attention(monkeypatch):
    """zoo/kernels/attention.py: the FA3-style kernel of the profiles killed in sessions 7 and 8
    (producer warpgroup with setmaxnreg.dec and one elected thread, two consumer warpgroups with
    setmaxnreg.inc and named barriers), its small case, and its profiling build."""
    monkeypatch.syspath_prepend(str(ZOO))  # it imports attn_schedule beside it
    spec = importlib.util.spec_from_file_location("zoo_attention_iket", ZOO / "attention.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    suite = mod.SUITE
    case = next(c for c in suite.cases if c.name == ATTN_CASE)
    consts, grid = suite.consts(case), tuple(suite.grid(case)) + (1, 1)
    ck, layout = compile_profiling_build(suite.kernel, "sm_90a", consts, capacity=64)
    inputs = suite.make_inputs(case, 1)
    trace = np.zeros(layout.buffer_bytes(grid[:3]) // 8, np.uint64)
    return types.SimpleNamespace(suite=suite, consts=consts, grid=grid[:3], ck=ck, layout=layout,
                                 inputs=inputs, instrumented=dict(inputs, iket_trace=trace))


def test_warp_specialized_attention_runs_instrumented(attention):
    """The records sit inside the producer's single-thread branch and the consumers' barrier
    waits: numsim runs the profiling build to the end (no deadlock), it computes bit for bit what
    the normal build computes, and every warp's ranges pair up."""
    a = attention
    res = numsim.run(a.ck, a.instrumented, consts=a.consts, grid=a.grid,
                     outputs=list(a.suite.outputs))
    assert res.verdict == "clean", res.diagnostics
    plain = numsim.run(a.suite.kernel, a.inputs, consts=a.consts, grid=a.grid,
                       outputs=list(a.suite.outputs))
    for name in a.suite.outputs:
        np.testing.assert_array_equal(res.outputs[name], plain.outputs[name])
    tl = decode(res.outputs["iket_trace"].view(np.uint8), a.layout)
    assert tl.issues == []
    roles = {}
    for w in tl.warps:
        roles.setdefault(w.role, set()).add(w.warp)
    # the producer's one thread (warp 0) and all 8 consumer warps record; warps 1-3 never do
    assert roles == {"wait_empty": {0}, "epilogue+softmax+wait_k+wait_v": set(range(4, 12))}
    consumer = next(w for w in tl.warps if w.warp == 4)
    assert [s.name for s in consumer.spans].count("epilogue") >= 1


def test_warp_specialized_attention_instrumented_is_sync_clean(attention):
    """synccheck and racecheck over the profiling build (~4 s): the trace stores add no race and
    no barrier misuse to the producer/consumer protocol."""
    sync_check = pytest.importorskip("tirxh_sync_check", reason="plugins/sync_check")
    sc, rc = sync_check.check_kernel(attention.ck, attention.instrumented,
                                     consts=attention.consts, grid=attention.grid)
    assert (sc.verdict, rc.verdict) == ("clean", "clean"), (sc.findings, rc.findings)
