"""Project-wide test configuration: the ``gpu`` marker skips cleanly without a usable GPU."""

import functools

import pytest


@functools.lru_cache(maxsize=None)
def gpu_unavailable_reason() -> "str | None":
    """None when a CUDA driver and at least one device answer, else why not."""
    try:
        from cuda.bindings import driver
    except ImportError as e:
        return f"cuda-bindings is not importable ({e}); pip install cuda-bindings"
    try:
        err, = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return f"cuInit(0) failed with {err.name}: no NVIDIA driver or GPU on this machine"
        err, n = driver.cuDeviceGetCount()
        if err != driver.CUresult.CUDA_SUCCESS or n == 0:
            return "the CUDA driver reports no device"
    except Exception as e:  # the driver library itself is missing
        return f"the CUDA driver could not be loaded ({type(e).__name__}: {e})"
    return None


def pytest_collection_modifyitems(config, items):
    reason = None
    for item in items:
        if item.get_closest_marker("gpu") is None:
            continue
        if reason is None:
            reason = gpu_unavailable_reason() or ""
        if reason:
            item.add_marker(pytest.mark.skip(reason=f"needs a GPU: {reason}"))
