"""SM clock readings through NVML (kcoral/clocks.py) against a stand-in pynvml module: the
device found by PCI bus id, the fallbacks, and a result that says why there are no readings."""

import sys
import types

import pytest

from kcoral.clocks import MISSING, NvmlClock


class NVMLError(Exception):
    pass


def fake_pynvml(buses=("00000000:3B:00.0",), init_error=None, sm=1980, reasons=0x4 | 0x20):
    m = types.ModuleType("pynvml")
    m.NVML_CLOCK_SM = 1
    m.opened = []

    def init():
        if init_error:
            raise NVMLError(init_error)
    m.nvmlInit = init

    def by_bus(bus):
        if bus not in buses:
            raise NVMLError("NVML_ERROR_NOT_FOUND")
        m.opened.append(("bus", bus))
        return f"h:{bus}"
    m.nvmlDeviceGetHandleByPciBusId = by_bus

    def by_index(i):
        m.opened.append(("index", i))
        return f"h:{i}"
    m.nvmlDeviceGetHandleByIndex = by_index
    m.nvmlDeviceGetClockInfo = lambda h, kind: sm
    m.nvmlDeviceGetMaxClockInfo = lambda h, kind: 1980
    m.nvmlDeviceGetCurrentClocksEventReasons = lambda h: reasons
    return m


def test_the_device_is_found_by_pci_bus_id(monkeypatch):
    m = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", m)
    c = NvmlClock("00000000:3B:00.0", index=1)
    assert m.opened == [("bus", "00000000:3B:00.0")] and c.note == ""
    assert c.sm() == 1980.0 and c.max_sm() == 1980.0
    assert c.reasons() == ["sw_power_cap", "sw_thermal_slowdown"]


def test_an_older_pynvml_gets_bytes(monkeypatch):
    m = fake_pynvml(buses=(b"0000:3B:00.0",))
    monkeypatch.setitem(sys.modules, "pynvml", m)
    NvmlClock("0000:3B:00.0")
    assert m.opened == [("bus", b"0000:3B:00.0")]


def test_an_unknown_bus_id_falls_back_on_the_index_and_says_so(monkeypatch):
    m = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", m)
    c = NvmlClock("0000:99:00.0", index=1)
    assert m.opened == [("index", 1)] and c.sm() == 1980.0
    assert "did not find PCI bus id '0000:99:00.0'" in c.note


@pytest.mark.parametrize("how,note", [("missing", MISSING),
                                      ("no driver", "NVML did not start (NVMLError: no driver)")])
def test_without_nvml_there_are_no_readings_and_the_note_says_why(monkeypatch, how, note):
    if how == "missing":
        monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    else:
        monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init_error="no driver"))
    c = NvmlClock("00000000:3B:00.0")
    assert c.sm() is None and c.max_sm() is None and c.reasons() is None
    assert c.note.startswith(note)
