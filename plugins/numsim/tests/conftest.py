"""numsim test configuration: the GPU marker skips cleanly without a GPU."""

import pytest

from tirxh_numsim.testing import gpu_available


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with the CUDA driver (cuInit failed); "
                            "run on a GPU machine to compare numsim with the hardware")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
