"""Fixtures of the reader tests (the real files come from tests/conftest.py's ``realtraces``)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def rt(realtraces: Path) -> Path:
    """``../shared/realtraces`` (fails under CI=true when missing)."""
    return realtraces
