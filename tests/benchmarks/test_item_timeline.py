"""benchmarks/item_timeline.py: the per-warp figures of a static item walk, on a timeline built
by hand (exact expected values) and from the command line."""

import importlib.util
from pathlib import Path

import pytest

decode = pytest.importorskip("tirxh_iket.decode")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "item_timeline.py"
spec = importlib.util.spec_from_file_location("item_timeline", SCRIPT)
IT = importlib.util.module_from_spec(spec)
spec.loader.exec_module(IT)


def _warp(sm, warp, spans):
    """A warp whose events are its spans' begins and ends (times in us)."""
    w = decode.WarpTrace(cta=warp, warp=0, sm=sm, hwwarp=warp)
    seq = 0
    for name, a, b, depth in spans:
        w.spans.append(decode.Span(name, a * 1e3, b * 1e3, depth, "k.py:1"))
        for t, kind in ((a, "begin"), (b, "end")):
            w.events.append(decode.Event(t * 1e3, kind, name, "k.py:1", seq))
            seq += 1
    w.events.sort(key=lambda e: e.t)
    return w


def _timeline():
    # warp 0 (SM 0): two rows in 0..10 us, waiting 1 + 1 us, row ends 1 us each
    # warp 1 (SM 0): one row in 0..4 us, waiting 2 us (a nested wait inside the row end is
    #   not waiting for data at depth 0: it does not count)
    # warp 2 (SM 1): two rows in 0..16 us, waiting 4 us; a producer warp with no row at all
    w0 = _warp(0, 0, [("wait", 0, 1, 0), ("row_end", 4, 5, 0), ("wait", 5, 6, 0),
                      ("row_end", 9, 10, 0)])
    w1 = _warp(0, 1, [("wait", 0, 2, 0), ("row_end", 3, 4, 0), ("wait", 3.5, 3.8, 1)])
    w2 = _warp(1, 2, [("wait", 0, 4, 0), ("row_end", 7, 8, 0), ("row_end", 15, 16, 0)])
    prod = _warp(1, 3, [("wait_done", 0, 20, 0)])
    return decode.Timeline("k", [w0, w1, w2, prod], "clock", 1.98)


def test_the_figures_of_a_hand_built_walk():
    a = IT.analyze(_timeline(), "row_end")
    assert (a["warps"], a["sms"], a["items"], a["items_per_warp"]) == (3, 2, 5, [1, 2])
    assert a["end_us"] == {"min": 4.0, "median": 10.0, "max": 16.0}
    assert a["sm_end_us"] == {"median": 13.0, "max": 16.0, "tail": 3.0}
    assert a["median_end_by_items"] == {1: 4.0, 2: 13.0}
    assert a["wait_fraction"]["median"] == pytest.approx(0.25)   # 2/10, 2/4, 4/16
    assert a["item_end_us"] == pytest.approx(1.0)
    assert a["per_item_us"]["median"] == pytest.approx(5.0)      # 5, 4, 8
    # 5 items at rates 2/10 + 1/4 + 2/16 = 0.575 an us: 8.70 us, all warps started at 0
    assert a["dynamic_estimate_us"] == pytest.approx(5 / 0.575)
    assert a["slowest"][0]["warp"] == 0 and a["slowest"][0]["sm"] == 1
    assert a["events_lost"] is None
    text = IT.format_report(a)
    assert "tail 3.0 us" in text and "dynamic estimate 8.7 us" in text


def test_an_item_range_no_warp_recorded_is_named_with_those_seen():
    with pytest.raises(ValueError, match=r"'head'.*'row_end', 'wait', 'wait_done'"):
        IT.analyze(_timeline(), "head")


def test_the_command_line_says_when_no_trace_is_there(tmp_path, capsys):
    assert IT.main([str(tmp_path)]) == 2
    assert "no iket_trace.bin" in capsys.readouterr().err
