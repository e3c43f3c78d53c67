"""Chrome/Perfetto JSON, the text summary, the PNG, and the fixtures in tests/fixtures."""

import json
import pathlib
import time

import pytest

import tracegen
from tirxh_iket.chrome import to_chrome, write_chrome
from tirxh_iket.decode import decode, load
from tirxh_iket.layout import Site, TraceLayout
from tirxh_iket.png import bars, write_png
from tirxh_iket.summary import format_summary, summarize

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


@pytest.fixture
def gemm_timeline(gemm_layout):
    sched = tracegen.gemm_schedule(nsms=4, tiles_per_sm=3, k_iters=4, straggler_sm=3)
    return decode(tracegen.write(gemm_layout, 4, sched), gemm_layout)


def _check_chrome(doc):
    evs = doc["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in evs
             if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in evs
               if e["ph"] == "M" and e["name"] == "thread_name"}
    spans = [e for e in evs if e["ph"] == "X"]
    assert spans and all(e["dur"] >= 0 for e in spans)
    # every span sits on a named track of a named SM, and spans on one track do not overlap
    # unless they nest
    by_track = {}
    for e in spans:
        assert e["pid"] in procs and (e["pid"], e["tid"]) in threads
        by_track.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for iv in by_track.values():
        iv.sort()
        for (s0, e0), (s1, e1) in zip(iv, iv[1:]):
            assert s1 >= e0 - 1e-6 or e1 <= e0 + 1e-6
    return procs, threads, spans


def test_chrome_trace_tracks(gemm_timeline, tmp_path):
    path = tmp_path / "t.json"
    write_chrome(gemm_timeline, path)
    doc = json.loads(path.read_text())
    procs, threads, spans = _check_chrome(doc)
    assert sorted(procs.values()) == ["SM 0", "SM 1", "SM 2", "SM 3"]
    # two consumer warps of one role overlap in time on an SM: two lanes of that role
    assert set(threads.values()) == {"load", "epilogue+mma #1", "epilogue+mma #2"}
    assert len(spans) == 4 * (12 + 2 * (12 + 3))
    assert doc["otherData"]["kernel"] == "gemm_ws"
    marks = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    assert len(marks) == 4 * 2 * 3 and marks[0]["args"]["where"].endswith(":66")


def test_summary_numbers(gemm_timeline):
    s = summarize(gemm_timeline)
    prod, cons = s["roles"]["load"], s["roles"]["epilogue+mma"]
    assert prod["warps"] == 4 and cons["warps"] == 8
    assert prod["ranges"]["load"]["count"] == 48
    assert prod["ranges"]["load"]["mean_ns"] == pytest.approx(900, abs=1)
    assert 0 < prod["busy_fraction"] < 1 and prod["idle_ns"] > 0
    # the longest bubble is the producer waiting through the straggling epilogue on SM 3
    b = s["bubbles"][0]
    assert b["role"] == "load" and b["sm"] == 3 and b["gap_ns"] > 4000
    bal = s["balance"]
    assert bal["sms"] == 4 and bal["stragglers"][0]["sm"] == 3
    assert bal["tail_ns"] > 10_000  # 3 tiles x 4 us of extra epilogue on one SM
    assert s["verdict"] == "ok"
    text = format_summary(s)
    assert "longest bubbles:" in text and "load balance:" in text
    assert "epilogue+mma" in text
    json.dumps(s)  # serializable


def test_summary_flags_incomplete(gemm_layout):
    sched = {(0, 0): (0, 0, [("begin", "load", 0.0)])}
    s = summarize(decode(tracegen.write(gemm_layout, 1, sched), gemm_layout))
    assert s["verdict"] == "incomplete" and "never ended" in format_summary(s)


def test_png_written(gemm_timeline, tmp_path):
    pytest.importorskip("matplotlib", reason="pip install matplotlib for the PNG timeline")
    path = tmp_path / "t.png"
    info = write_png(gemm_timeline, path, max_sms=2)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    assert info == {"rows": 6, "sms_shown": 2, "sms_total": 4}


@pytest.fixture
def attention_layout():
    """The sites of zoo/kernels/attention.py's profiling build (4 ranges of the consumers, one
    of the producer), 12 warps per CTA, a full capacity of 1024 records per warp."""
    f = "/zoo/kernels/attention.py"
    sites = [Site(kind, name, f, line) for name, line in
             (("wait_empty", 207), ("wait_k", 378), ("wait_v", 378), ("softmax", 406),
              ("epilogue", 449)) for kind in ("begin", "end")]
    return TraceLayout(kernel="attention_fwd", capacity=1024, warps_per_cta=12,
                       block=(384, 1, 1), sites=sites)


