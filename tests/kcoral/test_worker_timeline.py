"""kcoral.worker.Timeline: what a job's result says about where its time went."""

from kcoral.worker import Timeline


def test_events_are_seconds_from_the_start_and_the_timing_loop_collapses(monkeypatch):
    now = [100.0]
    monkeypatch.setattr("kcoral.worker.time.monotonic", lambda: now[0])
    tl = Timeline(100.0)
    for dt, state, msg in [(0.5, "loaded", "module ptx loaded"),
                           (1.0, "correctness", "before timing, seed 1"),
                           (2.0, "timing", "warm-up"),
                           (3.0, "timing", "5 samples, relative noise 3.00%"),
                           (4.0, "timing", "10 samples, relative noise 1.00%"),
                           (5.0, "correctness", "guards: the candidate on perturbed inputs")]:
        now[0] = 100.0 + dt
        tl.add(state, msg)
    assert [e[:2] for e in tl.events] == [[0.5, "loaded"], [1.0, "correctness"],
                                          [2.0, "timing"], [4.0, "timing"], [5.0, "correctness"]]
    assert tl.last() == ("its last progress, at +5.0 s: correctness: guards: the candidate on "
                         "perturbed inputs")
    now[0] = 107.25
    res = tl.onto({"status": "ok"})
    assert res["run_s"] == 7.25 and res["timeline"] == tl.events


def test_a_job_that_reported_nothing_says_so_and_the_list_is_bounded():
    tl = Timeline(0.0)
    assert tl.last() == "no progress reported"
    for i in range(3 * Timeline.MAX):
        tl.add(f"s{i % 2}", "x" * 500)
    assert len(tl.events) == Timeline.MAX and len(tl.events[0][2]) == 200
    assert tl.onto({"run_s": 1.0})["run_s"] == 1.0   # a result's own figure is kept
