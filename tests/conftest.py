"""Project-wide test configuration.

The ``gpu`` marker lives in `tirxh.testing` (loaded with ``-p tirxh.testing`` from pyproject), so
the core, KCoral and every plugin distribution skip GPU tests the same way. ``tirxh`` is a
temporary project with ways to run the CLI (`tests/core/pytester.py`), for the core's and the
built-in plugins' tests.
"""

import pytest

from tests.core.pytester import Tirxh
from tirxh.core.cache import default_cache_dir


@pytest.fixture(scope="session")
def zoo_instruction_cache():
    """The user's own cache of traced zoo instruction uses (`tirxh.kb.zoo`), shared by every
    test project and xdist worker, and kept across runs: its entries are keyed by the zoo's
    sources, so sharing them is safe, and tracing the zoo costs ~11 s each time it is done."""
    shared = default_cache_dir() / "zoo-instructions"
    shared.mkdir(parents=True, exist_ok=True)
    return shared


@pytest.fixture
def tirxh(tmp_path, monkeypatch, zoo_instruction_cache) -> Tirxh:
    t = Tirxh(tmp_path, monkeypatch)
    t.cache.mkdir(parents=True, exist_ok=True)
    (t.cache / "zoo-instructions").symlink_to(zoo_instruction_cache, target_is_directory=True)
    return t
