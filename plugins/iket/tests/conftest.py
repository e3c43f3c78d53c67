import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # tracegen
sys.path.insert(0, os.path.dirname(HERE))  # tirxh_iket without installing the distribution


@pytest.fixture
def gemm_layout():
    from tirxh_iket.layout import Site, TraceLayout
    f = "/zoo/kernels/gemm_ws.py"
    sites = [Site("begin", "load", f, 40), Site("end", "load", f, 40),
             Site("begin", "mma", f, 52), Site("end", "mma", f, 52),
             Site("begin", "epilogue", f, 60), Site("end", "epilogue", f, 60),
             Site("mark", "tile_done", f, 66)]
    return TraceLayout(kernel="gemm_ws", capacity=64, warps_per_cta=12, block=(384, 1, 1),
                       sites=sites)


def _gpu_reason():
    try:
        from cuda.bindings import driver
        err, = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return f"cuInit(0) failed with {err.name}: no NVIDIA driver or GPU here"
        err, n = driver.cuDeviceGetCount()
        return None if err == driver.CUresult.CUDA_SUCCESS and n else "no CUDA device"
    except Exception as e:  # bindings or driver library missing
        return f"the CUDA driver could not be loaded ({type(e).__name__}: {e})"


def pytest_collection_modifyitems(config, items):
    reason = None
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            reason = reason or _gpu_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"gpu test: {reason}; run on a machine "
                                                        "with an NVIDIA GPU and driver"))


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU with the CUDA driver")
