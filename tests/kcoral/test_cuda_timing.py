"""The cuda board's timed samples against a driver double (no GPU): where the flush, the events
and the launches fall in the stream for a paired round (`timed_batch`: a flush before every
function, an event pair around it) and for a plan's launch split (`timed_split`: one flush, an
event between every two launches), and which elapsed times come back."""

import pytest

from kcoral.boards.cuda import CudaDevice


class _Driver:
    """Stream-ordered calls recorded in `log`; an event's time is when it was recorded, in
    steps of 1 ms (so a launch between two events takes 1 ms per stream operation)."""

    class CUevent_flags:
        CU_EVENT_DEFAULT = 0

    def __init__(self):
        self.log: list = []
        self.clock = 0.0
        self.when: dict = {}
        self._n = 0

    def tick(self, what):
        self.clock += 1.0
        self.log.append(what)

    def cuEventCreate(self, flags):
        self._n += 1
        return 0, f"e{self._n}"

    def cuEventRecord(self, ev, stream):
        self.when[ev] = self.clock
        self.log.append(("record", ev))
        return (0,)

    def cuEventSynchronize(self, ev):
        self.log.append(("sync", ev))
        return (0,)

    def cuEventElapsedTime(self, a, b):
        return 0, self.when[b] - self.when[a]


class _Flush:
    def __init__(self, drv):
        self.drv = drv

    def sweep(self, mode):
        self.drv.tick(("flush", mode))


def _board():
    dev = object.__new__(CudaDevice)
    dev.cu = _Driver()
    dev.stream = "stream"
    dev._events = []
    dev._flush = _Flush(dev.cu)
    dev._launch_gate, dev._gate_error = None, "no gate in the double"
    return dev


def _launch(dev, name, steps=1):
    def run():
        for _ in range(steps):
            dev.cu.tick(("launch", name))
    return run


def test_a_round_flushes_before_each_function_between_its_own_events():
    dev = _board()
    ms = dev.timed_batch([_launch(dev, "a"), _launch(dev, "b", 3)], "read")
    assert ms == [1.0, 3.0]
    assert [x for x in dev.cu.log if x[0] != "record"] == [
        ("flush", "read"), ("launch", "a"), ("flush", "read"), ("launch", "b"),
        ("launch", "b"), ("launch", "b"), ("sync", "e4")]
    assert dev.last_gate == "off"


def test_no_flush_is_no_flush():
    dev = _board()
    assert dev.timed_batch([_launch(dev, "a")], "") == [1.0]
    assert not any(x[0] == "flush" for x in dev.cu.log)


def test_a_split_flushes_once_and_puts_an_event_between_every_two_launches():
    dev = _board()
    ms = dev.timed_split([_launch(dev, "fwd", 2), _launch(dev, "prep", 5),
                          _launch(dev, "chain")], "write")
    assert ms == [2.0, 5.0, 1.0]
    assert dev.cu.log[:3] == [("flush", "write"), ("record", "e1"), ("launch", "fwd")]
    assert [x[0] for x in dev.cu.log].count("flush") == 1
    records = [x[1] for x in dev.cu.log if x[0] == "record"]
    assert records == ["e1", "e2", "e3", "e4"] and dev.cu.log[-1] == ("sync", "e4")
    assert dev.last_gate == "unavailable: no gate in the double"   # it asked for the gate


def test_an_unknown_flush_is_refused_before_anything_is_enqueued():
    dev = _board()
    with pytest.raises(ValueError, match="'evict' is not one of"):
        dev.timed_split([_launch(dev, "a")], "evict")
    assert dev.cu.log == []


def test_the_profiler_range_is_cuProfilerStart_and_Stop():
    """`profiler_range` brackets what ncu ``--profile-from-start off`` captures (a baseline's
    call under ``ncu --baseline``): cuProfilerStart, then cuProfilerStop."""
    dev = _board()
    dev.cu.cuProfilerStart = lambda: dev.cu.tick("start") or (0,)
    dev.cu.cuProfilerStop = lambda: dev.cu.tick("stop") or (0,)
    dev.profiler_range(True)
    _launch(dev, "baseline")()
    dev.profiler_range(False)
    assert dev.cu.log == ["start", ("launch", "baseline"), "stop"]
