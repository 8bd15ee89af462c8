"""Fixtures of the A/B tests (helpers live in ab_helpers.py)."""

from __future__ import annotations

import pytest
from ab_helpers import run_cli  # type: ignore[import-not-found]


@pytest.fixture
def cli():
    """``cli(*args)``: the real ``expo-prof`` in a subprocess."""
    return run_cli
