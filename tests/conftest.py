"""Project-wide test configuration.

The ``gpu`` marker lives in `tirxh.testing` (loaded with ``-p tirxh.testing`` from pyproject), so
the core, KCoral and every plugin distribution skip GPU tests the same way. ``tirxh`` is a
temporary project with ways to run the CLI (`tests/core/pytester.py`), for the core's and the
built-in plugins' tests.
"""

import pytest

from tests.core.pytester import Tirxh
from tirxh.testing import share_zoo_index


@pytest.fixture
def tirxh(tmp_path, monkeypatch, zoo_index) -> Tirxh:
    t = Tirxh(tmp_path, monkeypatch)
    share_zoo_index(t.cache, zoo_index)  # tirxh.testing: the zoo is traced once, not per test
    return t
