"""Test support for tirxh and its plugins: the ``gpu`` marker (a pytest plugin), the
`zoo_index` fixture for tests that run tirxh with a private cache, and `check_plugin` for a
plugin's own tests.

Loaded for the project's own suite with ``-p tirxh.testing`` (pyproject ``addopts``); a plugin
distribution's tests may load it the same way. Tests marked ``@pytest.mark.gpu`` are skipped,
with the reason, when no CUDA driver and device answer; `gpu_unavailable_reason()` is the same
check for code that decides at run time.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from tirxh.core.cache import default_cache_dir
from tirxh.core.pluginmanager import TirxhPluginManager
from tirxh.kb.zooindex import INDEX_DIR


@functools.lru_cache(maxsize=None)
def gpu_unavailable_reason() -> "str | None":
    """None when a CUDA driver and at least one device answer, else why not."""
    try:
        from cuda.bindings import driver  # optional dependency: a test run needs no GPU stack
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


def check_plugin(plugin, name: str) -> TirxhPluginManager:
    """Register `plugin` (a module or object) in a fresh plugin manager with tirxh's hook specs
    and run ``check_pending``: a misspelled hook or a bad signature raises
    `PluginValidationError`, as it would at the start of a ``tirxh`` run. Returns the manager
    (``pm.hook.tirxh_...`` to call the plugin's hooks)."""
    pm = TirxhPluginManager()
    pm.register(plugin, name=name)
    pm.check_pending()
    return pm


@pytest.fixture(scope="session")
def zoo_index():
    """The user's own zoo instruction index (`tirxh.kb.zooindex`), for tests that give tirxh a
    private artifact cache: `share_zoo_index` links it into theirs. Its entries are keyed by
    content, so sharing them between test projects, xdist workers and runs is safe, and the
    zoo, minutes of tracing, is traced once rather than by each such test (a lock keeps two
    workers from tracing one kernel twice)."""
    shared = default_cache_dir() / INDEX_DIR
    shared.mkdir(parents=True, exist_ok=True)
    return shared


def share_zoo_index(cache_dir: Path, index: Path) -> None:
    """Make the private cache `cache_dir` use the shared `index` (the `zoo_index` fixture)."""
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    (cache_dir / INDEX_DIR).symlink_to(index, target_is_directory=True)


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU with the CUDA driver "
                                       "(skipped otherwise, with the reason)")


def pytest_collection_modifyitems(config, items):
    gpu_items = [i for i in items if i.get_closest_marker("gpu") is not None]
    reason = gpu_unavailable_reason() if gpu_items else None
    for item in gpu_items if reason else ():
        item.add_marker(pytest.mark.skip(reason=f"needs a GPU: {reason}; run on a machine with "
                                                "an NVIDIA GPU and driver"))
