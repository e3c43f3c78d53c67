"""The SM clock of a GPU board, through NVML (nvidia-ml-py, an optional dependency).

Issue 17: at 8192^3 the H200's SM clock fell from 1980 to 1680 MHz during one job (power limit),
so a median over the job mixed two regimes. The measurement protocol therefore reads the clock
around every timed round and keeps it with each sample (`kcoral.measure`). Without nvidia-ml-py
(``pip install nvidia-ml-py``; pure Python) there are no readings and every result says so
(``clock_note``): ratios are still taken, but not split by clock regime.

The board's device is found in NVML by its PCI bus id (``cuDeviceGetPCIBusId``), not by index:
CUDA's and NVML's device orders differ unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, and on a host
with several GPUs the wrong index would read another board's clock.
"""

from __future__ import annotations

MISSING = ("nvidia-ml-py is not installed (pip install nvidia-ml-py, or the tirxh[nvml] extra): "
           "no SM clock readings")
# clock event ("throttle") reason bits, nvml.h (nvmlClocksEventReason*)
REASONS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
           0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
           0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
           0x100: "display_clock_setting"}


class NvmlClock:
    """SM clock readings of one device; `note` says why there are none (then `sm()` is None)."""

    def __init__(self, pci_bus_id: "str | None" = None, index: int = 0):
        self.handle = None
        self.note = ""
        try:
            import pynvml  # optional dependency (nvidia-ml-py): only GPU hosts have clocks
        except ImportError:
            self.note = MISSING
            return
        self.nv = pynvml
        try:
            pynvml.nvmlInit()
        except Exception as e:  # pynvml.NVMLError: no driver
            self.note = f"NVML did not start ({type(e).__name__}: {e}): no SM clock readings"
            return
        for bus in ((pci_bus_id, pci_bus_id.encode()) if pci_bus_id else ()):
            try:  # nvidia-ml-py takes str; older pynvml wants bytes
                self.handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus)
                return
            except Exception:
                continue
        try:  # no bus id, or one NVML spells otherwise: the index
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            if pci_bus_id:
                self.note = (f"NVML did not find PCI bus id {pci_bus_id!r}; the clock is read "
                             f"from NVML device {index} (orders assumed equal)")
        except Exception as e:
            self.note = f"NVML could not open the device ({type(e).__name__}: {e})"

    def sm(self) -> "float | None":
        """The current SM clock, MHz."""
        if self.handle is None:
            return None
        try:
            return float(self.nv.nvmlDeviceGetClockInfo(self.handle, self.nv.NVML_CLOCK_SM))
        except Exception:
            return None

    def max_sm(self) -> "float | None":
        """The device's full (maximum boost) SM clock, MHz."""
        if self.handle is None:
            return None
        try:
            return float(self.nv.nvmlDeviceGetMaxClockInfo(self.handle, self.nv.NVML_CLOCK_SM))
        except Exception:
            return None

    def reasons(self) -> "list | None":
        """Why the clock is below its maximum now (NVML's clock event reasons), or None."""
        if self.handle is None:
            return None
        fn = getattr(self.nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            getattr(self.nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        try:
            bits = int(fn(self.handle)) if fn else None
        except Exception:
            return None
        return None if bits is None else [n for b, n in REASONS.items() if bits & b]
