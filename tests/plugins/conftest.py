"""Fixtures for the built-in plugins' tests: the core's pytester-style `tirxh` project."""

import pytest

from ..core.pytester import Tirxh


@pytest.fixture
def tirxh(tmp_path, monkeypatch) -> Tirxh:
    return Tirxh(tmp_path, monkeypatch)
