"""Fixtures for sync_check's tests (helpers live in `sync_check_testutil`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from sync_check_testutil import TraceBuilder  # noqa: E402


@pytest.fixture
def tb():
    return TraceBuilder


def _gpu_reason() -> "str | None":
    try:
        from cuda.bindings import driver
        if int(driver.cuInit(0)[0]) != 0:
            return "cuInit(0) failed: no NVIDIA driver or GPU on this machine"
        err, n = driver.cuDeviceGetCount()
        if int(err) != 0 or n == 0:
            return "the CUDA driver reports no device"
    except Exception as e:  # the driver library itself is missing
        return f"the CUDA driver could not be loaded ({type(e).__name__})"
    return None


def pytest_collection_modifyitems(config, items):
    gpu_items = [i for i in items if "gpu" in i.keywords and "sync_check" in str(i.fspath)]
    if not gpu_items:
        return
    reason = _gpu_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"needs an NVIDIA GPU ({reason}); run on a GPU machine")
    for item in gpu_items:
        item.add_marker(skip)