def test_png_bars_are_the_spans_of_the_shown_sms(gemm_timeline):
    b = bars(gemm_timeline, max_sms=2)
    shown = [w for w in gemm_timeline.warps if w.sm in (0, 1)]
    assert len(b["x0"]) == sum(len(w.spans) for w in shown)
    assert len(b["mark_x"]) == sum(len(w.marks) for w in shown)
    assert b["labels"] == ["SM0 epilogue+mma #1", "SM0 epilogue+mma #2", "SM0 load",
                           "SM1 epilogue+mma #1", "SM1 epilogue+mma #2", "SM1 load"]
    assert b["names"] == ["epilogue", "load", "mma"]
    load_rows = b["y"][b["name"] == b["names"].index("load")]
    assert sorted(set(load_rows)) == [2.0, 5.0]  # the producers' lanes only
    first = min((s for w in shown for s in w.spans), key=lambda s: s.start)
    assert b["x0"].min() == pytest.approx(first.start / 1e3) and (b["width"] > 0).all()
    assert set(b["height"]) == {0.8}  # no nested ranges in this schedule


def test_png_of_a_full_attention_trace_is_one_collection(attention_layout, tmp_path,
                                                         monkeypatch):
    """The first 12 SMs of a full --iket-capacity 1024 attention trace (40,000 ranges, the
    shape of the profile killed in sessions 7 and 8; 12 CTAs are what the PNG shows of 132):
    one artist for all bars. One ``broken_barh`` per range took 340 s here; now ~2 s. The
    time bound is 20x that, so only the old behaviour fails it."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from matplotlib.axes import Axes
    sched = tracegen.attention_schedule(nctas=12, tiles=2048 * 12 // 132)
    tl = decode(tracegen.write(attention_layout, 12, sched), attention_layout)
    assert not tl.issues and sum(len(w.spans) for w in tl.warps) > 35_000
    calls = {"add_collection": 0, "broken_barh": 0}
    for name in calls:
        orig = getattr(Axes, name)

        def counted(self, *a, _orig=orig, _name=name, **k):
            calls[_name] += 1
            return _orig(self, *a, **k)
        monkeypatch.setattr(Axes, name, counted)
    t = time.perf_counter()
    info = write_png(tl, tmp_path / "a.png")
    assert time.perf_counter() - t < 40
    assert calls == {"add_collection": 1, "broken_barh": 0}
    assert info == {"rows": 12 * 9, "sms_shown": 12, "sms_total": 12}


def fixture_layout(buf: pathlib.Path) -> pathlib.Path:
    """NAME.bin or NAME.bin.gz -> NAME.layout.json."""
    return buf.with_name(buf.name.split(".bin")[0] + ".layout.json")


@pytest.mark.parametrize("buf", sorted([*FIXTURES.glob("*.bin"), *FIXTURES.glob("*.bin.gz")]),
                         ids=lambda p: p.name)
def test_fixture_traces(buf, tmp_path):
    """Every recorded (or hand-made) trace in fixtures/ decodes cleanly into all outputs; a
    `_lossy` one (recorded with too small a capacity) has no issue but the lost events' lines,
    and says incomplete."""
    tl = load(buf, fixture_layout(buf))
    lossy = "_lossy" in buf.name
    assert tl.warps and (not tl.issues if not lossy else
                         tl.issues[0].startswith(f"{tl.dropped} events lost in ")), tl.issues[:3]
    _check_chrome(to_chrome(tl))
    s = summarize(tl)
    assert s["verdict"] == ("incomplete" if lossy else "ok") and s["duration_ns"] > 0
    assert format_summary(s).startswith("iket timeline of ")
    pytest.importorskip("matplotlib")
    write_png(tl, tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 0


def test_render_command(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from tirxh_iket.__main__ import main
    buf = FIXTURES / "gemm_ws_synthetic.bin"
    rc = main(["render", str(buf), str(buf.with_suffix(".layout.json")), "--out", str(tmp_path)])
    assert rc == 0
    assert "iket timeline of gemm_ws_synthetic" in capsys.readouterr().out
    assert (tmp_path / "iket_timeline.png").stat().st_size > 0
    assert main(["render", str(buf), str(tmp_path / "missing.json")]) == 2
