import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE.parent))  # tirxh_ncu_profile without installing the distribution
sys.path.insert(0, str(HERE))  # ncu_fakes


@pytest.fixture
def fixtures():
    return HERE / "fixtures"


@pytest.fixture
def read(fixtures):
    return lambda name: (fixtures / name).read_text()


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
