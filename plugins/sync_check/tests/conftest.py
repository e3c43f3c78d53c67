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
