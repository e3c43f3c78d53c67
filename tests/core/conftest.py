"""Fixtures for the core's tests: ``tirxh`` is a temporary project with ways to run the CLI."""

import pytest

from .pytester import Tirxh


@pytest.fixture
def tirxh(tmp_path, monkeypatch) -> Tirxh:
    return Tirxh(tmp_path, monkeypatch)
