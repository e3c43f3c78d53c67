"""The decoder's CTA phase table on a real trace of a barrier-phased kernel: session 30's
profile of zoo ``kda_bwd_local_tc[t8192_h64]`` on an H100 (fixtures/h100_kda_local_head, see
fixtures/README.md: its first 132 CTAs, the first wave, one CTA an SM)."""

import pathlib

import pytest

from tirxh_iket.decode import Span, Timeline, WarpTrace, load
from tirxh_iket.summary import cta_phases, format_summary, summarize

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
PHASES = ["norms", "gate", "pairs", "inverse", "x", "da", "grads", "scan", "dq_dk", "params"]


@pytest.fixture(scope="module")
def kda():
    return load(FIXTURES / "h100_kda_local_head.bin.gz",
                FIXTURES / "h100_kda_local_head.layout.json")


def test_a_warp_idle_in_a_phase_records_the_barrier_wait_in_the_next_range(kda):
    """What the phase table exists for: warps 4-7 do nothing in `gate` (threads 0..127 do),
    so their `gate` spans are short (the wait for `norms`' barrier, ~4.1 us against warps
    0-3's 9-13) and their `pairs` spans ~2-3x warps 0-3's: the wait at the barrier after
    `gate` lies inside their next range, not in a gap (the ranges abut: median gap 0)."""
    by_warp, gaps = {}, []
    for w in kda.warps:
        spans = {s.name: s.dur for s in w.spans}
        by_warp.setdefault(w.warp, []).append(spans)
        tops = [s for s in w.spans if s.depth == 0]
        assert [s.name for s in tops] == PHASES
        gaps += [b.start - a.end for a, b in zip(tops, tops[1:])]
    gaps.sort()
    assert gaps[len(gaps) // 2] == 0 and gaps[-1] < 1100     # ns; the phases last microseconds

    def mean(warp, name):
        return sum(d[name] for d in by_warp[warp]) / len(by_warp[warp])

    idle, busy = (4, 5, 6, 7), (0, 1, 2, 3)
    assert max(mean(w, "gate") for w in idle) < 0.5 * min(mean(w, "gate") for w in busy)
    assert min(mean(w, "pairs") for w in idle) > 1.9 * max(mean(w, "pairs") for w in busy)


def test_the_phase_table_is_each_phases_latest_end_less_the_last(kda):
    s = summarize(kda)
    ph = s["cta_phases"]
    assert (ph["ctas"], ph["warps_per_cta"]) == (132, 8)
    assert [p["name"] for p in ph["phases"]] == PHASES
    walls = {p["name"]: p["median_ns"] for p in ph["phases"]}
    assert (walls["inverse"], walls["grads"], walls["gate"]) == (19456.0, 32512.0, 9216.0)
    assert ph["cta_median_ns"] == 107648.0
    # the walls of one CTA add up to its time; the medians nearly do
    assert sum(walls.values()) == pytest.approx(ph["cta_median_ns"], rel=0.02)
    text = format_summary(s)
    assert "CTA phases (132 CTAs of 8 warps in lockstep;" in text
    assert "    inverse                     19.46 us  18.1%   p90 19.46 us" in text


def _warp(cta, warp, spans):
    w = WarpTrace(cta=cta, warp=warp, sm=cta, hwwarp=warp)
    w.spans = [Span(n, a, b, 0, "k.py:1") for n, a, b in spans]
    return w


def test_walls_on_a_hand_made_trace():
    """Two warps, phases a and b: warp 1 is idle in a (ends it at 10) and waits in its b for
    warp 0's a (ends at 50); the table says a 50, b 30 (warp 1's b ends at 80), not the spans'
    means (a 30, b 50)."""
    tl = Timeline("k", [_warp(0, 0, [("a", 0, 50), ("b", 50, 70)]),
                        _warp(0, 1, [("a", 0, 10), ("b", 10, 80)])], "globaltimer", None)
    ph = cta_phases(tl)
    assert [(p["name"], p["median_ns"]) for p in ph["phases"]] == [("a", 50.0), ("b", 30.0)]
    assert ph["cta_median_ns"] == 80.0


@pytest.mark.parametrize("second", [[("b", 0, 50), ("a", 50, 70)], [("a", 0, 50)]],
                         ids=["another-order", "fewer-ranges"])
def test_no_table_when_the_warps_are_not_in_lockstep(second):
    """Warp-specialized roles or a persistent walk: the warps of a CTA record different
    ranges, so a phase has no wall (the GEMM recording, whose producer and consumers differ,
    keeps its printed summary byte for byte: test_h200_recordings)."""
    tl = Timeline("k", [_warp(0, 0, [("a", 0, 50), ("b", 50, 70)]), _warp(0, 1, second)],
                  "globaltimer", None)
    assert cta_phases(tl) is None
