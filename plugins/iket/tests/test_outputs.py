"""Chrome/Perfetto JSON, the text summary, the PNG, and the fixtures in tests/fixtures."""

import json
import pathlib

import pytest

import tracegen
from tirxh_iket.chrome import to_chrome, write_chrome
from tirxh_iket.decode import decode, load
from tirxh_iket.png import write_png
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


def fixture_layout(buf: pathlib.Path) -> pathlib.Path:
    """NAME.bin or NAME.bin.gz -> NAME.layout.json."""
    return buf.with_name(buf.name.split(".bin")[0] + ".layout.json")


@pytest.mark.parametrize("buf", sorted([*FIXTURES.glob("*.bin"), *FIXTURES.glob("*.bin.gz")]),
                         ids=lambda p: p.name)
def test_fixture_traces(buf, tmp_path):
    """Every recorded (or hand-made) trace in fixtures/ decodes cleanly into all outputs."""
    tl = load(buf, fixture_layout(buf))
    assert tl.warps and not tl.issues, tl.issues[:3]
    _check_chrome(to_chrome(tl))
    s = summarize(tl)
    assert s["verdict"] == "ok" and s["duration_ns"] > 0
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
